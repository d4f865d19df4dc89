"""Shared-prompt packing (issue 35): a prompt forwarded once for all its completions gives
the same log-probs, the same gradient and the same update as every sequence forwarded whole,
and a model that would not honour the packing is never packed."""

from __future__ import annotations

import copy
import logging
import random

import pytest
import torch

from learners.algorithms.micro_batches import shared_prompt_units
from learners.algorithms.pg_config import PGConfig
from learners.algorithms.trr import TRRLearner
from learners.policy import HFPolicy
from learners.policy.logprobs import shared_prompt_groups, shared_prompt_logprobs, token_logprobs
from learners.types import Transition


@pytest.fixture
def policy(tiny_path):
    return HFPolicy(tiny_path, device="cpu", seed=0)


def _batch(seed: int = 0, vocab: int = 200):
    """Two prompts shared 3x and 2x, one alone; completions of 1 to 9 tokens."""
    rng = random.Random(seed)
    a = [rng.randrange(vocab) for _ in range(30)]
    b = [rng.randrange(vocab) for _ in range(12)]
    c = [rng.randrange(vocab) for _ in range(7)]
    prompts = [a, b, a, a, b, c]
    comps = [[rng.randrange(vocab) for _ in range(n)] for n in (9, 1, 4, 7, 5, 3)]
    return prompts, comps


def test_groups_are_identical_prompts_in_first_seen_order():
    assert shared_prompt_groups([[1, 2], [3], [1, 2], [], [], [3]]) == [[0, 2], [1, 5], [3], [4]]


def test_packed_logprobs_and_gradient_equal_the_unpacked(policy):
    prompts, comps = _batch()
    pad = policy.tokenizer.pad_token_id
    weights = torch.linspace(-1.0, 1.0, 6 * 9).view(6, 9)

    def run(share: bool):
        policy.model.zero_grad(set_to_none=True)
        logp, mask = token_logprobs(policy.model, prompts, comps, pad, 0.7, share_prompts=share)
        (logp * weights).sum().backward()
        grad = torch.cat([p.grad.flatten() for p in policy.model.parameters()])
        return logp.detach(), mask, grad

    plain, plain_mask, plain_grad = run(False)
    packed, packed_mask, packed_grad = run(True)
    assert plain.shape == packed.shape == (6, 9)
    assert torch.equal(plain_mask, packed_mask)
    assert plain_mask.sum(1).tolist() == [9, 1, 4, 7, 5, 3]
    torch.testing.assert_close(packed, plain, atol=1e-5, rtol=0)
    assert (packed * (1 - packed_mask)).abs().max() == 0  # padding is exactly 0
    assert (packed_grad - plain_grad).norm() <= 1e-5 * plain_grad.norm()


def test_packing_forwards_each_prompt_once(policy):
    prompts, comps = _batch()
    seen = []
    hook = policy.model.register_forward_pre_hook(
        lambda m, a, kw: seen.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    try:
        shared_prompt_logprobs(policy.model, prompts, comps, policy.tokenizer.pad_token_id)
    finally:
        hook.remove()
    # rows: 30 + 9 + 4 + 7, 12 + 1 + 5, 7 + 3; width: the longest row
    assert seen == [(3, 50)]


def test_units_keep_a_group_whole_within_the_budget_and_split_it_beyond():
    prompts = [(1,) * 10, (2,) * 4, (1,) * 10, (), (1,) * 10, ()]
    comps = [5, 3, 6, 2, 7, 1]
    units, lengths = shared_prompt_units([0, 1, 2, 3, 4, 5], prompts, comps, 0)
    assert units == [[0, 2, 4], [1], [3], [5]]
    assert lengths == [10 + 5 + 6 + 7, 4 + 3, 2, 1]
    units, lengths = shared_prompt_units([0, 1, 2, 3, 4, 5], prompts, comps, 22)
    assert units == [[0, 2], [4], [1], [3], [5]]
    assert lengths == [21, 17, 7, 2, 1]
    assert max(n for n, u in zip(lengths, units) if len(u) > 1) <= 22


def _transitions(prompts, comps, rewards):
    return [
        Transition("solver_0", "solver", "math", "solve", p, c, [-2.0] * len(c), "", reward=r)
        for p, c, r in zip(prompts, comps, rewards)
    ]


@pytest.mark.parametrize("checkpointing", [False, True])
def test_an_update_with_packing_has_the_gradient_of_one_without(tiny_path, checkpointing):
    prompts, comps = _batch(seed=3)
    rewards = [1.0, 0.0, 0.5, 0.0, 1.0, 0.25]
    grads, metrics = {}, {}
    for share in (False, True):
        policy = HFPolicy(tiny_path, device="cpu", seed=0)
        cfg = PGConfig(
            lr=1e-3,
            share_prompts=share,
            gradient_checkpointing=checkpointing,
            micro_batch_size=2,
            micro_batch_tokens=64,
        )
        learner = TRRLearner(policy, cfg, temperature=0.7, seed=0)
        assert learner.share_prompts is share
        step = learner.optimizer.step

        def record(*a, _share=share, _step=step, _params=learner.params, **kw):
            # the clipped gradient AdamW gets
            grads[_share] = torch.cat([p.grad.flatten() for p in _params])
            return _step(*a, **kw)

        learner.optimizer.step = record
        learner.observe(_transitions(prompts, comps, rewards))
        metrics[share] = learner.update()
    assert grads[False].norm() > 0
    assert (grads[True] - grads[False]).norm() <= 1e-5 * grads[False].norm()
    for key in ("loss", "pg_loss", "num_tokens", "num_sequences", "grad_norm"):
        assert metrics[True][key] == pytest.approx(metrics[False][key], rel=1e-5, abs=1e-7)


class _IgnoresMask(torch.nn.Module):
    """A causal LM that drops the attention mask and position ids (would pack wrongly)."""

    def __init__(self, model):
        super().__init__()
        self.inner = model
        self.config = model.config

    def forward(self, input_ids, attention_mask=None, position_ids=None, **kw):
        return self.inner(input_ids=input_ids, **kw)


class _NoPositionIds(_IgnoresMask):
    def forward(self, input_ids, attention_mask=None, use_cache=False, logits_to_keep=0):
        return self.inner(
            input_ids=input_ids,
            attention_mask=attention_mask,
            use_cache=use_cache,
            logits_to_keep=logits_to_keep,
        )


@pytest.mark.parametrize("wrapper", [_IgnoresMask, _NoPositionIds])
def test_a_model_that_would_pack_wrongly_is_never_packed(policy, wrapper, caplog):
    assert policy.enable_prompt_sharing() is True
    policy.model = wrapper(copy.deepcopy(policy.model))
    with caplog.at_level(logging.WARNING, logger="learners.policy.hf_policy"):
        assert policy.enable_prompt_sharing() is False
    assert policy.share_prompts is False
    assert "shared-prompt packing stays off" in caplog.text
    cfg = PGConfig(share_prompts=True, gradient_checkpointing=False)
    learner = TRRLearner(policy, cfg, seed=0)
    assert learner.share_prompts is False


def test_share_prompts_false_turns_a_policy_s_packing_off(policy):
    assert policy.enable_prompt_sharing() is True
    learner = TRRLearner(policy, PGConfig(share_prompts=False), seed=0)
    assert learner.share_prompts is False and policy.share_prompts is False
