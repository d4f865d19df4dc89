r"""Guards around math-verify for answer classes it scores wrongly (issue 12, item 3).

math-verify stays the engine (:mod:`sage_env.verifiers`); these functions fix its input or
veto its verdict where public bug reports show it pays a wrong answer or refuses a right one:

================================  =====================================  ====================
case                              math-verify alone                      thread
================================  =====================================  ====================
``The answer is 2 2/3``, gold 2   correct (it reads the whole part 2)    Math-Verify PR #81
``1 1/4``, gold ``\frac{5}{4}``   wrong (it reads 1/2 or 1)              Math-Verify #34
``4 10/3``, gold 10               may expose 10                          Math-Verify PR #81
``\frac{1}{2^{98}}``, gold        correct (floats compared to 6          Math-Verify #14
``\frac{1}{2^{99}}``              decimals, an absolute tolerance)
``\frac{1}{2006!}``, gold         correct (same)                         Math-Verify #14
``\frac{1}{2004!}``
``0.0000002``, gold               correct (same)                         Math-Verify #14
``0.0000001``
================================  =====================================  ====================

:func:`normalise_mixed_numbers` rewrites a plain mixed number ``W N/D`` (``N < D``) as the
improper fraction ``\frac{W*D+N}{D}`` before parsing, and a mixed-looking form that is not
one (``4 10/3``) as text that parses to nothing, so that no fragment of it can match.
:func:`numbers_disagree` vetoes a "correct" verdict when both sides are numbers that differ:
exactly, for two rationals; by more than ``rel_tol`` of their magnitude otherwise (so
``0.333333`` still equals ``1/3``, as math-verify intends). Every row is a test in
``tests/sage_env/verifiers/test_peer_grader_reward_hacks.py``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REL_TOL", "normalise_mixed_numbers", "numbers_disagree"]

REL_TOL = 1e-5
"""Relative tolerance of :func:`numbers_disagree` for numbers that are not both rational
(math-verify rounds to 6 decimals, so ``0.333333`` vs ``1/3`` differ by 1e-6 relative)."""

_MIXED = re.compile(r"(?<![\w.\\/^])(-?)(\d{1,9})[ \t]+(\d{1,9})[ \t]*/[ \t]*(\d{1,9})(?![\w./^])")


def _mixed(match: re.Match) -> str:
    sign, whole, num, den = (
        match.group(1),
        int(match.group(2)),
        int(match.group(3)),
        int(match.group(4)),
    )
    if den == 0 or num >= den:
        return r"\text{not a mixed number}"
    return f"{sign}\\frac{{{whole * den + num}}}{{{den}}}"


def normalise_mixed_numbers(text: str) -> str:
    r"""Rewrite plain mixed numbers as improper fractions: ``2 2/3`` -> ``\frac{8}{3}``.

    A sign before the whole part applies to the whole value (``-1 1/2`` -> ``-\frac{3}{2}``).
    A mixed-looking form whose fraction is not proper (``4 10/3``, ``1 2/0``) becomes
    ``\text{not a mixed number}``, which parses to no value. Numbers inside LaTeX groups,
    decimals, subscripts and exponents are left alone (``x_1 1/2``, ``1.5 1/2``).

    Args:
        text: Any string (a prediction's tail, a boxed answer or a gold).

    Returns:
        The text with each plain mixed number replaced.
    """
    if "/" not in text:
        return text
    return _MIXED.sub(_mixed, text)


def _number(parsed: list) -> Any:
    """The first SymPy value in a math-verify parse that is a finite number, or None."""
    for item in parsed:
        if isinstance(item, str):
            continue
        if getattr(item, "is_number", False) and getattr(item, "is_finite", False):
            return item
        return None  # the first value decides: a set, an expression ... is not our case
    return None


def numbers_disagree(gold: list, pred: list, rel_tol: float = REL_TOL) -> bool:
    """True when the gold and predicted parses are numbers that are not the same number.

    Use it to veto a "correct" verdict of ``math_verify.verify``: two rationals must be equal
    exactly (``1/2^98 != 1/2^99``, ``1/2004! != 1/2006!``); other numbers must agree within
    ``rel_tol`` of the larger magnitude. Anything that is not a pair of finite numbers
    (expressions, sets, intervals, strings) returns False: math-verify's verdict stands.

    Args:
        gold: ``math_verify.parse`` output of the gold.
        pred: ``math_verify.parse`` output of the prediction.
        rel_tol: Relative tolerance for non-rational numbers.

    Returns:
        Whether the two are numbers that differ.
    """
    g, p = _number(gold), _number(pred)
    if g is None or p is None:
        return False
    if g.is_rational and p.is_rational:  # exact, also for unevaluated 1/2004!
        return bool((g - p).doit() != 0)
    diff = abs((g - p).evalf(50))  # mpmath floats: no underflow at 1e-6000
    scale = max(abs(g.evalf(50)), abs(p.evalf(50)))
    if scale == 0:
        return False
    return bool(diff > rel_tol * scale)
