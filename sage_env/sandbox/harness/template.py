"""The judge's templates: what an assertion's template may hold, how one is built, its value.

A harness module (runs inside the sandbox): standard library only.

A *template* is the part of an assertion the judge computes itself: literals, comparisons,
``and``/``or``/``not``, arithmetic and a few pure builtins (:data:`JUDGE_CALLS`, the
``math`` functions of ``_MATH``, the types of :data:`JUDGE_TYPES`); every other
sub-expression is a *hole* ``("h", j)``, whose value the test's process reports.
:class:`TemplateBuilder` turns an expression into its template (the rewriter,
:mod:`~sage_env.sandbox.harness.rewrite`, calls it per site) and :func:`evaluate` computes a
template from the holes' values (the judge, :mod:`~sage_env.sandbox.harness.verdict`). Both
halves of that contract sit in this one file, so that neither can accept a node the other
does not know.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from sage_env.sandbox.harness.report import Opaque

#: Builtins the judge evaluates itself (when the test never binds the name).
JUDGE_CALLS: dict[str, Callable[..., Any]] = {
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
JUDGE_TYPES: dict[str, type] = {
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


class TemplateBuilder:
    """Builds one site's template; holes become ``__sage_v__(k, j, <expr>)`` calls."""

    def __init__(self, k: int, stored: set[str], math_ok: bool) -> None:
        self.k, self.stored, self.math_ok, self.n = k, stored, math_ok, 0
        self.calls: list[ast.expr] = []

    def hole(self, node: ast.expr) -> tuple[tuple, ast.expr]:
        """``node`` as the next hole: ``(("h", j), __sage_v__(k, j, node))``."""
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
        if isinstance(node, ast.Name) and node.id in JUDGE_TYPES and node.id not in self.stored:
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
            ok = f.id in JUDGE_CALLS and f.id not in self.stored
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
                isinstance(n, ast.Name) and n.id in JUDGE_TYPES and n.id not in self.stored
                for n in names
            )
        return True


def short_circuits(template: tuple) -> bool:
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
    return any(short_circuits(c) for c in children)


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
        return JUDGE_TYPES[template[1]]
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
        fn = _MATH[name[5:]] if name.startswith("math.") else JUDGE_CALLS[name]
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
