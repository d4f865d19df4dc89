"""Task-Relative REINFORCE++ (TRR++), the default SAGE learner.

Each sequence's reward is normalised by the mean and std of its own (role, domain) group —
the task-relative baseline of AZR (arXiv 2505.03335, Sec. 3.3.5) that SAGE (arXiv
2603.15255) uses for its four roles — then the shared PPO-clipped update of
:class:`~learners.algorithms.pg.PolicyGradientLearner`.
"""

from __future__ import annotations

from learners.algorithms.pg import PolicyGradientLearner
from learners.algorithms.registry import register_learner


@register_learner("trr")
class TRRLearner(PolicyGradientLearner):
    """TRR++: ``(r - mean) / (std + eps)`` within each (role, domain) group.

    The key is :attr:`learners.types.Transition.group_key`: (role, domain), or (role,
    ``exec/<mode>``) on AZR's execution tasks; a 1-member group gets 0
    (:func:`learners.algorithms.advantages.group_normalised_advantages`). Its
    hyperparameters are the shared :class:`~learners.algorithms.pg_config.PGConfig`.
    """

    advantage_estimator = "group_normalised"
    advantage_group = "role_domain"
