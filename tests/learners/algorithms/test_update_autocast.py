"""The update in bfloat16 autocast (``PGConfig.autocast_bf16``, issue 35): off by default and
then float32 exactly; on, the gradient AdamW gets is float32's up to bfloat16 rounding, and
the weights, gradients and optimiser state stay float32."""

from __future__ import annotations

import random

import pytest
import torch

from learners.algorithms.pg_config import PGConfig
from learners.algorithms.trr import TRRLearner
from learners.policy import HFPolicy
from learners.types import Transition


def _transitions(seed: int = 3, vocab: int = 200) -> list[Transition]:
    rng = random.Random(seed)
    prompts = [[rng.randrange(vocab) for _ in range(n)] for n in (30, 12, 30, 7)]
    comps = [[rng.randrange(vocab) for _ in range(n)] for n in (9, 5, 4, 6)]
    rewards = [1.0, 0.0, 0.5, 0.25]
    return [
        Transition("solver_0", "solver", "math", "solve", p, c, [-2.0] * len(c), "", reward=r)
        for p, c, r in zip(prompts, comps, rewards)
    ]


def _update(tiny_path, autocast: bool):
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    cfg = PGConfig(lr=1e-3, autocast_bf16=autocast, micro_batch_size=2)
    learner = TRRLearner(policy, cfg, temperature=0.7, seed=0)
    seen = {}
    step = learner.optimizer.step

    def record(*a, **kw):  # the clipped gradient AdamW gets, and the dtypes around it
        seen["grad"] = torch.cat([p.grad.flatten() for p in learner.params]).clone()
        seen["grad_dtypes"] = {p.grad.dtype for p in learner.params}
        return step(*a, **kw)

    learner.optimizer.step = record
    learner.observe(_transitions())
    metrics = learner.update()
    state_dtypes = {
        v.dtype
        for s in learner.optimizer.state.values()
        for v in s.values()
        if torch.is_tensor(v) and v.numel() > 1
    }
    return policy, learner, seen, metrics, state_dtypes


def test_autocast_is_off_by_default():
    assert PGConfig().autocast_bf16 is False


def test_autocast_off_is_float32_and_deterministic(tiny_path):
    _, _, a, ma, _ = _update(tiny_path, autocast=False)
    _, _, b, mb, _ = _update(tiny_path, autocast=False)
    assert torch.equal(a["grad"], b["grad"])
    assert ma["loss"] == mb["loss"]


def test_bf16_gradient_is_float32_gradient_up_to_rounding(tiny_path):
    _, _, ref, m_ref, _ = _update(tiny_path, autocast=False)
    policy, learner, got, m_got, state_dtypes = _update(tiny_path, autocast=True)
    assert ref["grad"].norm() > 0
    cos = torch.nn.functional.cosine_similarity(got["grad"], ref["grad"], dim=0)
    rel = (got["grad"] - ref["grad"]).norm() / ref["grad"].norm()
    assert cos > 0.99 and 0 < rel < 0.1  # rounded (not float32's), but the same direction
    assert m_got["loss"] == pytest.approx(m_ref["loss"], abs=0.05)
    assert m_got["num_tokens"] == m_ref["num_tokens"]
    # the casts are the forward's only: everything kept across steps stays float32
    assert got["grad_dtypes"] == {torch.float32}
    assert {p.dtype for p in policy.model.parameters()} == {torch.float32}
    assert state_dtypes == {torch.float32}
    assert not torch.is_autocast_enabled("cpu")  # left as found


def test_bf16_forward_really_runs_in_bfloat16(tiny_path):
    """The option is not a no-op: the linear layers see bfloat16 inputs under it."""
    policy = HFPolicy(tiny_path, device="cpu", seed=0)
    learner = TRRLearner(policy, PGConfig(autocast_bf16=True), temperature=1.0, seed=0)
    seen = []
    layer = next(m for m in policy.model.modules() if isinstance(m, torch.nn.Linear))
    hook = layer.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    try:
        with learner._autocast():
            logp, _ = policy.token_logprobs([[1, 2, 3]], [[4, 5]], 1.0)
    finally:
        hook.remove()
    assert seen and set(seen) == {torch.bfloat16}
    assert logp.dtype == torch.float32
