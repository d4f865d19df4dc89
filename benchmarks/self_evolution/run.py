r"""Do self-made tasks teach? Warm-started arms, the frozen-pool ablation, seeds (issue 34).

Every arm starts from **one warmed-up model**: the format warm-up
(:func:`learners.training.warmup.run_warmup`) on the union of the demonstrations each
protocol's run would use (:func:`sage_env.protocols.warmup.demonstrations_for` for ``azr``
and for ``sage`` on the arms' domains: AZR's proposer format, the SAGE/MAE challenger format on
execution tasks, the critic's), saved once as a plain model folder under
``$SAGE_ENV_CACHE/warm_start/<key>`` (the key hashes the model, the warm-up settings and the
demonstrations) and reused. The arms' own warm-up is off.

Arms (``--arms``): each protocol with a growing pool, the same protocol with a **frozen
pool** (``azr:frozen``: ``EnvConfig.pool_admission = "frozen"``: proposals are generated,
judged, admitted and paid exactly as usual, but accepted tasks never become solver or
planner tasks), and ``rlvr`` on the seeds. Every arm trains ``--max-steps`` steps per seed
through :func:`learning_curve.run_curve` (its held-out sets, statistics and step log).

Held-out sets are scored greedily on the **untouched** model, on the **warmed** model (step 0
of every curve: gains are measured from it) and after every ``--eval-every`` steps.

Writes ``OUT/summary.json`` (schema in ``docs/write-ups/learning.md``, "Self-evolution"),
``OUT/table.md``, ``OUT/heldout.png`` (accuracy against step, mean over seeds, per arm) and
``OUT/pool.png`` (accepted tasks and the share of solver rows on generated tasks, per step);
each seed's :func:`learning_curve.run_curve` output sits in ``OUT/seed<s>/``.

Statistics: Wilson 95% intervals per point; exact McNemar final vs warmed per arm and seed;
for growing − frozen (and growing − rlvr), the per-seed difference of final accuracies, its
mean with a Student-t 95% interval across seeds, and an exact McNemar test on the items of
all seeds pooled (each item and seed a pair).

Usage::

    python -m benchmarks.self_evolution.run --arms azr,azr:frozen,rlvr --seeds 0,1 \
        --max-steps 20 --eval-every 5 --out benchmarks/self_evolution/results/<name>

A long grid runs piecewise instead, one cell (arm x seed) at a time, from a plan
(:mod:`benchmarks.self_evolution.cells`)::

    python -m benchmarks.self_evolution.run --plan benchmarks/self_evolution/plans/exec20.toml \
        --status | --run-missing --budget-min 60 | --aggregate
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common.arms import FROZEN_POOL, parse_curve_arms, split_arm
from benchmarks.common.scoring import evaluate
from benchmarks.learning_curve.run import CurveConfig, run_curve
from learners.evaluation.heldout import Z95, mcnemar_exact, wilson

logger = logging.getLogger("sage_env.self_evolution")

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
"""Student-t 97.5% quantiles by degrees of freedom (two-sided 95%); 1.96 beyond 9."""

WARM_START_THREADS = 2
"""Torch CPU threads of the warm-start build, whatever the machine has: a matmul's reduction
order, hence its float rounding, depends on the thread count (the tiny model's warm start
differed between 1 and 2 threads), and the same key must give the same weights everywhere."""


@dataclass
class EvolutionConfig:
    """Options of the self-evolution experiment."""

    arms: str = "sage,sage:frozen,azr,azr:frozen,mae,mae:frozen,rlvr"
    """Arms, comma-separated: a protocol (growing pool), ``<protocol>:frozen`` (the
    frozen-pool ablation) or ``rlvr`` (the seeds only)."""
    seeds: str = "0,1"
    """Seeds, comma-separated: every arm trains once per seed."""
    model: str = "smollm2-135m-instruct"
    """The untouched model (a bundled name or a folder)."""
    warmup_steps: int = 24
    """Steps of the shared format warm-up (the demo preset's other warm-up settings); 0: the
    arms start from the untouched model."""
    warmup_critic_reviews: int = 0
    """Extra critic demonstrations on execution questions in the warm start
    (:func:`sage_env.protocols.demonstrations.build_exec_reviews`: intact seed questions scored
    8-9, corrupted ones 2-3), on top of the ``sage`` warm-up's own (14 of its 48 at the demo
    preset's mix); give ``warmup_steps`` room for them (4 demonstrations a step). Measured
    (``benchmarks/self_evolution/critic_check.py``, ``results/exec20/critic_check.json``): 96
    more, with 48 steps, left the critic's AUC on execution questions where the plan's warm
    start has it (0.75-0.84 on the cells' probes) and its scores as compressed (intact and
    corrupted mean q 0.01-0.02 apart), so the plan keeps 0 (issue 47)."""
    domains: str = "exec"
    """``EnvConfig.domains`` of every arm (``azr`` always trains on execution tasks)."""
    max_steps: int = 20
    """Optimiser steps per arm and seed."""
    eval_every: int = 5
    """Steps between held-out evaluations of the curve sets."""
    rounds_per_step: int = 4
    """Rounds per environment copy per step."""
    solver_samples: int = 8
    """k: the solver's attempts per task (the advantage group)."""
    sets: str = "exec_heldout:240:16,cruxeval_o:200:64,cruxeval_i:200:64"
    """``name:items:max_new_tokens`` per held-out set (:data:`benchmarks.common.scoring.SETS`)."""
    curve_sets: str = "exec_heldout"
    """Sets scored after every chunk; the others at the warmed start and the end only."""
    engine: str = "ct2"
    """Rollout engine of training and of the evaluations."""
    lr: float | None = None
    """The learner's learning rate (``None``: the demo preset's)."""
    gate_probe_size: int = 96
    """Critic probe items that calibrate the quality gate of ``sage`` and ``mae`` per domain
    before the first step, as the demo does (``learning_curve.CurveConfig.gate_probe_size``;
    0: SAGE's fixed alpha = 0.7, which the 135M critic's scores of valid execution proposals,
    q = 0.17-0.22, never reached: 0 of 9 valid proposals accepted; issue 47)."""
    gate_probe_every: int = 5
    """With ``gate_probe_size``: recalibrate the gate every this many steps, as the critic
    trains (``TrainConfig.probe_every``). Calibrated once, the gate accepted 6 of 7 valid
    exec proposals in steps 1-4 and 2 of 9 in steps 5-7: the critic's scores drifted down
    under it (issue 47)."""
    gate_intact_pass: float | None = 0.75
    """With ``gate_probe_size``: the calibrated gate passes at least this share of the probe's
    intact execution seeds (``TrainConfig.gate_intact_pass``). Youden's threshold alone passed
    37-77% of them on the warm start's compressed critic scale (AUC 0.75-0.84, intact and
    corrupted mean q 0.01-0.02 apart), and a valid proposal's truth is already computed
    (issue 47; ``critic_check.py``). ``None``: Youden's threshold alone."""
    gate_critic: str = "warm_start"
    """With ``gate_probe_size``: which critic the gate reads (``TrainConfig.gate_critic``).
    ``"warm_start"`` (default): the shared warm start, frozen; the training critic's
    execution AUC fell 0.75 -> 0.70 -> 0.66 in 10 steps and the gate passed 10 of 23 valid
    proposals (exec20 growth check; issue 47). ``"policy"``: the critic as it trains."""
    out: str = "runs/self_evolution"
    """Where the summary, table and plots go (default under the git-ignored ``runs/``; give
    ``benchmarks/self_evolution/results/<name>`` to publish)."""
    runs: str = "runs/self_evolution_runs"
    """Training runs (deleted after each arm unless ``--keep-runs``)."""
    keep_runs: bool = False
    """Keep every run folder (checkpoints, metrics, pools)."""
    progress: bool = True
    """Progress bars over the warm-up and the training steps."""
    resume: bool = False
    """Continue stopped arms (and extend finished ones to a larger ``--max-steps``) from
    ``OUT/seed<s>/partial/`` and the kept run folders (``learning_curve.py --resume``)."""

    def seed_list(self) -> list[int]:
        """The seeds as integers.

        Raises:
            ValueError: on an empty or malformed list, or a repeated seed.
        """
        try:
            seeds = [int(x) for x in self.seeds.split(",") if x.strip()]
        except ValueError:
            raise ValueError(
                f"--seeds takes integers separated by commas, got {self.seeds!r}"
            ) from None
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"--seeds must list distinct seeds, got {self.seeds!r}")
        return seeds

    def curve_config(self, model: str, seed: int) -> CurveConfig:
        """The :class:`learning_curve.CurveConfig` of one seed (warm-up off: ``model`` is warm)."""
        return CurveConfig(
            protocols=self.arms,
            model=model,
            domains=self.domains,
            rounds_per_step=self.rounds_per_step,
            max_steps=self.max_steps,
            eval_every=self.eval_every,
            sets=self.sets,
            engine=self.engine,
            eval_engine=self.engine,
            curve_sets=self.curve_sets,
            warmup_steps=0,
            solver_samples=self.solver_samples,
            lr=self.lr,
            gate_probe_size=self.gate_probe_size,
            gate_probe_every=self.gate_probe_every,
            gate_intact_pass=self.gate_intact_pass,
            gate_critic=self.gate_critic,
            seed=seed,
            out=str(Path(self.out) / f"seed{seed}"),
            runs=str(Path(self.runs) / f"seed{seed}"),
            keep_runs=self.keep_runs,
            progress=self.progress,
            resume=self.resume,
        )


# --------------------------------------------------------------------------- warm start
def warm_demonstrations(cfg: EvolutionConfig, warmup: Any) -> list:
    """The union of the warm-up demonstrations of ``azr`` and of ``sage`` on the domains.

    ``mae`` proposes and reviews in the SAGE formats, ``rlvr`` only solves, so these two
    cover every arm. The validation split is excluded, as training excludes it.
    """
    import sage_env
    from sage_env.protocols.demonstrations import build_exec_reviews
    from sage_env.protocols.exec_demonstrations import exec_seeds
    from sage_env.protocols.warmup import demonstrations_for

    seeds = sage_env.load_seeds()
    validation = sage_env.load_validation()
    domains = tuple(cfg.domains.split(","))
    out = []
    for protocol in ("azr", "sage"):
        out += demonstrations_for(
            protocol,
            domains,
            seeds,
            warmup.num_demonstrations,
            warmup.mix,
            seed=warmup.seed,
            exclude=validation,
            math_grounding="program",
        )
    if cfg.warmup_critic_reviews > 0:  # a draw of their own, not the sage warm-up's again
        out += build_exec_reviews(
            exec_seeds(seeds),
            cfg.warmup_critic_reviews,
            seed=warmup.seed + 1,
            exclude_ids={t.task_id for t in validation},
        )
    return out


def warm_start(cfg: EvolutionConfig) -> tuple[str, dict[str, Any]]:
    """The shared warmed model: ``(folder, facts)``; the untouched model when steps = 0.

    Trains once (the demo preset's warm-up with ``cfg.warmup_steps`` steps, on
    :func:`warm_demonstrations`) and saves weights and tokenizer to
    ``$SAGE_ENV_CACHE/warm_start/<key>`` (written to a temp folder, then renamed); later
    calls with the same model, settings and demonstrations reuse it.

    Reproducible: the build runs on the CPU with :data:`WARM_START_THREADS` threads,
    deterministic algorithms and torch's global seed 0 (data order: the warm-up's own seeded
    RNG), so the same key gives bitwise-identical weights on another machine with the same
    torch build and CPU kind (tests/benchmarks/test_self_evolution_cells.py).
    """
    import torch

    from learners.policy import HFPolicy, cache_dir
    from learners.training.presets import PRESETS
    from learners.training.warmup import cache_key, run_warmup

    if cfg.warmup_steps <= 0:
        return cfg.model, {"steps": 0}
    warmup = dataclasses.replace(PRESETS["demo"].warmup, steps=cfg.warmup_steps, cache=False)
    demos = warm_demonstrations(cfg, warmup)
    target = cache_dir() / "warm_start" / cache_key(cfg.model, warmup, demos)
    facts = {
        "steps": warmup.steps,
        "batch_size": warmup.batch_size,
        "lr": warmup.lr,
        "demonstrations": len(demos),
        "by_role": {r: sum(d.role == r for d in demos) for r in sorted({d.role for d in demos})},
        "folder": str(target),
    }
    if (target / "warm_start.json").exists():
        return str(target), {**facts, **json.loads((target / "warm_start.json").read_text())}
    t0 = time.perf_counter()
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(WARM_START_THREADS)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    facts.update(threads=WARM_START_THREADS, torch=torch.__version__)
    policy = HFPolicy(cfg.model, device="cpu", seed=0)
    try:
        metrics = run_warmup(policy, demos, warmup, cfg.model, progress=cfg.progress)
        tmp = target.parent / f".{target.name}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        policy.save(tmp)
        done = {"metrics": metrics, "seconds": time.perf_counter() - t0}
        (tmp / "warm_start.json").write_text(json.dumps(done))
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:
        policy.close()
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
    return str(target), {**facts, **done}


# --------------------------------------------------------------------------- statistics
def mean_interval(xs: list[float]) -> dict[str, Any]:
    """Mean of per-seed values with a Student-t 95% interval (``None`` with one seed)."""
    n = len(xs)
    mean = sum(xs) / n if n else None
    if n < 2:
        return {"mean": mean, "ci95": None, "n": n}
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = T975.get(n - 1, Z95) * sd / math.sqrt(n)
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": n}


def paired(a: dict[int, list[bool]], b: dict[int, list[bool]]) -> dict[str, Any]:
    """Arm ``a`` against arm ``b`` over the seeds both have (per-item finals per seed).

    Returns:
        ``{"per_seed": [a - b, ...], "mean", "ci95" (Student-t across seeds; None with one),
        "n", "pooled": {"a_better", "b_better", "p_value"}}`` (exact McNemar on every item
        of every seed; ``a_better``: items ``a`` got right and ``b`` wrong).
    """
    seeds = sorted(set(a) & set(b))
    diffs = [sum(a[s]) / len(a[s]) - sum(b[s]) / len(b[s]) for s in seeds]
    xs = [x for s in seeds for x in b[s]]
    ys = [y for s in seeds for y in a[s]]
    a_better, b_better, p = mcnemar_exact(xs, ys)
    return {
        **mean_interval(diffs),
        "per_seed": diffs,
        "pooled": {"a_better": a_better, "b_better": b_better, "p_value": p},
    }


# --------------------------------------------------------------------------- the run
def final_items(base: list[bool], set_summary: dict[str, Any]) -> list[bool]:
    """Per-item final correctness of a run, from the warmed start's items and the run's
    ``gained_items`` / ``lost_items`` (:func:`benchmarks.common.stats.set_summary`)."""
    flipped = set(set_summary["gained_items"]) | set(set_summary["lost_items"])
    return [(not b) if i in flipped else b for i, b in enumerate(base)]


def pool_dynamics(step_log: list[dict[str, Any]]) -> dict[str, Any]:
    """An arm's pool dynamics from its step log: per-step series and run totals."""
    keys = sorted({k for r in step_log for k in r if k.startswith(("pool/", "solver/"))})
    series = {k: [r.get(k) for r in step_log] for k in keys}
    accepted = [r.get("pool/accepted") or 0.0 for r in step_log]
    return {
        "steps": [r["step"] for r in step_log],
        "series": series,
        "accepted_total": sum(accepted),
        "valid_total": sum(r.get("pool/valid") or 0.0 for r in step_log),
        "proposals_total": sum(r.get("pool/proposals") or 0.0 for r in step_log),
        "rollout_tokens": sum(r.get("rollout/tokens") or 0.0 for r in step_log),
    }


def run(cfg: EvolutionConfig, **stand_ins: Any) -> dict[str, Any]:
    """Warm up, score the untouched and warmed models, train every arm per seed, summarise.

    ``stand_ins`` (tests): ``warm_fn`` (config -> (model, facts)) in place of
    :func:`warm_start`, and ``train_fn``, ``evaluate_fn``, ``model_of`` as
    :func:`learning_curve.run_curve` takes them.

    Raises:
        ValueError: on bad arms, seeds or sets.
    """
    seeds = cfg.seed_list()
    parse_curve_arms(cfg.arms)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = CurveConfig(sets=cfg.sets).parsed_sets()
    t0 = time.perf_counter()
    warm, warm_facts = stand_ins.pop("warm_fn", warm_start)(cfg)
    evaluate_fn = stand_ins.get("evaluate_fn") or evaluate
    untouched_file = out / "untouched_items.json"
    key = {"model": cfg.model, "sets": sets, "engine": cfg.engine}
    cached = json.loads(untouched_file.read_text()) if untouched_file.exists() else {}
    if cached.get("key") == json.loads(json.dumps(key)):
        untouched = cached["correct"]
    else:
        ccfg = cfg.curve_config(cfg.model, seeds[0])
        untouched = evaluate_fn(cfg.model, sets, ccfg, Path(cfg.runs) / "eval_untouched")
        untouched_file.write_text(json.dumps({"key": key, "correct": untouched}))
    per_seed: dict[int, dict[str, Any]] = {}
    first_base: Path | None = None
    for seed in seeds:
        ccfg = cfg.curve_config(warm, seed)
        seed_out = Path(ccfg.out)
        seed_out.mkdir(parents=True, exist_ok=True)
        if first_base is not None and not (seed_out / "base_items.json").exists():
            shutil.copyfile(first_base, seed_out / "base_items.json")  # one warmed-model score
        per_seed[seed] = run_curve(ccfg, **stand_ins)
        first_base = first_base or seed_out / "base_items.json"
    warmed = json.loads((out / f"seed{seeds[0]}" / "base_items.json").read_text())["correct"]
    summary = summarise(cfg, warm_facts, untouched, warmed, per_seed, out)
    summary["seconds"] = time.perf_counter() - t0
    write(summary, out)
    return summary


def _point(xs: list[bool]) -> dict[str, Any]:
    return {
        "accuracy": sum(xs) / len(xs),
        "ci95": list(wilson(sum(xs), len(xs))),
        "items": len(xs),
    }


def summarise(
    cfg: EvolutionConfig,
    warm_facts: dict[str, Any],
    untouched: dict[str, list[bool]],
    warmed: dict[str, list[bool]],
    per_seed: dict[int, dict[str, Any]],
    out: Path,
) -> dict[str, Any]:
    """The experiment's ``summary.json`` (schema: docs/write-ups/learning.md, "Self-evolution").

    ``untouched`` may be empty (the cells of a plan do not score the untouched model): ``start``
    then holds the warmed model only. An arm's entry in ``per_seed`` may carry its own
    ``base_items`` (the warmed model's per-item scores it measured at step 0) and ``cell``
    (a cell's provenance); otherwise ``warmed`` is its start.
    """
    arms = [a.strip() for a in cfg.arms.split(",") if a.strip()]  # checked by the caller
    start: dict[str, Any] = {}
    for name in warmed:
        start[name] = {"warmed": _point(warmed[name])}
        if name in untouched:
            g, l_, p = mcnemar_exact(untouched[name], warmed[name])
            start[name].update(
                untouched=_point(untouched[name]), warm_up_gained=g, warm_up_lost=l_, p_value=p
            )
    by_arm: dict[str, Any] = {}
    finals: dict[str, dict[str, dict[int, list[bool]]]] = {}
    for arm in arms:
        entry: dict[str, Any] = {"seeds": {}}
        for seed, summ in per_seed.items():
            got = summ["protocols"].get(arm)
            if got is None:
                continue
            entry["seeds"][str(seed)] = {
                "sets": got["sets"],
                "budget": got["budget"],
                "seconds_per_step": got["seconds_per_step"],
                "pool": pool_dynamics(got.get("step_log", [])),
            }
            if "cell" in got:
                entry["seeds"][str(seed)]["cell"] = got["cell"]
            base = got.get("base_items", warmed)
            for name, st in got["sets"].items():
                items = final_items(base[name], st)
                finals.setdefault(arm, {}).setdefault(name, {})[seed] = items
        runs = list(entry["seeds"].values())
        if runs:
            entry["final_mean"] = {
                name: mean_interval([r["sets"][name]["final"] for r in runs])
                for name in runs[0]["sets"]
            }
            entry["gain_over_warmed"] = {
                name: mean_interval(
                    [r["sets"][name]["final"] - r["sets"][name]["base"] for r in runs]
                )
                for name in runs[0]["sets"]
            }
            entry["accepted_per_run"] = [r["pool"]["accepted_total"] for r in runs]
        by_arm[arm] = entry
    comparisons: dict[str, Any] = {}
    for arm in arms:
        protocol, frozen = split_arm(arm)
        if frozen or protocol == "rlvr":
            continue
        for other, label in (
            (f"{protocol}{FROZEN_POOL}", "growing - frozen"),
            ("rlvr", "vs rlvr"),
        ):
            if other in finals and arm in finals:
                comparisons[f"{arm} - {other}"] = {
                    "what": label,
                    "sets": {
                        name: paired(finals[arm][name], finals[other][name])
                        for name in finals[arm]
                        if name in finals[other]
                    },
                }
    return {
        "config": dataclasses.asdict(cfg),
        "decoding": "greedy",
        "interval": "Wilson score 95% per point; Student-t 95% across seeds for means",
        "test": "exact McNemar (final vs warmed per run; pooled items x seeds for differences)",
        "warm_start": warm_facts,
        "start": start,
        "arms": by_arm,
        "comparisons": comparisons,
    }


def markdown(summary: dict[str, Any]) -> str:
    """Two tables: each arm's final (mean over seeds) and gain over the warmed start, and
    each comparison's mean difference with its intervals."""

    def ci(c: list[float] | None) -> str:
        return "-" if c is None else f"[{c[0]:+.3f}, {c[1]:+.3f}]"

    lines = [
        "| arm | held-out set | warmed | final (mean) | gain over warmed (95% CI) | "
        "accepted tasks per run | s/step |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, e in summary["arms"].items():
        for name, fm in e.get("final_mean", {}).items():
            g = e["gain_over_warmed"][name]
            sps = [r["seconds_per_step"] or 0.0 for r in e["seeds"].values()]
            lines.append(
                f"| {arm} | {name} | {summary['start'][name]['warmed']['accuracy']:.3f} | "
                f"{fm['mean']:.3f} | {g['mean']:+.3f} {ci(g['ci95'])} | "
                f"{', '.join(f'{x:.0f}' for x in e['accepted_per_run'])} | "
                f"{sum(sps) / len(sps):.0f} |"
            )
    lines += [
        "",
        "| comparison | held-out set | per seed | mean (95% CI, seeds) | pooled a/b better | "
        "McNemar p |",
        "|---|---|---|---|---|---|",
    ]
    for label, c in summary["comparisons"].items():
        for name, d in c["sets"].items():
            lines.append(
                f"| {label} | {name} | {', '.join(f'{x:+.3f}' for x in d['per_seed'])} | "
                f"{d['mean']:+.3f} {ci(d['ci95'])} | {d['pooled']['a_better']} / "
                f"{d['pooled']['b_better']} | {d['pooled']['p_value']:.3g} |"
            )
    return "\n".join(lines)


def write(summary: dict[str, Any], out: Path) -> None:
    """``summary.json``, ``table.md``, ``heldout.png`` and ``pool.png``."""
    summary["table"] = markdown(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "table.md").write_text(summary["table"] + "\n")
    plot(summary, out)


def plot(summary: dict[str, Any], out: Path) -> None:
    """Held-out accuracy against step (mean over seeds) and the pool dynamics per step;
    nothing (and no file) when no arm has a held-out score yet, e.g. a plan with no cell done."""
    if not summary.get("start") or not summary.get("arms"):
        logger.info("self-evolution: nothing to plot yet (no cell with held-out scores)")
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = summary["arms"]
    names = list(summary["start"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for i, (arm, e) in enumerate(arms.items()):
            curves = [r["sets"][name]["curve"] for r in e["seeds"].values() if name in r["sets"]]
            if not curves:
                continue
            steps = [p["step"] for p in curves[0]]
            ys = [
                sum(c[j]["accuracy"] for c in curves if j < len(c)) / len(curves)
                for j in range(len(steps))
            ]
            style = "--" if arm.endswith(FROZEN_POOL) else "-"
            ax.plot(steps, ys, style, marker="o", color=f"C{i % 10}", label=arm)
        if "untouched" in summary["start"][name]:
            u = summary["start"][name]["untouched"]["accuracy"]
            ax.axhline(u, color="grey", lw=0.8, ls=":", label="untouched")
        ax.set(title=f"{name} (greedy, mean over seeds)", xlabel="step", ylabel="accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "heldout.png", dpi=100)
    plt.close(fig)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for i, (arm, e) in enumerate(arms.items()):
        for r in e["seeds"].values():
            p = r["pool"]
            acc = p["series"].get("pool/accepted") or []
            total, cum = 0.0, []
            for x in acc:
                total += x or 0.0
                cum.append(total)
            style = "--" if arm.endswith(FROZEN_POOL) else "-"
            if cum:
                a1.plot(p["steps"], cum, style, color=f"C{i % 10}", label=arm)
            share = p["series"].get("solver/generated_share")
            if share:
                a2.plot(p["steps"], [x or 0.0 for x in share], style, color=f"C{i % 10}", label=arm)
    a1.set(title="accepted tasks (cumulative, per run)", xlabel="step")
    a2.set(
        title="share of trained solver rows on generated tasks", xlabel="step", ylim=(-0.02, 1.02)
    )
    for a in (a1, a2):
        a.grid(alpha=0.3)
        handles, labels = a.get_legend_handles_labels()
        keep = dict(zip(labels, handles))
        if keep:
            a.legend(keep.values(), keep.keys(), fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "pool.png", dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> Any:
    """Command line: every :class:`EvolutionConfig` field as ``--field-name``; with ``--plan``,
    the cell workflow of :mod:`benchmarks.self_evolution.cells` instead."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if any(a == "--plan" or a.startswith("--plan=") for a in args):
        from benchmarks.self_evolution import cells

        return cells.main(args)
    import tyro

    cfg = tyro.cli(EvolutionConfig, args=argv, description=__doc__.split("\n")[0])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    summary = run(cfg)
    print(summary["table"])
    return summary


if __name__ == "__main__":
    main()
