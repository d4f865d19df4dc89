"""``sage-env report``: what the page is built from (run folders, round records, the probe's
item scores) and that it is one self-contained file. The browser tests are in
``test_run_report_browser.py``."""

import json
from pathlib import Path

import pytest

import sage_env
from learners.cli import main
from learners.policy import Completion, SamplingConfig
from learners.reports.run_data import load_run, roc_curve
from learners.reports.run_report import write_report
from learners.rollout import RolloutDriver
from learners.training.metrics import round_records, write_transcripts
from sage_env.diagnostics.critic_probe import auc
from sage_env.interactive.play import PLAYERS

ROOT = Path(__file__).resolve().parents[3]


def _data(html: str) -> dict:
    start = html.index('<script type="application/json" id="report-data">') + len(
        '<script type="application/json" id="report-data">'
    )
    return json.loads(html[start : html.index("</script>", start)])


class ScriptedPolicy:
    """Plays every env with ``sage-env play``'s oracle, the critic alternating pass / fail."""

    def __init__(self, envs):
        self.envs, self.reviews = envs, 0

    def generate(self, observations, sampling, **kw):
        out = []
        for obs in observations:
            env = next(e for e in self.envs if e.agents and e.observe(e.agent_selection) == obs)
            agent = env.agent_selection
            info = env.infos[agent]
            text = PLAYERS["oracle"](agent, obs, info, env)
            if info["phase"] == "review_question":
                self.reviews += 1
                if self.reviews % 2 == 0:
                    text = "<score>2</score> unclear."
            prefix = obs.get("prefix", "")
            text = text[len(prefix) :] if text.startswith(prefix) else text
            out.append(Completion(text=text, prompt_ids=[1], completion_ids=[2, 3], prefix=prefix))
        return out


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
    """A run folder whose rounds were played by the real environment (scripted players)."""
    out = tmp_path_factory.mktemp("scripted") / "run"
    out.mkdir()
    seeds = [t for t in sage_env.load_seeds() if t.domain == "math"][:20]
    cfg = sage_env.EnvConfig(solver_samples=2, domains=("math",))
    pool = sage_env.env(cfg, seeds=seeds).unwrapped.pool  # a pool the envs share
    envs = [sage_env.env(cfg, render_mode="ansi", seeds=seeds, pool=pool) for _ in range(2)]
    driver = RolloutDriver(envs, ScriptedPolicy(envs), SamplingConfig(max_new_tokens=8))
    results = []
    try:
        for step in (1, 2):
            result = driver.collect([step * 10, step * 10 + 1])
            write_transcripts(out, step, result, n=1)
            results.append(result)
    finally:
        for e in envs:
            e.close()
    pool.save(out / "pool.jsonl")
    rows = [{"step": 1, "pool/size": float(len(pool))}, {"step": 2, "pool/size": float(len(pool))}]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out, results, pool


def test_round_records_hold_every_action_with_its_task_and_reward(scripted_run):
    out, results, _ = scripted_run
    lines = (out / "transcripts" / "step_000001.jsonl").read_text().splitlines()
    assert len(lines) == 2  # one line per round, every round (the text file holds n=1)
    assert (out / "transcripts" / "step_000001.txt").read_text().count("######## step") == 1
    record = json.loads(lines[0])
    assert record == json.loads(json.dumps(round_records(1, results[0])[0]))
    first = record["actions"][0]
    assert first["phase"] == "challenge" and first["task_id"] in {
        t.task_id for t in sage_env.load_seeds()
    }
    assert first["observation"].startswith("Reference problem")
    assert first["details"]["terms"]["q"] == pytest.approx(first["details"]["terms"]["q"])
    rewards = [a["reward"] for a in record["actions"]]
    assert rewards == [t.reward for t in results[0].transitions if t.env_index == 0]
    solves = [a for a in record["actions"] if a["phase"] == "solve"]
    assert len(solves) == 2 and "observation" in solves[0] and "observation" not in solves[1]


def test_proposals_of_a_real_run_carry_parent_outcome_critic_score_and_probes(scripted_run):
    out, _, pool = scripted_run
    run = load_run(out)
    tasks = {t["id"]: t for t in run["tasks"]}
    assert len(run["tasks"]) == 4  # 2 steps x 2 rounds, one proposal each
    generated = [t for t in pool.tasks if t.source == "generated"]
    assert generated, "the oracle's proposals pass the gate every other review"
    for task in generated:
        row = tasks[task.task_id]
        assert row["accepted"] and row["in_pool"] and row["outcome"] == "accepted"
        assert row["parent"] == task.parent_id and row["parent"] in run["parents"]
        assert row["q"] == pytest.approx(task.meta["q"])
        assert row["probe"] == task.meta["probe_scores"] and row["solved"] is True
        assert row["d"] == pytest.approx(task.meta["d"])
        assert row["transcript"] is True
    outcomes = sorted(t["outcome"] for t in run["tasks"])
    # step 2's oracle proposals repeat step 1's accepted one: the pool turns them away
    assert outcomes == ["accepted", "duplicate", "duplicate", "gate"]
    (gated,) = [t for t in run["tasks"] if t["outcome"] == "gate"]
    assert gated["q"] == pytest.approx(1 / 9) and "< alpha" in gated["reason"]
    assert gated["probe"] == [] and gated["solved"] is None and gated["id"].startswith("gen/")
    for dup in (t for t in run["tasks"] if t["outcome"] == "duplicate"):
        assert dup["reason"] == f"exact duplicate of {generated[0].task_id}" and dup["step"] == 2
    assert [(r["step"], r["round"]) for r in run["rounds"]] == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_roc_curve_area_is_the_probe_auc():
    good, bad = [0.9, 0.8, 0.8, 0.3], [0.8, 0.2, 0.1]
    fpr, tpr = roc_curve(good, bad)
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)
    area = sum((fpr[i] - fpr[i - 1]) * (tpr[i] + tpr[i - 1]) / 2 for i in range(1, len(fpr)))
    assert area == pytest.approx(auc(good, bad))
    assert roc_curve([], bad) == ([], [])


def test_the_page_is_one_file_with_plotly_and_the_data_inline(tmp_path):
    from benchmarks.perf.report_bench import KNOWN_WORD, make_synthetic_run

    made = make_synthetic_run(tmp_path / "run", steps=3, rounds=4)
    html = write_report([tmp_path / "run"], tmp_path / "r.html").read_text()
    assert "<script src" not in html and "<link" not in html  # nothing to fetch
    assert "Plotly" in html and 'id="report-data"' in html
    data = _data(html)
    (run,) = data["runs"]
    assert (
        run["summary"]["accepted"] == made["accepted"] == sum(t["accepted"] for t in run["tasks"])
    )
    assert len(run["tasks"]) == made["proposals"] == 12
    known = next(t for t in run["tasks"] if KNOWN_WORD in t["question"])
    assert known["id"] == made["known_task"] and known["step"] == made["known_step"]
    probe = run["probes"][-1]
    assert probe["step"] == 3 and len(probe["intact"]) == len(probe["corrupted"]) == 12
    assert run["metrics"]["step"] == [0, 1, 2, 3]


def test_model_text_cannot_close_the_data_script(tmp_path):
    from benchmarks.perf.report_bench import make_synthetic_run

    make_synthetic_run(tmp_path / "run", steps=1, rounds=1)
    path = tmp_path / "run" / "transcripts" / "step_000001.jsonl"
    rec = json.loads(path.read_text())
    nasty = "</script><script>alert(1)</script>\u2028<!-- \ud800"
    rec["actions"][0]["action"] = nasty
    path.write_text(json.dumps(rec) + "\n")
    html = write_report([tmp_path / "run"], tmp_path / "r.html").read_text(errors="replace")
    assert html.count("</script>") == 3  # plotly, the data, the page's own script
    assert _data(html)["runs"][0]["rounds"][0]["actions"][0]["action"].startswith("</script>")


def test_broken_files_are_skipped_and_named_not_raised(tmp_path):
    from benchmarks.perf.report_bench import make_synthetic_run

    run = tmp_path / "run"
    make_synthetic_run(run, steps=2, rounds=2)
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 3, "reward/solver": 0.\n[1, 2]\n{"step": NaN}\n')
    with open(run / "transcripts" / "step_000002.jsonl", "a") as fh:
        fh.write('{"step": 2, "round": 9, "actions": [1, {"phase": "challenge"}]}\nnot json\n')
    (run / "config.yaml").write_text("model: [unclosed\n")
    data = load_run(run)
    notes = " ".join(data["notes"])
    assert "metrics.jsonl: 2 unreadable line(s) skipped" in notes
    assert "step_000002.jsonl: 1 unreadable line(s) skipped" in notes
    assert "config.yaml does not parse" in notes
    assert data["metrics"]["step"] == [0, 1, 2]
    odd = [t for t in data["tasks"] if t["round"] == 9]
    assert len(odd) == 1 and odd[0]["outcome"] == "unparsed" and not odd[0]["accepted"]
    json.dumps(data, allow_nan=False)  # the page's data is strict JSON


def test_an_old_run_falls_back_to_text_transcripts_and_the_pool(tmp_path):
    """A run written before transcripts/step_N.jsonl and the probe's item scores."""
    old = ROOT / "benchmarks" / "learning_signal" / "results" / "sage-seed0"
    data = load_run(old)
    assert data["rounds"] and all("text" in r for r in data["rounds"])
    assert data["rounds"][0]["text"].startswith("=== challenge: challenger_0 ===")
    assert data["probes"] == [] and "critic/auc" in data["metrics"]
    assert any("plain-text transcripts only" in n for n in data["notes"])
    assert any("AUC over steps only" in n for n in data["notes"])
    # no pool.jsonl: the pool's size comes from the last metrics row
    assert (data["summary"]["pool_seeds"], data["summary"]["pool_generated"]) == (500, 3)


def test_pool_only_run_lists_its_generated_tasks(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    seed = sage_env.load_seeds()[0]
    gen = sage_env.Task(
        task_id="gen/7",
        domain=seed.domain,
        prompt="Harder?",
        answer="3",
        parent_id=seed.task_id,
        meta={"episode": 2, "q": 0.8, "d": 1.0, "probe_scores": [0.0, 0.0]},
    )
    sage_env.tasks.task.write_jsonl([seed, gen], run / "pool.jsonl")
    (task,) = load_run(run)["tasks"]
    assert (task["id"], task["step"], task["q"], task["solved"]) == ("gen/7", 2, 0.8, False)
    assert task["parent"] == seed.task_id and task["in_pool"]
    assert load_run(run)["summary"]["pool_generated_by_kind"] == {seed.domain: 1}


def test_cli_writes_a_multi_run_comparison(tmp_path, capsys):
    from benchmarks.perf.report_bench import make_synthetic_run

    for name, seed in (("a", 0), ("b", 1)):
        make_synthetic_run(tmp_path / name / "run", steps=2, rounds=2, seed=seed)
    out = tmp_path / "cmp.html"
    code = main(
        ["report", str(tmp_path / "a" / "run"), str(tmp_path / "b" / "run"), "--out", str(out)]
    )
    assert code == 0 and str(out) in capsys.readouterr().out
    names = [r["name"] for r in _data(out.read_text())["runs"]]
    assert names == ["a/run", "b/run"]  # same folder name: the parent tells them apart


def test_cli_errors_are_clear(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "r.html")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r.html")]) == 2
    assert "holds no run" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_max_rounds_per_step_bounds_transcripts_not_proposals(tmp_path):
    from benchmarks.perf.report_bench import make_synthetic_run

    make_synthetic_run(tmp_path / "run", steps=2, rounds=5)
    data = load_run(tmp_path / "run", max_rounds_per_step=2)
    assert len(data["rounds"]) == 4 and len(data["tasks"]) == 10
    assert sum(t["transcript"] for t in data["tasks"]) == 4
    assert any("6 round(s) beyond 2 per step" in n for n in data["notes"])


@pytest.mark.slow
def test_train_writes_the_report_every_n_steps_and_at_the_end(tmp_path, tiny_path, monkeypatch):
    import learners.reports.run_report

    real, calls = learners.reports.run_report.write_report, []

    def spy(runs, out, *args, **kw):
        calls.append(
            len(
                json.loads(
                    "[" + ",".join((Path(runs[0]) / "metrics.jsonl").read_text().splitlines()) + "]"
                )
            )
        )
        return real(runs, out, *args, **kw)

    monkeypatch.setattr(learners.reports.run_report, "write_report", spy)
    out = tmp_path / "run"
    flags = "--device cpu --max-new-tokens 6 --rounds-per-step 2 --env.solver-samples 1"
    flags += " --warmup.steps 0 --critic-probe-size 8 --val-every 0 --report-to none"
    flags += " --learner.no-gradient-checkpointing --no-progress"
    code = main(
        ["train", "--model", tiny_path, "--steps", "2", "--report-every", "1", "--out", str(out)]
        + flags.split()
    )
    assert code == 0
    assert calls == [2, 3]  # rows 0-1 after step 1, rows 0-2 at the end
    data = _data((out / "report.html").read_text())
    (run,) = data["runs"]
    assert run["metrics"]["step"] == [0, 1, 2]
    assert [(r["step"], r["round"]) for r in run["rounds"]] == [
        (s, r) for s in (1, 2) for r in (0, 1)
    ]
    # the probe's item scores are logged at the start and the last step: the ROC's data
    assert [p["step"] for p in run["probes"]] == [0, 2]
    assert len(run["probes"][0]["intact"]) == len(run["probes"][0]["corrupted"]) == 4
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["critic/auc"] == pytest.approx(
        auc(rows[0]["critic/probe_q_intact"], rows[0]["critic/probe_q_corrupted"])
    )


def test_max_rejected_keeps_every_accepted_and_the_latest_rejected(tmp_path):
    from benchmarks.perf.report_bench import make_synthetic_run

    made = make_synthetic_run(tmp_path / "run", steps=3, rounds=6)
    rejected = made["proposals"] - made["accepted"]
    data = load_run(tmp_path / "run", max_rejected=2)
    kept = [t for t in data["tasks"] if not t["accepted"]]
    assert len(kept) == 2 and sum(t["accepted"] for t in data["tasks"]) == made["accepted"]
    latest = sorted(
        (t["step"], t["round"]) for t in load_run(tmp_path / "run")["tasks"] if not t["accepted"]
    )[-2:]
    assert sorted((t["step"], t["round"]) for t in kept) == latest
    assert any(f"{rejected - 2} older rejected" in n for n in data["notes"])


@pytest.mark.parametrize("trained, steps, badge", [(0.0, 0, True), (1.0, 2, False)])
def test_summary_counts_trained_steps_and_flags_a_run_that_trained_nothing(
    tmp_path, trained, steps, badge
):
    from learners.reports.run_data import TRAINED_NOTHING

    run = tmp_path / "run"
    run.mkdir()
    rows = [{"step": 0}, *({"step": s, "learner/trained": trained} for s in (1, 2))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = write_report([run], tmp_path / "report.html").read_text()
    data = _data(html)["runs"][0]
    assert data["summary"]["trained_steps"] == steps
    assert (TRAINED_NOTHING in data["notes"]) is badge
    assert "⚠ trained nothing" in html and '"trained steps"' in html  # the summary's badge


def test_a_run_without_the_trained_metric_shows_no_count(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
    data = load_run(run)
    assert data["summary"]["trained_steps"] is None
    assert not any("trained nothing" in n for n in data["notes"])
