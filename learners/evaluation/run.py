"""``sage-env eval``: sample completions for benchmark items, score them, write the results.

``sage-env eval --model PATH_OR_ID --benchmarks gsm8k,math500 --samples 4 --limit 50`` samples
``samples`` completions per item, scores them with the project's verifiers
(:mod:`learners.evaluation.scoring`) and reports pass@1 and pass@k with the unbiased estimator
of Chen et al. 2021 (arXiv 2107.03374).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from learners.engines.config import RolloutConfig
from learners.evaluation.benchmarks import BENCHMARKS, PLUS_MEMORY_MB, load_benchmark
from learners.evaluation.scoring import (
    BenchmarkResult,
    markdown_table,
    result_dict,
    score,
    summarise,
)
from learners.types import SamplingConfig, action_text
from sage_env.verifiers import CodeVerifier, MathVerifier


@dataclass
class EvalConfig:
    """Options of ``sage-env eval``."""

    model: str = "smollm2-135m-instruct"
    """Model alias, hub id or local path: a model folder (``RUN/checkpoints/best``, a
    ``sage-env export`` output) or a training checkpoint ``RUN/checkpoints/step_N``, whose
    ``model/`` subfolder is loaded. A LoRA checkpoint holds an adapter only: export it first.
    Checked before anything loads (:func:`learners.evaluation.model_path.eval_model`)."""
    benchmarks: str = "gsm8k,math500"
    """Comma-separated benchmark names, registered in
    :data:`learners.evaluation.benchmarks.BENCHMARKS` (math: gsm8k, math500, aime*, amc23,
    olympiadbench; code: humaneval(_plus), mbpp(_plus), cruxeval_o/_i, exec_heldout (the
    shipped held-out execution tasks); livecodebench, hub only). An unknown name fails with
    the list of registered ones."""
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
    """Benchmark folder with the layout of :mod:`learners.evaluation.benchmarks` (default
    ``$SAGE_ENV_DATA``, else the files shipped in ``learners/data/benchmarks``)."""
    source: Literal["auto", "local", "hub"] = "auto"
    """Where rows come from: ``auto`` (the data folder; a benchmark not there, such as aime24,
    from the Hugging Face hub), ``local`` (never the network) or ``hub`` (``datasets``; needs
    ``pip install "sage-env[hub]"`` and a network)."""
    out: str = "runs/eval"
    """Output folder: results.json, results.md, items/<benchmark>.jsonl."""
    device: str = "auto"
    """``auto``, ``cpu``, ``cuda`` ..."""
    engine: str = "auto"
    """Rollout engine that samples the completions, as ``sage-env train --rollout.engine``:
    ``auto`` (``ct2`` on a CPU when CTranslate2 is installed, else ``hf``), ``hf``, ``ct2``,
    ``hf-cb`` or ``vllm`` (``docs/guide/training.md#rollout-engines``). Every engine samples the
    same distribution; ``ct2`` is CPU-only and samples with ``top_p`` 1."""
    seed: int = 0
    """Sampling seed."""
    decontam_ngram: int = 13
    """n of the word n-grams used to flag benchmarks that overlap the seed set."""


def resolve_engine(cfg: EvalConfig) -> RolloutConfig:
    """The rollout engine ``cfg.engine`` names.

    ``auto``: ``ct2`` on a CPU when CTranslate2 is importable, else ``hf``.

    Raises:
        ValueError: on an unknown engine name.
    """
    import importlib.util

    from learners.policy.loading import pick_device

    name = cfg.engine
    if name == "auto":
        cpu = pick_device(cfg.device).type == "cpu"
        name = "ct2" if cpu and importlib.util.find_spec("ctranslate2") is not None else "hf"
    return RolloutConfig(engine=name)


def run_eval(cfg: EvalConfig, policy=None, progress: bool = True) -> list[BenchmarkResult]:
    """Evaluate ``cfg.model`` (or a given policy) and write the results to ``cfg.out``.

    Writes ``items/<benchmark>.jsonl`` (every completion with its verdict), ``results.json``
    and ``results.md`` (:func:`~learners.evaluation.scoring.markdown_table`).

    Raises:
        ValueError: on an unknown benchmark name.
        FileNotFoundError: if a benchmark file is missing.
        learners.policy.model_check.PreflightError: (a ``RuntimeError``) when ``cfg.model``
            cannot be loaded: a path that does not exist, a run folder, a LoRA adapter, a
            folder without config, weights or tokenizer, a hub id not in reach
            (:func:`~learners.evaluation.model_path.eval_model`); checked before the benchmarks
            and the model load.
    """
    from learners.evaluation.decontam import overlap_report
    from learners.evaluation.model_path import eval_model
    from learners.policy.hf_policy import HFPolicy

    names = [b.strip() for b in cfg.benchmarks.split(",") if b.strip()]
    unknown = [b for b in names if b not in BENCHMARKS]
    if unknown:
        registered = sorted(BENCHMARKS.names())
        raise ValueError(f"unknown benchmark(s) {unknown}; registered: {registered}")
    # a missing or broken model fails here, in one line, before benchmarks and weights load
    model = eval_model(cfg.model) if policy is None else cfg.model
    plus_limit = None if cfg.plus_limit in (None, "all") else int(cfg.plus_limit)
    suites = {
        b: load_benchmark(b, cfg.data_dir, plus_limit, cfg.source)[: cfg.limit] for b in names
    }
    if policy is None:
        policy = HFPolicy(model, device=cfg.device, seed=cfg.seed, rollout=resolve_engine(cfg))
    out = Path(cfg.out)
    (out / "items").mkdir(parents=True, exist_ok=True)
    results = []
    with MathVerifier() as mv:
        cv_plain = CodeVerifier()
        cv_plus = CodeVerifier(memory_mb=PLUS_MEMORY_MB)  # HumanEval+/MBPP+: EvalPlus's 4 GiB
        for name, items in suites.items():
            cv = cv_plus if name.endswith("_plus") else cv_plain
            correct, records = _sample_and_score(cfg, policy, name, items, mv, cv, progress)
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
    summary = {
        "model": cfg.model,
        "config": asdict(cfg),
        "engine": getattr(getattr(policy, "engine", None), "name", None),
        "results": [result_dict(r) for r in results],
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    (out / "results.md").write_text(markdown_table(results) + "\n")
    return results


def _sample_and_score(
    cfg: EvalConfig,
    policy: Any,
    name: str,
    items: list,
    mv: MathVerifier,
    cv: CodeVerifier,
    progress: bool,
) -> tuple[list[list[bool]], list[dict]]:
    """``cfg.samples`` completions per item of one benchmark, scored.

    Returns:
        ``(correct, records)``: ``correct[i][j]`` for item i, sample j, and one JSON record
        per item (its completions and verdicts).
    """
    from tqdm.auto import tqdm

    sampling = SamplingConfig(
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        do_sample=cfg.samples > 1,
        batch_size=cfg.batch_size,
        max_prompt_tokens=2048,
    )
    per_call = max(1, cfg.batch_size // cfg.samples)
    correct, records = [], []
    bar = tqdm(items, desc=name, unit="item", disable=not progress)
    for start in range(0, len(items), per_call):
        chunk = items[start : start + per_call]
        obs = [
            {"system": "You are a helpful assistant.", "user": it.prompt, "prefix": it.prefix}
            for it in chunk
            for _ in range(cfg.samples)
        ]
        # an item that opens a fenced block (exec_heldout) ends at its closing fence
        stops = [("```",) if o["prefix"].startswith("```") else () for o in obs]
        comps = policy.generate(obs, sampling, stops=stops)
        for i, it in enumerate(chunk):
            texts = [action_text(c) for c in comps[i * cfg.samples : (i + 1) * cfg.samples]]
            verdicts = [score(it, text, mv, cv) for text in texts]
            correct.append([v[0] for v in verdicts])
            records.append(
                {
                    "item_id": it.item_id,
                    "answer": it.answer,
                    "completions": texts,
                    "correct": [v[0] for v in verdicts],
                    "verdicts": [v[1] for v in verdicts],
                }
            )
        bar.update(len(chunk))
    bar.close()
    return correct, records
