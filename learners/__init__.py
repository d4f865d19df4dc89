"""Learners for sage-env: policies, rollout engines, RL algorithms, training and evaluation.

Imports point down to :mod:`sage_env`, never the other way. The packages (``docs/design.md``
has the map): :mod:`learners.policy` (the model), :mod:`learners.engines` (generation
back-ends), :mod:`learners.rollout` (plays the environment), :mod:`learners.algorithms`
(policy-gradient learners and their registry), :mod:`learners.distributed` (ranks, DDP /
FSDP2), :mod:`learners.training` (the loop and what it needs), :mod:`learners.evaluation`
(benchmarks), :mod:`learners.reports` (run reports).

Importing this package is cheap and does not import torch: the names below load their module
on first use (PEP 562 ``__getattr__``, :mod:`learners.lazy`).
"""

from learners.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "DEFAULT_MODEL": "learners.policy.loading",
        "HFPolicy": "learners.policy.hf_policy",
        "Completion": "learners.types",
        "SamplingConfig": "learners.types",
        "RolloutConfig": "learners.engines.config",
        "RolloutEngine": "learners.engines.interface",
        "make_engine": "learners.engines.factory",
        "RolloutDriver": "learners.rollout",
        "RolloutResult": "learners.types",
        "Transition": "learners.types",
        "PGConfig": "learners.algorithms.pg_config",
        "TRRLearner": "learners.algorithms.trr",
        "group_normalised_advantages": "learners.algorithms.advantages",
    },
)
