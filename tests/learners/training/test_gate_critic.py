"""``TrainConfig.gate_critic = "warm_start"``: the quality gate reads a critic frozen at step 0
(issue 47: the training critic's ranking of execution questions decays under its format-only
reward), while the Critic still trains and plan reviews read the training weights."""

import pytest
import torch

import sage_env
from learners.algorithms.pg import PGConfig
from learners.policy import HFPolicy
from learners.rollout import RolloutDriver
from learners.training.build import _freeze_gate_critic
from learners.training.config import TrainConfig
from learners.training.monitors import CriticProbe
from learners.training.warmup import WarmupConfig
from learners.types import LoRAConfig, SamplingConfig
from sage_env import EnvConfig, RewardConfig
from sage_env.tasks.exec_tasks import load_exec_seeds

EXPECTED = EnvConfig(domains=("exec",), rewards=RewardConfig(critic_score_estimate="expected"))


def onehot(score):
    probs = [0.0] * 10
    probs[score - 1] = 1.0
    return probs


def test_frozen_scorer_keeps_the_step_0_distribution_after_an_update(tiny_path):
    policy = HFPolicy(tiny_path, device="cpu")
    obs = [{"system": "s", "user": f"question {i}", "prefix": "<score>"} for i in range(3)]
    with pytest.raises(RuntimeError, match="freeze_scorer"):
        policy.score_distribution(obs, frozen=True)
    before = policy.score_distribution(obs)
    policy.freeze_scorer()
    with torch.no_grad():  # an "update": every weight of the training model moves
        for p in policy.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    after = policy.score_distribution(obs)
    frozen = policy.score_distribution(obs, frozen=True)
    # the same weights (float32 sums may differ in the last bits between two modules)
    assert [list(r) for r in frozen] == [pytest.approx(list(r), abs=1e-7) for r in before]
    assert max(abs(a - b) for r, s in zip(after, before) for a, b in zip(r, s)) > 1e-4
    assert not any(p.requires_grad for p in policy.scorer.parameters())
    assert all(p.requires_grad for p in policy.model.parameters())


class Recorder:
    """A policy whose score distributions say which weights were read: 8 frozen, 2 live."""

    def __init__(self):
        self.calls = []

    def score_distribution(self, observations, temperature=1.0, max_prompt_tokens=0, frozen=False):
        self.calls.append((len(observations), frozen))
        return [onehot(8 if frozen else 2) for _ in observations]


def _requests():
    asks = {"score_probs": True}
    return [
        (0, "critic_0", {"user": "q"}, {"phase": "review_question", **asks}),
        (0, "critic_0", {"user": "p"}, {"phase": "review_plan", **asks}),
        (1, "critic_0", {"user": "q2"}, {"phase": "review_question", **asks}),
        (1, "solver_0", {"user": "s"}, {"phase": "solve"}),
    ]


def test_driver_reads_question_reviews_from_the_frozen_scorer_only():
    policy = Recorder()
    driver = RolloutDriver([sage_env.env(EXPECTED)], policy, SamplingConfig())
    assert driver._score_probs(_requests()) == {j: onehot(2) for j in (0, 1, 2)}
    assert policy.calls == [(3, False)]  # by default one call, the training weights
    policy.calls.clear()
    driver.frozen_score_phases = frozenset({"review_question"})
    got = driver._score_probs(_requests())
    assert got[0] == onehot(8) and got[2] == onehot(8)  # question reviews: frozen
    assert got[1] == onehot(2)  # the plan review: the training critic
    assert 3 not in got  # the solver asked for nothing
    assert sorted(policy.calls) == [(1, False), (2, True)]


class FrozenJudge:
    """Separates intact from corrupted probe items from its frozen weights only."""

    def __init__(self, probe):
        self.intact = {it.observation["user"]: it.intact for it in probe.items}

    def score_distribution(self, observations, temperature=1.0, max_prompt_tokens=0, frozen=False):
        good, bad = (8, 3) if frozen else (3, 8)
        return [onehot(good if self.intact[o["user"]] else bad) for o in observations]


@pytest.mark.parametrize("gate_critic, auc", [("warm_start", 1.0), ("policy", 0.0)])
def test_the_probe_calibrates_the_gate_on_the_critic_the_gate_reads(gate_critic, auc):
    cfg = TrainConfig(
        critic_probe_size=24, gate_calibration=True, gate_critic=gate_critic, env=EXPECTED
    )
    seeds = sage_env.load_seeds() + load_exec_seeds()
    probe = CriticProbe(cfg, seeds)
    report = probe(FrozenJudge(probe), [sage_env.env(cfg.env)])
    assert report["critic/auc"] == auc


def test_gate_critic_settings_are_checked():
    with pytest.raises(ValueError, match="gate_critic must be"):
        TrainConfig(gate_critic="frozen", env=EXPECTED)
    with pytest.raises(ValueError, match="critic_score_estimate = 'expected'"):
        TrainConfig(gate_critic="warm_start")  # sampled scores: no distribution to read
    assert TrainConfig(gate_critic="warm_start", env=EXPECTED).gate_critic == "warm_start"


class Freezer:
    def __init__(self):
        self.scorer = None

    def freeze_scorer(self):
        self.scorer = "frozen"


@pytest.mark.parametrize(
    "resume, warmup_steps, lora_r, frozen_now",
    [
        (False, 12, 0, True),  # a fresh run: its weights after the warm-up
        (True, 0, 0, True),  # resumed with no warm-up: cfg.model is its warm start
        (True, 12, 8, True),  # resumed LoRA: the warmed base, adapters at zero
        (True, 12, 0, False),  # resumed after a full warm-up: frozen after the resume
    ],
)
def test_gate_critic_freezes_step_0_weights_before_a_checkpoint_loads(
    resume, warmup_steps, lora_r, frozen_now
):
    cfg = TrainConfig(
        gate_critic="warm_start",
        env=EXPECTED,
        resume=resume,
        warmup=WarmupConfig(steps=warmup_steps),
        learner=PGConfig(lora=LoRAConfig(r=lora_r)),
    )
    policy = Freezer()
    _freeze_gate_critic(cfg, policy, existing=["ckpt"])
    assert (policy.scorer == "frozen") == frozen_now
    policy = Freezer()
    _freeze_gate_critic(TrainConfig(env=EXPECTED), policy, existing=[])
    assert policy.scorer is None  # gate_critic = "policy": nothing to freeze
