"""Exact normal forms and distances of sage_env.tasks.novelty (issue 49: mutation testing).

Each rule of :func:`normalise_program` on a small program with the normal form it must give,
character for character, so that a rule dropped, inverted or applied to the wrong node changes
a form; and :func:`program_distance` at values worked out by hand.
"""

import ast

import pytest

from sage_env.tasks import novelty
from sage_env.tasks.novelty import nearest_program_distance, normalise_program, program_distance

# name: (source, its normal form)
FORMS = {
    # every kind of argument loses its annotation, and the function its return annotation
    "ann_all": (
        """\
def f(a: int, /, b: str = 'x', *c: int, d: float,
      e: bool = True, **g: dict) -> int:
    return a + len(b) + len(c) + d + e + len(g)
""",
        """\
def f(_v0, /, _v1='x', *_v2, _v3, _v4=True, **_v5):
    return _v0 + len(_v1) + len(_v2) + _v3 + _v4 + len(_v5)""",
    ),
    # an async def loses its annotations too and is renamed like a def
    "async_ann": (
        """\
async def g(x: int) -> int:
    return x
def f(y):
    return g(y)
""",
        """\
async def _v0(_v1):
    return _v1

def f(_v2):
    return _v0(_v2)""",
    ),
    # a lambda's arguments are its own scope; a pure lambda assigned and read is kept
    "lambda": (
        """\
def f(x):
    h = lambda a, b=2: a * b
    return h(x)
""",
        """\
def f(_v0):
    _v1 = lambda _v2, _v3=2: _v2 * _v3
    return _v1(_v0)""",
    ),
    # if/while on a constant keep the branch that runs (not 0 is True, None and '' are False)
    "consts": (
        """\
def f(x):
    if not 0:
        x += 1
    if not x:
        x = 2
    if None:
        x = 3
    else:
        x = 4
    if '':
        x = 5
    while not 1:
        x = 6
    else:
        x = 7
    while True:
        break
    while x:
        x -= 1
    return x
""",
        """\
def f(_v0):
    _v0 += 1
    if not _v0:
        _v0 = 2
    _v0 = 4
    _v0 = 7
    while True:
        break
    while _v0:
        _v0 -= 1
    return _v0""",
    ),
    # not not c is bool(c); after a constant return nothing is kept
    "notnot": (
        """\
def f(x):
    if not not 0:
        return 1
    if not not 2:
        return x
    return 3
""",
        """\
def f(_v0):
    return _v0""",
    ),
    # for-else, try/except/finally, match: an emptied body becomes pass, an emptied else goes
    "blocks": (
        """\
def f(x):
    for i in x:
        pass
    else:
        'doc'
    try:
        x = 1
        return x
        x = 2
    except ValueError as e:
        pass
    except TypeError:
        return e
    finally:
        ...
    match x:
        case 1:
            pass
        case [a, *rest]:
            return rest
        case {'k': v, **others}:
            return others
        case int() as n:
            return n
""",
        """\
def f(_v0):
    for _v1 in _v0:
        pass
    try:
        _v0 = 1
        return _v0
    except ValueError as _v2:
        pass
    except TypeError:
        return _v2
    match _v0:
        case 1:
            pass
        case [_v3, *_v4]:
            return _v4
        case {'k': _v5, **_v6}:
            return _v6
        case int() as _v7:
            return _v7""",
    ),
    # return, raise, break and continue each end their block
    "terminators": (
        """\
def f(x):
    for i in x:
        if i:
            continue
            x = 1
        break
        x = 2
    raise ValueError
    return 1
""",
        """\
def f(_v0):
    for _v1 in _v0:
        if _v1:
            continue
        break
    raise ValueError""",
    ),
    # from __future__ goes; an unread alias goes; import a.b keeps a; a star import stays
    "future": (
        """\
from __future__ import annotations
import os.path
import re as r, json
from math import *
def f(x):
    return os.path.join(x, json.dumps(1))
""",
        """\
import os.path
import json as _v0
from math import *

def f(_v1):
    return os.path.join(_v1, _v0.dumps(1))""",
    ),
    # global, nonlocal, class bodies: attributes keep their names, methods see past the class
    "scopes": (
        """\
g = 1
k = 2
def f(x):
    global g
    g = x
    def inner():
        nonlocal x
        x = 3
        return x
    class C:
        g = 5
        x = 6
        def m(self):
            return x + g
    return inner() + C().m() + k
""",
        """\
_v0 = 1
_v1 = 2

def f(_v2):
    global _v0
    _v0 = _v2

    def _v3():
        nonlocal _v2
        _v2 = 3
        return _v2

    class _v4:
        g = 5
        x = 6

        def m(_v5):
            return _v2 + _v0
    return _v3() + _v4().m() + _v1""",
    ),
    # comprehensions are scopes; the first iterable is outside; := binds in the function
    "comp": (
        """\
def f(xs):
    ys = [x for x in xs if x for y in range(x) if y]
    zs = {a: b for a, b in xs}
    s = {n for n in xs}
    t = (m for m in xs)
    w = [(last := q) for q in xs]
    return ys, zs, s, t, w, last
""",
        """\
def f(_v0):
    _v1 = [_v2 for _v2 in _v0 if _v2 for _v3 in range(_v2) if _v3]
    _v4 = {_v5: _v6 for _v5, _v6 in _v0}
    _v7 = {_v8 for _v8 in _v0}
    _v9 = (_v10 for _v10 in _v0)
    _v11 = [(_v13 := _v12) for _v12 in _v0]
    return (_v1, _v4, _v7, _v9, _v11, _v13)""",
    ),
    # defaults are read where the function is defined
    "defaults": (
        """\
n = 3
def f(x, y=n, *, z=n):
    return x + y + z
""",
        """\
_v0 = 3

def f(_v1, _v2=_v0, *, _v3=_v0):
    return _v1 + _v2 + _v3""",
    ),
    # an unread def goes unless it is decorated or its defaults do something
    "decor": (
        """\
import functools
@functools.cache
def unused(x):
    return x
def unused2(a=print('hi')):
    return a
def unused3(a=1):
    return a
def f(x):
    return x
""",
        """\
import functools as _v0

@_v0.cache
def _v1(_v2):
    return _v2

def _v3(_v4=print('hi')):
    return _v4

def f(_v5):
    return _v5""",
    ),
    # only a pure value bound to unread names goes
    "impure": (
        """\
def f(x):
    a = 1
    b = (1, x)
    c = [1, *x]
    d = {1: 2, **x}
    e = {x: x}
    e2 = {x}
    g = x()
    h = lambda q=x(): q
    i = lambda q=1: q
    j, k = 1, 2
    l = m = 4
    return x
""",
        """\
def f(_v0):
    _v1 = [1, *_v0]
    _v2 = {1: 2, **_v0}
    _v3 = _v0()
    _v4 = lambda _v5=_v0(): _v5
    _v6, _v7 = (1, 2)
    return _v0""",
    ),
    # unread chains go one link a round, for at most _MAX_ROUNDS rounds
    "rounds": (
        """\
def f(x):
    a = 1
    b = a
    c = b
    d = c
    e = d
    g = e
    h = g
    i = h
    j = i
    k = j
    return x
""",
        """\
def f(_v0):
    _v1 = 1
    _v2 = _v1
    return _v0""",
    ),
    # a block the pruner emptied gets a pass
    "emptied": (
        """\
def f(x):
    if x:
        a = 1
    else:
        b = 2
    for i in x:
        c = 3
    return x
""",
        """\
def f(_v0):
    if _v0:
        pass
    for _v1 in _v0:
        pass
    return _v0""",
    ),
    # a free name that looks like a canonical name moves the prefix
    "prefix": (
        """\
def f(x):
    return _v0 + x
""",
        """\
def f(_v_0):
    return _v0 + _v_0""",
    ),
    # as often as needed
    "prefix2": (
        """\
def f(x):
    return _v0 + _v_0 + x
""",
        """\
def f(_v__0):
    return _v0 + _v_0 + _v__0""",
    ),
    # dunders keep their names
    "dunder": (
        """\
__all__ = ['f']
def f(x):
    __x__ = 1
    return __x__ + x + len(__all__)
""",
        """\
__all__ = ['f']

def f(_v0):
    __x__ = 1
    return __x__ + _v0 + len(__all__)""",
    ),
    # del and += read their name
    "del_aug": (
        """\
def f(x):
    y = 1
    del y
    z = 2
    z += x
    return x
""",
        """\
def f(_v0):
    _v1 = 1
    del _v1
    _v2 = 2
    _v2 += _v0
    return _v0""",
    ),
    # x: T = v becomes x = v; x: T goes
    "annassign": (
        """\
def f(x):
    y: int = 5
    z: int
    w: int = x
    return x + w
""",
        """\
def f(_v0):
    _v1 = _v0
    return _v0 + _v1""",
    ),
    # a class is a binding; an unread one goes; its bases and keywords are read
    "classdef": (
        """\
import abc
class B(abc.ABC, metaclass=abc.ABCMeta):
    pass
class U:
    pass
def f(x):
    return B
""",
        """\
import abc as _v0

class _v1(_v0.ABC, metaclass=_v0.ABCMeta):
    pass

class _v2:
    pass

def f(_v3):
    return _v1""",
    ),
    # except ... as binds a name
    "except_global": (
        """\
def f(x):
    try:
        return x
    except Exception as err:
        return err
""",
        """\
def f(_v0):
    try:
        return _v0
    except Exception as _v1:
        return _v1""",
    ),
    # the := target outlives the comprehension
    "walrus_mod": (
        """\
def f(x):
    return [(y := i) for i in x] + [y]
""",
        """\
def f(_v0):
    return [(_v2 := _v1) for _v1 in _v0] + [_v2]""",
    ),
    # a star import binds nothing and is kept
    "star_import_only": (
        """\
from os import *
def f(x):
    return x
""",
        """\
from os import *

def f(_v0):
    return _v0""",
    ),
    # a bare constant statement goes, other expression statements stay
    "expr_stmt": (
        """\
def f(x):
    x
    print(x)
    1
    return x
""",
        """\
def f(_v0):
    _v0
    print(_v0)
    return _v0""",
    ),
    # a constant-true if whose body is pass leaves nothing
    "if_const_empty": (
        """\
def f(x):
    if 1:
        pass
    return x
""",
        """\
def f(_v0):
    return _v0""",
    ),
    # if True keeps only the body
    "ifexp": (
        """\
def f(x):
    if True:
        return 1
    else:
        return 2
""",
        """\
def f(_v0):
    return 1""",
    ),
    # a __future__ import goes even when its feature name is read
    "future_read": (
        """\
from __future__ import annotations
def f(x):
    return annotations
""",
        """\
def f(_v0):
    return annotations""",
    ),
    # dead code in an except body goes
    "handler_dead": (
        """\
def f(x):
    try:
        return x
    except ValueError:
        'why'
        return 1
        x = 2
    except (KeyError, TypeError) as e:
        raise
        return e
""",
        """\
def f(_v0):
    try:
        return _v0
    except ValueError:
        return 1
    except (KeyError, TypeError) as _v1:
        raise""",
    ),
    # dead code in a case body goes
    "case_dead": (
        """\
def f(x):
    match x:
        case 1:
            return 1
            x = 5
        case _:
            'other'
            pass
    return x
""",
        """\
def f(_v0):
    match _v0:
        case 1:
            return 1
        case _:
            pass
    return _v0""",
    ),
    # a name made global in a function is a module binding even with no module-level one
    "global_only": (
        """\
def f(x):
    global total
    total = x
    return total
""",
        """\
def f(_v0):
    global _v1
    _v1 = _v0
    return _v1""",
    ),
    # an except clause reads its exception type
    "except_type_local": (
        """\
def f(x):
    E = ValueError
    try:
        return int(x)
    except E:
        return 0
""",
        """\
def f(_v0):
    _v1 = ValueError
    try:
        return int(_v0)
    except _v1:
        return 0""",
    ),
    # outside a comprehension := binds in the function, not the module
    "walrus_shadow": (
        """\
y = 5
def f(x):
    if (y := x):
        return y
    return 0
""",
        """\
def f(_v0):
    if (_v1 := _v0):
        return _v1
    return 0""",
    ),
    # an import kept whole does not end the round that dropped something
    "import_round": (
        """\
a = 1
b = a
import os
def f(x):
    return os.sep + x
""",
        """\
import os as _v0

def f(_v1):
    return _v0.sep + _v1""",
    ),
    # a module of dead code is empty, without a pass
    "docstring_only": (
        "'A module with nothing in it.'\n",
        "",
    ),
    # the entry reading itself is still read (a read adds to the executor's call)
    "recursive": (
        """\
def f(n):
    return n and f(n - 1)
""",
        """\
def f(_v0):
    return _v0 and f(_v0 - 1)""",
    ),
    # a name with dunder on one side only is renamed
    "private": (
        """\
def f(x):
    __y = x
    z__ = __y
    return z__
""",
        """\
def f(_v0):
    _v1 = _v0
    _v2 = _v1
    return _v2""",
    ),
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_each_rule_gives_the_exact_normal_form(name):
    source, form = FORMS[name]
    assert normalise_program(source) == form
    if name != "rounds":  # the round cap leaves the chain's head for a second pass
        assert normalise_program(form) == form  # a normal form is its own normal form


ONE = "def f(x):\n    return x + 1\n"  # tokens: def f ( _v0 ) : return _v0 + 1
TWO = "def f(y):\n    return y + 2\n"  # the same but the last token


def test_program_distance_at_values_worked_out_by_hand():
    assert program_distance(ONE, TWO) == pytest.approx(1 - 18 / 20, abs=1e-12)
    assert program_distance(TWO, ONE) == pytest.approx(1 - 18 / 20, abs=1e-12)
    assert program_distance(ONE, ONE.replace("x", "z")) == 0.0
    # nothing on either side: no difference (not 1 - 0/0)
    assert program_distance("", "") == 0.0
    assert program_distance("", "x") == 1.0
    # a source that does not parse is compared as written: ["def", "("] vs ["def", ")"]
    assert program_distance("def (", "def (") == 0.0
    assert program_distance("def (", "def )") == 0.5
    # ["def", "("] against the 8 tokens of "def f ( _v0 ) : return _v0": 2 * 2 / 10
    assert program_distance("def (", "def f(x): return x") == pytest.approx(0.6, abs=1e-12)
    # not a str: compared as its str(), never raises
    assert program_distance(None, None) == 0.0
    # 123 is read as the text "123"; the program "123" is a bare constant, whose normal form is
    # empty: one token against none
    assert program_distance(123, "123") == 1.0


def test_program_distance_junks_no_token():
    """autojunk=False: difflib's heuristic drops tokens that fill over 1% of a 200+ token
    stream (",", "+", the argument), which moves long programs' distances."""
    items = [f"x + {i}" for i in range(60)]
    forward = "def f(x):\n    return [" + ", ".join(items) + "]\n"
    backward = "def f(x):\n    return [" + ", ".join(reversed(items)) + "]\n"
    # 248 tokens each, 18 matched without junk (36 / 496); with junk it would be 0.952
    assert program_distance(forward, backward) == pytest.approx(1 - 36 / 496, abs=1e-12)


def test_nearest_program_distance_is_the_minimum_and_one_without_others():
    assert nearest_program_distance(ONE, []) == 1.0
    assert nearest_program_distance(ONE, ()) == 1.0
    assert nearest_program_distance(ONE, [TWO, ONE]) == 0.0
    assert nearest_program_distance(ONE, [ONE, TWO]) == 0.0
    assert nearest_program_distance(ONE, (TWO, TWO)) == pytest.approx(0.1, abs=1e-12)
    assert nearest_program_distance(ONE, ["def (", TWO]) == pytest.approx(0.1, abs=1e-12)


@pytest.mark.parametrize(
    "text",
    [b"def f(x): return x", None, 3, "def f(:", "x = '\0'", "(" * 300 + ")" * 300],
)
def test_what_is_not_a_program_has_no_normal_form(text):
    assert normalise_program(text) is None


@pytest.mark.parametrize(
    ("test", "truth"),
    [
        ("0", False),
        ("1", True),
        ("None", False),
        ("''", False),
        ("'a'", True),
        ("not 0", True),
        ("not 1", False),
        ("not not 0", False),
        ("not not 'a'", True),
        ("x", None),
        ("not x", None),
        ("-1", None),  # a unary minus is not folded
        ("1 and 0", None),
    ],
)
def test_constant_truth(test, truth):
    assert novelty._constant_truth(ast.parse(test, mode="eval").body) is truth


@pytest.mark.parametrize(
    ("expr", "pure"),
    [
        ("1", True),
        ("x", True),
        ("lambda a, b=1, *, c=x: a", True),
        ("lambda a=g(): a", False),
        ("lambda *, c=g(): c", False),
        ("(1, x, [2, {3}])", True),
        ("(1, *x)", False),
        ("[g()]", False),
        ("{g()}", False),
        ("{1: x, 'a': (2,)}", True),
        ("{**x}", False),
        ("{g(): 1}", False),
        ("{1: g()}", False),
        ("g()", False),
        ("x.a", False),
        ("x[0]", False),
        ("-1", False),
    ],
)
def test_pure_values(expr, pure):
    assert novelty._pure(ast.parse(expr, mode="eval").body) is pure


def test_pure_none_is_pure():
    assert novelty._pure(None) is True


def test_scope_resolution_follows_legb_globals_nonlocals_and_class_bodies():
    module = novelty._Scope("module", None)
    module.bound |= {"g", "m"}
    fn = novelty._Scope("function", module)
    fn.bound |= {"a", "g"}
    fn.globals.add("m")
    cls = novelty._Scope("class", fn)
    cls.bound |= {"a", "c"}
    method = novelty._Scope("function", cls)
    method.bound |= {"n", "a"}
    method.nonlocals.add("a")
    assert method.resolve("n", module) is method
    assert method.resolve("a", module) is fn  # nonlocal: past itself, past the class body
    assert method.resolve("c", module) is None  # a class body does not enclose
    assert cls.resolve("c", module) is cls  # but names its own bindings
    assert cls.resolve("a", module) is cls
    assert method.resolve("g", module) is fn
    assert fn.resolve("m", module) is module  # global, bound at module level
    fn.globals.add("z")
    assert fn.resolve("z", module) is None  # global, never bound: a builtin or an error
    assert method.resolve("len", module) is None
