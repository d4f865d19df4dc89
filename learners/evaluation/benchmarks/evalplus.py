"""EvalPlus's protocol (HumanEval+, MBPP+): input types, the output oracle and memory limit.

The candidate's output on every base and plus input is compared with the reference solution's
(:func:`plus_tests`), as EvalPlus does; the facts here are EvalPlus's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sage_env import sandbox

def _tuples(x: object) -> object:
    """Every list inside ``x`` (and ``x`` itself) as a tuple, recursively."""
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


def _each(f: Callable[[object], object]) -> Callable[[list], list]:
    return lambda args: [f(a) for a in args]


def _first(f: Callable[[object], object]) -> Callable[[list], list]:
    return lambda args: [f(args[0]), *args[1:]]


def _tuple(x: object) -> tuple:
    return tuple(x)


def _inner_tuples(x: list) -> list:
    return [tuple(v) for v in x]


_MBPP_PLUS_TYPES: dict[int, Callable[[list], list]] = {
    **dict.fromkeys(
        (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630)
        + (726, 740, 744, 809),
        _each(_tuple),
    ),
    **dict.fromkeys(
        (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780),
        _each(_inner_tuples),
    ),
    **dict.fromkeys((75, 413, 444, 753), _first(_inner_tuples)),
    **dict.fromkeys((106, 750), lambda args: [args[0], tuple(args[1]), *args[2:]]),
    115: _first(lambda xs: [set(v) if isinstance(v, list) and v else {} for v in xs]),
    124: lambda args: [float(args[0]), complex(args[1])],
    **dict.fromkeys((250, 405, 446, 617, 720, 763, 808), _first(_tuple)),
    **dict.fromkeys((259, 401, 445), _each(lambda a: tuple(tuple(v) for v in a))),
    278: _first(lambda xs: tuple(tuple(v) if isinstance(v, list) else v for v in xs)),
    307: _first(_tuple),
    722: _first(lambda d: {k: tuple(v) for k, v in d.items()}),
    252: _first(complex),
    **dict.fromkeys((580, 615, 791), lambda args: list(_tuples(args))),
}
"""MBPP+ tasks whose inputs are not what JSON gives back, and how to restore each input's
argument list. The facts are EvalPlus's (``evalplus/data/mbpp.py``,
``mbpp_deserialize_inputs``, MBPP+ v0.2.0): JSON has no tuple, set or complex number, so
EvalPlus rebuilds them per task before calling the function; so must we (Mbpp/106 appends a
list to a tuple, Mbpp/580 walks nested tuples: fed lists, the canonical solution fails)."""


def mbpp_plus_inputs(task_id: str, inputs: list) -> list:
    """MBPP+ inputs with the Python types EvalPlus gives them (tuples, sets, complex numbers).

    Args:
        task_id: ``"Mbpp/106"``.
        inputs: The task's ``base_input`` or ``plus_input`` as read from JSON: one argument
            list per call.

    Returns:
        The argument lists, with the types restored for the tasks of
        :data:`_MBPP_PLUS_TYPES` (the others unchanged).
    """
    restore = _MBPP_PLUS_TYPES.get(int(str(task_id).rsplit("/", 1)[-1]))
    return [restore(list(inp)) for inp in inputs] if restore else list(inputs)


def input_literal(value: object) -> str:
    """Python source that evaluates to ``value``, keeping its types (unlike JSON).

    Tuples stay tuples, sets sets (``set()`` when empty), complex numbers complex, and
    non-finite floats are written ``float('inf')``, ``float('nan')``; finite floats by
    ``repr`` (which round-trips exactly). Lists, dicts, str, int, bool and None as ``repr``.
    Used to hand HumanEval+/MBPP+ inputs to the sandboxed tests.
    """
    if isinstance(value, bool) or value is None or isinstance(value, (int, str, bytes)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, complex):
        return f"complex({input_literal(value.real)}, {input_literal(value.imag)})"
    if isinstance(value, tuple):
        inner = ", ".join(input_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(input_literal(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        items = ", ".join(input_literal(v) for v in value)
        body = f"{{{items}}}" if value else "set()"
        return body if isinstance(value, set) else f"frozenset({body if value else ''})"
    if isinstance(value, dict):
        pairs = ", ".join(f"{input_literal(k)}: {input_literal(v)}" for k, v in value.items())
        return "{" + pairs + "}"
    return repr(value)


MBPP_OUTPUT_NOT_NONE_TASKS = ("check_str", "text_match_three", "text_starta_endb")
"""MBPP+ entry points (Mbpp/737, 787, 794) whose reference returns a ``re.Match`` or ``None``.

EvalPlus (``evalplus/eval/_special_oracle.py`` and ``evaluate.py``, ``get_groundtruth``) keeps
only ``out is not None`` of the reference's output for them, and ``unsafe_execute`` compares a
candidate's output ``out`` with that bool as ``out == exp`` when ``out`` is a bool, else as
``exp == (out is not None)``: :func:`plus_tests` writes their tests to the same rule."""

PLUS_MEMORY_MB = 4096
"""EvalPlus's memory limit per process (``EVALPLUS_MAX_MEMORY_BYTES``, default 4 GiB): what
``sage-env eval`` and the self-check give HumanEval+/MBPP+ programs (and the reference)."""


def plus_tests(row: dict, plus_limit: int | None) -> tuple[str, list[str]]:
    """EvalPlus-style tests: the candidate's output on each input against the reference's.

    Each input becomes one test ``assert __sage_plus__(f(*inp), atol)``. The canonical
    solution travels in ``test_setup`` after :data:`sage_env.sandbox.REFERENCE_MARKER`, so the
    sandbox runs it only in a reference process of its own (setup, reference, every test),
    never where the candidate runs; the candidate's outputs leave its process as plain builtin
    values (any other type fails; an ``int``/``list`` subclass is read through its base type,
    so an overridden ``__eq__`` is never called), and the judge, out of the program's reach,
    compares them with the reference's by EvalPlus's type-aware rule
    (:func:`sage_env.sandbox.harness.compare.plus_equal`: exact, else the same type and
    ``np.allclose``-style ``atol`` + ``rtol=1e-07``; ``atol`` 1e-6 for float outputs when the
    task gives none). No name the program binds, builtin it patches or object it returns
    decides the verdict.

    Returns:
        ``(test_setup, tests)`` for :meth:`~sage_env.verifiers.CodeVerifier.verify`.
    """
    entry = row["entry_point"]
    reference = (
        row["prompt"] + row["canonical_solution"]
        if "def " + entry not in (row["canonical_solution"])
        else row["canonical_solution"]
    )
    inputs = list(row["base_input"]) + list(row["plus_input"])[:plus_limit]
    atol = float(row.get("atol") or 0)
    call = f"{entry}(*_inp)"
    if str(row.get("task_id", "")).startswith("Mbpp/") and entry in MBPP_OUTPUT_NOT_NONE_TASKS:
        # EvalPlus's oracle for these tasks: the reference's output becomes ``out is not None``
        # and a candidate's bool output is compared as is, any other one as ``is not None``
        call = f"(lambda _o: _o if type(_o) is bool else _o is not None)({call})"
    tests = [
        f"_inp = {input_literal(inp)}\nassert __sage_plus__({call}, {atol!r})" for inp in inputs
    ]
    return "import json, math, copy" + sandbox.REFERENCE_MARKER + reference, tests
