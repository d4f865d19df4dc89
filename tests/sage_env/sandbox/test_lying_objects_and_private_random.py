"""Red team, round 5: new attacks on the classes round 4 left open (issue 20).

Each class is closed in the harness (``sage_env/sandbox/harness/shield.py``, ``testproc.py``),
not per case:

* **lying objects outside assert templates.** Test code never operates on an object of the
  program: a name the program binds, what a call of it returns and an attribute of one of its
  objects reach the test as plain builtin values, a one-pass iterator of such values, or a
  guard that equals only itself, is truthy by builtin rules only, formats as ``<T object>``,
  supports no operator, and is unwrapped when passed back to the program;
* **a Challenger pooling contradictory tests with a lying reference**: the same rule, for the
  reference in the verifier check, including tests that reach for the raw objects
  (``eval``, ``globals()``, ``sys.modules``);
* **a program choosing the test's random inputs**: the test imports private copies of the
  modules loaded before the program ran, and a fresh ``random`` (its own generator, seeded by
  the OS), so neither patching nor seeding the shared one reaches it.

Every case asserts the exact score, 0.0, and an honest program beside it scores 1.0, at every
isolation level (``level`` fixture of round 4: unshare and bubblewrap, with and without the
zygote fast path).
"""

from __future__ import annotations

import pytest

from sage_env.verifiers import executor
from sage_env.verifiers.program_checks import escape_hatch
from tests.sage_env.verifiers.test_verifier_attacks import _challenge_info, _verify

# -- class (a): lying objects used outside the assert templates -------------------------------

#: A program whose values lie through every dunder a test's own code might call.
LIAR5 = """
class L:
    __module__ = "builtins"
    def __eq__(s, o): return True
    def __ne__(s, o): return False
    def __lt__(s, o): return True
    def __gt__(s, o): return True
    def __hash__(s): return hash(4)
    def __bool__(s): return True
    def __len__(s): return 3
    def __iter__(s): return iter([1, 2])
    def __radd__(s, o): return s
    def __add__(s, o): return s
    def __str__(s): return "4"
    def __repr__(s): return "4"
    def __format__(s, spec): return "4"
class Box:
    def top(self): return L()
ANSWER = L()
def f(*a): return L()
class M(type):
    def __eq__(s, o): return True
    def __ne__(s, o): return False
    __hash__ = type.__hash__
class E(Exception, metaclass=M):
    pass
def g(*a): return E
def h(*a): raise ValueError(L())
__answer__ = L()
"""

#: Shapes of my own: each needs a value of 4 (or a consistent list) to pass.
LIAR5_SHAPES = {
    # dict lookup: hash and __eq__ of the program's object
    "dict_lookup": "assert {4: 'ok'}.get(f(1)) == 'ok'",
    # arithmetic outside the template: sum() adds 0 + L -> L.__radd__
    "sum_then_if": "total = sum([f(1)], 0)\nif total != 4:\n    raise AssertionError",
    # %-formatting and str() outside the template
    "percent_format": "if '%s' % f(1) != '4':\n    raise AssertionError",
    "str_in_a_name": "s = str(f(1))\nassert s == '4'",
    # an iterable that answers differently to len() and to iteration
    "inconsistent_iterable": "r = f(1)\nitems = sorted(r)\nassert items == [1, 2] and len(r) == 3",
    # a method of a program object returns the liar
    "method_of_a_program_object": "b = Box()\nif b.top() != 4:\n    raise AssertionError",
    # a program global read by the test's own code
    "program_global": "if ANSWER != 4:\n    raise AssertionError",
    # a truthiness check in a while loop
    "while_condition": "n = 0\nwhile not f(n):\n    n += 1\n    if n > 3:\n        raise AssertionError",
    # a class whose metaclass lies, returned as a value (exception classes stay themselves)
    "metaclass": "if g(1) != 4:\n    raise AssertionError",
    # the argument of an exception the program raises, read outside an assert
    "exception_args": (
        "try:\n    h(1)\nexcept ValueError as e:\n    if e.args[0] != 4:\n"
        "        raise AssertionError\nelse:\n    raise AssertionError"
    ),
    # a dunder-named program global
    "dunder_global": "if __answer__ != 4:\n    raise AssertionError",
    # ordering inside a helper
    "helper_orders": "def between(a, lo, hi):\n    return lo < a < hi\nassert between(f(1), 3, 5)",
}

#: Honest programs for those shapes (same test text).
HONEST5 = """
class Box:
    def top(self): return 4
ANSWER = 4
def f(*a): return 4
def g(*a): return 4
def h(*a): raise ValueError(4)
__answer__ = 4
"""
HONEST5_ITERABLE = "def f(*a):\n    return [1, 2, 0]\n"


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(LIAR5_SHAPES))
def test_lying_objects_of_my_own_score_zero(shape, level):
    res = _verify(LIAR5, [LIAR5_SHAPES[shape]])
    assert (res.score, res.passed) == (0.0, 0), res


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(LIAR5_SHAPES))
def test_honest_programs_pass_the_same_shapes(shape):
    test = LIAR5_SHAPES[shape]
    if shape == "inconsistent_iterable":  # no list both sorts to [1, 2] and has 3 items
        test = "r = f(1)\nitems = sorted(r)\nassert items == [0, 1, 2] and len(r) == 3"
        program = HONEST5_ITERABLE
    elif shape == "while_condition":
        program = HONEST5
    else:
        program = HONEST5
    res = _verify(program, [test])
    assert (res.score, res.status) == (1.0, "passed"), res


def test_program_objects_still_work_as_objects():
    # an honest class-based task: the test builds program objects, calls their methods and
    # passes them back to the program (MBPP's Pair), checks isinstance and catches its error
    program = (
        "class Pair:\n"
        "    def __init__(self, a, b):\n        self.a, self.b = a, b\n"
        "class Stack:\n"
        "    def __init__(self):\n        self.items = []\n"
        "    def push(self, x):\n        self.items.append(x)\n"
        "    def pop(self):\n        return self.items.pop()\n"
        "class Empty(Exception):\n    pass\n"
        "def longest(pairs):\n    return max(p.b - p.a for p in pairs)\n"
        "def check(x):\n    if x < 0:\n        raise Empty('negative')\n    return x\n"
        "def gen(n):\n    yield from range(n)\n"
        "def sort_in_place(a):\n    a.sort()\n"
    )
    tests = [
        "assert longest([Pair(1, 5), Pair(2, 3)]) == 4",
        "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2\nassert s.items == [1]",
        "assert isinstance(Pair(1, 2), Pair)\nassert Pair(1, 2).a == 1",
        "try:\n    check(-1)\nexcept Empty:\n    pass\nelse:\n    raise AssertionError",
        "assert list(gen(3)) == [0, 1, 2]\nassert sum(x for x in gen(4)) == 6",
        "a = [3, 1, 2]\nsort_in_place(a)\nassert a == [1, 2, 3]",
        # identity equality outside templates (in a template an opaque value equals nothing)
        "p = Pair(1, 2)\nq = p\nif q != p or p == Pair(1, 2):\n    raise AssertionError",
        "assert longest.__name__ == 'longest' and Pair.__qualname__ == 'Pair'",
    ]
    res = _verify(program, tests)
    assert (res.score, res.passed, res.status) == (1.0, len(tests), "passed"), res


# -- class (b): a Challenger's lying reference -------------------------------------------------

#: Contradictory tests of my own (each pair cannot both hold for one dbl), including tests that
#: reach for the reference's raw objects by name lookups the rewriter never sees.
CONTRADICTORY5 = (
    "assert (lambda v: v == 6)(dbl(3))\n"
    "assert (lambda v: v == 7)(dbl(3))\n"
    "assert {6: True}.get(dbl(3), False)\n"
    "assert all(eval('dbl')(x) == y for x, y in [(3, 8)])\n"
    "assert any(globals()['dbl'](x) == 9 for x in [3])\n"
)


def test_a_lying_reference_cannot_pool_contradictory_tests_of_my_own():
    reference = LIAR5.replace("def f(*a)", "def dbl(*a)")
    env, info = _challenge_info(reference, CONTRADICTORY5)
    assert info["verifier_check"]["status"] != "passed", info["verifier_check"]
    assert not info["accepted"]
    assert len(env.unwrapped.pool) == 1  # only the seed


@pytest.mark.slow
@pytest.mark.parametrize(
    "test",
    [
        "import sys\nassert all(sys.modules['solution'].dbl(x) == y for x, y in [(3, 7)])",
        "assert all(__import__('solution').dbl(x) == 7 for x in [3])",
        "assert all(dbl._sage_raw(x) == 7 for x in [3])",
        "assert all(dbl(x).__eq__(7) for x in [3])",
    ],
)
def test_a_test_cannot_reach_the_programs_raw_namespace(test, level):
    res = _verify(LIAR5.replace("def f(*a)", "def dbl(*a)"), [test])
    assert res.score == 0.0, res


# -- class (c): the program chooses or predicts the test's random inputs -----------------------

SEEDING = (
    "import random\n"
    "_g = random.Random(0)\n"
    "KNOWN = {_g.randint(0, 10**9) for _ in range(50)}\n"
    "random.seed(0)\n"  # the shared generator now draws exactly KNOWN
    "def double(x):\n"
    "    return 2 * x if x in KNOWN else 0\n"
)
SEEDING_TEST = (
    "import random\nfor _ in range(20):\n    x = random.randint(0, 10**9)\n"
    "    assert double(x) == 2 * x"
)
PATCH_INSIDE_CALL = (
    "import random\n"
    "def ident(x):\n"
    "    random.randint = lambda a, b: a\n"  # from inside the call under test
    "    random.Random.randint = lambda self, a, b: a\n"
    "    random.seed(1)\n"
    "    return x if x == 5 else 0\n"
)
PATCH_INSIDE_TEST = (
    "import random\nassert ident(5) == 5\nfor _ in range(10):\n"
    "    x = random.randint(5, 10**6)\n    assert ident(x) == x"
)
STRING_PATCH = (
    "import string\n"
    "string.ascii_lowercase = 'a'\n"
    "def upper(s):\n"
    "    return 'A' * len(s)\n"
)
STRING_TEST = (
    "import random, string\nfor _ in range(10):\n"
    "    s = ''.join(random.choice(string.ascii_lowercase) for _ in range(5))\n"
    "    assert upper(s) == s.upper()"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "program, test, honest",
    [
        (SEEDING, SEEDING_TEST, "def double(x):\n    return 2 * x\n"),
        (PATCH_INSIDE_CALL, PATCH_INSIDE_TEST, "def ident(x):\n    return x\n"),
        (STRING_PATCH, STRING_TEST, "def upper(s):\n    return s.upper()\n"),
    ],
    ids=["seeding", "patched_inside_the_call", "string_constants"],
)
def test_the_program_cannot_choose_the_tests_random_inputs(program, test, honest, level):
    res = _verify(program, [test])
    assert (res.score, res.passed) == (0.0, 0), res
    res = _verify(honest, [test])
    assert (res.score, res.status) == (1.0, "passed"), res


def test_the_program_keeps_its_own_random_module():
    # the program's own use of random is untouched (its seed gives its own sequence)
    program = (
        "import random\nrandom.seed(3)\nFIRST = random.random()\n"
        "def again():\n    random.seed(3)\n    return random.random() == FIRST\n"
    )
    res = _verify(program, ["assert again()"])
    assert (res.score, res.status) == (1.0, "passed"), res


# -- escape_hatch: attribute reads by name (operator.attrgetter and friends) -------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "program",
    [
        "import operator\ndef f(x):\n    return operator.attrgetter('f_back')(x)\n",
        "from operator import attrgetter\ndef f(x):\n    return attrgetter('__globals__')(f)\n",
        "from operator import methodcaller as m\ndef f(x):\n    return m('__reduce_ex__', 2)(x)\n",
        "import string\ndef f(x):\n    return string.Formatter().get_field('0.__globals__', [f], {})\n",
        "def f(x):\n    return '{0.__globals__}'.format(f)\n",
    ],
    ids=["attrgetter", "attrgetter_from", "methodcaller", "formatter_get_field", "format_string"],
)
def test_escape_hatch_sees_attribute_reads_by_name(program):
    assert escape_hatch(program) is not None
    res = executor.validate_program(program, ["1"])
    assert (res.valid, res.check) == (False, "forbidden"), res
    honest = "import operator\ndef f(x):\n    return operator.itemgetter(0)([x, 2])\n"
    assert escape_hatch(honest) is None
    assert executor.validate_program(honest, ["1"]).valid


# -- the judge's channels: linear buffering, reference values kept as lines --------------------


def test_split_lines_joins_a_long_line_from_many_chunks():
    from sage_env.sandbox.harness.report import split_lines

    pending = bytearray()
    got = []
    data = b"a" * 100_000 + b"\n" + b"b\nc" + b"d" * 50 + b"\n\nrest"
    for n in range(0, len(data), 4096):
        got += split_lines(pending, data[n : n + 4096])
    assert got == [b"a" * 100_000, b"b", b"c" + b"d" * 50, b""]
    assert bytes(pending) == b"rest"


@pytest.mark.parametrize("got, ok", [([["I", 1], ["I", 2]], True), ([["I", 1], ["I", 3]], False)])
def test_the_judge_decodes_a_reference_line_only_when_its_test_is_judged(got, ok):
    from sage_env.sandbox.harness.judge import _SITE_PREFIX
    from sage_env.sandbox.harness.verdict import Judge
    from sage_env.sandbox.harness.report import encode_line
    from sage_env.sandbox.harness.rewrite import rewrite_asserts

    src, sites = rewrite_asserts("assert __sage_plus__(f(1), 0)")
    out = []
    judge = Judge([src], [sites], lambda **ev: out.append(ev), tags=["t"])
    line = encode_line({"ev": "site", "i": 0, "k": 0, "v": ["l", [["I", 1], ["I", 2]]]})[:-1]
    m = _SITE_PREFIX.match(line)
    assert m and (m.group(1), m.group(2)) == (b"0", b"0")
    judge.from_reference({"ev": "site", "i": 0, "k": 0, "line": line})
    assert judge.expected[(0, 0)] == [("line", line)]  # not decoded yet
    for ev in (
        {"ev": "setup_ok"},
        {"ev": "program_ok"},
        {"ev": "a", "k": 0, "v": [[0, ["l", got]]]},
        {"ev": "test", "ok": True},
    ):
        judge.from_last(dict(ev, n="t"))
    judge.finish(0)
    ((verdict,),) = [[ev for ev in out if ev.get("ev") == "test"]]
    assert verdict["ok"] is ok, out
    assert judge.expected == {}
