"""Unit tests of the harness modules, imported on the host (they also run inside the sandbox)."""

from __future__ import annotations

import ast
import os

import pytest

import sage_env
from sage_env import sandbox
from sage_env.sandbox.harness import report
from sage_env.sandbox.harness.rewrite import rewrite_asserts
from sage_env.sandbox.host import config, probe
from sage_env.sandbox.host.launch import HARNESS_MODULES, harness_argv


def test_literal_assert_keeps_the_expected_value_out_of_the_rewritten_test():
    new, sites = rewrite_asserts("assert f(1) == [1, 'secret-literal']")
    assert sites == [
        ("assert", ("cmp", ("h", 0), [("Eq", ("c", [1, "secret-literal"]))]), True, None)
    ]
    assert "secret-literal" not in new
    assert ast.unparse(ast.parse(new)) == "__sage_a__(0, (__sage_v__(0, 0, f(1)),), False)"


def test_literal_on_the_left_is_the_expected_value():
    new, sites = rewrite_asserts("assert 7 == g()")
    assert sites == [("assert", ("cmp", ("c", 7), [("Eq", ("h", 0))]), True, None)]
    assert new == "__sage_a__(0, (__sage_v__(0, 0, g()),), False)"


def test_every_assert_sends_values_and_keeps_operators_and_literals_with_the_judge():
    new, sites = rewrite_asserts(
        "assert f(x) > 7\nassert abs(f(a) - b) < 1e-9\nassert not f(0) == 0"
    )
    assert not any(t in new for t in ("7", "1e-09", "abs", ">", "<", "==", "not", "-"))
    assert [s[1] for s in sites] == [
        ("cmp", ("h", 0), [("Gt", ("c", 7))]),
        ("cmp", ("call", "abs", [("b", "-", ("h", 0), ("h", 1))], []), [("Lt", ("c", 1e-9))]),
        ("u", "not", ("cmp", ("h", 0), [("Eq", ("c", 0))])),
    ]


def test_short_circuits_run_in_the_test_with_their_holes_in_evaluation_order():
    new, sites = rewrite_asserts("assert x is None or f(x) > 0")
    assert new == "__sage_a__(0, __sage_v__(0, 0, x) is None or __sage_v__(0, 1, f(x)) > 0)"
    assert sites[0][1][0] == "or"


def test_a_call_statement_is_a_site_and_conditional_sites_are_optional():
    src = "f(1, 2)\ntry:\n    f(-1)\n    assert False\nexcept ValueError:\n    pass\n"
    new, sites = rewrite_asserts(src)
    assert new.splitlines()[0] == "__sage_c__(0, f(1, 2))"
    assert [(s[0], s[2]) for s in sites] == [("call", True), ("call", False), ("assert", False)]


def test_names_the_program_binds_are_not_the_judges_builtins():
    assert rewrite_asserts("assert sum(1, 2) == 3")[1][0][1][0] == "cmp"
    assert rewrite_asserts("assert sum(1, 2) == 3")[1][0][1][1][0] == "call"
    shadowed = rewrite_asserts("assert sum(1, 2) == 3", {"sum"})[1][0][1]
    assert shadowed == ("cmp", ("h", 0), [("Eq", ("c", 3))])


def test_nested_asserts_are_numbered_in_order():
    src = "def check(c):\n    assert c(1) == 2\n    for i in range(3):\n        assert c(i)\n"
    src += "check(f)\n"
    new, sites = rewrite_asserts(src)
    assert [s[0] for s in sites] == ["assert", "assert", "call"]
    assert "assert" not in new


@pytest.mark.parametrize(
    ("template", "values", "result"),
    [
        (("cmp", ("h", 0), [("Gt", ("c", 2))]), [5], True),
        (("and", [("h", 0), ("h", 1)]), [0], 0),  # hole 1 is never pulled
        (("cmp", ("c", 0), [("Lt", ("h", 0)), ("Lt", ("c", 3))]), [7], False),
        (("call", "len", [("h", 0)], []), [[1, 2]], 2),
    ],
)
def test_the_judge_evaluates_templates_pulling_holes_in_order(template, values, result):
    from sage_env.sandbox.harness.template import evaluate

    pulled = []

    def pull(j):
        pulled.append(j)
        return values[j]

    assert evaluate(template, pull) == result
    assert pulled == list(range(len(values)))


def test_the_judge_refuses_results_too_large_to_build():
    from sage_env.sandbox.harness.template import evaluate

    with pytest.raises(OverflowError):
        evaluate(("b", "**", ("h", 0), ("c", 10**9)), lambda j: 3)
    huge = 1 << (1 << 22)
    with pytest.raises(OverflowError):
        evaluate(("b", "*", ("h", 0), ("h", 0)), lambda j: huge)
    with pytest.raises(OverflowError):
        evaluate(("call", "str", [("h", 0)], []), lambda j: huge)


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
        report.decode_value(["Q", 1])


def test_an_opaque_value_equals_nothing():
    got = report.decode_value(["?", "Point", True])
    assert got != got and bool(got) and not (got == 1)
    with pytest.raises(TypeError):
        len(got)
    seq = report.decode_value(["?", "generator", True, [["I", 1]], False])
    assert list(seq) == [1]


def test_one_report_parser_for_host_and_harness():
    data = report.encode_line({"ev": "test", "i": 0, "ok": True}) + b"noise\n[1]\n{bad\n"
    assert report.parse_report(data) == [{"ev": "test", "i": 0, "ok": True}]
    assert sandbox.parse_report is report.parse_report
    assert report.parse_line(b"[1, 2]") is None


def test_harness_sources_travel_in_argv_so_no_file_must_be_readable():
    argv = harness_argv("/usr/bin/python3", ["-1", "-1", "3"])
    # not -I: its -E would drop the PYTHONHASHSEED that pins task runs
    assert argv[:4] == ["/usr/bin/python3", "-s", "-P", "-c"]
    assert argv[5] == str(len(HARNESS_MODULES))
    names = argv[6:-3:2]
    assert tuple(names) == HARNESS_MODULES
    assert argv[-3:] == ["-1", "-1", "3"]
    boot_lines = argv[4].strip().splitlines()
    assert len(boot_lines) <= 40


def _judge(tests):
    from sage_env.sandbox.harness.verdict import Judge

    rewritten, sites = zip(*(rewrite_asserts(t) for t in tests))
    out = []
    tags = [f"tag{i}" for i in range(len(tests))]
    return Judge(list(rewritten), list(sites), lambda **ev: out.append(ev), tags), out


def _tagged(i, events):
    return [dict(e, n=f"tag{i}") for e in events]


def _feed_test(judge, i, last, events):
    for e in _tagged(i, events):
        if last:
            judge.from_last(e)
        else:
            judge.from_worker({"ev": "chan", "i": i, "e": e})


def test_judge_reads_a_test_only_from_its_own_channel():
    judge, out = _judge(["assert f(1) == 1", "assert f(2) == 4"])
    # test 0's process claims test 1 passed, and writes an exit status: neither is believed
    _feed_test(judge, 0, False, [{"ev": "setup_ok"}])
    for e in ({"ev": "a", "i": 1, "k": 0, "v": [[0, ["I", 4]]]},):
        judge.from_worker({"ev": "chan", "i": 0, "e": dict(e, n="tag0")})
    judge.from_worker({"ev": "chan", "i": 0, "e": {"ev": "exit", "i": 1, "status": 0}})
    _feed_test(judge, 0, False, [{"ev": "test", "ok": True}])
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    _feed_test(judge, 1, True, [{"ev": "setup_ok"}, {"ev": "test", "ok": True}])
    judge.finish(0)
    verdicts = [e for e in out if e["ev"] == "test"]
    assert [(e["i"], e["ok"]) for e in verdicts] == [(0, False), (1, False)]
    assert verdicts[0]["msg"] == "assertion 0: got 4"
    assert verdicts[1]["msg"] == "assertion 0 was never checked"
    assert out[-1] == {"ev": "done"}


def test_judge_passes_a_test_whose_process_reported_the_expected_value():
    judge, out = _judge(["assert f(1) == 1"])
    events = [{"ev": "setup_ok"}, {"ev": "program_ok"}, {"ev": "a", "k": 0, "v": [[0, ["I", 1]]]}]
    _feed_test(judge, 0, True, events + [{"ev": "test", "ok": True}])
    judge.finish(0)
    assert out == [{"ev": "program_ok"}, {"ev": "test", "i": 0, "ok": True}, {"ev": "done"}]


@pytest.mark.parametrize(
    ("test", "events", "why"),
    [
        # a verdict instead of values: a forged truthy result
        ("assert f(3) > 2", [{"ev": "a", "k": 0, "v": []}], "out of order"),
        ("assert f(3) > 2", [{"ev": "a", "k": 0}], "malformed"),
        ("assert f(3) > 2", [{"ev": "a", "k": 0, "v": [[0, ["I", 1]]]}], "assertion 0: got 1"),
        # a hole reported twice, values the evaluation does not need, another site's holes
        (
            "assert f(3) > 2",
            [{"ev": "a", "k": 0, "v": [[0, ["I", 5]], [0, ["I", 5]]]}],
            "out of order",
        ),
        (
            "assert f(3) > 2",
            [{"ev": "a", "k": 0, "v": [[0, ["I", 5]], [1, ["I", 5]]]}],
            "out of order",
        ),
        ("assert f(3) > 2", [{"ev": "a", "k": 0, "v": [[0, ["Z", 5]]]}], "ValueError"),
        ("assert f(3) > 2", [{"ev": "a", "k": 0, "v": [[0, None]], "bad": "x"}], "x"),
        ("assert f(3) > 2", [{"ev": "a", "k": 5, "v": [[0, ["I", 5]]]}], "does not have"),
        # a required site missing (the process claims it finished after the first)
        (
            "assert f(3) > 2\nassert f(4) > 2",
            [{"ev": "a", "k": 0, "v": [[0, ["I", 5]]]}],
            "never checked",
        ),
        ("f(1, 2)", [], "statement 0 was never checked"),
    ],
)
def test_judge_computes_outcomes_from_values_in_order(test, events, why):
    judge, out = _judge([test])
    _feed_test(judge, 0, True, [{"ev": "setup_ok"}, {"ev": "program_ok"}, *events])
    _feed_test(judge, 0, True, [{"ev": "test", "ok": True}])
    judge.finish(0)
    ((verdict,),) = [[e for e in out if e["ev"] == "test"]]
    assert verdict["ok"] is False and why in verdict["msg"], verdict


@pytest.mark.parametrize("code", [1, 3, 255])
def test_judge_fails_a_test_that_reports_ok_then_exits_non_zero(code):
    """Issue 49 (c): "finished without raising" and the right values are not enough; the
    test's own process must also exit with status 0, in a forked test and in W's last one."""
    judge, out = _judge(["assert f(1) == 1", "assert f(2) == 2"])
    for i in (0, 1):
        events = [{"ev": "setup_ok"}, {"ev": "a", "k": 0, "v": [[0, ["I", i + 1]]]}]
        _feed_test(judge, i, i == 1, events + [{"ev": "test", "ok": True}])
    judge.from_worker({"ev": "exit", "i": 0, "status": code << 8})  # wait status of exit(code)
    judge.finish(code << 8)
    verdicts = [e for e in out if e["ev"] == "test"]
    assert [(e["i"], e["ok"]) for e in verdicts] == [(0, False), (1, False)]
    for v in verdicts:
        assert v["exc"] == "EarlyExit" and f"(status {code})" in v["msg"], v


def test_judge_ignores_events_without_the_runs_tag():
    judge, out = _judge(["assert f(1) == 1"])
    _feed_test(judge, 0, True, [{"ev": "setup_ok"}, {"ev": "program_ok"}])
    for e in ({"ev": "a", "k": 0, "v": [[0, ["I", 1]]]},):
        judge.from_last(dict(e, n="guessed"))
        judge.from_last(e)
    _feed_test(judge, 0, True, [{"ev": "test", "ok": True}])
    judge.finish(0)
    assert [e["ok"] for e in out if e["ev"] == "test"] == [False]


def test_judge_trusts_setup_errors_only_before_the_program_runs():
    judge, out = _judge(["assert f(1) == 1"])
    _feed_test(judge, 0, True, [{"ev": "setup_ok"}])
    _feed_test(judge, 0, True, [{"ev": "setup_error", "exc": "ValueError", "msg": "forged"}])
    _feed_test(judge, 0, True, [{"ev": "program_ok"}])
    judge.finish(0)
    assert {"ev": "setup_error", "exc": "ValueError", "msg": "forged"} not in out


def test_judge_fails_identical_tests_that_disagree():
    judge, out = _judge(["assert f(1) == 1", "assert f(1) == 2"])
    for i, value in ((0, 1), (1, 2)):
        events = [{"ev": "setup_ok"}, {"ev": "a", "k": 0, "v": [[0, ["I", value]]]}]
        events += [{"ev": "test", "ok": True}]
        _feed_test(judge, i, i == 1, events)
    judge.from_worker({"ev": "exit", "i": 0, "status": 0})
    judge.finish(0)
    verdicts = [e for e in out if e["ev"] == "test"]
    assert [(e["i"], e["ok"]) for e in verdicts] == [(0, False), (1, False)]
    assert "identical tests got different results" in verdicts[0]["msg"]


def test_the_zygotes_warm_up_judges_its_trusted_sample_and_it_passes():
    from sage_env.sandbox.harness.judge import warm

    out = warm()  # the zygote runs this before freezing (docs/reference/sandbox.md, Performance)
    assert {"ev": "test", "i": 0, "ok": True} in out
    assert out[-1] == {"ev": "done"}


def test_the_rewriter_keeps_sites_in_every_kind_of_statement_block():
    # sites sit only in statement lists (bodies, handlers, match cases, else/finally blocks)
    src = (
        "try:\n    assert f(0) == 0\nexcept E:\n    assert f(1) == 1\nelse:\n    f(2)\n"
        "finally:\n    assert f(3) == 3\nwith c() as x:\n    assert f(4) == 4\n"
        "match x:\n    case [y]:\n        assert f(5) == 5\n"
        "for i in r:\n    pass\nelse:\n    assert f(6) == 6\n"
        "while g():\n    assert f(7) == 7\nclass C:\n    assert f(8) == 8\n"
        "g(lambda: f(9), [f(10) for _ in r])\n"
    )
    new, sites = rewrite_asserts(src)
    assert [(s[0], s[2]) for s in sites] == [
        ("assert", False),
        ("assert", False),
        ("call", False),
        ("assert", False),
        ("assert", True),
        ("assert", False),
        ("assert", False),
        ("assert", False),
        ("assert", True),
        ("call", True),
        ("branch", True),  # the while's condition: numbered after every other site
    ]
    assert "assert" not in new
    assert [f"__sage_v__({k}, 0, f({k}))" in new for k in (0, 1, 3, 4, 5)] == [True] * 5


def test_the_program_is_parsed_only_for_tests_its_names_can_change():
    from sage_env.sandbox.harness.rewrite import needs_program_names

    plain = "def check(c):\n    assert c(1) == [2]  # no builtin of the judge's here\ncheck(f)\n"
    assert not needs_program_names(plain)
    # whatever the program binds, such a test is rewritten the same
    assert rewrite_asserts(plain, {"f", "c", "check", "sum", "len"}) == rewrite_asserts(plain)
    for src in ("assert len(f(1)) == 2", "assert f(1) == 'set'", "assert ｌｅｎ(f(1)) == 2", None):
        assert needs_program_names(src), src
    # `ｍａｔｈ` is `math` to Python (NFKC): the judge evaluates math.isclose either way
    for name in ("math", "ｍａｔｈ"):
        src = f"import {name}\nassert {name}.isclose(f(1), 2)"
        assert rewrite_asserts(src)[1][0][1][0] == "call", src
    # and where it can, the judge does parse it (MBPP's `def sum(a, b)` is the program's)
    assert rewrite_asserts("assert sum(1, 2) == 3", {"sum"})[1][0][1][0] == "cmp"


def test_plus_asserts_send_the_value_and_keep_the_tolerance():
    new, sites = rewrite_asserts("assert __sage_plus__(f(*_inp), 1e-3)")
    assert new == "__sage_a__(0, __sage_v__(0, 0, f(*_inp)), False)"
    assert sites == [("plus", ("h", 0), True, 1e-3)]
    # a malformed one is an ordinary assert (and fails: __sage_plus__ is not defined)
    assert rewrite_asserts("assert __sage_plus__(f(1))")[1][0][0] == "assert"


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
    from sage_env.sandbox.harness.compare import plus_equal

    assert plus_equal(out, exp, atol) is equal


def test_an_interpreter_without_dash_p_gets_the_harness_without_it(tmp_path):
    """Python 3.10 (Ubuntu 22.04's /usr/bin/python3) has no -P: the harness must still start."""
    import sys

    fake = tmp_path / "python310"
    fake.write_text(f'#!/bin/sh\n[ "$1" = "-P" ] && exit 2\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    argv = harness_argv(str(fake), ["-1", "-1", "3"])
    assert argv[:3] == [str(fake), "-s", "-c"]
    assert harness_argv(sys.executable, [])[:4] == [sys.executable, "-s", "-P", "-c"]


def test_the_host_finds_the_harness_sources_and_hides_the_package_data():
    # the harness's sources are read from their folder, and the unshare probe reads confine.py
    # from it too; the gold the sandbox hides is the package's own data (issue 50: the move to
    # sandbox/host/ once made both paths point one folder too deep)
    package = os.path.dirname(os.path.realpath(sage_env.__file__))
    assert config.PACKAGE_DIR == package
    for name in HARNESS_MODULES:
        assert os.path.isfile(os.path.join(config.HARNESS_DIR, name + ".py")), name
    assert os.path.join(package, "data") in probe.gold_paths()


def test_the_unshare_probe_agrees_with_the_bare_namespaces():
    """The ``level`` fixture skips an isolation level whose probe fails, so a broken probe
    would hide every ``unshare`` test (the sandbox split once made it read ``confine.py`` from
    the wrong folder). Where the bare namespaces work (root, ``unshare`` installed), the probe
    must say the level works too."""
    import shutil
    import subprocess

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("unshare needs the binary and root")
    bare = subprocess.run(
        [*probe.UNSHARE_ARGV, "--mount", "true"], capture_output=True, timeout=30
    )
    if bare.returncode != 0:
        pytest.skip(f"the namespaces themselves are refused here: {bare.stderr[-200:]!r}")
    assert probe._probe_level("unshare", sandbox.default_python()) is True
