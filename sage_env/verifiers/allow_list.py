"""The allow-list: what a model-written program may use (the judge's side; no code runs).

The purely computational standard-library modules of :data:`ALLOWED_MODULES` and, of each,
the public members of :data:`MODULE_MEMBERS` (less :data:`EXCLUDED_MEMBERS`); the builtins of
:data:`ALLOWED_BUILTINS`; the dunder names and attributes of :data:`ALLOWED_DUNDER_ATTRIBUTES`,
:data:`ALLOWED_DUNDER_METHODS` and :data:`ALLOWED_DUNDER_STORES`; no attribute of
:data:`INTERNAL_ATTRIBUTES`. AZR's banned modules (:data:`AZR_BANNED_MODULES`, named through
:data:`MODULE_ALIASES`) are refused even if a list allowed them. The checks that hold a
program to these sets are :mod:`sage_env.verifiers.program_checks`'s; the argument why the
list is pure, and how it was derived, is in ``docs/reference/protocols/azr.md`` ("The
allow-list").
"""

from __future__ import annotations

import builtins
import importlib
import types
from collections.abc import Sequence

AZR_BANNED_MODULES: tuple[str, ...] = (
    "logging",
    "random",
    "multiprocessing",
    "pebble",
    "subprocess",
    "threading",
    "datetime",
    "time",
    "hashlib",
    "hmac",
    "bcrypt",
    "os",
    "sys",
    "shutil",
    "calendar",
    "importlib",
)
"""AZR's banned modules: ``banned_words`` (``azr.data_selection_strategy.banned_words`` in
``absolute_zero_reasoner/configs/azr_ppo_trainer.yaml``) plus the paper's Sec. 3.3.3 list
(``os.sys``, ``sys``, ``shutil``), dotted entries matched by their top module. None is on
:data:`ALLOWED_MODULES`; a ``banned`` list refuses its modules even if they were, and a
refusal that reaches one (``tempfile._os``, ``import _random``) names it."""

MODULE_ALIASES: dict[str, str] = {
    "posix": "os",
    "nt": "os",
    "_posixsubprocess": "subprocess",
    "_thread": "threading",
    "_strptime": "time",
}
"""Modules that are another module under a different name (``posix`` holds ``os.system``),
used to name a refusal. Any other name is also matched with its leading underscores
stripped (``_datetime``, ``_random``, ``_os`` as ``tempfile`` imports it)."""

ALLOWED_MODULES: tuple[str, ...] = (
    "__future__",
    "bisect",
    "cmath",
    "collections",
    "collections.abc",
    "copy",
    "dataclasses",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "math",
    "numbers",
    "operator",
    "re",
    "statistics",
    "string",
    "typing",
)
"""The modules a program may import: each computes on values it is given and reads no file,
clock, entropy, process or host state (``docs/reference/protocols/azr.md``, "The allow-list"). A
program reads only their members of :data:`MODULE_MEMBERS`."""

EXCLUDED_MEMBERS: dict[str, frozenset[str]] = {
    # singledispatch*: eval string annotations (typing.get_type_hints); update_wrapper,
    # wraps: read and write the attributes they are given by name (assigned=('gi_frame',));
    # RLock: a thread lock; get_cache_token: a count of ABC registrations in the process
    "functools": frozenset(
        {"singledispatch", "singledispatchmethod", "update_wrapper", "wraps"}
        | {"RLock", "get_cache_token"}
    ),
    # get_type_hints, ForwardRef: eval string annotations; io, re: module-like namespaces
    "typing": frozenset({"get_type_hints", "ForwardRef", "io", "re"}),
    "enum": frozenset({"global_enum"}),  # writes into the module its class names by string
    "operator": frozenset({"attrgetter", "methodcaller"}),  # read attributes named by strings
    "string": frozenset({"Formatter"}),  # get_field reads attribute paths named by strings
    "statistics": frozenset({"NormalDist"}),  # NormalDist.samples draws from OS entropy
    "copy": frozenset({"dispatch_table"}),  # copyreg's process-wide reducer table
    # FunctionType builds a function from a code object; make_dataclass names fields and
    # a namespace by computed strings (a field '__getattribute__' read back by asdict);
    # asdict, astuple, replace and fields read or hand out the attributes a class's fields
    # name, and a field's name can be set at run time (fields(C)[0].name = ...)
    "dataclasses": frozenset(
        {"FunctionType", "make_dataclass", "asdict", "astuple", "replace", "fields"}
    ),
    # limits of the build (32- or 64-bit, threads): host facts, not computations
    "decimal": frozenset(
        {"HAVE_CONTEXTVAR", "HAVE_THREADS", "MAX_EMAX", "MAX_PREC", "MIN_EMIN", "MIN_ETINY"}
    ),
}
"""Public members of allowed modules that a program may not read, each with its reason."""


def is_metaclass(value: object) -> bool:
    """Whether ``value`` is a class of classes (``EnumMeta``, ``ABCMeta``) or an alias of one
    (``typing.Type``, whose origin is ``type``): called, or as a base, it makes classes whose
    namespace, special methods included, can come from computed strings."""
    origin = getattr(value, "__origin__", None) if not isinstance(value, type) else value
    return isinstance(origin, type) and issubclass(origin, type)


def _members(name: str) -> frozenset[str]:
    mod = importlib.import_module(name)
    public = (n for n in dir(mod) if not n.startswith("_"))
    keep = {
        n
        for n in public
        if not isinstance(getattr(mod, n), types.ModuleType) and not is_metaclass(getattr(mod, n))
    }
    return frozenset(keep - EXCLUDED_MEMBERS.get(name, frozenset()))


MODULE_MEMBERS: dict[str, frozenset[str]] = {m: _members(m) for m in ALLOWED_MODULES}
"""What a program may read of each allowed module (``re.sub``, ``from math import pi``):
its public names that are not themselves modules (``statistics.random``, ``re.enum``,
``fractions.sys`` are modules an allowed module imported) nor metaclasses
(:func:`is_metaclass`: ``enum.EnumMeta``, ``typing.ABCMeta``, ``typing.Type``), less
:data:`EXCLUDED_MEMBERS`.
Computed from the judge's interpreter, whose version the sandbox's must match."""


def _star_ok(name: str) -> bool:
    mod = importlib.import_module(name)
    exported = getattr(mod, "__all__", None)
    if exported is None:
        exported = [n for n in dir(mod) if not n.startswith("_")]
    return set(exported) <= MODULE_MEMBERS[name]


STAR_IMPORT_MODULES: frozenset[str] = frozenset(m for m in ALLOWED_MODULES if _star_ok(m))
"""Modules whose ``import *`` brings only allowed members (``math``, ``heapq``, ...)."""

ALLOWED_BUILTINS: frozenset[str] = frozenset(
    {
        "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
        "classmethod", "complex", "dict", "divmod", "enumerate", "filter", "float", "format",
        "frozenset", "hex", "int", "isinstance", "issubclass", "iter", "len", "list", "map",
        "max", "min", "next", "object", "oct", "ord", "pow", "print", "property", "range",
        "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod", "str", "sum",
        "super", "tuple", "type", "zip", "Ellipsis", "NotImplemented", "None", "True", "False",
        "__name__",
    }
    | {
        n
        for n, v in vars(builtins).items()
        if isinstance(v, type) and issubclass(v, BaseException)
    }
)  # fmt: skip
"""Builtins a program may name: the value types and the functions of values, and every
exception class. Not: ``open``, ``input`` (I/O); ``eval``, ``exec``, ``compile``,
``__import__``, ``__build_class__`` (code by name); ``globals``, ``locals``, ``vars``,
``dir``, ``getattr``, ``setattr``, ``delattr``, ``hasattr`` (namespaces, attributes by
name); ``id``, ``hash`` (addresses, hash seed); ``help``, ``license``, ``copyright``,
``credits``, ``exit``, ``quit``, ``breakpoint`` (the site's helpers: files, the process);
``memoryview``, ``aiter``, ``anext``. ``print`` is allowed: the runner sends the program's
stdout to a buffer it throws away. A refused name the program binds itself (``def
f(input):``) is the program's own variable and allowed."""

REFUSED_BUILTINS: frozenset[str] = frozenset(dir(builtins)) - ALLOWED_BUILTINS
"""Every other name of :mod:`builtins` (computed, so a builtin added later is refused)."""

BUILTIN_FUNCTIONS: frozenset[str] = frozenset(
    n for n in ALLOWED_BUILTINS if isinstance(getattr(builtins, n, None), types.BuiltinFunctionType)
)
"""The allowed builtins that are functions: as values they lead on (``len.__self__`` is the
builtins module)."""

ALLOWED_DUNDER_ATTRIBUTES: frozenset[str] = frozenset({"__init__", "__name__"})
"""The only ``__dunder__`` attributes a program may read (``super().__init__()``,
``type(x).__name__``): neither leads anywhere but a method of the program's own class or a
name. Every other (``__class__``, ``__globals__``, ``__dict__``, ``__subclasses__``,
``__self__``, ``__traceback__``, ``__doc__`` ...) is refused: they are the paths from a
value to the interpreter, and ``__doc__`` texts change with the interpreter's version."""

ALLOWED_DUNDER_METHODS: frozenset[str] = frozenset(
    {
        "__init__", "__repr__", "__str__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
        "__ge__", "__hash__", "__len__", "__bool__", "__iter__", "__next__", "__contains__",
        "__getitem__", "__setitem__", "__delitem__", "__call__", "__add__", "__radd__",
        "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__floordiv__", "__mod__",
        "__pow__", "__neg__", "__pos__", "__abs__", "__and__", "__or__", "__xor__",
        "__invert__", "__lshift__", "__rshift__", "__iadd__", "__isub__", "__imul__",
        "__index__", "__int__", "__float__", "__enter__", "__exit__",
    }
)  # fmt: skip
"""Special methods a program's class may define: those of ordinary values (comparison,
arithmetic, containers). The ones that change how the interpreter finds attributes or
classes (``__getattr__``, ``__instancecheck__``, ``__subclasshook__``, ``__init_subclass__``,
``__set_name__``, ``__class_getitem__``, ``__new__``, ``__prepare__`` ...) are refused: with
them ``isinstance`` matches any object and a class pattern reads what it likes."""

ALLOWED_DUNDER_STORES: frozenset[str] = frozenset({"__slots__", "__hash__"})
"""Dunder names a class body may assign (``__hash__ = None``). ``__match_args__`` is not one:
a class pattern ``case C(x)`` reads the attributes it names."""

NAMEDTUPLE_ATTRIBUTES: frozenset[str] = frozenset(
    {"_asdict", "_fields", "_field_defaults", "_make", "_replace"}
)
"""Underscore attributes that are public API (:func:`collections.namedtuple`); every other
``_private`` attribute is refused, the program's own included (``self._seen``): private
names of the allowed modules and classes (``collections._sys``, ``Enum._convert_``, which
reads a module named by a string) could not be told from the program's own."""

INTERNAL_ATTRIBUTES: frozenset[str] = frozenset(
    n
    for t in (
        types.FrameType, types.CodeType, types.TracebackType, types.GeneratorType,
        types.CoroutineType, types.AsyncGeneratorType, types.CellType,
    )
    for n in dir(t)
    if not n.startswith("_")
) - {"clear", "replace", "send", "throw", "close", "asend", "athrow", "aclose"}  # fmt: skip
"""Public attributes of frames, code objects, tracebacks, generators, coroutines and cells
(``gi_frame``, ``f_back``, ``f_globals``, ``tb_frame``, ``co_consts``, ``cell_contents``
...): a generator's frame leads to the runner's frame and its globals. Refused in code and in
templates; the names these types share with plain values (``clear``, ``replace``, ``send``
...) are not in the set."""


ENUM_CLASSES: frozenset[str] = frozenset(
    n
    for n in MODULE_MEMBERS["enum"]
    if isinstance(getattr(importlib.import_module("enum"), n), type)
    and issubclass(
        getattr(importlib.import_module("enum"), n), importlib.import_module("enum").Enum
    )
)
"""The enum classes of :mod:`enum` (``Enum``, ``IntEnum``, ``Flag`` ...): their functional API
(``Enum('E', names)``) makes a class whose names may be computed (the checks ask for literals)."""


def module_name(part: str) -> str:
    """The module one part of a dotted name names, to name a refusal.

    Its :data:`MODULE_ALIASES` entry, else ``part`` without leading ``_`` (``_random``).
    """
    return MODULE_ALIASES.get(part, part.lstrip("_") or part)


def allowed_modules(banned: Sequence[str] = ()) -> tuple[str, ...]:
    """The top-level modules of :data:`ALLOWED_MODULES` not in ``banned``, for a prompt."""
    return tuple(
        m for m in ALLOWED_MODULES if "." not in m and m != "__future__" and m not in banned
    )
