"""Like-for-like comparison of learners and protocols: ``sage-env compare``.

Every arm is a learner (``--algorithms``: ``trr`` or any registered / ``--import``ed one) and a
protocol (``sage``, ``azr``, ``mae``, ``rlvr`` or any registered one, optionally with frozen
roles: ``sage-frozen-critic``): every learner trains every protocol arm, once per seed, by
:func:`learners.training.loop.train`, with the same model, preset, YAML overrides and budget.
The budget is **training steps**: every run plays ``steps`` x ``rounds_per_step`` rounds
(rollout tokens differ by protocol and are reported, not equalised).

What is compared:

- **Held-out accuracy**, like for like within a set: greedy accuracy on the same held-out
  items, scored by the same external verifier, after the warm-up (step 0) and after the last
  step. Each arm is scored on the sets of the domains its solver trains (``heldout_match``;
  :attr:`~sage_env.protocols.base.Protocol.domains`, else the preset's
  ``EnvConfig.domains``): ``math``, the first ``heldout`` tasks of the validation split (MATH
  and GSM8K in turn, :func:`sage_env.load_validation`, none a seed; ``val/accuracy``), and the
  execution sets of ``heldout_exec`` (``exec_heldout``: programs none of the seeds holds, run
  by the executor; ``heldout/<set>/...``). ``--benchmarks`` adds ``sage-env eval`` sets,
  scored for every arm.
- **Trained steps**: the steps whose update changed the weights (``learner/trained``); an arm
  that trained nothing is flagged.
- **Solver verifier accuracy on training rounds** (``solver/accuracy``): the external
  verifier's score of the solver's rollout answers, on each arm's own tasks (not like for
  like).
- **Each protocol's own reward** per role (``reward/<role>``), reported apart: a protocol's
  reward is its own scale (MAE's solver is paid by its judge) and does not compare across arms.

Statistics over seeds: mean, sample standard deviation (``ddof=1``; 0 for one seed), min and
max. Output folder::

    OUT/<arm>/seed<k>/   one training run (metrics.jsonl, transcripts, checkpoints, ...);
                         <arm> is <algorithm>/<protocol arm> with several learners
    OUT/summary.json     config, per-run values and per-arm statistics
    OUT/table.md         the three tables (held-out, training, own rewards)
    OUT/compare.png      held-out accuracy and own solver reward against step (mean, min-max band)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from learners.policy.loading import DEFAULT_MODEL
from learners.reports.compare_summary import (
    ALL_HELDOUT_ZERO,
    Arm,
    RunResult,
    all_heldout_zero,
    markdown,
    plot,
    summarise,
)

logger = logging.getLogger("sage_env.compare")

OWNED = {
    "model": "--model",
    "out": "--out",
    "steps": "--steps",
    "rounds_per_step": "--rounds-per-step",
    "seed": "--seeds",
    "freeze": "the arm name",
    "val_every": "--val-every",
    "val_at_start": "always on",
    "val_limit": "--heldout",
    "val_max_new_tokens": "--heldout-max-new-tokens",
    "heldout": "--heldout-exec and --heldout-match",
    "early_stopping_patience": "0: equal budgets",
    "resume": "off",
}
"""TrainConfig fields the comparison sets for every run (a YAML value for them is ignored,
with a warning), and the option that sets each."""

FROZEN = "-frozen-"
"""Separator of an arm's frozen roles: ``sage-frozen-critic-frozen-planner``."""


@dataclass
class CompareConfig:
    """Options of ``sage-env compare``."""

    protocols: str = "sage,azr,mae,rlvr"
    """Comma-separated arms: protocol names (registered, or registered by an ``--import``ed
    module), each optionally with frozen roles, e.g. ``sage-frozen-critic``."""
    algorithms: str = "trr"
    """Comma-separated learners (registered, or registered by an ``--import``ed module), e.g.
    ``trr,my_algo``: each one trains every protocol arm."""
    imports: tuple[str, ...] = ()
    """Modules to import first (dotted names or ``.py`` paths; ``--import MODULE`` works too)."""
    seeds: tuple[int, ...] = (0, 1)
    """Seeds; every arm trains once per seed (sampling, round order, initial task draws)."""
    steps: int = 4
    """The budget of every run: training steps (each plays ``rounds_per_step`` rounds)."""
    rounds_per_step: int = 4
    """Rounds per step, the same for every arm."""
    model: str = DEFAULT_MODEL
    """Model alias, hub id or local path, the starting point of every arm."""
    preset: str = "demo"
    """Training preset every arm starts from (``sage-env train --preset``)."""
    config: str | None = None
    """YAML file of TrainConfig fields applied to every arm over the preset (``learner:``
    keys are the chosen algorithm's); steps, rounds, seed, validation and out are set here."""
    heldout: int = 16
    """Math held-out items: N tasks of the 200-task validation split (100 MATH + 100 GSM8K,
    none a seed), taken from MATH and GSM8K in turn, scored by the math verifier."""
    heldout_max_new_tokens: int = 128
    """Completion budget of the math held-out answers and of ``benchmarks`` (greedy)."""
    heldout_exec: str = "exec_heldout:100:16"
    """Held-out sets of arms that train execution tasks (AZR's, or ``exec`` in the preset's
    domains), as ``sage-env train --heldout`` entries ``name:items:max_new_tokens``, comma
    separated (names: ``exec_heldout``, ``cruxeval_o``, ``cruxeval_i``). Empty: none."""
    heldout_match: bool = True
    """Score each arm on the held-out sets of the domains it trains (math: the validation
    split; exec: ``heldout_exec``; an arm training neither: math). ``--no-heldout-match``
    scores every arm on every set: like for like across all arms, and slower."""
    benchmarks: str = ""
    """Also score the starting model and every run's final model on these ``sage-env eval``
    benchmarks (comma-separated, e.g. ``gsm8k,humaneval_plus``; greedy pass@1 through the
    same verifiers): held-out code items too. Empty: off."""
    benchmark_limit: int = 20
    """Items per benchmark of ``benchmarks`` (the first ones)."""
    val_every: int = 0
    """Held-out accuracy every this many steps (a learning curve); 0 = before training and
    after the last step only. Must divide ``steps``."""
    out: str = "runs/compare"
    """Output folder (see ``learners/training/compare.py``)."""
    overwrite: bool = False
    """Delete run folders already in ``out`` instead of stopping."""
    progress: bool = True
    """Progress bars (each names its arm and seed)."""


def parse_arms(spec: str, algorithms: str = "trr") -> list[Arm]:
    """Arms from ``"sage,azr,sage-frozen-critic"`` and ``"trr,rloo"``: every learner with every arm.

    Checked against the protocol and learner registries; ordered learner by learner.

    With one learner an arm's name is the protocol arm (``sage-frozen-critic``); with several
    it is ``ALGORITHM/PROTOCOL-ARM`` (``rloo/sage``).

    Raises:
        ValueError: on an empty list, a repeated arm or learner, an unknown protocol or learner
            (the message lists the registered ones) or a frozen role the protocol does not have.
    """
    from learners.algorithms.registry import learner_spec
    from sage_env.protocols import make_protocol

    names = [a.strip() for a in spec.split(",") if a.strip()]
    algos = [a.strip() for a in algorithms.split(",") if a.strip()]
    if not names:
        raise ValueError("--protocols is empty; give e.g. sage,azr,mae,rlvr")
    if not algos:
        raise ValueError("--algorithms is empty; give e.g. trr or trr,my_algo")
    for flag, given in (("--protocols", names), ("--algorithms", algos)):
        if len(set(given)) != len(given):
            raise ValueError(f"{flag} repeats an entry: {given}")
    for algo in algos:
        learner_spec(algo)  # unknown: lists every registered learner
    arms = []
    for name in names:
        protocol, *frozen = name.split(FROZEN)
        proto = make_protocol(protocol)
        roles = [a.rsplit("_", 1)[0] for a in proto.agents]
        unknown = [r for r in frozen if r not in roles]
        if unknown:
            raise ValueError(
                f"arm {name!r}: protocol {protocol!r} has no role {unknown[0]!r}; roles: {roles}"
            )
        arms.append(Arm(name, protocol, tuple(frozen), domains=tuple(proto.domains or ())))
    return [
        dataclasses.replace(
            a, name=a.name if len(algos) == 1 else f"{algo}/{a.name}", algorithm=algo
        )
        for algo in algos
        for a in arms
    ]


def heldout_sets(cfg: CompareConfig, domains: tuple[str, ...]) -> list[str]:
    """The held-out sets an arm whose solver trains ``domains`` is scored on.

    ``"math"`` (the validation split) and the names of ``cfg.heldout_exec``: all of them when
    ``heldout_match`` is off; else math for ``"math"``, the execution sets for ``"exec"``, and
    math when neither matches (a code-only arm: add code sets with ``--benchmarks``).

    Raises:
        ValueError: on a malformed ``heldout_exec``.
    """
    from learners.evaluation.heldout import parse_heldout

    execs = [s.name for s in parse_heldout(cfg.heldout_exec)]
    if not cfg.heldout_match:
        return ["math", *execs]
    sets = (["math"] if "math" in domains else []) + (execs if "exec" in domains else [])
    return sets or ["math"]


def run_config(cfg: CompareConfig, arm: Arm, seed: int) -> Any:
    """The :class:`~learners.training.config.TrainConfig` of one run (arm x seed).

    Preset, then the YAML file, then the arm's algorithm and protocol, then the comparison's
    own settings: budget, seed, the arm's held-out sets (:func:`heldout_sets`), no early
    stopping (equal budgets), out.

    Raises:
        ValueError: on an unknown preset or algorithm, or a bad YAML file.
    """
    from learners.evaluation.heldout import parse_heldout
    from learners.training.config import load_yaml_config, with_algorithm, with_protocol
    from learners.training.presets import PRESETS

    if cfg.preset not in PRESETS:
        raise ValueError(f"unknown preset {cfg.preset!r}; presets: {sorted(PRESETS)}")
    base = PRESETS[cfg.preset]
    if cfg.config:
        base = load_yaml_config(cfg.config, base, arm.algorithm, arm.protocol)
        data = yaml.safe_load(Path(cfg.config).read_text(encoding="utf-8")) or {}
        for key in sorted(set(data) & set(OWNED)):
            logger.warning(
                "compare: %s sets %s, which sage-env compare sets for every run (%s); "
                "the file's value is ignored",
                cfg.config,
                key,
                OWNED[key],
            )
    else:
        base = with_protocol(with_algorithm(base, arm.algorithm), arm.protocol)
    sets = heldout_sets(cfg, arm.domains or tuple(base.env.domains))
    math = "math" in sets
    execs = [s for s in parse_heldout(cfg.heldout_exec) if s.name in sets]
    return dataclasses.replace(
        base,
        model=cfg.model,
        out=str(Path(cfg.out) / arm.name / f"seed{seed}"),
        steps=cfg.steps,
        rounds_per_step=cfg.rounds_per_step,
        seed=seed,
        freeze=arm.freeze,
        val_every=(cfg.val_every or cfg.steps) if math else 0,
        val_at_start=math,
        val_limit=cfg.heldout,
        val_max_new_tokens=cfg.heldout_max_new_tokens,
        heldout=",".join(f"{s.name}:{s.items}:{s.max_new_tokens}" for s in execs),
        early_stopping_patience=0,
        resume=False,
    )


FIGURES = {
    "start": "start",
    "final": "end",
    "gained": "gained",
    "lost": "lost",
    "mcnemar_p": "mcnemar_p",
}
"""``heldout/<set>/<figure>`` keys of ``metrics.jsonl`` -> :attr:`RunResult.heldout_sets` keys."""


def read_run(arm: str, seed: int, out: str | Path) -> RunResult:
    """A run's figures from its ``metrics.jsonl`` (step-0 row: before training)."""
    from learners.reports.plots import read_metrics

    rows = read_metrics(Path(out) / "metrics.jsonl")
    steps = [r for r in rows if r.get("step", 0) > 0]
    curve = [[r["step"], r["val/accuracy"]] for r in rows if r.get("val/accuracy") is not None]
    start = next((a for s, a in curve if s == 0), None)
    last = steps[-1]["step"] if steps else 0
    end = next((a for s, a in curve if s == last and s > 0), None)
    roles = list(dict.fromkeys(k[7:] for r in steps for k in r if k.startswith("reward/")))
    reward_curve = {
        role: [
            [r["step"], r[f"reward/{role}"]] for r in steps if r.get(f"reward/{role}") is not None
        ]
        for role in roles
    }
    solver = [r["solver/accuracy"] for r in steps if r.get("solver/accuracy") is not None]
    secs = [r["time/step_s"] for r in steps if r.get("time/step_s") is not None]
    trained = [r["learner/trained"] for r in steps if r.get("learner/trained") is not None]
    sets: dict[str, dict[str, float | None]] = {}
    for row in rows:
        for key, value in row.items():
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "heldout" and parts[2] in FIGURES:
                sets.setdefault(parts[1], dict.fromkeys(FIGURES.values()))[FIGURES[parts[2]]] = (
                    value
                )
    return RunResult(
        arm=arm,
        seed=seed,
        out=str(out),
        heldout_start=start,
        heldout_end=end,
        heldout_curve=curve,
        solver_verifier_accuracy=sum(solver) / len(solver) if solver else None,
        own_reward={r: sum(v for _, v in c) / len(c) for r, c in reward_curve.items() if c},
        own_reward_curve=reward_curve,
        rollout_tokens=float(sum(r.get("rollout/tokens") or 0.0 for r in steps)),
        seconds_per_step=sum(secs) / len(secs) if secs else None,
        steps=last,
        trained_steps=int(sum(1 for t in trained if t == 1.0)) if trained else None,
        heldout_sets=sets,
    )


def final_model(run: Path) -> str:
    """The folder of a run's last checkpoint as a plain model.

    A LoRA run's adapters are merged first, into ``RUN/final_model``, with
    :func:`learners.training.export.export_model`.

    Raises:
        FileNotFoundError: if the run holds no checkpoint.
    """
    from learners.training.export import ExportConfig, checkpoint_model_dir, export_model

    weights = checkpoint_model_dir(run)
    if not (weights / "adapter_config.json").exists():
        return str(weights)
    merged = run / "final_model"
    if not (merged / "config.json").exists():
        export_model(ExportConfig(run=str(run), out=str(merged)))
    return str(merged)


def benchmark_scores(model: str, cfg: CompareConfig, out: Path, device: str) -> dict[str, float]:
    """Greedy pass@1 of ``model`` on ``cfg.benchmarks`` (``sage-env eval``'s loop and verifiers).

    Writes ``sage-env eval``'s files (results.json, items/) to ``out``.
    """
    from learners.evaluation.run import EvalConfig, run_eval

    ecfg = EvalConfig(
        model=model,
        benchmarks=cfg.benchmarks,
        limit=cfg.benchmark_limit,
        samples=1,
        max_new_tokens=cfg.heldout_max_new_tokens,
        out=str(out),
        device=device,
    )
    return {r.benchmark: r.pass_at[1] for r in run_eval(ecfg, progress=cfg.progress)}


def _plan(cfg: CompareConfig) -> tuple[list[Arm], list[str], list[tuple[Arm, int, Any]]]:
    """Check everything that needs no model, then ``(arms, benchmarks, [(arm, seed, config)])``.

    Raises:
        as :func:`run_compare`.
    """
    from learners.algorithms.plugins import import_modules

    import_modules(list(cfg.imports))
    arms = parse_arms(cfg.protocols, cfg.algorithms)
    if cfg.steps < 1 or cfg.rounds_per_step < 1 or cfg.heldout < 1:
        raise ValueError("steps, rounds_per_step and heldout must be >= 1")
    if cfg.val_every < 0 or (cfg.val_every and cfg.steps % cfg.val_every):
        raise ValueError(f"val_every ({cfg.val_every}) must divide steps ({cfg.steps}) or be 0")
    if not cfg.seeds or len(set(cfg.seeds)) != len(cfg.seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {list(cfg.seeds)}")
    benches = [b.strip() for b in cfg.benchmarks.split(",") if b.strip()]
    if benches:  # load once now: a missing file fails before any training
        from learners.evaluation.benchmarks import load_benchmark

        for b in benches:
            try:
                load_benchmark(b, plus_limit=1)
            except RuntimeError as exc:  # the hub (livecodebench): not reachable now
                raise ValueError(f"--benchmarks {b}: {exc}") from exc
    heldout_sets(cfg, ())  # a malformed --heldout-exec fails here
    plan = []
    for i, arm in enumerate(arms):
        for seed in cfg.seeds:
            tcfg = run_config(cfg, arm, seed)
            arms[i] = arm = dataclasses.replace(arm, domains=arm.domains or tuple(tcfg.env.domains))
            plan.append((arm, seed, tcfg))
    for _, _, tcfg in plan:
        out = Path(tcfg.out)
        if out.exists() and any(out.iterdir()):
            if not cfg.overwrite:
                raise FileExistsError(
                    f"{out} already holds a run; pass --overwrite or another --out"
                )
            shutil.rmtree(out)
    return arms, benches, plan


def run_compare(cfg: CompareConfig) -> dict[str, Any]:
    """Train every arm once per seed and write ``summary.json``, ``table.md``, ``compare.png``.

    Everything that can be checked without a model is checked before the first run: the
    imports, every arm's protocol and frozen roles, the algorithm, the preset, the YAML file
    and the budget.

    Returns:
        The summary written to ``summary.json``: ``config``, ``runs`` (one per arm and seed)
        and ``arms`` (statistics over seeds, :func:`summarise`), plus ``table`` (Markdown).

    Raises:
        ImportError: if an ``imports`` module fails to import.
        ValueError: on an unknown protocol, role, algorithm, preset or benchmark, bad
            budgets or seeds, or a ``benchmarks`` entry the hub cannot serve now.
        FileNotFoundError: if a ``benchmarks`` file is missing.
        FileExistsError: if a run folder exists and ``overwrite`` is off.
    """
    from learners.evaluation.heldout import parse_heldout
    from learners.training.loop import train

    arms, benches, plan = _plan(cfg)
    out = Path(cfg.out)
    bench_start = {}
    if benches:
        model = plan[0][2].model
        bench_start = benchmark_scores(model, cfg, out / "benchmark_start", plan[0][2].device)
    runs = []
    for i, (arm, seed, tcfg) in enumerate(plan, 1):
        logger.info("compare: run %d/%d: %s seed %d -> %s", i, len(plan), arm.name, seed, tcfg.out)
        train(tcfg, progress=cfg.progress, desc=f"{arm.name} seed {seed}")
        runs.append(read_run(arm.name, seed, tcfg.out))
        if runs[-1].trained_steps == 0:
            logger.warning(
                "compare: %s seed %d trained nothing: no step's update changed the weights "
                "(learner/trained = 0 in every step of %s/metrics.jsonl)",
                arm.name,
                seed,
                tcfg.out,
            )
        if benches:
            run = Path(tcfg.out)
            runs[-1].benchmark_end = benchmark_scores(
                final_model(run), cfg, run / "benchmarks", tcfg.device
            )
    summary: dict[str, Any] = {
        "config": dataclasses.asdict(cfg),
        "budget": {"unit": "steps", "steps": cfg.steps, "rounds_per_step": cfg.rounds_per_step},
        "heldout": {
            "math": {
                "items": cfg.heldout,
                "source": "sage_env.load_validation(N): MATH and GSM8K in turn",
                "verifier": "MathVerifier",
            },
            **{
                s.name: {
                    "items": s.items,
                    "source": f"sage-env eval benchmark {s.name} (the first items)",
                    "verifier": "the executor (the program's output against the answer's)",
                }
                for s in parse_heldout(cfg.heldout_exec)
            },
            "matched": cfg.heldout_match,
        },
        "benchmark_start": bench_start,
        "runs": [dataclasses.asdict(r) for r in runs],
        "arms": summarise(arms, runs),
    }
    summary["table"] = markdown(summary)
    summary["all_heldout_zero"] = all_heldout_zero(summary)
    if summary["all_heldout_zero"]:
        logger.warning("compare: %s", ALL_HELDOUT_ZERO)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "table.md").write_text(summary["table"] + "\n")
    plot(runs, arms, out / "compare.png")
    return summary
