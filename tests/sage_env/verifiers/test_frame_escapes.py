"""Programs and inputs that reach a frame, and through it the runner's results (issue 49's holes).

Two layers, each tested alone:

- the static checks (``program_checks``) refuse both programs here (``type`` with unpacked
  arguments; a class pattern by position, whose ``__match_args__`` names what it reads at
  run time). Each route and its neighbours that stay allowed are unit-tested in
  ``test_program_checks.py`` ("frame routes"), which the module's mutation run uses;
- the runner of :func:`sage_env.verifiers.executor.execute` refuses, at run time, what CPython
  audits as ``object.__getattr__`` (``gi_frame``, ``tb_frame``, ``cr_frame``, ``f_code``,
  ``__code__``), and evaluates an expression input in a load of the program of its own. The
  programs here are run without the static checks, at every isolation level, and each one is
  shown to forge its results in a runner without the hook (the control), so the test would
  fail if the hook went.
"""

from __future__ import annotations

import pytest

from sage_env.verifiers import executor
from sage_env.verifiers.program_checks import safe_input_expression

#: What both forgers do once a class pattern hands them a running generator's frame ``fr``:
#: from it, the runner's globals, ``gc`` and the runner's redirect of stdout; the stream the
#: redirect restores becomes one that rewrites the results line to one forged result.
_FORGE = """
                g = fr.f_back.f_back.f_globals
                class W:
                    def __init__(self, real):
                        self.real = real
                    def write(self, s):
                        if s[:6] == '@@AZR-':
                            s = s[:s.index('@@', 6) + 2] + repr((('ok', repr('forged')),))
                        return self.real.write(s)
                    def flush(self):
                        return self.real.flush()
                gc = g['_sys'].modules['builtins'].__import__('gc')
                for o in gc.get_objects():
                    if type(o).__name__ == 'redirect_stdout':
                        o._old_targets[-1] = W(o._old_targets[-1])
        yield a
"""

#: The frame through a namedtuple field named at run time and an ABC the generator type was
#: registered with.
ABC_FORGER = (
    """from collections import namedtuple
from collections.abc import Hashable

def f(a):
    N = namedtuple('N', ['gi' + '_frame'])
    class G(N, Hashable):
        pass
    box = []
    def walk():
        match box[0]:
            case G(fr):"""
    + _FORGE
    + """    g = walk()
    G.register(type(g))
    box.append(g)
    return next(g)
"""
)

#: The frame through a metaclass made by ``type(*args)`` with a computed ``__instancecheck__``
#: (found 2026-12-05: it returned ``os.getpid()`` in the sandbox).
METACLASS_FORGER = (
    """def f(a):
    M = type(*('M', (type,), {'_' * 2 + 'instancecheck' + '_' * 2: lambda c, o: True}))
    C = M(*('C', (), {'_' * 2 + 'match_args' + '_' * 2: ('gi' + '_frame',)}))
    box = []
    def walk():
        match box[0]:
            case C(fr):"""
    + _FORGE
    + """    g = walk()
    box.append(g)
    return next(g)
"""
)


_NO_HOOK = "_sys.addaudithook(_hook((_main, _plain, _load, _hook)))"


@pytest.mark.parametrize(("program", "name"), [(ABC_FORGER, "abc"), (METACLASS_FORGER, "meta")])
def test_the_runner_refuses_a_frame_at_run_time(level, program, name, monkeypatch):
    ex = executor.execute(program, [(1,)])
    assert (ex.status, ex.outputs) == ("error", (None,))
    assert ex.errors == ("RuntimeError: the sandbox refuses reading .gi_frame",)
    # the control: without the hook the same program forges the first result
    monkeypatch.setattr(executor, "_RUNNER", executor._RUNNER.replace(_NO_HOOK, "pass"))
    forged = executor.execute(program, [(1,)])
    assert (forged.status, forged.outputs) == ("ok", ("'forged'",))


_PLAIN_PROGRAM = """from collections import namedtuple
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

P = namedtuple('P', 'x y')
class Q(NamedTuple):
    a: int
@dataclass
class D:
    v: int
Color = Enum('Color', 'RED GREEN')

def f(n):
    try:
        1 // (n - n)
    except ZeroDivisionError as e:
        msg = type(e).__name__
    g = (i * i for i in range(n))
    return [P(n, 1).x, Q(n).a, D(n).v, Color.GREEN.value, sum(g), msg]
"""


def test_the_hook_leaves_namedtuple_dataclass_enum_generators_and_exceptions_alone(level):
    ex = executor.execute(_PLAIN_PROGRAM, [(3,)])
    assert (ex.status, ex.outputs) == ("ok", ("[3, 3, 3, 2, 5, 'ZeroDivisionError']",))


_MEMO = "memo = {}\n\ndef f(n):\n    return memo.get(n, 'none')\n"


def test_an_input_may_not_change_the_state_of_the_f_that_answers():
    # CRUXEval's rule evaluates the input in the program's namespace, so the check is static
    assert safe_input_expression("memo.update({5: 'X'}) or 5") is None
    ex = executor.execute(_MEMO, ["5"], expressions=True)
    assert (ex.status, ex.outputs) == ("ok", ("'none'",))


def test_an_input_may_build_the_programs_own_objects():
    program = (
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    v: int\n"
        "def g():\n    return 1\n"
        "def f(p, h):\n    return [isinstance(p, P), p == P(1), h is g]\n"
    )
    ex = executor.execute(program, ["P(1), g"], expressions=True)
    assert (ex.status, ex.outputs) == ("ok", ("[True, True, True]",))


@pytest.mark.parametrize(
    "text",
    [
        "decimal.setcontext(decimal.Context(prec=3)) or 7",  # a module's state, shared
        "numbers.Number.register(str) and 'a'",  # an ABC's registry, shared
        "(lambda: decimal)().getcontext()",
        "memo[0].append(1) or 5",
        "setcontext(Context(prec=3)) or 7",  # names the program imported
    ],
)
def test_an_input_may_not_reach_state_the_answering_f_shares(text):
    assert safe_input_expression(text) is None


# Found by the red team on 2026-12-06 (each passed the static checks of that morning; the
# checks refuse them now, tests/sage_env/verifiers/test_program_checks.py). Run here without
# the checks: the runner alone must not report a forged value.

#: A metaclass whose __eq__ says yes: ``t in (int, ...)`` took a class for int.
LIAR = """class M(type(int)):
    def __eq__(self, other):
        return True
    def __hash__(self):
        return 0

class Liar:
    def __repr__(self):
        return "'forged'"

def f(x):
    C = M('C', (Liar,), {})
    return C()
"""

#: object.__getattribute__ read back by asdict from a field of a metaclass's dataclass, then
#: the runner's frame through sys._getframe: each way on from there to the results.
GETATTRIBUTE = """from dataclasses import make_dataclass, asdict
from typing import Type

U = '_' * 2
M = make_dataclass('M', [U + 'getattribute' + U], bases=(Type,), init=False,
                   repr=False, eq=False, namespace={U + 'doc' + U: 'm'})
X = M('X', (), {})

def f(a):
    ga = asdict(X)[U + 'getattribute' + U]
    imp = ga(f, U + 'globals' + U)[U + 'builtins' + U][U + 'import' + U]
    sy = imp('sys')
    runner = sy._getframe(1).f_globals
    tries = [
        lambda: imp('gc').get_objects(),
        lambda: setattr(runner['_hook'], U + 'code' + U, (lambda o: None).__code__),
        lambda: ga(runner['_main'], U + 'code' + U),
        lambda: sy.settrace(None),
        lambda: imp('ctypes').CDLL(None),
    ]
    out = []
    for t in tries:
        try:
            t()
            out.append('open')
        except RuntimeError as e:
            out.append(str(e))
    return out
"""

#: json's default encoder replaced: it rewrote the results line the runner printed with
#: json.dumps.
ENCODER = """from dataclasses import make_dataclass
from typing import Type

U = '_' * 2
M = make_dataclass('M', [U + 'getattribute' + U], bases=(Type,), init=False,
                   repr=False, eq=False, namespace={U + 'doc' + U: 'm'})
X = M('X', (), {})

class E:
    def encode(self, rows):
        return repr([['ok', repr('forged')] for r in rows])

def f(x):
    from dataclasses import asdict
    ga = asdict(X)[U + 'getattribute' + U]
    b = ga(f, U + 'globals' + U)[U + 'builtins' + U]
    b['set' + 'attr'](b[U + 'import' + U]('json'), '_default_encoder', E())
    return x + 1
"""


def test_an_object_whose_metaclass_equals_everything_is_not_a_literal(level):
    ex = executor.execute(LIAR, [(1,)])
    assert (ex.status, ex.errors) == ("error", ("OutputNotALiteral: C",))


def test_from_the_runners_frame_no_way_leads_on(level):
    ex = executor.execute(GETATTRIBUTE, [(1,)])
    refused = [
        "the sandbox refuses gc.get_objects",
        "the sandbox refuses changing .__code__",
        "the sandbox refuses reading .__code__",
        "the sandbox refuses sys.settrace",
        "the sandbox refuses ctypes.dlopen",
    ]
    assert (ex.status, ex.outputs) == ("ok", (repr(refused),))


#: What the hook must leave alone: the module look-ups of namedtuple, enum and typing (by
#: sys._getframe), copying a functional enum's member, a protocol check that raises.
HONEST = """import copy
from collections import namedtuple
from enum import Enum
from typing import NewType, Protocol

P = namedtuple('P', 'x y')
Color = Enum('Color', 'RED GREEN')
UserId = NewType('UserId', int)

class Shape(Protocol):
    def area(self) -> float: ...

def f(n):
    try:
        isinstance(n, Shape)
        checked = 'no error'
    except TypeError:
        checked = 'TypeError'
    return [repr(P), copy.copy(Color.RED) is Color.RED, repr(UserId), checked, P(n, 1).x]
"""


def test_the_hook_leaves_honest_programs_their_plain_python_values(level):
    ex = executor.execute(HONEST, [(3,)])
    want = ["<class '__azr_program__.P'>", True, "__azr_program__.UserId", "TypeError", 3]
    assert (ex.status, ex.outputs) == ("ok", (repr(want),))


def test_a_replaced_json_encoder_changes_no_result(level):
    # the runner prints repr, not json; the harness's own report is json, so the run ends
    # without a result: a failure, never the forged value
    ex = executor.execute(ENCODER, [(1,), (5,)])
    assert (ex.status, ex.outputs, ex.reason) == ("failed", (), "exited before finishing")


def test_an_input_still_reads_the_programs_names():
    program = "BASE = [1, 2]\n\ndef f(xs, k):\n    return sum(xs) * k\n"
    ex = executor.execute(program, ["BASE[:], 3", "[4], (lambda x: x + 1)(1)"], expressions=True)
    assert (ex.status, ex.outputs) == ("ok", ("9", "8"))


# Red team, 2026-12-06 (afternoon): an input that hands the program's names to a lambda. The
# first changed the state of the f that answers; the second walked the program's ``re`` to
# ``exec``, found the runner's nonce through the frames and printed a forged report: the answer
# checks paid an input for an output f never returns (an int from a str -> str function).
_RE = "import re\ndef f(s):\n    return re.sub('a', 'b', s)\n"
_FORGE = (
    "import sys, os\n"
    "fr = sys._getframe(0)\n"
    "nonce = None\n"
    "while fr is not None and nonce is None:\n"
    "    for c in fr.f_code.co_consts:\n"
    "        if type(c) is str and c.startswith('@@AZR-') and c.endswith('@@') and len(c) > 20:\n"
    "            nonce = c\n"
    "    fr = fr.f_back\n"
    "os.write(1, (nonce + repr((('ok', '12345'),)) + '\\n').encode())\n"
    "os.dup2(os.open('/dev/null', os.O_WRONLY), 1)\n"
)


@pytest.mark.parametrize(
    ("program", "text", "gold"),
    [
        (_MEMO, "(lambda d: d.update({5: 'X'}))(memo) or 5", "'X'"),
        (_MEMO, "[0 for memo[5] in ['X']] and 5", "'X'"),
        (_RE, f"(lambda m: m.enum.bltns.exec({_FORGE!r}))(re)", "12345"),
    ],
)
def test_an_input_that_hands_the_programs_names_on_is_not_paid(program, text, gold):
    import random

    from sage_env.verifiers.answer_checks import check_abduction

    assert safe_input_expression(text) is None
    for kw in (
        {"strict_types": False, "verdict_runs": 1},  # CRUXEval-I's settings
        {"check_rng": random.Random(0)},
    ):
        got = check_abduction(text, program, gold, expressions=True, **kw)
        assert got.score == 0.0, (text, got)
