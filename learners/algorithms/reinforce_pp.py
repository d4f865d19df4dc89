"""REINFORCE++-baseline (Hu 2025, arXiv 2501.03262; OpenRLHF's ``reinforce_baseline``).

Subtract the mean reward of each (role, prompt) group, then whiten the centred rewards across
the whole batch. Unlike GRPO it does not divide by each small group's std, which is noisy with
few samples; the global whitening keeps the step size stable.
"""

from __future__ import annotations

from learners.algorithms.pg import PolicyGradientLearner
from learners.algorithms.registry import register_learner


@register_learner("reinforce_pp")
class ReinforcePPBaselineLearner(PolicyGradientLearner):
    """Group-mean baseline per (role, prompt), then global whitening.

    The estimator is :func:`learners.algorithms.advantages.group_mean_whitened_advantages`.
    """

    advantage_estimator = "group_mean_whitened"
    advantage_group = "role_prompt"
