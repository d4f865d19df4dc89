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

#: Reaches a running generator's frame through a namedtuple field named at run time and an
#: ABC the generator type was registered with; from the frame, the runner's ``results``
#: list: on the second input it rewrites the first input's result to ``'forged'``.
ABC_FORGER = """from collections import namedtuple
from collections.abc import Hashable

def f(a):
    N = namedtuple('N', ['gi' + '_frame'])
    class G(N, Hashable):
        pass
    box = []
    def walk():
        match box[0]:
            case G(fr):
                rows = fr.f_back.f_back.f_locals['results']
                if rows:
                    rows[0] = ['ok', repr('forged')]
        yield a
    g = walk()
    G.register(type(g))
    box.append(g)
    return next(g)
"""

#: The same reach through a metaclass made by ``type(*args)`` with a computed
#: ``__instancecheck__`` (found 2026-12-05: it returned ``os.getpid()`` in the sandbox).
METACLASS_FORGER = """def f(a):
    M = type(*('M', (type,), {'_' * 2 + 'instancecheck' + '_' * 2: lambda c, o: True}))
    C = M(*('C', (), {'_' * 2 + 'match_args' + '_' * 2: ('gi' + '_frame',)}))
    box = []
    def walk():
        match box[0]:
            case C(fr):
                rows = fr.f_back.f_back.f_locals['results']
                if rows:
                    rows[0] = ['ok', repr('forged')]
        yield a
    g = walk()
    box.append(g)
    return next(g)
"""


_NO_HOOK = "_sys.addaudithook(_refuse_frames)"


@pytest.mark.parametrize(("program", "name"), [(ABC_FORGER, "abc"), (METACLASS_FORGER, "meta")])
def test_the_runner_refuses_a_frame_at_run_time(level, program, name, monkeypatch):
    ex = executor.execute(program, [(1,), (2,)])
    assert ex.status == "error"
    assert ex.outputs == (None, None)
    assert ex.errors == ("RuntimeError: the sandbox refuses reading .gi_frame",) * 2
    # the control: without the hook the same program forges the first result
    monkeypatch.setattr(executor, "_RUNNER", executor._RUNNER.replace(_NO_HOOK, "pass"))
    forged = executor.execute(program, [(1,), (2,)])
    assert (forged.status, forged.outputs) == ("ok", ("'forged'", "2"))


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


def test_an_input_does_not_change_the_state_of_the_f_that_answers():
    text = "memo.update({5: 'X'}) or 5"
    assert safe_input_expression(text) == text  # the static check lets it through
    ex = executor.execute(_MEMO, [text, "5"], expressions=True)
    assert (ex.status, ex.outputs) == ("ok", ("'none'", "'none'"))


def test_an_input_still_reads_the_programs_names():
    program = "BASE = [1, 2]\n\ndef f(xs, k):\n    return sum(xs) * k\n"
    ex = executor.execute(program, ["BASE[:], 3", "[4], (lambda x: x + 1)(1)"], expressions=True)
    assert (ex.status, ex.outputs) == ("ok", ("9", "8"))
