"""Static checks of a model-written program's source, on the judge's side (no code runs).

Owns AZR's banned-module list (:data:`AZR_BANNED_MODULES`) and :func:`forbidden_import`, the
escape-hatch lists and :func:`escape_hatch`, :func:`defines_f`, the literal size limit
:data:`MAX_LITERAL_CHARS` and :func:`safe_input_expression`. Parsed with :mod:`ast` only;
:mod:`sage_env.verifiers.execution` runs the programs and re-exports these names.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

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
"""Modules a proposed program may not import.

AZR's ``banned_words`` (``azr.data_selection_strategy.banned_words`` in
``absolute_zero_reasoner/configs/azr_ppo_trainer.yaml``) plus the paper's Sec. 3.3.3 list
(``os.sys``, ``sys``, ``shutil``); AZR's dotted entries (``os.sys``, ``os.path``,
``sys.exit``, ``os.environ``) are matched here by their top module (``os``, ``sys``), as a
module check sees them, and ``importlib`` is added so ``import_module`` cannot bypass the
list. A call of ``__import__`` is refused too."""

MODULE_ALIASES: dict[str, str] = {
    "posix": "os",
    "nt": "os",
    "_posixsubprocess": "subprocess",
    "_thread": "threading",
    "_strptime": "time",
}
"""Modules that are another module under a different name (``posix`` holds ``os.system``).
Any other name is also matched with its leading underscores stripped (``_datetime``,
``_random``, ``_os`` as ``tempfile`` imports it)."""

NONDETERMINISTIC_MODULES = frozenset(
    {
        "secrets", "uuid", "email", "http", "gzip", "tarfile", "zipfile", "timeit", "sched",
        "mailbox", "ssl", "asyncio", "concurrent", "pipes", "webbrowser", "pkgutil", "pydoc",
        "imp", "zipimport", "modulefinder", "sysconfig", "site",
    }
)  # fmt: skip
"""Modules refused besides the ``banned`` ones, whatever the list: they read OS entropy or
the wall clock (``secrets``, ``uuid``; ``email.utils.formatdate``, ``gzip``'s header time),
start processes or threads (``asyncio``, ``concurrent``, ``pipes``, ``webbrowser``) or load
a module by name (``pkgutil.resolve_name``, ``pydoc.locate``). A two-run determinism check
catches a clock only when its two runs straddle a tick, and OS entropy only when the two
draws differ; these are refused before anything runs."""

MAX_LITERAL_CHARS = 2_000
"""Inputs and outputs (as ``repr``) longer than this are refused (the prompt must stay short)."""


ESCAPE_NAMES = frozenset(
    {
        "eval", "exec", "compile", "open", "globals", "locals", "vars", "getattr", "setattr",
        "delattr", "breakpoint", "__import__", "__builtins__", "__loader__", "__spec__",
    }
)  # fmt: skip
"""Names a program may not use: they reach code or objects outside its own values."""
ESCAPE_ATTRIBUTES = frozenset(
    {
        "__class__", "__base__", "__bases__", "__mro__", "__subclasses__", "__globals__",
        "__builtins__", "__code__", "__dict__", "__closure__", "__func__", "__self__",
        "__module__", "__loader__", "__spec__", "__reduce__", "__reduce_ex__",
        "f_globals", "f_locals", "f_back", "f_builtins", "gi_frame", "cr_frame", "ag_frame",
        "tb_frame", "co_consts", "__getattribute__",
    }
)  # fmt: skip
"""Attributes a program may not read: the ways from a value to the interpreter's internals."""
ESCAPE_MODULES = frozenset(
    {
        "builtins", "__main__", "ctypes", "gc", "inspect", "io", "_io", "posix", "pty",
        "signal", "socket", "fcntl", "mmap", "resource", "pickle", "marshal", "types",
        "code", "codeop", "runpy", "pathlib", "tempfile", "atexit", "faulthandler",
    }
)  # fmt: skip
"""Modules a program may not import besides the banned ones: they reach the process's
files, memory or interpreter."""
ESCAPE_GETTERS = frozenset({"attrgetter", "methodcaller", "get_field", "Formatter"})
"""Callables that read an attribute named by a string (``operator.attrgetter('f_back')``,
``string.Formatter().get_field``): a name or attribute of these is refused like ``getattr``."""


def _escape_text(text: str) -> str | None:
    # an attribute named in a string (a getter's argument, a format string '{0.__globals__}')
    for name in ESCAPE_ATTRIBUTES | {n for n in ESCAPE_NAMES if n.startswith("__")}:
        if name in text:
            return name
    return None


def escape_hatch(program: str) -> str | None:
    """The first construct by which ``program`` could reach its judge, else ``None``.

    The sandboxed process reports its outputs on its own stdout, so a program that could
    reach the process's I/O or the harness could forge a verdict. The judge refuses
    programs that import :data:`ESCAPE_MODULES`, use a name of :data:`ESCAPE_NAMES` or read
    an attribute of :data:`ESCAPE_ATTRIBUTES`, also by name: through a getter of
    :data:`ESCAPE_GETTERS` or a string that names such an attribute (a defence in depth
    beside the sandbox, which is what makes a forgery worthless: the result line holds only
    values the program could have returned; a program that does not parse returns ``None``).
    """
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and (node.id in ESCAPE_NAMES or node.id in ESCAPE_GETTERS):
            return f"uses {node.id!r}"
        if isinstance(node, ast.Attribute) and node.attr in ESCAPE_ATTRIBUTES | ESCAPE_GETTERS:
            return f"reads .{node.attr}"
        if isinstance(node, ast.alias) and node.name in ESCAPE_NAMES | ESCAPE_GETTERS:
            return f"imports {node.name!r}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = _escape_text(node.value)
            if hit:
                return f"names {hit!r} in a string"
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        for name in names:
            if name.split(".")[0] in ESCAPE_MODULES:
                return f"imports {name!r}"
    return None


def _module_name(part: str) -> str:
    """The module ``part`` names: :data:`MODULE_ALIASES`, else ``part`` without leading ``_``."""
    return MODULE_ALIASES.get(part, part.lstrip("_") or part)


def forbidden_import(program: str, banned: Sequence[str] = AZR_BANNED_MODULES) -> str | None:
    """The first forbidden module ``program`` reaches (or ``"__import__"``), else ``None``.

    AZR's check (``contains_banned_imports``): every ``import a.b`` / ``from a.b import c``
    whose dotted name has a component in ``banned``; here also in
    :data:`NONDETERMINISTIC_MODULES`, each name read through :data:`MODULE_ALIASES` and
    without its leading underscores (``import posix``, ``import _datetime``), and an
    attribute named as a banned module (``posixpath.os.system``, ``tempfile._os``,
    ``collections._sys``: many modules hold ``os`` or ``sys`` as an attribute, so an import
    check alone is bypassed through them). A program that does not parse returns ``None``
    (the parse check reports it).
    """
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    banned_set = set(banned)
    refused = banned_set | NONDETERMINISTIC_MODULES
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [a.name for a in node.names]
        elif isinstance(node, ast.Name) and node.id == "__import__":
            return "__import__"
        elif isinstance(node, ast.Attribute) and _module_name(node.attr) in banned_set:
            return _module_name(node.attr)
        for name in names:
            for part in name.split("."):
                if part in refused:
                    return part
                if _module_name(part) in refused:
                    return _module_name(part)
    return None


def defines_f(program: str, name: str = "f") -> bool:
    """Whether ``program`` parses and defines function ``name`` at top level."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body
    )


_UNSAFE_NAMES = frozenset(
    {
        "eval", "exec", "compile", "open", "globals", "locals", "vars", "getattr", "setattr",
        "delattr", "print", "input", "breakpoint", "exit", "quit", "help", "memoryview",
        "classmethod", "staticmethod", "property", "super", "type", "object",
    }
)  # fmt: skip


def safe_input_expression(text: Any) -> str | None:
    """A model-written argument list that may be *evaluated* in the sandbox, or ``None``.

    CRUXEval's rule is ``f(<input>) == <output>`` with the input as Python source (its gold
    inputs include ``dict(a=1)``, ``range(3)``, ``lambda x: x < 2``, names the program
    defines). The judge first refuses text that could reach the process's I/O or the
    harness: any name or attribute starting with ``_``, any import, and the builtins in
    ``_UNSAFE_NAMES`` (``eval``, ``exec``, ``open``, ``globals``, ``getattr``, ``print`` ...).
    The text must parse as the arguments of one call ``f(...)``.
    """
    if not isinstance(text, str) or len(text) > MAX_LITERAL_CHARS:
        return None
    try:
        tree = ast.parse(f"f({text})", mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not (isinstance(tree.body, ast.Call) and isinstance(tree.body.func, ast.Name)):
        return None
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Name) and (node.id.startswith("_") or node.id in _UNSAFE_NAMES):
            return None
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return None
        if isinstance(node, ast.keyword) and node.arg and node.arg.startswith("_"):
            return None
        if isinstance(node, ast.NamedExpr):
            # ``(sorted := lambda s: OUT)`` would rebind a global or builtin that ``f``
            # calls (the input is evaluated in the program's namespace): ``f`` would then
            # return anything without the input being right
            return None
    return text
