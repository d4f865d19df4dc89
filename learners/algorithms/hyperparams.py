"""Coercing an algorithm's hyperparameters into its config dataclass (a leaf module).

Shared by the registry (:func:`learners.algorithms.registry.make_learner`), the training
config and :class:`~learners.algorithms.pg.PolicyGradientLearner` itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def as_config(config: Any, cls: type) -> Any:
    """``config`` as an instance of the algorithm config ``cls``.

    ``None`` gives ``cls()``; an instance of ``cls`` is returned as is; an instance of a
    dataclass whose fields ``cls`` all has (e.g. the shared ``PGConfig`` for an algorithm
    whose config extends it) is copied into ``cls``, the other fields taking their defaults.

    Raises:
        ValueError: if ``config`` has fields that ``cls`` does not.
    """
    if config is None:
        return cls()
    if isinstance(config, cls):
        return config
    names = {f.name for f in dataclasses.fields(cls)}
    if not dataclasses.is_dataclass(config):
        raise ValueError(f"learner config must be a {cls.__name__}, got {config!r}")
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    extra = sorted(set(values) - names)
    if extra:
        raise ValueError(
            f"a {type(config).__name__} does not fit {cls.__name__}: it has no field(s) {extra}"
        )
    return cls(**values)
