"""The static checks of a model-written program (``sage_env.verifiers.program_checks``).

Pure functions, no sandbox: each test asserts the exact verdict (the refusal text, the module
a refusal reaches, ``None``, ``True``/``False``, the accepted input text) of one branch, at a
boundary or at a non-default parameter (``banned``, ``name``, a template's nesting depth), so
that a changed comparison, bound, string, operator or forwarded argument fails here (the
module's mutation run uses this file alone; docs/reference/testing.md). The corpus and
red-team programs are in ``test_program_allowlist.py``.
"""

import pytest

from sage_env.verifiers import program_checks as pc
from sage_env.verifiers.program_checks import (
    MAX_LITERAL_CHARS,
    defines_f,
    escape_hatch,
    forbidden_import,
    program_refusal,
    safe_input_expression,
)

WALK = "the template could walk its attributes to the interpreter"


def _computed(carrier: str, attr: str = "format") -> str:
    """The refusal of a computed template in a program that holds ``carrier``."""
    return f"formats a template it computes (.{attr} on a value) and {carrier}: {WALK}"


def _verdict(program: str, banned=None) -> tuple:
    """``(program_refusal, forbidden_import)`` of ``program``, with ``banned`` if given."""
    if banned is None:
        return program_refusal(program), forbidden_import(program)
    return program_refusal(program, banned), forbidden_import(program, banned)


# ---------------------------------------------------------------- _is_dunder
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("__init__", True),
        ("__a__", True),
        ("__X__", True),  # X is not an underscore (strip("_"), not strip("X_"))
        ("__XX__", True),
        ("___a___", True),
        ("____", False),  # only underscores
        ("___", False),
        ("__", False),
        ("__a", False),
        ("a__", False),
        ("_a_", False),
        ("a", False),
        ("__ __", True),  # strip("_") only: the space is a character
    ],
)
def test_is_dunder(name, expected):
    assert pc._is_dunder(name) is expected


# ---------------------------------------------------------------- honest programs pass
HONEST = [
    "def f(a):\n    return a",
    "import math\ndef f(a):\n    return math.floor(a)",
    "import math as m\ndef f(a):\n    return m.floor(a)",
    "import math\ndef f(a):\n    return math.pi.real",  # a member's attribute, not a module
    "import collections.abc\ndef f(a):\n    return isinstance(a, collections.abc.Sized)",
    "import collections.abc as cabc\ndef f(a):\n    return isinstance(a, cabc.Sized)",
    "from collections import abc\ndef f(a):\n    return isinstance(a, abc.Sized)",
    "from collections import abc as c\ndef f(a):\n    return isinstance(a, c.Sized)",
    "from math import floor\ndef f(a):\n    return floor(a)",
    "from math import *\ndef f(a):\n    return floor(a)",
    "from __future__ import annotations\ndef f(a: int) -> int:\n    return a",
    "import math\nmath = 1",  # the module's name stored over, never read as a value
    "def f(a):\n    return type(a).__name__",
    "def f(a):\n    return max(a, 1)",  # another builtin with two arguments
    "def f(a):\n    return a.count(1, 2)",  # a method with two arguments
    "def f(a):\n    return a.real, a._asdict(), a._fields, a.__name__",
    "class C(list):\n    def __init__(self, x):\n        super().__init__(x)",
    "class P:\n    __slots__ = ('x',)\n    __hash__ = None\n    def __eq__(self, o):\n"
    "        return True\n    def __len__(self):\n        return 0",
    "class C(slots=True):\n    pass",  # the one class keyword that passes
    "if __name__ == '__main__':\n    print('__init__', '__name__')",
    "def f(a):\n    return 'a__b', '____', b'__class__', b'gi_frame'",  # no dunder word / bytes
    "def f(a):\n    return '{0.real}'.format(a)",  # a constant template of a public attribute
    "def f(a):\n    return '{0[real]}'.format(a)",  # a key, not an attribute
    "def f(a):\n    return '{0:{1}}'.format(a, 5)",
    "def f(open):\n    return open",  # a refused builtin's name bound by the program
    "def f(a):\n    open = a\n    return open",
    "def f(open):\n    def g():\n        return open\n    return g",  # free in g
    "def f(open):\n    class C:\n        y = open\n    return C",  # free in a class body
    "open = 1",  # stored, never read
    "def f(t, v):\n    return t.format(*v)",  # a computed template, plain data
    "def f(t):\n    return t.format(len(t))",  # len called, not a value
    "def g():\n    return 1\ndef f(t):\n    return t.format(g())",
    "def g():\n    return 1\ndef f(t):\n    return t.format(g.__name__)",  # g as a base
    "def f(t):\n    for len in t:\n        pass\n    return t.format(1)",  # len stored
    "def f(t):\n    try:\n        pass\n    except ValueError:\n        pass\n"
    "    return t.format(1)",  # an exception caught, not bound
    "def f(t):\n    if not t:\n        raise ValueError('x')\n    return t.format(1)",
    "def f(t):\n    if not t:\n        raise ValueError\n    return t.format(1)",
    "def f(t):\n    try:\n        pass\n    except ValueError:\n        raise\n"
    "    return t.format(1)",  # a bare raise holds nothing
    "from __future__ import annotations\ndef f(t):\n    return t.format(1)",
    "def f(a):\n    g = lambda x: x\n    return '{}'.format(g(a))",  # a constant template
    "def f(a):\n    match a:\n        case complex(real=r):\n            return r",
    "def f(:",  # does not parse: the parse check reports it
]


@pytest.mark.parametrize("program", HONEST)
def test_honest_programs_pass(program):
    assert program_refusal(program) is None
    assert forbidden_import(program) is None
    assert escape_hatch(program) is None


# ---------------------------------------------------------------- imports
IMPORTS = [
    ("import os", "imports 'os', a banned module", "os"),
    ("import os.path", "imports 'os', a banned module", "os"),
    ("def f(a):\n    import os", "imports 'os', a banned module", "os"),
    ("import secrets", "imports 'secrets', which is not on the allow-list", "secrets"),
    ("import math.foo", "imports 'math.foo', which is not on the allow-list", "math.foo"),
    ("import posix", "imports 'posix', a banned module (module 'os')", "os"),
    ("import _random", "imports '_random', a banned module (module 'random')", "random"),
    (
        "import collections.os",
        "imports 'collections.os', a banned module (module 'os')",
        "os",
    ),
    ("import math, os", "imports 'os', a banned module", "os"),
    ("import os\nimport sys", "imports 'os', a banned module", "os"),  # the first stays named
    ("from . import x", "has a relative import", None),
    ("from .m import x", "has a relative import", None),
    ("from os import path", "imports 'os', a banned module", "os"),
    (
        "from secrets import token_hex",
        "imports 'secrets', which is not on the allow-list",
        "secrets",
    ),
    ("from secrets import *", "imports 'secrets', which is not on the allow-list", "secrets"),
    (
        "from secrets import os",
        "imports 'secrets.os', which is not an allowed member of 'secrets' (module 'os')",
        "os",
    ),
    (
        "from math import foo",
        "imports 'math.foo', which is not an allowed member of 'math'",
        "math.foo",
    ),
    (
        "from statistics import random",
        "imports 'statistics.random', which is not an allowed member of 'statistics'"
        " (module 'random')",
        "random",
    ),
    (
        "from typing import *",
        "imports * from 'typing', more than its allowed members",
        "typing",
    ),
    (
        "from functools import *",
        "imports * from 'functools', more than its allowed members",
        "functools",
    ),
]


@pytest.mark.parametrize(("program", "reason", "module"), IMPORTS)
def test_imports_off_the_list_are_refused_naming_the_module(program, reason, module):
    assert _verdict(program) == (reason, module)
    assert escape_hatch(program) == reason


@pytest.mark.parametrize(
    ("program", "banned", "reason", "module"),
    [
        ("import math", ("math",), "imports 'math', a banned module", "math"),
        ("import math", ["_math"], "imports 'math', a banned module", "math"),  # as named
        ("import re", ["re"], "imports 're', a banned module", "re"),
        ("import os", (), "imports 'os', which is not on the allow-list", "os"),
        ("import os", ("sys",), "imports 'os', which is not on the allow-list", "os"),
        ("import posix", (), "imports 'posix', which is not on the allow-list", "posix"),
        ("import posix", ("posix",), "imports 'posix', a banned module (module 'os')", "os"),
        (
            "from math import floor",
            ("floor",),
            "imports 'math.floor', which is not an allowed member of 'math' (module 'floor')",
            "floor",
        ),
        ("from os import path", (), "imports 'os', which is not on the allow-list", "os"),
        ("import math\ndef f(a):\n    return math.pi", (), None, None),
        ("import statistics\ndef f(a):\n    return statistics.mean(a)", [], None, None),
    ],
)
def test_a_custom_banned_list(program, banned, reason, module):
    assert _verdict(program, banned) == (reason, module)


def test_the_default_banned_list_is_azrs():
    assert _verdict("import re") == (None, None)
    assert _verdict("import math") == (None, None)
    assert escape_hatch("import re") is None
    assert escape_hatch("import sys") == "imports 'sys', a banned module"


# ---------------------------------------------------------------- modules as values, reads
MODULE_READS = [
    ("import math\ndef f(a):\n    return math", "uses module 'math' as a value", None),
    ("import math as m\ndef f(a):\n    return m", "uses module 'math' as a value", None),
    (
        "import collections.abc\ndef f(a):\n    return collections",
        "uses module 'collections' as a value",
        None,
    ),
    (
        "import collections.abc as cabc\ndef f(a):\n    return cabc",
        "uses module 'collections.abc' as a value",
        None,
    ),
    (
        "import collections\ndef f(a):\n    return collections.abc",
        "uses module 'collections.abc' as a value",
        None,
    ),
    (
        "from collections import abc\ndef f(a):\n    return abc",
        "uses module 'collections.abc' as a value",
        None,
    ),
    (
        "from collections import abc as c\ndef f(a):\n    return c",
        "uses module 'collections.abc' as a value",
        None,
    ),
    (
        "import math\ndef f(a):\n    return math.foo",
        "reads 'math.foo', which is not an allowed member of 'math'",
        "math.foo",
    ),
    (
        "import statistics\ndef f(a):\n    return statistics.random",
        "reads 'statistics.random', which is not an allowed member of 'statistics'"
        " (module 'random')",
        "random",
    ),
    (
        "import collections.abc\ndef f(a):\n    return collections.abc.sys",
        "reads 'collections.abc.sys', which is not an allowed member of 'collections.abc'"
        " (module 'sys')",
        "sys",
    ),
    (
        "import tempfile\ndef f(a):\n    return tempfile._os",
        "reads 'tempfile._os', of a module not on the allow-list (module 'os')",
        "os",
    ),
    ("import math\ndef f(a):\n    math.pi = a", "assigns 'math.pi', a member of a module", None),
    ("import math\ndef f(a):\n    del math.pi", "assigns 'math.pi', a member of a module", None),
]


@pytest.mark.parametrize(("program", "reason", "module"), MODULE_READS)
def test_modules_are_only_read_for_their_allowed_members(program, reason, module):
    assert _verdict(program) == (reason, module)


def test_a_module_off_the_list_is_named_by_its_import_unless_a_read_reaches_a_banned_one():
    assert _verdict("import tempfile\ndef f(a):\n    return tempfile.mkdtemp") == (
        "imports 'tempfile', which is not on the allow-list",
        "tempfile",
    )


# ---------------------------------------------------------------- names, attributes, strings
REFUSALS = [
    # dunder names
    ("def f(a):\n    return __builtins__", "uses '__builtins__'"),
    ("x = __slots__", "uses '__slots__'"),  # read, not stored by a class body
    ("__x__ = 1", "uses '__x__'"),  # stored, not one of the allowed stores
    ("__version__ = '1'", "uses '__version__'"),
    # refused builtins
    ("def f(a):\n    return open", "uses builtin 'open', which is not on the allow-list"),
    ("def f(a):\n    return len(a), open", "uses builtin 'open', which is not on the allow-list"),
    ("x = open", "uses builtin 'open', which is not on the allow-list"),
    ("class C:\n    x = open", "uses builtin 'open', which is not on the allow-list"),
    (
        "class C:\n    open = 1\n    x = open",  # a class body falls back to the builtins
        "uses builtin 'open', which is not on the allow-list",
    ),
    (
        "def f(a):\n    global open\n    return open",
        "uses builtin 'open', which is not on the allow-list",
    ),
    (
        "def f(a):\n    global a\n    return open",  # symtable refuses it: the first name
        "uses builtin 'open', which is not on the allow-list",
    ),
    (
        "def f(a):\n    global a\n    return open, eval",
        "uses builtin 'eval', which is not on the allow-list",
    ),
    # type() making a class
    ("def f(a):\n    return type('A', (), {})", "calls type() with a class namespace"),
    ("def f(a):\n    return type(a, a)", "calls type() with a class namespace"),
    ("def f(a):\n    return type()", "calls type() with a class namespace"),
    ("def f(a):\n    return type(a, k=1)", "calls type() with a class namespace"),
    ("def f(a):\n    return type(a, **a)", "calls type() with a class namespace"),
    # defs and classes
    (
        "class C:\n    def __getattr__(self, n):\n        return 1",
        "defines special method '__getattr__'",
    ),
    (
        "class C:\n    async def __aenter__(self):\n        return 1",
        "defines special method '__aenter__'",
    ),
    ("class C(metaclass=M):\n    pass", "class 'C' takes a metaclass or class keyword"),
    ("class C(x=1):\n    pass", "class 'C' takes a metaclass or class keyword"),
    ("class C(**k):\n    pass", "class 'C' takes a metaclass or class keyword"),
    ("class C(slots=1, x=1):\n    pass", "class 'C' takes a metaclass or class keyword"),
    # attributes
    ("def f(a):\n    return a.__class__", "reads .__class__, a dunder attribute"),
    ("def f(a):\n    return a._x", "reads ._x, a private attribute"),
    ("def f(a):\n    return a.__", "reads .__, a private attribute"),
    ("def f(a):\n    return a.___", "reads .___, a private attribute"),
    ("def f(a):\n    return a.__x", "reads .__x, a private attribute"),
    ("def f(a):\n    return a.gi_frame", "reads .gi_frame, an interpreter internal"),
    ("def f(a):\n    return a.f_back", "reads .f_back, an interpreter internal"),
    ("def f(a):\n    a._x = 1", "reads ._x, a private attribute"),
    # class patterns
    (
        "def f(a):\n    match a:\n        case object(__class__=c):\n            return c",
        "reads .__class__ in a class pattern, a dunder attribute",
    ),
    (
        "def f(a):\n    match a:\n        case object(_x=c):\n            return c",
        "reads ._x in a class pattern, a private attribute",
    ),
    (
        "def f(a):\n    match a:\n        case object(gi_frame=c):\n            return c",
        "reads .gi_frame in a class pattern, an interpreter internal",
    ),
    (
        "def f(a):\n    match a:\n        case str(format=fm):\n            return fm",
        "reads .format in a class pattern",
    ),
    (
        "def f(a):\n    match a:\n        case str(format_map=fm):\n            return fm",
        "reads .format_map in a class pattern",
    ),
    # strings
    ("def f(a):\n    return '__class__'", "names '__class__' in a string"),
    ("def f(a):\n    return 'x __globals__ y'", "names '__globals__' in a string"),
    ("def f(a):\n    return '__init__ __dict__'", "names '__dict__' in a string"),
    ("def f(a):\n    return '{0.__class__}'.format(a)", "names '__class__' in a string"),
    ("def f(a):\n    return 'gi_frame'", "names 'gi_frame' in a string, an interpreter internal"),
    (
        "def f(a):\n    return 'the gi_frame'",
        "names 'gi_frame' in a string, an interpreter internal",
    ),
    (
        "def f(a):\n    return 'gi_frame', 'f_back'",  # the first string is named
        "names 'gi_frame' in a string, an interpreter internal",
    ),
    (
        "def f(a):\n    return 'gi_frame f_back'",  # the first word is named
        "names 'gi_frame' in a string, an interpreter internal",
    ),
    (
        "def f(a):\n    return 'gi_frame __class__'",  # a dunder still checked after
        "names '__class__' in a string",
    ),
    (
        "def f(a):\n    return '{0._x} gi_frame'",  # and a template too
        "reads ._x in a format template, a private attribute",
    ),
    (
        "def f(a):\n    return '{0.gi_frame}'.format(a)",
        "reads .gi_frame in a format template, an interpreter internal",
    ),
    (
        "def f(a):\n    return '{0[0].gi_frame}'.format(a)",
        "reads .gi_frame in a format template, an interpreter internal",
    ),
    (
        "def f(a):\n    return '{0:{1.gi_code}}'.format(1, a)",
        "reads .gi_code in a format template, an interpreter internal",
    ),
    ("def f(a):\n    return '{0._x}'", "reads ._x in a format template, a private attribute"),
    ("def f(a):\n    return '{0.real._y}'", "reads ._y in a format template, a private attribute"),
    (
        "def f(a):\n    return 'gi_frame', a.__class__",  # a refusal in code comes first
        "reads .__class__, a dunder attribute",
    ),
]


@pytest.mark.parametrize(("program", "reason"), REFUSALS)
def test_refusals_that_reach_no_module(program, reason):
    assert _verdict(program) == (reason, None)
    assert escape_hatch(program) == reason


def test_import_through_the_dunder_is_named_as_a_module():
    assert _verdict("def f(a):\n    return __import__('os')") == ("uses '__import__'", "__import__")


def test_a_refusal_reaching_a_banned_module_is_reported_before_an_earlier_one():
    # the walk meets type() first; the import is deeper in the tree
    program = "type(1, 2)\nif 1:\n    import os"
    assert _verdict(program) == ("imports 'os', a banned module", "os")
    program = "__x__ = 1\ndef g():\n    import os"
    assert _verdict(program) == ("imports 'os', a banned module", "os")
    program = "import statistics\ndef f(a):\n    return type(a, 1), statistics.random"
    assert _verdict(program) == (
        "reads 'statistics.random', which is not an allowed member of 'statistics'"
        " (module 'random')",
        "random",
    )
    # with no banned module reached, the first refusal stands
    program = "type(1, 2)\nif 1:\n    import secrets"
    assert _verdict(program) == ("calls type() with a class namespace", None)
    program = "import secrets\nimport posix"
    assert _verdict(program) == ("imports 'posix', a banned module (module 'os')", "os")


# ---------------------------------------------------------------- computed templates
COMPUTED = [
    ("def f(t):\n    return t.format(len)", _computed("uses function 'len' as a value")),
    ("def f(t):\n    return t.format(print)", _computed("uses function 'print' as a value")),
    (
        "def g():\n    return 1\ndef f(t):\n    return t.format(g)",
        _computed("uses function 'g' as a value"),
    ),
    (
        "async def g():\n    return 1\ndef f(t):\n    return t.format(1)",
        _computed("defines a coroutine"),
    ),
    ("class C:\n    pass\ndef f(t):\n    return t.format(1)", _computed("defines class 'C'")),
    ("def f(t):\n    g = lambda: 0\n    return t.format(1)", _computed("has a lambda")),
    ("def f(t):\n    return t.format(c for c in t)", _computed("makes a generator")),
    ("def g():\n    yield 1\ndef f(t):\n    return t.format(1)", _computed("makes a generator")),
    (
        "def g():\n    yield from [1]\ndef f(t):\n    return t.format(1)",
        _computed("makes a generator"),
    ),
    ("await t\ndef f(t):\n    return t.format(1)", _computed("makes a generator")),
    (
        "def f(t):\n    try:\n        pass\n    except ValueError as e:\n        pass\n"
        "    return t.format(1)",
        _computed("binds an exception ('as e')"),
    ),
    (
        "def f(t, e):\n    if t:\n        raise e\n    return t.format(1)",
        _computed("raises an exception it holds"),
    ),
    (
        "def f(t, e):\n    if t:\n        raise e.x\n    return t.format(1)",
        _computed("raises an exception it holds"),
    ),
    (
        "def f(t, e):\n    if t:\n        raise e(1)\n    return t.format(1)",
        _computed("raises an exception it holds"),
    ),
    ("import math\ndef f(t):\n    return t.format(1)", _computed("imports a module")),
    ("from math import floor\ndef f(t):\n    return t.format(1)", _computed("imports a module")),
    (
        "import math\ndef f(t):\n    return t.format(lambda: 0)",  # the import is named first
        _computed("imports a module"),
    ),
    (
        "def f(t, d):\n    g = lambda: 0\n    return t.format_map(d)",
        _computed("has a lambda", "format_map"),
    ),
    (
        "def f(t, d):\n    return t.format_map(d) + t.format(len)",  # the first template
        _computed("uses function 'len' as a value", "format_map"),
    ),
    ("def f(t):\n    return str.format(t, len)", _computed("uses function 'len' as a value")),
    (
        "def f(t):\n    g = lambda: 0\n    return b'{}'.format(t)",  # a constant, not a str
        _computed("has a lambda"),
    ),
]


@pytest.mark.parametrize(("program", "reason"), COMPUTED)
def test_a_computed_template_only_in_a_program_of_plain_data(program, reason):
    assert _verdict(program) == (reason, None)


# ---------------------------------------------------------------- _template_attributes
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", []),
        ("{}", []),
        ("{0}", []),
        ("{0.real}", ["real"]),
        ("{x.a.b}", ["a", "b"]),
        ("{0[k].a}", ["a"]),  # a key is not an attribute
        ("{0[k]}", []),
        ("{0.a}{1.b}", ["a", "b"]),
        ("{0:>10}", []),
        ("{0:{1.a}}", ["a"]),  # a field nested in the spec
        ("{0:{1:{2.a}}}", ["a"]),  # two levels deep
        ("{0:{1:{2:{3.b}}}}", []),  # three: past the depth str.format reads
        ("{0.a:{1.b:{2.c:{3.d}}}}", ["a", "b", "c"]),
        ("{0.a}{", ["a"]),  # what parses before the error
        ("{", []),
        ("}", []),
        ("{0.}", []),
    ],
)
def test_template_attributes(text, expected):
    assert list(pc._template_attributes(text)) == expected


def test_template_attributes_at_a_nonzero_depth():
    assert list(pc._template_attributes("{0.a:{1.b:{2.c}}}", 1)) == ["a", "b"]
    assert list(pc._template_attributes("{0.a:{1.b:{2.c}}}", 2)) == ["a"]


# ---------------------------------------------------------------- _global_use
@pytest.mark.parametrize(
    ("program", "names", "expected"),
    [
        ("def f(a):\n    return open", {"open"}, "open"),
        ("def f(a):\n    return len(a), open", {"open"}, "open"),  # len is not asked for
        ("def f(a):\n    return len(a), open", {"open", "eval"}, "open"),
        ("def f(a):\n    return len(a)", {"open"}, None),
        ("def f(open):\n    return open", {"open"}, None),
        ("def f(a):\n    open = a\n    return open", {"open"}, None),
        ("def f(a):\n    global open\n    return open", {"open"}, "open"),
        ("x = open", {"open"}, "open"),
        ("open = 1", {"open"}, None),  # assigned, never read
        ("if False:\n    open = 1\nx = open", {"open"}, "open"),
        ("class C:\n    x = open", {"open"}, "open"),
        ("def f(open):\n    class C:\n        y = open\n    return C", {"open"}, None),
        ("def f(open):\n    def g():\n        return open\n    return g", {"open"}, None),
        ("def f(a):\n    def g():\n        return open\n    return g", {"open"}, "open"),
        ("nonlocal x", {"open", "eval"}, "eval"),  # symtable refuses it: the first, sorted
        ("nonlocal x", {"open"}, "open"),
        ("def f(a):\n    global a", {"b", "a"}, "a"),
    ],
)
def test_global_use(program, names, expected):
    assert pc._global_use(program, names) == expected


# ---------------------------------------------------------------- defines_f
@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("def f(x):\n    return x", True),
        ("async def f(x):\n    return x", True),
        ("x = 1\ndef f(x):\n    return x", True),  # not the first statement
        ("import os\ndef f():\n    pass", True),  # only the definition is asked about
        ("def g(x):\n    return x", False),
        ("def F(x):\n    return x", False),
        ("class f:\n    pass", False),
        ("f = lambda x: x", False),
        ("class C:\n    def f(self):\n        pass", False),
        ("def g():\n    def f():\n        pass", False),
        ("if True:\n    def f():\n        pass", False),
        ("def f(:", False),
        ("", False),
        ("f", False),
    ],
)
def test_defines_f(program, expected):
    assert defines_f(program) is expected
    assert defines_f(program, "f") is expected


@pytest.mark.parametrize(
    ("program", "name", "expected"),
    [
        ("def g(x):\n    return x", "g", True),
        ("async def g(x):\n    return x", "g", True),
        ("def f(x):\n    return x", "g", False),
        ("def g(x):\n    return x", "f", False),
        ("def main():\n    pass\ndef f():\n    pass", "main", True),
    ],
)
def test_defines_f_other_name(program, name, expected):
    assert defines_f(program, name) is expected


# ---------------------------------------------------------------- safe_input_expression
@pytest.mark.parametrize(
    "text",
    [
        "1",
        " 1, 2 ",
        "",  # f(): no argument
        "[1, 2], 'a'",
        "x=1",
        "1, x=2, **d",
        "**d",  # a keyword with no name
        "*xs",
        "dict(a=1)",
        "range(3)",
        "lambda x: x < 2",
        "[y for y in range(3)]",
        "{k: v for k, v in {1: 2}.items()}",
        "len([1]), abs(-2)",  # builtins; a name of the program is not called (below)
        "(1).real",
        "'a__b'",  # "__" but no dunder word
        "'____'",
        "b'__class__'",  # bytes are not checked as names
        "'{0.real}'",  # a template, not formatted
        "f'{x}'",
        "sorted(['b', 'a'], key=len)",
        # a name the input does not bind, on its way to f (a value f gets)
        "memo, g[:], [h], {1: k}, x=y",
        "(memo or 0), (1 if g else h), -g, g + 1",
        # names the input binds, scoped as Python scopes them
        "[a for a, (b, c) in [(1, (2, 3))]]",
        "[a for [a, *b] in [[1, 2]]]",
        "[[z for z in y] for y in [[1]]]",
        "lambda a, b=2: [a.real for c in [b]]",
        "[(lambda y: y)(1) for q in [1]]",
    ],
)
def test_safe_input_expression_accepts_an_argument_list_as_it_is(text):
    assert safe_input_expression(text) == text


@pytest.mark.parametrize(
    "text",
    [
        None,
        1,
        b"1",
        ["1"],
        "(",
        "1)(2",  # f(1)(2): the call is not of a name
        "1), (2",  # a tuple of two calls
        "1)[0",
        "1) or g(2",
        # names
        "_x",
        "__import__('os')",
        "eval('1')",
        "exec('1')",
        "open('x')",
        "globals()",
        "vars()",
        "getattr(x, 'y')",
        "print(1)",
        "input()",
        "type(x)",
        "object()",
        "super()",
        "property(g)",
        "classmethod(g)",
        "staticmethod(g)",
        "id(x)",
        "hash(x)",
        "dir(x)",
        "hasattr(x, 'y')",
        "[y for y in [open]]",
        "lambda: print",
        # attributes (of values the input makes: a name's are refused before, below)
        "(1)._y",
        "(1).__class__",
        "[0].gi_frame",
        "(y for y in [1]).gi_frame",
        "(1).f_back",
        # an attribute of a name the input does not bind; a lambda naming one
        "x.real",
        "{k: v for k, v in d.items()}",
        "m[0].append(1)",
        "(lambda: m)()",
        "[(lambda y: m)]",
        "g(1), h(x)",  # calls of the program's names: setcontext(Context(prec=3)) or 7
        # keywords
        "_x=1",
        "__x=1",
        "1, _k=2",
        # strings naming a dunder
        "'__class__'",
        "'a __builtins__ b'",
        "g['__builtins__']",
        "'__main__'",
        "f'{x}__class__'",
        # rebinding a name
        "(y := 1)",
        "[(sorted := lambda s: 0)]",
        # a name the input does not bind, handed to anything but f (red team, 2026-12-06):
        # the program's state changed before f runs, or its modules walked to exec
        "(lambda d: d.update({5: 'X'}))(memo) or 5",
        "(lambda m: m.enum.bltns.exec('1'))(re)",
        "[m.enum for m in [re]]",
        "list(map(lambda d: d.clear(), [memo]))",
        "sorted(x, key=len)",
        "next(it) and 5",
        "[memo][0].update({5: 'X'}) or 5",
        "(memo or 0).update({5: 1}) or 5",
        "(0, memo)[1].clear() or 5",
        "{0: memo}[0].clear() or 5",
        "[x for x in range(2) for y in memo]",
        "[x for x in range(2) if memo]",
        "{memo: 1 for x in [1]}",
        "{1: memo for x in [1]}",
        "lambda: memo",
        "lambda a=memo: a",
        "lambda *, a=memo: a",
        # a binding of the input's that shadows the name it hands on
        "[memo.clear() for memo in [memo]]",
        "(lambda memo: memo.clear())(memo)",
        # a comprehension that stores into something
        "[0 for memo[5] in ['X']] and 5",
        "{**{0: [0 for memo[5] in ['X']]}} and 5",
        "[0 for a.b in [1]]",
    ],
)
def test_safe_input_expression_refuses(text):
    assert safe_input_expression(text) is None


@pytest.mark.parametrize(
    ("text", "passed_on"),
    [
        # on its way to f: a value f gets
        ("memo", False),
        ("[memo], {1: g}, g[:], -g, (g or h), x=memo", False),
        ("len, range", False),  # builtins
        # under a call, an attribute, a lambda or a comprehension
        ("len(memo)", True),
        ("memo.x", True),
        ("lambda: memo", True),  # _reaches_shared_state refuses it too: here it is found alone
        ("lambda: [memo]", True),
        ("lambda a=memo: a", True),
        ("lambda *, a=memo: a", True),
        ("lambda a: a", False),
        ("lambda a, b=1: [a, b, len]", False),
        ("[memo for x in [1]]", True),
        ("[x for x in memo]", True),
        ("[x for x in [1] if memo]", True),
        ("[x for x in [1] for y in memo]", True),
        ("[y for x in [[1]] for y in x]", False),
        ("[x for x in [1] if x]", False),
        ("{x: y for x, y in [(1, 2)]}", False),
        ("{x: memo for x in [1]}", True),
        ("{memo: x for x in [1]}", True),
        ("[x for x in [x]]", True),  # the first iterable is outside: its x is not the target
        ("[x for (x, [y, *z]) in [(1, [2, 3])]]", False),
        ("[0 for m[0] in [1]]", True),
        ("[0 for m.a in [1]]", True),
    ],
)
def test_a_name_passed_on_to_anything_but_f(text, passed_on):
    import ast

    from sage_env.verifiers.program_checks import _passes_a_name_on

    assert _passes_a_name_on(ast.parse(f"f({text})", mode="eval").body) is passed_on


def test_safe_input_expression_length_bound_is_inclusive():
    at = "'" + "a" * (MAX_LITERAL_CHARS - 2) + "'"
    assert len(at) == MAX_LITERAL_CHARS
    assert safe_input_expression(at) == at
    over = "'" + "a" * (MAX_LITERAL_CHARS - 1) + "'"
    assert safe_input_expression(over) is None


# ---------------------------------------------------------------- holes found 2026-12-05
# Found while writing this file; each passed the checks then and ran in the real sandbox (the
# first returned os.getpid() there at both isolation levels). Closed 2026-12-06; the routes
# and the runner's own refusal at run time: test_frame_escapes.py.
TYPE_BY_UNPACKING = """def f(a):
    M = type(*('M', (type,), {'_' * 2 + 'instancecheck' + '_' * 2: lambda c, o: True}))
    C = M(*('C', (), {'_' * 2 + 'match_args' + '_' * 2: ('gi' + '_frame',)}))
    D = M(*('D', (), {'_' * 2 + 'match_args' + '_' * 2: ('f' + '_builtins',)}))
    match (x for x in [a]):
        case C(fr):
            match fr:
                case D(b):
                    return b['_' * 2 + 'import' + '_' * 2]('os').getpid()
"""
FRAME_WALK_INPUT = (
    "[next(L[0]) for L in [[]] if L.append(('{0[0].gi_frame.f_back.f_back.f_back"
    ".f_locals[secret]}'.format(L) for y in [0])) is None]"
)


def test_a_class_made_by_unpacked_type_arguments_is_refused():
    assert program_refusal(TYPE_BY_UNPACKING) == "calls type() with a class namespace"


def test_an_input_whose_format_template_walks_frames_is_refused():
    assert safe_input_expression(FRAME_WALK_INPUT) is None


# ---------------------------------------------------------------- frame routes
#: A generator's frame through a namedtuple field named at run time and an ABC the generator
#: type was registered with (runs as test_frame_escapes.ABC_FORGER without the checks).
ABC_ROUTE = """from collections import namedtuple
from collections.abc import Hashable

def f(a):
    N = namedtuple('N', ['gi' + '_frame'])
    class G(N, Hashable):
        pass
    box = []
    def walk():
        match box[0]:
            case G(fr):
                return 0
        yield a
    g = walk()
    G.register(type(g))
    box.append(g)
    return next(g)
"""


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        (TYPE_BY_UNPACKING, "calls type() with a class namespace"),
        (
            ABC_ROUTE,
            "matches G(...) by position: the attributes a class pattern reads by position are "
            "named at run time (write case C(name=...))",
        ),
        (
            "T = type\ndef f(a):\n    return T(a)\n",
            "uses builtin 'type' as a value, not as type(x)",
        ),
        (
            "class M(type):\n    pass\ndef f(a):\n    return a\n",
            "uses builtin 'type' as a value, not as type(x)",
        ),
        (
            "from dataclasses import dataclass\n@dataclass\nclass D:\n    gi_frame: int = 0\n"
            "def f(a):\n    return a\n",
            "class 'D' defines .gi_frame, an interpreter internal",
        ),
        (
            "def f(a):\n    int = list\n    match a:\n        case int(x):\n            return x\n",
            "matches int(...) by position: the attributes a class pattern reads by position are "
            "named at run time (write case C(name=...))",
        ),
        (
            "from collections import namedtuple\nP = namedtuple('P', 'x gi_frame')\n"
            "def f(a):\n    match a:\n        case P(x, g):\n            return x\n",
            "reads .gi_frame in a class pattern, an interpreter internal",
        ),
        (
            "from dataclasses import dataclass\ndataclass = len\n@dataclass\nclass P:\n"
            "    x: int\ndef f(a):\n    match a:\n        case P(x):\n            return x\n",
            "matches P(...) by position: the attributes a class pattern reads by position are "
            "named at run time (write case C(name=...))",
        ),
        (
            "from collections import namedtuple\nfrom collections.abc import Hashable\n"
            "N = namedtuple('N', 'x')\nclass G(N, Hashable):\n    pass\n"
            "def f(a):\n    match a:\n        case G(x):\n            return x\n",
            "matches G(...) by position: the attributes a class pattern reads by position are "
            "named at run time (write case C(name=...))",
        ),
    ],
    ids=["type-unpacked", "abc-namedtuple", "type-alias", "type-base", "dataclass-field",
         "rebound-int", "namedtuple-internal-field", "rebound-dataclass", "namedtuple-subclass"],
)  # fmt: skip
def test_static_checks_refuse_each_route(program, reason):
    assert program_refusal(program) == reason


@pytest.mark.parametrize(
    "program",
    [
        "def f(a):\n    match a:\n        case int(n):\n            return n\n    return 0\n",
        "def f(a):\n    match a:\n        case [str(s), *_]:\n            return s\n",
        "def f(a):\n    return isinstance(a, (int, type))\n",
        "def f(a, type):\n    return type\n",
        "def f(a):\n    return type(a)(0)\n",
        "from collections import namedtuple\nP = namedtuple('P', 'x y')\n"
        "def f(a):\n    match P(a, 1):\n        case P(x=x, y=y):\n            return x + y\n",
        "import collections\nP = collections.namedtuple('P', ['x', 'y'])\n"
        "def f(a):\n    match P(a, 1):\n        case P(x, y):\n            return x + y\n",
        "import dataclasses\n@dataclasses.dataclass(order=True)\nclass P:\n    x: int\n"
        "def f(a):\n    match P(a):\n        case P(x):\n            return x\n",
    ],
    ids=["self-match", "nested-self-match", "isinstance-type", "param-type", "type-of",
         "keyword-pattern", "namedtuple-literal-fields", "dataclass-fields"],
)  # fmt: skip
def test_static_checks_keep_plain_uses(program):
    assert program_refusal(program) is None


def test_a_program_that_is_not_text_is_left_to_the_parse_check():
    assert program_refusal(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "[next(L[0]) for L in [[]] if L.append(('{0[0].gi_frame.f_back.f_locals[secret]}'"
        ".format(L) for y in [0])) is None]",
        "'{}'.format(3)",
        "str.format('{0.real}', 1)",
        "'{x}'.format_map({'x': 1})",
    ],
)
def test_an_input_may_not_format_a_template(text):
    assert safe_input_expression(text) is None


_BY_POSITION = (
    "matches {}(...) by position: the attributes a class pattern reads by position are named "
    "at run time (write case C(name=...))"
)


def test_bound_names_counts_every_kind_of_binding():
    program = (
        "import a.b\nimport a\nfrom m import w as u\nfrom m import u\n"
        "def h(p):\n    global G\n    x = 1\n    x = 2\n"
        "def h(p):\n    pass\n"
        "match v:\n    case {'k': 1, **rest}:\n        pass\n    case {**rest}:\n        pass\n"
        "    case [c, *c]:\n        pass\n"
        "try:\n    pass\nexcept E as err:\n    pass\nexcept E as err:\n    pass\n"
    )
    counts = pc._bound_names(__import__("ast").parse(program))
    assert {k: counts[k] for k in ("a", "u", "h", "p", "G", "x", "rest", "c", "err")} == {
        "a": 2, "u": 2, "h": 2, "p": 2, "G": 2, "x": 2, "rest": 2, "c": 2, "err": 2,
    }  # fmt: skip
    assert counts["v"] == 0 and counts["E"] == 0 and counts["b"] == 0


def test_classes_with_fixed_fields_reads_dataclass_annotations_and_namedtuple_literals():
    import ast

    program = (
        "import dataclasses\nfrom collections import namedtuple\n"
        "@dataclasses.dataclass(frozen=True)\nclass D:\n    x: int\n    def m(self):\n"
        "        return 1\n    y: int = 0\n    z = 3\n"
        "P = namedtuple('P', 'a,b c')\nQ = namedtuple('Q', ['d', 'e'])\n"
        "R = namedtuple('R', fields)\n"
    )
    tree = ast.parse(program)
    imported = {"dataclasses": "dataclasses", "namedtuple": "collections.namedtuple"}
    fixed = pc._classes_with_fixed_fields(tree, pc._bound_names(tree), imported)
    assert fixed == {"D": ["x", "y"], "P": ["a", "b", "c"], "Q": ["d", "e"]}
    assert pc._classes_with_fixed_fields(tree, pc._bound_names(tree), {}) == {}


@pytest.mark.parametrize(
    ("decorator", "allowed"),
    [
        ("import dataclasses\n@dataclasses.dataclass", True),
        ("import functools\n@functools.total_ordering", False),  # another module's name
        ("import dataclasses\n@dataclasses.is_dataclass", False),  # another member
        ("import dataclasses\nimport dataclasses\n@dataclasses.dataclass", False),  # rebound
        ("from dataclasses import dataclass\n@dataclass", True),
        ("from dataclasses import dataclass as dataclass\ndataclass = 1\n@dataclass", False),
    ],
)
def test_a_class_pattern_trusts_only_a_dataclass_decorator_bound_once(decorator, allowed):
    program = (
        f"{decorator}\nclass P:\n    x: int\n"
        "def f(a):\n    match a:\n        case P(x):\n            return x\n"
    )
    assert program_refusal(program) == (None if allowed else _BY_POSITION.format("P"))


def test_every_class_pattern_is_judged_not_only_the_first():
    for first in ("int(n)", "P(n)"):
        program = (
            "from collections import namedtuple\nP = namedtuple('P', 'v')\n"
            "class G:\n    pass\n"
            f"def f(a):\n    match a:\n        case {first}:\n            return n\n"
            "        case G(x):\n            return x\n"
        )
        assert program_refusal(program) == _BY_POSITION.format("G")


def test_a_class_pattern_of_a_module_attribute_is_refused():
    program = (
        "import collections\ndef f(a):\n    match a:\n"
        "        case collections.Counter(x):\n            return x\n"
    )
    assert program_refusal(program) == _BY_POSITION.format("collections.Counter")


def test_a_class_body_assignment_of_an_internal_is_refused():
    program = "class C:\n    gi_frame = 0\n    x, f_back = 1, 2\ndef f(a):\n    return a\n"
    assert program_refusal(program) == "class 'C' defines .gi_frame, an interpreter internal"
    program = "class C:\n    x, f_back = 1, 2\ndef f(a):\n    return a\n"
    assert program_refusal(program) == "class 'C' defines .f_back, an interpreter internal"


@pytest.mark.parametrize(
    ("expr", "allowed"),
    [
        ("issubclass(a, type)", True),
        ("isinstance(a, (int, type))", True),
        ("max(a, type)", False),
        ("isinstance(type, a)", False),
        ("isinstance(a, type, 1)", False),
    ],
)
def test_type_is_a_classinfo_only_as_the_second_argument_of_isinstance(expr, allowed):
    refusal = program_refusal(f"def f(a):\n    return {expr}\n")
    assert refusal == (None if allowed else "uses builtin 'type' as a value, not as type(x)")


# ---------------------------------------------------------------- red team, 2026-12-06
# Each passed the checks the day the two holes above were closed, and ran in the sandbox:
# the first three reached __import__ (p7 rewrote the runner's results through
# sys._getframe), the fourth made the runner take an object for a plain int.
_REDTEAM = {
    # asdict reads a field named by a computed string: '__getattribute__' of a metaclass
    "make_dataclass-getattribute": (
        "from dataclasses import make_dataclass, asdict\nfrom typing import Type\n"
        "U = '_' * 2\nM = make_dataclass('M', [U + 'getattribute' + U], bases=(Type,))\n"
        "def f(a):\n    return a\n",
        "imports 'dataclasses.make_dataclass', which is not an allowed member of 'dataclasses'",
    ),
    "typing-Type-base": (
        "from typing import Type\nclass M(Type):\n    pass\ndef f(a):\n    return a\n",
        "imports 'typing.Type', which is not an allowed member of 'typing'",
    ),
    "EnumMeta-call": (
        "import enum\ndef f(a):\n    return enum.EnumMeta\n",
        "reads 'enum.EnumMeta', which is not an allowed member of 'enum'",
    ),
    "type-of-int-base": (
        "class M(type(int)):\n    def __eq__(self, other):\n        return True\n"
        "def f(a):\n    return a\n",
        "class 'M' takes type(x) as a base",
    ),
    "type-of-int-call": (
        "def f(a):\n    return type(int)('C', (), {})\n",
        "calls type(x)(...) with a class namespace",
    ),
    # a program's own dataclass / namedtuple, or another decorator on top of the real one
    "own-dataclass": (
        "def dataclass(c):\n    return c\n@dataclass\nclass C:\n    y: int\n"
        "def f(x):\n    match x:\n        case C(g):\n            return g\n",
        _BY_POSITION.format("C"),
    ),
    "stacked-decorator": (
        "from dataclasses import dataclass\n@(lambda c: c)\n@dataclass\nclass C:\n"
        "    y: int\ndef f(x):\n    match x:\n        case C(g):\n            return g\n",
        _BY_POSITION.format("C"),
    ),
    # round 2: a field renamed at run time and read back; super and type(x) as classes;
    # the enum functional API with computed names (then copy's __reduce_ex__ sets by name)
    "dataclass-fields": (
        "from dataclasses import dataclass, fields\n@dataclass\nclass S:\n    a: int\n"
        "def f(x):\n    fields(S)[0].name = 'b'\n    return x\n",
        "imports 'dataclasses.fields', which is not an allowed member of 'dataclasses'",
    ),
    "asdict": (
        "import dataclasses\ndef f(x):\n    return dataclasses.asdict(x)\n",
        "reads 'dataclasses.asdict', which is not an allowed member of 'dataclasses'",
    ),
    "super-base": (
        "class S(super):\n    pass\ndef f(x):\n    return x\n",
        "uses builtin 'super' as a value, not as super()",
    ),
    "type-of-int-kept": (
        "K = type(int)\ndef f(x):\n    return x\n",
        "keeps type(x) as a value (type(int) is type, a class factory)",
    ),
    "type-of-int-in-list": (
        "def f(x):\n    return [type(int)][0]\n",
        "keeps type(x) as a value (type(int) is type, a class factory)",
    ),
    "type-of-int-partial": (
        "import functools\ndef f(x):\n    return functools.partial(type(int), 'M')\n",
        "keeps type(x) as a value (type(int) is type, a class factory)",
    ),
    "type-of-int-annotation": (
        "class D:\n    a: type(int)\ndef f(x):\n    return x\n",
        "keeps type(x) as a value (type(int) is type, a class factory)",
    ),
    "enum-computed-names": (
        "from enum import Enum\nU = '_' * 2\nE = Enum('E', {U + 'getattr' + U: 1, 'A': 2})\n"
        "def f(x):\n    return x\n",
        "calls Enum(...) with member names it computes",
    ),
    "enum-subclass-computed-names": (
        "import enum\nclass B(enum.IntEnum):\n    pass\nclass C(B):\n    pass\n"
        "def f(x):\n    return C('E', {x: 1})\n",
        "calls C(...) with member names it computes",
    ),
    "enum-alias": (
        "from enum import Enum as E\nF = E\ndef f(x):\n    return x\n",
        "uses E other than as a base or a call",
    ),
    "lambda-decorator": (
        "@(lambda c: c)\nclass C:\n    y: int\n"
        "def f(x):\n    match x:\n        case C(g):\n            return g\n",
        _BY_POSITION.format("C"),
    ),
    "lambda-namedtuple": (
        "C = (lambda n, s: tuple)('C', 'y')\n"
        "def f(x):\n    match x:\n        case C(g):\n            return g\n",
        _BY_POSITION.format("C"),
    ),
    "type-of-type": (
        "def f(x):\n    return type(type(x)) == int\n",
        "keeps type(x) as a value (type(int) is type, a class factory)",
    ),
    "type-kept-after-a-compare": (
        "def f(x):\n    b = type(x) == int\n    K = [type(int)]\n    return b\n",
        "keeps type(x) as a value (type(int) is type, a class factory)",
    ),
    "enum-keyword-names": (
        "from enum import Enum\ndef f(x):\n    return Enum('E', names=x)\n",
        "calls Enum(...) with member names it computes",
    ),
    "own-namedtuple": (
        "def namedtuple(n, s):\n    return tuple\nC = namedtuple('C', 'y')\n"
        "def f(x):\n    match x:\n        case C(g):\n            return g\n",
        _BY_POSITION.format("C"),
    ),
}


@pytest.mark.parametrize("name", sorted(_REDTEAM))
def test_red_team_routes_of_2026_12_06_are_refused(name):
    program, reason = _REDTEAM[name]
    assert program_refusal(program) == reason


@pytest.mark.parametrize(
    "program",
    [
        "from dataclasses import dataclass as dc\n@dc\nclass C:\n    y: int\n"
        "def f(x):\n    match C(x):\n        case C(g):\n            return g\n",
        "from dataclasses import dataclass\n@dataclass(frozen=True)\nclass C:\n    y: int\n"
        "def f(x):\n    match C(x):\n        case C(g):\n            return g\n",
        "def f(x):\n    return type(x)(7)\n",
        "from typing import List\ndef f(x: List[int]):\n    return x\n",
        "def f(x):\n    return [type(x) == int, type(x) in (int,), type(x).__name__,"
        " {int: 2}[type(x)], isinstance(1, type(x))]\n",
        "from enum import Enum, IntEnum\nclass Color(Enum):\n    RED = 1\n"
        "class Level(IntEnum):\n    LOW = 1\nE = Enum('E', 'A B')\nF = Enum('F', [('X', 1)])\n"
        "def f(x):\n    return [Color(1).name, Level(1).value, E.A.value, F.X.value]\n",
        "class C:\n    def __init__(self):\n        super().__init__()\ndef f(x):\n    return x\n",
        "def f(x):\n    return str(type(x))\n",
        "from enum import Enum\nE = Enum('E', 'A B', start=3)\ndef f(x):\n    return E.A.value\n",
        "import enum\n@enum.unique\nclass C(enum.Enum):\n    A = 1\n"
        "def f(x):\n    return C.A.value\n",
        "from collections import namedtuple\nclass P(namedtuple('P', 'x y')):\n    pass\n"
        "def f(x):\n    return P(x, x).x\n",
    ],
)
def test_the_imported_dataclass_and_type_of_x_called_with_one_value_stay(program):
    assert program_refusal(program) is None


@pytest.mark.parametrize(
    ("text", "reaches"),
    [
        ("x.real", True),
        ("x[0].real", True),
        ("x(1).real", True),
        ("(1).real", False),
        ("(lambda x: x.real)", False),
        ("(lambda *a, **k: (a.count(1), k.keys()))", False),
        ("(lambda a, /, *, b: a.b)", False),
        ("[y.real for y in [1]]", False),
        ("(lambda x: len(x))", False),
        ("(lambda x: memo)", True),
        ("setcontext(1) or 7", True),
        ("len([1]) or (lambda g: g(1))(abs)", False),
    ],
)
def test_reaches_shared_state_follows_the_chain_to_an_unbound_name(text, reaches):
    import ast

    assert pc._reaches_shared_state(ast.parse(f"f({text})", mode="eval").body) is reaches
