"""benchmarks/self_evolution/run.py on a scripted run (no model): schema, differences, plots."""

import json
from pathlib import Path

import pytest

from benchmarks.common.arms import parse_curve_arms
from benchmarks.learning_curve import run as lc  # noqa: E402
from benchmarks.self_evolution import run as se  # noqa: E402

# right items at the end of a run: growing azr gains more than frozen; seed 1 gains one more
FINAL_RIGHT = {"azr": 12, "azr:frozen": 8, "rlvr": 7}


def _stand_ins(seen):
    def warm_fn(cfg):
        return "warm-model", {"steps": 24}

    def train_fn(tcfg):
        run = Path(tcfg.out)
        run.mkdir(parents=True, exist_ok=True)
        rows = [{"step": 0}]
        if tcfg.resume:
            rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        frozen = tcfg.env.pool_admission == "frozen"
        for s in range(rows[-1]["step"] + 1, tcfg.steps + 1):
            row = {"step": s, "rollout/tokens": 50.0, "time/step_s": 3.0}
            if tcfg.env.protocol == "azr":
                row.update(
                    {
                        "pool/proposals": 8.0,
                        "pool/valid": 6.0,
                        "pool/accepted": 5.0,
                        "pool/accepted_deduction": 5.0,
                        "pool/accepted_novelty": 0.4,
                        "solver/generated_share": 0.0 if frozen else 0.5,
                    }
                )
            rows.append(row)
        (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def evaluate_fn(model, sets, cfg, out):
        seen.append(model)
        if model == "smollm2-135m-instruct":
            right = 3
        elif model == "warm-model":
            right = 5
        else:  # <runs>/seed<s>/<arm>/seed<s>@<step>
            arm = Path(model).parent.parent.name.replace("-frozen-pool", ":frozen")
            right = FINAL_RIGHT[arm] + cfg.seed
        return {name: [i < right for i in range(n)] for name, n, _ in sets}

    def model_of(run):
        steps = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"]
        return str(run / f"{run.name}@{steps}")

    return dict(warm_fn=warm_fn, train_fn=train_fn, evaluate_fn=evaluate_fn, model_of=model_of)


@pytest.mark.slow
def test_scripted_experiment_summary(tmp_path):
    seen = []
    cfg = se.EvolutionConfig(
        arms="azr,azr:frozen,rlvr",
        seeds="0,1",
        max_steps=4,
        eval_every=2,
        sets="exec_heldout:20:8",
        out=str(tmp_path / "out"),
        runs=str(tmp_path / "runs"),
        progress=False,
    )
    summary = se.run(cfg, **_stand_ins(seen))
    # the untouched model and the warmed model are each scored once (seed 1 reuses it)
    assert seen.count("smollm2-135m-instruct") == 1 and seen.count("warm-model") == 1
    start = summary["start"]["exec_heldout"]
    assert start["untouched"]["accuracy"] == 0.15 and start["warmed"]["accuracy"] == 0.25
    assert (start["warm_up_gained"], start["warm_up_lost"]) == (2, 0)
    azr = summary["arms"]["azr"]
    assert set(azr["seeds"]) == {"0", "1"}
    assert azr["final_mean"]["exec_heldout"]["mean"] == pytest.approx((0.6 + 0.65) / 2)
    assert azr["gain_over_warmed"]["exec_heldout"]["mean"] == pytest.approx(0.375)
    assert azr["accepted_per_run"] == [20.0, 20.0]
    assert azr["seeds"]["0"]["pool"]["series"]["solver/generated_share"] == [0.5] * 4
    diff = summary["comparisons"]["azr - azr:frozen"]["sets"]["exec_heldout"]
    assert diff["per_seed"] == pytest.approx([0.2, 0.2])
    assert diff["mean"] == pytest.approx(0.2) and diff["ci95"] == pytest.approx([0.2, 0.2])
    # pooled over items x seeds: 4 items per seed that growing got and frozen did not
    assert diff["pooled"]["a_better"] == 8 and diff["pooled"]["b_better"] == 0
    assert diff["pooled"]["p_value"] == pytest.approx(2 * 0.5**8)
    assert summary["comparisons"]["azr - azr:frozen"]["what"] == "growing - frozen"
    assert "azr - rlvr" in summary["comparisons"]
    out = tmp_path / "out"
    assert json.loads((out / "summary.json").read_text())["table"] == summary["table"]
    assert "| azr - azr:frozen | exec_heldout | +0.200, +0.200 |" in summary["table"]
    assert (out / "heldout.png").stat().st_size > 1000 and (out / "pool.png").stat().st_size > 1000
    assert (out / "seed1" / "summary.json").exists()


def test_mean_interval_uses_student_t_and_one_seed_has_none():
    one = se.mean_interval([0.1])
    assert one == {"mean": 0.1, "ci95": None, "n": 1}
    two = se.mean_interval([0.0, 0.2])
    # sd = 0.1414, half = 12.706 * 0.1414 / sqrt(2) = 1.2706
    assert two["ci95"] == pytest.approx([0.1 - 1.2706, 0.1 + 1.2706], abs=1e-4)


def test_bad_seeds_and_arms_are_clear_errors():
    with pytest.raises(ValueError, match="seeds"):
        se.EvolutionConfig(seeds="0,0").seed_list()
    with pytest.raises(ValueError, match="seeds"):
        se.EvolutionConfig(seeds="a").seed_list()
    with pytest.raises(ValueError, match="rlvr:frozen"):
        parse_curve_arms("rlvr:frozen")
    with pytest.raises(ValueError):
        parse_curve_arms("nosuch")


def test_frozen_arm_trains_with_a_frozen_pool():
    t = lc.train_config(lc.CurveConfig(), "sage:frozen")
    assert t.env.protocol == "sage" and t.env.pool_admission == "frozen"
    assert Path(t.out).parent.name == "sage-frozen-pool"
    assert lc.train_config(lc.CurveConfig(), "sage").env.pool_admission == "gate"


def test_warm_start_critic_reviews_add_exec_reviews_half_corrupted():
    """``warmup_critic_reviews = n`` adds n critic demonstrations on execution questions to the
    shared warm start (half intact scored 8-9, half corrupted scored 2-3), none from the
    validation split, and changes the warm start's cache key."""
    from learners.training.presets import PRESETS
    from learners.training.warmup import cache_key
    from sage_env import load_validation

    warmup = PRESETS["demo"].warmup
    base = se.warm_demonstrations(se.EvolutionConfig(), warmup)
    more = se.warm_demonstrations(se.EvolutionConfig(warmup_critic_reviews=10), warmup)
    assert more[: len(base)] == base
    extra = more[len(base) :]
    assert len(extra) == 10 and {d.role for d in extra} == {"critic"}
    scores = [int(d.target.split("</score>")[0]) for d in extra]
    assert all(s in (8, 9) for s in scores[0::2]) and all(s in (2, 3) for s in scores[1::2])
    from sage_env.tasks.exec_tasks import load_exec_seeds

    prompts = {t.task_id: t.prompt for t in load_exec_seeds()}
    assert all(prompts[d.task_ids[0]] in d.observation["user"] for d in extra[0::2])
    assert not any(prompts[d.task_ids[0]] in d.observation["user"] for d in extra[1::2])
    banned = {t.task_id for t in load_validation()}
    assert not any(set(d.task_ids) & banned for d in extra)
    model = "smollm2-135m-instruct"
    assert cache_key(model, warmup, more) != cache_key(model, warmup, base)


def test_critic_check_clean_probe_uses_programs_no_seed_or_demonstration_has():
    """critic_check's clean probe draws from the held-out programs: exec tasks whose programs
    no execution seed (hence no warm-up demonstration) holds."""
    from benchmarks.self_evolution.critic_check import heldout_exec_tasks
    from sage_env.tasks.exec_tasks import ExecSpec, load_exec_seeds

    tasks = heldout_exec_tasks()
    assert len(tasks) == 240 and {t.domain for t in tasks} == {"exec"}
    seen = {ExecSpec.of(t).program for t in load_exec_seeds()}
    assert not {ExecSpec.of(t).program for t in tasks} & seen
