"""The code's layout holds (issue 24): no import cycle, no torch on ``import learners``, and
docs/design.md naming what exists. Length is reviewed, not gated: ``scripts/size_report.py``
lists long files and functions (issue 36 item 6), and its tests are here.

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
import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sage_env", "learners")

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
        "def f():\n    import sage_env.text.parsing\n"
    )
    assert imports_of("learners.x", path) == {"learners.types", "sage_env.text.parsing"}


def test_no_import_cycle_in_sage_env_or_learners():
    assert cycles(import_graph()) == []


def test_sage_env_never_imports_learners():
    graph = import_graph()
    wrong = {m: sorted(t for t in ts if t.startswith("learners"))
             for m, ts in graph.items() if m.startswith("sage_env")}
    assert {m: t for m, t in wrong.items() if t} == {}


LEARNERS_LAYERS = (
    ("learners.cli", "learners.commands", "learners.__main__"),
    ("learners.training",),
    ("learners.evaluation", "learners.reports"),
    ("learners.algorithms",),
    ("learners.rollout",),
    ("learners.policy",),
    ("learners.engines",),
    ("learners.distributed",),
    ("learners.types", "learners.lazy", "learners.rng_state", "learners.memory",
     "learners.trl_solver"),
)
"""The map of docs/design.md, top to bottom (issue 50): a module imports only from its own
layer or the layers below it."""


def layer_of(module: str, layers=LEARNERS_LAYERS) -> int | None:
    """Index of ``module``'s layer in ``layers`` (0 is the top), or None if it has none."""
    for i, group in enumerate(layers):
        if any(module == g or module.startswith(g + ".") for g in group):
            return i
    return None


def upward_imports(graph: dict[str, set[str]], layers=LEARNERS_LAYERS) -> list[str]:
    """``"a -> b"`` for every import of ``graph`` from a lower layer to a higher one."""
    up = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module, layers)
        for target in sorted(targets):
            there = layer_of(target, layers)
            if here is not None and there is not None and there < here:
                up.append(f"{module} -> {target}")
    return up


def test_the_layer_check_finds_an_import_that_points_up():
    layers = (("a",), ("b",), ("c",))
    assert upward_imports({"a.x": {"b.y", "c"}, "b.y": {"c.z"}, "c.z": set()}, layers) == []
    assert upward_imports({"c.z": {"a.x"}, "b.y": {"b.w"}}, layers) == ["c.z -> a.x"]


def test_every_learners_module_has_a_layer():
    assert [m for m in MODULES if m.startswith("learners.") and layer_of(m) is None] == []


def test_learners_imports_point_down_the_layers():
    assert upward_imports(import_graph()) == []


@pytest.mark.parametrize(
    "code",
    [
        "import learners, sys; assert 'torch' not in sys.modules",
        "import learners.engines.registry, learners.training.preflight, sys; "
        "assert 'torch' not in sys.modules",
        "import sage_env.interactive.play, learners.cli, sys; assert 'torch' not in sys.modules",
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




def _size_report():
    path = ROOT / "scripts" / "size_report.py"
    spec = importlib.util.spec_from_file_location("size_report", path)
    mod = sys.modules["size_report"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_size_report_lists_long_files_and_functions_with_their_lengths(tmp_path):
    """Size is reviewed, not gated (issue 36 item 6): the report names what is long, exactly."""
    body = "\n".join(f"    x{i} = {i}" for i in range(90))
    (tmp_path / "big.py").write_text(
        f"class A:\n    def m(self):\n{textwrap.indent(body, '    ')}\n        return 0\n"
        f"def f():\n    def inner():\n{textwrap.indent(body, '    ')}\n        return 1\n"
        "    return inner\n"
        + "\n".join(f"y{i} = {i}" for i in range(400)) + "\n"
    )
    (tmp_path / "small.py").write_text("def g():\n    return 1\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    files, functions = _size_report().report([tmp_path], file_lines=500, function_lines=80)
    assert [(Path(x.path).name, x.name, x.lines) for x in files] == [
        ("big.py", "", 587), ("broken.py", "<syntax error>", 1)]
    assert [(x.name, x.lines) for x in functions] == [
        ("f", 94), ("A.m", 92), ("f.<locals>.inner", 92)]


def test_size_report_runs_on_the_packages_and_benchmarks_and_exits_zero():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "size_report.py"),
                          "--file-lines", "1", "--function-lines", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("files over 1 lines: ")
    assert "functions over 1 lines: " in out.stdout
    listed = {line.split()[1].split("/")[0] for line in out.stdout.splitlines()[1:]
              if line.startswith("  ")}
    assert listed == {"sage_env", "learners", "benchmarks"}


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
