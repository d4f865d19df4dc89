"""The code's layout holds (issue 24): no import cycle, no torch on ``import learners``,
files and functions of a readable size, and docs/design.md naming what exists.

The import graph is read from the source with :mod:`ast` (nothing is imported): every
``import`` / ``from ... import`` of a ``sage_env`` or ``learners`` module, at module level,
under ``if TYPE_CHECKING:`` and inside functions alike (a deferred import still ties two
modules together). ``from pkg import name`` is an edge to ``pkg.name`` when that is a module,
else to ``pkg``. Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, but
that implicit edge is not counted (every submodule would otherwise sit in a cycle with a
package ``__init__`` that re-exports it).
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sage_env", "learners")

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80

LONG_FILES = {
    # One concept each, said at the top of the file:
    "sage_env/sandbox/rewrite.py": "the assert rewriter and its evaluator: one contract",
    "sage_env/sandbox/judge.py": "the judge process (a split adds a harness module; see its top)",
    # TODO(issue 36, the house): split by concept when the layout is planned as a whole
    "sage_env/verifiers/execution.py": "the executor and its answer checks (AZR Sec. 3.3)",
    "sage_env/verifiers/program_checks.py": "the allow-list and the one AST walk that applies it",
    "sage_env/demonstrations.py": "warm-up demonstrations of every role (math answer programs)",
    "sage_env/verifiers/math_verifier.py": "math-verify in workers, warmed before the deadline",
}
"""Files allowed over :data:`MAX_FILE_LINES`, with the reason (or the TODO that removes it)."""

LONG_FUNCTIONS: set[tuple[str, str]] = set()
"""``(file, function)`` pairs allowed over :data:`MAX_FUNCTION_LINES`."""


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The longest module of ours that ``name`` (a dotted path) names or lies in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path) -> set[str]:
    """Our modules that ``module`` imports anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source
                     for a in node.names]
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports."""
    return {m: imports_of(m, p) for m, p in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_type_only_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_type_checking_import_is_an_edge(tmp_path):
    path = tmp_path / "x.py"
    path.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from learners.types import A\n"
        "def f():\n    import sage_env.parsing\n"
    )
    assert imports_of("learners.x", path) == {"learners.types", "sage_env.parsing"}


def test_no_import_cycle_in_sage_env_or_learners():
    assert cycles(import_graph()) == []


def test_sage_env_never_imports_learners():
    graph = import_graph()
    wrong = {m: sorted(t for t in ts if t.startswith("learners"))
             for m, ts in graph.items() if m.startswith("sage_env")}
    assert {m: t for m, t in wrong.items() if t} == {}


@pytest.mark.parametrize(
    "code",
    [
        "import learners, sys; assert 'torch' not in sys.modules",
        "import learners.engines.registry, learners.training.preflight, sys; "
        "assert 'torch' not in sys.modules",
        "import sage_env.play, learners.cli, sys; assert 'torch' not in sys.modules",
        "import learners, sys; learners.RolloutConfig; learners.Completion; "
        "assert 'torch' not in sys.modules",
    ],
)
def test_importing_learners_does_not_import_torch(code):
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_text_only_play_does_not_import_torch():
    code = (
        "import contextlib, io, sys\n"
        "from learners.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    rc = main(['play', '--players', 'scripted'])\n"
        "assert rc == 0 and 'challenger_0' in out.getvalue(), out.getvalue()[-500:]\n"
        "assert 'torch' not in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]




def _long_lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_source_file_over_the_limit_without_its_reason():
    over = {
        str(p.relative_to(ROOT)): _long_lines(p)
        for p in MODULES.values()
        if _long_lines(p) > MAX_FILE_LINES
    }
    assert sorted(set(over) - set(LONG_FILES)) == [], over
    stale = sorted(f for f in LONG_FILES if f not in over)
    assert stale == [], f"allow-listed but now short enough: drop them from LONG_FILES: {stale}"


def _functions(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.end_lineno - node.lineno + 1


def test_no_function_over_the_limit_but_the_documented_ones():
    over = {
        (str(p.relative_to(ROOT)), name): n
        for p in MODULES.values()
        for name, n in _functions(p)
        if n > MAX_FUNCTION_LINES
    }
    assert sorted(set(over) - LONG_FUNCTIONS) == [], over
    stale = sorted(f for f in LONG_FUNCTIONS if f not in over)
    assert stale == [], f"allow-listed but now short enough: drop them: {stale}"


# --- docs/design.md -----------------------------------------------------------------------

DESIGN = ROOT / "docs" / "design.md"


def test_design_map_lists_every_module():
    text = DESIGN.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:sage_env|learners)(?:\.\w+)*)`", text))
    named |= {
        m.replace("/", ".").removesuffix(".py").removesuffix(".__init__")
        for m in re.findall(r"`((?:sage_env|learners)/[\w/]+(?:\.py)?)`", text)
    }
    missing = sorted(m for m in MODULES if m not in named)
    assert missing == [], f"docs/design.md does not name these modules: {missing}"


def test_every_symbol_design_names_exists():
    text = DESIGN.read_text(encoding="utf-8")
    checked = 0
    for ref in sorted(set(re.findall(r"`((?:sage_env|learners)\.[\w.]+)`", text))):
        if ref in MODULES:
            continue
        module = _resolve(ref)
        assert module is not None, ref
        obj = importlib.import_module(module)
        for attr in ref[len(module) + 1 :].split("."):
            assert hasattr(obj, attr), f"docs/design.md names {ref}, which does not exist"
            obj = getattr(obj, attr)
        checked += 1
    assert checked >= 20  # the map names the main symbols, not only modules
