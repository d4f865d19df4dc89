"""GRPO-style group normalisation (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300).

The group is the set of completions sampled for the *same prompt* by the same role — in SAGE,
the k solver attempts at one task — and each advantage is ``(r - mean) / (std + eps)`` within
it. Sequences whose prompt was sampled once (a challenger's proposal, a plan) get 0: GRPO
learns only from comparisons between samples of one prompt.
"""

from __future__ import annotations

from learners.algorithms.pg import PolicyGradientLearner
from learners.algorithms.registry import register_learner


@register_learner("grpo")
class GRPOLearner(PolicyGradientLearner):
    """Advantages normalised among completions of the same (role, prompt token ids).

    The estimator is :func:`learners.algorithms.advantages.group_normalised_advantages`.
    """

    advantage_estimator = "group_normalised"
    advantage_group = "role_prompt"
