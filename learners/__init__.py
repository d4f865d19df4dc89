"""Learners for sage-env: policies, rollout engines, RL algorithms, training and evaluation.

Imports point down to :mod:`sage_env`, never the other way. The packages (``docs/design.md``
has the map): :mod:`learners.policy` (the model), :mod:`learners.engines` (generation
back-ends), :mod:`learners.rollout` (plays the environment), :mod:`learners.algorithms`
(policy-gradient learners and their registry), :mod:`learners.training` (the loop and what it
needs), :mod:`learners.evaluation` (benchmarks), :mod:`learners.reports` (run reports).

Importing this package is cheap and does not import torch: the names below load their module
on first use (PEP 562 ``__getattr__``). Old flat module paths (``learners.train``,
``learners.trr``, ...) still import, through :mod:`learners.old_paths`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from learners import old_paths

old_paths.install()

_EXPORTS: dict[str, str] = {
    "DEFAULT_MODEL": "learners.policy",
    "Completion": "learners.policy",
    "HFPolicy": "learners.policy",
    "SamplingConfig": "learners.policy",
    "RolloutConfig": "learners.engines",
    "RolloutEngine": "learners.engines",
    "make_engine": "learners.engines",
    "RolloutDriver": "learners.rollout",
    "RolloutResult": "learners.rollout",
    "Transition": "learners.rollout",
    "TRRConfig": "learners.algorithms.trr",
    "TRRLearner": "learners.algorithms.trr",
    "group_normalised_advantages": "learners.algorithms.advantages",
}
"""Public name -> the module that defines it."""

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from learners.algorithms.advantages import group_normalised_advantages
    from learners.algorithms.trr import TRRConfig, TRRLearner
    from learners.engines import RolloutConfig, RolloutEngine, make_engine
    from learners.policy import DEFAULT_MODEL, Completion, HFPolicy, SamplingConfig
    from learners.rollout import RolloutDriver, RolloutResult, Transition


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'learners' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
