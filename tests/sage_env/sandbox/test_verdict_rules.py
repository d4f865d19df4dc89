"""The judging rules of the sandbox (``sage_env.sandbox.harness.verdict``), rule by rule.

No sandbox and no process: each test feeds :class:`Judge` a synthetic sequence of events, as
the judge H reads them from W's control pipe, a test's channel, the last test's channel and
the reference process, and asserts the exact reports (verdicts, forwarded events, ``done``).
Sites are written out by hand (``(kind, template, required, atol)``, as
:func:`~sage_env.sandbox.harness.rewrite.rewrite_asserts` makes them) except where a test
needs the rewriter's ``flow``. Boundaries (a site number, an exit status, a tolerance, a
message's length) sit on both sides of each comparison, so that a changed comparison, bound,
branch, key or message fails here (written for a mutation run of the module with this file
alone; docs/reference/testing.md).
"""

import signal

import pytest

from sage_env.sandbox.harness.rewrite import rewrite_asserts
from sage_env.sandbox.harness.verdict import Judge, _arm_counts, _show, _truth

EQ1 = ("assert", ("cmp", ("h", 0), [("Eq", ("c", 1))]), True, None)  # assert f() == 1
TRUTHY = ("assert", ("h", 0), True, None)  # assert f()
EQ_HOLES = ("assert", ("cmp", ("h", 0), [("Eq", ("h", 1))]), True, None)  # assert f() == g()
OPTIONAL = ("assert", ("cmp", ("h", 0), [("Eq", ("c", 1))]), False, None)  # under an if
CALL = ("call", None, True, None)  # f() as a statement
PLUS = ("plus", ("h", 0), True, 0.5)  # assert __sage_plus__(f(), 0.5)

SETUP = {"ev": "setup_ok"}
OK = {"ev": "test", "ok": True}
PASSED = [{"ev": "test", "i": 0, "ok": True}, {"ev": "done"}]


def I(n):  # noqa: E743 - the worker's tag for an int
    return ["I", n]


def a(k, *values):
    """Site ``k`` reached with holes 0, 1, ... holding ``values`` (encoded)."""
    return {"ev": "a", "k": k, "v": [[j, v] for j, v in enumerate(values)]}


def _judge(tests, sites, tags="auto"):
    out = []
    if tags == "auto":
        tags = [f"tag{i}" for i in range(len(tests))]
    return Judge(list(tests), [list(s) for s in sites], lambda **ev: out.append(ev), tags), out


def send(judge, i, *events):
    """Events written by test ``i``'s own process, with its tag, on the channel H reads."""
    for e in events:
        e = dict(e) if judge.tags[i] is None else dict(e, n=judge.tags[i])
        if i == judge.last:
            judge.from_last(e)
        else:
            judge.from_worker({"ev": "chan", "i": i, "e": e})


def one_test(sites, *events, status=0, setup=True):
    """A job of one test (W runs it itself) fed ``events``; what H reports."""
    judge, out = _judge(["T"], [sites])
    send(judge, 0, *([SETUP] if setup else []), *events)
    judge.finish(status)
    return out


def fail(msg, exc="AssertionError", i=0, **more):
    return {"ev": "test", "i": i, "ok": False, "exc": exc, "msg": msg, **more}


# -- helpers ----------------------------------------------------------------------------------


def test_show_names_an_int_over_4096_bits_by_its_size_and_cuts_reprs_at_120():
    assert _show(2**4096) == "<int of 4097 bits>"
    assert _show(2**4095) == repr(2**4095)[:120]
    assert len(_show(2**4095)) == 120
    assert _show(-(2**5000)) == "<int of 5001 bits>"
    assert _show(True) == "True"  # a bool is not an int here
    assert _show("x" * 200) == "'" + "x" * 119
    assert _show([1, 2]) == "[1, 2]"


class _Raises:
    def __bool__(self):
        raise RuntimeError("no truth")


def test_truth_of_a_value_whose_bool_raises_is_false():
    assert _truth(_Raises()) is False
    assert _truth([0]) is True
    assert _truth(0) is False


def test_arm_counts_keeps_well_formed_pairs_of_the_first_65536_items():
    assert _arm_counts([[1, 0], [2, 5], [3, -1], [4, True], [True, 2], [5.0, 1]]) == {1: 0, 2: 5}
    assert _arm_counts([[1, 2, 3], [2], (3, 4), "ab", [6, 7]]) == {6: 7}
    assert _arm_counts([[1, 2], [1, 3]]) == {1: 3}
    assert _arm_counts({1: 2}) == {}
    assert _arm_counts(None) == {}
    items = [[0, 0]] * 65535 + [[1, 1], [2, 2]]
    assert _arm_counts(items) == {0: 0, 1: 1}


# -- construction -----------------------------------------------------------------------------


def test_unparsed_tests_get_no_state_and_the_last_runnable_one_runs_in_w():
    tags = ("a", "b", "c", "d", "e", "f")
    judge, out = _judge([None, "A", None, "A", "B", None], [[]] * 6, tags=tags)
    assert (judge.first, judge.last) == (1, 4)
    assert sorted(judge.state) == [1, 3, 4]
    assert judge.groups == {"A": [1, 3], "B": [4]}
    assert judge.tags == list(tags)
    assert judge.state[1] == {
        "end": None,
        "seen": set(),
        "bad": None,
        "setup": False,
        "trace": [],
        "plus": {},
        "count": {},
        "truths": {},
        "arms": {},
    }
    assert (judge.pending, judge.done, judge.expected) == ({}, set(), {})
    assert judge.program_seen is False
    assert judge.program_state == {"setup": False}


def test_without_tags_every_test_reads_untagged_events():
    judge, out = _judge(["A", "B"], [[EQ1], [EQ1]], tags=None)
    assert judge.tags == [None, None]
    send(judge, 0, SETUP, a(0, I(1)), OK)
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    send(judge, 1, SETUP, a(0, I(1)), OK)
    judge.finish(0)
    assert out == [
        {"ev": "test", "i": 0, "ok": True},
        {"ev": "test", "i": 1, "ok": True},
        {"ev": "done"},
    ]


def test_a_job_with_no_runnable_test_has_no_first_or_last_test():
    judge, out = _judge([None, None], [[], []])
    assert (judge.first, judge.last, judge.state, judge.groups) == (None, None, {}, {})


# -- W's control pipe -------------------------------------------------------------------------


def test_a_forked_test_passes_and_the_last_is_judged_by_ws_exit_status():
    judge, out = _judge(["A", "B"], [[EQ1], [EQ_HOLES]])
    send(judge, 0, SETUP, a(0, I(1)), OK)
    assert out == []
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    assert out == [{"ev": "test", "i": 0, "ok": True}]
    send(judge, 1, SETUP, a(0, I(2), I(2)), OK)
    judge.finish(0)
    assert out == [
        {"ev": "test", "i": 0, "ok": True},
        {"ev": "test", "i": 1, "ok": True},
        {"ev": "done"},
    ]


@pytest.mark.parametrize("kind", ["syntax_error", "setup_error"])
def test_ws_syntax_and_setup_errors_are_forwarded_with_their_own_keys_only(kind):
    judge, out = _judge(["A"], [[EQ1]])
    judge.from_worker(
        {"ev": kind, "i": 7, "exc": "E", "msg": "m", "errno": None, "code": 3, "n": "x", "k": 1}
    )
    assert out == [{"ev": kind, "exc": "E", "msg": "m", "errno": None, "code": 3}]


def test_w_relays_nothing_for_the_last_test_an_unknown_one_or_a_non_dict_event():
    judge, out = _judge([None, "A", "B"], [[], [EQ1], [EQ1]])
    send(judge, 1, SETUP)
    for i in (0, 2, 3, "1", None):  # unparsed, the last (W runs it itself), unknown
        judge.from_worker({"ev": "chan", "i": i, "e": dict(a(0, I(5)), n=f"tag{i}")})
        judge.from_worker({"ev": "exit", "i": i, "status": 0})
        judge.from_worker({"ev": "fork_error", "i": i, "exc": "OSError"})
    judge.from_worker({"ev": "chan", "i": 1, "e": [dict(a(0, I(5)), n="tag1")]})
    judge.from_worker({"ev": "chan", "i": 1})
    judge.from_worker({"ev": "other", "i": 1, "status": 0})
    assert out == []
    send(judge, 1, a(0, I(1)), OK)
    send(judge, 2, SETUP, a(0, I(1)), OK)
    judge.from_worker({"ev": "exit", "i": 1, "status": 0})
    judge.finish(0)
    assert out == [
        {"ev": "test", "i": 1, "ok": True},
        {"ev": "test", "i": 2, "ok": True},
        {"ev": "done"},
    ]


def _early(code):
    return {"ok": False, "exc": "EarlyExit", "msg": f"test exited before finishing (status {code})"}


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (0, {"ok": True}),
        (3 << 8, _early(3)),
        (1 << 16, _early(-1)),
        ((1 << 16) - 1, _early(-1)),
        (-1, _early(-1)),
        (False, _early(-1)),
        (0.0, _early(-1)),
        (None, _early(-1)),
        (9, {"ok": False, "exc": "Signal", "msg": "SIGKILL", "signal": 9}),
        (33, {"ok": False, "exc": "Signal", "msg": "33", "signal": 33}),
    ],
)
def test_a_forked_tests_exit_status_is_read_only_when_a_wait_status(status, verdict):
    judge, out = _judge(["A", "B"], [[EQ1], []])
    send(judge, 0, SETUP, a(0, I(1)), OK)
    judge.from_worker({"ev": "exit", "i": 0, "status": status})
    assert out == [{"ev": "test", "i": 0, **verdict}]


def test_a_missing_exit_status_is_unknown():
    judge, out = _judge(["A", "B"], [[EQ1], []])
    send(judge, 0, SETUP, a(0, I(1)), OK)
    judge.from_worker({"ev": "exit", "i": 0})
    assert out == [fail("test exited before finishing (status -1)", "EarlyExit")]


def test_a_fork_error_fails_its_test_with_ws_exception():
    judge, out = _judge(["A", "B", "C"], [[EQ1], [EQ1], []])
    judge.from_worker({"ev": "fork_error", "i": 0, "exc": "OSError", "msg": "no fork", "errno": 11})
    judge.from_worker({"ev": "fork_error", "i": 1, "exc": "MemoryError", "msg": "", "ok": True})
    assert out == [
        fail("no fork", "OSError", errno=11),
        {"ev": "test", "i": 1, "ok": False, "exc": "MemoryError", "msg": ""},
    ]
    assert judge.state[0]["end"] == {"exc": "OSError", "msg": "no fork", "errno": 11, "ok": False}


def test_a_test_is_judged_once():
    judge, out = _judge(["A", "B"], [[EQ1], []])
    send(judge, 0, SETUP, a(0, I(1)), OK)
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    judge.from_worker({"ev": "exit", "i": 0, "status": 9})
    judge.from_worker({"ev": "fork_error", "i": 0, "exc": "OSError"})
    send(judge, 0, a(0, I(2)))
    judge.verdict(0, 9)
    judge.verdict(5, 9)
    assert out == [{"ev": "test", "i": 0, "ok": True}]


# -- a test's own channel ---------------------------------------------------------------------


def test_events_with_another_tag_or_none_are_not_the_tests():
    judge, out = _judge(["A"], [[EQ1]])
    judge.from_last(SETUP)
    judge.from_last(dict(SETUP, n="tag1"))
    judge.from_last(dict(SETUP, n="tag0"))
    for e in (a(0, I(2)), {"ev": "program_error", "exc": "E", "msg": "m"}):
        judge.from_last(e)
        judge.from_last(dict(e, n="guess"))
    judge.from_last(dict(a(0, I(1)), n="tag0"))
    judge.from_last(dict(OK, n="tag0"))
    judge.finish(0)
    assert out == PASSED


def test_a_test_says_nothing_before_its_setup_ok():
    assert one_test([EQ1], a(0, I(1)), OK, setup=False) == [
        fail("test exited before finishing (status 0)", "EarlyExit"),
        {"ev": "done"},
    ]
    assert one_test([EQ1], a(0, I(1)), OK, SETUP, status=0, setup=False) == [
        fail("test exited before finishing (status 0)", "EarlyExit"),
        {"ev": "done"},
    ]
    assert one_test([EQ1], SETUP, a(0, I(1)), OK, setup=False) == PASSED


def test_setup_error_before_setup_ok_fails_the_test_and_is_forwarded():
    err = {"ev": "setup_error", "exc": "ImportError", "msg": "no mod", "errno": 2, "i": 0}
    out = one_test([EQ1], err, SETUP, a(0, I(1)), OK, setup=False)
    assert out == [
        {"ev": "setup_error", "exc": "ImportError", "msg": "no mod", "errno": 2},
        fail("no mod", "ImportError", errno=2),
        {"ev": "done"},
    ]


def test_setup_error_after_setup_ok_is_the_programs_word_and_ignored():
    err = {"ev": "setup_error", "exc": "ValueError", "msg": "forged"}
    assert one_test([EQ1], err, a(0, I(1)), OK) == PASSED


def test_program_events_count_only_after_setup_ok_and_are_forwarded_once():
    judge, out = _judge(["A", "B"], [[EQ1], [EQ1]])
    send(judge, 0, {"ev": "program_ok", "x": 1}, SETUP)
    assert out == []
    send(judge, 0, {"ev": "program_ok", "i": 3, "k": 4, "code": 0}, a(0, I(1)), OK)
    assert out == [{"ev": "program_ok", "code": 0}]
    send(judge, 1, SETUP, {"ev": "program_error", "exc": "E", "msg": "boom", "errno": 5})
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    judge.finish(0)
    assert out == [
        {"ev": "program_ok", "code": 0},
        {"ev": "test", "i": 0, "ok": True},
        fail("boom", "E", i=1, errno=5),
        {"ev": "done"},
    ]


def test_a_program_error_before_setup_ok_is_not_forwarded():
    judge, out = _judge(["A"], [[EQ1]])
    send(judge, 0, {"ev": "program_error", "exc": "E", "msg": "early"}, SETUP)
    send(judge, 0, {"ev": "program_error", "exc": "F", "msg": "late"})
    assert out == [{"ev": "program_error", "exc": "F", "msg": "late"}]


def test_a_program_error_keeps_an_earlier_end():
    # the test's own end (reported first) stands; the program error is still forwarded
    out = one_test([EQ1], a(0, I(1)), OK, {"ev": "program_error", "exc": "E", "msg": "m"})
    assert out == [{"ev": "program_error", "exc": "E", "msg": "m"}, *PASSED]
    fail_first = {"ev": "test", "ok": False, "exc": "KeyError", "msg": "k"}
    out = one_test([EQ1], a(0, I(1)), fail_first, {"ev": "program_error", "exc": "E"})
    assert out == [{"ev": "program_error", "exc": "E"}, fail("k", "KeyError"), {"ev": "done"}]


def test_program_only_run_forwards_w_events_from_the_last_channel():
    judge, out = _judge([None], [[]])
    judge.from_last({"ev": "program_ok"})  # before setup_ok: ignored
    judge.from_last({"ev": "setup_error", "exc": "E1", "msg": "m1", "n": "t"})
    judge.from_last(SETUP)
    judge.from_last({"ev": "setup_error", "exc": "E2", "msg": "m2"})
    judge.from_last({"ev": "program_error", "exc": "E3", "msg": "m3", "i": 0})
    judge.from_last({"ev": "program_ok"})
    judge.from_last({"ev": "a", "k": 0, "v": []})
    judge.finish(0)
    assert out == [
        {"ev": "setup_error", "exc": "E1", "msg": "m1"},
        {"ev": "program_error", "exc": "E3", "msg": "m3"},
        {"ev": "done"},
    ]
    assert judge.program_state == {
        "setup": True,
        "end": {"ok": False, "exc": "E1", "msg": "m1", "errno": None},
    }


def test_program_only_run_records_a_program_error():
    judge, out = _judge([], [])
    judge.from_last(SETUP)
    judge.from_last({"ev": "program_error", "exc": "E3", "msg": "m3", "errno": 4})
    judge.from_last({"ev": "program_error", "exc": "E4"})
    assert judge.program_state == {
        "setup": True,
        "end": {"ok": False, "exc": "E3", "msg": "m3", "errno": 4},
    }
    assert out == [{"ev": "program_error", "exc": "E3", "msg": "m3", "errno": 4}]


def test_a_tests_end_event_failing_overrides_an_ok_one_but_not_the_reverse():
    bad = {"ev": "test", "ok": False, "exc": "ValueError", "msg": "v", "errno": 7}
    assert one_test([EQ1], a(0, I(1)), OK, bad) == [
        fail("v", "ValueError", errno=7),
        {"ev": "done"},
    ]
    later = {"ev": "test", "ok": False, "exc": "TypeError", "msg": "t"}
    assert one_test([EQ1], a(0, I(1)), bad, later) == [
        fail("t", "TypeError"),
        {"ev": "done"},
    ]
    assert one_test([EQ1], a(0, I(1)), bad, OK) == [
        fail("v", "ValueError", errno=7),
        {"ev": "done"},
    ]
    # ok missing: not a pass
    assert one_test([EQ1], a(0, I(1)), {"ev": "test", "exc": "X"}, OK) == [
        {"ev": "test", "i": 0, "ok": False, "exc": "X"},
        {"ev": "done"},
    ]


def test_unknown_events_are_ignored():
    assert one_test([EQ1], {"ev": "b", "k": 0}, {"k": 0}, a(0, I(1)), OK) == PASSED


# -- values: one site reached -----------------------------------------------------------------

OUT_OF_ORDER = "assertion 0: values out of order"
UNREADABLE = "assertion 0: unreadable value"
B120 = "b" * 120


@pytest.mark.parametrize(
    ("sites", "event", "msg"),
    [
        ([EQ1], a(-1, I(1)), "a site this test does not have"),
        ([EQ1], a(1, I(1)), "a site this test does not have"),
        ([EQ1, EQ1], a(2, I(1)), "a site this test does not have"),
        ([EQ1, EQ1], a(True, I(1)), "a site this test does not have"),
        ([EQ1], a("0", I(1)), "a site this test does not have"),
        ([EQ1], {"ev": "a", "v": [[0, I(1)]]}, "a site this test does not have"),
        ([EQ1], {"ev": "a", "k": 0}, "assertion 0: malformed values"),
        ([EQ1], {"ev": "a", "k": 0, "v": ((0, I(1)),)}, "assertion 0: malformed values"),
        ([EQ1], {"ev": "a", "k": 0, "v": [(0, I(1))]}, "assertion 0: malformed values"),
        ([EQ1], {"ev": "a", "k": 0, "v": [[0, I(1), 2]]}, "assertion 0: malformed values"),
        ([EQ1], {"ev": "a", "k": 0, "v": [[0]]}, "assertion 0: malformed values"),
        ([EQ1], {"ev": "a", "k": 0, "v": [[False, I(1)]]}, "assertion 0: malformed values"),
        ([EQ1], {"ev": "a", "k": 0, "v": [["0", I(1)]]}, "assertion 0: malformed values"),
        (
            [EQ_HOLES],
            {"ev": "a", "k": 0, "v": [[0, I(1)], [1.0, I(1)]]},
            "assertion 0: malformed values",
        ),
        ([EQ_HOLES], {"ev": "a", "k": 0, "v": [[1, I(1)], [0, I(1)]]}, OUT_OF_ORDER),
        ([EQ_HOLES], {"ev": "a", "k": 0, "v": [[0, I(1)], [0, I(1)]]}, OUT_OF_ORDER),
        ([EQ1], {"ev": "a", "k": 0, "v": [[0, None]]}, UNREADABLE),
        ([EQ1], {"ev": "a", "k": 0, "v": [[0, I(1)]], "bad": 12}, "assertion 0: 12"),
        ([EQ1], {"ev": "a", "k": 0, "v": [[0, None]], "bad": "b" * 200}, f"assertion 0: {B120}"),
        ([EQ_HOLES], {"ev": "a", "k": 0, "v": [[0, I(1)], [1, None]]}, UNREADABLE),
        ([EQ_HOLES], {"ev": "a", "k": 0, "v": [[0, None], [1, I(1)]]}, UNREADABLE),
    ],
)
def test_a_site_report_must_name_a_site_and_hold_readable_values_in_order(sites, event, msg):
    out = one_test(sites, event, a(0, I(1)), a(1, I(1)), OK)
    assert out == [fail(msg), {"ev": "done"}]


@pytest.mark.parametrize(
    "values",
    [[[0, I(1)], [0, None]], [[1, I(1)], [0, None]], [[0, I(1)], [2, I(1)], [1, None]]],
)
def test_the_order_of_the_values_is_checked_before_their_readability(values):
    out = one_test([EQ_HOLES], {"ev": "a", "k": 0, "v": values}, OK)
    assert out == [fail("assertion 0: values out of order"), {"ev": "done"}]


def test_the_first_failure_of_a_test_is_the_one_reported():
    out = one_test([EQ1, EQ1], a(1, I(2)), a(0, I(3)), a(0, I(1)), a(1, I(1)), OK)
    assert out == [fail("assertion 1: got 2"), {"ev": "done"}]


@pytest.mark.parametrize(
    ("site", "event", "msg"),
    [
        (EQ1, a(0, I(4)), "assertion 0: got 4"),
        (EQ1, a(0, ["s", "x" * 300]), "assertion 0: got '" + "x" * 119),
        (EQ1, a(0, ["x", hex(2**4096)]), "assertion 0: got <int of 4097 bits>"),
        (TRUTHY, a(0, I(0)), "assertion 0 failed"),
        (TRUTHY, a(0, ["?", "Gen", False]), "assertion 0 failed"),
        (EQ_HOLES, a(0, I(1), I(2)), "assertion 0 failed"),
        (EQ1, a(0, I(1), I(1)), "assertion 0: values out of order"),
        (EQ1, a(0, I(2), I(1)), "assertion 0: values out of order"),
        (TRUTHY, a(0, I(0), I(1)), "assertion 0: values out of order"),
        (EQ1, a(0), "assertion 0: values out of order"),
        (EQ_HOLES, a(0, I(1)), "assertion 0: values out of order"),
        (EQ_HOLES, {"ev": "a", "k": 0, "v": [[1, I(1)]]}, "assertion 0: values out of order"),
        (EQ1, a(0, ["Z", 1]), "assertion 0: ValueError: Z"),
        (
            ("assert", ("cmp", ("h", 0), [("Lt", ("c", 1))]), True, None),
            a(0, ["s", "a"]),
            "assertion 0: TypeError: '<' not supported between instances of 'str' and 'int'",
        ),
    ],
)
def test_an_assertion_is_judged_from_its_values_alone(site, event, msg):
    assert one_test([site], event, OK) == [fail(msg), {"ev": "done"}]


def test_an_exceptions_text_is_cut_at_100_characters():
    out = one_test([EQ1], a(0, ["i", "q" * 300]), OK)
    head = "assertion 0: ValueError: "
    text = "invalid literal for int() with base 10: '" + "q" * 300 + "'"
    assert out == [fail(head + text[:100]), {"ev": "done"}]


def test_a_true_assertion_and_a_truthy_opaque_value_pass():
    assert one_test([TRUTHY], a(0, ["?", "Gen", True]), OK) == PASSED
    assert one_test([EQ_HOLES], a(0, ["s", "x"], ["s", "x"]), OK) == PASSED


def test_a_call_statement_reports_no_values():
    assert one_test([CALL], a(0), OK) == PASSED
    assert one_test([CALL], a(0, I(1)), OK) == [
        fail("statement 0: values out of order"),
        {"ev": "done"},
    ]
    assert one_test([CALL], OK) == [fail("statement 0 was never checked"), {"ev": "done"}]


def test_a_required_site_must_be_reached_and_an_optional_one_need_not():
    assert one_test([EQ1, EQ1], a(0, I(1)), OK) == [
        fail("assertion 1 was never checked"),
        {"ev": "done"},
    ]
    assert one_test([EQ1, OPTIONAL], a(0, I(1)), OK) == PASSED


# -- flow: branches and loops (the rewriter's sites) ------------------------------------------


def _flow_test(src, *events, status=0):
    new, sites = rewrite_asserts(src)
    out = []
    judge = Judge([new], [sites], lambda **ev: out.append(ev), ["t"])
    for e in (SETUP, *events):
        judge.from_last(dict(e, n="t"))
    judge.finish(status)
    return out


IF_SRC = "if g():\n    assert f() == 1"  # site 0 the assertion, site 1 the condition


def test_a_branch_judged_true_requires_its_body_and_false_does_not():
    assert _flow_test(IF_SRC, a(1, I(1)), OK) == [
        fail("assertion 0 was never checked"),
        {"ev": "done"},
    ]
    assert _flow_test(IF_SRC, a(1, I(1)), a(0, I(1)), OK) == PASSED
    assert _flow_test(IF_SRC, a(1, I(0)), OK) == PASSED
    assert _flow_test(IF_SRC, a(1, ["?", "G", True]), OK) == [
        fail("assertion 0 was never checked"),
        {"ev": "done"},
    ]
    assert _flow_test(IF_SRC, a(1, ["?", "G", False]), OK) == PASSED


def test_a_branch_must_be_decided_and_its_counts_add_up():
    # the condition itself is a required site
    assert _flow_test(IF_SRC, OK) == [fail("condition 1 was never checked"), {"ev": "done"}]
    # judged true twice: the body twice
    events = (a(1, I(1)), a(0, I(1)), a(1, I(1)), OK)
    assert _flow_test(IF_SRC, *events) == [
        fail("assertion 0 was checked 1 times, its flow reaches it 2"),
        {"ev": "done"},
    ]
    events = (a(1, I(1)), a(0, I(1)), a(1, I(0)), OK)
    assert _flow_test(IF_SRC, *events) == PASSED


IF_ELSE_SRC = "if g():\n    assert f() == 1\nelse:\n    assert f() == 2"  # condition: site 2


def test_each_way_of_a_branch_requires_its_own_body():
    assert _flow_test(IF_ELSE_SRC, a(2, I(1)), a(0, I(1)), OK) == PASSED
    assert _flow_test(IF_ELSE_SRC, a(2, I(0)), a(1, I(2)), OK) == PASSED
    assert _flow_test(IF_ELSE_SRC, a(2, I(0)), OK) == [
        fail("assertion 1 was never checked"),
        {"ev": "done"},
    ]


@pytest.mark.parametrize(
    ("event", "msg"),
    [
        (a(1, I(1), I(1)), "condition 1: values out of order"),
        (a(1), "condition 1: values out of order"),
        (a(1, ["Z", 0]), "condition 1: ValueError: Z"),
    ],
)
def test_a_condition_is_evaluated_like_an_assertion(event, msg):
    assert _flow_test(IF_SRC, event, a(0, I(1)), OK) == [fail(msg), {"ev": "done"}]


FOR_SRC = "for x in r():\n    assert f(x) > 0"  # arm 1: the loop body, counted by the process


def test_a_loop_body_must_be_reached_as_often_as_the_process_says_it_ran():
    twice = {"ev": "test", "ok": True, "e": [[1, 2]]}
    assert _flow_test(FOR_SRC, a(0, I(1)), twice) == [
        fail("assertion 0 was checked 1 times, its flow reaches it 2"),
        {"ev": "done"},
    ]
    assert _flow_test(FOR_SRC, a(0, I(1)), a(0, I(1)), twice) == PASSED
    # a later ok end does not replace the first one's counts
    events = (a(0, I(1)), {"ev": "test", "ok": True, "e": [[1, 1]]}, twice)
    assert _flow_test(FOR_SRC, *events) == PASSED
    events = (a(0, I(1)), twice, {"ev": "test", "ok": True, "e": [[1, 1]]})
    assert _flow_test(FOR_SRC, *events) == [
        fail("assertion 0 was checked 1 times, its flow reaches it 2"),
        {"ev": "done"},
    ]


# -- the verdict ------------------------------------------------------------------------------


def test_a_bad_value_outranks_a_failed_end_which_outranks_a_signal():
    bad = {"ev": "test", "ok": False, "exc": "KeyError", "msg": "k"}
    assert one_test([EQ1], a(0, I(2)), bad, status=9) == [
        fail("assertion 0: got 2"),
        {"ev": "worker_signal", "signal": 9},
        {"ev": "done"},
    ]
    assert one_test([EQ1], a(0, I(1)), bad, status=9) == [
        fail("k", "KeyError"),
        {"ev": "worker_signal", "signal": 9},
        {"ev": "done"},
    ]
    assert one_test([EQ1], a(0, I(1)), status=15) == [
        fail("SIGTERM", "Signal", signal=15),
        {"ev": "worker_signal", "signal": 15},
        {"ev": "done"},
    ]
    # a signal outranks the sites the flow misses
    assert one_test([EQ1], OK, status=6) == [
        fail("SIGABRT", "Signal", signal=6),
        {"ev": "worker_signal", "signal": 6},
        {"ev": "done"},
    ]


@pytest.mark.parametrize(
    ("events", "status", "code"),
    [
        ((a(0, I(1)),), 0, 0),  # no end event
        ((a(0, I(1)), OK), 2 << 8, 2),
        ((a(0, I(1)), OK), 1 << 8, 1),
        ((a(0, I(1)), OK), None, -1),  # W's status unknown
        ((a(0, I(1)), OK), 0x137F, -1),  # stopped: neither exited nor signalled
        ((OK,), 4 << 8, 4),  # an early exit outranks the sites the flow misses
    ],
)
def test_a_test_must_end_and_exit_with_status_0(events, status, code):
    assert one_test([EQ1], *events, status=status) == [
        fail(f"test exited before finishing (status {code})", "EarlyExit"),
        {"ev": "done"},
    ]


def test_a_worker_killed_by_a_signal_is_reported_after_the_verdicts():
    judge, out = _judge(["A", "A", "B"], [[EQ1], [EQ1], [EQ1]])
    send(judge, 0, SETUP, a(0, I(1)), OK)
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    assert out == []  # held until test 1, identical, is judged
    judge.finish(signal.SIGKILL)
    # test 1 never ran (W died first): no verdict; test 0 is released on its own
    assert out == [
        fail("SIGKILL", "Signal", i=2, signal=9),
        {"ev": "test", "i": 0, "ok": True},
        {"ev": "worker_signal", "signal": 9},
        {"ev": "done"},
    ]


@pytest.mark.parametrize("w_status", [None, -1, 0, 1 << 8])
def test_no_worker_signal_without_a_signal(w_status):
    judge, out = _judge([None], [[]])
    judge.finish(w_status)
    assert out == [{"ev": "done"}]


# -- identical tests --------------------------------------------------------------------------


def _identical(values, last_value):
    """Tests 0..n-1 identical ("A"), forked, each reporting a value twice (``None``: 1 and 2,
    a failed assertion); test n ("B") the last."""
    n = len(values)
    judge, out = _judge(["A"] * n + ["B"], [[EQ_HOLES]] * n + [[EQ1]])
    for i, v in enumerate(values):
        send(judge, i, SETUP, a(0, I(v), I(v)) if v is not None else a(0, I(1), I(2)), OK)
        judge.from_worker({"ev": "exit", "i": i, "status": 0})
    send(judge, n, SETUP, a(0, I(last_value)), OK)
    return judge, out


DIFFERENT = "identical tests got different results (a test-dependent program)"


def test_identical_tests_that_agree_pass_together():
    judge, out = _identical([3, 3], 1)
    judge.finish(0)
    assert out == [
        {"ev": "test", "i": 0, "ok": True},
        {"ev": "test", "i": 1, "ok": True},
        {"ev": "test", "i": 2, "ok": True},
        {"ev": "done"},
    ]


def test_identical_tests_that_disagree_all_fail():
    judge, out = _identical([3, 4, 3], 1)
    judge.finish(0)
    assert out == [
        fail(DIFFERENT, i=0),
        fail(DIFFERENT, i=1),
        fail(DIFFERENT, i=2),
        {"ev": "test", "i": 3, "ok": True},
        {"ev": "done"},
    ]


def test_a_failed_identical_test_keeps_its_own_failure_and_the_others_pass():
    judge, out = _identical([3, None, 3], 1)
    judge.finish(0)
    assert out == [
        {"ev": "test", "i": 0, "ok": True},
        fail("assertion 0 failed", i=1),
        {"ev": "test", "i": 2, "ok": True},
        {"ev": "test", "i": 3, "ok": True},
        {"ev": "done"},
    ]


def test_identical_tests_compare_which_sites_they_reached_with_which_values():
    judge, out = _judge(["A", "A", "B"], [[EQ_HOLES, CALL]] * 2 + [[]])
    send(judge, 0, SETUP, a(0, I(3), I(3)), a(1), OK)
    send(judge, 1, SETUP, a(1), a(0, I(3), I(3)), OK)
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    judge.from_worker({"ev": "exit", "i": 1, "status": 0})
    assert out == [fail(DIFFERENT, i=0), fail(DIFFERENT, i=1)]
    assert judge.state[2]["trace"] == []


def test_a_held_test_reads_no_more_events():
    judge, out = _judge(["A", "A", "B"], [[EQ_HOLES]] * 2 + [[]])
    send(judge, 0, SETUP, a(0, I(3), I(3)), OK)
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    send(judge, 0, a(0, I(4), I(4)))  # held: too late
    send(judge, 1, SETUP, a(0, I(3), I(3)), OK)
    judge.from_worker({"ev": "exit", "i": 1, "status": 0})
    assert out == [{"ev": "test", "i": 0, "ok": True}, {"ev": "test", "i": 1, "ok": True}]


def test_a_test_alone_keeps_no_trace():
    judge, out = _judge(["A", "B"], [[EQ1], [EQ1]])
    send(judge, 0, SETUP, a(0, I(1)))
    assert judge.state[0]["trace"] == []
    assert judge.state[0]["count"] == {0: 1}
    assert judge.state[0]["seen"] == {0}


def test_a_trace_holds_each_sites_values_as_sorted_json():
    judge, out = _judge(["A", "A"], [[EQ_HOLES]] * 2)
    send(judge, 0, SETUP, a(0, ["d", [[["s", "b"], I(1)]]], ["o", True]))
    assert judge.state[0]["trace"] == [(0, ['["d", [[["s", "b"], ["I", 1]]]]', '["o", true]'])]
    send(judge, 0, {"ev": "a", "k": 0, "v": [[0, {"b": 1, "a": 2}], [1, I(1)]]})
    assert judge.state[0]["trace"][1] == (0, ['{"a": 2, "b": 1}', '["I", 1]'])


# -- plus sites (EvalPlus's comparison with the reference's value) ----------------------------


def _plus(values, reference, site=PLUS, n_sites=1, status=0):
    """One test with plus site(s): the process reports ``values`` at site 0, the reference
    process ``reference`` (events for test 0)."""
    judge, out = _judge(["P"], [[site] * n_sites])
    for ev in reference:
        judge.from_reference(ev)
    send(judge, 0, SETUP, *(a(0, v) for v in values), OK)
    judge.finish(status)
    return judge, out


def ref(v, i=0, k=0):
    return {"ev": "site", "i": i, "k": k, "v": v}


NO_REFERENCE = "assertion 0: no reference value"


@pytest.mark.parametrize(
    ("got", "want", "msg"),
    [
        (I(1), I(1), None),
        (["f", "1.4"], ["f", "1.0"], None),  # within atol 0.5
        (["f", "1.6"], ["f", "1.0"], "assertion 0: got 1.6"),
        (["s", "a" * 200], ["s", "b"], "assertion 0: got '" + "a" * 119),
        (["Z", 1], I(1), "assertion 0: got '<undecodable>'"),
    ],
)
def test_a_plus_value_is_compared_with_the_references_at_the_sites_tolerance(got, want, msg):
    judge, out = _plus([got], [ref(want)])
    assert out == ([fail(msg)] if msg else [PASSED[0]]) + [{"ev": "done"}]
    assert judge.expected == {}


def test_a_plus_site_with_no_tolerance_compares_exactly():
    site = ("plus", ("h", 0), True, 0.0)
    judge, out = _plus([I(2)], [ref(I(1))], site=site)
    assert out == [fail("assertion 0: got 2"), {"ev": "done"}]


def test_each_plus_value_is_compared_with_the_references_value_of_the_same_rank():
    judge, out = _plus([I(1), I(2)], [ref(I(1)), ref(I(2))])
    assert out == PASSED
    judge, out = _plus([I(1), I(2)], [ref(I(2)), ref(I(1))], site=("plus", ("h", 0), True, 0.0))
    assert out == [fail("assertion 0: got 1"), {"ev": "done"}]


@pytest.mark.parametrize(
    ("values", "reference", "msg"),
    [
        ([], [ref(I(1))], "assertion 0 was never checked, the reference's 1"),
        ([I(1)], [ref(I(1)), ref(I(2))], "assertion 0 was checked 1 times, the reference's 2"),
        ([I(1), I(2)], [ref(I(1))], NO_REFERENCE),
        ([I(1)], [], NO_REFERENCE),
        ([I(1)], [{"ev": "site", "i": 0, "k": 0, "bad": "huge"}], NO_REFERENCE),
        ([I(1)], [ref(["Z", 1])], NO_REFERENCE),
        ([I(1)], [ref(I(1), i=1)], NO_REFERENCE),
        ([I(1)], [ref(I(1), k="0")], NO_REFERENCE),
        ([I(1)], [dict(ref(I(1)), ev="a")], NO_REFERENCE),
        ([I(1)], [{"ev": "site", "i": 0, "k": 0, "line": b'{"bad": 1}'}], NO_REFERENCE),
        ([I(1)], [{"ev": "site", "i": 0, "k": 0, "line": b"{no json"}], NO_REFERENCE),
        ([I(1)], [{"ev": "site", "i": 0, "k": 0, "line": '{"v": ["I", 1]}'}], NO_REFERENCE),
    ],
)
def test_a_plus_site_needs_a_reference_value_for_each_of_its_values(values, reference, msg):
    judge, out = _plus(values, reference)
    if not values:
        assert out == [fail("assertion 0 was never checked"), {"ev": "done"}]
        judge, out = _plus(values, reference, site=PLUS[:2] + (False, 0.5))
    assert out == [fail(msg), {"ev": "done"}]


def test_a_reference_line_is_decoded_when_the_test_is_judged():
    line = {"ev": "site", "i": 0, "k": 0, "line": b'{"ev": "site", "v": ["f", "2.25"]}'}
    judge, out = _plus([["f", "2.5"]], [line])
    assert out == PASSED
    judge, out = _plus([["f", "2.8"]], [line])
    assert out == [fail("assertion 0: got 2.8"), {"ev": "done"}]


def test_plus_values_must_be_one_hole():
    for event in (a(0), a(0, I(1), I(1)), {"ev": "a", "k": 0, "v": [[1, I(1)]]}):
        judge, out = _judge(["P"], [[PLUS]])
        judge.from_reference(ref(I(1)))
        send(judge, 0, SETUP, event, a(0, I(1)), OK)
        judge.finish(0)
        assert out == [fail("assertion 0: values out of order"), {"ev": "done"}]


def test_reference_values_of_other_sites_are_not_plus_checks():
    judge, out = _judge(["P"], [[EQ1, PLUS]])
    judge.from_reference(ref(I(7), k=0))
    judge.from_reference(ref(I(1), k=1))
    send(judge, 0, SETUP, a(0, I(1)), a(1, I(1)), OK)
    judge.finish(0)
    assert out == PASSED


def test_plus_sites_are_checked_in_order_and_a_passing_one_does_not_end_the_check():
    judge, out = _judge(["P"], [[PLUS, PLUS, PLUS]])
    for k, v in ((0, 1), (1, 2), (2, 3)):
        judge.from_reference(ref(I(v), k=k))
    send(judge, 0, SETUP, a(0, I(1)), a(1, I(9)), a(2, I(8)), OK)
    judge.finish(0)
    assert out == [fail("assertion 1: got 9"), {"ev": "done"}]


def test_a_plus_failure_comes_after_every_other_rule():
    judge, out = _plus([I(5)], [ref(I(1))], status=3 << 8)
    assert out == [fail("test exited before finishing (status 3)", "EarlyExit"), {"ev": "done"}]


def test_the_references_values_are_dropped_once_the_test_is_judged():
    judge, out = _judge(["P", "Q"], [[PLUS, PLUS], [PLUS]])
    judge.from_reference(ref(I(1), k=0))
    judge.from_reference(ref(I(2), k=1))
    judge.from_reference(ref(I(3), i=1, k=0))
    send(judge, 0, SETUP, a(0, I(1)), a(1, I(2)))
    assert judge.state[0]["plus"] == {0: [I(1)], 1: [I(2)]}
    judge.from_worker({"ev": "fork_error", "i": 0, "exc": "OSError"})
    assert judge.expected == {(1, 0): [("v", 3)]}
    assert judge.state[0]["plus"] == {}
    assert sorted(judge.state[0]) == sorted(judge.state[1])
