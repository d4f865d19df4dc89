"""``sage-env compare``: every protocol under one imported learner, several seeds, like for like."""

import json
import math
from pathlib import Path

import pytest

from learners.cli import main
from learners.reports.compare import CompareConfig, Stat, parse_arms, run_compare
from learners.reports.plots import read_metrics

ROOT = Path(__file__).resolve().parents[1]
TINY_YAML = (
    "device: cpu\nmax_new_tokens: 6\nphase_max_new_tokens: {}\nphase_stop_strings: {}\n"
    "critic_probe_size: 0\ngate_calibration: false\nwarmup: {steps: 0}\nreport_to: none\n"
    "learner: {gradient_checkpointing: false, micro_batch_size: 8}\n"
)
"""Tiny budgets over the demo preset: no warm-up, no critic probe, 6 tokens a reply."""


def test_compare_runs_every_protocol_with_an_imported_learner(tmp_path, tiny_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY_YAML)
    out = tmp_path / "cmp"
    rc = main(
        ["compare", "--import", str(ROOT / "examples/rloo_learner.py"), "--algorithm", "rloo"]
        + ["--protocols", "sage,azr,mae,rlvr", "--seeds", "0", "1", "--model", tiny_path]
        + ["--steps", "1", "--rounds-per-step", "2", "--config", str(cfg)]
        + ["--heldout", "2", "--heldout-max-new-tokens", "4", "--out", str(out), "--no-progress"]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["algorithm"] == "rloo" and summary["budget"]["unit"] == "steps"
    arms = summary["arms"]
    assert list(arms) == ["sage", "azr", "mae", "rlvr"]
    table = (out / "table.md").read_text()
    assert table == summary["table"] + "\n" and table in capsys.readouterr().out + "\n"
    like, own = table.split("NOT comparable")
    assert "held-out verifier acc, end" in like and "own reward: solver" in own
    for name, arm in arms.items():
        assert arm["seeds"] == [0, 1]
        for key in ("heldout_start", "heldout_end"):
            stat = arm[key]
            assert stat["n"] == 2 and all(0.0 <= v <= 1.0 for v in stat["values"])
            assert 0.0 <= stat["min"] <= stat["mean"] <= stat["max"] <= 1.0
        # the like-for-like row of every protocol shows its held-out verifier accuracy
        row = next(line for line in like.splitlines() if line.startswith(f"| {name} |"))
        assert row.split(" | ")[2] == (
            f"{arm['heldout_end']['mean']:.3f} ± {arm['heldout_end']['std']:.3f} "
            f"[{arm['heldout_end']['min']:.3f}, {arm['heldout_end']['max']:.3f}]"
        )
        assert "solver" in arm["own_reward"]
        # every value is the run's own metrics.jsonl, read back
        for seed, end, start in zip(
            [0, 1], arm["heldout_end"]["values"], arm["heldout_start"]["values"]
        ):
            rows = read_metrics(out / name / f"seed{seed}" / "metrics.jsonl")
            val = {r["step"]: r["val/accuracy"] for r in rows if "val/accuracy" in r}
            assert val == {0: start, 1: end}
            step = next(r for r in rows if r["step"] == 1)
            run = next(r for r in summary["runs"] if r["arm"] == name and r["seed"] == seed)
            assert run["own_reward"]["solver"] == step["reward/solver"]
            assert run["rollout_tokens"] == step["rollout/tokens"]
            config = (out / name / f"seed{seed}" / "config.yaml").read_text()
            assert "algorithm: rloo" in config and f"protocol: {name}" in config
    assert set(arms["rlvr"]["own_reward"]) == {"solver"}
    assert "judge" in arms["mae"]["own_reward"] and "critic" in arms["sage"]["own_reward"]
    assert (out / "compare.png").stat().st_size > 0
    # a second run into the same folder stops before training anything
    assert main(["compare", "--protocols", "rlvr", "--out", str(out), "--seeds", "0"]) == 2


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
        (["--algorithm", "nope"], "unknown algorithm 'nope'"),
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


def test_compare_protocols_script_is_the_compare_command(tmp_path, monkeypatch):
    import sys

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import compare_protocols

    with pytest.raises(SystemExit) as done:
        compare_protocols.main(["--protocols", "nope", "--out", str(tmp_path / "c")])
    assert done.value.code == 2
    assert "compare" in sys.modules["compare_protocols"].__doc__


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
        rows = [
            {"step": 0, "val/accuracy": 0.5},
            {"step": 1, "reward/solver": 0.2 + cfg.seed, "rollout/tokens": 10.0},
            {"step": 2, "reward/solver": 0.4 + cfg.seed, "rollout/tokens": 30.0},
            {"step": 2, "val/accuracy": 0.25 + 0.25 * cfg.seed + bonus, "solver/accuracy": 0.5},
        ]
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
    assert sage["heldout_end"]["values"] == [0.25, 0.5]
    assert math.isclose(sage["heldout_end"]["std"], math.sqrt(0.03125))
    assert rlvr["heldout_change"]["values"] == [0.25, 0.5]
    assert sage["own_reward"]["solver"]["values"] == pytest.approx([0.3, 1.3])
    assert (
        sage["rollout_tokens"]["mean"] == 40.0 and sage["solver_verifier_accuracy"]["mean"] == 0.5
    )
    table = summary["table"]
    assert "| rlvr | 0.500 ± 0.000 [0.500, 0.500] | 0.875 ± 0.177 [0.750, 1.000] |" in table
    assert "| sage-frozen-critic | 0.300 ± 0.000 [0.300, 0.300] |" not in table  # own reward
    assert "| sage-frozen-critic | 0.800 ± 0.707 [0.300, 1.300] |" in table


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
    assert "humaneval pass@1, end |" in summary["table"]
    assert "the starting model scores gsm8k" in summary["table"]


def test_a_missing_benchmark_fails_before_training(tmp_path, monkeypatch):
    import learners.training.loop

    monkeypatch.setattr(learners.training.loop, "train", lambda *a, **k: pytest.fail("trained"))
    monkeypatch.setenv("SAGE_ENV_DATA", str(tmp_path))  # an empty data folder
    cfg = CompareConfig(protocols="rlvr", out=str(tmp_path / "c"), benchmarks="gsm8k")
    with pytest.raises(FileNotFoundError, match="learners.evaluation.benchmarks.BENCHMARK_FILES"):
        run_compare(cfg)
