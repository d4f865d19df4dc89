"""Module paths from before issue 24, kept importable.

Issue 24 grouped the flat ``learners/*.py`` modules into packages (``algorithms/``,
``training/``, ``evaluation/``, ``reports/``, ``policy/``, ``engines/``). Code written against
the old paths (``import learners.train``, ``from learners.trr import TRRLearner``,
``mock.patch("learners.train.X")``, checkpoints pickled with an old class path) keeps working:
:class:`MovedModules` answers an old name with the new module object itself (one module, two
names in ``sys.modules``), so patching through either name patches the same thing.
``learners/__init__.py`` installs it. New code should import the new paths.

This module imports nothing from ``learners`` at import time (it is a leaf).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

MOVED: dict[str, str] = {
    "learners.advantages": "learners.algorithms.advantages",
    "learners.base": "learners.algorithms.registry",
    "learners.checks": "learners.training.run_checks",
    "learners.ema_baseline": "learners.algorithms.ema_baseline",
    "learners.grpo": "learners.algorithms.grpo",
    "learners.losses": "learners.algorithms.losses",
    "learners.pg": "learners.algorithms.pg",
    "learners.plugins": "learners.algorithms.plugins",
    "learners.reinforce_pp": "learners.algorithms.reinforce_pp",
    "learners.trr": "learners.algorithms.trr",
    "learners.tiny": "learners.policy.tiny",
    "learners.train": "learners.training.loop",
    "learners.train_config": "learners.training.config",
    "learners.presets": "learners.training.presets",
    "learners.checkpoint": "learners.training.checkpoint",
    "learners.warmup": "learners.training.warmup",
    "learners.preflight": "learners.training.preflight",
    "learners.export": "learners.training.export",
    "learners.metrics": "learners.training.metrics",
    "learners.validation": "learners.training.monitors",
    "learners.benchmark_data": "learners.evaluation.benchmarks",
    "learners.decontam": "learners.evaluation.decontam",
    "learners.report": "learners.reports.run_report",
    "learners.compare": "learners.reports.compare",
    "learners.plots": "learners.reports.plots",
}
"""Old module path -> new module path."""


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Meta-path finder that imports an old path (:data:`MOVED`) as its new module."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        """A spec for an old name, else None (the other finders go on)."""
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        """The new module itself (imported now) instead of a fresh one."""
        module = importlib.import_module(MOVED[spec.name])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run; give the module back its own spec (the import system set ours)."""
        for old, real in self._specs.items():
            if sys.modules.get(MOVED[old]) is module:
                module.__spec__ = real


def install() -> None:
    """Put one :class:`MovedModules` first on ``sys.meta_path`` (idempotent).

    First, so that an old file left behind (a stale editable install) cannot shadow the new module.
    """
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
