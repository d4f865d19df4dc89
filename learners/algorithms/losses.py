"""Losses shared by the policy-gradient learners: the KL penalty and the PPO-clip surrogate.

The log-probabilities they take come from the policy (:mod:`learners.policy.logprobs`).
"""

from __future__ import annotations

import torch


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(pi || pi_ref) estimate from sampled-token log-probs (same shape in/out)."""
    log_ratio = ref_logp - logp
    if estimator == "k1":
        return -log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio**2
    return torch.exp(log_ratio) - log_ratio - 1.0


def clipped_policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip_eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip surrogate (Schulman et al. 2017, arXiv 1707.06347, Eq. 7), negated.

    ``-min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)`` with ``ratio = exp(logp - old)``
    (the log-ratio is clamped to [-20, 20] against overflow).

    Args:
        logp: Current log-probs ``[B, T]``.
        old_logp: Sampling log-probs ``[B, T]``.
        advantages: ``[B, 1]`` (sequence-level) or ``[B, T]``.
        clip_eps: Clip range.

    Returns:
        ``(loss [B, T], ratio [B, T])``.
    """
    ratio = torch.exp(torch.clamp(logp - old_logp, -20.0, 20.0))
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    return -torch.min(ratio * advantages, clipped * advantages), ratio
