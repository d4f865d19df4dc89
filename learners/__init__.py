"""Learners for sage-env.

Policies (transformers) and their rollout engines, the rollout driver, TRR++ and the training loop.
Imports point down to :mod:`sage_env`, never the other way.
"""

from learners.engines import RolloutConfig, RolloutEngine, make_engine
from learners.policy import DEFAULT_MODEL, Completion, HFPolicy, SamplingConfig
from learners.rollout import RolloutDriver, RolloutResult, Transition
from learners.trr import TRRConfig, TRRLearner, group_normalised_advantages

__all__ = [
    "DEFAULT_MODEL",
    "Completion",
    "HFPolicy",
    "RolloutConfig",
    "RolloutDriver",
    "RolloutEngine",
    "RolloutResult",
    "SamplingConfig",
    "TRRConfig",
    "TRRLearner",
    "Transition",
    "group_normalised_advantages",
    "make_engine",
]
