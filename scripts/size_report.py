"""List the long source files and functions of the packages, for review (issue 36 item 6).

Size is a reason to look, not a rule: a file or function is split when it holds two concepts,
never to get under a number. So no test fails on length; this script lists what is over the
review thresholds, longest first, and a reviewer reads those. (The layout rules a test does
enforce are in ``tests/repo/test_layout.py``: no import cycle, no torch on ``import learners``,
``docs/design.md`` naming every module.)

Usage::

    python scripts/size_report.py                       # every folder of PATHS, default limits
    python scripts/size_report.py --file-lines 400 --function-lines 60 sage_env/sandbox
    python scripts/size_report.py --json > sizes.json   # machine-readable
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE_LINES = 500
"""Review threshold for a file, in lines."""
FUNCTION_LINES = 80
"""Review threshold for a function or method (``def`` to its last line), in lines."""
PATHS = ("sage_env", "learners", "benchmarks")
"""Folders scanned when none is given: the packages and the benchmarks (the experiments and the
speed and memory measurements)."""


@dataclass(frozen=True)
class Long:
    """One file or function over its threshold.

    Attributes:
        path: The file, relative to the scanned root when it lies under it.
        name: The function's qualified name (``Class.method``, ``outer.<locals>.inner``);
            ``""`` for a whole file.
        lines: Its length in lines.
    """

    path: str
    name: str
    lines: int


def _functions(tree: ast.AST, prefix: str = ""):
    """``(qualified name, lines)`` of every function under ``tree``, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".<locals>.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def report(
    paths: list[Path], file_lines: int = FILE_LINES, function_lines: int = FUNCTION_LINES
) -> tuple[list[Long], list[Long]]:
    """The files over ``file_lines`` and the functions over ``function_lines``, longest first.

    Args:
        paths: Files or folders (searched for ``*.py``).
        file_lines: A file's review threshold (lines).
        function_lines: A function's review threshold (lines).

    Returns:
        ``(long_files, long_functions)``. A file that does not parse is listed as a long file
        with ``name="<syntax error>"`` rather than raising.
    """
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("*.py"))})
    long_files, long_functions = [], []
    for f in files:
        full = f.resolve()
        rel = full.relative_to(ROOT).as_posix() if full.is_relative_to(ROOT) else str(f)
        text = f.read_text(encoding="utf-8", errors="replace")
        n = len(text.splitlines())
        try:
            tree = ast.parse(text)
        except SyntaxError:
            long_files.append(Long(rel, "<syntax error>", n))
            continue
        if n > file_lines:
            long_files.append(Long(rel, "", n))
        long_functions += [Long(rel, q, k) for q, k in _functions(tree) if k > function_lines]
    key = lambda x: (-x.lines, x.path, x.name)  # noqa: E731
    return sorted(long_files, key=key), sorted(long_functions, key=key)


def main(argv: list[str] | None = None) -> int:
    """Print the report; exit status 0 whatever it finds (it informs, it does not gate)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[ROOT / p for p in PATHS])
    ap.add_argument("--file-lines", type=int, default=FILE_LINES)
    ap.add_argument("--function-lines", type=int, default=FUNCTION_LINES)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    files, functions = report(args.paths, args.file_lines, args.function_lines)
    if args.json:
        print(json.dumps({"files": [asdict(x) for x in files],
                          "functions": [asdict(x) for x in functions]}, indent=1))
        return 0
    print(f"files over {args.file_lines} lines: {len(files)}")
    for x in files:
        print(f"  {x.lines:5d}  {x.path}{'  ' + x.name if x.name else ''}")
    print(f"functions over {args.function_lines} lines: {len(functions)}")
    for x in functions:
        print(f"  {x.lines:5d}  {x.path}:{x.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
