"""Losses and log-probabilities shared by the policy-gradient learners."""

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


def token_logprobs(
    model: torch.nn.Module,
    prompts: list[list[int]],
    completions: list[list[int]],
    pad_id: int,
    temperature: float = 1.0,
    device: torch.device | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of each completion token under ``model``.

    Sequences are right-padded to a ``[B, L]`` batch; logits are divided by ``temperature``
    (matching how they were sampled). Only the positions that predict completion tokens are
    projected onto the vocabulary (transformers' ``logits_to_keep`` with per-row positions),
    so a long prompt costs its transformer layers but no ``[L, V]`` logits.

    Returns:
        ``(logprobs, mask)``, both ``[B, C_max]``; mask is 1.0 on real completion tokens.
    """
    device = device or next(model.parameters()).device
    seqs = [p + c for p, c in zip(prompts, completions)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.tensor(s, dtype=torch.long)
        attn[r, : len(s)] = 1
    c_max = max(1, max(len(c) for c in completions))
    # logits only where a completion token is predicted: position len(p) - 1 + j predicts
    # completion token j (clipped to the last position; the mask drops the clipped ones)
    pos = torch.zeros((len(seqs), c_max), dtype=torch.long)
    for r, p in enumerate(prompts):
        pos[r] = torch.clamp(torch.arange(c_max) + max(len(p) - 1, 0), max=width - 2)
    targets = torch.gather(ids, 1, torch.clamp(pos + 1, max=width - 1))
    ids, attn, pos, targets = ids.to(device), attn.to(device), pos.to(device), targets.to(device)
    try:
        logits = model(
            input_ids=ids, attention_mask=attn, use_cache=False, logits_to_keep=pos
        ).logits
    except TypeError:  # a model without logits_to_keep: project every position, then pick
        full = model(input_ids=ids, attention_mask=attn, use_cache=False).logits
        logits = torch.take_along_dim(full, pos[..., None], dim=1)
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [B, C_max]
    mask = torch.zeros((len(seqs), c_max), device=device)
    for r, c in enumerate(completions):
        mask[r, : len(c)] = 1.0
    return logp * mask, mask


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
