"""A math answer program's value is a value (issue 46, item 3).

Strings ``answer()`` returns are read by one strict rule: a Python number literal is that
number, never LaTeX (``'4.2e1'`` was stored as ``4.2 * e``, ``'42e0'`` and ``'0x2A'`` as 0);
power chains and ``e`` next to a number are refused; a value math-verify does not show
(timeout) is never stored.
"""

from __future__ import annotations

import random

import pytest

from sage_env.verifiers import MathVerifier
from sage_env.verifiers.math_grounding import ground_answer, render_value
from sage_env.verifiers.result import VerifierResult


@pytest.mark.parametrize(
    ("value", "text"),
    [("4.2e1", "42"), ("42e0", "42"), ("0x2A", "42"), ("1_000", "1000"), ("-3.5", "-3.5"),
     ("+7", "7"), (".25", "0.25"), ("1e-5", "0.00001"), ("0o17", "15"), (" 42 ", "42")],
)  # fmt: skip
def test_a_python_number_literal_string_is_that_number(value, text):
    assert render_value(value) == (text, "")


@pytest.mark.parametrize(
    "value", ["3/4", "\\frac{3}{4}", "2\\sqrt{2}", "\\pi/2", "2^{3^2}", "(2^3)^2", "e^2",
              "10^{-3}", "x^2+2^3"],
)  # fmt: skip
def test_honest_math_text_is_kept_as_written(value):
    assert render_value(value) == (value, "")


@pytest.mark.parametrize(
    ("value", "why"),
    [("9^9^9^9", "power chain"), ("2^3^2", "power chain"), ("2**3**2", "power chain"),
     ("2^{3}^2", "power chain"), ("2e", "e next to a number"), ("3e^2", "e next to a number"),
     ("1.5E", "e next to a number"), ("0x2G", "0x/0o/0b"), ("2j", "0x/0o/0b"),
     ("1e400", "not a finite number")],
)  # fmt: skip
def test_ambiguous_strings_are_refused(value, why):
    text, reason = render_value(value)
    assert text is None and why in reason


@pytest.mark.parametrize(
    ("expr", "wrong"),
    [("'4.2' + 'e1'", "4.2e"), ("'42' + 'e0'", "0"), ("'0x' + '2A'", "0")],
)
def test_number_strings_are_stored_as_the_number_and_agree_only_with_it(expr, wrong):
    program = f"def answer():\n    return {expr}"
    verifier = MathVerifier()
    run = ground_answer(program, "42", verifier, check_rng=random.Random(0))
    assert run.verdict == "agree" and run.answer == "42"
    assert ground_answer(program, wrong, verifier, check_rng=random.Random(0)).verdict == (
        "disagree"
    )


@pytest.mark.parametrize("expr", ["'9^9^' + '9^9'", "'2^3' + '^2'"])
def test_a_power_chain_value_is_refused_whatever_the_claim(expr):
    program = f"def answer():\n    return {expr}"
    for claim in ("512", "64", "9^9^9^9"):
        run = ground_answer(program, claim, MathVerifier(), check_rng=random.Random(0))
        assert run.verdict == "program_failed" and "power chain" in run.reason


class _Verifier:
    """A math verifier whose answers are given: ``check`` and ``verify`` results."""

    def __init__(self, check: VerifierResult, verify: VerifierResult) -> None:
        self.check, self.result = check, verify

    def check_answer(self, answer: str) -> VerifierResult:
        return self.check

    def verify(self, prediction: str, gold: str) -> VerifierResult:
        return self.result


PASSED = VerifierResult(1.0, "passed", "ok")
TIMEOUT = VerifierResult(0.0, "timeout", "math verification exceeded 5 s")
#: A verifier that says 1.0 without having shown it (not ours; a guard all the same).
UNSHOWN = VerifierResult(1.0, "timeout", "exceeded")

PROGRAM = "def answer():\n    return 6 * 7"


def test_a_value_whose_verification_times_out_is_refused():
    grounding = ground_answer(PROGRAM, "42", _Verifier(TIMEOUT, PASSED))
    assert grounding.verdict == "program_failed"
    agreement = ground_answer(PROGRAM, "42", _Verifier(PASSED, TIMEOUT))
    assert agreement.verdict == "disagree" and "not shown (timeout)" in agreement.reason
    assert ground_answer(PROGRAM, "42", _Verifier(UNSHOWN, PASSED)).verdict == "program_failed"
    assert ground_answer(PROGRAM, "42", _Verifier(PASSED, UNSHOWN)).verdict == "disagree"
    assert ground_answer(PROGRAM, "42", _Verifier(PASSED, PASSED)).verdict == "agree"
