"""Eval self-check: every benchmark's own gold, written as a model would write it, must score.

For each local benchmark of ``learners.evaluation`` this script reads the benchmark's raw file
itself (not through the loader), writes the benchmark's gold as a model's completion, and scores
it with :func:`learners.evaluation.score` against the items :func:`load_benchmark` builds: the
same path ``sage-env eval`` takes for model output. Anything under 100% is a bug in a loader,
the answer extraction or the scoring, or one of the :data:`EXCEPTIONS` that
``docs/write-ups/evaluation.md`` names and justifies (the table marks any other failure
"unexplained").

- Math (GSM8K, MATH-500, AIME24/25, AMC23, OlympiadBench): the final answer as the dataset
  gives it, in ``$\\boxed{...}$`` after a line of "reasoning".
- Code (HumanEval, HumanEval+, MBPP, MBPP+): the canonical solution (with the benchmark's
  prompt in front where the solution is only a body) in one python fence.
- CRUXEval-O / -I: the dataset's output in an ``output`` fence / its input in an ``input``
  fence (the input is then run through ``f`` in the sandbox).

Writes ``results/eval_selfcheck.json`` (per benchmark: items, passed, seconds, every failure
with its verdict) and ``results/eval_selfcheck.md`` (a table)::

    python -m benchmarks.eval_selfcheck.run                  # all ten, every plus input (as eval)
    python -m benchmarks.eval_selfcheck.run --benchmarks mbpp_plus --plus-limit all --out /tmp/x
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

from learners.evaluation.benchmarks import (  # noqa: E402
    BENCHMARK_FILES,
    BENCHMARKS,
    PLUS_MEMORY_MB,
    EvalItem,
    default_data_dir,
    load_benchmark,
)
from learners.evaluation.benchmarks.files import read_rows  # noqa: E402
from learners.evaluation.run import EvalConfig  # noqa: E402
from learners.evaluation.scoring import score  # noqa: E402
from sage_env.verifiers import CodeVerifier, MathVerifier  # noqa: E402

LOCAL_BENCHMARKS = tuple(b for b in BENCHMARKS if b != "livecodebench")
"""Every benchmark with local data (``livecodebench`` needs the hub and is not checked)."""

def boxed(answer: str) -> str:
    """A model-style completion ending in ``$\\boxed{answer}$``."""
    return (
        "Working through the problem step by step gives the result.\n\n"
        f"The final answer is $\\boxed{{{answer}}}$."
    )


def fenced(code: str) -> str:
    """A model-style completion holding ``code`` in one python fence."""
    return f"Here is the function.\n\n```python\n{code.strip()}\n```\n"


def _number(value: float | int | str) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _latex(answer: str) -> str:
    """An answer as a model writes it inside ``\\boxed{}``: no ``$``, no closing period."""
    return answer.replace("$", "").strip().rstrip(".").strip()


def _math_id(row: dict, index: int) -> str:
    return str(row.get("id", row.get("unique_id", index)))


def _with_prompt(row: dict) -> str:
    """HumanEval-style canonical solutions are bodies: put the prompt (signature) in front."""
    sol = row["canonical_solution"]
    return sol if f"def {row['entry_point']}" in sol else row["prompt"] + sol


GOLD: dict[str, tuple[Callable[[dict], str], Callable[[dict, int], str]]] = {
    # benchmark: (completion from a raw row, the row's item id as the loader names it)
    "gsm8k": (lambda r: boxed(r["answer"].split("####")[-1].strip()), _math_id),
    "math500": (lambda r: boxed(str(r["answer"])), _math_id),
    "aime24": (lambda r: boxed(str(r["answer"])), _math_id),
    "aime25": (lambda r: boxed(str(r["answer"])), _math_id),
    "amc23": (lambda r: boxed(_number(r["answer"])), _math_id),
    "olympiadbench": (
        lambda r: boxed(", ".join(_latex(a) for a in r["final_answer"])),
        _math_id,
    ),
    "humaneval": (lambda r: fenced(_with_prompt(r)), lambda r, i: r["task_id"]),
    "humaneval_plus": (lambda r: fenced(_with_prompt(r)), lambda r, i: r["task_id"]),
    "mbpp": (lambda r: fenced(r["code"]), lambda r, i: str(r["task_id"])),
    "mbpp_plus": (lambda r: fenced(_with_prompt(r)), lambda r, i: r["task_id"]),
    "cruxeval_o": (lambda r: f"It returns:\n```output\n{r['output']}\n```", lambda r, i: r["id"]),
    "cruxeval_i": (lambda r: f"One input:\n```input\n{r['input']}\n```", lambda r, i: r["id"]),
}
"""How each benchmark's gold is written as a model's completion, read from its raw rows."""


EXCEPTIONS: dict[str, str] = {}
"""Items whose gold may fail through no fault of the loaders, and why
(``docs/write-ups/evaluation.md``). Any other failure is a bug."""


@dataclass
class SelfCheck:
    """Self-check figures of one benchmark.

    Attributes:
        benchmark: Benchmark name.
        items: Items scored.
        passed: Items whose gold scored correct.
        seconds: Wall-clock time of the scoring.
        failures: ``{"item_id", "status", "reason"}`` of each item that did not score.
        plus_limit: Plus inputs per task (HumanEval+/MBPP+; ``None`` = all).
    """

    benchmark: str
    items: int
    passed: int
    seconds: float
    failures: list[dict] = field(default_factory=list)
    plus_limit: int | None = None

    @property
    def unexplained(self) -> list[dict]:
        """Failures not named in :data:`EXCEPTIONS`: each one is a bug."""
        return [f for f in self.failures if f["item_id"] not in EXCEPTIONS]

    @property
    def rate(self) -> float:
        """Share of items that scored, in [0, 1] (1 for no items)."""
        return self.passed / self.items if self.items else 1.0


def gold_pairs(
    name: str,
    data_dir: Path,
    limit: int | None = None,
    plus_limit: int | None = None,
    item_ids: Collection[str] | None = None,
) -> Iterator[tuple[EvalItem, str]]:
    """``(item, gold completion)`` for the first ``limit`` items of ``name`` (or ``item_ids``).

    Raises:
        KeyError: if a loaded item has no raw row with its id (a loader bug).
    """
    items = load_benchmark(name, data_dir, plus_limit=plus_limit)
    if item_ids is not None:
        items = [it for it in items if it.item_id in set(item_ids)]
    items = items[:limit]
    write, item_id = GOLD[name]
    rows = read_rows(data_dir / BENCHMARK_FILES[name])
    gold = {item_id(r, i): write(r) for i, r in enumerate(rows)}
    for item in items:
        yield item, gold[item.item_id]


def check_benchmark(
    name: str,
    data_dir: Path,
    math_verifier: MathVerifier,
    code_verifier: CodeVerifier,
    limit: int | None = None,
    plus_limit: int | None = None,
    parallel: int = 2,
    item_ids: Collection[str] | None = None,
) -> SelfCheck:
    """Score the gold of every item of ``name`` (see the module docstring)."""
    pairs = list(gold_pairs(name, data_dir, limit, plus_limit, item_ids))
    start = time.perf_counter()
    if pairs and pairs[0][0].domain in ("code", "exec") and parallel > 1:
        with ThreadPoolExecutor(max_workers=parallel) as ex:
            verdicts = list(
                ex.map(lambda p: score(p[0], p[1], math_verifier, code_verifier), pairs)
            )
    else:
        verdicts = [score(item, text, math_verifier, code_verifier) for item, text in pairs]
    seconds = time.perf_counter() - start
    failures = [
        {"item_id": item.item_id, "status": rec.get("status"), "reason": str(rec.get("reason"))}
        for (item, _), (ok, rec) in zip(pairs, verdicts)
        if not ok
    ]
    return SelfCheck(
        name,
        len(pairs),
        len(pairs) - len(failures),
        round(seconds, 2),
        failures,
        plus_limit if name.endswith("_plus") else None,
    )


def table(results: list[SelfCheck]) -> str:
    """A markdown table: benchmark, passed / items, rate, seconds, failing ids."""
    lines = [
        "| benchmark | passed / items | rate | seconds | plus inputs | failing items |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        ids = ", ".join(
            f["item_id"] + ("" if f["item_id"] in EXCEPTIONS else " (unexplained)")
            for f in r.failures[:8]
        )
        more = f" (+{len(r.failures) - 8})" if len(r.failures) > 8 else ""
        plus = "-" if not r.benchmark.endswith("_plus") else (r.plus_limit or "all")
        lines.append(
            f"| {r.benchmark} | {r.passed} / {r.items} | {100 * r.rate:.1f}% | {r.seconds} | "
            f"{plus} | {ids}{more} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[SelfCheck]:
    """Run the self-check and write ``<out>/eval_selfcheck.{json,md}``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", default=",".join(LOCAL_BENCHMARKS))
    ap.add_argument("--limit", type=int, default=None, help="first N items per benchmark")
    ap.add_argument("--items", default=None, help="only these comma-separated item ids")
    ap.add_argument(
        "--plus-limit",
        type=lambda v: None if v == "all" else int(v),
        default=None if EvalConfig().plus_limit in (None, "all") else EvalConfig().plus_limit,
        help="plus inputs per task, or 'all' (default: sage-env eval's default)",
    )
    ap.add_argument(
        "--data-dir", default=None, help="default: $SAGE_ENV_DATA, else the files sage-env ships (AIME, AMC, OlympiadBench need a folder)"
    )
    ap.add_argument("--parallel", type=int, default=2, help="sandboxes at a time (code)")
    ap.add_argument(
        "--timeout-s", type=float, default=None, help="code budget per item (sage-env eval's)"
    )
    ap.add_argument(
        "--memory-mb", type=int, default=None, help="code memory per item (sage-env eval's)"
    )
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    names = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    files = {b: data_dir / BENCHMARK_FILES[b] for b in names if b in BENCHMARK_FILES}
    absent = [b for b, f in files.items() if not f.exists()]
    if absent:  # the package ships some raw files; the rest come from --data-dir / $SAGE_ENV_DATA
        ap.error(f"no file for {absent} in {data_dir}: pass --data-dir (or set $SAGE_ENV_DATA) to "
                 "a folder holding them (learners/data/benchmarks/README.md), or --benchmarks")
    unknown = [b for b in names if b not in LOCAL_BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; local: {', '.join(LOCAL_BENCHMARKS)}")
    results = []
    limits = {"timeout_s": args.timeout_s, "memory_mb": args.memory_mb}
    limits = {k: v for k, v in limits.items() if v is not None}  # else sage-env eval's defaults
    plus_limits = {"memory_mb": PLUS_MEMORY_MB, **limits}  # EvalPlus's 4 GiB, as sage-env eval
    with MathVerifier() as mv, CodeVerifier(**limits) as cv, CodeVerifier(**plus_limits) as pv:
        for name in names:
            ids = set(args.items.split(",")) if args.items else None
            r = check_benchmark(
                name,
                data_dir,
                mv,
                pv if name.endswith("_plus") else cv,
                args.limit,
                args.plus_limit,
                args.parallel,
                ids,
            )
            results.append(r)
            print(f"{name}: {r.passed}/{r.items} in {r.seconds} s", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = {"limit": args.limit, "items": args.items, "plus_limit": args.plus_limit, **limits}
    rows = [
        {**asdict(r), "rate": r.rate, "unexplained": [f["item_id"] for f in r.unexplained]}
        for r in results
    ]
    (out / "eval_selfcheck.json").write_text(
        json.dumps({"run": run, "exceptions": EXCEPTIONS, "results": rows}, indent=1) + "\n"
    )
    (out / "eval_selfcheck.md").write_text(table(results) + "\n")
    print(table(results))
    return results


if __name__ == "__main__":
    main()
