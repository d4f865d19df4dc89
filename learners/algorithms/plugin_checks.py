"""Checks a learner plugin when it is registered (before the model loads): that it is a
learner and not its config, that its config is a dataclass, and that its hooks (``loss``,
``advantages``) have the signatures the training loop calls, naming the user's file and line.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from learners.algorithms.loss_result import (
    LOSS_RETURN,
    LearnerPluginError,
    check_loss_result,
    where,
)

LEARNER_METHODS = ("observe", "update", "state_dict", "load_state_dict")
"""What the training loop calls on a learner (:class:`learners.algorithms.registry.Learner`)."""


def _hook_problem(cls: type, name: str, arguments: int) -> str | None:
    """A problem with hook ``name`` of ``cls`` (called as ``self.name(*arguments)``)."""
    fn = inspect.getattr_static(cls, name, None)
    if fn is None:
        return None
    if isinstance(fn, (staticmethod, classmethod)):
        return f"{name} must be a plain method (def {name}(self, ...)), not a {type(fn).__name__}"
    if not callable(fn):
        return f"{name} must be a method, got {fn!r}"
    try:
        inspect.signature(fn).bind(object(), *([None] * arguments))
    except TypeError:
        return (
            f"{name}{inspect.signature(fn)} cannot be called as self.{name}("
            + ", ".join(["inputs"] if name == "loss" else ["batch"])
            + ")"
        )
    except ValueError:  # no signature (a builtin): nothing to check
        return None
    ret = inspect.signature(fn).return_annotation
    if name == "loss" and ret in (float, int, "float", "int"):
        return (
            f"loss is annotated to return {getattr(ret, '__name__', ret)}; it must " + LOSS_RETURN
        )
    return None



def check_learner_class(name: str, cls: Any, config_cls: Any) -> None:
    """Check a learner before it is registered: is it one, with a dataclass config and hooks.

    Checks that ``cls`` is a learner class (it has :data:`LEARNER_METHODS`; a dataclass
    registered in its place is named as the config it probably is) or a factory function;
    that ``config_cls`` is a dataclass and not a learner; and, for a subclass of
    :class:`~learners.algorithms.pg.PolicyGradientLearner`, that ``loss(inputs)`` and
    ``advantages(batch)`` take one argument, that ``loss`` is not annotated to return a
    number, and that a ``loss`` override called on a tiny synthetic micro-batch returns
    ``(tensor with grad, dict)`` (skipped when it needs state a bare instance lacks).

    Raises:
        LearnerPluginError: naming the learner, its file and line, what is wrong and the fix.
    """
    at = where(cls)
    label = f"learner {name!r} ({at})"
    missing = [m for m in LEARNER_METHODS if not callable(getattr(cls, m, None))]
    if isinstance(cls, type) and missing and dataclasses.is_dataclass(cls):
        raise LearnerPluginError(
            f"{label}: {cls.__name__} is a dataclass without {', '.join(missing)}: "
            "it looks like the learner's config. Register the learner class: "
            f"register_learner({name!r}, MyLearner, config_cls={cls.__name__})"
        )
    if not callable(cls):
        raise LearnerPluginError(f"{label}: expected a learner class or factory, got {cls!r}")
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise LearnerPluginError(
            f"{label}: config_cls must be a dataclass (@dataclass class MyConfig(PGConfig)), "
            f"got {config_cls!r}"
        )
    if isinstance(cls, type) and missing:
        raise LearnerPluginError(
            f"{label}: {cls.__name__} lacks {', '.join(missing)}; a learner implements "
            f"{', '.join(LEARNER_METHODS)} (subclass learners.algorithms.pg.PolicyGradientLearner)"
        )
    if all(callable(getattr(config_cls, m, None)) for m in ("observe", "update")):
        raise LearnerPluginError(
            f"{label}: config_cls {config_cls.__name__} is a learner, not a config dataclass"
        )
    from learners.algorithms.pg import PolicyGradientLearner

    if not (isinstance(cls, type) and issubclass(cls, PolicyGradientLearner)):
        return
    for hook, arguments in (("loss", 1), ("advantages", 1), ("aggregate", 2)):
        problem = _hook_problem(cls, hook, arguments)
        if problem:
            fn = inspect.getattr_static(cls, hook)
            raise LearnerPluginError(f"learner {name!r} ({where(fn)}): {problem}")
    if cls.loss is not PolicyGradientLearner.loss:
        _dry_run_loss(name, cls, config_cls)



def _dry_run_loss(name: str, cls: type, config_cls: type) -> None:
    """Call ``cls.loss`` on a 2 x 3 synthetic micro-batch; raise if what it returns is wrong."""
    import torch

    from learners.algorithms.pg import LossInputs

    try:
        config = config_cls()
    except Exception:  # a config without defaults: nothing to try
        return
    learner = object.__new__(cls)
    learner.config = config
    learner.temperature = 1.0
    learner.use_reference = False
    learner.skip_zero_advantage = True
    logp = torch.full((2, 3), -1.0, requires_grad=True)
    inputs = LossInputs(
        logp=logp,
        old_logp=torch.full((2, 3), -1.0),
        advantages=torch.tensor([[1.0], [-1.0]]),
        mask=torch.ones(2, 3),
        ref_logp=None,
        num_tokens=6,
        num_sequences=2,
    )
    try:
        result = cls.loss(learner, inputs)
    except Exception:  # it needs state a bare instance lacks; the runtime check covers it
        return
    try:
        check_loss_result(learner, result)
    except LearnerPluginError as exc:
        raise LearnerPluginError(f"learner {name!r}: {exc} (found on a test micro-batch)") from None
