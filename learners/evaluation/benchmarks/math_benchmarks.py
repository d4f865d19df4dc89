"""Math benchmarks: GSM8K, MATH-500, AIME 2024/2025, AMC 2023, OlympiadBench.

Each item is the problem plus :data:`MATH_INSTRUCTION`; the gold answer is scored by
:class:`~sage_env.verifiers.MathVerifier`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from learners.evaluation.benchmarks.registry import EvalItem, register_benchmark

MATH_INSTRUCTION = "\n\nPlease reason step by step, and put your final answer within \\boxed{}."


def gsm8k_gold(answer: str) -> str:
    """The number after ``####`` with thousands separators removed."""
    return answer.split("####")[-1].strip().replace(",", "")


def _math(name: str, rows: list[dict], q: str, a: Callable[[dict], str]) -> list[EvalItem]:
    return [
        EvalItem(
            name,
            str(r.get("id", r.get("unique_id", i))),
            "math",
            r[q] + MATH_INSTRUCTION,
            answer=a(r),
            text=r[q],
        )
        for i, r in enumerate(rows)
    ]


def _olympiad_answer(r: dict) -> str:
    """OlympiadBench's gold: its ``final_answer`` values without ``$``, joined by ``", "``.

    ``final_answer`` is a JSON list in the Qwen2.5-Math copy (``["$2^{1009}$"]``); a copy that
    stores it as a stringified list (``"['$2^{1009}$']"``) or a bare string also works.
    """
    values = r["final_answer"]
    if isinstance(values, str):
        try:
            values = ast.literal_eval(values)
        except (ValueError, SyntaxError):
            pass
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    return ", ".join(_olympiad_value(v) for v in values)


def _olympiad_value(value: object) -> str:
    r"""One OlympiadBench answer as LaTeX: ``$`` delimiters and a closing period removed.

    Some values hold several ``$...$`` spans (``"$69$,$84$"``) or stray ones (``"$221,$8$"``,
    item 2349) and one ends in a period (``"$(-\infty, 0) \cup\{1\}$."``, item 1970).
    """
    return str(value).replace("$", "").strip().rstrip(".").strip()


def _amc_answer(r: dict) -> str:
    value = float(r["answer"])
    return str(int(value)) if value.is_integer() else str(value)


def _load_gsm8k(name: str, rows: list[dict], **_: object) -> list[EvalItem]:
    return _math(name, rows, "question", lambda r: gsm8k_gold(r["answer"]))


def _load_plain(name: str, rows: list[dict], **_: object) -> list[EvalItem]:
    return _math(name, rows, "problem", lambda r: str(r["answer"]))


def _load_amc(name: str, rows: list[dict], **_: object) -> list[EvalItem]:
    return _math(name, rows, "problem", _amc_answer)


def _load_olympiad(name: str, rows: list[dict], **_: object) -> list[EvalItem]:
    return _math(name, rows, "question", _olympiad_answer)


register_benchmark("gsm8k", _load_gsm8k, "math/gsm8k_test.jsonl")
register_benchmark("math500", _load_plain, "math/math500_test.jsonl")
register_benchmark("aime24", _load_plain, "math/aime24_test.jsonl")
register_benchmark("aime25", _load_plain, "math/aime25_test.jsonl")
register_benchmark("amc23", _load_amc, "math/amc23_test.jsonl")
register_benchmark("olympiadbench", _load_olympiad, "math/olympiadbench_test.jsonl.gz")
