"""The assert rewriter: every ``assert`` of a test becomes a call the judge can check.

A harness module (runs inside the sandbox): standard library only.
"""

from __future__ import annotations

import ast


def rewrite_asserts(src: str) -> tuple[str, list[tuple[str, object]]]:
    """Rewrite each ``assert`` of the test ``src``; the expected literals stay with the caller.

    Returns ``(new_source, sites)`` where ``sites[k]`` is ``("eq", expected)`` for
    ``assert X == <literal>`` (or ``<literal> == X``): the call ``__sage_check__(k, X)`` sends
    only ``X``; or ``("truthy", None)`` for any other assert, sent as
    ``__sage_check__(k, E, True)`` with a top-level ``L == R`` in ``E`` made type-strict
    (``__sage_eq__(L, R)``); or ``("plus", atol)`` for ``assert __sage_plus__(X, <atol>)``:
    ``X`` is sent like an ``eq`` value and compared, with EvalPlus's rule
    (:func:`~sage_env.sandbox.compare.plus_equal`), against the value the same expression
    takes in the reference process (the part of ``setup`` after
    :data:`~sage_env.sandbox.report.REFERENCE_MARKER`).

    Raises:
        SyntaxError: If ``src`` does not parse.
    """
    tree = ast.parse(src, "<test>", "exec")
    sites = []

    def literal(node):
        try:
            return True, ast.literal_eval(node)
        except Exception:
            return False, None

    def plus(test):
        # ("plus", atol) for a well-formed __sage_plus__(X, <atol literal>), else None
        if not (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "__sage_plus__"
            and len(test.args) == 2
            and not test.keywords
        ):
            return None
        ok, atol = literal(test.args[1])
        return ("plus", float(atol)) if ok and type(atol) in (int, float) else None

    class T(ast.NodeTransformer):
        def visit_Assert(self, node):
            self.generic_visit(node)
            test = node.test
            k = len(sites)
            site = plus(test)
            if site is not None:
                sites.append(site)
                call = ast.Call(
                    ast.Name("__sage_check__", ast.Load()), [ast.Constant(k), test.args[0]], []
                )
                return ast.copy_location(ast.Expr(call), node)
            if (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq)
            ):
                left, right = test.left, test.comparators[0]
                okr, vr = literal(right)
                okl, vl = literal(left) if not okr else (False, None)
                if okr or okl:
                    sites.append(("eq", vr if okr else vl))
                    value = left if okr else right
                    call = ast.Call(
                        ast.Name("__sage_check__", ast.Load()), [ast.Constant(k), value], []
                    )
                    return ast.copy_location(ast.Expr(call), node)
                test = ast.Call(ast.Name("__sage_eq__", ast.Load()), [left, right], [])
            sites.append(("truthy", None))
            call = ast.Call(
                ast.Name("__sage_check__", ast.Load()),
                [ast.Constant(k), test, ast.Constant(True)],
                [],
            )
            return ast.copy_location(ast.Expr(call), node)

    tree = ast.fix_missing_locations(T().visit(tree))
    return ast.unparse(tree), sites
