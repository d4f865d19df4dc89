"""What a learner's ``loss`` and ``advantages`` hooks must return, checked at every call.

Also the error a learner plugin raises (:class:`LearnerPluginError`, naming the user's file
and line). A leaf: imports nothing from ``learners``.
"""

from __future__ import annotations

import inspect
import math
from typing import Any


class LearnerPluginError(TypeError):
    """A registered learner that the training loop cannot use; the message names the file."""


def where(obj: Any) -> str:
    """``file:line`` where ``obj`` (a class or function) is defined, or its qualified name."""
    target = inspect.unwrap(obj)
    try:
        path = inspect.getsourcefile(target) or inspect.getfile(target)
        line = inspect.getsourcelines(target)[1]
        return f"{path}:{line}"
    except (OSError, TypeError):
        return getattr(target, "__qualname__", repr(target))


LOSS_RETURN = (
    "return (loss, metrics): a scalar torch.Tensor with grad (e.g. self.aggregate(per_token, "
    "inputs)) and a dict of floats"
)
"""What the ``loss`` hook must return (the end of its error messages)."""


def check_loss_result(learner: Any, result: Any) -> tuple[Any, dict]:
    """Validate what a ``loss`` hook returned; returns ``(loss, metrics)``.

    Raises:
        LearnerPluginError: naming the hook's file and line when the result is not a pair of
            a scalar tensor that requires grad and a dict.
    """
    import torch

    problem = None
    if not (isinstance(result, tuple) and len(result) == 2):
        problem = f"it returned {type(result).__name__} {_short(result)}"
    else:
        loss, metrics = result
        if not isinstance(loss, torch.Tensor):
            problem = f"its loss is a {type(loss).__name__} ({_short(loss)}), not a tensor"
        elif loss.dim() != 0:
            problem = f"its loss has shape {tuple(loss.shape)}, not a scalar"
        elif not loss.requires_grad:
            problem = "its loss does not require grad (built from detached values or .item())"
        elif not isinstance(metrics, dict):
            problem = f"its metrics are a {type(metrics).__name__}, not a dict"
    if problem is None:
        return result
    fn = getattr(type(learner), "loss", None)
    raise LearnerPluginError(
        f"{type(learner).__name__}.loss ({where(fn)}): {problem}; it must {LOSS_RETURN}"
    )


ADVANTAGES_RETURN = "return one finite float per Transition of the batch, in its order"
"""What the ``advantages`` hook must return (the end of its error messages)."""


def check_advantages(learner: Any, batch: list, result: Any, where_found: str = "") -> list[float]:
    """Validate what an ``advantages`` hook returned for ``batch``; returns it as floats.

    Args:
        learner: The learner (its class and its ``advantages``' file and line are named).
        batch: The transitions it was given.
        result: What it returned.
        where_found: Appended to the batch's description (e.g. ``"test "``).

    Raises:
        LearnerPluginError: when ``result`` is not a sequence of ``len(batch)`` numbers, or
            holds a NaN or an infinity.
    """
    cls = learner if isinstance(learner, type) else type(learner)
    label = f"{cls.__name__}.advantages ({where(getattr(cls, 'advantages', cls))})"
    seen = f"a {where_found}batch of {len(batch)} transitions"
    try:
        values = [float(v) for v in result]
    except (TypeError, ValueError):
        raise LearnerPluginError(
            f"{label}: it returned {type(result).__name__} {_short(result)} on {seen}; it must "
            + ADVANTAGES_RETURN
        ) from None
    if len(values) != len(batch):
        raise LearnerPluginError(
            f"{label}: it returned {len(values)} values for {seen}; it must " + ADVANTAGES_RETURN
        )
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        raise LearnerPluginError(
            f"{label}: it returned non-finite advantages {[values[i] for i in bad]} (positions "
            f"{bad}) on {seen}; it must {ADVANTAGES_RETURN} (guard divisions: std + eps)"
        )
    return values


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
