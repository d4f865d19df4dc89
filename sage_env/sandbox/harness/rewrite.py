"""The assert rewriter: each ``assert`` of a test becomes a site that reports values.

A harness module (runs inside the sandbox): standard library only.

Every ``assert`` of a test is split in two. What the judge can compute itself becomes a
*template* (:mod:`~sage_env.sandbox.harness.template`) that stays with the judge; every other
sub-expression (a call of the program, a name, an attribute ...) becomes a *hole*, numbered
in the order Python evaluates it. The rewritten test sends only the values of the holes, in
that order, and then that the site was reached; the judge re-evaluates the template on those
values (:func:`~sage_env.sandbox.harness.template.evaluate`) and so decides every assertion
itself. A top-level statement that is only a call (``f(1, 2)``, ``check(candidate)``) becomes
a site too: it reports that the call returned. ``if``/``while`` conditions become branch
sites, and :class:`Sites` records how control flows to each site, which
:func:`~sage_env.sandbox.harness.flow.unreached` reads.

Why one file of more than 500 lines: :class:`_SiteRewriter` is one AST pass, each of its
visits the rule of one statement kind, and :func:`rewrite_asserts` is its only entry.
"""

from __future__ import annotations

import ast
import re

from sage_env.sandbox.harness.template import (
    JUDGE_CALLS,
    JUDGE_TYPES,
    TemplateBuilder,
    short_circuits,
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


def _wrappers(tree: ast.AST, program: set[str]) -> set[str]:
    """Builtins the program binds that the test wraps around a call of another of its names.

    ``set(similar_elements(...))``: that ``set`` is the test's builtin, not the function under
    test, in every call of the test (else a program defining ``set`` would own both sides of
    ``set(f(x)) == set((4, 5))``).
    """
    if program.isdisjoint(JUDGE_CALLS):
        return set()  # no builtin of the judge's is the program's
    fns = program - set(JUDGE_CALLS) - set(JUDGE_TYPES)
    found = set()
    for node in _walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in JUDGE_CALLS
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


#: A word that is one of the builtins the judge evaluates itself (``JUDGE_CALLS``,
#: ``JUDGE_TYPES``).
_JUDGE_WORDS = re.compile(
    r"\b(?:" + "|".join(sorted(set(JUDGE_CALLS) | set(JUDGE_TYPES))) + r")\b"
)


def needs_program_names(src: object) -> bool:
    """Whether the names a program binds can change how the test ``src`` is rewritten.

    They are consulted only for a name of the test that is one of the judge's builtins
    (``JUDGE_CALLS``, ``JUDGE_TYPES``): an ASCII test in which no such word occurs at all (in code,
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
        b = TemplateBuilder(-1, self.stored, self.math_ok)
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
            b = TemplateBuilder(k, self.stored, self.math_ok)
            _, e = b.hole(node.test.args[0])
            self.sites.append(("plus", ("h", 0), required, atol))
            args = [ast.Constant(k), e, ast.Constant(False)]
        else:
            b = TemplateBuilder(k, self.stored, self.math_ok)
            template, e = b.build(node.test)
            self.sites.append(("assert", template, required, None))
            if short_circuits(template):
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
