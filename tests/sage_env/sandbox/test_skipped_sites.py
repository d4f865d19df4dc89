"""Skipping a site under control flow must be worth no more than reaching it honestly.

A program can read its own process's memory, find the hooks' ``send`` closure, send the end of
its test under the real run tag and exit before a site is reported. Before this suite the judge
required only the sites not under ``if``/``try``/``while``/``match``, so a forger skipped every
assertion under one of those and was paid. Now the test's process reports how control flowed
(each ``if``/``while`` condition is a site whose values the judge evaluates, each ``for``
iteration, ``except`` handler and ``match`` case entered is counted), and the judge requires
every site that flow reaches, as many times as it does (docs/reference/verifiers.md, "Values,
not verdicts"). Honest programs keep passing tests whose asserts sit under control flow: a
branch the test legitimately skips, a loop with no iteration, an expected exception.
"""

from __future__ import annotations

import pytest

from sage_env.verifiers import CodeVerifier

#: Finds the test's hooks, sends "the test ended, ok" under the real run tag, exits before the
#: site is reported (the red team's reproducer).
EXIT_EARLY = """
import os, sys
def square(x):
    f = sys._getframe(1)
    while '__sage_a__' not in f.f_globals:
        f = f.f_back
    send = next(c.cell_contents for c in f.f_globals['__sage_a__'].__closure__
                if getattr(c.cell_contents, '__name__', '') == 'send')
    send(ev='test', ok=True)
    os._exit(0)
"""

#: The same, also claiming every loop iteration, handler and match case it could name.
EXIT_EARLY_CLAIMING = EXIT_EARLY.replace(
    "send(ev='test', ok=True)", "send(ev='test', ok=True, e=[[a, 1] for a in range(40)])"
)

WRONG = "def square(x):\n    return 0\n"

RIGHT = """
def square(x):
    if x < 0:
        raise ValueError("negative")
    return x * x
"""

#: Each shape has an assert the reference run reaches under control flow.
SKIPPABLE = {
    "if": "x = 3\nif x > 0:\n    assert square(x) == 9",
    "if-else": "x = 3\nif x < 0:\n    pass\nelse:\n    assert square(x) == 9",
    "try": "try:\n    square(-1)\n    assert False\nexcept ValueError:\n    pass",
    "try-body": "try:\n    assert square(2) == 4\nexcept ZeroDivisionError:\n    pass",
    "while": "i = 0\nwhile i < 2:\n    assert square(i + 1) == (i + 1) ** 2\n    i += 1",
    "match": "match 3:\n    case 3:\n        assert square(3) == 9\n    case _:\n        pass",
    "nested": (
        "for x in [1, 2]:\n    if x > 0:\n        try:\n            assert square(x) == x * x\n"
        "        except ZeroDivisionError:\n            pass"
    ),
    "helper": "def chk(x):\n    if x > 0:\n        assert square(x) == x * x\nchk(3)",
}


#: The exception each shape with a handler catches.
RAISES = {"try": "ValueError", "try-body": "ZeroDivisionError", "nested": "ZeroDivisionError"}


@pytest.mark.parametrize("shape", sorted(SKIPPABLE))
def test_exiting_early_under_control_flow_is_not_paid(level, shape):
    test = SKIPPABLE[shape]
    with CodeVerifier(timeout_s=3.0, pool_size=0) as cv:
        assert cv.verify(WRONG, [test]).score == 0.0, shape  # the honest wrong program
        assert cv.verify(EXIT_EARLY, [test]).score == 0.0, shape
        claimed = cv.verify(EXIT_EARLY_CLAIMING, [test]).score
        if shape in RAISES:
            # claiming a handler ran is claiming square raised what it catches: a program
            # that raises it earns as much (worth being that program, nothing more)
            raiser = f"def square(x):\n    raise {RAISES[shape]}\n"
            assert claimed <= cv.verify(raiser, [test]).score, shape
        else:
            assert claimed == 0.0, shape
        assert cv.verify(RIGHT, [test]).score == 1.0, shape


#: Honest shapes whose asserts sit under control flow that the run legitimately skips.
HONEST = [
    # the branch not taken holds a site the reference never reaches
    "x = -3\nif x > 0:\n    assert square(x) == 0\nelse:\n    assert square(-x) == 9",
    "x = 0\nif x:\n    assert square(x) == 1\nelif x == 0:\n    assert square(x) == 0",
    # loops with no iteration
    "i = 5\nwhile i < 2:\n    assert square(i) == 0\n    i += 1\nassert square(2) == 4",
    "if True:\n    for x in []:\n        assert square(x) == -1\nassert square(1) == 1",
    "for x in [1, 2, 3]:\n    if x == 2:\n        continue\n    assert square(x) in (1, 9)",
    "for x in [1, 2, 3]:\n    if x == 2:\n        break\n    assert square(x) == 1\nelse:\n"
    "    assert False",
    "i = 0\nwhile True:\n    i += 1\n    if i > 3:\n        break\n    assert square(i) == i * i",
    "i = 0\nwhile i < 3:\n    i += 1\nelse:\n    assert square(i) == 9",
    # an expected exception, with and without a site after the raising call
    "try:\n    square(-1)\n    assert False\nexcept ValueError:\n    pass",
    "try:\n    assert square(-1) == 1\nexcept ValueError:\n    pass\nelse:\n    assert False",
    "try:\n    assert square(2) == 4\nexcept ValueError:\n    assert False\nelse:\n"
    "    assert square(3) == 9\nfinally:\n    assert square(1) == 1",
    # a helper whose site is skipped by an exception its caller catches
    "def chk(x):\n    if x != 0:\n        assert square(x) == x * x\nfor x in (2, -2, 0):\n"
    "    try:\n        chk(x)\n    except ValueError:\n        pass",
    # match, a case not taken, and no case at all
    "match square(2):\n    case 9:\n        assert False\n    case 4:\n"
    "        assert square(3) == 9",
    "match 7:\n    case 1:\n        assert square(1) == 5",
    # an exception raised by the test itself, caught by the test
    "for x in (1, 2):\n    try:\n        if x == 2:\n            raise KeyError(x)\n"
    "        assert square(x) == 1\n    except KeyError:\n        pass",
]


def test_honest_programs_pass_control_flow_the_run_skips(level):
    with CodeVerifier(timeout_s=3.0, pool_size=0) as cv:
        res = cv.verify(RIGHT, HONEST)
        assert (res.passed, res.total) == (len(HONEST), len(HONEST)), res
        # and the honest wrong program fails each of them that calls square where it matters
        assert cv.verify(WRONG, HONEST[:1]).score == 0.0


def test_a_plus_site_must_be_reached_as_often_as_in_the_reference_run():
    # the judge alone: the reference reached the plus site twice; a candidate that reports
    # one value and ends its test fails, one that reports both passes
    from sage_env.sandbox.harness.verdict import Judge
    from sage_env.sandbox.harness.rewrite import rewrite_asserts

    test = "for x in (1, 2):\n    assert __sage_plus__(f(x), 0.0)"
    src, sites = rewrite_asserts(test)
    (loop_arm,) = [a for a, d in enumerate(sites.flow["arms"]) if d == ("ev",)]
    for reported, ok in (([1], False), ([1, 2], True)):
        out: list = []
        judge = Judge([src], [sites], _collect(out), ["t"])
        for v in (1, 2):
            judge.from_reference({"ev": "site", "i": 0, "k": 0, "v": ["I", v]})
        events = [{"ev": "setup_ok"}, {"ev": "program_ok"}]
        events += [{"ev": "a", "k": 0, "v": [[0, ["I", v]]]} for v in reported]
        events += [{"ev": "test", "ok": True, "e": [[loop_arm, len(reported)]]}]
        for e in events:
            judge.from_last(dict(e, n="t"))
        judge.finish(0)
        (verdict,) = [e for e in out if e["ev"] == "test"]
        assert verdict["ok"] is ok, verdict
        if not ok:
            assert verdict["msg"] == "assertion 0 was checked 1 times, the reference's 2"


def _collect(out: list):
    def report(**ev):
        out.append(ev)

    return report
