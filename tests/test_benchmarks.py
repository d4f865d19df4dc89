import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_env_bench_math_pairs_are_deterministic():
    from perf import env_bench

    pairs = env_bench.math_pairs(50)
    assert len(pairs) == 50 and pairs == env_bench.math_pairs(50)


@pytest.mark.parametrize("k", [1])
def test_speed_bench_reward_stand_in(k):
    from perf import speed_bench

    assert speed_bench.reward_fn(["\\boxed{1}", "def f(): pass", "nothing"]) == [1.0, 1.0, 0.0]


@pytest.mark.slow
def test_learning_signal_records_every_figure_per_arm(tmp_path, tiny_path):
    from experiments.learning_signal import run as learning_signal

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
    from experiments.critic_verifier import run as critic_verifier

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


@pytest.mark.slow
def test_gpu_check_cpu_variant_records_every_figure(tmp_path):
    from perf import gpu_check

    out = tmp_path / "g.json"
    result = gpu_check.main(
        "--shapes tiny --device cpu --dtype float32 --engines hf,vllm --batch 2 --prompt 8 "
        f"--tokens 4 --seq 32 --micro 2 --lora-r 4 --rounds 1 --out {out}".split()
    )
    assert json.loads(out.read_text()) == result
    tiny = result["shapes"]["tiny"]
    assert tiny["rollout"]["hf"]["tokens"] == 2 * 4  # EOS suppressed: every row makes 4
    assert "error" in tiny["rollout"]["vllm"] or tiny["rollout"]["vllm"]["tokens"] == 8
    full, lora = tiny["update"]["full"], tiny["update"]["lora_r4"]
    assert full["trainable_params"] == tiny["params"]
    # LoRA r = 4 on 7 projections of 2 layers: r x (in + out) per projection
    assert 0 < lora["trainable_params"] < full["trainable_params"]
    assert result["trr_iteration"]["rollout/tokens"] > 0


def test_critic_warmup_probes_every_checkpoint_on_held_out_seeds(tmp_path, tiny_path):
    from experiments.critic_warmup import run as critic_warmup

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

    from experiments.critic_warmup import run as critic_warmup

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
    from experiments.critic_gate_mix import run as critic_gate_mix

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


def test_update_skip_bench_skips_the_constant_role_and_keeps_the_weights(tmp_path, tiny_path):
    from perf import update_skip_bench

    out = tmp_path / "skip.json"
    result = update_skip_bench.main(
        ["--model", tiny_path, "--repeats", "1", "--max-new-tokens", "6"]
        + ["--max-prompt-tokens", "48", "--out", str(out)]
    )
    assert json.loads(out.read_text()) == result
    buf = result["buffer"]
    assert buf["sequences"] == 32 and buf["by_role"]["critic"] == 8
    # the critic's constant rewards give it advantage 0, and nothing else is exactly 0
    assert result["skipped_share"] == buf["constant_role_share"] == 0.25
    assert result["skipped_share_no_skip"] == 0.0
    assert result["grad_rel_diff"] <= 1e-5 and result["max_grad_abs"] > 0
    assert result["max_param_diff"] <= 1e-6 < result["max_param_update"]
    assert len(result["update_s_runs"]["skip"]) == len(result["update_s_runs"]["no_skip"]) == 1
    for key in ("update_s_median", "ratio_skip_over_no_skip", "ratio_runs", "machine"):
        assert key in result
    assert isinstance(result["machine"]["contended"], bool)
