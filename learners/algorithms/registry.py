"""The learner protocol and the registry of algorithms.

A learner is anything with these four methods and an ``rng``; the training loop uses nothing
else (it samples through the policy and the rollout driver, not the learner)::

    observe(transitions) -> None            # buffer finished transitions with rewards
    update() -> dict[str, float]            # train on the buffer, return metrics
    state_dict() -> dict / load_state_dict(state)
    rng: random.Random                      # its own randomness, saved per rank on resume

Each algorithm owns a config dataclass. Register one with ``@register_learner(name)`` above
its class (or the plain call ``register_learner(name, cls, config_cls)``) and select it with
``sage-env train --algorithm NAME``; ``TrainConfig.learner`` is then a ``config_cls`` (flags
``--learner.*`` and the YAML ``learner:`` section follow). Algorithms in other packages are
found through the entry-point group ``sage_env.learners`` or ``sage-env train --import
MODULE`` (:mod:`learners.algorithms.plugins`). ``docs/guide/learners.md`` walks through one.
The built-in algorithms' modules are named in :data:`LEARNERS` and imported when a name is
first looked up, so this module imports no algorithm (and no algorithm's import of it makes
a cycle).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from learners.algorithms.hyperparams import as_config
from learners.algorithms.plugin_checks import check_learner_class
from learners.types import Transition
from sage_env.registry import Registry


@runtime_checkable
class Learner(Protocol):
    """What the training loop needs from an algorithm."""

    rng: random.Random
    """The learner's own random generator (minibatch order); saved and restored per rank
    (:func:`learners.distributed.collectives.rank_states`)."""

    def observe(self, transitions: Sequence[Transition]) -> None:
        """Buffer finished transitions."""
        ...

    def update(self) -> dict[str, float]:
        """Train on the buffer; return metrics."""
        ...

    def state_dict(self) -> dict:
        """Checkpointable state (not the model weights)."""
        ...

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        ...


@dataclass(frozen=True)
class LearnerSpec:
    """A registered algorithm.

    Attributes:
        name: Registry name (``TrainConfig.algorithm``).
        factory: ``(policy, config, temperature=..., seed=...) -> Learner``, usually the class.
        config_cls: The dataclass of its hyperparameters (``TrainConfig.learner``).
    """

    name: str
    factory: Callable[..., Learner]
    config_cls: type


def _learner_spec(
    name: str, cls: Callable[..., Learner], config_cls: type | None = None
) -> LearnerSpec:
    """The :class:`LearnerSpec` of ``cls``, checked (the record :data:`LEARNERS` stores)."""
    config_cls = config_cls or getattr(cls, "config_cls", None)
    check_learner_class(name, cls, config_cls)
    return LearnerSpec(name, cls, config_cls)


LEARNER_GROUP = "sage_env.learners"
"""Entry-point group of learners: ``name = "module:LearnerClass"`` (or a module that registers
its learners on import). Protocols: ``sage_env.protocols.PROTOCOL_GROUP``."""

LEARNERS: Registry[LearnerSpec] = Registry(
    "algorithm",
    builtins=(
        "learners.algorithms.trr",
        "learners.algorithms.grpo",
        "learners.algorithms.reinforce_pp",
        "learners.algorithms.ema_baseline",
    ),
    group=LEARNER_GROUP,
    entry=_learner_spec,
    hint="a learner in your own module: --import MODULE, or an entry point in group "
    f"{LEARNER_GROUP!r}",
)
"""Algorithm name (``TrainConfig.algorithm``) -> :class:`LearnerSpec`; the built-ins register
with ``@register_learner(name)`` above their class and are imported on the first lookup."""


def register_learner(
    name: str,
    cls: Callable[..., Learner] | None = None,
    config_cls: type | None = None,
    overwrite: bool = False,
) -> Any:
    """Make ``cls`` available as ``TrainConfig.algorithm = name`` with config ``config_cls``.

    As a decorator above the class, ``@register_learner("rloo")``; as a plain call,
    ``register_learner("rloo", RLOOLearner, RLOOConfig)``.

    Args:
        name: Registry name.
        cls: Learner class or factory ``(policy, config, temperature=..., seed=...)``;
            ``None``: return a decorator that registers the class it decorates.
        config_cls: Its hyperparameter dataclass; default ``cls.config_cls`` (a
            :class:`~learners.algorithms.pg.PolicyGradientLearner` subclass inherits ``PGConfig``).
        overwrite: Replace a learner registered under the same name.

    The learner is checked first
    (:func:`learners.algorithms.plugin_checks.check_learner_class`): it is a
    learner and not its config, its config is a dataclass, and its ``loss`` / ``advantages``
    hooks take the arguments the training loop passes and ``loss`` returns a tensor. A
    plugin imported with ``--import`` is so checked before the model loads.

    Returns:
        ``cls`` (or, without it, the decorator, which returns the class unchanged).

    Raises:
        ValueError: if the name is taken and ``overwrite`` is False.
        learners.algorithms.loss_result.LearnerPluginError: (a ``TypeError``) naming the file
            and line of what is wrong: no config dataclass given or found on ``cls``, a
            config class registered as the learner, a hook with the wrong signature.
    """
    return LEARNERS.register(name, cls, overwrite=overwrite, config_cls=config_cls)


def available_learners() -> list[str]:
    """Registered algorithm names (built-ins, entry points of ``sage_env.learners``), sorted."""
    return sorted(LEARNERS.names())


def learner_spec(name: str) -> LearnerSpec:
    """The :class:`LearnerSpec` registered as ``name`` (entry points are searched too).

    Raises:
        ValueError: on an unknown name; the message lists every registered one (built-ins,
            entry points, learners registered by ``--import``).
    """
    return LEARNERS.get(name)


def make_learner(name: str, policy: Any, config: Any = None, **kwargs: Any) -> Learner:
    """Build the learner registered as ``name``; ``config`` goes through :func:`as_config`.

    Raises:
        ValueError: on an unknown name (the message lists the registered ones) or a config
            that does not fit the algorithm.
    """
    spec = learner_spec(name)
    return spec.factory(policy, as_config(config, spec.config_cls), **kwargs)
