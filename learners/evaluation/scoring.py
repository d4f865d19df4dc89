"""Scoring benchmark completions: code extraction, verdicts and unbiased pass@k (Chen et al.
2021, arXiv 2107.03374), per-benchmark summaries and their markdown table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from learners.evaluation.benchmarks.registry import EvalItem
from sage_env.text.parsing import extract_code
from sage_env.verifiers import CodeVerifier, MathVerifier


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021, arXiv 2107.03374, Eq. 1): ``1 - C(n-c, k) / C(n, k)``.

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k / i)`` for numerical stability.

    Args:
        n: Samples drawn for the item.
        c: Correct samples among them.
        k: The k of pass@k (``k <= n``).

    Raises:
        ValueError: if ``k > n`` or ``c`` is outside [0, n].
    """
    if not 0 <= c <= n or k > n or k < 1:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def program_for(item: EvalItem, completion: str) -> str | None:
    """The program to test for a code completion.

    The last fenced block (or the whole text when it parses); if it does not define the entry
    point, the completion is treated as a continuation of the item's prompt. Imports of the
    prompt are kept in front.
    """
    code = extract_code(completion, item.entry_point)
    if code is not None and (item.entry_point is None or f"def {item.entry_point}" in code):
        imports = "\n".join(
            line for line in item.code_prefix.splitlines() if line.startswith(("import ", "from "))
        )
        return f"{imports}\n{code}" if imports else code
    if item.code_prefix:  # a continuation of the prompt: a fenced body, or the raw text
        body = code if code is not None and "```" in completion else completion
        return item.code_prefix + body
    return code


def score(
    item: EvalItem, completion: str, math_verifier: MathVerifier, code_verifier: CodeVerifier
) -> tuple[bool, dict]:
    """Score one completion: ``(correct, record)``; never raises on model output."""
    if item.domain == "math":
        res = math_verifier.verify(completion, item.answer or "")
        return res.score >= 1.0, {"status": res.status, "reason": res.reason}
    if item.domain == "exec":
        return score_execution(item, completion, getattr(code_verifier, "timeout_s", 10.0))
    program = program_for(item, completion)
    if program is None:
        return False, {"status": "invalid", "reason": "no code found"}
    res = code_verifier.verify(program, item.tests, item.test_setup)
    return res.score >= 1.0, {
        "status": res.status,
        "reason": res.reason,
        "passed": res.passed,
        "total": res.total,
    }


def score_execution(item: EvalItem, completion: str, timeout_s: float = 10.0) -> tuple[bool, dict]:
    """Score a CRUXEval completion; never raises on model output.

    CRUXEval-O: the last ```` ```output ```` block (else the last fenced block) is a Python
    literal equal to ``f(input)`` (values, parsed on the judge side). CRUXEval-I: ``f`` is run
    in the sandbox on the last ```` ```input ```` block (else the last fenced block), which
    may be any argument list that passes
    :func:`~sage_env.verifiers.program_checks.safe_input_expression` (CRUXEval's rule is
    ``f(<input>) == <output>``); its output must equal the gold output.
    """
    from sage_env.text.parsing import last_fenced
    from sage_env.verifiers import answer_checks

    def block(tag: str) -> str | None:
        found = last_fenced(completion, tag)
        return found if found is not None else last_fenced(completion, None)

    if item.benchmark == "cruxeval_i":
        # CRUXEval's own rule, ``f(<input>) == <output>``: Python's ``==``, one run
        res = answer_checks.check_abduction(
            block("input"), item.program, item.answer or "", timeout_s=timeout_s,
            expressions=True, strict_types=False, verdict_runs=1,
        )  # fmt: skip
    else:
        res = answer_checks.check_deduction(block("output"), item.answer or "", strict_types=False)
    return res.score >= 1.0, {"status": res.status, "reason": res.reason}


@dataclass
class BenchmarkResult:
    """Scores of one benchmark: ``pass_at`` maps k to the mean unbiased pass@k."""

    benchmark: str
    items: int
    samples: int
    pass_at: dict[int, float]
    records: list[dict] = field(default_factory=list)
    contaminated: bool | None = None
    deviation: str | None = None
    """How this run departs from the benchmark's own protocol (``None``: it does not)."""


def summarise(
    benchmark: str, correct: list[list[bool]], records: list[dict], ks: tuple[int, ...] = (1, 5, 10)
) -> BenchmarkResult:
    """Mean pass@k over items for every k <= samples (``correct[i][j]``: item i, sample j)."""
    n = len(correct[0]) if correct else 0
    pass_at = (
        {k: sum(pass_at_k(n, sum(c), k) for c in correct) / len(correct) for k in ks if 1 <= k <= n}
        if correct
        else {}
    )
    return BenchmarkResult(benchmark, len(correct), n, pass_at, records)


def markdown_table(results: list[BenchmarkResult]) -> str:
    """A markdown table: benchmark, items, samples, pass@k columns, contamination flag."""
    ks = sorted({k for r in results for k in r.pass_at})
    head = "| benchmark | items | samples | " + " | ".join(f"pass@{k}" for k in ks) + " | note |"
    lines = [head, "|" + "---|" * (4 + len(ks))]
    for r in results:
        cells = [f"{100 * r.pass_at[k]:.1f}" if k in r.pass_at else "-" for k in ks]
        note = "; ".join(
            n for n in ("overlaps the seed set" if r.contaminated else "", r.deviation or "") if n
        )
        lines.append(
            f"| {r.benchmark} | {r.items} | {r.samples} | " + " | ".join(cells) + f" | {note} |"
        )
    return "\n".join(lines)


def result_dict(r: BenchmarkResult) -> dict:
    """JSON-safe summary (without per-item records)."""
    d = asdict(r)
    d.pop("records")
    d["pass_at"] = {f"pass@{k}": v for k, v in r.pass_at.items()}
    return d
