"""LiveCodeBench (code generation lite, release v5): loaded from the Hugging Face hub only
(its test cases are not shipped)."""

from __future__ import annotations

import json
from typing import Any

from learners.evaluation.benchmarks.registry import EvalItem, register_benchmark

def _livecodebench() -> list[EvalItem]:  # pragma: no cover - needs a network
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise RuntimeError(
            "livecodebench needs `pip install datasets` and a network: its "
            "test cases are not shipped locally"
        ) from exc
    try:
        rows = load_dataset(
            "livecodebench/code_generation_lite",
            split="test",
            version_tag="release_v5",
            trust_remote_code=True,
        )
    except Exception as exc:
        raise RuntimeError(f"could not load livecodebench from the hub: {exc}") from exc
    items = []
    for r in rows:
        tests = []
        for case in json.loads(r["public_test_cases"]):
            if case.get("testtype") == "stdin":
                tests.append(
                    f"import subprocess, sys\n_out = subprocess.run([sys.executable, "
                    f"'solution.py'], input={case['input']!r}, capture_output=True, "
                    f"text=True, timeout=10).stdout\n"
                    f"assert _out.split() == {case['output']!r}.split()"
                )
        if tests:
            items.append(
                EvalItem(
                    "livecodebench",
                    r["question_id"],
                    "code",
                    r["question_content"] + "\n\nWrite a Python program that "
                    "reads stdin and writes stdout, in one ```python block.",
                    tests=tests,
                )
            )
    return items


@register_benchmark("livecodebench")
def _load(name: str, rows: Any, source: str = "auto", **_: object) -> list[EvalItem]:
    if source == "local":
        raise ValueError("livecodebench has no local test cases: use --source auto or hub")
    return _livecodebench()

