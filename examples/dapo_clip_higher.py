"""DAPO's clip-higher as a sage-env learner: one overridden loss hook (docs/guide/learners.md).

DAPO (Yu et al. 2025, arXiv 2503.14476, Sec. 3.1) decouples PPO's clip range: the ratio of a
token is clipped to ``[1 - eps_low, 1 + eps_high]`` with ``eps_high > eps_low`` (0.28 vs
0.2), so low-probability tokens with positive advantage can grow further (against entropy
collapse). Per token, with ``r = exp(logp - old_logp)``:

    loss = -min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A)

averaged over all tokens of the minibatch (DAPO's token-level loss). Pair it with
``--learner.truncation mask`` for DAPO's overlong filtering. Advantages: TRR++'s.

Train:  sage-env train --import examples.dapo_clip_higher --algorithm dapo --steps 2
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from learners.algorithms.registry import register_learner
from learners.algorithms.pg import LossInputs, PGConfig
from learners.algorithms.trr import TRRLearner


@dataclass
class DAPOConfig(PGConfig):
    """``PGConfig`` (whose ``clip_eps`` is eps_low) plus DAPO's upper clip range."""

    clip_eps_high: float = 0.28
    """eps_high: the ratio is clipped to [1 - clip_eps, 1 + clip_eps_high] (DAPO: 0.28)."""


@register_learner("dapo", overwrite=True)  # overwrite: importing twice is fine
class DAPOLearner(TRRLearner):
    """TRR++ advantages with DAPO's decoupled (clip-higher) PPO surrogate."""

    config_cls = DAPOConfig

    def loss(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Clip-higher surrogate, ``token_mean``/``seq_mean`` by ``loss_agg``; no KL term."""
        lo, hi = 1 - self.config.clip_eps, 1 + self.config.clip_eps_high
        ratio = torch.exp(torch.clamp(inputs.logp - inputs.old_logp, -20.0, 20.0))
        a = inputs.advantages
        per_token = -torch.min(ratio * a, torch.clamp(ratio, lo, hi) * a)
        clipped = ((ratio < lo) | (ratio > hi)).float() * inputs.mask
        n = max(inputs.num_tokens, 1)
        return self.aggregate(per_token, inputs), {"clip_frac": clipped.sum().detach() / n}
