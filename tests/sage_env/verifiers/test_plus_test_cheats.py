"""HumanEval+/MBPP+ plus tests: no object the program returns and no name it rebinds decides."""

from __future__ import annotations

import pytest

from learners.evaluation import plus_tests
from sage_env import sandbox
from sage_env.verifiers import CodeVerifier

ROWS = {
    "sq": {
        "entry_point": "sq",
        "prompt": "def sq(x):\n",
        "canonical_solution": "    return x * x  # REFERENCE-SQ\n",
        "base_input": [[2], [3]],
        "plus_input": [[1.5], [-4]],
        "atol": 0,
    },
    "pair": {
        "entry_point": "pair",
        "prompt": "def pair(x):\n",
        "canonical_solution": "    return [x, x]  # REFERENCE-PAIR\n",
        "base_input": [[1]],
        "plus_input": [[2], [0.5]],
        "atol": 0,
    },
}

CHEATS = {
    "always_equal_object": (
        "sq",
        "class A:\n    def __eq__(self, o):\n        return True\n"
        "    def __ne__(self, o):\n        return False\n"
        "def sq(x):\n    return A()\n",
    ),
    "int_subclass_overriding_eq": (
        "sq",
        "class I(int):\n    def __eq__(self, o):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def sq(x):\n    return I(0)\n",
    ),
    "float_subclass_overriding_eq": (
        "sq",
        "class F(float):\n    def __eq__(self, o):\n        return True\n"
        "    __hash__ = float.__hash__\n"
        "def sq(x):\n    return F(-1.0)\n",
    ),
    "list_subclass_overriding_eq": (
        "pair",
        "class L(list):\n    def __eq__(self, o):\n        return True\n"
        "    def __len__(self):\n        return 2\n"
        "def pair(x):\n    return L()\n",
    ),
    # Rebinds, to helpers that always pass, the names the test's process uses today: the
    # test's hooks (__sage_v__, __sage_a__, __sage_c__) and __sage_plus__ in its own namespace
    # (which the test's globals are built from), and every name that compares or decides
    # (the judge's plus_equal and evaluate, the in-process check's truth, the reference run)
    # in the harness's modules as this process holds them (sys.modules); then, from inside the
    # call under test, the hooks in the test's own globals, where it finds the harness's. It
    # says on stdout what it rebound and whether a rebound helper ever runs. What decides runs
    # elsewhere (the judge, the reference process) and the test's hooks are set after its
    # names are copied in: see test_rebinding_the_helpers_reaches_todays_names_and_decides_nothing.
    "rebinding_the_helpers": (
        "sq",
        "import sys\n"
        "def _passes(name):\n"
        "    def helper(*a, **k):\n"
        "        print('rebound helper called: ' + name, flush=True)\n"
        "        return True\n"
        "    return helper\n"
        "HOOKS = ('__sage_v__', '__sage_a__', '__sage_c__')\n"
        "for _name in HOOKS + ('__sage_plus__',):\n"
        "    globals()[_name] = _passes(_name)\n"
        "REBOUND = []\n"
        "for _mod, _names in (\n"
        "    ('compare', ('plus_equal',)),\n"
        "    ('verdict', ('plus_equal', 'evaluate')),\n"
        "    ('template', ('evaluate',)),\n"
        "    ('testproc', ('truth',)),\n"
        "    ('worker', ('reference_run',)),\n"
        "):\n"
        "    for _name in _names:\n"
        "        _where = sys.modules['sage_env.sandbox.harness.' + _mod]\n"
        "        getattr(_where, _name)\n"
        "        setattr(_where, _name, _passes(_mod + '.' + _name))\n"
        "        REBOUND.append(_mod + '.' + _name)\n"
        "def sq(x):\n"
        "    f = sys._getframe(1)\n"
        "    while '__sage_a__' not in f.f_globals:\n"
        "        f = f.f_back\n"
        "    g = f.f_globals\n"
        "    theirs = [n for n in HOOKS if g[n] is not globals()[n]]\n"
        "    for n in HOOKS + ('__sage_plus__',):\n"
        "        g[n] = globals()[n]\n"
        "    print('rebound %s; the test had its own %s' % (' '.join(REBOUND), ' '.join(theirs)),"
        " flush=True)\n"
        "    return 0\n",
    ),
    "monkeypatching_builtins_and_modules": (
        "sq",
        "import builtins, math, json\n"
        "builtins.isinstance = lambda *a: True\nbuiltins.type = lambda *a: int\n"
        "builtins.abs = lambda x: 0\nbuiltins.float = lambda *a: 0.0\n"
        "math.isclose = lambda *a, **k: True\n"
        "def sq(x):\n    return 0\n",
    ),
    "raising_in_repr": (
        "sq",
        "class R:\n    def __repr__(self):\n        raise SystemExit(0)\n"
        "    __str__ = __repr__\n"
        "    def __eq__(self, o):\n        return True\n"
        "def sq(x):\n    return R()\n",
    ),
    "copying_the_reference_from_memory": (
        "sq",
        "import gc, sys\n"
        "found = None\n"
        "for obj in gc.get_objects():\n"
        "    for s in (obj.values() if isinstance(obj, dict) else ()):\n"
        "        if isinstance(s, str) and 'REFERENCE-SQ' in s and 'def sq' in s:\n"
        "            found = s\n"
        "frame = sys._getframe()\n"
        "while frame is not None and found is None:\n"
        "    for v in frame.f_locals.values():\n"
        "        if isinstance(v, str) and 'REFERENCE-SQ' in v:\n"
        "            found = v\n"
        "    frame = frame.f_back\n"
        "if found:\n"
        "    ns = {}\n"
        "    exec(found[found.index('def sq'):], ns)\n"
        "    sq = ns['sq']\n"
        "else:\n"
        "    def sq(x):\n        return 0\n",
    ),
}


@pytest.fixture(scope="module")
def cv():
    with CodeVerifier(timeout_s=20.0) as verifier:
        yield verifier


def _verify(cv, name, program):
    setup, tests = plus_tests(ROWS[name], plus_limit=None)
    return cv.verify(program, tests, setup)


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_plus_test_cheats_score_zero(cv, cheat):
    name, program = CHEATS[cheat]
    res = _verify(cv, name, program)
    assert (res.score, res.passed) == (0.0, 0), res


#: What rebinding_the_helpers says in each test's process when it has rebound every name.
REBOUND_LINE = (
    "rebound compare.plus_equal verdict.plus_equal verdict.evaluate template.evaluate testproc.truth"
    " worker.reference_run; the test had its own __sage_v__ __sage_a__ __sage_c__\n"
)


@pytest.mark.parametrize(
    "level", ["unshare", "unshare-zygote", "rlimits", "bwrap", "bwrap-zygote"], indirect=True
)
def test_rebinding_the_helpers_reaches_todays_names_and_decides_nothing(level):
    """rebinding_the_helpers really rebinds the names the harness uses today (it does not
    rebind names no process looks up and return 0), and none of them decides anything."""
    name, program = CHEATS["rebinding_the_helpers"]
    setup, tests = plus_tests(ROWS[name], plus_limit=None)
    with CodeVerifier(timeout_s=20.0, pool_size=0) as verifier:
        job = {"mode": "verify", "setup": setup, "program": program, "tests": tests}
        raw = verifier._get_executor().run_job(job)
        res = verifier.verify(program, tests, setup)
    out = raw.stdout.decode()
    # every test's process found each name it rebinds (a missing one raises at import: a
    # program error) and, in the test's globals, the harness's hooks rather than its own
    assert out.count(REBOUND_LINE) == len(tests) == 4, out
    assert "rebound helper called" not in out, out  # none of them ever ran
    # the real hooks reported sq's 0 and the judge compared it with the reference's 4, 9,
    # 2.25 and 16 by its own rule, in processes the program never ran in
    verdicts = [e for e in sandbox.parse_report(raw.report) if e.get("ev") == "test"]
    assert sorted(e["i"] for e in verdicts) == [0, 1, 2, 3], verdicts
    for e in verdicts:
        assert (e["ok"], e.get("msg")) == (False, "assertion 0: got 0"), e
    assert (res.score, res.status) == (0.0, "failed"), res
    assert res.reason.endswith("test 0: AssertionError: assertion 0: got 0"), res


def test_the_reference_never_reaches_the_programs_process():
    setup, tests = plus_tests(ROWS["sq"], plus_limit=None)
    assert "REFERENCE-SQ" in setup  # it travels in the setup ...
    assert all("REFERENCE-SQ" not in t for t in tests)  # ... and the judge strips it for W


def test_honest_solutions_pass_and_floats_get_evalplus_tolerance(cv):
    assert _verify(cv, "sq", "def sq(x):\n    return x ** 2\n").score == 1.0
    assert _verify(cv, "pair", "def pair(x):\n    return [x, x]\n").score == 1.0
    # float outputs: atol 1e-6 when the task gives none (EvalPlus); ints stay exact
    near = _verify(cv, "sq", "def sq(x):\n    return x * x + (1e-9 if type(x) is float else 0)\n")
    far = _verify(cv, "sq", "def sq(x):\n    return x * x + (1e-3 if type(x) is float else 0)\n")
    off_int = _verify(cv, "sq", "def sq(x):\n    return x * x + (1 if x == 3 else 0)\n")
    assert (near.score, far.passed, off_int.passed) == (1.0, 3, 3)


def test_a_float_where_the_reference_gives_a_list_fails(cv):
    res = _verify(cv, "pair", "def pair(x):\n    return (x, x)\n")  # tuple is not list
    assert res.passed == 0
