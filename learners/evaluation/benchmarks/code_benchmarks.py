"""Code benchmarks: HumanEval, HumanEval+, MBPP (sanitized), MBPP+.

Scored by running the tests in the sandbox (:class:`~sage_env.verifiers.CodeVerifier`);
the plus variants follow EvalPlus (:mod:`learners.evaluation.benchmarks.evalplus`).
"""

from __future__ import annotations

import ast

from learners.evaluation.benchmarks.evalplus import mbpp_plus_inputs, plus_tests
from learners.evaluation.benchmarks.registry import EvalItem, register_benchmark

CODE_INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function in one ```python "
    "code block.\n\n"
)


def _prompt_helpers(prompt: str, entry_point: str) -> str:
    """The prompt's imports and functions other than ``entry_point``, as source text."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return ""
    parts = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != entry_point
        ):
            parts.append(ast.get_source_segment(prompt, node) or "")
    return "\n".join(p for p in parts if p)


def _humaneval_tests(row: dict) -> list[str]:
    # The test re-defines the prompt's helpers (HumanEval/32's ``poly``, /38's
    # ``encode_cyclic``, /50's ``encode_shift``) in its own namespace: a program that
    # redefines them (``encode_shift = identity`` with ``decode_shift = identity``) changes
    # its own functions, never the ones the test checks it with.
    helpers = _prompt_helpers(row.get("prompt", ""), row["entry_point"])
    head = f"{helpers}\n" if helpers else ""
    return [f"{head}{row['test']}\ncheck({row['entry_point']})"]



def _called(assert_src: str) -> str | None:
    """The function under test in an assert.

    The first non-builtin name called, else the first name called (MBPP 126 names its
    function ``sum``).
    """
    import builtins

    try:
        tree = ast.parse(assert_src)
    except SyntaxError:
        return None
    names = [
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    return next((n for n in names if not hasattr(builtins, n)), names[0] if names else None)


def _load_humaneval(
    name: str, rows: list[dict], plus_limit: int | None = None, **_: object
) -> list[EvalItem]:
    items = []
    for r in rows:
        if name == "humaneval":
            setup, tests = "", _humaneval_tests(r)
        else:
            setup, tests = plus_tests(r, plus_limit)
        items.append(
            EvalItem(
                name,
                r["task_id"],
                "code",
                CODE_INSTRUCTION + r["prompt"],
                tests=tests,
                test_setup=setup,
                entry_point=r["entry_point"],
                code_prefix=r["prompt"],
                text=r["prompt"],
            )
        )
    return items


def _load_mbpp(name: str, rows: list[dict], **_: object) -> list[EvalItem]:
    items = []
    for r in rows:
        if not 11 <= int(r["task_id"]) <= 510:  # the test split
            continue
        tests = list(r["test_list"])
        items.append(
            EvalItem(
                name,
                str(r["task_id"]),
                "code",
                f"{r['prompt']}\nYour code should pass this test:\n{tests[0]}"
                "\n\nReply with the function in one ```python code block.",
                tests=tests,
                test_setup="\n".join(r.get("test_imports") or []),
                entry_point=_called(tests[0]),
                text=r["prompt"],
            )
        )
    return items


def _load_mbpp_plus(
    name: str, rows: list[dict], plus_limit: int | None = None, **_: object
) -> list[EvalItem]:
    items = []
    for r in rows:
        r = {
            **r,
            "base_input": mbpp_plus_inputs(r["task_id"], r["base_input"]),
            "plus_input": mbpp_plus_inputs(r["task_id"], r["plus_input"]),
        }
        setup, tests = plus_tests(r, plus_limit)
        items.append(
            EvalItem(
                name,
                r["task_id"],
                "code",
                r["prompt"].strip().strip('"').strip()
                + "\n\nReply with the function in one ```python code block.",
                tests=tests,
                test_setup=setup,
                entry_point=r["entry_point"],
                text=r["prompt"],
            )
        )
    return items


register_benchmark("humaneval", _load_humaneval, "code/HumanEval.jsonl.gz")
register_benchmark("humaneval_plus", _load_humaneval, "code/HumanEvalPlus-v0.1.10.jsonl.gz")
register_benchmark("mbpp", _load_mbpp, "code/sanitized-mbpp.json")
register_benchmark("mbpp_plus", _load_mbpp_plus, "code/MbppPlus-v0.2.0.jsonl.gz")
