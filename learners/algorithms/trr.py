"""Task-Relative REINFORCE++ (TRR++), the default SAGE learner.

Each sequence's reward is normalised by the mean and std of its own (role, domain) group —
the task-relative baseline of AZR (arXiv 2505.03335, Sec. 3.3.5) that SAGE (arXiv
2603.15255) uses for its four roles — then the shared PPO-clipped update of
:class:`~learners.algorithms.pg.PolicyGradientLearner`.
"""

from __future__ import annotations

from learners.algorithms.advantages import group_normalised_advantages
from learners.algorithms.pg import PolicyGradientLearner
from learners.algorithms.registry import register_learner
from learners.types import Transition


@register_learner("trr")
class TRRLearner(PolicyGradientLearner):
    """TRR++: advantages normalised within each (role, domain) group.

    Its hyperparameters are the shared :class:`~learners.algorithms.pg_config.PGConfig`.
    """

    advantage_group = "role_domain"

    def advantages(self, batch: list[Transition]) -> list[float]:
        """``(r - mean) / (std + eps)`` per :attr:`Transition.group_key` group.

        The key is (role, domain), or (role, ``exec/<mode>``) on AZR's execution tasks; a
        1-member group gets 0.
        """
        return group_normalised_advantages(
            [t.reward for t in batch], [t.group_key for t in batch], self.config.adv_eps
        )
