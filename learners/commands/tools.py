"""``sage-env eval``, ``compare``, ``export``, ``report`` and ``decontam``."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass

from learners.commands import register_command


@dataclass
class DecontamConfig:
    """Options of ``sage-env decontam``."""

    benchmarks: str = "gsm8k,math500,humaneval,humaneval_plus,mbpp,mbpp_plus"
    """Comma-separated benchmark names (default: the ones shipped with sage-env; aime24, aime25,
    amc23 and olympiadbench load from --data-dir or, with a network, the Hugging Face hub)."""
    pool: str | None = None
    """A run's pool.jsonl to check instead of the bundled seeds."""
    n: int = 13
    """Word n-gram size."""
    data_dir: str | None = None
    """Benchmark folder (default ``$SAGE_ENV_DATA``, else the shipped files; layout:
    ``learners.evaluation.benchmarks``)."""
    out: str | None = None
    """Write the item-by-item report as JSON here."""


@register_command(
    "eval",
    summary="pass@k of a model on math and code benchmarks (sage-env eval --help)",
)
def eval_command(argv: list[str]) -> int:
    import tyro

    from learners.evaluation.run import EvalConfig, run_eval
    from learners.evaluation.scoring import markdown_table

    cfg = tyro.cli(
        EvalConfig,
        args=argv,
        prog="sage-env eval",
        description="pass@1 and unbiased pass@k on math and code benchmarks (files shipped "
        "in learners/data/benchmarks; --data-dir for your own copy; the Hugging Face hub for "
        'the rest, with pip install "sage-env[hub]").',
    )
    try:
        results = run_eval(cfg)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"sage-env eval: error: {exc}", file=sys.stderr)
        return 2
    print(markdown_table(results))
    print(f"results in {cfg.out}")
    return 0


@register_command(
    "compare",
    summary="learners and protocols side by side, several seeds (sage-env compare --help)",
)
def compare_command(argv: list[str]) -> int:
    import tyro

    from learners.policy.model_check import PreflightError
    from learners.training.compare import CompareConfig, run_compare

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    known, rest = pre.parse_known_args(argv)
    cfg = tyro.cli(
        CompareConfig,
        args=rest,
        prog="sage-env compare",
        description="Train every protocol arm with every learner (--algorithms trr,my_algo), "
        "once per seed, on an equal budget of steps; report held-out accuracy on the sets of "
        "the domains each arm trains (the same items and verifier within a set), the steps "
        "that changed the weights, and each protocol's own reward apart, as mean and spread "
        "over seeds (table.md, summary.json, compare.png). --import MODULE (repeatable) "
        "registers a learner or protocol first.",
    )
    cfg = dataclasses.replace(cfg, imports=(*cfg.imports, *known.imports))
    try:
        summary = run_compare(cfg)
    except (ValueError, ImportError, FileExistsError, OSError, PreflightError) as exc:
        print(f"sage-env compare: error: {exc}", file=sys.stderr)
        return 2
    print(summary["table"])
    if summary.get("all_heldout_zero"):
        from learners.reports.compare_summary import ALL_HELDOUT_ZERO

        print(f"sage-env compare: note: {ALL_HELDOUT_ZERO}")
    print(f"results in {cfg.out}")
    return 0


@register_command(
    "export",
    summary="write a run's checkpoint (LoRA merged) as a plain transformers model",
)
def export_command(argv: list[str]) -> int:
    import tyro

    from learners.training.export import ExportConfig, export_model

    cfg = tyro.cli(
        ExportConfig,
        args=argv,
        prog="sage-env export",
        description="Write a training run's checkpoint as one model that plain transformers "
        "loads (AutoModelForCausalLM.from_pretrained): LoRA adapters are merged into the base.",
    )
    try:
        out = export_model(cfg)
    except (ValueError, FileNotFoundError, FileExistsError, OSError, RuntimeError) as exc:
        print(f"sage-env export: error: {exc}", file=sys.stderr)
        return 2
    print(f"exported to {out}")
    return 0


@register_command(
    "report",
    summary="one self-contained HTML page of one or more runs (sage-env report RUN --out F)",
)
def report_command(argv: list[str]) -> int:
    import tyro

    from learners.reports.run_report import ReportConfig, report_from_config

    cfg = tyro.cli(
        ReportConfig,
        args=argv,
        prog="sage-env report",
        description="One self-contained HTML page (opens offline) of one or more run folders: "
        "curves (runs overlaid), the pool's lineage, the critic probe and every round.",
        config=(tyro.conf.PositionalRequiredArgs,),
    )
    try:
        out = report_from_config(cfg)
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"sage-env report: error: {exc}", file=sys.stderr)
        return 2
    print(f"report written to {out}")
    return 0


@register_command(
    "decontam",
    summary="n-gram overlap between the seeds (or a run's pool) and each benchmark",
)
def decontam_command(argv: list[str]) -> int:
    import json

    import tyro

    from learners.evaluation.benchmarks import load_benchmark
    from learners.evaluation.decontam import overlap_report
    from sage_env.tasks.task import read_jsonl

    cfg = tyro.cli(
        DecontamConfig,
        args=argv,
        prog="sage-env decontam",
        description="Word n-gram overlap between training tasks and benchmarks.",
    )
    try:
        tasks = read_jsonl(cfg.pool) if cfg.pool else None
        reports = [
            overlap_report(load_benchmark(b.strip(), cfg.data_dir), cfg.n, tasks, b)
            for b in cfg.benchmarks.split(",")
            if b.strip()
        ]
    except (ValueError, FileNotFoundError, OSError, RuntimeError) as exc:
        print(f"sage-env decontam: error: {exc}", file=sys.stderr)
        return 2
    print("| benchmark | items | overlapping | share | flagged |\n|---|---|---|---|---|")
    for r in reports:
        print(
            f"| {r.benchmark} | {r.items} | {len(r.overlapping)} | {100 * r.share:.1f}% | "
            f"{'yes' if r.contaminated else 'no'} |"
        )
    for r in reports:
        for item_id, hits in r.matches.items():
            print(f"{r.benchmark}\t{item_id}\t" + ", ".join(f"{t} ({c:.0%})" for t, c in hits))
    if cfg.out:
        with open(cfg.out, "w", encoding="utf-8") as fh:
            json.dump(
                [
                    {
                        "benchmark": r.benchmark,
                        "items": r.items,
                        "share": r.share,
                        "contaminated": r.contaminated,
                        "matches": r.matches,
                    }
                    for r in reports
                ],
                fh,
                indent=1,
            )
    return 0
