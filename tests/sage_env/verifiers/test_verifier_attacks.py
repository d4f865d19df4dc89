"""Red team, round 4: attacks on the verifiers after "values, not verdicts" (issue 20).

New cases only (the earlier rounds are
``tests/sage_env/sandbox/test_forgers_get_no_more_than_values.py`` and
``tests/sage_env/sandbox/test_forged_verdicts.py``). Each test asserts the exact score a wrong
program or answer must get, 0.0. The three holes this round left open (lying objects outside
assert templates, a Challenger pooling contradictory tests with a lying reference, a program
patching ``random``) were closed in round 5
(``tests/sage_env/sandbox/test_lying_objects_and_private_random.py``), and their tests here now
pass.

Fixed here:

* a program that patches the builtins module again from *inside* the call under test
  (``builtins.all = lambda *a: True``) made ``all(...)`` in its test true for any argument:
  the test now looks builtins up in a copy of its own (``testproc.py``);
* a program that binds a builtin the test wraps around its function (``def set``, then
  ``assert set(f(x)) == set((4, 5))``) owned both sides: such a builtin is now the test's
  (``rewrite.py``), while a function under test named like a builtin (``def sum``) is still
  the program's;
* HumanEval's tests call the prompt's helpers (``poly``, ``encode_cyclic``,
  ``encode_shift``), which the program could redefine (``encode_shift = decode_shift =
  identity`` passed HumanEval/50): the test now redefines them itself;
* execution tasks: a CRUXEval-I input with a walrus rebound a builtin ``f`` calls; a gold
  output that is not a literal parsed to ``None`` and paid the answer ``None``; runs forked
  from one zygote share its string-hash seed and address layout, so the determinism check
  passed ``''.join(set(s))`` and ``id(...)``.
"""

from __future__ import annotations

import pytest

import sage_env
from sage_env import EnvConfig
from sage_env.verifiers import CodeVerifier, answer_checks, executor
from sage_env.verifiers.program_checks import safe_input_expression
from tests.scripted import CODE_SEED, play_round


def _verify(program, tests, setup=""):
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        return cv.verify(program, tests, setup)


# -- code: builtins patched from inside the call under test (fixed) ----------------------------

REPATCH = (
    "import builtins\n"
    "def f(x):\n"
    "    builtins.all = lambda *a: True\n"
    "    builtins.any = lambda *a: True\n"
    "    builtins.sorted = lambda *a, **k: [1, 2, 3]\n"
    "    return 0\n"
)
#: No value of ``f`` makes any of these true: they hold only if the test's builtins lie.
REPATCH_TESTS = [
    "f(3)\nassert all(x == 1 for x in [2])",
    "assert f(3) == 0\nassert any(x > 5 for x in [1, 2])",
    "def check(candidate):\n    candidate(1)\n    assert all(v < 0 for v in [4])\ncheck(f)",
    "f(0)\nassert sorted(k for k in [3, 1]) == [1, 2, 3]",
]


@pytest.mark.slow
def test_builtins_patched_inside_the_call_under_test_do_not_reach_the_test(level):
    res = _verify(REPATCH, REPATCH_TESTS)
    assert (res.score, res.passed) == (0.0, 0), res
    # the same tests with their true forms: the patching program passes them (its own
    # patches stay its own), as an honest one does
    honest_tests = [
        "f(3)\nassert all(x == 1 for x in [1])",
        "assert f(3) == 0\nassert any(x > 1 for x in [1, 2])",
        "def check(candidate):\n    candidate(1)\n    assert all(v < 0 for v in [-4])\ncheck(f)",
        "f(0)\nassert sorted(k for k in [3, 1]) == [1, 3]",
    ]
    for program in (REPATCH, "def f(x):\n    return 0\n"):
        res = _verify(program, honest_tests)
        assert (res.score, res.status) == (1.0, "passed"), res


# -- code: program objects whose methods lie, used by test code outside an assert template -----

LIAR = """
class L:
    __module__ = "builtins"
    def __eq__(s, o): return True
    def __ne__(s, o): return False
    def __hash__(s): return 0
    def __format__(s, spec): return "4"
def f(*a): return L()
"""

#: Test shapes in which the program's object is compared (or formatted) by the test's own code
#: in the test's process, not by the judge's template: a value must be 4 to pass each, but an
#: object whose ``__eq__``/``__ne__``/``__format__`` lies passes without knowing 4.
LIAR_SHAPES = {
    "comparison_stored_in_a_name": "ok = f(1) == 4\nassert ok",
    "all_over_a_generator": "assert all(f(x) == y for x, y in [(1, 4), (2, 5)])",
    "if_then_raise": "if f(1) != 4:\n    raise AssertionError('wrong')",
    "check_candidate_if_then_raise": (
        "def check(candidate):\n    if candidate(1) != 4:\n        raise AssertionError\ncheck(f)"
    ),
    "helper_that_compares": "def same(a, b):\n    return a == b\nassert same(f(1), 4)",
    "match_statement": (
        "match f(1):\n    case 4:\n        pass\n    case _:\n        raise AssertionError"
    ),
    "f_string": "assert f'{f(1)}' == '4'",
    "unittest_assert_equal": "import unittest\nunittest.TestCase().assertEqual(f(1), 4)",
    "list_count": "assert [4].count(f(1)) == 1",
}
#: An honest program for every shape: returns 4.
HONEST_FOUR = "def f(*a):\n    return 4\n"


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(LIAR_SHAPES))
def test_lying_objects_in_test_code_outside_assert_templates_score_zero(shape):
    # fixed (round 5): the test never operates on an object of the program; what the program
    # hands it is plain builtin values or a guard that equals only itself (shield.py)
    res = _verify(LIAR, [LIAR_SHAPES[shape]])
    assert (res.score, res.passed) == (0.0, 0), res
    res = _verify(HONEST_FOUR, [LIAR_SHAPES[shape].replace("(2, 5)", "(2, 4)")])
    assert (res.score, res.status) == (1.0, "passed"), res


def _challenger_script(reference, tests):
    def script(agent, phase, obs, n):
        return {
            "challenge": "<question>Write dbl(x) doubling x.</question><tests>\n"
            + tests
            + "</tests><solution>\n```python\n"
            + reference
            + "```\n</solution>",
            "review_question": "<score>10</score> Checked it with care.",
            "probe": "```python\ndef dbl(x):\n    return 2 * x\n```",
            "plan": "<plan>\n1. Read.\n2. Return 2 * x.\n</plan>",
            "review_plan": "<score>5</score> Fine.",
            "solve": "```python\ndef dbl(x):\n    return 2 * x\n```",
        }[phase]

    return script


def _challenge_info(reference, tests):
    env = sage_env.env(EnvConfig(domains=("code",), solver_samples=1), seeds=[CODE_SEED])
    rec = [r for r in play_round(env, _challenger_script(reference, tests)) if r[1] == "challenge"]
    ((_, _, _, info),) = rec
    return env, info


CONTRADICTORY = (
    "assert all(dbl(x) == y for x, y in [(3, 6)])\n"
    "assert all(dbl(x) == y for x, y in [(3, 7)])\n"
    "assert [6].count(dbl(3)) == 1\n"
)


def test_a_challenger_with_a_lying_reference_cannot_pool_contradictory_tests():
    # fixed (round 5): the reference's objects reach the test only as values or guards
    reference = LIAR.replace("def f(*a)", "def dbl(*a)")
    env, info = _challenge_info(reference, CONTRADICTORY)
    assert info["verifier_check"]["status"] != "passed", info["verifier_check"]
    assert not info["accepted"]
    assert len(env.unwrapped.pool) == 1  # only the seed
    # the same shapes, consistent, with an honest reference: the check passes
    honest = "assert all(dbl(x) == y for x, y in [(3, 6)])\nassert [6].count(dbl(3)) == 1\n"
    _, info = _challenge_info("def dbl(x):\n    return 2 * x\n", honest)
    assert info["verifier_check"]["status"] == "passed", info["verifier_check"]


RANDOM_PATCH = (
    "import random\n"
    "random.choice = lambda s: s[0]\n"
    "def rev(s):\n"
    "    return s\n"  # wrong: right only on palindromes such as 'aaa'
)
RANDOM_TEST = (
    "from random import choice, randint\n"
    "for _ in range(20):\n"
    "    s = ''.join(choice('abc') for _ in range(randint(3, 6)))\n"
    "    assert rev(s) == s[::-1]"
)


@pytest.mark.slow
def test_patching_the_random_module_does_not_choose_the_tests_inputs(level):
    # fixed (round 5): the test imports a random module of its own (worker.private_module)
    res = _verify(RANDOM_PATCH, [RANDOM_TEST])
    assert res.score == 0.0, res
    res = _verify(RANDOM_PATCH.replace("return s\n", "return s[::-1]\n"), [RANDOM_TEST])
    assert (res.score, res.status) == (1.0, "passed"), res


@pytest.mark.parametrize(
    "program, test, right",
    [
        (
            "def set(*a):\n    return 0\ndef similar_elements(a, b):\n    return None\n",
            "assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))",
            "[5, 4]",
        ),
        (
            "def sorted(*a, **k):\n    return 0\ndef f(a):\n    return None\n",
            "assert sorted(f([3, 1])) == sorted([1, 3])",
            "a",
        ),
    ],
    ids=["set", "sorted"],
)
def test_shadowing_a_builtin_the_test_wraps_both_sides_in_scores_zero(program, test, right):
    # a builtin the program binds is the program's in the test (MBPP's 'def sum(a, b)'), but
    # one the test wraps around a call of another program function is the test's builtin
    res = _verify(program, [test])
    assert (res.score, res.passed) == (0.0, 0), res
    honest = program.replace("return None", "return " + right)
    honest = honest.replace("return 0\n", "return 'shadowed'\n", 1)
    res = _verify(honest, [test])
    assert (res.score, res.status) == (1.0, "passed"), res
    # the function under test may still be named like a builtin
    res = _verify("def sum(a, b):\n    return a + b\n", ["assert sum(1, 2) == 3"])
    assert (res.score, res.status) == (1.0, "passed"), res


# -- code: HumanEval's prompt helpers (fixed) ---------------------------------------------------


@pytest.mark.parametrize(
    "task, completion",
    [
        (
            "HumanEval/50",
            "def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s\n",
        ),
        (
            "HumanEval/38",
            "def encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s\n",
        ),
        ("HumanEval/32", "def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 0.0\n"),
    ],
)
def test_humaneval_programs_cannot_redefine_the_prompts_helpers(task, completion):
    from learners.evaluation import score
    from learners.evaluation.benchmarks import load_benchmark

    (item,) = [it for it in load_benchmark("humaneval") if it.item_id == task]
    with CodeVerifier(timeout_s=10.0, pool_size=0) as cv:
        right, rec = score(item, "```python\n" + completion + "```", None, cv)
        assert (right, rec["passed"]) == (False, 0), rec
        # the canonical solution still passes with the helpers in the test
        import gzip
        import json

        from learners.evaluation.benchmarks import default_data_dir

        path = default_data_dir() / "code" / "HumanEval.jsonl.gz"
        if not path.exists():
            return
        (row,) = [r for r in map(json.loads, gzip.open(path, "rt")) if r["task_id"] == task]
        res = cv.verify(row["prompt"] + row["canonical_solution"], item.tests, item.test_setup)
        assert res.score == 1.0, res


# -- execution tasks (fixed) --------------------------------------------------------------------


def test_a_crux_input_cannot_rebind_what_f_calls():
    program = "def f(s):\n    return sorted(s)\n"
    forged = "(sorted := lambda s: ['x', 'y']) and 'q'"
    assert safe_input_expression(forged) is None
    assert safe_input_expression("[(y := 2) for _ in 'a']") is None
    res = answer_checks.check_abduction(forged, program, "['x', 'y']", expressions=True)
    assert (res.score, res.status) == (0.0, "invalid"), res
    honest = answer_checks.check_abduction("'yx'", program, "['x', 'y']", expressions=True)
    assert honest.score == 1.0, honest


@pytest.mark.parametrize("gold", ["inf", "nan", "float('inf')", "", "<object>"])
def test_a_gold_output_that_is_not_a_literal_pays_nothing(gold):
    assert answer_checks.check_deduction("None", gold).score == 0.0
    assert answer_checks.check_abduction("None", "def f(x):\n    return x\n", gold).score == 0.0
    res = answer_checks.check_induction("def f(x):\n    return None\n", ["1"], [gold])
    assert (res.score, res.status) == (0.0, "failed"), res


@pytest.mark.slow
@pytest.mark.parametrize(
    "program, inputs",
    [
        ("def f(a):\n    return ''.join(set(a))\n", ["'abcdefghij'"]),
        # an address read from a repr (id() itself is refused before anything runs)
        ("def f(a):\n    return int(repr(object()).split()[-1][:-1], 16) >> 12\n", ["1"]),
        ("def f(a):\n    return str(lambda: 0)[-10:]\n", ["1"]),
    ],
    ids=["string_hash_order", "address", "repr_with_address"],
)
def test_the_determinism_check_sees_hash_seed_and_address_nondeterminism(level, program, inputs):
    res = executor.validate_program(program, inputs)
    assert (res.valid, res.check) == (False, "deterministic"), res
    honest = executor.validate_program("def f(a):\n    return sorted(set(a))\n", ["'abcdefghij'"])
    assert honest.valid, honest
