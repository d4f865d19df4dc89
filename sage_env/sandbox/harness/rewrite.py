"""The assert rewriter and the judge's evaluator: values, not verdicts.

A harness module (runs inside the sandbox): standard library only.

Every ``assert`` of a test is split in two. What the judge can compute itself (literals,
comparisons, ``and``/``or``/``not``, arithmetic, a few pure builtins such as ``abs`` and
``len``) becomes a *template* that stays with the judge; every other sub-expression (a call of
the program, a name, an attribute ...) becomes a *hole*, numbered in the order Python evaluates
it. The rewritten test sends only the values of the holes, in that order, and then that the
site was reached; the judge re-evaluates the template on those values (see
:func:`evaluate`) and so decides every assertion itself. A top-level statement that is only a
call (``f(1, 2)``, ``check(candidate)``) becomes a site too: it reports that the call returned.

Why one file of more than 500 lines: the rewriter and :func:`evaluate` are the two halves of
one contract (what a template may contain is exactly what the evaluator computes), kept side
by side so that neither can accept a node the other does not know.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from sage_env.sandbox.harness.report import Opaque

#: Builtins the judge evaluates itself (when the test never binds the name).
_CALLS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "len": len,
    "round": round,
    "min": min,
    "max": max,
    "sum": sum,
    "sorted": sorted,
    "set": set,
    "frozenset": frozenset,
    "list": list,
    "tuple": tuple,
    "dict": dict,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "type": type,
    "isinstance": isinstance,
    "all": all,
    "any": any,
    "divmod": divmod,
}
_MATH: dict[str, Callable[..., Any]] = {
    "isclose": math.isclose,
    "fabs": math.fabs,
    "sqrt": math.sqrt,
    "floor": math.floor,
    "ceil": math.ceil,
    "isnan": math.isnan,
    "isinf": math.isinf,
}
_TYPES: dict[str, type] = {
    t.__name__: t
    for t in (int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset, type)
}
_CMP: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_BIN: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
}
_BIN_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
}
#: The largest result the judge's evaluator builds (bits of an int, items of a sequence).
_MAX_SIZE = 1 << 20

#: Control flow under which a site may legitimately never be reached (not required).
_CONDITIONAL = (ast.If, ast.Try, ast.While, ast.IfExp, ast.Match) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()
)


def _walk(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` (as :func:`ast.walk`, in another order, without its generators)."""
    nodes, stack, AST = [], [tree], ast.AST
    push, add = stack.append, nodes.append
    while stack:
        node = stack.pop()
        add(node)
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(value, AST):
                push(value)
    return nodes


def _stored_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in _walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def _math_imported(tree: ast.AST) -> bool:
    # `math` refers to the standard module only if the test binds it by `import math` alone
    bound_other = False
    imported = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "math" and a.asname in (None, "math"):
                    imported = True
                elif (a.asname or a.name.split(".")[0]) == "math":
                    bound_other = True
        elif isinstance(node, ast.ImportFrom):
            bound_other |= any((a.asname or a.name) == "math" for a in node.names)
        elif (
            isinstance(node, ast.Name) and node.id == "math" and not isinstance(node.ctx, ast.Load)
        ):
            bound_other = True
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.arg)):
            bound_other |= getattr(node, "name", getattr(node, "arg", None)) == "math"
    return imported and not bound_other


class _Builder:
    """Builds one site's template; holes become ``__sage_v__(k, j, <expr>)`` calls."""

    def __init__(self, k: int, stored: set[str], math_ok: bool) -> None:
        self.k, self.stored, self.math_ok, self.n = k, stored, math_ok, 0
        self.calls: list[ast.expr] = []

    def hole(self, node: ast.expr) -> tuple[tuple, ast.expr]:
        j = self.n
        self.n += 1
        call = ast.Call(
            ast.Name("__sage_v__", ast.Load()), [ast.Constant(self.k), ast.Constant(j), node], []
        )
        self.calls.append(call)
        return ("h", j), call

    def build(self, node: ast.expr) -> tuple[tuple, ast.expr]:
        """``(template, in-process expression)`` for ``node``, holes numbered in eval order."""
        if not any(isinstance(n, (ast.Name, ast.Call, ast.Attribute)) for n in ast.walk(node)):
            try:
                return ("c", ast.literal_eval(node)), node
            except Exception:
                pass
        if isinstance(node, ast.Constant):
            return ("c", node.value), node
        if isinstance(node, ast.Name) and node.id in _TYPES and node.id not in self.stored:
            return ("t", node.id), node
        if isinstance(node, ast.UnaryOp):
            t, e = self.build(node.operand)
            op = {ast.Not: "not", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}[type(node.op)]
            return ("u", op, t), ast.UnaryOp(node.op, e)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            (tl, el), (tr, er) = self.build(node.left), self.build(node.right)
            return ("b", _BIN[type(node.op)], tl, tr), ast.BinOp(el, node.op, er)
        if isinstance(node, ast.BoolOp):
            parts = [self.build(v) for v in node.values]
            kind = "and" if isinstance(node.op, ast.And) else "or"
            return (kind, [t for t, _ in parts]), ast.BoolOp(node.op, [e for _, e in parts])
        if isinstance(node, ast.Compare):
            tl, el = self.build(node.left)
            ops, exprs = [], []
            for op, comp in zip(node.ops, node.comparators):
                t, e = self.build(comp)
                ops.append((type(op).__name__, t))
                exprs.append(e)
            return ("cmp", tl, ops), ast.Compare(el, node.ops, exprs)
        if isinstance(node, ast.IfExp):
            (tt, et), (tb, eb), (to, eo) = map(self.build, (node.test, node.body, node.orelse))
            return ("if", tt, tb, to), ast.IfExp(et, eb, eo)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and not any(
            isinstance(e, ast.Starred) for e in node.elts
        ):
            parts = [self.build(e) for e in node.elts]
            kind = {ast.Tuple: "tuple", ast.List: "list", ast.Set: "set"}[type(node)]
            cls = type(node)
            new = (
                cls([e for _, e in parts], ast.Load())
                if cls is not ast.Set
                else cls([e for _, e in parts])
            )
            return (kind, [t for t, _ in parts]), new
        if isinstance(node, ast.Subscript):
            tv, ev = self.build(node.value)
            sl = node.slice
            if isinstance(sl, ast.Slice):
                parts = [
                    self.build(p) if p is not None else (("c", None), None)
                    for p in (sl.lower, sl.upper, sl.step)
                ]
                new_sl = ast.Slice(*[e for _, e in parts])
                return ("slice", tv, [t for t, _ in parts]), ast.Subscript(ev, new_sl, ast.Load())
            ts, es = self.build(sl)
            return ("sub", tv, ts), ast.Subscript(ev, es, ast.Load())
        if isinstance(node, ast.Call) and self._pure_call(node):
            name = node.func.id if isinstance(node.func, ast.Name) else "math." + node.func.attr
            args = [self.build(a) for a in node.args]
            kws = [(kw.arg, self.build(kw.value)) for kw in node.keywords]
            new = ast.Call(
                node.func,
                [e for _, e in args],
                [ast.keyword(a, e) for a, (_, e) in kws],
            )
            return ("call", name, [t for t, _ in args], [(a, t) for a, (t, _) in kws]), new
        return self.hole(node)

    def _pure_call(self, node: ast.Call) -> bool:
        f = node.func
        if isinstance(f, ast.Name):
            ok = f.id in _CALLS and f.id not in self.stored
        else:
            ok = (
                self.math_ok
                and isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and f.value.id == "math"
                and f.attr in _MATH
            )
        if not ok:
            return False
        values = list(node.args) + [kw.value for kw in node.keywords]
        if any(kw.arg is None for kw in node.keywords):
            return False
        bad = (ast.Starred, ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)
        if any(isinstance(v, bad) for v in values):
            return False
        if isinstance(f, ast.Name) and f.id == "isinstance" and len(node.args) == 2:
            # the class must be one the judge knows (a builtin type or a tuple of them)
            cls = node.args[1]
            names = cls.elts if isinstance(cls, ast.Tuple) else [cls]
            return all(
                isinstance(n, ast.Name) and n.id in _TYPES and n.id not in self.stored
                for n in names
            )
        return True


def _wrappers(tree: ast.AST, program: set[str]) -> set[str]:
    """Builtins the program binds that the test wraps around a call of another of its names.

    ``set(similar_elements(...))``: that ``set`` is the test's builtin, not the function under
    test, in every call of the test (else a program defining ``set`` would own both sides of
    ``set(f(x)) == set((4, 5))``).
    """
    if program.isdisjoint(_CALLS):
        return set()  # no builtin of the judge's is the program's
    fns = program - set(_CALLS) - set(_TYPES)
    found = set()
    for node in _walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _CALLS
            and node.func.id in program
        ):
            values = list(node.args) + [kw.value for kw in node.keywords]
            if any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in fns
                for v in values
                for n in ast.walk(v)
            ):
                found.add(node.func.id)
    return found


#: A word that is one of the builtins the judge evaluates itself (``_CALLS``, ``_TYPES``).
_JUDGE_WORDS = re.compile(r"\b(?:" + "|".join(sorted(set(_CALLS) | set(_TYPES))) + r")\b")


def needs_program_names(src: object) -> bool:
    """Whether the names a program binds can change how the test ``src`` is rewritten.

    They are consulted only for a name of the test that is one of the judge's builtins
    (``_CALLS``, ``_TYPES``): an ASCII test in which no such word occurs at all (in code,
    strings or comments) is rewritten the same whatever the program binds, so its judge need
    not parse the program. (Not ASCII: Python folds identifiers to NFKC, so ``ｌｅｎ`` is
    ``len``; then the answer is yes.)
    """
    return type(src) is not str or not src.isascii() or _JUDGE_WORDS.search(src) is not None


def bound_names(src: str) -> set[str]:
    """Every name ``src`` binds anywhere (empty if it does not parse)."""
    try:
        return _stored_names(ast.parse(src, "<program>", "exec"))
    except BaseException:
        return set()


def _literal(node):
    """``(True, value)`` of a literal node, else ``(False, None)``."""
    try:
        return True, ast.literal_eval(node)
    except Exception:
        return False, None

def _plus_atol(test):
    """The ``atol`` of ``__sage_plus__(X, <atol>)``, else ``None``."""
    if not (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "__sage_plus__"
        and len(test.args) == 2
        and not test.keywords
    ):
        return None
    ok, atol = _literal(test.args[1])
    return float(atol) if ok and type(atol) in (int, float) else None


#: What a statement list holds (the only places a site can be).
_BLOCK_ITEMS = (ast.stmt, ast.excepthandler) + (
    (ast.match_case,) if hasattr(ast, "match_case") else ()
)


class Sites(list):
    """A test's sites (a list, as before) and ``flow``: how the judge counts what must be reached.

    ``flow`` is a dict (see :func:`required_counts`): ``arms`` (per arm, how often it was entered:
    ``("top",)`` once, ``("none",)`` unknown, ``("T"|"F", k)`` branch site ``k`` judged true or
    false, ``("ev",)`` counted by the test's process, ``("reach"|"telse", t)`` try ``t``'s body or
    finally, its else, ``("exit", l)`` loop ``l``'s else), ``pos`` (per site, where it is: its
    arm, the arms of the ``break``/``continue`` before it in that arm, the tries and ``with``
    bodies around it in its scope, whether it is in a function), ``tries``, ``loops`` (the
    ``while`` branch site or None, its position, the arms of its breaks), ``groups`` (a
    ``match``: its position and its cases' arms) and ``branches`` (the branch sites).
    """

    flow: dict | None = None


def _is_loop(node):
    return isinstance(node, (ast.For, ast.AsyncFor, ast.While))


def _needs_flow(node) -> bool:
    """Whether a compound statement holds a site or a ``break``/``continue`` (not in a def)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Assert, ast.Break, ast.Continue)) or (
            isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
        ):
            return True
        for field in n._fields:
            value = getattr(n, field, None)
            items = value if type(value) is list else [value]
            for item in items:
                if isinstance(item, _BLOCK_ITEMS) and not isinstance(
                    item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
                ):
                    stack.append(item)
    return False


def _jumps_out(body, kinds) -> bool:
    """Whether ``body`` holds a statement of ``kinds`` that leaves it (not in a nested loop/def)."""
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, kinds):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or _is_loop(n):
            if not _is_loop(n) or ast.Return not in kinds:
                continue
        for field in n._fields:
            value = getattr(n, field, None)
            for item in value if type(value) is list else [value]:
                if isinstance(item, _BLOCK_ITEMS):
                    stack.append(item)
    return False


def _hook(name, *args):
    return ast.Expr(ast.Call(ast.Name(name, ast.Load()), [ast.Constant(a) for a in args], []))


class _SiteRewriter(ast.NodeTransformer):
    """The pass of :func:`rewrite_asserts`: appends each site to ``sites`` as it rewrites it.

    It also records how control flows to each site (``flow``, see :class:`Sites`): ``if`` and
    ``while`` conditions become branch sites (kept in ``branches`` and numbered after every
    other site, so assertion numbers stay what they were), and each ``for`` iteration, handler
    and ``match`` case entered calls ``__sage_e__(arm)``.
    """

    def __init__(self, sites: list, stored: set, math_ok: bool):
        self.sites = sites
        self.stored = stored
        self.math_ok = math_ok
        self.conditional = 0
        self.functions = 0
        self.branches: list = []  # (site, pos, [the Constant nodes that carry its number])
        self.arms: list = [("top",)]
        self.parent: list = [None]
        self.jumps: list = [[]]
        self.arm = 0
        self.tries: list = []  # the tries (ids) and ``with`` bodies ("with") around, this scope
        self.loop_arms: list = []  # the innermost loop's body arm, per enclosing loop
        self.flow: dict = {"pos": [], "tries": [], "loops": [], "groups": []}
        self.any_with = False

    def pos(self):
        return (self.arm, tuple(self.jumps[self.arm]), tuple(self.tries), self.functions > 0)

    def new_arm(self, desc):
        self.arms.append(desc)
        self.parent.append(self.arm)
        self.jumps.append([])
        return len(self.arms) - 1

    def block(self, body, arm, event=False):
        """Visit the statement list ``body`` in ``arm`` (counted by the process if ``event``)."""
        saved, self.arm = self.arm, arm
        try:
            holder = ast.Module(list(body), [])
            self.generic_visit(holder)
            out = holder.body
        finally:
            self.arm = saved
        if event:
            out = [_hook("__sage_e__", arm), *out]
        return out

    def generic_visit(self, node):
        # Sites are statements, and statements sit only in the statement lists of statements
        # (bodies, handlers, match cases): no expression holds one, so only those lists are
        # visited (the same sites in the same order as a visit of every node, at a fraction
        # of the cost)
        for field in node._fields:
            old = getattr(node, field, None)
            if type(old) is not list:
                continue
            new = []
            for item in old:
                if isinstance(item, _BLOCK_ITEMS):
                    item = self.visit(item)
                    if item is None:
                        continue
                    if not isinstance(item, ast.AST):
                        new.extend(item)
                        continue
                new.append(item)
            old[:] = new
        return node

    def _nested(self, node, attr):
        setattr(self, attr, getattr(self, attr) + 1)
        try:
            return self.generic_visit(node)
        finally:
            setattr(self, attr, getattr(self, attr) - 1)

    def branch(self, test):
        """A condition as a branch site: ``(k, new test)`` (k numbered after the pass)."""
        k = len(self.branches)
        b = _Builder(-1, self.stored, self.math_ok)
        template, e = b.build(test)
        number = ast.Constant(-1)
        self.branches.append((("branch", template, self.conditional == 0, None), self.pos(),
                              [number] + [c.args[0] for c in b.calls]))
        return k, ast.Call(ast.Name("__sage_b__", ast.Load()), [number, e], [])

    def visit_If(self, node):
        if not _needs_flow(node):
            return self._nested(node, "conditional")
        k, node.test = self.branch(node.test)
        self.conditional += 1
        try:
            node.body = self.block(node.body, self.new_arm(("T", k)))
            node.orelse = self.block(node.orelse, self.new_arm(("F", k)))
        finally:
            self.conditional -= 1
        return node

    def _loop(self, node, k):
        pos = self.pos()
        loop = len(self.flow["loops"])
        record = {"branch": k, "pos": pos, "breaks": []}
        self.flow["loops"].append(record)
        body_arm = self.new_arm(("T", k) if k is not None else ("ev",))
        self.loop_arms.append((body_arm, record))
        try:
            node.body = self.block(node.body, body_arm, event=k is None)
        finally:
            self.loop_arms.pop()
        self.conditional += 1
        try:
            node.orelse = self.block(node.orelse, self.new_arm(("exit", loop)))
        finally:
            self.conditional -= 1
        return node

    def visit_While(self, node):
        if not _needs_flow(node):
            return self._nested(node, "conditional")
        k, node.test = self.branch(node.test)
        self.conditional += 1
        try:
            return self._loop(node, k)
        finally:
            self.conditional -= 1

    def visit_For(self, node):
        if not _needs_flow(node):
            return self.generic_visit(node)  # no site in it (a def's are in their own arm)
        return self._loop(node, None)

    visit_AsyncFor = visit_For

    def _jump(self, node):
        if self.loop_arms:
            body_arm, record = self.loop_arms[-1]
            if isinstance(node, ast.Break):
                record["breaks"].append(self.arm)
            a = self.arm
            while a is not None:
                self.jumps[a].append(self.arm)
                if a == body_arm:
                    break
                a = self.parent[a]
        return node

    visit_Break = visit_Continue = _jump

    def visit_Try(self, node):
        if not _needs_flow(node):
            return self._nested(node, "conditional")
        self.conditional += 1
        try:
            t = len(self.flow["tries"])
            record = {"pos": self.pos(), "handlers": [],
                      "jumpy": _jumps_out(node.body, (ast.Break, ast.Continue, ast.Return))}
            self.flow["tries"].append(record)
            self.tries.append(t)
            try:
                node.body = self.block(node.body, self.new_arm(("reach", t)))
            finally:
                self.tries.pop()
            for h in node.handlers:
                arm = self.new_arm(("ev",))
                record["handlers"].append(arm)
                h.body = self.block(h.body, arm, event=True)
            node.orelse = self.block(node.orelse, self.new_arm(("telse", t)))
            node.finalbody = self.block(node.finalbody, self.new_arm(("reach", t)))
        finally:
            self.conditional -= 1
        return node

    visit_TryStar = visit_Try

    def visit_Match(self, node):
        if not _needs_flow(node):
            return self._nested(node, "conditional")
        self.conditional += 1
        try:
            group = {"pos": self.pos(), "arms": []}
            self.flow["groups"].append(group)
            last = node.cases[-1] if node.cases else None
            if not (
                last is not None
                and last.guard is None
                and isinstance(last.pattern, ast.MatchAs)
                and last.pattern.pattern is None
            ):
                node.cases.append(ast.match_case(ast.MatchAs(None, None), None, [ast.Pass()]))
            for case in node.cases:
                arm = self.new_arm(("ev",))
                group["arms"].append(arm)
                case.body = self.block(case.body, arm, event=True)
        finally:
            self.conditional -= 1
        return node

    def visit_With(self, node):
        # a context manager may swallow an exception: what follows it in the body is not
        # counted (each site there is required once, as before, where no control flow is around)
        self.any_with = True
        self.tries.append("with")
        try:
            node.body = self.block(node.body, self.new_arm(("none",)))
        finally:
            self.tries.pop()
        return node

    visit_AsyncWith = visit_With

    def visit_FunctionDef(self, node):
        saved = (self.tries, self.loop_arms)
        self.tries, self.loop_arms = [], []
        self.functions += 1
        try:
            node.body = self.block(node.body, self.new_arm(("none",)))
        finally:
            self.functions -= 1
            self.tries, self.loop_arms = saved
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Assert(self, node):
        self.generic_visit(node)
        k = len(self.sites)
        self.flow["pos"].append(self.pos())
        required = self.conditional == 0
        atol = _plus_atol(node.test)
        if atol is not None:
            b = _Builder(k, self.stored, self.math_ok)
            _, e = b.hole(node.test.args[0])
            self.sites.append(("plus", ("h", 0), required, atol))
            args = [ast.Constant(k), e, ast.Constant(False)]
        else:
            b = _Builder(k, self.stored, self.math_ok)
            template, e = b.build(node.test)
            self.sites.append(("assert", template, required, None))
            if _short_circuits(template):
                # which holes run depends on the values: the process evaluates the whole
                # expression (literals included) and stops the test when it is false
                args = [ast.Constant(k), e]
            else:
                # every hole runs, in order: only they reach the process, never the
                # literals or the operators (the test goes on, like Python's unittest
                # subtests; the judge has failed it)
                args = [ast.Constant(k), ast.Tuple(b.calls, ast.Load()), ast.Constant(False)]
        call = ast.Call(ast.Name("__sage_a__", ast.Load()), args, [])
        return ast.copy_location(ast.Expr(call), node)

    def visit_Expr(self, node):
        self.generic_visit(node)
        if self.functions or not isinstance(node.value, ast.Call):
            return node
        k = len(self.sites)
        self.flow["pos"].append(self.pos())
        self.sites.append(("call", None, self.conditional == 0, None))
        call = ast.Call(ast.Name("__sage_c__", ast.Load()), [ast.Constant(k), node.value], [])
        return ast.copy_location(ast.Expr(call), node)

    def finish(self) -> None:
        """Number the branch sites after every other site and complete ``flow``."""
        base = len(self.sites)
        for n, (site, pos, constants) in enumerate(self.branches):
            for c in constants:
                c.value = base + n
            self.sites.append(site)
            self.flow["pos"].append(pos)
        # arms that name a branch by its order among branches: renumber to its site
        self.arms = [
            (d[0], base + d[1]) if d[0] in ("T", "F") else d for d in self.arms
        ]
        for loop in self.flow["loops"]:
            if loop["branch"] is not None:
                loop["branch"] += base
        self.flow["arms"] = self.arms
        self.flow["any_with"] = self.any_with


def rewrite_asserts(src: str, reserved: set[str] | frozenset = frozenset()) -> tuple[str, list]:
    """Rewrite each ``assert`` (and each call statement) of the test ``src`` into a site.

    Returns ``(new_source, sites)``. ``sites[k]`` is ``(kind, template, required, arg)``:

    * ``("assert", template, required, None)``: ``assert E`` becomes
      ``__sage_a__(k, E')`` where ``E'`` is ``E`` with each hole ``H`` replaced by
      ``__sage_v__(k, j, H)`` (which reports ``H``'s value and returns it as plain builtin
      types); the judge evaluates ``template`` (see :func:`evaluate`) on the reported values.
    * ``("plus", ("h", 0), required, atol)``: ``assert __sage_plus__(X, <atol>)``; ``X`` is
      hole 0, compared at the verdict, with EvalPlus's rule
      (:func:`~sage_env.sandbox.harness.compare.plus_equal`), against the value the same expression
      takes in the reference process (the part of ``setup`` after
      :data:`~sage_env.sandbox.harness.report.REFERENCE_MARKER`).
    * ``("call", None, required, None)``: a statement ``f(...)`` outside any function becomes
      ``__sage_c__(k, f(...))``, reported once the call has returned.

    ``required`` is False for a site under ``if``/``try``/``while``/``match`` (it may
    legitimately never run); every other site must be reached at least once. Builtins named in
    ``reserved`` (the names the program binds, :func:`bound_names`) are not evaluated by the
    judge: the test calls the program's (MBPP's ``def sum(a, b)``), except where the call
    wraps a call of another of the program's functions (``set(f(x))``): that is the test's
    builtin, which the judge evaluates.

    Raises:
        SyntaxError: If ``src`` does not parse.
    """
    tree = ast.parse(src, "<test>", "exec")
    test_names = _stored_names(tree)
    stored = test_names | (set(reserved) - _wrappers(tree, set(reserved) - test_names))
    # `import math` names it in the text (unless the text folds to it: NFKC, ``ｍａｔｈ``)
    math_ok = ("math" in src or not src.isascii()) and _math_imported(tree)
    sites = Sites()
    rewriter = _SiteRewriter(sites, stored, math_ok)
    tree = rewriter.visit(tree)
    rewriter.finish()
    sites.flow = rewriter.flow
    # the tree goes back to text (which W compiles): it needs no line numbers
    return ast.unparse(ast.fix_missing_locations(tree)), sites


def _short_circuits(template: tuple) -> bool:
    """Whether the holes evaluated for ``template`` depend on the values of earlier ones."""
    tag = template[0]
    if tag in ("and", "or", "if") or (tag == "cmp" and len(template[2]) > 1):
        return True
    if tag in ("h", "c", "t"):
        return False
    children: list = []
    for part in template[1:]:
        if isinstance(part, tuple):
            children.append(part)
        elif isinstance(part, list):
            for x in part:
                if (
                    isinstance(x, tuple)
                    and len(x) == 2
                    and isinstance(x[0], str)
                    and (isinstance(x[1], tuple))
                ):
                    children.append(x[1])  # (op, t) or (keyword, t)
                elif isinstance(x, tuple):
                    children.append(x)
    return any(_short_circuits(c) for c in children)


def _check_size(value: Any) -> Any:
    if type(value) is int and value.bit_length() > _MAX_SIZE:
        raise OverflowError("result too large for the judge")
    if isinstance(value, (str, bytes, list, tuple)) and len(value) > _MAX_SIZE:
        raise OverflowError("result too large for the judge")
    return value


def _binop(op: str, a: Any, b: Any) -> Any:
    # refuse what would take the judge long or much memory (the values are the program's)
    if op == "**" and type(b) is int and type(a) is int and abs(a) > 1:
        if b > 0 and b * a.bit_length() > _MAX_SIZE:
            raise OverflowError("power too large for the judge")
    if op == "<<" and type(b) is int and b > _MAX_SIZE:
        raise OverflowError("shift too large for the judge")
    if op in ("*", "//", "%", "/") and type(a) is int and type(b) is int:
        if a.bit_length() + b.bit_length() > 4 * _MAX_SIZE:  # keep big-int work linear-ish
            raise OverflowError("numbers too large for the judge")
    if op == "*":
        for seq, n in ((a, b), (b, a)):
            if isinstance(seq, (str, bytes, list, tuple)) and type(n) is int:
                if n * len(seq) > _MAX_SIZE:
                    raise OverflowError("repetition too large for the judge")
    return _check_size(_BIN_OPS[op](a, b))


def evaluate(template: tuple, pull: Callable[[int], Any]) -> Any:
    """The value of ``template``, with ``pull(j)`` giving hole ``j``'s value when needed.

    Holes are pulled in exactly the order Python evaluates the original expression,
    short-circuits included (``and``, ``or``, comparison chains, ``x if c else y``).
    Exceptions (a ``TypeError`` of a comparison, a value too large) propagate: the caller fails
    the assertion.
    """
    tag = template[0]
    if tag == "h":
        return pull(template[1])
    if tag == "c":
        return template[1]
    if tag == "t":
        return _TYPES[template[1]]
    if tag == "u":
        v = evaluate(template[2], pull)
        op = template[1]
        if op == "not":
            return not v
        return _check_size({"-": operator.neg, "+": operator.pos, "~": operator.invert}[op](v))
    if tag == "b":
        a = evaluate(template[2], pull)
        return _binop(template[1], a, evaluate(template[3], pull))
    if tag == "and":
        v = True
        for t in template[1]:
            v = evaluate(t, pull)
            if not v:
                return v
        return v
    if tag == "or":
        v = False
        for t in template[1]:
            v = evaluate(t, pull)
            if v:
                return v
        return v
    if tag == "cmp":
        left = evaluate(template[1], pull)
        for op, t in template[2]:
            right = evaluate(t, pull)
            if not _CMP[getattr(ast, op)](left, right):
                return False
            left = right
        return True
    if tag == "if":
        return evaluate(template[2] if evaluate(template[1], pull) else template[3], pull)
    if tag in ("tuple", "list", "set"):
        items = [evaluate(t, pull) for t in template[1]]
        return {"tuple": tuple, "list": list, "set": set}[tag](items)
    if tag == "sub":
        v = evaluate(template[1], pull)
        return v[evaluate(template[2], pull)]
    if tag == "slice":
        v = evaluate(template[1], pull)
        return v[slice(*[evaluate(t, pull) for t in template[2]])]
    if tag == "call":
        name = template[1]
        fn = _MATH[name[5:]] if name.startswith("math.") else _CALLS[name]
        args = [evaluate(t, pull) for t in template[2]]
        kwargs = {a: evaluate(t, pull) for a, t in template[3]}
        if name in ("str", "repr") and any(isinstance(a, Opaque) for a in args):
            raise TypeError(f"{name}() of an object the judge cannot see")
        for a in args:  # int <-> decimal text is quadratic: refuse what would take long
            if (type(a) is int and a.bit_length() > _MAX_SIZE and name in ("str", "repr")) or (
                type(a) is str and len(a) > _MAX_SIZE // 3 and name in ("int", "float")
            ):
                raise OverflowError(f"{name}() of a value too large for the judge")
        if name == "type":
            return type(args[0]) if not isinstance(args[0], Opaque) else Opaque
        return _check_size(fn(*args, **kwargs))
    raise ValueError(f"unknown template {tag!r}")


_INF = float("inf")


def unreached(sites: list, count: dict, truths: dict, arms: dict) -> str | None:
    """What the test's process should have reached and did not (``None``: nothing).

    ``count[k]``: how often site ``k`` was reported; ``truths[k]``: ``[true, false]``, how
    often branch site ``k`` was judged each way; ``arms[a]``: how often the process says arm
    ``a`` (a ``for`` iteration, a handler, a ``match`` case) was entered. Each site must be
    reached as often as the flow the reported values decide reaches it: once per entry of its
    arm, less one per ``break``/``continue`` before it in that arm and per exception caught by
    a ``try`` around it (a handler entered), a ``while`` condition once more per iteration;
    each ``if``/``while``/``match`` must be decided as often as it is reached; and a site that
    is not under ``if``/``try``/``while``/``match`` at least once (the rule before flow).
    """
    flow = getattr(sites, "flow", None)
    if flow is None:
        for k, site in enumerate(sites):
            if site[2] and not count.get(k):
                return f"{_label(sites, k)} was never checked"
        return None
    descs, tries, loops = flow["arms"], flow["tries"], flow["loops"]
    memo: dict = {}

    def caught(t):
        return sum(entered(h) for h in tries[t]["handlers"])

    total_caught = None

    def need(pos, clamp=True):
        nonlocal total_caught
        arm, jumps, around, in_def = pos
        if arm in jumps:
            return 0
        e = entered(arm) - sum(entered(j) for j in jumps)
        for t in around:
            e -= _INF if t == "with" else caught(t)
        if in_def:
            if total_caught is None:
                total_caught = sum(caught(t) for t in range(len(tries)))
            e -= total_caught + (_INF if flow["any_with"] else 0)
        return max(e, 0) if clamp else e

    def entered(a):
        if a in memo:
            return memo[a]
        memo[a] = 0  # no cycle is possible (an arm's count depends on outer arms only)
        d = descs[a]
        kind = d[0]
        if kind == "top":
            n = 1
        elif kind in ("T", "F"):
            n = truths.get(d[1], (0, 0))[kind == "F"]
        elif kind == "ev":
            n = arms.get(a, 0)
        elif kind == "reach":
            n = need(tries[d[1]]["pos"])
        elif kind == "telse":
            t = tries[d[1]]
            n = 0 if t["jumpy"] else max(need(t["pos"]) - caught(d[1]), 0)
        elif kind == "exit":
            loop = loops[d[1]]
            n = max(need(loop["pos"]) - sum(entered(b) for b in loop["breaks"]), 0)
        else:
            n = 0
        memo[a] = n
        return n

    extra = {}
    for loop in loops:  # a while condition is decided again after each iteration
        if loop["branch"] is not None:
            extra[loop["branch"]] = loop

    for k, site in enumerate(sites):
        pos = flow["pos"][k]
        if k in extra:
            loop = extra[k]
            want = need(pos, clamp=False) + truths.get(k, (0, 0))[0]
            want -= sum(entered(b) for b in loop["breaks"])
        else:
            want = need(pos)
        want = max(want, 1 if site[2] else 0)
        got = count.get(k, 0)
        if got < want:
            if not got:
                return f"{_label(sites, k)} was never checked"
            return f"{_label(sites, k)} was checked {got} times, its flow reaches it {int(want)}"
    for n, group in enumerate(flow["groups"]):
        want = need(group["pos"])
        if sum(entered(a) for a in group["arms"]) < want:
            return f"match statement {n} was never decided"
    return None


def _label(sites, k):
    kind = sites[k][0]
    return {"branch": "condition", "call": "statement"}.get(kind, "assertion") + f" {k}"
