"""Benchmark evaluation: loaders, answer extraction, scoring and unbiased pass@k.

``sage-env eval --model PATH_OR_ID --benchmarks gsm8k,math500 --samples 4 --limit 50`` samples
``samples`` completions per item, scores them with the project's verifiers
(:class:`~sage_env.verifiers.MathVerifier`, :class:`~sage_env.verifiers.CodeVerifier`) and
reports pass@1 and pass@k with the unbiased estimator of Chen et al. 2021 (arXiv 2107.03374).

The benchmark loaders and the local data layout are in :mod:`learners.benchmark_data`
(re-exported here).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from learners.benchmark_data import (  # noqa: F401  (re-exported: the public loaders)
    BENCHMARKS,
    CODE_INSTRUCTION,
    MATH_INSTRUCTION,
    PLUS_MEMORY_MB,
    EvalItem,
    _amc_answer,
    _called,
    _each,
    _first,
    _humaneval_tests,
    _inner_tuples,
    _livecodebench,
    _math,
    _olympiad_answer,
    _olympiad_value,
    _read,
    _tuple,
    _tuples,
    default_data_dir,
    gsm8k_gold,
    input_literal,
    load_benchmark,
    mbpp_plus_inputs,
    plus_tests,
)
from learners.rollout import action_text
from sage_env.verifiers import CodeVerifier, MathVerifier, extract_code


# ------------------------------------------------------------------------ scoring
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
    :func:`~sage_env.verifiers.execution.safe_input_expression` (CRUXEval's rule is
    ``f(<input>) == <output>``); its output must equal the gold output.
    """
    from sage_env.exec_tasks import last_fenced
    from sage_env.verifiers import execution

    def block(tag: str) -> str | None:
        found = last_fenced(completion, tag)
        return found if found is not None else last_fenced(completion, None)

    if item.benchmark == "cruxeval_i":
        res = execution.check_abduction(
            block("input"), item.program, item.answer or "", timeout_s=timeout_s, expressions=True
        )
    else:
        res = execution.check_deduction(block("output"), item.answer or "")
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


@dataclass
class EvalConfig:
    """Options of ``sage-env eval``."""

    model: str = "smollm2-135m-instruct"
    """Model alias, hub id or local path (a training checkpoint's ``model/`` folder works)."""
    benchmarks: str = "gsm8k,math500"
    """Comma-separated names from: gsm8k, math500, aime24, aime25, amc23, olympiadbench,
    humaneval, humaneval_plus, mbpp, mbpp_plus, cruxeval_o, cruxeval_i, exec_heldout (the
    shipped held-out execution tasks), livecodebench (hub only)."""
    samples: int = 1
    """Completions per item (n). 1 = greedy decoding; more = sampling at ``temperature``."""
    limit: int | None = None
    """At most this many items per benchmark (the first ones, in file order)."""
    temperature: float = 0.6
    """Sampling temperature when ``samples > 1``."""
    max_new_tokens: int = 512
    """Completion budget, tokens."""
    batch_size: int = 16
    """Sequences per generate call."""
    plus_limit: int | Literal["all"] | None = "all"
    """HumanEval+/MBPP+: plus inputs per task. ``all`` (the default; ``None`` too): every one,
    as EvalPlus runs them, each under EvalPlus's own time limit; a number is a deviation from
    EvalPlus's protocol, named in the report."""
    data_dir: str | None = None
    """Benchmark folder with the layout of ``learners/benchmark_data.py`` (default
    ``$SAGE_ENV_DATA``, else the files shipped in ``learners/data/benchmarks``)."""
    source: Literal["auto", "local", "hub"] = "auto"
    """Where rows come from: ``auto`` (the data folder; a benchmark not there, such as aime24,
    from the Hugging Face hub), ``local`` (never the network) or ``hub`` (``datasets``; needs
    ``pip install "sage-env[hub]"`` and a network)."""
    out: str = "runs/eval"
    """Output folder: results.json, results.md, items/<benchmark>.jsonl."""
    device: str = "auto"
    """``auto``, ``cpu``, ``cuda`` ..."""
    seed: int = 0
    """Sampling seed."""
    decontam_ngram: int = 13
    """n of the word n-grams used to flag benchmarks that overlap the seed set."""


def run_eval(cfg: EvalConfig, policy=None, progress: bool = True) -> list[BenchmarkResult]:
    """Evaluate ``cfg.model`` (or a given policy) and write the results to ``cfg.out``.

    Raises:
        ValueError: on an unknown benchmark name.
        FileNotFoundError: if a benchmark file is missing.
    """
    from tqdm.auto import tqdm

    from learners.decontam import overlap_report
    from learners.policy import HFPolicy, SamplingConfig

    names = [b.strip() for b in cfg.benchmarks.split(",") if b.strip()]
    unknown = [b for b in names if b not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; available: {', '.join(BENCHMARKS)}")
    plus_limit = None if cfg.plus_limit in (None, "all") else int(cfg.plus_limit)
    suites = {
        b: load_benchmark(b, cfg.data_dir, plus_limit, cfg.source)[: cfg.limit] for b in names
    }
    policy = policy or HFPolicy(cfg.model, device=cfg.device, seed=cfg.seed)
    sampling = SamplingConfig(
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        do_sample=cfg.samples > 1,
        batch_size=cfg.batch_size,
        max_prompt_tokens=2048,
    )
    out = Path(cfg.out)
    (out / "items").mkdir(parents=True, exist_ok=True)
    results = []
    with MathVerifier() as mv:
        cv_plain = CodeVerifier()
        cv_plus = CodeVerifier(memory_mb=PLUS_MEMORY_MB)  # HumanEval+/MBPP+: EvalPlus's 4 GiB
        for name, items in suites.items():
            cv = cv_plus if name.endswith("_plus") else cv_plain
            correct, records = [], []
            bar = tqdm(items, desc=name, unit="item", disable=not progress)
            for start in range(0, len(items), max(1, cfg.batch_size // cfg.samples)):
                chunk = items[start : start + max(1, cfg.batch_size // cfg.samples)]
                obs = [
                    {"system": "You are a helpful assistant.", "user": it.prompt, "prefix": it.prefix}
                    for it in chunk
                    for _ in range(cfg.samples)
                ]
                # an item that opens a fenced block (exec_heldout) ends at its closing fence
                stops = [("```",) if o["prefix"].startswith("```") else () for o in obs]
                comps = policy.generate(obs, sampling, stops=stops)
                for i, it in enumerate(chunk):
                    outs = comps[i * cfg.samples : (i + 1) * cfg.samples]
                    verdicts = [score(it, action_text(c), mv, cv) for c in outs]
                    correct.append([v[0] for v in verdicts])
                    records.append(
                        {
                            "item_id": it.item_id,
                            "answer": it.answer,
                            "completions": [action_text(c) for c in outs],
                            "correct": [v[0] for v in verdicts],
                            "verdicts": [v[1] for v in verdicts],
                        }
                    )
                bar.update(len(chunk))
            bar.close()
            result = summarise(name, correct, records)
            result.contaminated = overlap_report(items, n=cfg.decontam_ngram).contaminated
            if name.endswith("_plus") and plus_limit is not None:
                result.deviation = (
                    f"{plus_limit} plus inputs per task (EvalPlus runs all: --plus-limit all)"
                )
            with open(out / "items" / f"{name}.jsonl", "w", encoding="utf-8") as fh:
                for rec in records:
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            results.append(result)
    (out / "results.json").write_text(
        json.dumps(
            {
                "model": cfg.model,
                "config": asdict(cfg),
                "results": [result_dict(r) for r in results],
            },
            indent=2,
        )
    )
    (out / "results.md").write_text(markdown_table(results) + "\n")
    return results


def validation_accuracy(
    policy,
    tasks: list,
    math_verifier: MathVerifier,
    max_new_tokens: int = 256,
    batch_size: int = 16,
) -> float:
    """Greedy accuracy of ``policy`` on math ``tasks`` (e.g. :func:`sage_env.load_validation`).

    Each task is prompted as the solver role sees it and scored with ``math_verifier``.

    Returns:
        Share of tasks answered correctly, in [0, 1] (0 for an empty list).
    """
    from learners.policy import SamplingConfig
    from sage_env import prompts

    if not tasks:
        return 0.0
    logging.getLogger(__name__).info(  # minutes on a CPU with no progress bar: say what runs
        "validation: %d held-out tasks, greedy, up to %d new tokens each",
        len(tasks),
        max_new_tokens,
    )
    sampling = SamplingConfig(max_new_tokens=max_new_tokens, do_sample=False, batch_size=batch_size)
    comps = policy.generate([prompts.solver(t) for t in tasks], sampling)
    scores = [
        math_verifier.verify(action_text(c), t.answer or "").score for c, t in zip(comps, tasks)
    ]
    return sum(scores) / len(scores)


def critic_replies(
    policy, items: list, max_new_tokens: int = 48, temperature: float = 0.7, seed: int = 0
) -> list[str]:
    """The policy's critic replies (prefix + completion) to critic-probe items.

    Sampled at ``temperature`` as in training, from a generator reseeded with ``seed`` and
    restored afterwards, so the probe neither depends on nor disturbs the run's sampling.

    Args:
        policy: An :class:`~learners.policy.HFPolicy` (or anything with ``generate``).
        items: :class:`sage_env.critic_probe.ProbeItem` list.
        max_new_tokens: Reply budget.
        temperature: Sampling temperature.
        seed: Seed of the probe's sampling.
    """
    import torch

    from learners.policy import SamplingConfig

    if not items:
        return []
    gen = getattr(policy, "generator", None)
    saved = gen.get_state() if gen is not None else None
    cpu_rng = torch.get_rng_state()
    if gen is not None:
        gen.manual_seed(seed)
    try:
        sampling = SamplingConfig(max_new_tokens=max_new_tokens, temperature=temperature)
        comps = policy.generate([it.observation for it in items], sampling)
    finally:
        if gen is not None:
            gen.set_state(saved)
        torch.set_rng_state(cpu_rng)
    return [action_text(c) for c in comps]
