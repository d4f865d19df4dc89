"""benchmarks/: learning_signal, critic_verifier, critic_warmup, critic_gate_mix, run small."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_learning_signal_records_every_figure_per_arm(tmp_path, tiny_path):
    from benchmarks.learning_signal import run as learning_signal

    model = tiny_path
    out = tmp_path / "ls"
    summary = learning_signal.main(
        [
            "--arms",
            "sage-seed0,mae,rlvr",
            "--model",
            model,
            "--steps",
            "1",
            "--rounds",
            "1",
            "--val-limit",
            "2",
            "--val-max-new-tokens",
            "4",
            "--probe-size",
            "4",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    arms = {a["arm"]: a for a in summary["arms"]}
    assert list(arms) == ["sage-seed0", "mae", "rlvr"]
    assert summary["val_start"] is not None  # measured once, on the first arm
    sage = arms["sage-seed0"]
    assert 0.0 <= sage["start"]["critic/auc"] <= 1.0
    step = sage["steps"][0]
    assert step["step"] == 1 and "val_accuracy" in step and "reward_std/challenger" in step
    assert "proposer_parse_rate" in step and "truncated/critic" in step
    assert "reviewer_format_rate" in arms["mae"]["steps"][0]
    assert "proposer_parse_rate" not in arms["rlvr"]["steps"][0]
    for png in ("pool_growth.png", "validation.png", "rewards.png"):
        assert (out / png).stat().st_size > 0
    assert "| rlvr | 1 |" in (out / "table.md").read_text()


def test_critic_verifier_reports_both_arms(tmp_path, tiny_path):
    from benchmarks.critic_verifier import run as critic_verifier

    out = tmp_path / "cv.json"
    result = critic_verifier.main(
        ["--model", tiny_path, "--items", "8", "--repeats", "1", "--out", str(out)]
    )
    assert json.loads(out.read_text()) == result
    plain, shown = result["draws"]["question only"][0], result["draws"]["question+verifier"][0]
    assert plain["n"] == shown["n"] == 8
    assert "wrong_verifier" in shown["auc_by_corruption"]
    assert "wrong_verifier" not in plain["auc_by_corruption"]
    assert 0.0 <= shown["auc"] <= 1.0


def test_critic_verifier_measures_wrong_answer_corruptions_alone(tmp_path, tiny_path):
    from benchmarks.critic_verifier import run as critic_verifier

    out = tmp_path / "wrong.json"
    result = critic_verifier.main(
        ["--model", tiny_path, "--items", "8", "--repeats", "1", "--out", str(out)]
        + ["--corruptions", "near_miss,wrong_verifier"]
    )
    assert result["corruptions"] == ["near_miss", "wrong_verifier"]
    for arm in ("question only", "question+verifier"):
        (draw,) = result["draws"][arm]
        assert set(draw["auc_by_corruption"]) == {"near_miss", "wrong_verifier"}


def test_critic_warmup_probes_every_checkpoint_on_held_out_seeds(tmp_path, tiny_path):
    from benchmarks.critic_warmup import run as critic_warmup

    out = tmp_path / "cw.json"
    result = critic_warmup.main(
        ["--model", tiny_path, "--checkpoints", "2,1", "--items", "6", "--draws", "1"]
        + ["--demos", "8", "--out", str(out)]
    )
    assert json.loads(out.read_text()) == result
    assert out.with_suffix(".png").stat().st_size > 0
    assert [c["step"] for c in result["checkpoints"]] == [0, 1, 2]
    for c in result["checkpoints"]:
        (draw,) = c["draws"]
        assert set(draw["sampled_auc_by_corruption"]) == {"shuffled", "truncated", "spliced"}
        assert 1.0 <= draw["expected_score_intact"] <= 9.0
        assert 0.0 <= draw["expected_auc"] <= 1.0
    assert result["demos"] == 8 and result["seconds_per_step"] > 0


def test_critic_warmup_expected_score_is_the_digit_distribution_mean():
    import torch

    from benchmarks.critic_warmup import run as critic_warmup

    class Tok:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [int(text) + 10]}  # digit d -> token d + 10

    class Model:
        def __init__(self, logits):
            self.logits = logits

        def __call__(self, ids):
            return type("Out", (), {"logits": self.logits.expand(1, ids.shape[1], -1)})()

    logits = torch.full((30,), -1e9)
    logits[17] = logits[19] = 0.0  # p(7) = p(9) = 1/2; token 5 (not a digit) is ignored
    logits[5] = 50.0
    policy = type(
        "P",
        (),
        {
            "tokenizer": Tok(),
            "device": "cpu",
            "model": Model(logits),
            "encode_prompt": lambda self, obs, n: [1, 2, 3],
        },
    )()
    item = type("Item", (), {"observation": {}})()
    assert critic_warmup.expected_scores(policy, [item, item]) == [8.0, 8.0]


@pytest.mark.slow
def test_critic_gate_mix_scores_each_mix_both_ways(tmp_path, tiny_path, monkeypatch):
    from benchmarks.critic_gate_mix import run as critic_gate_mix

    monkeypatch.setenv("SAGE_ENV_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "mix.json"
    result = critic_gate_mix.main(
        ["--model", tiny_path, "--items", "6", "--out", str(out)]
        + ["--mixes", "challenger=0.5,critic=0.5", "critic=1.0"]
    )
    assert json.loads(out.read_text()) == result
    assert [a["mix"] for a in result["arms"]] == [
        {"challenger": 0.5, "critic": 0.5},
        {"critic": 1.0},
    ]
    demos = 48  # the demo preset's warm-up size
    assert result["arms"][1]["critic_demonstrations"] == demos
    for arm in result["arms"]:
        assert 0.0 <= arm["expected_auc"] <= 1.0 and 0.0 <= arm["sampled_auc"] <= 1.0
    with pytest.raises(ValueError, match="role=share"):
        critic_gate_mix.parse_mix("challenger:0.5")
