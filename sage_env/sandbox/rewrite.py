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
    (``__sage_eq__(L, R)``).

    Raises:
        SyntaxError: If ``src`` does not parse.
    """
    # Rewrite each assert of a test. Returns (new_source, sites) where sites[k] is
    # ("eq", expected) for `assert X == <literal>` (X is sent, the literal stays here) or
    # ("truthy", None) for any other assert (its value, with == made type-strict, is sent).
    tree = ast.parse(src, "<test>", "exec")
    sites = []

    def literal(node):
        try:
            return True, ast.literal_eval(node)
        except Exception:
            return False, None

    class T(ast.NodeTransformer):
        def visit_Assert(self, node):
            self.generic_visit(node)
            test = node.test
            k = len(sites)
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
