"""HumanEval+/MBPP+ plus tests: no object the program returns and no name it rebinds decides."""

from __future__ import annotations

import pytest

from learners.evaluation import plus_tests
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
    "rebinding_the_helpers": (
        "sq",
        "_equal = lambda *a: True\n_reference = lambda *a: 0\n"
        "__sage_plus__ = lambda *a: True\n__sage_check__ = lambda *a, **k: None\n"
        "__sage_eq__ = lambda *a: True\n"
        "def sq(x):\n    return 0\n",
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
