"""Unit tests of the harness modules, imported on the host (they also run inside the sandbox)."""

from __future__ import annotations

import ast

import pytest

from sage_env import sandbox
from sage_env.sandbox import report
from sage_env.sandbox.launch import HARNESS_MODULES, harness_argv
from sage_env.sandbox.rewrite import rewrite_asserts


def test_literal_assert_keeps_the_expected_value_out_of_the_rewritten_test():
    new, sites = rewrite_asserts("assert f(1) == [1, 'secret-literal']")
    assert sites == [("eq", [1, "secret-literal"])]
    assert "secret-literal" not in new
    assert ast.unparse(ast.parse(new)) == "__sage_check__(0, f(1))"


def test_literal_on_the_left_is_the_expected_value():
    new, sites = rewrite_asserts("assert 7 == g()")
    assert sites == [("eq", 7)]
    assert new == "__sage_check__(0, g())"


def test_other_asserts_become_type_strict_truthy_checks():
    new, sites = rewrite_asserts("assert f(x) == g(x)\nassert ok(1), 'msg'")
    assert sites == [("truthy", None), ("truthy", None)]
    assert new.splitlines() == [
        "__sage_check__(0, __sage_eq__(f(x), g(x)), True)",
        "__sage_check__(1, ok(1), True)",
    ]


def test_nested_asserts_are_numbered_in_order():
    src = "def check(c):\n    assert c(1) == 2\n    for i in range(3):\n        assert c(i)\n"
    new, sites = rewrite_asserts(src)
    assert sites == [("eq", 2), ("truthy", None)]
    assert "assert" not in new


def test_rewriter_raises_on_a_test_that_does_not_parse():
    with pytest.raises(SyntaxError):
        rewrite_asserts("assert (")


@pytest.mark.parametrize(
    ("encoded", "value"),
    [
        (["n"], None),
        (["o", True], True),
        (["I", 5], 5),
        (["i", str(2**80)], 2**80),
        (["x", hex(-(2**80))], -(2**80)),
        (["f", "0.1"], 0.1),
        (["c", "1.0", "-2.0"], complex(1, -2)),
        (["s", "x"], "x"),
        (["b", "6869"], b"hi"),
        (["t", [["I", 1], ["l", [["s", "a"]]]]], (1, ["a"])),
        (["S", [["I", 1]]], {1}),
        (["F", [["I", 2]]], frozenset({2})),
        (["d", [[["s", "k"], ["n"]]]], {"k": None}),
    ],
)
def test_decode_value_restores_exact_builtin_types(encoded, value):
    got = report.decode_value(encoded)
    assert got == value and type(got) is type(value)


def test_decode_value_rejects_unknown_tags():
    with pytest.raises(ValueError):
        report.decode_value(["?", 1])


def test_one_report_parser_for_host_and_harness():
    data = report.encode_line({"ev": "test", "i": 0, "ok": True}) + b"noise\n[1]\n{bad\n"
    assert report.parse_report(data) == [{"ev": "test", "i": 0, "ok": True}]
    assert sandbox.parse_report is report.parse_report
    assert report.parse_line(b"[1, 2]") is None


def test_harness_sources_travel_in_argv_so_no_file_must_be_readable():
    argv = harness_argv("/usr/bin/python3", ["-1", "-1", "3"])
    assert argv[:3] == ["/usr/bin/python3", "-I", "-c"]
    assert argv[4] == str(len(HARNESS_MODULES))
    names = argv[5:-3:2]
    assert tuple(names) == HARNESS_MODULES
    assert argv[-3:] == ["-1", "-1", "3"]
    boot_lines = argv[3].strip().splitlines()
    assert len(boot_lines) <= 40


def _judge(tests):
    from sage_env.sandbox.judge import Judge

    rewritten, sites = zip(*(rewrite_asserts(t) for t in tests))
    out = []
    return Judge(list(rewritten), list(sites), lambda **ev: out.append(ev)), out


def test_judge_reads_a_test_only_from_its_own_channel():
    judge, out = _judge(["assert f(1) == 1", "assert f(2) == 4"])
    # test 0's process claims test 1 passed, and writes an exit status: neither is believed
    judge.from_worker({"ev": "chan", "i": 0, "e": {"ev": "setup_ok"}})
    for e in ({"ev": "site", "i": 1, "k": 0, "v": ["I", 4]}, {"ev": "exit", "i": 1, "status": 0}):
        judge.from_worker({"ev": "chan", "i": 0, "e": e})
    judge.from_worker({"ev": "chan", "i": 0, "e": {"ev": "test", "ok": True}})
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    judge.from_last({"ev": "setup_ok"})
    judge.from_last({"ev": "test", "ok": True})  # never checked its literal assertion
    judge.finish(0)
    verdicts = [e for e in out if e["ev"] == "test"]
    assert [(e["i"], e["ok"]) for e in verdicts] == [(0, False), (1, False)]
    assert verdicts[0]["msg"] == "assertion 0: got 4"
    assert verdicts[1]["msg"] == "assertion 0 was never checked"
    assert out[-1] == {"ev": "done"}


def test_judge_passes_a_test_whose_process_reported_the_expected_value():
    judge, out = _judge(["assert f(1) == 1"])
    for e in ({"ev": "setup_ok"}, {"ev": "program_ok"}, {"ev": "site", "k": 0, "v": ["I", 1]}):
        judge.from_last(e)
    judge.from_last({"ev": "test", "ok": True})
    judge.finish(0)
    assert out == [{"ev": "program_ok"}, {"ev": "test", "i": 0, "ok": True}, {"ev": "done"}]


def test_judge_trusts_setup_errors_only_before_the_program_runs():
    judge, out = _judge(["assert f(1) == 1"])
    judge.from_last({"ev": "setup_ok"})
    judge.from_last({"ev": "setup_error", "exc": "ValueError", "msg": "forged"})
    judge.from_last({"ev": "program_ok"})
    judge.finish(0)
    assert {"ev": "setup_error", "exc": "ValueError", "msg": "forged"} not in out


def test_judge_fails_identical_tests_that_disagree():
    judge, out = _judge(["assert f(1) == 1", "assert f(1) == 2"])
    for i, value in ((0, 1), (1, 2)):
        events = [{"ev": "setup_ok"}, {"ev": "site", "k": 0, "v": ["I", value]}]
        events.append({"ev": "test", "ok": True})
        for e in events:
            if i == 0:
                judge.from_worker({"ev": "chan", "i": 0, "e": e})
            else:
                judge.from_last(e)
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    judge.finish(0)
    verdicts = [e for e in out if e["ev"] == "test"]
    assert [(e["i"], e["ok"]) for e in verdicts] == [(0, False), (1, False)]
    assert "identical tests got different results" in verdicts[0]["msg"]


def test_plus_asserts_send_the_value_and_keep_the_tolerance():
    new, sites = rewrite_asserts("assert __sage_plus__(f(*_inp), 1e-3)")
    assert (new, sites) == ("__sage_check__(0, f(*_inp))", [("plus", 1e-3)])
    # a malformed one is an ordinary truthy assert (and fails: __sage_plus__ is not defined)
    assert rewrite_asserts("assert __sage_plus__(f(1))")[1] == [("truthy", None)]


@pytest.mark.parametrize(
    ("out", "exp", "atol", "equal"),
    [
        (2, 2.0, 0, True),  # exact == first, as EvalPlus
        (0.5 + 1e-9, 0.5, 0, True),  # float output: atol 1e-6 when none is given
        (0.5 + 1e-3, 0.5, 0, False),
        (0, 0.5, 0, False),  # int for float: not the same type
        ([1.0, 2.0000001], [1.0, 2.0], 0, True),
        ([1.0, 2.1], [1.0, 2.0], 0.2, True),
        ((1.0, 2.0), [1.0, 2.0], 0, False),
        ([1.0], [1.0, 2.0], 0, False),
        (float("nan"), float("nan"), 0, False),
        (float("inf"), float("inf"), 0, True),
        (3, 4, 0.5, False),  # an atol is for floats; ints of the same type compare by value
        ("a", "b", 1.0, False),
    ],
)
def test_plus_equal_follows_evalplus(out, exp, atol, equal):
    from sage_env.sandbox.compare import plus_equal

    assert plus_equal(out, exp, atol) is equal
