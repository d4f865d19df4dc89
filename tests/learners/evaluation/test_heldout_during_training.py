"""Held-out scoring of a training run (``TrainConfig.heldout``, issue 34, item 6)."""

import json
import logging

import pytest

from learners.algorithms.pg_config import PGConfig
from learners.evaluation import heldout
from learners.training.loop import TrainConfig, train
from learners.training.warmup import WarmupConfig
from sage_env import EnvConfig


def test_parse_heldout_checks_names_and_counts():
    assert heldout.parse_heldout("") == []
    assert heldout.parse_heldout("exec_heldout:100:16, cruxeval_i:5:64") == [
        heldout.HeldoutSet("exec_heldout", 100, 16),
        heldout.HeldoutSet("cruxeval_i", 5, 64),
    ]
    for bad in ("gsm8k:10:10", "exec_heldout:0:5", "exec_heldout:x:5", "exec_heldout:10"):
        with pytest.raises(ValueError, match="heldout"):
            heldout.parse_heldout(bad)
    with pytest.raises(ValueError, match="heldout"):
        TrainConfig(heldout="validation:10:10")


def test_final_metrics_and_report_line_give_interval_and_paired_test():
    start = [False] * 6 + [True] * 2 + [False] * 12
    final = [True] * 6 + [True] * 2 + [False] * 12  # 6 gained, 0 lost
    m = heldout.final_metrics("exec_heldout", start, final)
    assert m["heldout/exec_heldout/final"] == 0.4
    lo, hi = heldout.wilson(8, 20)
    assert (m["heldout/exec_heldout/final_ci_low"], m["heldout/exec_heldout/final_ci_high"]) == (
        lo,
        hi,
    )
    assert (m["heldout/exec_heldout/gained"], m["heldout/exec_heldout/lost"]) == (6.0, 0.0)
    assert m["heldout/exec_heldout/mcnemar_p"] == pytest.approx(2 * 0.5**6)
    line = heldout.report_line("exec_heldout", {"untouched": start, "start": start, "final": final})
    assert line.startswith("held-out exec_heldout (20 items, greedy): untouched 0.100 [")
    assert "final 0.400 [0.22, 0.61]" in line and "6 gained / 0 lost, McNemar p = 0.0312" in line


@pytest.mark.slow
def test_train_scores_heldout_untouched_start_and_final(tiny_path, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SAGE_ENV_CACHE", str(tmp_path / "cache"))
    cfg = TrainConfig(
        model=tiny_path,
        out=str(tmp_path / "run"),
        steps=1,
        rounds_per_step=1,
        max_new_tokens=4,
        device="cpu",
        critic_probe_size=0,
        gate_calibration=False,
        heldout="exec_heldout:3:4",
        warmup=WarmupConfig(steps=1, batch_size=1, num_demonstrations=4),
        env=EnvConfig(solver_samples=1, domains=("exec",)),
        learner=PGConfig(lr=1e-3, gradient_checkpointing=False),
        report_to="none",
    )
    with caplog.at_level(logging.INFO, logger="sage_env.train"):
        train(cfg, progress=False)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first, last = rows[0], rows[-1]
    for label in ("untouched", "start"):
        assert first[f"heldout/exec_heldout/{label}"] in (0.0, 1 / 3, 2 / 3, 1.0)
        assert (
            first[f"heldout/exec_heldout/{label}_ci_low"] <= first[f"heldout/exec_heldout/{label}"]
        )
    assert last["step"] == 1 and 0.0 <= last["heldout/exec_heldout/mcnemar_p"] <= 1.0
    saved = json.loads((tmp_path / "run" / "heldout.json").read_text())
    assert set(saved) == {"untouched", "start"} and len(saved["start"]["exec_heldout"]) == 3
    gained, lost = last["heldout/exec_heldout/gained"], last["heldout/exec_heldout/lost"]
    start = saved["start"]["exec_heldout"]
    assert last["heldout/exec_heldout/final"] == pytest.approx((sum(start) + gained - lost) / 3)
    assert any(
        "held-out exec_heldout (3 items, greedy): untouched" in r.message for r in caplog.records
    )
    assert (tmp_path / "run" / "heldout" / "final" / "exec_heldout" / "items").exists()
    assert (
        (tmp_path / "run" / "heldout.md")
        .read_text()
        .startswith("held-out exec_heldout (3 items, greedy): untouched")
    )
