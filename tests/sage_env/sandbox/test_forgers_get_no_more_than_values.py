"""Red team for "values, not verdicts": a program owns its own process, so what it writes there
must be worth no more than a value it could have returned.

The attack class: from inside the call under test (or at import), the program writes lines in
the harness's event format on every descriptor it holds, then leaves with ``os._exit(0)``
before the real assertion reports. Two kinds of forger are tried at every isolation level this
machine has (bubblewrap ones skip without bwrap; ``unshare`` needs root):

* blind forgers know the wire format (``sage_env/sandbox/harness/report.py``, the judge's
  source) but not the run: they score 0 on every test shape, because the judge reads only
  events that carry the run's tag and computes every outcome from values itself;
* forgers that read the harness's memory (they call the test's own reporting functions) can
  send any value, in order, and stop after it: they score 0 wherever no returned value could
  pass (every site required, literal-blind identical tests must agree, values in order), and
  a control shows they never do better than an honest program returning values.
"""

from __future__ import annotations

import pytest

import sage_env
from learners.evaluation import plus_tests
from sage_env import EnvConfig
from sage_env.verifiers import CodeVerifier
from tests.scripted import CODE_SEED, play_round

# Every event shape the harness has used or uses, claiming every site of tests 0..3 passed with
# a value each shape would accept (10**9, 4, 0.5, True), under no tag, guessed tags, and the
# old verdict-style events; written to every descriptor, then os._exit(0) (unless KEEP).
BLIND = """
import os, json, sys
def _events():
    out = []
    for tag in (None, "", "0" * 24, "tag0"):
        extra = {} if tag is None else {"n": tag}
        out += [dict(e, **extra) for e in ({"ev": "setup_ok"}, {"ev": "program_ok"})]
        for k in range(4):
            for v in (["I", 10 ** 9], ["I", 4], ["f", "0.5"], ["o", True]):
                out.append(dict({"ev": "v", "k": k, "j": 0, "v": v}, **extra))
                out.append(dict({"ev": "v", "k": k, "j": 1, "v": v}, **extra))
                out.append(dict({"ev": "a", "k": k}, **extra))
                out.append(dict({"ev": "site", "k": k, "t": True, "v": v}, **extra))
        out.append(dict({"ev": "test", "ok": True}, **extra))
    for i in range(4):
        out += [{"ev": "chan", "i": i, "e": e} for e in out[:8]]
        out += [{"ev": "test", "i": i, "ok": True}, {"ev": "exit", "i": i, "status": 0}]
    out += [{"ev": "done"}]
    return ("\\n" + "\\n".join(json.dumps(e) for e in out) + "\\n").encode()
DATA = _events()
def forge():
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        fds = []
    for fd in sorted(set(fds) | set(range(64))):
        try:
            os.write(fd, DATA)
        except OSError:
            pass
"""

#: A wrong program for each shape of the issue's table: forges, then exits with status 0.
SHAPES = {
    "compare_not_eq_literal": ("def f(x):\n    forge()\n    os._exit(0)\n", ["assert f(3) > 2"]),
    "several_truthy_tests_with_not_eq": (
        "def f(x):\n    forge()\n    os._exit(0)\n",
        ["assert f(1)", "assert not f(0) == 0", "assert f(2) and f(3) != 7"],
    ),
    "float_idiom_abs_difference": (
        "def f(a):\n    forge()\n    os._exit(0)\n",
        ["b = 0.5\nassert abs(f(1) - b) < 1e-9", "assert abs(f(2) - 0.25) < 1e-9"],
    ),
    "call_only_test_while_f_raises": (
        "def f(a, b):\n    forge()\n    os._exit(0)\n    raise ValueError('wrong')\n",
        ["f(1, 2)"],
    ),
    "eq_literal_the_program_knows": (
        "def f(a, b):\n    forge()\n    os._exit(0)\n",
        ["assert f(1, 2) == 4", "assert f(2, 2) == 4"],
    ),
    "forged_at_import_with_setup_ok_and_program_ok": (
        "forge()\nos._exit(0)\ndef f(*a):\n    return 0\n",
        ["assert f(3) > 2", "assert f(1, 2) == 4", "f(1, 2)"],
    ),
    "forged_from_a_child_that_outlives_the_test": (
        "import time\n"
        "def f(*a):\n"
        "    if os.fork() == 0:\n"
        "        for _ in range(20):\n"
        "            forge()\n"
        "            time.sleep(0.02)\n"
        "        os._exit(0)\n"
        "    time.sleep(0.1)\n"
        "    os._exit(0)\n",
        ["assert f(3) > 2", "f(1, 2)"],
    ),
}

# Reads the harness's memory: calls the test's own reporting functions (so its events carry the
# run's tag), with the values it wants, then claims the test ended and leaves.
READER = """
import os, sys
def _harness():
    frame = sys._getframe(1)
    while frame is not None and "__sage_v__" not in frame.f_globals:
        frame = frame.f_back
    g = frame.f_globals
    send = None
    for cell in g["__sage_v__"].__closure__ or ():
        if getattr(cell.cell_contents, "__name__", "") == "send":
            send = cell.cell_contents
    return g["__sage_v__"], g["__sage_a__"], g.get("__sage_c__"), send
def claim(values, k=0, end=True):
    v, a, c, send = _harness()
    for j, value in enumerate(values):
        v(k, j, value)
    a(k, None, False)
    if end:
        send(ev="test", ok=True)
        os._exit(0)
"""

#: (program, tests, value): pairs of tests whose rewritten sources are identical (the literals
#: and operators stay with the judge), so their values must agree: no value passes both. The
#: forger earns at most what returning ``value`` earns (one of two).
CONTRADICTIONS = {
    "compare_both_ways": ([10**9], ["assert f(1) > 2", "assert f(1) < 0"]),
    "float_idiom_two_targets": (
        [0.5],
        ["assert abs(f(1) - 0.5) < 1e-9", "assert abs(f(1) - 0.75) < 1e-9"],
    ),
    "not_eq_and_eq": ([0], ["assert not f(1) == 0", "assert f(1) == 0"]),
    "eq_literal_contradiction": ([4], ["assert f(1) == 4", "assert f(1) == 5"]),
}

#: (program, tests): no returned values pass these tests; a memory-reading forger must not.
READER_CASES = {
    # early exit after forging the first site: the second is never reached
    "exit_after_the_first_site": (
        "def f(x):\n    if x == 1:\n        claim([10 ** 9])\n    while True:\n        pass\n",
        ["assert f(1) > 2\nassert f(2) > 2"],
    ),
    # a value no template accepts
    "impossible_value": ("def f(x):\n    claim([-1])\n", ["assert abs(f(1)) < 0"]),
    # sites reported out of order, repeated, or for the wrong site
    "reordered_sites": (
        "def f(x):\n    claim([10 ** 9], k=1)\n",
        ["assert f(1) > 2\nassert f(2) > 2"],
    ),
    "repeated_hole": (
        "def f(x):\n    v, a, c, send = _harness()\n"
        "    send(ev='a', k=0, v=[[0, ['I', 5]], [0, ['I', 5]]])\n"
        "    send(ev='test', ok=True)\n    os._exit(0)\n",
        ["assert f(1) > 2"],
    ),
    "half_reported_site": (
        "def f(x):\n    v, a, c, send = _harness()\n"
        "    send(ev='a', k=0, v=[[0, ['I', 5]]])\n"
        "    send(ev='test', ok=True)\n    os._exit(0)\n",
        ["b = 5\nassert abs(f(1) - b) < 1"],  # two holes, one value
    ),
    "a_verdict_instead_of_values": (
        "def f(x):\n    v, a, c, send = _harness()\n"
        "    send(ev='a', k=0, v=[], t=True, ok=True)\n"
        "    send(ev='test', ok=True)\n    os._exit(0)\n",
        ["assert f(1) > 2"],
    ),
}


def _verify(program, tests, setup=""):
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        return cv.verify(program, tests, setup)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_blind_forgers_score_zero_on_every_test_shape(level, shape):
    program, tests = SHAPES[shape]
    res = _verify(BLIND + program, tests)
    assert (res.score, res.passed) == (0.0, 0), res


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(READER_CASES))
def test_memory_reading_forgers_score_zero_where_no_value_passes(level, case):
    program, tests = READER_CASES[case]
    res = _verify(READER + program, tests)
    assert (res.score, res.passed) == (0.0, 0), res


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CONTRADICTIONS))
def test_memory_reading_forgers_cannot_pass_contradictory_tests(level, case):
    values, tests = CONTRADICTIONS[case]
    forged = _verify(READER + f"def f(x):\n    claim({values!r})\n", tests)
    returned = _verify(f"def f(x):\n    return {values[0]!r}\n", tests)
    assert forged.passed <= returned.passed == 1, (forged, returned)


@pytest.mark.slow
def test_a_memory_reading_forger_gets_no_more_than_returning_values(level):
    # the forger's best on a satisfiable test equals an honest program returning that value
    tests = ["assert f(3) > 2", "assert f(1) > 2\nassert f(2) < 0"]
    forged = _verify(READER + "def f(x):\n    claim([10 ** 9])\n", tests)
    returned = _verify("def f(x):\n    return 10 ** 9\n", tests)
    assert (forged.passed, returned.passed) == (1, 1)


def test_honest_programs_still_pass_every_shape(level):
    program = (
        "def f(*a):\n"
        "    if len(a) == 2:\n"
        "        return a[0] + a[1] + 1\n"
        "    return 0.5 if a[0] == 1 else a[0] * 10\n"
    )
    tests = [
        "assert f(3) > 2",
        "assert f(1)",
        "assert not f(0) == 1",
        "b = 0.5\nassert abs(f(1) - b) < 1e-9",
        "f(1, 2)",
        "assert f(1, 2) == 4",
        "assert f(3) is not None and isinstance(f(3), int) and 0 < f(3) <= 30",
        "for i in range(2, 5):\n    assert f(i) == i * 10",
        "try:\n    f(None)\n    assert False\nexcept TypeError:\n    pass",
    ]
    res = _verify(program, tests)
    assert (res.score, res.status) == (1.0, "passed"), res


ROW = {
    "entry_point": "sq",
    "prompt": "def sq(x):\n",
    "canonical_solution": "    return x * x\n",
    "base_input": [[2], [3]],
    "plus_input": [[1.5], [-4]],
    "atol": 0,
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "program",
    [
        BLIND + "def sq(x):\n    forge()\n    os._exit(0)\n",
        BLIND + "forge()\nos._exit(0)\n",
        READER + "def sq(x):\n    claim([0])\n",
        READER + "def sq(x):\n    claim([x * x], end=False)\n    return 0\n",
    ],
    ids=["blind_in_call", "blind_at_import", "reader_wrong_value", "reader_then_returns"],
)
def test_plus_tests_of_eval_score_forgers_zero(level, program):
    setup, tests = plus_tests(ROW, plus_limit=None)
    res = _verify(program, tests, setup)
    assert (res.score, res.passed) == (0.0, 0), res
    honest = _verify("def sq(x):\n    return x * x\n", tests, setup)
    assert honest.score == 1.0, honest


def test_a_forging_challenger_cannot_get_an_invalid_task_into_the_pool():
    """End to end: a SAGE round whose challenger writes tests its reference fails (it raises),
    with a reference that forges values on every descriptor and exits. The verifier check
    must fail and the task stay out of the pool."""
    reference = BLIND + "def dbl(x):\n    forge()\n    os._exit(0)\n    raise ValueError\n"

    def script(agent, phase, obs, n):
        return {
            "challenge": "<question>Write dbl(x) doubling x.</question><tests>\n"
            "assert dbl(3) > 2\nassert not dbl(1) == 0\nassert abs(dbl(0.25) - 0.5) < 1e-9\n"
            "dbl(5)\nassert dbl(2) == 4\n</tests><solution>\n```python\n"
            + reference
            + "```\n</solution>",
            "review_question": "<score>10</score> Checked it with care.",
            "probe": "```python\ndef dbl(x):\n    return 2 * x\n```",
            "plan": "<plan>\n1. Read.\n2. Return 2 * x.\n</plan>",
            "review_plan": "<score>5</score> Fine.",
            "solve": "```python\ndef dbl(x):\n    return 2 * x\n```",
        }[phase]

    env = sage_env.env(EnvConfig(domains=("code",), solver_samples=1), seeds=[CODE_SEED])
    rec = [r for r in play_round(env, script) if r[1] == "challenge"]
    ((_, _, _, info),) = rec
    assert info["verifier_check"]["status"] == "failed", info["verifier_check"]
    assert " 0/" in info["verifier_check"]["reason"], info["verifier_check"]  # no test passed
    assert not info["accepted"]
    assert len(env.unwrapped.pool) == 1  # only the seed
