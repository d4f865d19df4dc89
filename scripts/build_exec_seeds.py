"""Build ``sage_env/data/exec_seeds.jsonl``: seed programs for AZR's execution buffers.

Each code seed of ``sage_env/data/seeds.jsonl`` (HumanEval, MBPP train) gives one record when:

* its reference solution defines its entry point, which is renamed to ``f`` (a word-boundary
  substitution of the entry point's name), and uses no module of
  :data:`sage_env.verifiers.allow_list.AZR_BANNED_MODULES`;
* its tests call the entry point with literal arguments (``candidate(1, [2])``); up to 6
  distinct such argument lists are kept, in test order;
* :func:`sage_env.verifiers.executor.validate_program` accepts the renamed program on those
  inputs (runs in the sandbox, deterministic over two runs, literal outputs that round-trip).

The outputs stored are the sandboxed executor's, never the test's expected values. The
induction message is the first sentence of the seed's description (the docstring for
HumanEval, the prompt for MBPP). Records: ``{"id", "program", "inputs", "outputs",
"message"}``. Deterministic given the seeds file.

Usage::

    python scripts/build_exec_seeds.py [--out sage_env/data/exec_seeds.jsonl]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

from sage_env.tasks.task import load_seeds
from sage_env.verifiers.executor import validate_program
from sage_env.verifiers.literals import format_args
from sage_env.verifiers.program_checks import forbidden_import

MAX_INPUTS = 6
MAX_PROGRAM_CHARS = 1500


def literal_calls(tests: list[str], entry: str) -> list[tuple]:
    """Distinct literal argument tuples of calls to ``entry`` / ``candidate`` in ``tests``."""
    found: list[tuple] = []
    for src in tests:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in (entry, "candidate") or node.keywords:
                continue
            try:
                args = tuple(ast.literal_eval(a) for a in node.args)
            except (ValueError, TypeError, SyntaxError):
                continue
            if args and args not in found:
                found.append(args)
    return found


def message_of(task) -> str:
    """First sentence of the task's natural-language description."""
    text = task.prompt
    m = re.search(r'"""(.*?)(?:>>>|"""|Example|For example)', text, re.DOTALL)
    if m:
        text = m.group(1)
    text = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first[:300]


def main() -> None:
    """Build the file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="sage_env/data/exec_seeds.jsonl")
    args = ap.parse_args()
    records = []
    for task in load_seeds():
        if task.domain != "code" or not task.reference_solution or not task.entry_point:
            continue
        entry = task.entry_point
        program = re.sub(rf"\b{re.escape(entry)}\b", "f", task.reference_solution).strip()
        if len(program) > MAX_PROGRAM_CHARS or forbidden_import(program):
            continue
        calls = literal_calls(task.tests, entry)[:MAX_INPUTS]
        if not calls:
            continue
        inputs = [format_args(c) for c in calls]
        check = validate_program(program, inputs)
        if not check.valid:
            print(f"skip {task.task_id}: {check.reason}")
            continue
        records.append(
            {
                "id": task.task_id,
                "program": program,
                "inputs": check.inputs,
                "outputs": check.outputs,
                "message": message_of(task),
            }
        )
    out = Path(args.out)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    print(f"wrote {len(records)} seed programs to {out}")


if __name__ == "__main__":
    main()
