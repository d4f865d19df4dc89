"""The learner protocol and the registry of algorithms.

A learner is anything with these five methods; the training loop uses nothing else::

    act(observations) -> list[str]          # sample actions (text) for observations
    observe(transitions) -> None            # buffer finished transitions with rewards
    update() -> dict[str, float]            # train on the buffer, return metrics
    state_dict() -> dict / load_state_dict(state)

Register a new algorithm with :func:`register_learner` and select it with
``sage-env train --algorithm NAME``. ``docs/learners.md`` walks through one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from learners.rollout import Transition


@runtime_checkable
class Learner(Protocol):
    """What the training loop needs from an algorithm."""

    def act(self, observations: list[dict[str, str]]) -> list[str]:
        """Sample one action per observation."""
        ...

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


LEARNERS: dict[str, Callable[..., Learner]] = {}
"""Algorithm name -> factory ``(policy, config, temperature=..., seed=...) -> Learner``."""


def register_learner(name: str, factory: Callable[..., Learner], overwrite: bool = False) -> None:
    """Make ``factory`` available as ``TrainConfig.algorithm = name``.

    Raises:
        ValueError: if the name is taken and ``overwrite`` is False.
    """
    if name in LEARNERS and not overwrite:
        raise ValueError(f"learner {name!r} is already registered (pass overwrite=True)")
    LEARNERS[name] = factory


def make_learner(name: str, *args, **kwargs) -> Learner:
    """Build the learner registered as ``name``.

    Raises:
        ValueError: on an unknown name (the message lists the registered ones).
    """
    if name not in LEARNERS:
        raise ValueError(f"unknown algorithm {name!r}; registered: {sorted(LEARNERS)}")
    return LEARNERS[name](*args, **kwargs)


def _register_builtins() -> None:
    from learners.ema_baseline import EMABaselineLearner
    from learners.grpo import GRPOLearner
    from learners.reinforce_pp import ReinforcePPBaselineLearner
    from learners.trr import TRRLearner

    for cls in (TRRLearner, GRPOLearner, ReinforcePPBaselineLearner, EMABaselineLearner):
        register_learner(cls.name, cls, overwrite=True)


_register_builtins()
