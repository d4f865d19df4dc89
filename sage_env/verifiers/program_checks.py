"""Static checks of a model-written program's source, on the judge's side (no code runs).

A program may use only the allow-list of :mod:`sage_env.verifiers.allow_list` (purely
computational standard-library modules and their public members, a set of builtins, and
attributes that lead to no interpreter internal). :func:`program_refusal` gives the first
reason a program breaks the list; :func:`escape_hatch` and :func:`forbidden_import` are views
of it. Also :func:`defines_f`, the literal size limit :data:`MAX_LITERAL_CHARS` and
:func:`safe_input_expression`. Parsed with :mod:`ast` (and :mod:`symtable` when a refused
builtin's name occurs, to see whether the program bound it);
:mod:`sage_env.verifiers.executor` runs the programs (import these names from here).
"""

from __future__ import annotations

import _string  # the parser of str.format templates (what string.Formatter uses)
import ast
import re
import symtable
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sage_env.verifiers.allow_list import (
    ALLOWED_BUILTINS,
    ALLOWED_DUNDER_ATTRIBUTES,
    ALLOWED_DUNDER_METHODS,
    ALLOWED_DUNDER_STORES,
    AZR_BANNED_MODULES,
    BUILTIN_FUNCTIONS,
    ENUM_CLASSES,
    INTERNAL_ATTRIBUTES,
    MODULE_MEMBERS,
    NAMEDTUPLE_ATTRIBUTES,
    REFUSED_BUILTINS,
    STAR_IMPORT_MODULES,
    module_name,
)

MAX_LITERAL_CHARS = 2_000
"""Inputs and outputs (as ``repr``) longer than this are refused (the prompt must stay short)."""

_PARSE_ERRORS = (SyntaxError, ValueError, MemoryError, RecursionError)
_STRING_DUNDERS = ALLOWED_DUNDER_ATTRIBUTES | {"__main__"}
_WORD = re.compile(r"\w+")
_TEMPLATE_METHODS = frozenset({"format", "format_map"})
_SELF_MATCHING = frozenset(
    {"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str",
     "tuple"}
)  # fmt: skip
"""Builtin classes whose one positional sub-pattern (``case int(n)``) is the subject itself."""


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and bool(name.strip("_"))


@dataclass(frozen=True)
class _Refusal:
    reason: str
    module: str | None = None  # the module the refusal reaches, when it is about a module


class _Judge:
    """One pass over a parsed program; :meth:`refusal` gives the verdict."""

    def __init__(self, tree: ast.AST, program: str, banned: frozenset[str]) -> None:
        self.tree, self.program, self.banned = tree, program, banned
        self.first: _Refusal | None = None
        self.last_resort: _Refusal | None = None  # reported only when nothing else is
        self.named: _Refusal | None = None  # the first refusal that reaches a banned module
        self.modules: dict[str, str] = {}  # name bound by an import -> module
        self.members: dict[str, str] = {}  # name bound by a from-import -> module.member
        self.bases: set[int] = set()  # ids of the .value of attribute reads
        self.callees: set[int] = set()  # ids of the .func of calls
        self.calls: list[ast.Call] = []
        self.names: list[ast.Name] = []
        self.attributes: list[ast.Attribute] = []
        self.functions: set[str] = set()  # names of the program's defs
        self.template_from_value: ast.Attribute | None = None  # x.format(...), x not literal
        self.positional_patterns: list[ast.MatchClass] = []  # case C(p): reads __match_args__
        self.carriers: list[str] = []  # values a computed template could walk from
        self.imports = False  # any import but __future__'s

    # -- recording -----------------------------------------------------------------------
    def refuse(self, reason: str, module: str | None = None) -> None:
        """Record a refusal; ``module``: the (dotted) module it reaches, named when banned."""
        hit = None
        if module is not None:
            parts = (module_name(p) for p in module.split("."))
            hit = next((p for p in parts if p in self.banned), None)
            if hit is not None and repr(hit) not in reason:
                reason += f" (module {hit!r})"
        refusal = _Refusal(reason, hit or module)
        if self.first is None:
            self.first = refusal
        if hit is not None and self.named is None:
            self.named = refusal

    def check_module(self, name: str) -> bool:
        """Refuse ``import name`` unless it and its packages are allowed; True if allowed."""
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if module_name(parts[i - 1]) in self.banned:
                self.refuse(f"imports {prefix!r}, a banned module", prefix)
                return False
            if prefix not in MODULE_MEMBERS:
                self.refuse(f"imports {prefix!r}, which is not on the allow-list", prefix)
                return False
        return True

    # -- the walk ------------------------------------------------------------------------
    def walk(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name):
                self.visit_name(node)
            elif isinstance(node, ast.Attribute):
                self.visit_attribute(node)
            elif isinstance(node, ast.Call):
                self.callees.add(id(node.func))
                self.calls.append(node)
                if (
                    isinstance(node.func, ast.Name)
                    and node.func.id == "type"
                    and not _one_plain_argument(node)
                ):  # type(name, bases, namespace) makes a class from computed names,
                    # type(*args) too
                    self.refuse("calls type() with a class namespace")
                elif _is_type_of(node.func) and not _one_plain_argument(node):
                    # type(int)('C', (), {...}): the class of a class is a metaclass
                    self.refuse("calls type(x)(...) with a class namespace")
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, str):
                    self.visit_string(node.value)
            elif isinstance(node, ast.Import):
                self.visit_import(node)
            elif isinstance(node, ast.ImportFrom):
                self.visit_import_from(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.add(node.name)
                if _is_dunder(node.name) and node.name not in ALLOWED_DUNDER_METHODS:
                    self.refuse(f"defines special method {node.name!r}")
                if isinstance(node, ast.AsyncFunctionDef):
                    self.carriers.append("defines a coroutine")
            elif isinstance(node, ast.ClassDef):
                self.carriers.append(f"defines class {node.name!r}")
                if any(k.arg != "slots" for k in node.keywords):
                    self.refuse(f"class {node.name!r} takes a metaclass or class keyword")
                if any(_is_type_of(b) for b in node.bases):  # class M(type(int)): a metaclass
                    self.refuse(f"class {node.name!r} takes type(x) as a base")
                for name in _class_body_names(node):  # attributes of the class, by name
                    if name in INTERNAL_ATTRIBUTES:  # a dataclass field is a match argument;
                        # a runtime-checkable protocol's member, what isinstance asks for
                        self.refuse(f"class {node.name!r} defines .{name}, an interpreter internal")
            elif isinstance(node, ast.MatchClass):
                if node.patterns:
                    self.positional_patterns.append(node)
                for attr in node.kwd_attrs:  # case C(attr=...) reads x.attr
                    self.check_attribute_name(attr, " in a class pattern")
                    if attr in _TEMPLATE_METHODS:  # case str(format=fm): a template method
                        self.refuse(f"reads .{attr} in a class pattern")
            elif isinstance(node, ast.Lambda):
                self.carriers.append("has a lambda")
            elif isinstance(node, (ast.GeneratorExp, ast.Yield, ast.YieldFrom, ast.Await)):
                self.carriers.append("makes a generator")
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.carriers.append(f"binds an exception ('as {node.name}')")
            elif isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if not (isinstance(exc, ast.Name) and exc.id in ALLOWED_BUILTINS):
                    self.carriers.append("raises an exception it holds")

    def visit_name(self, node: ast.Name) -> None:
        # reading a dunder name (``__builtins__``, ``__loader__``, ``__import__``) is refused;
        # a class body may set its own (``__slots__ = ...``, ``__hash__ = None``)
        if (
            _is_dunder(node.id)
            and node.id not in ALLOWED_BUILTINS
            and (not isinstance(node.ctx, ast.Store) or node.id not in ALLOWED_DUNDER_STORES)
        ):
            self.refuse(f"uses {node.id!r}", "__import__" if node.id == "__import__" else None)
        self.names.append(node)

    def visit_attribute(self, node: ast.Attribute) -> None:
        self.bases.add(id(node.value))
        self.attributes.append(node)
        if node.attr in _TEMPLATE_METHODS and not (
            isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        ):
            self.template_from_value = self.template_from_value or node

    def check_attribute_name(self, attr: str, where: str = "") -> None:
        """Refuse a dunder, private or interpreter-internal attribute name."""
        if attr in INTERNAL_ATTRIBUTES:
            self.refuse(f"reads .{attr}{where}, an interpreter internal")
        elif attr.startswith("_") and not (
            attr in ALLOWED_DUNDER_ATTRIBUTES or attr in NAMEDTUPLE_ATTRIBUTES
        ):
            self.refuse(
                f"reads .{attr}{where}, a {'dunder' if _is_dunder(attr) else 'private'} attribute"
            )

    def visit_string(self, text: str) -> None:
        if "_" in text and self.last_resort is None:
            for word in _WORD.findall(text):
                if word in INTERNAL_ATTRIBUTES:  # a name computed from it could be read
                    why = f"names {word!r} in a string, an interpreter internal"
                    self.last_resort = _Refusal(why, None)
                    break
        if "__" in text:
            for word in _WORD.findall(text):
                if _is_dunder(word) and word not in _STRING_DUNDERS:
                    self.refuse(f"names {word!r} in a string")
                    return
        if "{" in text:
            for attr in _template_attributes(text):
                self.check_attribute_name(attr, " in a format template")

    def visit_import(self, node: ast.Import) -> None:
        self.imports = True
        for alias in node.names:
            self.check_module(alias.name)
            top = alias.name.split(".")[0]
            self.modules[alias.asname or top] = alias.name if alias.asname else top

    def visit_import_from(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.refuse("has a relative import")
            return
        mod = node.module or ""
        self.imports = self.imports or mod != "__future__"
        allowed = self.check_module(mod)
        for alias in node.names:
            sub = f"{mod}.{alias.name}"
            if alias.name == "*":
                if allowed and mod not in STAR_IMPORT_MODULES:
                    self.refuse(f"imports * from {mod!r}, more than its allowed members", mod)
            elif sub in MODULE_MEMBERS:
                self.modules[alias.asname or alias.name] = sub
            elif module_name(alias.name) in self.banned or (
                allowed and alias.name not in MODULE_MEMBERS[mod]
            ):
                self.refuse(f"imports {sub!r}, which is not an allowed member of {mod!r}", sub)
            else:
                self.members[alias.asname or alias.name] = sub

    # -- after the walk ------------------------------------------------------------------
    def module_of(self, node: ast.expr) -> str | None:
        """The module an expression names (``re``, ``collections.abc``), else ``None``."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.module_of(node.value)
            if base is not None and f"{base}.{node.attr}" in MODULE_MEMBERS:
                return f"{base}.{node.attr}"
        return None

    def finish(self) -> None:
        for node in self.attributes:
            base = self.module_of(node.value)
            if base is not None:
                self.check_module_read(node, base)
            else:
                self.check_attribute_name(node.attr)
        builtin_names = set()
        for node in self.names:
            if isinstance(node.ctx, ast.Load) and node.id in self.modules:
                if id(node) not in self.bases:
                    self.refuse(f"uses module {self.modules[node.id]!r} as a value")
            elif isinstance(node.ctx, ast.Load) and node.id in REFUSED_BUILTINS:
                builtin_names.add(node.id)
        if builtin_names:
            hit = _global_use(self.program, builtin_names)
            if hit:
                self.refuse(f"uses builtin {hit!r}, which is not on the allow-list")
        if self.template_from_value is not None:
            self.check_data_only()
        self.check_class_patterns()
        classinfo = {  # isinstance(x, type): a test of x, not a use of type
            id(e)
            for c in self.calls
            if isinstance(c.func, ast.Name) and c.func.id in ("isinstance", "issubclass")
            and len(c.args) == 2
            for e in (c.args[1].elts if isinstance(c.args[1], ast.Tuple) else [c.args[1]])
        }  # fmt: skip
        if any(
            n.id == "type"
            and isinstance(n.ctx, ast.Load)
            and id(n) not in self.callees
            and id(n) not in classinfo
            for n in self.names
        ) and _global_use(self.program, {"type"}):
            # an alias (T = type), a base (class M(type)): a class of classes makes
            # metaclasses, whose special methods can come from computed names
            self.refuse("uses builtin 'type' as a value, not as type(x)")
        if any(
            n.id == "super" and isinstance(n.ctx, ast.Load) and id(n) not in self.callees
            for n in self.names
        ) and _global_use(self.program, {"super"}):
            # class S(super): a super object made by hand reads any attribute of anything
            self.refuse("uses builtin 'super' as a value, not as super()")
        self.check_type_results()
        self.check_enum_calls()

    def check_type_results(self) -> None:
        """Refuse ``type(x)`` where its value could be kept or called as a class factory.

        Allowed: compared (``type(x) == int``, ``type(x) in (...)``), read (``type(x).__name__``),
        called with one value (``type(self)(n)``), a subscript's key (``d[type(x)]``) or an
        argument of a builtin call (``isinstance(y, type(x))``, ``str(type(x))``). Not: stored
        (``K = type(int)``), in a list, a comprehension or a ``partial``: ``type(int)`` is
        ``type``, which makes classes from computed names.
        """
        parent: dict[int, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                parent[id(child)] = node
        for call in self.calls:
            if not _is_type_of(call):
                continue
            up = parent.get(id(call))
            if (
                isinstance(up, (ast.Compare, ast.Attribute))
                or (isinstance(up, ast.Call) and up.func is call)
                or (isinstance(up, ast.Subscript) and up.slice is call)
                or (
                    isinstance(up, ast.Call)
                    and isinstance(up.func, ast.Name)
                    and up.func.id in ALLOWED_BUILTINS
                    and up.func.id != "type"
                    and any(a is call for a in up.args)
                )
            ):
                continue
            self.refuse("keeps type(x) as a value (type(int) is type, a class factory)")

    def check_enum_calls(self) -> None:
        """Refuse an enum class (``Enum``, ``IntEnum`` ..., or the program's subclass of one)
        used other than as a base, as a lookup (``Color(1)``), or in the functional API with
        literal member names (``Enum('E', 'A B')``): names computed at run time can be
        dunders (``__getattr__``, ``__reduce_ex__``) of the class it makes."""
        family: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef) and any(
                self.enum_class(b) or (isinstance(b, ast.Name) and b.id in family)
                for b in node.bases
            ):
                family.add(node.name)
        bases = {id(b) for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef) for b in n.bases}
        for node in ast.walk(self.tree):
            if not isinstance(node, (ast.Name, ast.Attribute)) or id(node) in bases:
                continue
            if not (
                self.enum_class(node)
                or (isinstance(node, ast.Name) and node.id in family and id(node) in self.callees)
            ):
                continue
            call = next((c for c in self.calls if c.func is node), None)
            if call is None:  # (a family name here is a callee: it has a call)
                self.refuse(f"uses {ast.unparse(node)} other than as a base or a call")
            elif not all(_is_literal(a) for a in call.args[1:]) or not all(
                _is_literal(k.value) for k in call.keywords
            ):
                self.refuse(f"calls {ast.unparse(node)}(...) with member names it computes")

    def enum_class(self, node: ast.expr) -> bool:
        """Whether ``node`` names an enum class of :mod:`enum` (``Enum``, ``enum.IntEnum``)."""
        imported = self.modules | self.members
        if isinstance(node, ast.Name):
            dotted = imported.get(node.id, "")
        elif isinstance(node, ast.Attribute):
            dotted = f"{self.module_of(node.value)}.{node.attr}"
        else:
            return False
        return dotted.startswith("enum.") and dotted[5:] in ENUM_CLASSES

    def check_class_patterns(self) -> None:
        """Refuse ``case C(p)`` unless the names it reads are known before it runs.

        Allowed: a builtin class that matches itself (``case int(n)``), and a class the
        program binds once, as ``@dataclass class C:`` with no bases or as
        ``C = namedtuple('C', 'x y')`` with literal field names: its fields are what the
        pattern reads, checked as attributes, and no foreign object is an instance of it.

        A positional sub-pattern reads the attribute that ``C.__match_args__`` names at run
        time: a namedtuple's field names, a dataclass's, computed strings all; with a class
        that ``isinstance`` says a generator or a frame belongs to (an ABC's ``register``, a
        runtime-checkable protocol, a metaclass's ``__instancecheck__``), that reads
        ``gi_frame``. Keyword sub-patterns (``case C(x=p)``) name what they read and are
        checked like attributes.
        """
        if not self.positional_patterns:
            return
        bound = _bound_names(self.tree)
        fixed = _classes_with_fixed_fields(self.tree, bound, self.modules | self.members)
        for node in self.positional_patterns:
            cls = node.cls
            if isinstance(cls, ast.Name):
                if cls.id in _SELF_MATCHING and len(node.patterns) == 1 and not bound[cls.id]:
                    continue
                if cls.id in fixed and bound[cls.id] == 1:
                    for name in fixed[cls.id]:
                        self.check_attribute_name(name, " in a class pattern")
                    continue
            self.refuse(
                f"matches {ast.unparse(cls)}(...) by position: the attributes a class pattern "
                "reads by position are named at run time (write case C(name=...))"
            )

    def check_module_read(self, node: ast.Attribute, base: str) -> None:
        dotted = f"{base}.{node.attr}"
        if dotted in MODULE_MEMBERS:  # a submodule on the list: it must be read further
            if id(node) not in self.bases:
                self.refuse(f"uses module {dotted!r} as a value")
            return
        if base not in MODULE_MEMBERS:
            self.refuse(f"reads {dotted!r}, of a module not on the allow-list", dotted)
        elif node.attr not in MODULE_MEMBERS[base]:
            self.refuse(f"reads {dotted!r}, which is not an allowed member of {base!r}", dotted)
        elif not isinstance(node.ctx, ast.Load):
            self.refuse(f"assigns {dotted!r}, a member of a module")

    def check_data_only(self) -> None:
        """Refuse a computed template (``text.format(...)``) unless the program is plain data.

        Such a template reads whatever attributes it names, so nothing in the program may
        lead from a value to the interpreter: no import, class, lambda, generator, caught
        or held exception, and no function as a value (``len.__self__`` is :mod:`builtins`;
        a Python function has ``__globals__``). Plain values and their C types lead nowhere.
        """
        what = self.template_from_value
        assert what is not None
        carriers = (["imports a module"] if self.imports else []) + self.carriers
        for node in self.names:
            if (
                isinstance(node.ctx, ast.Load)
                and id(node) not in self.callees
                and id(node) not in self.bases
                and (node.id in self.functions or node.id in BUILTIN_FUNCTIONS)
            ):
                carriers.append(f"uses function {node.id!r} as a value")
        if carriers:
            self.refuse(
                f"formats a template it computes (.{what.attr} on a value) and {carriers[0]}: "
                "the template could walk its attributes to the interpreter"
            )

    def refusal(self) -> _Refusal | None:
        return self.named or self.first or self.last_resort


def _is_literal(node: ast.expr) -> bool:
    """Whether ``node`` is a Python literal (``'A B'``, ``['A', ('B', 2)]``, ``{'A': 1}``)."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _is_type_of(node: ast.expr) -> bool:
    """``type(...)``: a call of the name ``type``."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"


def _one_plain_argument(call: ast.Call) -> bool:
    """``type(x)``: one positional argument, not starred, no keywords."""
    return len(call.args) == 1 and not isinstance(call.args[0], ast.Starred) and not call.keywords


def _class_body_names(node: ast.ClassDef) -> Iterator[str]:
    """The names a class body binds at its top: assignments, annotations, defs, classes."""
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield stmt.name
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, (ast.AnnAssign, ast.AugAssign))
            else []
        )
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    yield sub.id


def _bound_names(tree: ast.AST) -> Counter[str]:
    """How often the program binds each name anywhere (assigned, a parameter, a def, an
    import, a pattern capture; a ``global`` or ``nonlocal`` counts twice: it rebinds)."""
    names: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names[node.id] += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] += 1
        elif isinstance(node, ast.arg):
            names[node.arg] += 1
        elif isinstance(node, ast.alias):
            names[node.asname or node.name.split(".")[0]] += 1
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names[node.name] += 1
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names[node.rest] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update({n: 2 for n in node.names})
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names[node.name] += 1
    return names


def _is_named(node: ast.expr, member: str, bound: Counter[str], imported: dict[str, str]) -> bool:
    """Whether ``node`` is ``member`` (``'dataclasses.dataclass'``) as the program imported it
    (``dataclass``, ``dc`` after ``from ... import dataclass as dc``,
    ``dataclasses.dataclass``; ``imported``: name -> module or module.member), under a
    name the program binds only by that import: a name it binds otherwise (``def
    dataclass(c)``) could be any callable."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        name, dotted = node.value.id, f"{imported.get(node.value.id)}.{node.attr}"
    elif isinstance(node, ast.Name):
        name, dotted = node.id, imported.get(node.id)
    else:
        return False
    return dotted == member and bound[name] == 1


def _classes_with_fixed_fields(
    tree: ast.AST, bound: Counter[str], imported: dict[str, str]
) -> dict[str, list[str]]:
    """The classes whose ``__match_args__`` the source fixes, with those field names.

    ``@dataclass class C:`` (no bases, no keywords, no other decorator; every annotated name
    of its body, in order) and ``C = namedtuple('C', 'x y')`` / ``['x', 'y']`` with literal
    names, ``dataclass`` and ``namedtuple`` being the imported ones (:func:`_is_named`).
    """
    fixed: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and not node.bases and not node.keywords:
            if len(node.decorator_list) == 1:
                deco = node.decorator_list[0]
                what = deco.func if isinstance(deco, ast.Call) else deco
                if _is_named(what, "dataclasses.dataclass", bound, imported):
                    fixed[node.name] = [
                        s.target.id
                        for s in node.body
                        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                    ]
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and _is_named(node.value.func, "collections.namedtuple", bound, imported)
            and len(node.value.args) == 2
        ):
            spec = node.value.args[1]
            if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
                fixed[node.targets[0].id] = spec.value.replace(",", " ").split()
            elif isinstance(spec, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in spec.elts
            ):
                fixed[node.targets[0].id] = [e.value for e in spec.elts]
    return fixed


def _template_attributes(text: str, depth: int = 0) -> Iterator[str]:
    """The attribute names the replacement fields of ``text`` read, as ``str.format`` would.

    ``'{0.real}'`` gives ``real``; fields nested in a format spec count too; a text that is
    not a template gives none.
    """
    try:
        for _literal, field, spec, _conv in _string.formatter_parser(text):
            if field:
                _first, rest = _string.formatter_field_name_split(field)
                for is_attr, key in rest:
                    if is_attr:
                        yield str(key)
            if spec and "{" in spec and depth < 2:
                yield from _template_attributes(spec, depth + 1)
    except ValueError:
        return


def _global_use(program: str, names: set[str]) -> str | None:
    """The first of ``names`` (refused builtins) that ``program`` reads as the builtin.

    A read at module or class level falls back to the builtins; in a function, one that is
    not the function's own variable (a parameter, a local, a variable of an enclosing
    function) does. ``None`` if every read is of the program's own variable.
    """
    try:
        top = symtable.symtable(program, "<program>", "exec")
    except _PARSE_ERRORS:
        return next(iter(sorted(names)))
    stack = [top]
    while stack:
        table = stack.pop()
        for sym in table.get_symbols():
            if sym.get_name() not in names or not sym.is_referenced():
                continue
            if table.get_type() == "function":
                if sym.is_global():
                    return sym.get_name()
            elif not sym.is_free():  # module and class bodies fall back to builtins
                return sym.get_name()
        stack.extend(table.get_children())
    return None


def _judge(program: str, banned: Sequence[str]) -> _Refusal | None:
    if not isinstance(program, str):
        return None
    try:
        tree = ast.parse(program)
    except _PARSE_ERRORS:
        return None
    judge = _Judge(tree, program, frozenset(module_name(b) for b in banned) | frozenset(banned))
    judge.walk()
    judge.finish()
    return judge.refusal()


def program_refusal(program: str, banned: Sequence[str] = AZR_BANNED_MODULES) -> str | None:
    """The first reason ``program`` breaks the allow-list, else ``None``.

    In one :func:`ast.walk`: every import names a module of :data:`ALLOWED_MODULES` (and
    not of ``banned``); a module is only read from (``re.sub``), never used as a value, and
    only for a member of :data:`MODULE_MEMBERS` (not ``statistics.random``,
    ``collections._sys``, ``operator.attrgetter``); a builtin the program reads is one of
    :data:`ALLOWED_BUILTINS` unless the program binds that name itself; no ``__dunder__``
    name or attribute outside :data:`ALLOWED_DUNDER_ATTRIBUTES`, no ``_private`` attribute
    outside :data:`NAMEDTUPLE_ATTRIBUTES`, no attribute of :data:`INTERNAL_ATTRIBUTES`
    (in code, in a class pattern or in a constant format template such as
    ``'{0.gi_frame}'``) or defined by a class body (a dataclass field); no class pattern by
    position but ``case int(n)`` of a builtin class (:meth:`_Judge.check_class_patterns`);
    ``type`` only as ``type(x)`` (or in ``isinstance(x, type)``), never as a value, a base or
    with unpacked arguments; no string names a ``__dunder__`` (but ``'__main__'``); a template
    the program computes (``text.format(x)``) only in a program of plain data
    (:meth:`_Judge.check_data_only`). A refusal that reaches a module of ``banned``
    (``tempfile._os``, ``import _random``) is reported first, naming it. A program that does
    not parse returns ``None`` (the parse check reports it).

    Returns:
        A reason such as ``"imports 'os', a banned module"``, ``"uses builtin 'open', which is
        not on the allow-list"``, ``"reads .__class__, a dunder attribute"``, ``"names
        '__globals__' in a string"``; ``None`` if the program passes.
    """
    refusal = _judge(program, banned)
    return None if refusal is None else refusal.reason


def forbidden_import(program: str, banned: Sequence[str] = AZR_BANNED_MODULES) -> str | None:
    """The module ``program`` is refused for reaching, or ``"__import__"``, else ``None``.

    The module of :func:`program_refusal`'s refusal when that refusal is about a module: an
    import off the list (``'secrets'``), a banned module however reached (``'os'`` for
    ``import posix``, ``posixpath.os``, ``tempfile._os``; ``'random'`` for ``import
    _random``), a module member off the list (``'statistics.random'``). ``None`` when the
    program passes or is refused for something else (:func:`escape_hatch` reports that).
    """
    refusal = _judge(program, banned)
    return None if refusal is None else refusal.module


def escape_hatch(program: str) -> str | None:
    """The first construct by which ``program`` leaves the allow-list, else ``None``.

    :func:`program_refusal` with AZR's banned modules: the sandboxed process reports its
    outputs on its own stdout, so a program that reached the process's I/O, the harness or
    the host could forge a verdict or store a value another host does not recompute. A
    program that does not parse returns ``None``.
    """
    return program_refusal(program)


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
) | REFUSED_BUILTINS  # fmt: skip
"""Names an input expression may not use: the I/O and introspection builtins above and every
builtin a task program may not call (``id``, ``hash``, ``dir``, ``hasattr`` ...)."""


def _chain_root(node: ast.expr) -> ast.expr:
    """The start of ``a.b[0].c(...)``: ``a``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _reaches_shared_state(call: ast.Call) -> bool:
    """Whether an input reads an attribute of a name it does not bind, calls such a name
    (not a builtin), or has a lambda that names one that is not a builtin.

    The input is evaluated in the program's namespace, whose modules (``decimal``'s context,
    an ABC's registry) the ``f`` that answers shares: ``decimal.setcontext(...) or 7``
    changes ``f``'s answer without being a value. A name the input binds (``lambda x:
    x.reverse()``) and a literal (``'a'.upper()``) are its own. ``g[:]`` of a program's
    global stays allowed (CRUXEval's gold inputs do it).
    """
    own = {a.arg for n in ast.walk(call) if isinstance(n, ast.Lambda) for a in _lambda_args(n)}
    own |= {
        n.id for n in ast.walk(call) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    for node in ast.walk(call):
        if isinstance(node, ast.Attribute):
            root = _chain_root(node.value)
            if isinstance(root, ast.Name) and root.id not in own:
                return True
        elif isinstance(node, ast.Call) and node is not call:
            # setcontext(Context(prec=3)) or 7, with the program's ``from decimal import``
            f = node.func
            if isinstance(f, ast.Name) and f.id not in own and f.id not in ALLOWED_BUILTINS:
                return True
        elif isinstance(node, ast.Lambda):
            for sub in ast.walk(node.body):
                if (
                    isinstance(sub, ast.Name)
                    and sub.id not in own
                    and sub.id not in ALLOWED_BUILTINS
                ):
                    return True
    return False


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_NESTING = (ast.Call, ast.Attribute, ast.Lambda, *_COMPREHENSIONS)


def _passes_a_name_on(call: ast.Call) -> bool:
    """Whether an input hands a name it does not bind (not a builtin) to anything but ``f``.

    Such a name is the program's: a value the answering ``f`` may share (a global dict, a
    module, an iterator). Under a call, an attribute, a lambda or a comprehension the input
    can act on it before ``f`` runs: ``(lambda d: d.update(...))(memo)``, ``[0 for memo[5]
    in ['X']]``, ``[memo][0].clear()``, ``next(it)``, ``[m.enum for m in [re]]`` (red team,
    2026-12-06: the last reached ``exec`` and forged the runner's report). As an argument of
    ``f``, in a display, an operator or a subscript (``g[:]``) it is only a value ``f`` gets.
    Bindings are scoped as Python scopes them: a lambda's arguments in its body, a
    comprehension's targets after its first iterable, so ``(lambda m: m)(m)`` and ``[m for m
    in [m]]`` pass the outer ``m`` on.
    """
    return any(_name_passed_on(arg, frozenset()) for arg in [*call.args, *call.keywords])


def _name_passed_on(node: ast.AST, bound: frozenset[str], nested: bool = False) -> bool:
    nested = nested or isinstance(node, _NESTING)
    if isinstance(node, ast.Name):
        return nested and node.id not in bound and node.id not in ALLOWED_BUILTINS
    if isinstance(node, ast.Lambda):
        a = node.args
        outer = [*a.defaults, *filter(None, a.kw_defaults)]  # evaluated where it is written
        inner = bound | {x.arg for x in _lambda_args(node)}
        return any(_name_passed_on(d, bound, True) for d in outer) or _name_passed_on(
            node.body, inner, True
        )
    if isinstance(node, _COMPREHENSIONS):
        inner = bound
        for gen in node.generators:
            # the first iterable is evaluated outside the comprehension: inner is still bound
            if _name_passed_on(gen.iter, inner, True):
                return True
            targets = list(ast.walk(gen.target))
            if not all(
                isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.Store))
                for n in targets
            ):
                return True  # ``for memo[5] in ...`` stores into the program's ``memo``
            inner = inner | {n.id for n in targets if isinstance(n, ast.Name)}
            if any(_name_passed_on(c, inner, True) for c in gen.ifs):
                return True
        results = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return any(_name_passed_on(r, inner, True) for r in results)
    return any(_name_passed_on(child, bound, nested) for child in ast.iter_child_nodes(node))


def _lambda_args(node: ast.Lambda) -> list[ast.arg]:
    a = node.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]


def safe_input_expression(text: Any) -> str | None:
    """A model-written argument list that may be *evaluated* in the sandbox, or ``None``.

    CRUXEval's rule is ``f(<input>) == <output>`` with the input as Python source (its gold
    inputs include ``dict(a=1)``, ``range(3)``, ``lambda x: x < 2``, names the program
    defines). The judge first refuses text that could reach the process's I/O or the
    harness: any name or attribute starting with ``_``, any attribute of a frame, code object
    or generator (:data:`INTERNAL_ATTRIBUTES`), any string naming a dunder, ``.format`` and
    ``.format_map`` (a template reads the attributes it names: ``'{0.gi_frame}'.format(g)``),
    the builtins in ``_UNSAFE_NAMES`` (``eval``, ``exec``, ``open``, ``globals``,
    ``getattr``, ``print`` ...), an attribute of a name the input does not bind
    (``decimal.setcontext(...)``, ``memo.update(...)``: :func:`_reaches_shared_state`), and
    such a name anywhere but on its way to ``f`` (:func:`_passes_a_name_on`).
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
    if _reaches_shared_state(tree.body) or _passes_a_name_on(tree.body):
        return None
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Name) and (node.id.startswith("_") or node.id in _UNSAFE_NAMES):
            return None
        if isinstance(node, ast.Attribute) and (
            node.attr.startswith("_") or node.attr in INTERNAL_ATTRIBUTES
        ):  # ``(x for x in [0]).gi_frame.f_globals`` leads to the builtins
            return None
        if isinstance(node, ast.keyword) and node.arg and node.arg.startswith("_"):
            return None
        if isinstance(node, ast.Attribute) and node.attr in _TEMPLATE_METHODS:
            return None  # '{0.gi_frame}'.format(g): a template reads the attributes it names
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
            if any(_is_dunder(w) for w in _WORD.findall(node.value)):
                return None  # a dunder named by a string: ``g['__builtins__']``
        if isinstance(node, ast.NamedExpr):
            # ``(sorted := lambda s: OUT)`` would rebind a global or builtin that ``f``
            # calls (the input is evaluated in the program's namespace): ``f`` would then
            # return anything without the input being right
            return None
    return text
