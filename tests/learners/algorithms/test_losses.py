"""Values of learners/algorithms/losses.py at non-default parameters and boundaries (issue 49:
the module's mutation tests). The log-prob functions it held then are tested in
tests/learners/policy/test_logprobs.py."""

from __future__ import annotations

import math

import pytest
import torch

from learners.algorithms.losses import clipped_policy_loss, kl_penalty


def test_kl_estimators_values():
    logp = torch.tensor([-1.0, -0.5, -2.0])
    ref = torch.tensor([-1.5, -0.5, -0.25])
    d = ref - logp  # log(pi_ref / pi)
    torch.testing.assert_close(kl_penalty(logp, ref, "k1"), torch.tensor([0.5, 0.0, -1.75]))
    torch.testing.assert_close(kl_penalty(logp, ref, "k2"), 0.5 * d**2)
    k3 = torch.exp(d) - d - 1.0
    torch.testing.assert_close(kl_penalty(logp, ref, "k3"), k3)
    torch.testing.assert_close(kl_penalty(logp, ref), k3)  # the default is k3
    assert kl_penalty(logp, ref, "k2")[2].item() == pytest.approx(0.5 * 1.75**2)
    assert kl_penalty(logp, ref, "k3")[0].item() == pytest.approx(math.exp(-0.5) + 0.5 - 1.0)


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_clipped_policy_loss_at_a_non_default_clip_range(eps):
    logp = torch.tensor([[math.log(1.5), math.log(1.5), math.log(0.5), math.log(0.5), 0.2]])
    old = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.3]])
    adv = torch.tensor([[2.0, -2.0, 2.0, -2.0, 1.0]])
    loss, ratio = clipped_policy_loss(logp, old, adv, eps)
    r = math.exp(-0.1)  # logp - old, not logp + old
    torch.testing.assert_close(ratio, torch.tensor([[1.5, 1.5, 0.5, 0.5, r]]))
    want = [-2.0 * (1 + eps), 3.0, -1.0, 2.0 * (1 - eps), -r]
    torch.testing.assert_close(loss, torch.tensor([want]))


def test_clipped_policy_loss_broadcasts_a_sequence_advantage():
    logp = torch.tensor([[0.0, math.log(2.0)], [0.0, math.log(0.25)]])
    loss, _ = clipped_policy_loss(logp, torch.zeros(2, 2), torch.tensor([[1.0], [-1.0]]), 0.2)
    torch.testing.assert_close(loss, torch.tensor([[-1.0, -1.2], [1.0, 0.8]]))


def test_log_ratio_is_clamped_to_plus_minus_20():
    logp = torch.tensor([25.0, -25.0, 20.0, -20.0, 1000.0, -1000.0])
    loss, ratio = clipped_policy_loss(logp, torch.zeros(6), torch.ones(6), 0.2)
    e = math.exp(20.0)
    torch.testing.assert_close(ratio, torch.tensor([e, 1 / e, e, 1 / e, e, 1 / e]), rtol=1e-6, atol=0)
    assert torch.isfinite(loss).all()
    # the clamp is on logp - old, so an old log-prob of -30 and a new one of -5 also cap at e^20
    _, r = clipped_policy_loss(torch.tensor([-5.0]), torch.tensor([-30.0]), torch.ones(1), 0.2)
    torch.testing.assert_close(r, torch.tensor([e]), rtol=1e-6, atol=0)
