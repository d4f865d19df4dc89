r"""Unit tests of sage_env/verifiers/math_verifier.py, one per branch, for the mutation run
(issue 49, ``scripts/mutation.py math_verifier``).

Fast on purpose: math-verify is warmed up once, at import (mutmut forks every mutant's run
from a process that has collected this file), and where the branch under test is our own
logic around math-verify, math-verify and the pool are fakes that record their calls, so
every test asserts the exact values passed and returned. The process pool is driven
in-process: a fake ``cf`` module (executor, ``wait``) and a fake clock stand in for the
worker processes and the wall clock.
"""

from __future__ import annotations

import concurrent.futures as real_cf
import logging
import multiprocessing
import os
import re
import signal
import threading
import time
import types
from concurrent.futures.process import BrokenProcessPool

import pytest

from sage_env.verifiers import math_verifier as m
from sage_env.verifiers.deadline import _DeadlineExceeded
from sage_env.verifiers.result import MAX_GOLD_CHARS, MAX_PREDICTION_CHARS, VerifierResult

m._warm_up()  # once per process, before any test (and before mutmut forks a mutant's run)


def R(score, status, reason):
    return VerifierResult(score, status, reason)


class NoPool:
    """The ``cf`` every test gets unless it fakes one: a mutant that sends in-process work to
    the pool fails at once instead of spawning real workers."""

    FIRST_COMPLETED = real_cf.FIRST_COMPLETED

    def ProcessPoolExecutor(self, **kwargs):  # noqa: N802 - the name it stands in for
        raise AssertionError("a unit test started a real worker pool")

    def wait(self, *args, **kwargs):
        raise AssertionError("a unit test waited on a real worker pool")


@pytest.fixture(autouse=True)
def _no_real_pool(monkeypatch):
    monkeypatch.setattr(m, "cf", NoPool())


# ------------------------------------------------------------------------------------------
# math-verify itself: the lazy import, the warm-up, parsing


def test_math_verify_is_imported_once_and_its_timeout_warnings_silenced(monkeypatch):
    import math_verify
    import math_verify.grader
    import math_verify.parser

    monkeypatch.setattr(m, "_MV", None)
    monkeypatch.setattr(math_verify.parser, "TIMEOUT_WARNING_SHOWN", False)
    monkeypatch.setattr(math_verify.grader, "TIMEOUT_WARNING_SHOWN", False)
    assert m._math_verify() is math_verify
    assert m._MV is math_verify
    assert math_verify.parser.TIMEOUT_WARNING_SHOWN is True
    assert math_verify.grader.TIMEOUT_WARNING_SHOWN is True
    sentinel = object()
    monkeypatch.setattr(m, "_MV", sentinel)
    assert m._math_verify() is sentinel


class FakeMV:
    """Stands in for the math_verify module: records parse and verify calls."""

    class LatexExtractionConfig:
        pass

    class ExprExtractionConfig:
        pass

    def __init__(self, verdicts=(), parse_result=None):
        self.verdicts = list(verdicts)
        self.parse_result = parse_result
        self.parses = []
        self.verifies = []

    def parse(self, *args, **kwargs):
        self.parses.append((args, kwargs))
        return self.parse_result

    def verify(self, gold, pred, **kwargs):
        self.verifies.append((gold, pred, kwargs))
        verdict = self.verdicts.pop(0)
        if isinstance(verdict, Exception):
            raise verdict
        return verdict


def test_mv_parse_passes_both_extraction_configs_and_no_timeout(monkeypatch):
    fake = FakeMV(parse_result=["parsed"])
    monkeypatch.setattr(m, "_math_verify", lambda: fake)
    assert m._mv_parse("$7$") == ["parsed"]
    [(args, kwargs)] = fake.parses
    assert args == ("$7$",)
    assert set(kwargs) == {"extraction_config", "parsing_timeout"}
    assert kwargs["parsing_timeout"] is None
    assert [type(c) for c in kwargs["extraction_config"]] == [
        FakeMV.LatexExtractionConfig,
        FakeMV.ExprExtractionConfig,
    ]


def test_mv_parse_really_parses():
    assert [str(x) for x in m._mv_parse("$5$")] == ["5", "5"]
    assert m._mv_parse("no math here") == []


def test_warm_up_verifies_every_pair_once_then_never_again(monkeypatch):
    parsed = []
    disagree = []
    fake = FakeMV(verdicts=[True, False, True, False, True, False])
    monkeypatch.setattr(m, "_WARM", False)
    monkeypatch.setattr(m, "_math_verify", lambda: fake)
    monkeypatch.setattr(m, "_mv_parse", lambda text: parsed.append(text) or [text])
    monkeypatch.setattr(m, "numbers_disagree", lambda g, p: disagree.append((g, p)))
    m._warm_up()
    assert m._WARM is True
    expected = []
    for pred, gold in m._WARM_UP_PAIRS:
        expected += ["$" + gold + "$", pred]
    assert parsed == expected
    pairs = [(["$" + g + "$"], [p]) for p, g in m._WARM_UP_PAIRS]
    assert fake.verifies == [(g, p, {"timeout_seconds": None}) for g, p in pairs]
    assert disagree == pairs[0::2]  # only after a True verdict
    m._warm_up()  # warm: nothing runs again
    assert len(parsed) == 2 * len(m._WARM_UP_PAIRS)


def test_warm_up_never_raises_and_logs_why(monkeypatch, caplog):
    caplog.set_level(logging.DEBUG, logger="sage_env.verifiers")
    monkeypatch.setattr(m, "_WARM", False)
    fake = FakeMV(verdicts=[ValueError("boom")])
    monkeypatch.setattr(m, "_math_verify", lambda: fake)
    monkeypatch.setattr(m, "_mv_parse", lambda text: [text])
    m._warm_up()
    assert m._WARM is True
    assert len(fake.verifies) == 1
    messages = [r.getMessage() for r in caplog.records if r.name == "sage_env.verifiers"]
    assert messages == ["math-verify warm-up failed: boom"]
    assert [r.levelno for r in caplog.records if r.name == "sage_env.verifiers"] == [logging.DEBUG]


def test_parse_first_returns_the_first_nonempty_parse_and_its_text(monkeypatch):
    table = {"a": [], "b": [1, "b"], "c": [2, "c"]}
    seen = []
    monkeypatch.setattr(m, "_mv_parse", lambda text: seen.append(text) or table[text])
    assert m._parse_first(["a", "b", "c"]) == ([1, "b"], "b")
    assert seen == ["a", "b"]
    assert m._parse_first(["a"]) == ([], "")
    assert m._parse_first([]) == ([], "")


@pytest.fixture
def gold_cache(monkeypatch):
    cache = {}
    monkeypatch.setattr(m, "_GOLD_CACHE", cache)
    calls = []
    monkeypatch.setattr(
        m, "_parse_first", lambda cands: calls.append(list(cands)) or ([len(calls)], "t")
    )
    return cache, calls


def test_parse_gold_tries_dollars_then_a_box_and_caches(gold_cache):
    cache, calls = gold_cache
    assert m._parse_gold("3") == ([1], "t")
    assert calls == [["$3$", "\\boxed{3}"]]
    assert cache == {"3": ([1], "t")}
    assert m._parse_gold("3") == ([1], "t")  # from the cache: not parsed again
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("gold", "candidates"),
    [
        ("\\boxed{7}", ["$7$", "\\boxed{7}"]),
        ("x \\fbox{8} y", ["$8$", "\\boxed{8}"]),
        ("\\boxed{", ["$\\boxed{$", "\\boxed{\\boxed{}"]),  # no complete box: as it is
        ("{9}", ["${9}$", "\\boxed{{9}}"]),
    ],
)
def test_parse_gold_unboxes_a_boxed_gold(gold_cache, gold, candidates):
    _, calls = gold_cache
    m._parse_gold(gold)
    assert calls == [candidates]


def test_parse_gold_clears_a_full_cache(gold_cache, monkeypatch):
    cache, calls = gold_cache
    monkeypatch.setattr(m, "_GOLD_CACHE_MAX", 2)
    m._parse_gold("1")
    m._parse_gold("2")
    assert list(cache) == ["1", "2"]  # one below the bound: kept
    m._parse_gold("3")
    assert cache == {"3": ([3], "t")}


def test_parse_gold_really_parses(monkeypatch):
    monkeypatch.setattr(m, "_GOLD_CACHE", {})
    parsed, text = m._parse_gold("\\boxed{\\frac{1}{2}}")
    assert str(parsed[0]) == "1/2" and text == "$\\frac{1}{2}$"


def test_show_prefers_the_last_string_and_clips_to_60():
    assert m._show([1, "a", 2, "b", 3], "fb") == "b"
    assert m._show([1, 2], "fb") == "fb"
    assert m._show([], "fb") == "fb"
    assert m._show(["s" * 60], "fb") == "s" * 60
    assert m._show(["s" * 61], "fb") == "s" * 57 + "..."
    assert m._show([1], "f" * 61) == "f" * 57 + "..."
    assert m._show([1], "f" * 60) == "f" * 60


# ------------------------------------------------------------------------------------------
# _verify_math: every branch, math-verify faked


class Pipeline:
    """Fakes of what _verify_math calls, recording what they were given."""

    def __init__(
        self,
        monkeypatch,
        gold=([2, "G"], "g"),
        pred=([1, "S"], "p"),
        verdicts=(True,),
        disagree=False,
    ):
        self.gold_args, self.pred_args, self.disagree_args, self.warm = [], [], [], 0
        self.gold, self.pred, self.disagree = gold, pred, disagree
        self.mv = FakeMV(verdicts=verdicts)
        monkeypatch.setattr(m, "_warm_up", self._warm_up)
        monkeypatch.setattr(m, "_parse_gold", self._parse_gold)
        monkeypatch.setattr(m, "_parse_first", self._parse_first)
        monkeypatch.setattr(m, "_math_verify", lambda: self.mv)
        monkeypatch.setattr(m, "numbers_disagree", self._numbers_disagree)

    def _warm_up(self):
        self.warm += 1

    def _parse_gold(self, gold):
        self.gold_args.append(gold)
        if isinstance(self.gold, BaseException):
            raise self.gold
        return self.gold

    def _parse_first(self, cands):
        self.pred_args.append(list(cands))
        return self.pred

    def _numbers_disagree(self, gold, pred):
        self.disagree_args.append((gold, pred))
        return self.disagree


def test_verify_math_passes_an_equal_answer(monkeypatch):
    p = Pipeline(monkeypatch)
    assert m._verify_math(b"so \\boxed{5}", 42, 3.0) == R(1.0, "passed", "S == gold G")
    assert p.warm == 1
    assert p.gold_args == ["42"]
    assert p.pred_args == [["\\boxed{5}", "$5$"]]
    assert p.mv.verifies == [([2, "G"], [1, "S"], {"timeout_seconds": None})]
    assert p.disagree_args == [([2, "G"], [1, "S"])]


def test_verify_math_refuses_what_math_verify_refuses(monkeypatch):
    p = Pipeline(monkeypatch, verdicts=(False,))
    assert m._verify_math("\\boxed{5}", "4", 3.0) == R(0.0, "failed", "S != gold G")
    assert p.disagree_args == []


def test_verify_math_refuses_numbers_that_differ_beyond_math_verify_rounding(monkeypatch):
    Pipeline(monkeypatch, disagree=True)
    assert m._verify_math("\\boxed{5}", "4", 3.0) == R(0.0, "failed", "S != gold G exactly")


def test_verify_math_shows_the_box_or_the_gold_when_the_parse_has_no_string(monkeypatch):
    Pipeline(monkeypatch, gold=([2], "g"), pred=([1], "p"), verdicts=(True, True))
    assert m._verify_math("\\boxed{abc}", " gold ", 3.0) == R(1.0, "passed", "abc == gold gold")
    # no box: nothing to show for the prediction
    assert m._verify_math("abc", "gold", 3.0) == R(1.0, "passed", " == gold gold")


def test_verify_math_rewrites_mixed_numbers_in_prediction_and_gold(monkeypatch):
    p = Pipeline(monkeypatch)
    m._verify_math("so \\boxed{2 1/2}", "1 1/2", 3.0)
    m._verify_math("it is 2 1/2", "1", 3.0)
    assert p.gold_args == ["\\frac{3}{2}", "1"]
    assert p.pred_args == [["\\boxed{\\frac{5}{2}}", "$\\frac{5}{2}$"], ["it is \\frac{5}{2}"]]


@pytest.mark.parametrize("gold", ["", "   ", None])
def test_verify_math_refuses_an_empty_gold(monkeypatch, gold):
    p = Pipeline(monkeypatch)
    assert m._verify_math("\\boxed{1}", gold, 3.0) == R(0.0, "invalid", "empty gold answer")
    assert p.gold_args == []


def test_verify_math_bounds_the_gold_length(monkeypatch):
    p = Pipeline(monkeypatch, gold=([], ""))
    too_long = m._verify_math("\\boxed{1}", "x" * (MAX_GOLD_CHARS + 1), 3.0)
    assert too_long == R(0.0, "invalid", f"gold answer longer than {MAX_GOLD_CHARS}")
    at_bound = m._verify_math("\\boxed{1}", " " + "x" * MAX_GOLD_CHARS + " ", 3.0)
    assert at_bound == R(0.0, "invalid", "gold unparseable: " + "x" * 57 + "...")
    assert p.gold_args == ["x" * MAX_GOLD_CHARS]


def test_verify_math_reads_only_the_tail_of_a_long_prediction(monkeypatch):
    p = Pipeline(monkeypatch)
    box = "\\boxed{5}"
    m._verify_math("Q" + box + "z" * (MAX_PREDICTION_CHARS - len(box)), "5", 3.0)
    m._verify_math(box + "z" * (MAX_PREDICTION_CHARS - len(box) + 1), "5", 3.0)
    assert p.pred_args == [
        ["\\boxed{5}", "$5$"],
        ["boxed{5}" + "z" * (MAX_PREDICTION_CHARS - 8)],  # the backslash was cut off
    ]


def test_verify_math_refuses_an_empty_box(monkeypatch):
    p = Pipeline(monkeypatch)
    assert m._verify_math("\\boxed{  }", "1", 3.0) == R(0.0, "invalid", "empty \\boxed{}")
    assert p.pred_args == []


def test_verify_math_refuses_a_blank_prediction_without_parsing_it(monkeypatch):
    p = Pipeline(monkeypatch)
    expected = R(0.0, "invalid", "no parseable answer in prediction")
    assert m._verify_math("  \n ", "1", 3.0) == expected
    assert m._verify_math(None, "1", 3.0) == expected
    assert p.pred_args == []


def test_verify_math_says_where_no_answer_parsed(monkeypatch):
    p = Pipeline(monkeypatch, pred=([], ""))
    assert m._verify_math("\\boxed{q}", "1", 3.0) == R(
        0.0, "invalid", "no parseable answer in \\boxed{}"
    )
    assert m._verify_math("words", "1", 3.0) == R(
        0.0, "invalid", "no parseable answer in prediction"
    )
    assert p.pred_args == [["\\boxed{q}", "$q$"], ["words"]]
    assert p.mv.verifies == []


def test_verify_math_clips_an_unparseable_gold(monkeypatch):
    Pipeline(monkeypatch, gold=([], ""))
    assert m._verify_math("\\boxed{1}", "g" * 61, 3.0) == R(
        0.0, "invalid", "gold unparseable: " + "g" * 57 + "..."
    )
    assert m._verify_math("\\boxed{1}", "g" * 60, 3.0) == R(
        0.0, "invalid", "gold unparseable: " + "g" * 60
    )


def test_verify_math_times_out_inside_its_deadline(monkeypatch):
    p = Pipeline(monkeypatch)
    p.gold = None

    def slow(gold):
        time.sleep(5)

    monkeypatch.setattr(m, "_parse_gold", slow)
    assert m._verify_math("\\boxed{1}", "1", 0.05) == R(
        0.0, "timeout", "math verification exceeded 0.05 s"
    )


def test_verify_math_passes_its_budget_to_the_deadline(monkeypatch):
    Pipeline(monkeypatch)
    budgets = []

    def deadline(fn, seconds):
        budgets.append(seconds)
        raise _DeadlineExceeded()

    monkeypatch.setattr(m, "_call_with_deadline", deadline)
    assert m._verify_math("\\boxed{1}", "1", 2.5) == R(
        0.0, "timeout", "math verification exceeded 2.5 s"
    )
    assert budgets == [2.5]


def test_verify_math_a_deadline_outside_the_work_is_a_timeout(monkeypatch):
    p = Pipeline(monkeypatch)

    def late():
        raise _DeadlineExceeded()

    monkeypatch.setattr(m, "_warm_up", late)
    assert m._verify_math("\\boxed{1}", "1", 1.25) == R(
        0.0, "timeout", "math verification exceeded 1.25 s"
    )
    assert p.gold_args == []


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (MemoryError(), R(0.0, "memory", "MemoryError during math verification")),
        (KeyError("k"), R(0.0, "crashed", "verifier error: KeyError")),
    ],
)
def test_verify_math_never_raises(monkeypatch, error, expected):
    Pipeline(monkeypatch, gold=error)
    assert m._verify_math("\\boxed{1}", "1", 3.0) == expected


def test_verify_math_end_to_end():
    assert m._verify_math("so \\boxed{\\frac{1}{2}}", "0.5", 5.0) == R(
        1.0, "passed", "\\frac{1}{2} == gold \\frac{1}{2}"
    )
    assert m._verify_math("\\boxed{3}", "4", 5.0) == R(0.0, "failed", "3 != gold 4")


# ------------------------------------------------------------------------------------------
# _grounded and _check_answer


def sym(*names):
    return types.SimpleNamespace(free_symbols=set(names))


@pytest.mark.parametrize(
    ("parsed", "grounded"),
    [
        (["s", sym("x")], True),  # strings are skipped, not the end
        ([object(), sym()], True),  # no free_symbols: skipped
        ([sym("x", "y", "z")], True),
        ([sym("w", "x", "y", "z")], False),
        ([sym("ab")], False),
        ([sym("a", "bc")], False),
        ([sym("ab"), sym("x")], True),
        ([sym("w", "x", "y", "z"), sym("a", "b")], True),
        ([], False),
        (["x"], False),
    ],
)
def test_grounded(parsed, grounded):
    assert m._grounded(parsed) is grounded


def test_grounded_on_real_parses():
    assert m._grounded(m._mv_parse("$2\\sqrt{2}$")) is True
    assert m._grounded(m._mv_parse("$abcd$")) is False


class Value:
    def __init__(self, text, symbols=()):
        self.text, self.free_symbols = text, set(symbols)

    def __str__(self):
        return self.text


@pytest.fixture
def answer_parse(monkeypatch):
    calls = {"warm": 0, "gold": [], "result": ([Value("VALUE"), "s"], "t")}

    def warm():
        calls["warm"] += 1

    def parse_gold(text):
        calls["gold"].append(text)
        result = calls["result"]
        if isinstance(result, BaseException):
            raise result
        if callable(result):
            return result()
        return result

    monkeypatch.setattr(m, "_warm_up", warm)
    monkeypatch.setattr(m, "_parse_gold", parse_gold)
    return calls


def test_check_answer_passes_a_grounded_answer(answer_parse):
    assert m._check_answer("  x + 1  ", 3.0) == R(1.0, "passed", "answer parses to VALUE")
    assert answer_parse == {"warm": 1, "gold": ["x + 1"], "result": answer_parse["result"]}


def test_check_answer_clips_what_it_shows(answer_parse):
    answer_parse["result"] = ([Value("v" * 41)], "t")
    assert m._check_answer("1", 3.0) == R(1.0, "passed", "answer parses to " + "v" * 37 + "...")
    answer_parse["result"] = ([Value("v" * 40)], "t")
    assert m._check_answer("1", 3.0) == R(1.0, "passed", "answer parses to " + "v" * 40)


@pytest.mark.parametrize("answer", ["", "  ", None])
def test_check_answer_refuses_an_empty_answer(answer_parse, answer):
    assert m._check_answer(answer, 3.0) == R(0.0, "invalid", "empty answer")


def test_check_answer_bounds_its_length(answer_parse):
    assert m._check_answer("1" * (MAX_GOLD_CHARS + 1), 3.0) == R(
        0.0, "invalid", f"answer longer than {MAX_GOLD_CHARS}"
    )
    assert m._check_answer("1" * MAX_GOLD_CHARS, 3.0).status == "passed"


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("five hundred", "five hundred"),
        ("12 \\text{cm}", "cm"),
        ("\\mathrm{kg}x", "kg"),
        ("ab", "ab"),
        ("\\fbox{x} total", "total"),  # only a \boxed is read on its own
        (
            "alpha beta gamma delta epsilon zeta eta theta",
            "alpha beta gamma delta epsilon zeta e...",
        ),
    ],
)
def test_check_answer_refuses_free_text(answer_parse, answer, words):
    assert m._check_answer(answer, 3.0) == R(
        0.0, "invalid", f"answer is free text, not math ({words})"
    )
    assert answer_parse["gold"] == []


@pytest.mark.parametrize(
    "answer",
    [
        "\\sqrt{2} + \\frac{1}{2}",  # LaTeX commands are not words
        "Sin(x) + LOG 2 + exp(1)",  # function names, any case
        "\\boxed{x} total",  # only the box is read when there is one
        "\\begin{pmatrix} 1 \\end{pmatrix}",
        "\\text{x} 2",
        "a b",
    ],
)
def test_check_answer_allows_math_words(answer_parse, answer):
    assert m._check_answer(answer, 3.0) == R(1.0, "passed", "answer parses to VALUE")
    assert answer_parse["gold"] == [answer]


def test_check_answer_reads_mixed_numbers_as_a_gold_is_read(answer_parse):
    """A gold "4 10/3" is no number to verify (its normalised form is text, which math-verify
    compares as a string: any other malformed mixed number was paid, 22/3 refused), so it is
    no answer; "2 1/2" is checked as the 5/2 that verify compares against."""
    assert m._check_answer("4 10/3", 3.0) == R(
        0.0, "invalid", "answer is free text, not math (not mixed number)"
    )
    assert m._check_answer("2 1/2", 3.0) == R(1.0, "passed", "answer parses to VALUE")
    assert answer_parse["gold"] == ["\\frac{5}{2}"]


def test_check_answer_refuses_an_ungrounded_parse(answer_parse):
    answer_parse["result"] = ([Value("v", ["ab"])], "t")
    assert m._check_answer("1" * 41, 3.0) == R(
        0.0, "invalid", "answer has no math value: " + "1" * 37 + "..."
    )
    assert m._check_answer("1" * 40, 3.0) == R(
        0.0, "invalid", "answer has no math value: " + "1" * 40
    )
    answer_parse["result"] = ([], "")
    assert m._check_answer("1", 3.0) == R(0.0, "invalid", "answer has no math value: 1")


def test_check_answer_times_out(answer_parse):
    answer_parse["result"] = lambda: time.sleep(5)
    assert m._check_answer("1", 0.05) == R(0.0, "timeout", "answer parsing exceeded 0.05 s")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_DeadlineExceeded(), R(0.0, "timeout", "answer parsing exceeded 2.5 s")),
        (MemoryError(), R(0.0, "memory", "MemoryError while parsing the answer")),
        (KeyError("k"), R(0.0, "crashed", "verifier error: KeyError")),
    ],
)
def test_check_answer_never_raises(answer_parse, error, expected):
    answer_parse["result"] = error
    assert m._check_answer("1", 2.5) == expected


def test_check_answer_end_to_end():
    assert m._check_answer("2\\sqrt{2}", 5.0) == R(1.0, "passed", "answer parses to 2*sqrt(2)")
    assert m._check_answer("???", 5.0).status == "invalid"
    assert m._check_answer("2 1/2", 5.0) == R(1.0, "passed", "answer parses to 5/2")
    assert m._check_answer("1 2/0", 5.0).status == "invalid"


# ------------------------------------------------------------------------------------------
# the worker-side helpers and the public API


def test_verify_math_chunk_scores_each_pair_in_order(monkeypatch):
    monkeypatch.setattr(m, "_verify_math", lambda p, g, t: (p, g, t))
    assert m._verify_math_chunk([("a", "1"), ("b", "2")], 1.5) == [("a", "1", 1.5), ("b", "2", 1.5)]


def test_worker_ping_is_the_pid():
    assert m._worker_ping() == os.getpid()


def test_worker_init_ignores_ctrl_c_and_warms_up(monkeypatch):
    calls = []
    fake_signal = types.SimpleNamespace(
        signal=lambda sig, handler: calls.append((sig, handler)),
        SIGINT=signal.SIGINT,
        SIG_IGN=signal.SIG_IGN,
    )
    monkeypatch.setattr(m, "signal", fake_signal)
    monkeypatch.setattr(m, "_warm_up", lambda: calls.append("warm"))
    m._math_worker_init()
    assert calls == [(signal.SIGINT, signal.SIG_IGN), "warm"]


def test_as_pair():
    assert m._as_pair(("a", "b")) == ("a", "b")
    assert m._as_pair(["p", "g"]) == ("p", "g")
    assert m._as_pair(5) == ("", "")
    assert m._as_pair(("a", "b", "c")) == ("", "")


def test_constructor_validates_and_coerces():
    v = m.MathVerifier(workers=True, timeout_s=2)
    assert type(v.workers) is int and v.workers == 1
    assert type(v.timeout_s) is float and v.timeout_s == 2.0
    assert v._pool is None
    assert isinstance(v._lock, type(threading.Lock()))
    assert v._chunk_fn is m._verify_math_chunk
    assert m.MathVerifier(workers=0, timeout_s=0.5).timeout_s == 0.5
    with pytest.raises(ValueError, match=r"^workers must be >= 0, got -1$"):
        m.MathVerifier(workers=-1)
    with pytest.raises(ValueError, match=r"^timeout_s must be > 0, got 0$"):
        m.MathVerifier(timeout_s=0)
    with pytest.raises(ValueError, match=r"^timeout_s must be > 0, got -0.5$"):
        m.MathVerifier(timeout_s=-0.5)


def test_defaults():
    v = m.MathVerifier()
    assert (v.workers, v.timeout_s, v.worker_grace_s, v.startup_timeout_s) == (0, 5.0, 20.0, 120.0)


def test_verify_and_verify_batch_in_process(monkeypatch):
    monkeypatch.setattr(m, "_verify_math", lambda p, g, t: R(1.0, "passed", f"{p}|{g}|{t:g}"))
    v = m.MathVerifier(workers=0, timeout_s=1.5)
    assert v.verify("p", "g") == R(1.0, "passed", "p|g|1.5")
    assert v.verify_batch([("a", "1"), 5, ("b", "2")]) == [
        R(1.0, "passed", "a|1|1.5"),
        R(1.0, "passed", "||1.5"),
        R(1.0, "passed", "b|2|1.5"),
    ]
    assert v.verify_batch([]) == []


def test_verify_batch_with_workers_goes_to_the_pool_under_the_lock(monkeypatch):
    v = m.MathVerifier(workers=1, timeout_s=1.5)
    seen = []

    def run_in_pool(items):
        seen.append((items, v._lock.locked()))
        return ["out"]

    v._run_in_pool = run_in_pool
    assert v.verify_batch([("a", "1")]) == ["out"]
    assert seen == [([("a", "1")], True)]
    assert not v._lock.locked()
    assert v.verify_batch([]) == []
    assert len(seen) == 1


def test_check_answer_method(monkeypatch):
    monkeypatch.setattr(m, "_check_answer", lambda a, t: (a, t))
    assert m.MathVerifier(timeout_s=0.75).check_answer("x") == ("x", 0.75)


class Proc:
    def __init__(self, log, name, fail=False):
        self.log, self.name, self.fail = log, name, fail

    def kill(self):
        self.log.append(("kill", self.name))
        if self.fail:
            raise OSError("gone")

    def join(self, **kwargs):
        self.log.append(("join", self.name, kwargs))
        if self.fail:
            raise OSError("gone")


class FakePool:
    """An executor that runs what it is given at once, in this process."""

    def __init__(self, log=None, hang=(), fail_shutdown=False, **kwargs):
        self.kwargs = kwargs
        self.log = [] if log is None else log
        self.hang = hang
        self.fail_shutdown = fail_shutdown
        self.submitted = []
        self._processes = {1: Proc(self.log, "p1", fail=True), 2: Proc(self.log, "p2")}

    def submit(self, fn, *args):
        self.submitted.append((fn, args))
        fut = real_cf.Future()
        fut.seq = len(self.submitted)  # FakeCf.wait hands finished futures back in this order
        if args and any(p in self.hang for p, _ in args[0]):
            return fut  # never finishes
        try:
            fut.set_result(fn(*args))
        except BaseException as exc:
            fut.set_exception(exc)
        return fut

    def shutdown(self, **kwargs):
        self.log.append(("shutdown", kwargs))
        if self.fail_shutdown:
            raise RuntimeError("shutdown")


def test_close_shuts_the_pool_down_and_forgets_it():
    v = m.MathVerifier(workers=1)
    v.close()  # no pool: nothing to do
    pool = FakePool()
    v._pool = pool
    with v:
        pass
    assert v._pool is None
    assert pool.log == [("shutdown", {"wait": True, "cancel_futures": True})]
    with m.MathVerifier() as entered:
        assert isinstance(entered, m.MathVerifier)


def test_kill_pool_kills_every_worker_then_shuts_down_then_joins():
    v = m.MathVerifier(workers=2)
    v._kill_pool()  # no pool: nothing to do
    pool = FakePool(fail_shutdown=True)
    v._pool = pool
    v._kill_pool()
    assert v._pool is None
    assert pool.log == [
        ("kill", "p1"),
        ("kill", "p2"),
        ("shutdown", {"wait": False, "cancel_futures": True}),
        ("join", "p1", {"timeout": 5}),
        ("join", "p2", {"timeout": 5}),
    ]


@pytest.mark.parametrize("processes", ["absent", None])
def test_kill_pool_without_processes_still_shuts_down(processes):
    v = m.MathVerifier(workers=2)
    pool = FakePool()
    if processes == "absent":
        del pool._processes
    else:
        pool._processes = None
    v._pool = pool
    v._kill_pool()
    assert pool.log == [("shutdown", {"wait": False, "cancel_futures": True})]


class FakeCf:
    """A stand-in for the ``cf`` module: FakePool executors, and a ``wait`` that never waits
    on the wall clock (it moves the fake clock on by its timeout when nothing finished)."""

    FIRST_COMPLETED = real_cf.FIRST_COMPLETED

    def __init__(self, clock=None, **pool_kwargs):
        self.pools = []
        self.waits = []
        self.clock = clock
        self.pool_kwargs = pool_kwargs

    def ProcessPoolExecutor(self, **kwargs):  # noqa: N802 - the name it stands in for
        pool = FakePool(**self.pool_kwargs, **kwargs)
        self.pools.append(pool)
        return pool

    def wait(self, futures, timeout=None, **kwargs):
        self.waits.append((timeout, kwargs))
        if len(self.waits) > 10:
            raise RuntimeError("wait called in a loop")
        futures = list(futures)
        done = sorted((f for f in futures if f.done()), key=lambda f: getattr(f, "seq", 0))
        if not done and self.clock is not None:
            self.clock.now += timeout
        return done, {f for f in futures if not f.done()}


class Clock:
    def __init__(self, *times):
        self.times = list(times)
        self.now = None

    def monotonic(self):
        if self.times:
            self.now = self.times.pop(0)
        return self.now


def test_get_pool_starts_a_spawn_pool_and_waits_for_every_worker(monkeypatch):
    fake = FakeCf()
    monkeypatch.setattr(m, "cf", fake)
    v = m.MathVerifier(workers=3)
    v.startup_timeout_s = 7.5
    pool = v._get_pool()
    assert fake.pools == [pool] and v._pool is pool
    assert pool.kwargs == {
        "max_workers": 3,
        "mp_context": multiprocessing.get_context("spawn"),
        "initializer": m._math_worker_init,
    }
    assert pool.submitted == [(m._worker_ping, ())] * 3
    assert fake.waits == [(7.5, {})]
    assert v._get_pool() is pool  # started once
    assert len(fake.pools) == 1


def _raise_ping():
    raise OSError("no worker")


@pytest.mark.parametrize("how", ["hung", "raised"])
def test_get_pool_kills_a_pool_that_does_not_answer(monkeypatch, how):
    fake = FakeCf()
    monkeypatch.setattr(m, "cf", fake)
    if how == "raised":
        monkeypatch.setattr(m, "_worker_ping", _raise_ping)
    v = m.MathVerifier(workers=2)
    if how == "hung":
        # the first ping answers, the second never does
        orig = FakePool.submit

        def submit(self, fn, *args):
            if len(self.submitted) == 1:
                self.submitted.append((fn, args))
                return real_cf.Future()
            return orig(self, fn, *args)

        monkeypatch.setattr(FakePool, "submit", submit)
    with pytest.raises(RuntimeError, match=r"^math worker pool did not start$"):
        v._get_pool()
    assert v._pool is None
    assert ("shutdown", {"wait": False, "cancel_futures": True}) in fake.pools[0].log


def _chunk(payload, timeout_s):
    out = []
    for pred, gold in payload:
        if pred == "RAISE":
            raise ValueError("bad pair")
        if pred == "DIE":
            raise BrokenProcessPool("died")
        if pred == "SHORT":
            return out
        if pred == "TUPLE":
            return tuple(R(0.0, "failed", "t") for _ in payload)
        out.append(R(1.0, "passed", f"{pred}|{gold}|{timeout_s:g}"))
    return out


def ok(pred, gold="g", t=1.5):
    return R(1.0, "passed", f"{pred}|{gold}|{t:g}")


def wave_verifier(monkeypatch, clock, hang=(), workers=2):
    fake = FakeCf(clock=clock, hang=hang)
    monkeypatch.setattr(m, "cf", fake)
    monkeypatch.setattr(m, "time", clock)
    v = m.MathVerifier(workers=workers, timeout_s=1.5)
    v.worker_grace_s = 4.0
    v._chunk_fn = _chunk
    v._pool = fake.ProcessPoolExecutor()
    kills = []
    real_kill = v._kill_pool
    v._kill_pool = lambda: kills.append(1) or real_kill()
    return v, fake, kills


def test_run_wave_fills_results_and_waits_until_the_deadline(monkeypatch):
    clock = Clock(100.0, 101.0)
    v, fake, kills = wave_verifier(monkeypatch, clock)
    items = [("a", "g"), ("b", "g"), ("c", "g")]
    results = [None] * 3
    assert v._run_wave([[0, 1], [2]], items, results) is None
    assert results == [ok("a"), ok("b"), ok("c")]
    # deadline = start + 3 pairs * 1.5 s + 4 s grace = 108.5; at 101 there are 7.5 s left
    assert fake.waits == [(7.5, {"return_when": real_cf.FIRST_COMPLETED})]
    pool = fake.pools[0]
    assert pool.submitted == [(_chunk, (items[0:2], 1.5)), (_chunk, (items[2:3], 1.5))]
    assert kills == []


def test_run_wave_with_half_a_second_left_still_waits(monkeypatch):
    clock = Clock(100.0, 105.0)
    v, fake, kills = wave_verifier(monkeypatch, clock)
    results = [None]
    assert v._run_wave([[0]], [("a", "g")], results) is None
    assert results == [ok("a")]
    assert fake.waits == [(0.5, {"return_when": real_cf.FIRST_COMPLETED})]


def test_run_wave_at_the_deadline_kills_the_pool(monkeypatch):
    clock = Clock(100.0, 105.5)
    v, fake, kills = wave_verifier(monkeypatch, clock)
    results = [None]
    assert v._run_wave([[0]], [("a", "g")], results) == R(
        0.0, "timeout", "math worker exceeded 1.5 s and was killed"
    )
    assert results == [None] and fake.waits == [] and kills == [1]


def test_run_wave_kills_a_hung_worker_and_keeps_the_finished_chunks(monkeypatch):
    clock = Clock(100.0, 101.0)
    v, fake, kills = wave_verifier(monkeypatch, clock, hang=("HANG",))
    items = [("a", "g"), ("HANG", "g"), ("c", "g")]
    results = [None] * 3
    failure = v._run_wave([[0], [1], [2]], items, results)
    assert failure == R(0.0, "timeout", "math worker exceeded 1.5 s and was killed")
    assert results == [ok("a"), None, ok("c")]
    # 3 pairs * 1.5 + 4 = 8.5 s from 100: 7.5 s left at 101, when two chunks are done; the
    # third never is, and the wait for it uses up the 7.5 s
    assert [t for t, _ in fake.waits] == [7.5, 7.5]
    assert kills == [1] and v._pool is None


@pytest.mark.parametrize(
    ("bad", "failure"),
    [
        ("DIE", R(0.0, "crashed", "math worker process died")),
        ("RAISE", R(0.0, "crashed", "worker error: ValueError")),
        ("SHORT", R(0.0, "crashed", "worker error: TypeError")),
        ("TUPLE", R(0.0, "crashed", "worker error: TypeError")),
    ],
)
def test_run_wave_a_failed_chunk_fails_the_wave_but_not_the_other_chunks(monkeypatch, bad, failure):
    clock = Clock(100.0, 101.0)
    v, fake, kills = wave_verifier(monkeypatch, clock, hang=("HANG",))
    # the failed chunk comes first in what wait returns: the chunks after it still count
    items = [(bad, "g"), ("b", "g"), ("HANG", "g")]
    results = [None] * 3
    assert v._run_wave([[0], [1], [2]], items, results) == failure
    assert results == [None, ok("b"), None]
    assert len(fake.waits) == 1  # a failure ends the wave at once
    assert kills == [1]


@pytest.mark.parametrize("where", ["start", "submit"])
def test_run_wave_a_pool_that_fails_to_take_work(monkeypatch, where):
    clock = Clock(100.0)
    v, fake, kills = wave_verifier(monkeypatch, clock)
    if where == "start":
        v._pool = None
        v._get_pool = lambda: (_ for _ in ()).throw(RuntimeError("no pool"))
        expected = R(0.0, "crashed", "worker pool failed: RuntimeError")
    else:

        def submit(fn, *args):
            raise BrokenProcessPool("broken")

        v._pool.submit = submit
        expected = R(0.0, "crashed", "worker pool failed: BrokenProcessPool")
    results = [None]
    assert v._run_wave([[0]], [("a", "g")], results) == expected
    assert results == [None] and kills == [1]


def test_run_wave_real_wait_on_finished_futures(monkeypatch):
    """The real cf.wait with the real clock (everything is done already: no waiting)."""
    fake = FakeCf()
    fake.wait = real_cf.wait
    monkeypatch.setattr(
        m,
        "cf",
        types.SimpleNamespace(
            wait=real_cf.wait,
            FIRST_COMPLETED=real_cf.FIRST_COMPLETED,
            ProcessPoolExecutor=fake.ProcessPoolExecutor,
        ),
    )
    v = m.MathVerifier(workers=1, timeout_s=1.5)
    v._chunk_fn = _chunk
    v._pool = fake.ProcessPoolExecutor()
    results = [None, None]
    assert v._run_wave([[1], [0]], [("a", "g"), ("b", "g")], results) is None
    assert results == [ok("a"), ok("b")]


class WaveStub:
    """Stands in for _run_wave: scripted outcomes, recording the chunks it was given."""

    def __init__(self, script):
        self.script = script  # chunks (as a tuple of tuples) -> (filled indices, failure)
        self.calls = []

    def __call__(self, chunks, items, results):
        self.calls.append(chunks)
        fill, failure = self.script.get(tuple(map(tuple, chunks)), (None, None))
        for i in [i for c in chunks for i in c] if fill is None else fill:
            results[i] = ok(items[i][0])
        return failure


def pooled(workers=2, script=None, get_pool=None):
    v = m.MathVerifier(workers=workers, timeout_s=1.5)
    v._get_pool = get_pool or (lambda: None)
    v._run_wave = WaveStub(script or {})
    return v


@pytest.mark.parametrize(
    ("workers", "n", "chunks"),
    [
        (2, 9, [[0, 1, 2], [3, 4, 5], [6, 7, 8]]),  # ceil(9 / (2 * 2)) = 3 a chunk
        (1, 2, [[0], [1]]),
        (3, 1, [[0]]),
        (1, 514, [list(range(0, 256)), list(range(256, 512)), [512, 513]]),  # at most 256
    ],
)
def test_run_in_pool_chunks(workers, n, chunks):
    v = pooled(workers)
    items = [(f"p{i}", "g") for i in range(n)]
    assert v._run_in_pool(items) == [ok(f"p{i}") for i in range(n)]
    assert v._run_wave.calls == [chunks]


def test_run_in_pool_of_nothing():
    v = pooled()
    assert v._run_in_pool([]) == []
    assert v._run_wave.calls == []


def test_run_in_pool_reruns_the_unfinished_pairs_one_at_a_time_after_a_failure():
    failure = R(0.0, "crashed", "math worker process died")
    timeout = R(0.0, "timeout", "math worker exceeded 1.5 s and was killed")
    v = pooled(
        workers=2,
        script={
            ((0, 1), (2, 3), (4,)): ([0, 1], failure),  # chunk (0, 1) finished, then a crash
            ((3,),): ([], timeout),  # the culprit
            ((4,),): ([], None),  # claims success but gives nothing
        },
    )
    items = [(f"p{i}", "g") for i in range(5)]
    got = v._run_in_pool(items)
    assert v._run_wave.calls == [[[0, 1], [2, 3], [4]], [[2]], [[3]], [[4]]]
    assert got == [ok("p0"), ok("p1"), ok("p2"), timeout, R(0.0, "crashed", "no result")]


def test_run_in_pool_when_no_pool_starts():
    calls = []

    def get_pool():
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("nope")

    failure = R(0.0, "crashed", "math worker process died")
    v = pooled(workers=2, script={((0,), (1,)): ([0], failure)}, get_pool=get_pool)
    got = v._run_in_pool([("a", "g"), ("b", "g")])
    assert got == [ok("a"), R(0.0, "crashed", "worker pool failed to start: nope")]
    assert v._run_wave.calls == [[[0], [1]]]


def test_run_in_pool_through_the_fake_pool(monkeypatch):
    clock = Clock(100.0, 101.0, 102.0, 103.0, 104.0)
    fake = FakeCf(clock=clock)
    monkeypatch.setattr(m, "cf", fake)
    monkeypatch.setattr(m, "time", clock)
    with m.MathVerifier(workers=1, timeout_s=1.5) as v:
        v._chunk_fn = _chunk
        assert v.verify_batch([("a", "g"), ("b", "g")]) == [ok("a"), ok("b")]
        assert len(fake.pools) == 1


def test_end_to_end_in_process():
    v = m.MathVerifier(workers=0, timeout_s=5.0)
    assert v.verify("The answer is \\boxed{2 1/2}", "5/2") == R(
        1.0, "passed", "\\frac{5}{2} == gold \\frac{5}{2}"
    )
    assert re.fullmatch(r"answer parses to .+", v.check_answer("\\frac{1}{3}").reason)
