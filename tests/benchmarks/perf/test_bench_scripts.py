"""The benchmarks/perf/ scripts: env_bench, speed_bench, gpu_check, hf_engine_gpu and
update_skip_bench on small inputs."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_env_bench_math_pairs_are_deterministic():
    from benchmarks.perf import env_bench

    pairs = env_bench.math_pairs(50)
    assert len(pairs) == 50 and pairs == env_bench.math_pairs(50)


@pytest.mark.parametrize("k", [1])
def test_speed_bench_reward_stand_in(k):
    from benchmarks.perf import speed_bench

    assert speed_bench.reward_fn(["\\boxed{1}", "def f(): pass", "nothing"]) == [1.0, 1.0, 0.0]


@pytest.mark.slow
def test_gpu_check_cpu_variant_records_every_figure(tmp_path):
    from benchmarks.perf import gpu_check

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


def test_hf_engine_gpu_cpu_variant_compares_the_old_and_new_engine(tmp_path):
    from benchmarks.perf import hf_engine_gpu

    out = tmp_path / "h.json"
    result = hf_engine_gpu.main(
        "--shape tiny --device cpu --dtype float32 --batch 3 --prompt 8 --tokens 5 "
        f"--stop-tokens 3 --out {out}".split()
    )
    assert json.loads(out.read_text()) == result and result["complete"]
    parts = result["parts"]
    assert parts["engine_old"]["tokens"] == parts["engine_new"]["tokens"] == 3 * 5
    assert parts["engine_new"]["same_tokens"] and parts["engine_new"]["max_logprob_diff"] <= 1e-5
    assert parts["generate_logits"]["post_max_abs_diff"] <= 1e-5
    assert parts["stops_old"]["tokens"] == parts["stops_new"]["tokens"] == 3 * 3
    assert {"step", "profile", "bare_generate"} <= set(parts)


def test_update_skip_bench_skips_the_constant_role_and_keeps_the_weights(tmp_path, tiny_path):
    from benchmarks.perf import update_skip_bench

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
