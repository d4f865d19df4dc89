"""Task-Relative REINFORCE++ (TRR++), the default SAGE learner.

Each sequence's scalar reward becomes an advantage normalised by the mean and standard
deviation of its own (role, domain) group (AZR, arXiv 2505.03335, Sec. 3.3.5; SAGE, arXiv
2603.15255), then a PPO-clipped policy-gradient step (Schulman et al. 2017) with an optional KL
penalty to a frozen reference model (k1/k2/k3 estimators, Schulman 2020 "Approximating KL
divergence"), AdamW, gradient clipping and optional gradient checkpointing.
"""

from __future__ import annotations

import copy
import math
import random
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from learners.policy import HFPolicy
from learners.rollout import Transition


@dataclass
class TRRConfig:
    """Hyperparameters of :class:`TRRLearner`."""

    lr: float = 1e-6
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    clip_eps: float = 0.2
    """PPO ratio clip range: ratio is clipped to [1 - eps, 1 + eps]."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference (initial) model; 0 disables it and skips the
    reference forward pass."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    """Per-token KL estimator (k3 = exp(r) - r - 1 with r = log p_ref - log p, unbiased and
    non-negative)."""
    ppo_epochs: int = 1
    """Passes over the collected batch per update."""
    num_minibatches: int = 1
    """Optimizer steps per epoch; >1 makes later minibatches off-policy, where clipping acts."""
    micro_batch_size: int = 4
    """Sequences per forward/backward (gradient accumulation inside a minibatch)."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""
    adv_eps: float = 1e-6
    """Added to the group std before dividing."""
    loss_agg: Literal["token_mean", "seq_mean"] = "token_mean"
    """``token_mean``: every completion token weighs the same; ``seq_mean``: every sequence
    weighs the same (mean over its tokens, then over sequences)."""
    gradient_checkpointing: bool = True
    """Recompute activations in backward (less memory, about 30% more compute)."""
    max_seq_tokens: int = 2048
    """Prompt + completion longer than this keep the last tokens of the prompt."""


def group_normalised_advantages(
    rewards: Sequence[float], groups: Sequence[Hashable], eps: float = 1e-6
) -> list[float]:
    """Task-relative advantages: ``A_i = (r_i - mean_g) / (std_g + eps)`` within each group.

    ``std_g`` is the population standard deviation (ddof = 0). A group of one, or a group whose
    rewards are all equal, gets advantage 0 for every member (never NaN).

    Args:
        rewards: Scalar rewards, length N.
        groups: Group key per reward (e.g. ``(role, domain)``), length N.
        eps: Added to the std.

    Returns:
        N advantages.

    Raises:
        ValueError: if the lengths differ or a reward is not finite.
    """
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards but {len(groups)} group keys")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        if not math.isfinite(rewards[i]):
            raise ValueError(f"reward {i} is not finite: {rewards[i]}")
        members[g].append(i)
    adv = [0.0] * len(rewards)
    for idx in members.values():
        vals = [rewards[i] for i in idx]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
        if std < 1e-12:
            continue
        for i in idx:
            adv[i] = (rewards[i] - mean) / (std + eps)
    return adv


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
    (matching how they were sampled).

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
    ids, attn = ids.to(device), attn.to(device)
    logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, :-1]
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [B, L-1]
    c_max = max(len(c) for c in completions)
    out = torch.zeros((len(seqs), c_max), device=device)
    mask = torch.zeros((len(seqs), c_max), device=device)
    for r, (p, c) in enumerate(zip(prompts, completions)):
        if c:
            out[r, : len(c)] = logp[r, len(p) - 1 : len(p) - 1 + len(c)]
            mask[r, : len(c)] = 1.0
    return out, mask


class TRRLearner:
    """TRR++ on a shared :class:`HFPolicy`: all four roles update together.

    Protocol (see ``learners.base``): ``observe(transitions)`` buffers, ``update()`` trains on
    the buffer and clears it, ``state_dict()/load_state_dict()`` hold the optimizer state.

    Args:
        policy: The policy to train (its model is updated in place).
        config: Hyperparameters.
        temperature: Sampling temperature used for the rollouts (log-probs use the same).
        seed: Seed of minibatch shuffling.
    """

    def __init__(
        self,
        policy: HFPolicy,
        config: TRRConfig | None = None,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.policy = policy
        self.config = config or TRRConfig()
        self.temperature = temperature
        self.model = policy.model
        if self.config.gradient_checkpointing:
            policy.enable_gradient_checkpointing()
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=self.config.lr,
            weight_decay=self.config.weight_decay,
        )
        self.reference = None
        if self.config.kl_coef > 0:
            self.reference = copy.deepcopy(self.model).eval()
            for p in self.reference.parameters():
                p.requires_grad_(False)
        self.buffer: list[Transition] = []
        self.rng = random.Random(seed)

    def observe(self, transitions: Sequence[Transition]) -> None:
        """Add finished transitions (with rewards) to the update buffer."""
        self.buffer.extend(t for t in transitions if t.completion_ids)

    def update(self) -> dict[str, float]:
        """One TRR++ update on the buffered transitions; clears the buffer.

        Returns:
            Metrics: ``loss``, ``pg_loss``, ``kl``, ``clip_frac``, ``grad_norm``,
            ``adv_abs_mean``, ``num_sequences``, ``num_tokens``.
        """
        batch, self.buffer = self.buffer, []
        if not batch:
            return {"num_sequences": 0.0}
        cfg = self.config
        adv = group_normalised_advantages(
            [t.reward for t in batch], [(t.role, t.domain) for t in batch], cfg.adv_eps
        )
        for t in batch:  # keep the tail of overlong prompts
            overflow = len(t.prompt_ids) + len(t.completion_ids) - cfg.max_seq_tokens
            if overflow > 0:
                t.prompt_ids = t.prompt_ids[overflow:]
        self.model.train()
        totals = defaultdict(float)
        n_steps = 0
        order = list(range(len(batch)))
        for _ in range(cfg.ppo_epochs):
            self.rng.shuffle(order)
            for mb in _chunks(order, max(1, math.ceil(len(order) / cfg.num_minibatches))):
                stats = self._step([batch[i] for i in mb], [adv[i] for i in mb])
                for k, v in stats.items():
                    totals[k] += v
                n_steps += 1
        metrics = {k: v / max(n_steps, 1) for k, v in totals.items()}
        metrics.update(
            num_sequences=float(len(batch)),
            num_tokens=float(sum(len(t.completion_ids) for t in batch)),
            adv_abs_mean=sum(abs(a) for a in adv) / len(adv),
        )
        return metrics

    def _step(self, batch: list[Transition], adv: list[float]) -> dict[str, float]:
        cfg = self.config
        device = next(self.model.parameters()).device
        pad = self.policy.tokenizer.pad_token_id
        n_tokens = sum(len(t.completion_ids) for t in batch)
        self.optimizer.zero_grad(set_to_none=True)
        stats = defaultdict(float)
        for mb in _chunks(list(range(len(batch))), cfg.micro_batch_size):
            items = [batch[i] for i in mb]
            prompts = [t.prompt_ids for t in items]
            comps = [t.completion_ids for t in items]
            logp, mask = token_logprobs(self.model, prompts, comps, pad, self.temperature, device)
            old = torch.zeros_like(logp)
            for r, t in enumerate(items):
                old[r, : len(t.logprobs)] = torch.tensor(t.logprobs, device=device)
            a = torch.tensor([adv[i] for i in mb], device=device).unsqueeze(1)
            ratio = torch.exp(torch.clamp(logp - old, -20.0, 20.0))
            pg = -torch.min(ratio * a, torch.clamp(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps) * a)
            per_token = pg
            kl = torch.zeros_like(logp)
            if self.reference is not None:
                with torch.no_grad():
                    ref_logp, _ = token_logprobs(
                        self.reference, prompts, comps, pad, self.temperature, device
                    )
                kl = kl_penalty(logp, ref_logp, cfg.kl_estimator)
                per_token = pg + cfg.kl_coef * kl
            if cfg.loss_agg == "seq_mean":
                seq = (per_token * mask).sum(1) / mask.sum(1).clamp(min=1)
                loss = seq.sum() / len(batch)
            else:
                loss = (per_token * mask).sum() / max(n_tokens, 1)
            loss.backward()
            with torch.no_grad():
                stats["loss"] += float(loss)
                stats["pg_loss"] += float((pg * mask).sum()) / max(n_tokens, 1)
                stats["kl"] += float((kl * mask).sum()) / max(n_tokens, 1)
                clipped = ((ratio - 1).abs() > cfg.clip_eps).float()
                stats["clip_frac"] += float((clipped * mask).sum()) / max(n_tokens, 1)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
        stats["grad_norm"] = float(grad_norm)
        self.optimizer.step()
        return dict(stats)

    def state_dict(self) -> dict:
        """Optimizer and RNG state (model weights are saved by the policy)."""
        return {"optimizer": self.optimizer.state_dict(), "rng": self.rng.getstate()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.optimizer.load_state_dict(state["optimizer"])
        rng = state.get("rng")
        if rng is not None:
            self.rng.setstate(_as_tuple(rng))


def _as_tuple(x):
    return tuple(_as_tuple(v) for v in x) if isinstance(x, list) else x


def _chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]
