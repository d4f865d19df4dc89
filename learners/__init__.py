"""Learners for sage-env.

Policies (transformers), the rollout driver, TRR++ and the training loop.
Imports point down to :mod:`sage_env`, never the other way.
"""

from learners.policy import DEFAULT_MODEL, Completion, HFPolicy, SamplingConfig
from learners.rollout import RolloutDriver, RolloutResult, Transition
from learners.trr import TRRConfig, TRRLearner, group_normalised_advantages

__all__ = [
    "DEFAULT_MODEL",
    "Completion",
    "HFPolicy",
    "RolloutDriver",
    "RolloutResult",
    "SamplingConfig",
    "TRRConfig",
    "TRRLearner",
    "Transition",
    "group_normalised_advantages",
]
