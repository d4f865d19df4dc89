"""EvalPlus's time protocol for plus tests: each input's limit comes from the reference's own
time on it (a multiple, with a floor), in CPU seconds, not from the verifier's budget."""

from __future__ import annotations

import time

import pytest

from learners.evaluation import BenchmarkResult, EvalConfig, markdown_table, plus_tests
from sage_env.sandbox.harness.compare import PLUS_MIN_TIME_S, PLUS_TIME_FACTOR, plus_time_limit
from sage_env.verifiers import CodeVerifier

LOOP = "    s = 0\n    for i in range(n):\n        s += i % 3\n    return s\n"


def _loop(n):
    s = 0
    for i in range(n):
        s += i % 3
    return s


@pytest.fixture(scope="module")
def n_for_seconds():
    """Iterations of the loop that take about ``s`` seconds of CPU here."""
    start = time.process_time()
    _loop(300_000)
    per_iter = max(time.process_time() - start, 1e-3) / 300_000
    return lambda s: max(10_000, int(s / per_iter))


def test_the_limit_is_evalplus_rule():
    assert (PLUS_TIME_FACTOR, PLUS_MIN_TIME_S) == (4.0, 4.0)  # evalplus.config defaults
    assert plus_time_limit(0.01) == 4.0
    assert plus_time_limit(2.5) == 10.0


def _row(n):
    return {
        "entry_point": "f",
        "prompt": "def f(n):\n",
        "canonical_solution": LOOP,
        "base_input": [[10]],
        "plus_input": [[n]],
        "atol": 0,
    }


@pytest.mark.slow
def test_an_input_gets_a_multiple_of_the_references_time_not_the_verifiers_budget(n_for_seconds):
    # the reference needs ~1.5 s of CPU on the plus input: the candidate gets 6 s there, far
    # more than the verifier's 1 s budget; two times slower than the reference still passes
    n = n_for_seconds(1.5)
    setup, tests = plus_tests(_row(n), plus_limit=None)
    slower = "def f(n):\n    s = 0\n    for i in range(n):\n        s += (i % 3) * 1\n"
    slower += "        s += 0 * (i * i % 5)\n    return s\n"
    with CodeVerifier(timeout_s=1.0, pool_size=0) as cv:
        res = cv.verify(slower, tests, setup)
    assert (res.score, res.status) == (1.0, "passed"), res


@pytest.mark.slow
def test_a_candidate_far_slower_than_the_reference_times_out(n_for_seconds):
    n = n_for_seconds(0.3)  # the reference: 0.3 s, so the candidate gets the 4 s floor
    setup, tests = plus_tests(_row(n), plus_limit=None)
    # 100 times the reference's work: killed at its limit even when the calibration or the
    # reference's own timing ran on a loaded machine (30 times once passed inside a limit
    # raised by a reference timed under load); the kill bounds the test's time either way
    slow = "def f(n):\n    s = 0\n    for _ in range(100):\n        s = 0\n"
    slow += "        for i in range(n):\n            s += i % 3\n    return s\n"
    with CodeVerifier(timeout_s=30.0, pool_size=0) as cv:
        res = cv.verify(slow, tests, setup)
    assert res.passed == 1 and res.status == "timeout", res  # the small base input passes


def test_eval_runs_every_plus_input_by_default_and_names_a_smaller_number():
    assert EvalConfig().plus_limit == "all"
    r = BenchmarkResult("mbpp_plus", 3, 1, {1: 0.5}, deviation="10 plus inputs per task")
    assert "10 plus inputs per task" in markdown_table([r])


def test_mbpp_output_not_none_tasks_follow_evalplus_oracle():
    # Mbpp/737 and the like return a re.Match: EvalPlus keeps only ``out is not None`` of the
    # reference's output and compares a candidate's bool as is, anything else as ``is not None``
    ref = "import re\ndef check_str(s):\n    return re.search(r'^[aeiou]', s)\n"
    row = {
        "task_id": "Mbpp/737",
        "entry_point": "check_str",
        "prompt": "",
        "canonical_solution": ref,
        "base_input": [["apple"], ["pear"]],
        "plus_input": [["orange"]],
        "atol": 0,
    }
    setup, tests = plus_tests(row, plus_limit=None)
    as_bool = "def check_str(s):\n    return s[0] in 'aeiou'\n"
    inverted = "def check_str(s):\n    return None if s[0] in 'aeiou' else 1\n"
    wrong_bool = "def check_str(s):\n    return True\n"
    with CodeVerifier(timeout_s=5.0, pool_size=0) as cv:
        scores = [cv.verify(p, tests, setup).score for p in (ref, as_bool, inverted, wrong_bool)]
    assert scores == [1.0, 1.0, 0.0, 2 / 3]
    # another benchmark's function of the same name keeps the plain comparison
    _, plain = plus_tests({**row, "task_id": "HumanEval/1"}, plus_limit=None)
    assert "is not None" not in plain[0] and "is not None" in tests[0]
