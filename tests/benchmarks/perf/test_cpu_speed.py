"""benchmarks/perf/cpu_speed.py: its train command parses, and its medians skip the warm-up step."""


import pytest


def test_cpu_speed_command_is_a_valid_demo_train_command(tmp_path):
    import tyro

    from benchmarks.perf import cpu_speed
    from learners.training.config import config_type
    from learners.training.presets import PRESETS

    cmd = cpu_speed.command("ct2", tmp_path / "run", 3, 5, "some/model", ["--rounds-per-step", "2"])
    assert cmd[1:4] == ["-m", "learners", "train"] and cmd[4:6] == ["--preset", "demo"]
    cfg = tyro.cli(config_type("trr"), default=PRESETS["demo"], args=cmd[6:])
    assert cfg.rollout.engine == "ct2" and cfg.steps == 3 and cfg.seed == 5
    assert cfg.warmup.steps == 0 and cfg.val_every == 0 and cfg.critic_probe_size == 0
    assert not cfg.gate_calibration and cfg.model == "some/model" and cfg.rounds_per_step == 2


def test_cpu_speed_summary_is_the_median_of_the_steps_after_the_first():
    from benchmarks.perf import cpu_speed

    def row(step, tps, rss):
        return {
            "step": step,
            "rollout/tokens_per_s": tps,
            "time/step_s": 10.0 * step,
            "memory/peak_rss_mb": rss,
        }

    rows = [row(1, 1.0, 900.0), row(2, 4.0, 700.0), row(3, 6.0, 800.0), row(4, 5.0, 600.0)]
    s = cpu_speed.summarise(rows)
    assert s["generate_tokens_per_s"] == 5.0  # median of steps 2-4; step 1 is the warm-up
    assert s["step_s"] == 30.0 and s["steps_timed"] == 3
    assert s["peak_rss_mb"] == 900.0  # the peak over every step
    assert s["sync_s"] is None  # not logged by this engine
    assert cpu_speed.summarise([row(1, 2.0, 1.0)])["generate_tokens_per_s"] == pytest.approx(2.0)


def test_cpu_speed_variants_make_one_arm_per_engine_and_variant():
    from benchmarks.perf import cpu_speed

    assert cpu_speed.arms(["hf", "ct2"], []) == [("hf", "hf", []), ("ct2", "ct2", [])]
    kinds = cpu_speed.arms(
        ["ct2"], ["seq=--env.turn-order sequential", "wide=--env.turn-order interleaved"]
    )
    assert kinds == [
        ("ct2/seq", "ct2", ["--env.turn-order", "sequential"]),
        ("ct2/wide", "ct2", ["--env.turn-order", "interleaved"]),
    ]
    with pytest.raises(ValueError, match="NAME=FLAGS"):
        cpu_speed.arms(["ct2"], ["--env.turn-order sequential"])
    with pytest.raises(ValueError, match="repeat"):
        cpu_speed.arms(["ct2"], ["a=", "a=--seed 1"])


def test_update_memory_buffer_is_eight_demo_turns_a_round(tiny_path):
    from benchmarks.perf import update_memory
    from learners.policy import HFPolicy

    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    buffer = update_memory.build_buffer(policy, 2, seed=0)
    assert len(buffer) == 16
    assert [t.phase for t in buffer[:8]] == [
        "challenge", "plan", "review_question", "review_plan", "probe", "probe", "solve", "solve"
    ]
    for t in buffer:
        lo, hi = update_memory.LENGTHS[t.phase]
        assert lo <= len(t.completion_ids) <= hi and len(t.logprobs) == len(t.completion_ids)
    assert len({t.reward for t in buffer}) == 16  # distinct rewards: nothing is skipped
    assert {t.domain for t in buffer} == {"math", "code"}
