import importlib.util
import math
from pathlib import Path

import pytest
import torch

from learners.algorithms.advantages import (
    EMABaseline,
    group_mean_whitened_advantages,
    group_normalised_advantages,
)
from learners.algorithms.registry import LEARNERS, Learner, make_learner
from learners.algorithms.losses import clipped_policy_loss
from learners.algorithms.pg import PGConfig
from learners.policy import HFPolicy, SamplingConfig
from learners.types import Transition
from learners.policy.tiny import build_tiny_model
from learners.training.loop import TrainConfig, train
from sage_env import EnvConfig


def test_reinforce_pp_baseline_hand_example():
    # groups: a = [1, 0] -> centred [0.5, -0.5]; b = [2] -> [0]
    adv = group_mean_whitened_advantages([1.0, 0.0, 2.0], ["a", "a", "b"], eps=0.0)
    # global whitening of [0.5, -0.5, 0]: mean 0, std sqrt(1/6)
    s = math.sqrt(1 / 6)
    assert adv == pytest.approx([0.5 / s, -0.5 / s, 0.0])
    assert group_mean_whitened_advantages([3.0, 3.0], ["a", "b"]) == [0.0, 0.0]


def test_grpo_groups_by_prompt_trr_by_role_domain():
    # same rewards, different grouping: GRPO compares only samples of one prompt
    rewards = [1.0, 0.0, 1.0]
    by_prompt = group_normalised_advantages(rewards, ["p1", "p1", "p2"], eps=0.0)
    by_role = group_normalised_advantages(rewards, ["solver"] * 3, eps=0.0)
    assert by_prompt == pytest.approx([1.0, -1.0, 0.0])
    std = math.sqrt(2 / 9)
    assert by_role == pytest.approx([(1 - 2 / 3) / std, (0 - 2 / 3) / std, (1 - 2 / 3) / std])


def test_ema_baseline_hand_example():
    ema = EMABaseline(decay=0.5)
    assert ema([1.0, 0.0], ["r", "r"]) == [0.5, -0.5]  # first batch: baseline = batch mean
    assert ema.baselines == {"r": 0.5}
    # second batch: A = r - 0.5; then b = 0.5 * 0.5 + 0.5 * 1.0 = 0.75
    assert ema([1.0, 1.0], ["r", "r"]) == [0.5, 0.5]
    assert ema.baselines["r"] == 0.75
    with pytest.raises(ValueError):
        EMABaseline(decay=1.0)


def test_clipped_loss_values():
    logp = torch.log(torch.tensor([[1.5, 0.5]]))  # ratio 1.5 and 0.5 against old = 0
    old = torch.zeros(1, 2)
    loss, ratio = clipped_policy_loss(logp, old, torch.tensor([[1.0]]), clip_eps=0.2)
    assert ratio.tolist()[0] == pytest.approx([1.5, 0.5])
    # A > 0: min(r A, clip(r) A) = min(1.5, 1.2) = 1.2 and min(0.5, 0.8) = 0.5
    assert loss.tolist()[0] == pytest.approx([-1.2, -0.5])
    loss, _ = clipped_policy_loss(logp, old, torch.tensor([[-1.0]]), clip_eps=0.2)
    # A < 0: min(-1.5, -1.2) = -1.5 and min(-0.5, -0.8) = -0.8
    assert loss.tolist()[0] == pytest.approx([1.5, 0.8])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["trr", "grpo", "reinforce_pp", "ema"])
def test_every_algorithm_moves_weights_and_checkpoints(tiny, name):
    policy = HFPolicy(tiny, device="cpu", seed=0)
    learner = make_learner(name, policy, PGConfig(lr=1e-3, gradient_checkpointing=False))
    assert isinstance(learner, Learner)
    obs = [{"system": "s", "user": "q"}] * 4
    comps = policy.generate(obs, SamplingConfig(max_new_tokens=6))
    before = [p.detach().clone() for p in policy.model.parameters()]
    learner.observe(
        [
            Transition(
                "solver_0",
                "solver",
                "math",
                "solve",
                c.prompt_ids,
                c.completion_ids,
                c.logprobs,
                c.text,
                reward=float(i % 2),
            )
            for i, c in enumerate(comps)
        ]
    )
    metrics = learner.update()
    assert metrics["num_sequences"] == 4.0 and metrics["adv_abs_mean"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.model.parameters()))
    state = learner.state_dict()
    fresh = make_learner(name, policy, PGConfig(lr=1e-3, gradient_checkpointing=False))
    fresh.load_state_dict(state)
    assert fresh.state_dict()["extra"] == state["extra"]
    assert not hasattr(learner, "act")  # the loop samples through the policy, not the learner


def test_unknown_algorithm_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown algorithm 'ppo2'"):
        make_learner("ppo2", None)


@pytest.mark.slow
def test_freeze_drops_frozen_roles_from_the_update(tiny, tmp_path):
    cfg = TrainConfig(
        model=tiny,
        out=str(tmp_path / "f"),
        steps=1,
        rounds_per_step=2,
        max_new_tokens=4,
        device="cpu",
        freeze=("challenger", "critic", "planner"),
        env=EnvConfig(solver_samples=1),
        learner=PGConfig(gradient_checkpointing=False),
    )
    metrics = train(cfg, progress=False)
    # only solver transitions were trained on: 2 rounds x (probe? no: invalid) 1 solve each
    assert metrics["learner/num_sequences"] == metrics["count/solver"]
    with pytest.raises(ValueError, match="unknown role"):
        train(TrainConfig(model=tiny, out=str(tmp_path / "g"), freeze=("wizard",)))


def test_rlvr_protocol_trains_the_solver_alone(tiny, tmp_path):
    cfg = TrainConfig(
        model=tiny,
        out=str(tmp_path / "r"),
        steps=1,
        rounds_per_step=2,
        max_new_tokens=4,
        device="cpu",
        env=EnvConfig(protocol="rlvr", solver_samples=2),
        learner=PGConfig(gradient_checkpointing=False),
    )
    metrics = train(cfg, progress=False)
    assert metrics["count/solver"] == 4.0 and metrics["pool/size"] == 500.0


def test_tutorial_learner_registers_and_trains(tiny, tmp_path):
    path = Path(__file__).parents[3] / "examples" / "rloo_learner.py"
    spec = importlib.util.spec_from_file_location("rloo_learner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.rloo_advantages([1.0, 0.0, 0.5, 2.0], ["a", "a", "a", "b"]) == (
        pytest.approx([0.75, -0.75, 0.0, 0.0])
    )
    assert "rloo" in LEARNERS
    assert len(path.read_text().splitlines()) < 100
    cfg = TrainConfig(
        model=tiny,
        out=str(tmp_path / "rloo"),
        steps=1,
        rounds_per_step=2,
        max_new_tokens=4,
        device="cpu",
        algorithm="rloo",
        env=EnvConfig(protocol="rlvr", solver_samples=2),
        learner=PGConfig(gradient_checkpointing=False),
    )
    assert train(cfg, progress=False)["learner/num_sequences"] == 4.0
