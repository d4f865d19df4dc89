"""``sage-env compare``: every protocol under one imported learner, several seeds, like for like."""

import json
import math
from pathlib import Path

import pytest

from learners.cli import main
from learners.reports.compare_summary import Stat
from learners.reports.plots import read_metrics
from learners.training.compare import CompareConfig, parse_arms, run_compare

ROOT = Path(__file__).resolve().parents[3]
TINY_YAML = (
    "device: cpu\nmax_new_tokens: 6\nphase_max_new_tokens: {}\nphase_stop_strings: {}\n"
    "critic_probe_size: 0\ngate_calibration: false\nwarmup: {steps: 0}\nreport_to: none\n"
    "learner: {gradient_checkpointing: false, micro_batch_size: 8}\n"
)
"""Tiny budgets over the demo preset: no warm-up, no critic probe, 6 tokens a reply."""


@pytest.mark.slow
def test_compare_runs_every_protocol_with_an_imported_learner(tmp_path, tiny_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY_YAML)
    out = tmp_path / "cmp"
    rc = main(
        ["compare", "--import", str(ROOT / "examples/rloo_learner.py"), "--algorithms", "rloo"]
        + ["--protocols", "sage,azr,mae,rlvr", "--seeds", "0", "1", "--model", tiny_path]
        + ["--steps", "1", "--rounds-per-step", "2", "--config", str(cfg)]
        + ["--heldout", "2", "--heldout-max-new-tokens", "4", "--out", str(out), "--no-progress"]
        + ["--heldout-exec", "exec_heldout:3:4"]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["algorithms"] == "rloo" and summary["budget"]["unit"] == "steps"
    arms = summary["arms"]
    assert list(arms) == ["sage", "azr", "mae", "rlvr"]
    table = (out / "table.md").read_text()
    assert table == summary["table"] + "\n" and table in capsys.readouterr().out + "\n"
    heldout, training = table.split("Training, NOT like for like")
    training, own = training.split("NOT comparable")
    assert "| set | arm | start | end | change |" in heldout and "own reward: solver" in own
    # the demo preset trains math, code and exec; AZR trains execution tasks only: each arm is
    # scored on the sets of its domains, and the table says exec_heldout is the only full set
    assert {name: sorted(a["heldout"]) for name, a in arms.items()} == {
        "sage": ["exec_heldout", "math"],
        "azr": ["exec_heldout"],
        "mae": ["exec_heldout", "math"],
        "rlvr": ["exec_heldout", "math"],
    }
    assert arms["azr"]["domains"] == ["exec"] and arms["sage"]["domains"] == [
        "math",
        "code",
        "exec",
    ]
    assert (
        "Not like for like across all arms" in heldout and "math holds sage, mae, rlvr" in heldout
    )
    for name, arm in arms.items():
        assert arm["seeds"] == [0, 1] and arm["algorithm"] == "rloo"
        for set_name, stats in arm["heldout"].items():
            for key in ("start", "end"):
                stat = stats[key]
                assert stat["n"] == 2 and all(0.0 <= v <= 1.0 for v in stat["values"])
                assert 0.0 <= stat["min"] <= stat["mean"] <= stat["max"] <= 1.0
            # the held-out row of every arm and set shows its accuracy after training
            row = next(r for r in heldout.splitlines() if r.startswith(f"| {set_name} | {name} |"))
            end = stats["end"]
            assert row.split(" | ")[3] == (
                f"{end['mean']:.3f} ± {end['std']:.3f} [{end['min']:.3f}, {end['max']:.3f}]"
            )
        assert "solver" in arm["own_reward"]
        # trained steps: read from learner/trained (the tiny model's rewards are all equal,
        # so no step changes the weights, and the table says so)
        trained = arm["trained_steps"]["values"]
        cell = f"{trained[0]} of 1" if trained[0] == trained[1] else "of 1"
        assert f"| {name} | rloo | {name} |" in training and cell in training
        if max(trained) == 0:
            row = next(r for r in training.splitlines() if r.startswith(f"| {name} |"))
            assert "**trained nothing**" in row
        # every value is the run's own metrics.jsonl, read back
        for i, seed in enumerate([0, 1]):
            rows = read_metrics(out / name / f"seed{seed}" / "metrics.jsonl")
            val = {r["step"]: r["val/accuracy"] for r in rows if "val/accuracy" in r}
            if "math" in arm["heldout"]:
                m = arm["heldout"]["math"]
                assert val == {0: m["start"]["values"][i], 1: m["end"]["values"][i]}
            else:
                assert val == {}  # no math held-out for an arm that does not train math
            ex = arm["heldout"]["exec_heldout"]
            assert (
                next(r for r in rows if r["step"] == 0)["heldout/exec_heldout/start"]
                == (ex["start"]["values"][i])
            )
            step = next(r for r in rows if r["step"] == 1)
            assert step["heldout/exec_heldout/final"] == ex["end"]["values"][i]
            run = next(r for r in summary["runs"] if r["arm"] == name and r["seed"] == seed)
            assert run["own_reward"]["solver"] == step["reward/solver"]
            assert run["rollout_tokens"] == step["rollout/tokens"]
            assert run["trained_steps"] == int(step["learner/trained"]) == trained[i]
            config = (out / name / f"seed{seed}" / "config.yaml").read_text()
            assert "algorithm: rloo" in config and f"protocol: {name}" in config
            assert "heldout: exec_heldout:3:4" in config
    assert set(arms["rlvr"]["own_reward"]) == {"solver"}
    assert "judge" in arms["mae"]["own_reward"] and "critic" in arms["sage"]["own_reward"]
    assert (out / "compare.png").stat().st_size > 0
    # a second run into the same folder stops before training anything
    assert main(["compare", "--protocols", "rlvr", "--out", str(out), "--seeds", "0"]) == 2


@pytest.mark.slow
def test_an_imported_learner_beside_trr_in_one_table(tmp_path, tiny_path):
    """--algorithms trr,rloo: every learner trains every arm; like for like is every arm."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY_YAML)
    out = tmp_path / "cmp"
    rc = main(
        ["compare", "--import", str(ROOT / "examples/rloo_learner.py")]
        + ["--algorithms", "trr,rloo", "--protocols", "azr,rlvr", "--no-heldout-match"]
        + ["--seeds", "0", "--model", tiny_path, "--steps", "1", "--rounds-per-step", "2"]
        + ["--config", str(cfg), "--heldout", "2", "--heldout-max-new-tokens", "4"]
        + ["--heldout-exec", "exec_heldout:2:4", "--out", str(out), "--no-progress"]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    arms = summary["arms"]
    assert list(arms) == ["trr/azr", "trr/rlvr", "rloo/azr", "rloo/rlvr"]
    assert [(a["algorithm"], a["protocol"]) for a in arms.values()] == [
        ("trr", "azr"),
        ("trr", "rlvr"),
        ("rloo", "azr"),
        ("rloo", "rlvr"),
    ]
    for name, arm in arms.items():
        # --no-heldout-match: every arm on every set, so no set is flagged as partial
        assert sorted(arm["heldout"]) == ["exec_heldout", "math"]
        config = (out / name / "seed0" / "config.yaml").read_text()
        assert f"algorithm: {arm['algorithm']}" in config
    assert "Not like for like across all arms" not in summary["table"]
    assert (
        "| math | rloo/azr |" in summary["table"]
        and "| trr/rlvr | trr | rlvr |" in summary["table"]
    )


def test_stat_is_mean_sample_std_and_range():
    s = Stat.of([0.25, None, 0.75])
    assert (s.mean, s.min, s.max, s.n) == (0.5, 0.25, 0.75, 2)
    assert math.isclose(s.std, math.sqrt(0.125))
    assert Stat.of([0.4]).std == 0.0 and Stat.of([None]).mean is None


def test_arms_are_checked_against_the_protocol_registry():
    arms = parse_arms("sage, rlvr,sage-frozen-critic")
    assert [(a.name, a.protocol, a.freeze) for a in arms] == [
        ("sage", "sage", ()),
        ("rlvr", "rlvr", ()),
        ("sage-frozen-critic", "sage", ("critic",)),
    ]
    with pytest.raises(ValueError, match="unknown protocol 'sgae'"):
        parse_arms("sage,sgae")
    with pytest.raises(ValueError, match="has no role 'critic'"):
        parse_arms("rlvr-frozen-critic")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--algorithms", "trr,nope"], "unknown algorithm 'nope'"),
        (["--algorithms", "trr,trr"], "repeats an entry"),
        (["--heldout-exec", "exec_heldout:0:4"], "must be >= 1"),
        (["--protocols", "sage,nope"], "unknown protocol 'nope'"),
        (["--steps", "3", "--val-every", "2"], "must divide steps"),
        (["--seeds", "1", "1"], "distinct"),
        (["--import", "no_such_module_xyz"], "no_such_module_xyz"),
    ],
)
def test_bad_options_fail_before_any_model_loads(tmp_path, capsys, args, message):
    assert main(["compare", "--out", str(tmp_path / "c"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_compare_protocols_script_is_the_compare_command(tmp_path):
    from benchmarks.compare_protocols import run as compare_protocols

    with pytest.raises(SystemExit) as done:
        compare_protocols.main(["--protocols", "nope", "--out", str(tmp_path / "c")])
    assert done.value.code == 2
    assert "sage-env compare" in compare_protocols.__doc__


def test_run_compare_python_api_validates_like_the_cli(tmp_path):
    with pytest.raises(ValueError, match="heldout"):
        run_compare(CompareConfig(heldout=0, out=str(tmp_path / "c")))


def test_statistics_and_labels_from_known_metrics(tmp_path, monkeypatch, caplog):
    """With train() replaced by one that writes known metrics, every cell is checked."""
    import learners.training.loop

    yaml_file = tmp_path / "over.yaml"
    yaml_file.write_text("steps: 9\ntemperature: 0.5\n")  # steps is the comparison's

    descs = []

    def fake_train(cfg, progress=True, desc="sage train"):
        descs.append((desc, cfg.env.protocol, cfg.seed, cfg.freeze, cfg.steps, cfg.val_every))
        assert cfg.temperature == 0.5 and cfg.early_stopping_patience == 0
        out = Path(cfg.out)
        out.mkdir(parents=True)
        bonus = 0.5 if cfg.env.protocol == "rlvr" else 0.0
        # sage trains nothing on seed 1's first step; rlvr reports no update figures
        trained = {} if cfg.env.protocol == "rlvr" else {"learner/trained": 1.0}
        rows = [
            {"step": 0, "val/accuracy": 0.5, "heldout/exec_heldout/start": 0.1},
            {"step": 1, "reward/solver": 0.2 + cfg.seed, "rollout/tokens": 10.0, **trained},
            {"step": 2, "reward/solver": 0.4 + cfg.seed, "rollout/tokens": 30.0, **trained},
            {"step": 2, "val/accuracy": 0.25 + 0.25 * cfg.seed + bonus, "solver/accuracy": 0.5},
        ]
        if trained and cfg.seed == 1:
            rows[1]["learner/trained"] = 0.0
        rows[-1]["heldout/exec_heldout/final"] = 0.2 + 0.1 * cfg.seed
        rows[-1]["heldout/exec_heldout/mcnemar_p"] = 0.5
        rows[-2].update(rows.pop())  # one row per step, as train writes it
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return rows[-1]

    monkeypatch.setattr(learners.training.loop, "train", fake_train)
    summary = run_compare(
        CompareConfig(
            protocols="sage-frozen-critic,rlvr",
            seeds=(0, 1),
            steps=2,
            model="unused",
            out=str(tmp_path / "c"),
            progress=False,
            config=str(yaml_file),
        )
    )
    assert "over.yaml sets steps, which sage-env compare sets" in caplog.text
    assert descs == [
        ("sage-frozen-critic seed 0", "sage", 0, ("critic",), 2, 2),
        ("sage-frozen-critic seed 1", "sage", 1, ("critic",), 2, 2),
        ("rlvr seed 0", "rlvr", 0, (), 2, 2),
        ("rlvr seed 1", "rlvr", 1, (), 2, 2),
    ]
    sage, rlvr = summary["arms"]["sage-frozen-critic"], summary["arms"]["rlvr"]
    assert sage["heldout"]["math"]["end"]["values"] == [0.25, 0.5]
    assert math.isclose(sage["heldout"]["math"]["end"]["std"], math.sqrt(0.03125))
    assert rlvr["heldout"]["math"]["change"]["values"] == [0.25, 0.5]
    assert sage["heldout"]["exec_heldout"]["end"]["values"] == [0.2, pytest.approx(0.3)]
    assert sage["heldout"]["exec_heldout"]["change"]["values"] == pytest.approx([0.1, 0.2])
    run = next(r for r in summary["runs"] if r["arm"] == "rlvr")
    assert run["heldout_sets"]["exec_heldout"] == {
        "start": 0.1,
        "end": 0.2,
        "gained": None,
        "lost": None,
        "mcnemar_p": 0.5,
    }
    assert sage["trained_steps"]["values"] == [2, 1] and rlvr["trained_steps"]["n"] == 0
    assert sage["own_reward"]["solver"]["values"] == pytest.approx([0.3, 1.3])
    assert (
        sage["rollout_tokens"]["mean"] == 40.0 and sage["solver_verifier_accuracy"]["mean"] == 0.5
    )
    table = summary["table"]
    assert "| math | rlvr | 0.500 ± 0.000 [0.500, 0.500] | 0.875 ± 0.177 [0.750, 1.000] |" in table
    assert "| exec_heldout | sage-frozen-critic | 0.100 ± 0.000 [0.100, 0.100] |" in table
    assert "| 1.5 ± 0.7 [1.0, 2.0] of 2 |" in table  # sage's trained steps over its seeds
    assert "| n/a (the learner reports no update figures) |" in table  # rlvr's
    assert "| sage-frozen-critic | 0.300 ± 0.000 [0.300, 0.300] |" not in table  # own reward
    assert "| sage-frozen-critic | 0.800 ± 0.707 [0.300, 1.300] |" in table


@pytest.mark.slow
def test_benchmarks_score_the_start_and_every_final_model(tmp_path, tiny_path, monkeypatch):
    """--benchmarks: pass@1 of the starting model and each run's last checkpoint."""
    import shutil

    import learners.training.loop

    def fake_train(cfg, progress=True, desc="sage train"):
        out = Path(cfg.out)
        step = out / "checkpoints" / "step_000001"
        shutil.copytree(tiny_path, step / "model")
        (step / "state.json").write_text("{}")
        rows = [{"step": 0, "val/accuracy": 0.0}, {"step": 1, "val/accuracy": 0.5}]
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return rows[-1]

    monkeypatch.setattr(learners.training.loop, "train", fake_train)
    cfg = CompareConfig(
        protocols="rlvr",
        seeds=(0, 1),
        steps=1,
        model=tiny_path,
        out=str(tmp_path / "c"),
        progress=False,
        benchmarks="gsm8k,humaneval",
        benchmark_limit=1,
        heldout_max_new_tokens=4,
    )
    summary = run_compare(cfg)
    assert set(summary["benchmark_start"]) == {"gsm8k", "humaneval"}
    ends = summary["arms"]["rlvr"]["benchmark_end"]
    for b in ("gsm8k", "humaneval"):
        assert ends[b]["n"] == 2 and all(0.0 <= v <= 1.0 for v in ends[b]["values"])
        for seed, value in zip((0, 1), ends[b]["values"]):
            res = json.loads((tmp_path / f"c/rlvr/seed{seed}/benchmarks/results.json").read_text())
            (r,) = [r for r in res["results"] if r["benchmark"] == b]
            assert r["items"] == 1 and r["pass_at"]["pass@1"] == value
    start = summary["benchmark_start"]["humaneval"]
    row = next(
        r for r in summary["table"].splitlines() if r.startswith("| humaneval pass@1 | rlvr")
    )
    assert row.split(" | ")[2] == f"{start:.3f}"  # the starting model's, the same for every arm
    assert "start is the starting model's score" in summary["table"]


def test_a_missing_benchmark_fails_before_training(tmp_path, monkeypatch):
    import learners.training.loop

    monkeypatch.setattr(learners.training.loop, "train", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setenv("SAGE_ENV_DATA", str(tmp_path))  # an empty data folder
    cfg = CompareConfig(protocols="rlvr", out=str(tmp_path / "c"), benchmarks="gsm8k")
    with pytest.raises(FileNotFoundError, match="learners.evaluation.benchmarks.BENCHMARK_FILES"):
        run_compare(cfg)


def _fake_train(zero: bool):
    """A ``train`` that writes known metrics: held-out figures all 0 when ``zero``; ``rlvr``
    never changes the weights, ``sage`` does, and ``mae``'s curves equal ``rlvr``'s."""

    def fake_train(cfg, progress=True, desc="sage train"):
        out = Path(cfg.out)
        out.mkdir(parents=True)
        trained = 0.0 if cfg.env.protocol in ("rlvr", "mae") else 1.0
        acc = 0.0 if zero else (0.5 if cfg.env.protocol == "sage" else 0.25)
        rows = [
            {"step": 0, "val/accuracy": 0.0 if zero else 0.25},
            {"step": 1, "reward/solver": 0.1, "learner/trained": trained},
            {"step": 2, "reward/solver": 0.1, "learner/trained": trained, "val/accuracy": acc},
        ]
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return rows[-1]

    return fake_train


def _labels(fig) -> list[str]:
    return [t for ax in fig.axes for t in ax.get_legend_handles_labels()[1]]


def test_all_zero_held_out_figures_and_idle_arms_are_said_in_table_log_and_plot(
    tmp_path, monkeypatch, caplog, capsys
):
    import learners.training.loop
    from learners.reports.compare_summary import ALL_HELDOUT_ZERO, figure
    from learners.training.compare import read_run

    monkeypatch.setattr(learners.training.loop, "train", _fake_train(zero=True))
    out = tmp_path / "c"
    args = ["--protocols", "sage,rlvr,mae", "--seeds", "0", "--steps", "2", "--model", "unused"]
    assert main(["compare", *args, "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"sage-env compare: note: {ALL_HELDOUT_ZERO}" in printed
    table = (out / "table.md").read_text()
    assert f"**{ALL_HELDOUT_ZERO}**" in table and "0 of 2 **trained nothing**" in table
    assert ALL_HELDOUT_ZERO in caplog.text and "rlvr seed 0 trained nothing" in caplog.text
    assert json.loads((out / "summary.json").read_text())["all_heldout_zero"] is True
    assert (out / "compare.png").stat().st_size > 0

    arms = parse_arms("sage,rlvr,mae")
    runs = [read_run(a.name, 0, out / a.name / "seed0") for a in arms]
    fig = figure(runs, arms)
    labels = _labels(fig)
    assert "rlvr (trained nothing)" in labels and "sage" in labels
    assert "mae (trained nothing) (= sage, rlvr)" in labels  # the same held-out line
    notes = " ".join(t.get_text() for t in fig.texts)
    assert "trained nothing (rlvr, mae" in notes and "shifted right" in notes
    lines = {ln.get_label(): ln for ax in fig.axes[:1] for ln in ax.get_lines()}
    assert list(lines["mae (trained nothing) (= sage, rlvr)"].get_xdata()) != [0, 2]


def test_a_run_that_trained_and_scored_gets_no_warning(tmp_path, monkeypatch, caplog, capsys):
    import learners.training.loop
    from learners.reports.compare_summary import ALL_HELDOUT_ZERO, figure
    from learners.training.compare import read_run

    monkeypatch.setattr(learners.training.loop, "train", _fake_train(zero=False))
    out = tmp_path / "c"
    args = ["--protocols", "sage", "--seeds", "0", "--steps", "2", "--model", "unused"]
    assert main(["compare", *args, "--out", str(out), "--no-progress"]) == 0
    assert "note:" not in capsys.readouterr().out
    table = (out / "table.md").read_text()
    assert ALL_HELDOUT_ZERO not in table and "trained nothing" not in table
    assert "trained nothing" not in caplog.text
    arms = parse_arms("sage")
    fig = figure([read_run("sage", 0, out / "sage" / "seed0")], arms)
    assert _labels(fig) and not any("trained nothing" in t for t in _labels(fig))
    assert not fig.texts
