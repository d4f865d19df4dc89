"""GRPO-style group normalisation (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300).

The group is the set of completions sampled for the *same prompt* by the same role — in SAGE,
the k solver attempts at one task — and each advantage is ``(r - mean) / (std + eps)`` within
it. Sequences whose prompt was sampled once (a challenger's proposal, a plan) get 0: GRPO
learns only from comparisons between samples of one prompt.
"""

from __future__ import annotations

from learners.algorithms.advantages import group_normalised_advantages
from learners.algorithms.pg import PolicyGradientLearner
from learners.algorithms.registry import register_learner
from learners.types import Transition


@register_learner("grpo")
class GRPOLearner(PolicyGradientLearner):
    """Advantages normalised among completions of the same (role, prompt)."""

    advantage_group = "role_prompt"

    def advantages(self, batch: list[Transition]) -> list[float]:
        """Group by ``(role, prompt token ids)`` and normalise within each group."""
        groups = [(t.role, tuple(t.prompt_ids)) for t in batch]
        return group_normalised_advantages([t.reward for t in batch], groups, self.config.adv_eps)
