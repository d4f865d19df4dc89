"""Python literals on the judge's side: parsing what a model writes, and the equality rules.

* :func:`parse_args` / :func:`parse_literal` parse model-written inputs and outputs as Python
  literals on the judge's side (never ``eval``); :func:`format_args` gives an argument
  tuple's canonical text, :func:`round_trips` whether ``literal_eval(repr(v)) == v``.
* Values are compared on the host after parsing both sides with :func:`ast.literal_eval`, with
  exact types at every level (:func:`values_equal`); the sandboxed process only ever reports a
  ``repr`` string, which is worth no more than a value the program could have returned.
  :func:`runs_agree` and :func:`same_output` are the determinism check's rules,
  :func:`distinct_inputs` induction's split of inputs by value.

Nothing here runs a program: that is :mod:`sage_env.verifiers.executor`.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from sage_env.verifiers.program_checks import MAX_LITERAL_CHARS


def parse_literal(text: Any) -> tuple[bool, Any]:
    """Parse ``text`` as one Python literal on the judge side.

    Returns:
        ``(True, value)`` or ``(False, None)``; never raises (non-``str``, too long, not a
        literal, nested too deep all give ``(False, None)``).
    """
    if not isinstance(text, str) or len(text) > MAX_LITERAL_CHARS:
        return False, None
    try:
        return True, ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def parse_args(text: Any) -> tuple[Any, ...] | None:
    """Parse an input as AZR writes it (``arg1, arg2, ...``) into an argument tuple.

    ``"[1, 2]"`` is one argument, ``"'a', 3"`` two. Returns ``None`` when it is not a
    comma-separated list of Python literals: not a ``str``, empty (``"(,)"`` does not parse),
    longer than :data:`MAX_LITERAL_CHARS` less 3 (the bound is :func:`parse_literal`'s, on
    the wrapped text), or a text that closes the wrapping early (``"1)#"`` would read as
    ``(1)``, not a tuple).
    """
    if not isinstance(text, str):
        return None
    ok, value = parse_literal(f"({text.strip()},)")
    return value if ok and isinstance(value, tuple) else None


def format_args(args: tuple[Any, ...]) -> str:
    """The canonical text of an argument tuple: ``repr`` of each argument, comma-separated."""
    return ", ".join(repr(a) for a in args)


def round_trips(value: Any) -> bool:
    """Whether ``literal_eval(repr(value)) == value`` (a Python literal, no NaN, no objects)."""
    if not _safe_repr(value):
        return False
    ok, back = parse_literal(repr(value))
    try:
        return ok and back == value and type(back) is type(value)
    except Exception:
        return False


def _safe_repr(value: Any) -> bool:
    try:
        return len(repr(value)) <= MAX_LITERAL_CHARS
    except Exception:
        return False


def values_equal(a: Any, b: Any, *, strict_types: bool = True) -> bool:
    """Whether two parsed literals are the same answer; never raises.

    ``strict_types`` (ours; the training judge's policy): equal values of the same type at
    every level, containers, set elements and dict keys included, so ``1``, ``True`` and
    ``1.0`` are three answers (``f`` returned one of them, and a solver who predicts its
    output predicts which). AZR and CRUXEval compare with ``==``, where ``1 == True``;
    ``strict_types=False`` keeps that rule but still tells a tuple from a list.
    """
    try:
        if strict_types:
            return _typed(a) == _typed(b)
        return bool(a == b) and _same_shape(a, b)
    except Exception:
        return False


def _typed(v: Any) -> tuple:
    """A value paired with its exact type at every level (sets and dicts stay unordered)."""
    t = type(v)
    if t is list or t is tuple:
        return (t.__name__, tuple(_typed(x) for x in v))
    if t is set or t is frozenset:
        return (t.__name__, frozenset(_typed(x) for x in v))
    if t is dict:
        return ("dict", frozenset((_typed(k), _typed(x)) for k, x in v.items()))
    if t is float or t is complex:
        return (t.__name__, repr(v))  # -0.0 is not 0.0 (their reprs differ, as f's did)
    return (t.__name__, v)


def _same_shape(a: Any, b: Any) -> bool:
    """Containers must be of the same kind (a tuple is not a list); scalars compare by ``==``."""
    containers = (list, tuple, dict, set, frozenset)
    if isinstance(a, containers) or isinstance(b, containers):
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            return all(_same_shape(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return all(_same_shape(x, y) for x, y in zip(a, b))
    return True


def same_output(a: str | None, b: str | None) -> bool:
    """Two runs' ``repr`` outputs hold the same value (a set's ``repr`` order may differ).

    ``None`` (a run that returned no output) is no output: :func:`parse_literal` refuses it.
    """
    ok_a, va = parse_literal(a)
    ok_b, vb = parse_literal(b)
    return ok_a and ok_b and values_equal(va, vb)


def runs_agree(first: Sequence[Any], other: Sequence[Any]) -> bool:
    """Whether two runs' parsed outputs are the same values, one by one, with exact types.

    The determinism check's rule (:func:`validate_program`, :func:`compute_answer`): as
    :func:`values_equal` with ``strict_types``, at every level, so ``1``, ``True`` and
    ``1.0`` differ, ``-0.0`` is not ``0.0``, ``[1]`` is not ``[True]`` and
    ``{'a': (1,)}`` is not ``{'a': (1.0,)}``; a set's or a dict's order does not matter.
    Never raises.
    """
    try:
        return len(first) == len(other) and all(values_equal(a, b) for a, b in zip(first, other))
    except Exception:
        return False


def distinct_inputs(texts: Sequence[str]) -> list[str]:
    """The canonical text of each input that is not ``==`` to an earlier one, in order.

    Induction's split (ours): inputs are told apart by value, never by text, and with
    Python's ``==`` (``1``, ``True`` and ``1.0`` are one input), so a held-out input is never
    a shown one in another spelling and a lookup table of the shown pairs scores nothing on
    the held-out ones. Texts that are not literal argument lists are dropped.
    """
    kept: list[tuple[Any, ...]] = []
    for text in texts:
        args = parse_args(text)
        if args is None or not all(round_trips(a) for a in args):
            continue
        if not any(_loosely_equal(args, other) for other in kept):
            kept.append(args)
    return [format_args(a) for a in kept]


def _loosely_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False
