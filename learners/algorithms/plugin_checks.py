"""Checks of a learner plugin when it is registered, before the model loads.

That it is a learner and not its config, that its config is a dataclass, that its hooks (``loss``,
``advantages``) have the signatures the training loop calls and return what it needs on a
synthetic batch, naming the user's file and line; and a warning
(:class:`LearnerStateWarning`) for a learner that keeps state its checkpoint does not save.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import warnings
from typing import Any

from learners.algorithms.loss_result import (
    LOSS_RETURN,
    LearnerPluginError,
    check_advantages,
    check_loss_result,
    where,
)

LEARNER_METHODS = ("observe", "update", "state_dict", "load_state_dict")
"""What the training loop calls on a learner (:class:`learners.algorithms.registry.Learner`)."""

STATE_DOCS = "docs/guide/learners.md#a-learner-with-state"
"""Where ``extra_state`` / ``load_extra_state`` are documented (the warning points there)."""


class LearnerStateWarning(UserWarning):
    """A learner keeps state across updates that ``state_dict()`` does not save.

    A run continued with ``--resume`` would start that state afresh.
    """


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
    number, that a ``loss`` override called on a tiny synthetic micro-batch returns
    ``(tensor with grad, dict)`` (skipped when it needs state a bare instance lacks), and
    that ``advantages`` on a synthetic batch of 6 transitions returns 6 finite numbers
    (:func:`_dry_run_advantages`; skipped when the learner cannot be built without a model).

    Warns:
        LearnerStateWarning: when ``observe`` or ``advantages`` on that batch changed an
            attribute the learner adds to the base class's, and the learner overrides
            neither ``extra_state`` nor ``state_dict`` (:func:`_kept_state`).

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
    if cls.advantages is not PolicyGradientLearner.advantages:
        _dry_run_advantages(name, cls, config_cls)


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


class _StubPolicy:
    """What ``PolicyGradientLearner.__init__`` asks of a policy, without a model.

    One trainable parameter; LoRA is refused (such a learner is checked without ``__init__``).
    """

    lora = None

    def __init__(self) -> None:
        import torch

        self.param = torch.nn.Parameter(torch.zeros(1))

    def enable_lora(self, config: Any) -> None:
        raise RuntimeError("no LoRA on the stub policy")

    def enable_gradient_checkpointing(self) -> None:
        """Nothing to checkpoint."""

    def trainable_parameters(self) -> list:
        return [self.param]

    def keep_reference(self) -> None:
        """No reference model."""


def _built(cls: type, config: Any) -> Any:
    """``cls(stub policy, config)``, or a bare instance (``__init__`` not run) when that fails."""
    try:
        return cls(_StubPolicy(), config)
    except Exception:  # noqa: BLE001 - it needs a real policy: check what a bare one can do
        learner = object.__new__(cls)
        learner.config = config
        learner.temperature = 1.0
        learner.use_reference = False
        learner.skip_zero_advantage = True
        learner.buffer = []
        return learner


@functools.cache
def _base_attributes() -> frozenset[str]:
    """The attributes ``PolicyGradientLearner.__init__`` sets.

    Saved by its ``state_dict``, configuration, or cleared every update.
    """
    from learners.algorithms.pg import PGConfig, PolicyGradientLearner

    return frozenset(vars(PolicyGradientLearner(_StubPolicy(), PGConfig())))


def _test_batch() -> list:
    """6 transitions as ``update`` gives ``advantages`` them.

    Two roles, two domains, a shared prompt per pair, rewards that differ within every group.
    """
    from learners.types import Transition

    rows = [
        ("solver", "math", [1, 2], 1.0),
        ("solver", "math", [1, 2], 0.0),
        ("solver", "code", [3, 4], 0.5),
        ("solver", "code", [3, 4], 0.0),
        ("critic", "math", [5, 6], 1.0),
        ("critic", "math", [5, 6], 0.25),
    ]
    return [
        Transition(
            agent=f"{role}_0",
            role=role,
            domain=domain,
            phase="solve" if role == "solver" else "judge_answer",
            prompt_ids=list(prompt),
            completion_ids=[7, 8, 9],
            logprobs=[-1.0, -1.0, -1.0],
            text="x",
            reward=reward,
            task_id=f"test-{i}",
        )
        for i, (role, domain, prompt, reward) in enumerate(rows)
    ]


def _fingerprint(x: Any, depth: int = 0) -> Any:
    """A comparable summary of ``x``'s value (containers, objects' attributes, tensors)."""
    import torch

    if depth > 5:
        return type(x).__name__
    if x is None or isinstance(x, (bool, int, str, bytes)):
        return x
    if isinstance(x, float):
        return repr(x)  # nan equals nan
    if isinstance(x, dict):
        return ("dict", tuple(sorted((repr(k), _fingerprint(v, depth + 1)) for k, v in x.items())))
    if isinstance(x, (set, frozenset)):
        return ("set", tuple(sorted(repr(v) for v in x)))
    if isinstance(x, (list, tuple)) or type(x).__name__ == "deque":
        return (type(x).__name__, tuple(_fingerprint(v, depth + 1) for v in x))
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), x.detach().cpu().flatten().tolist())
    if hasattr(x, "__dict__") and not (
        inspect.ismodule(x) or inspect.isroutine(x) or inspect.isclass(x)
    ):
        return (type(x).__name__, _fingerprint(vars(x), depth + 1))
    return type(x).__name__


def _kept_state(learner: Any, before: dict[str, Any]) -> list[str]:
    """Attributes beyond the base class's that are new or changed since ``before``."""
    base = _base_attributes()
    now = {k: _fingerprint(v) for k, v in vars(learner).items() if k not in base}
    return sorted(k for k, v in now.items() if k not in before or before[k] != v)


def _dry_run_advantages(name: str, cls: type, config_cls: type) -> None:
    """Call ``observe`` and ``advantages`` on :func:`_test_batch`.

    Raises if the advantages are not one finite number per transition; warns if the learner
    keeps state it does not save.
    """
    from learners.algorithms.pg import PolicyGradientLearner

    try:
        config = config_cls()
    except Exception:  # noqa: BLE001 - a config without defaults: nothing to try
        return
    learner = _built(cls, config)
    base = _base_attributes()
    before = {k: _fingerprint(v) for k, v in vars(learner).items() if k not in base}
    batch = _test_batch()
    try:
        learner.observe(list(batch))
        got = learner.advantages(batch)
    except Exception:  # noqa: BLE001 - it needs state a bare instance lacks; update() checks
        return
    try:
        check_advantages(cls, batch, got, "test ")
    except LearnerPluginError as exc:
        raise LearnerPluginError(f"learner {name!r}: {exc}") from None
    saves = (
        cls.extra_state is not PolicyGradientLearner.extra_state
        or cls.state_dict is not PolicyGradientLearner.state_dict
    )
    kept = _kept_state(learner, before)
    if kept and not saves:
        names = ", ".join(f"self.{k}" for k in kept)
        warnings.warn(
            f"learner {name!r} ({cls.__name__}, {where(cls)}): {names} changed in "
            "observe()/advantages() on a test batch, so it carries state from one update to "
            "the next, and state_dict() does not save it: a run continued with --resume "
            "would start it afresh. Return it from extra_state() and restore it in "
            f"load_extra_state() ({STATE_DOCS})",
            LearnerStateWarning,
            stacklevel=2,
        )
