"""Plugins: learners and protocols from other packages or from a user's own module.

Two ways in, both resolved before an algorithm or protocol name is looked up:

- **Entry points** (``importlib.metadata``), for an installed package. In its
  ``pyproject.toml``::

      [project.entry-points."sage_env.learners"]
      dapo = "my_pkg.dapo:DAPOLearner"          # registered as --algorithm dapo

      [project.entry-points."sage_env.protocols"]
      echo = "my_pkg.echo:EchoProtocol"         # registered as --protocol echo

  An entry point may also name a module (``"my_pkg.plugins"``) that registers what it
  defines itself on import. A learner class carries its config as ``config_cls``. The
  registries read these groups themselves (:class:`sage_env.registry.Registry`, groups
  ``learners.algorithms.registry.LEARNER_GROUP`` and ``sage_env.protocols.PROTOCOL_GROUP``).
- ``--import MODULE`` (repeatable) on ``sage-env train`` and ``sage-env play``: imports a
  module (dotted name, searched from the working directory as ``python -m`` does, or a
  ``.py`` path) whose top level registers a learner or a protocol:
  ``@register_learner("name")`` (:func:`learners.algorithms.registry.register_learner`) or
  ``@register_protocol("name")`` (:func:`sage_env.register_protocol`) above the class, or
  the same functions as plain calls.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path


def import_modules(names: list[str] | tuple[str, ...]) -> list[types.ModuleType]:
    """Import user modules (dotted names or ``.py`` paths) for the registrations they make.

    The working directory is put on ``sys.path`` first (as ``python -m`` does), so
    ``--import examples.dapo_clip_higher`` works from a checkout with the console script too.
    A module imported already (a ``.py`` file too) is not run again.

    Raises:
        ImportError: naming the module when it cannot be found or raises on import.
    """
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    modules = []
    for name in names:
        try:
            if name.endswith(".py"):
                path = Path(name).resolve()
                loaded = sys.modules.get(path.stem)
                if loaded is not None and getattr(loaded, "__file__", None) == str(path):
                    modules.append(loaded)  # imported already: as import does, not again
                    continue
                spec = importlib.util.spec_from_file_location(path.stem, path)
                if spec is None or spec.loader is None or not path.exists():
                    raise FileNotFoundError(f"no such file {str(path)!r}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
            else:
                module = importlib.import_module(name)
        except Exception as exc:
            raise ImportError(f"--import {name}: {type(exc).__name__}: {exc}") from exc
        modules.append(module)
    return modules
