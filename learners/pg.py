"""A PPO-clipped policy-gradient learner on a shared :class:`HFPolicy`.

Subclasses only choose how sequence rewards become advantages
(:meth:`PolicyGradientLearner.advantages`); everything else — token log-probs, the clipped
loss, the optional KL penalty to the initial model, AdamW, gradient clipping, micro-batching
— lives here once. See ``learners/trr.py`` (the default), ``grpo.py``, ``reinforce_pp.py`` and
``ema_baseline.py``.
"""

from __future__ import annotations

import copy
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import torch

from learners.losses import clipped_policy_loss, kl_penalty, token_logprobs
from learners.policy import HFPolicy, SamplingConfig
from learners.rollout import Transition


@dataclass
class PGConfig:
    """Hyperparameters shared by the policy-gradient learners."""

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

    ema_decay: float = 0.95
    """``ema`` learner only: decay of the per-role reward baseline."""

    def __post_init__(self) -> None:
        if not self.lr > 0 or self.clip_eps <= 0 or self.kl_coef < 0:
            raise ValueError(
                f"need lr > 0, clip_eps > 0, kl_coef >= 0; got lr={self.lr}, "
                f"clip_eps={self.clip_eps}, kl_coef={self.kl_coef}"
            )
        for name in ("ppo_epochs", "num_minibatches", "micro_batch_size", "max_seq_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


class PolicyGradientLearner:
    """Base of the policy-gradient learners: all roles update together on one model.

    Implements the ``Learner`` protocol (``learners.base``): ``act`` samples actions,
    ``observe(transitions)`` buffers, ``update()`` trains on the buffer and clears it,
    ``state_dict()/load_state_dict()`` hold the optimizer and RNG state. Subclasses override
    :meth:`advantages`.

    Args:
        policy: The policy to train (its model is updated in place).
        config: Hyperparameters.
        temperature: Sampling temperature used for the rollouts (log-probs use the same).
        seed: Seed of minibatch shuffling.
    """

    def __init__(
        self,
        policy: HFPolicy,
        config: PGConfig | None = None,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.policy = policy
        self.config = config or PGConfig()
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
        self.skip_zero_advantage = True
        """Give sequences with advantage exactly 0 (and no KL term) no forward/backward."""

    name = "pg"
    """Registry name."""

    def advantages(self, batch: list[Transition]) -> list[float]:
        """One advantage per transition (override in subclasses)."""
        raise NotImplementedError

    def act(
        self, observations: list[dict[str, str]], sampling: SamplingConfig | None = None
    ) -> list[str]:
        """Sample one action per observation: the observation's prefix + the completion."""
        comps = self.policy.generate(observations, sampling or SamplingConfig())
        return [(c.prefix or "") + c.text for c in comps]

    def observe(self, transitions: Sequence[Transition]) -> None:
        """Add finished transitions (with rewards) to the update buffer."""
        self.buffer.extend(t for t in transitions if t.completion_ids)

    def update(self) -> dict[str, float]:
        """One update on the buffered transitions; clears the buffer.

        Returns:
            Metrics: ``loss``, ``pg_loss``, ``kl``, ``clip_frac``, ``grad_norm``,
            ``adv_abs_mean``, ``num_sequences``, ``num_tokens``, ``skipped_share`` (share of
            sequences with advantage exactly 0 and no KL term, which need no
            forward/backward).
        """
        batch, self.buffer = self.buffer, []
        if not batch:
            return {"num_sequences": 0.0}
        cfg = self.config
        adv = self.advantages(batch)
        trimmed = []
        for t in batch:  # keep the tail of overlong prompts (a copy: callers keep theirs)
            overflow = len(t.prompt_ids) + len(t.completion_ids) - cfg.max_seq_tokens
            trimmed.append(replace(t, prompt_ids=t.prompt_ids[overflow:]) if overflow > 0 else t)
        batch = trimmed
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
        # A sequence whose advantage is exactly 0 adds exactly 0 to the loss when there is no
        # KL term (-ratio * 0), so it gets no forward/backward; the normalisers (n_tokens,
        # len(batch)) still count it, so the gradient is the same as with it.
        skip = self.skip_zero_advantage and self.reference is None
        active = [i for i in range(len(batch)) if adv[i] != 0.0 or not skip]
        stats["skipped_share"] = 1.0 - len(active) / max(len(batch), 1)
        # micro-batches of similar length waste little padding; the minibatch's gradient is
        # a sum over its micro-batches, so their order and grouping do not change it
        by_length = sorted(
            active, key=lambda i: len(batch[i].prompt_ids) + len(batch[i].completion_ids)
        )
        if not by_length:  # AdamW still steps (momentum), as it would on all-zero gradients
            for p in self.model.parameters():
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
        for mb in _chunks(by_length, cfg.micro_batch_size):
            items = [batch[i] for i in mb]
            prompts = [t.prompt_ids for t in items]
            comps = [t.completion_ids for t in items]
            logp, mask = token_logprobs(self.model, prompts, comps, pad, self.temperature, device)
            old = torch.zeros_like(logp)
            for r, t in enumerate(items):
                old[r, : len(t.logprobs)] = torch.tensor(t.logprobs, device=device)
            a = torch.tensor([adv[i] for i in mb], device=device).unsqueeze(1)
            pg, ratio = clipped_policy_loss(logp, old, a, cfg.clip_eps)
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
        return {
            "optimizer": self.optimizer.state_dict(),
            "rng": self.rng.getstate(),
            "extra": self.extra_state(),
        }

    def extra_state(self) -> dict:
        """Algorithm state to checkpoint (e.g. baselines); empty by default."""
        return {}

    def load_extra_state(self, state: dict) -> None:
        """Restore :meth:`extra_state`."""

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.optimizer.load_state_dict(state["optimizer"])
        rng = state.get("rng")
        if rng is not None:
            self.rng.setstate(_as_tuple(rng))
        self.load_extra_state(state.get("extra") or {})


def _as_tuple(x):
    return tuple(_as_tuple(v) for v in x) if isinstance(x, list) else x


def _chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]
