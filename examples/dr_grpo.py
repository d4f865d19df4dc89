"""Dr. GRPO as a sage-env learner: its advantage and loss normalisation (docs/guide/learners.md).

Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective" (arXiv
2503.20783, Sec. 3.1) remove two biases of GRPO. (1) The advantage is not divided by the
group's reward std, which up-weights prompts that are nearly always or never solved:

    A_i = r_i - mean_g r          (g = the completions of one prompt by one role)

(2) The token losses of a sequence are not divided by its own length (which favours long
wrong answers) but summed and divided by one constant, the generation budget:

    loss = sum_i sum_t l_{i,t} / (num_sequences * loss_length)

Train:  sage-env train --import examples.dr_grpo --algorithm dr_grpo --steps 2
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from learners.algorithms.advantages import group_centred_advantages
from learners.algorithms.registry import register_learner
from learners.algorithms.pg import LossInputs, PGConfig, PolicyGradientLearner
from learners.types import Transition


@dataclass
class DrGRPOConfig(PGConfig):
    """``PGConfig`` plus the constant that replaces the per-sequence length."""

    loss_length: float = 512.0
    """Tokens each sequence's loss sum is divided by; set it to the generation budget."""


@register_learner("dr_grpo", overwrite=True)  # overwrite: importing twice is fine
class DrGRPOLearner(PolicyGradientLearner):
    """Group-centred advantages per (role, prompt), loss normalised by a constant."""

    config_cls = DrGRPOConfig

    def advantages(self, batch: list[Transition]) -> list[float]:
        """``r - mean`` within (role, prompt token ids); 0 for a prompt sampled once."""
        groups = [(t.role, tuple(t.prompt_ids)) for t in batch]
        return group_centred_advantages([t.reward for t in batch], groups)

    def loss(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The default PPO-clip (+ KL) per-token loss, summed, over a constant length."""
        per_token, metrics = self.per_token_loss(inputs)
        denominator = max(inputs.num_sequences, 1) * self.config.loss_length
        return (per_token * inputs.mask).sum() / denominator, metrics
