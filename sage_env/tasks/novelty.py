"""Novelty of programs: a normal form that copies share, and a distance between programs.

DESIGN.md (Ground truth): *novelty is judged on the normalised program, not its text*. A
proposer that copies a seed or pool program with its variables renamed, a docstring added or
dead code appended has written no new task; compared as text (the pool's exact and Jaccard
rules on the prompt) such a copy passed as new and was paid in full (issue 33, item 4).

- :func:`normalise_program`: the program with names canonicalised and dead code removed,
  printed by :func:`ast.unparse` (rules in its docstring). Equal normal forms mean the same
  program up to names, layout, comments, annotations and dead code; a changed constant,
  operator or attribute changes the normal form.
- :func:`program_distance`: ``1 - difflib`` ratio of the token streams of two normal forms,
  in [0, 1], so an experiment can report how far its proposals are from the seeds.

:class:`~sage_env.tasks.pool.TaskPool` compares execution tasks with these
(:func:`~sage_env.tasks.pool.exec_task_key`, :func:`~sage_env.tasks.pool.normalised_question`).

Nothing here runs a program: it is static analysis with :mod:`ast` (standard library only)
and never raises on model output.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
import warnings

ENTRY = "f"
"""The entry function of an execution task's program: its name is part of the task (the
executor calls ``f``), so it is never renamed."""

PARSE_ERRORS = (SyntaxError, RecursionError, MemoryError, ValueError, TypeError, OverflowError)
"""What parsing model output with :mod:`ast` may raise (caught, never passed on)."""
_TERMINATORS = (ast.Return, ast.Raise, ast.Break, ast.Continue)
_BLOCKS = ("body", "orelse", "finalbody")
_MAX_ROUNDS = 8  # unused-binding removal until nothing changes (each round may free more)


# ------------------------------------------------------------------------ dead code
def _constant_truth(test: ast.expr) -> bool | None:
    """``bool`` of a constant test (``0``, ``False``, ``not None`` ...), else ``None``."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _constant_truth(test.operand)
        return None if inner is None else not inner
    return None


def _strip_annotations(node: ast.AST) -> None:
    """Drop the annotations of a function (they do not change what it computes)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node.returns = None
    args = getattr(node, "args", None)
    if isinstance(args, ast.arguments):
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None:
                a.annotation = None


def _clean_statement(stmt: ast.stmt) -> list[ast.stmt]:
    """``stmt`` with dead code removed inside it, as the statements that replace it."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return []  # a docstring, ``...`` or any other bare constant
    if isinstance(stmt, ast.Pass):
        return []
    if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
        return []
    if isinstance(stmt, ast.AnnAssign):
        if stmt.value is None:
            return []  # ``x: int`` binds nothing
        stmt = ast.copy_location(ast.Assign(targets=[stmt.target], value=stmt.value), stmt)
    if isinstance(stmt, ast.If):
        truth = _constant_truth(stmt.test)
        if truth is not None:
            return _clean_block(stmt.body if truth else stmt.orelse)
    if isinstance(stmt, ast.While) and _constant_truth(stmt.test) is False:
        return _clean_block(stmt.orelse)
    _strip_annotations(stmt)
    for name in _BLOCKS:
        block = getattr(stmt, name, None)
        if isinstance(block, list):
            setattr(stmt, name, _clean_block(block))
    for handler in getattr(stmt, "handlers", ()):
        handler.body = _clean_block(handler.body)
    for case in getattr(stmt, "cases", ()):
        case.body = _clean_block(case.body)
    return [stmt]


def _clean_block(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """A block without dead statements, possibly empty.

    :func:`_prune`, which always runs next, gives every emptied ``body`` a ``pass`` (an empty
    ``orelse`` or ``finalbody`` is no block at all).
    """
    out: list[ast.stmt] = []
    for stmt in stmts:
        out.extend(_clean_statement(stmt))
        if out and isinstance(out[-1], _TERMINATORS):
            break  # the rest of the block never runs
    return out


# ------------------------------------------------------------------------ scopes
class _Scope:
    """One namespace: the module, a function or lambda, a class body or a comprehension."""

    def __init__(self, kind: str, parent: _Scope | None) -> None:
        self.kind = kind
        self.parent = parent
        self.bound: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.kept: set[str] = set()  # bound names whose spelling matters (``import a.b``)

    def resolve(self, name: str, module: _Scope) -> _Scope | None:
        """The scope whose binding ``name`` refers to here (LEGB), ``None`` for a builtin."""
        scope: _Scope | None = self
        first = True
        while scope is not None:
            if name in scope.globals:
                return module if name in module.bound else None
            skip = scope.kind == "class" and not first  # class bodies do not enclose
            if not skip and name in scope.bound and name not in scope.nonlocals:
                return scope
            scope, first = scope.parent, False
        return None


class _Binder(ast.NodeVisitor):
    """Pass over a module: its scopes and every occurrence of a name, in source order.

    An occurrence is ``(node, scope it occurs in, name, index)``: a :class:`ast.Name`, an
    argument, a ``def``/``class`` name, an import alias, an ``except ... as`` name, a name of a
    ``global``/``nonlocal`` statement (``index`` its position) or of a ``match`` pattern.
    """

    def __init__(self) -> None:
        self.module = _Scope("module", None)
        self.scope = self.module
        self.occurrences: list[tuple[ast.AST, _Scope, str, int]] = []

    def _bind(self, node: ast.AST, name: str, scope: _Scope | None = None) -> None:
        scope = scope or self.scope
        if name in scope.globals:
            scope = self.module  # ``global x`` then ``x = ...``: a module binding
        scope.bound.add(name)
        self.occurrences.append((node, scope, name, 0))

    def _enter(self, kind: str) -> _Scope:
        self.scope = _Scope(kind, self.scope)
        return self.scope

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.occurrences.append((node, self.scope, node.id, 0))
        else:
            self._bind(node, node.id)

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        names = self.scope.globals if isinstance(node, ast.Global) else self.scope.nonlocals
        names.update(node.names)
        for i, name in enumerate(node.names):
            self.occurrences.append((node, self.scope, name, i))

    visit_Nonlocal = visit_Global

    def visit_alias(self, node: ast.alias) -> None:
        if node.name == "*":
            return
        name = node.asname or node.name.split(".")[0]
        if node.asname is None and "." in node.name:
            self.scope.kept.add(name)  # ``import a.b`` binds ``a``: no ``as`` can say that
        self._bind(node, name)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self._bind(node, node.name)
        for stmt in node.body:
            self.visit(stmt)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self._bind(node, node.name)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self._bind(node, node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        for child in [*node.keys, *node.patterns]:
            self.visit(child)
        if node.rest:
            self._bind(node, node.rest)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        scope = self.scope
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent  # ``:=`` in a comprehension binds in the enclosing function
        self._bind(node.target, node.target.id, scope)

    def _function(self, node: ast.AST, body: list[ast.AST]) -> None:
        args: ast.arguments = node.args
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.visit(default)  # defaults are evaluated where the function is defined
        outer = self.scope
        self._enter("function")
        for a in [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]:
            if a is not None:
                self._bind(a, a.arg)  # in the function's scope, just entered
        for child in body:
            self.visit(child)
        self.scope = outer

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        self._bind(node, node.name)
        self._function(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for child in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(child)
        self._bind(node, node.name)
        outer = self.scope
        self._enter("class")
        for stmt in node.body:
            self.visit(stmt)
        self.scope = outer

    def _comprehension(self, node: ast.AST, results: list[ast.AST]) -> None:
        generators: list[ast.comprehension] = node.generators
        self.visit(generators[0].iter)  # the first iterable is evaluated outside
        outer = self.scope
        self._enter("comprehension")
        for i, gen in enumerate(generators):
            if i:
                self.visit(gen.iter)
            self.visit(gen.target)
            for cond in gen.ifs:
                self.visit(cond)
        for child in results:
            self.visit(child)
        self.scope = outer

    def visit_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        self._comprehension(node, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, [node.key, node.value])


def _bindings(tree: ast.Module) -> tuple[_Binder, set[tuple[int, str]]]:
    """The binder of ``tree`` and the bindings, ``(id(scope), name)``, that something reads.

    Reads: loads, ``del`` and augmented assignments (``x += 1`` reads ``x``).
    """
    binder = _Binder()
    binder.visit(tree)
    reads: set[tuple[int, str]] = {(id(binder.module), ENTRY)}  # the executor's call
    read_nodes = {id(n.target) for n in ast.walk(tree) if isinstance(n, ast.AugAssign)}
    for node, scope, name, _ in binder.occurrences:
        if not isinstance(node, ast.Name):
            continue
        if isinstance(node.ctx, ast.Store) and id(node) not in read_nodes:
            continue
        target = scope.resolve(name, binder.module)
        if target is not None:
            reads.add((id(target), name))
    return binder, reads


# ------------------------------------------------------------------------ unused bindings
def _pure(node: ast.expr | None) -> bool:
    """Whether evaluating ``node`` can have no effect: constants, names, lambdas, displays."""
    if node is None or isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Lambda):
        args = node.args
        return all(_pure(d) for d in [*args.defaults, *args.kw_defaults])
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(not isinstance(e, ast.Starred) and _pure(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _pure(k) for k in node.keys) and all(
            _pure(v) for v in node.values
        )
    return False


class _Pruner(ast.NodeTransformer):
    """Removes imports, pure assignments and plain ``def``s whose binding is never read."""

    def __init__(self, binder: _Binder, reads: set[tuple[int, str]]) -> None:
        self.unread: set[int] = set()  # ids of binding nodes whose binding nobody reads
        for node, scope, name, _ in binder.occurrences:
            if scope.kind in ("module", "function") and name not in scope.globals:
                if name not in scope.nonlocals and (id(scope), name) not in reads:
                    self.unread.add(id(node))
        self.changed = False

    def _drop(self) -> list:
        self.changed = True
        return []

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> ast.AST | list:
        kept = [a for a in node.names if id(a) not in self.unread]
        if not kept:
            return self._drop()
        self.changed |= len(kept) < len(node.names)
        node.names = kept
        return node

    visit_ImportFrom = visit_Import

    def visit_Assign(self, node: ast.Assign) -> ast.AST | list:
        if _pure(node.value) and all(
            isinstance(t, ast.Name) and id(t) in self.unread for t in node.targets
        ):
            return self._drop()
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST | list:
        args = node.args
        if (
            id(node) in self.unread
            and not node.decorator_list
            and all(_pure(d) for d in [*args.defaults, *args.kw_defaults])
        ):
            return self._drop()
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef


def _prune(tree: ast.Module) -> None:
    """Remove unread bindings until a round removes nothing (each may free another)."""
    for _ in range(_MAX_ROUNDS):
        pruner = _Pruner(*_bindings(tree))
        pruner.visit(tree)
        for node in ast.walk(tree):  # a body emptied here or by _clean_block needs a ``pass``
            if not isinstance(node, ast.Module) and getattr(node, "body", None) == []:
                node.body = [ast.Pass()]
        if not pruner.changed:
            return


# ------------------------------------------------------------------------ renaming
def _rename(tree: ast.Module) -> None:
    """Give every renamable binding ``<prefix><n>``, n in order of first appearance.

    Renamable: a binding of the module or a function, lambda or comprehension, except the
    entry ``f`` at module level, dunders and ``import a.b`` (which binds ``a``). Names bound in
    a class body are attributes (``self.x``) and keep their spelling, as do builtins, other
    free names, attributes and keyword-argument names.
    """
    binder, _ = _bindings(tree)
    module = binder.module
    resolved = []
    kept_names: set[str] = set()
    for node, scope, name, i in binder.occurrences:
        target = scope.resolve(name, module)
        renamable = (
            target is not None
            and target.kind != "class"
            and name not in target.kept
            and not (target is module and name == ENTRY)
            and not (name.startswith("__") and name.endswith("__"))
        )
        if not renamable:
            kept_names.add(name)
        resolved.append((node, name, i, (id(target), name) if renamable else None))
    prefix = "_v"
    while any(re.fullmatch(re.escape(prefix) + r"\d+", n) for n in kept_names):
        prefix += "_"
    canonical: dict[tuple[int, str], str] = {}
    for node, _name, i, key in resolved:
        if key is None:
            continue
        new = canonical.setdefault(key, f"{prefix}{len(canonical)}")
        if isinstance(node, ast.Name):
            node.id = new
        elif isinstance(node, ast.arg):
            node.arg = new
        elif isinstance(node, ast.alias):
            node.asname = new
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            node.names[i] = new
        elif isinstance(node, ast.MatchMapping):
            node.rest = new
        else:  # def, class, except ... as, match capture
            node.name = new


# ------------------------------------------------------------------------ public API
def normalise_program(source: str) -> str | None:
    """The normal form of a Python program, equal for copies up to names and dead code.

    Equal normal forms: the programs differ only in names, layout, comments, annotations and
    dead code. Rules, in order (each keeps what the program computes; none runs it):

    1. Parse with :mod:`ast` (comments, blank lines, parentheses and quoting disappear).
    2. Dead code: bare constant statements (docstrings, ``...``), ``pass``, statements after
       ``return``/``raise``/``break``/``continue`` in the same block, ``if``/``while`` on a
       constant (``if False:``, ``if 0:``, ``while False:`` keep only the branch that runs),
       ``from __future__`` imports and type annotations (argument and return annotations;
       ``x: T = v`` becomes ``x = v``, ``x: T`` goes).
    3. Unread bindings (resolved by scope: module, function, lambda, comprehension), until
       none is left: an import whose name is never read, an assignment of a constant, name,
       lambda or display of those to names never read, a ``def`` without decorators whose
       name is never read. The entry ``f`` counts as read.
    4. Names: every binding of the module, a function, lambda or comprehension (helper
       functions, arguments, locals, loop and comprehension variables, lambda arguments,
       import aliases, ``except ... as``, ``match`` captures) is renamed ``_v0``, ``_v1``,
       ... in order of first appearance (scope-aware: a local that shadows another name is
       its own binding). Kept as written: the entry ``f`` at module level, builtins and
       other free names, attribute names (``x.append``), keyword-argument names, names bound
       in a class body (they are attributes), dunders and ``import a.b``.
    5. Print with :func:`ast.unparse`. Constants, operators, attributes and the order of
       statements are kept, so changing any of them changes the normal form.

    Two programs whose outputs differ only through the names themselves (``locals()``,
    ``__code__.co_varnames``) are rare in validated proposals and count as the same.

    Args:
        source: Python source text (model output; any ``str``).

    Returns:
        The normal form, or ``None`` when ``source`` is not a ``str`` or does not parse
        (``SyntaxError``, ``ValueError`` on a null byte, ``RecursionError`` or
        ``MemoryError`` on deep nesting). Never raises on model output.
    """
    return _cached_normal_form(source) if isinstance(source, str) else None


def _normal_form(source: str) -> str | None:
    try:
        with warnings.catch_warnings():  # ``'\.'`` in a seed: not ours to warn about
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
        tree.body = _clean_block(tree.body)
        _prune(tree)
        _rename(tree)
        return ast.unparse(tree)
    except PARSE_ERRORS:
        return None


# a pool checks each proposal more than once; wrapped by a call, not a decorator, so that the
# mutation tester (which skips decorated functions) mutates _normal_form (issue 49)
_cached_normal_form = functools.lru_cache(maxsize=4096)(_normal_form)

_TOKEN = re.compile(r"\w+|[^\w\s]")


def program_distance(a: str, b: str) -> float:
    """How different two programs are after normalisation, in [0, 1].

    ``1 - difflib.SequenceMatcher(None, ta, tb, autojunk=False).ratio()`` where ``ta``, ``tb``
    are the token streams (words and single punctuation characters) of the normal forms
    (:func:`normalise_program`; a source that does not parse is compared as written). 0:
    the same normal form (a renamed or padded copy); 1: no token in common. The ratio is
    ``2 M / (len(ta) + len(tb))`` with M the matched tokens (Ratcliff/Obershelp), so one
    changed constant in a 50-token program gives about 0.02.

    Args:
        a: Python source text.
        b: Python source text.

    Returns:
        A float in [0, 1]; never raises on model output.
    """
    norm_a, norm_b = normalise_program(a), normalise_program(b)  # None: not a str or no parse
    ta = _TOKEN.findall(norm_a if norm_a is not None else str(a))
    tb = _TOKEN.findall(norm_b if norm_b is not None else str(b))
    if not ta and not tb:
        return 0.0
    return 1.0 - difflib.SequenceMatcher(None, ta, tb, autojunk=False).ratio()


def nearest_program_distance(program: str, others: list[str] | tuple[str, ...]) -> float:
    """The :func:`program_distance` to the nearest of ``others`` (1.0 if none), in [0, 1]."""
    return min((program_distance(program, o) for o in dict.fromkeys(others)), default=1.0)
