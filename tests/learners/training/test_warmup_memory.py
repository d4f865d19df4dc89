"""The warm-up's memory: no converted rollout model held through it, the learner's activation
checkpointing on for its backward (docs/write-ups/memory.md, "The warm-up")."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import sage_env
from learners.algorithms.pg_config import PGConfig
from learners.training import build
from learners.training.config import TrainConfig
from learners.training.warmup import WarmupConfig


class _Policy:
    def __init__(self):
        self.calls: list[str] = []

    def release_engine(self):
        self.calls.append("release_engine")

    def enable_gradient_checkpointing(self):
        self.calls.append("checkpointing")


@pytest.mark.parametrize("checkpointing", [True, False])
def test_warm_up_releases_the_engine_and_follows_the_learners_checkpointing(
    tmp_path, monkeypatch, checkpointing
):
    policy = _Policy()
    seen = []

    def fake_warmup(pol, demos, wcfg, model, progress):
        seen.append(list(pol.calls))  # what had happened when the warm-up began
        return {"warmup/steps": float(wcfg.steps)}

    monkeypatch.setattr(build, "run_warmup", fake_warmup)
    cfg = TrainConfig(
        warmup=WarmupConfig(steps=3, num_demonstrations=4),
        learner=PGConfig(gradient_checkpointing=checkpointing),
    )
    seeds = sage_env.load_seeds()
    got = build._warm_up(cfg, tmp_path, [], policy, seeds, SimpleNamespace(task_ids=set()), False)
    assert got == {"warmup/steps": 3.0}
    assert seen == [["release_engine", "checkpointing"] if checkpointing else ["release_engine"]]


def test_no_warm_up_touches_nothing(tmp_path, monkeypatch):
    policy = _Policy()
    monkeypatch.setattr(build, "run_warmup", lambda *a: pytest.fail("no warm-up was asked for"))
    cfg = TrainConfig(warmup=WarmupConfig(steps=0))
    probe = SimpleNamespace(task_ids=set())
    assert build._warm_up(cfg, tmp_path, [], policy, [], probe, False) == {}
    assert policy.calls == []


def test_checkpointed_warm_up_trains_the_same_weights(tiny_path):
    import torch

    from learners.policy.hf_policy import HFPolicy
    from learners.training.warmup import run_warmup
    from sage_env.protocols.warmup import demonstrations_for

    demos = demonstrations_for("sage", ("math", "code"), sage_env.load_seeds(), 6, seed=0)
    wcfg = WarmupConfig(steps=2, batch_size=3, num_demonstrations=6, cache=False, lr=1e-3)
    weights, losses = [], []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        policy = HFPolicy(tiny_path, device="cpu", seed=0)
        start = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
        if checkpointing:
            policy.enable_gradient_checkpointing()
        m = run_warmup(policy, demos, wcfg, "tiny", progress=False)
        losses.append((m["warmup/loss_first"], m["warmup/loss_last"]))
        weights.append({k: v.detach().clone() for k, v in policy.model.state_dict().items()})
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    for k, w in weights[0].items():
        torch.testing.assert_close(weights[1][k], w, rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(w, start[k]) for k, w in weights[1].items())  # it did train
