r"""Learning curve: does the loop teach the default model, and which protocol teaches most?

Issue 22, part 5. Every arm (``sage``, ``azr``, ``rlvr``, ``mae`` by default) trains the same
model from the same start on **one task source whose ground truth is never wrong**: AZR's
execution tasks (``--env.domains exec``; the ``azr`` protocol has no other), through
:func:`learners.training.loop.train` with the configuration ``sage-env compare`` builds
(:func:`learners.training.compare.run_config`: preset, algorithm, protocol, seed), the ``ct2``
engine by default. RLVR trains the solver on the execution seed tasks only (its pool never grows).

**Budget: equal rollout tokens.** An arm trains in chunks of ``eval_every`` steps (each chunk
resumes the last checkpoint); after each chunk its rollout tokens (``rollout/tokens`` of
``metrics.jsonl``, prompts excluded) are summed, and the arm stops at the first chunk that
reaches ``token_budget`` (or at ``max_steps``). ``token_budget = 0`` makes the budget
``max_steps`` steps for every arm instead. Steps, tokens and seconds are reported per arm.

**Held-out sets** (``exec_heldout``, ``cruxeval_o``, ``cruxeval_i``, ``validation``; what
each is: :mod:`benchmarks.common.scoring`), scored at step 0 (the shared base model) and after
every chunk, greedy (:func:`benchmarks.common.scoring.evaluate`).

**Statistics.** Accuracy with its Wilson score interval at 95% (Wilson 1927; the interval
recommended by Brown, Cai & DasGupta 2001); final against base on the same items with the
exact McNemar test (two-sided binomial test on the discordant pairs, McNemar 1947):
:mod:`benchmarks.common.stats`.

Writes ``OUT/summary.json`` (per arm and held-out set: ``base``, ``final``, ``ci95`` =
``{"base": [lo, hi], "final": [lo, hi]}``, ``items``, ``steps``, ``p_value``, ``gained``,
``lost``, ``curve``; per arm also ``step_log``, each step's solver accuracy and proposal
parse/valid/accept rates), ``OUT/learning_curve.png`` (accuracy against step, one line per arm,
Wilson intervals) and ``OUT/table.md``. Training runs go to ``--runs`` (deleted at the end
unless ``--keep-runs``). Usage::

    python -m benchmarks.learning_curve.run \
        --protocols sage,azr,rlvr,mae --max-steps 4 --eval-every 2 --token-budget 20000 \
        --sets exec_heldout:200:24,cruxeval_o:200:160,cruxeval_i:200:160,validation:200:192
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common.arms import VARIANT, parse_curve_arms, split_arm, split_variant
from benchmarks.common.run_metrics import read_totals, step_log
from benchmarks.common.scoring import SETS, evaluate, keep_completions
from benchmarks.common.stats import set_summary, variant_pairs

logger = logging.getLogger("sage_env.learning_curve")


# --------------------------------------------------------------------------- config
@dataclass
class CurveConfig:
    """Options of the learning-curve benchmark."""

    protocols: str = "sage,azr,rlvr,mae"
    """Arms, comma-separated: protocol names, a suffix ``:frozen`` for the frozen-pool
    ablation (``azr:frozen``: proposals judged and paid as usual, accepted tasks never
    trained on)."""
    model: str = "smollm2-135m-instruct"
    """The start model of every arm: a bundled name or a folder (e.g. a warmed model)."""
    preset: str = "demo"
    """The training preset every arm starts from (``sage-env train --preset``)."""
    algorithm: str = "trr"
    """The learner of every arm (``trr``: Task-Relative REINFORCE++)."""
    domains: str = "exec"
    """``EnvConfig.domains`` of every arm (``azr`` ignores it: execution tasks only)."""
    rounds_per_step: int = 4
    """Rounds per environment copy per optimiser step."""
    max_steps: int = 4
    """Optimiser steps per arm (the most; see ``token_budget``)."""
    eval_every: int = 2
    """Steps between held-out evaluations (each chunk resumes the last checkpoint)."""
    token_budget: int = 0
    """Rollout tokens per arm (equal-token budget); 0: ``max_steps`` steps for every arm."""
    sets: str = "exec_heldout:200:24,cruxeval_o:200:160,cruxeval_i:200:160,validation:200:192"
    """``name:items:max_new_tokens`` per held-out set (names from :data:`SETS`)."""
    engine: str = "ct2"
    """Rollout engine of training."""
    eval_engine: str = "ct2"
    """Engine of every held-out evaluation (greedy). On 2 cores ``ct2`` at 16 rows scored the
    held-out execution items at about 1-2 s an item, ``hf`` at 64 rows at 3-5 s (2026-12-02,
    shared machine)."""
    eval_batch: int = 16
    """Rows per generate call of the evaluations."""
    curve_sets: str = ""
    """Held-out sets scored after every chunk (comma-separated); the others are scored at
    step 0 and after the last chunk only. Empty: every set after every chunk."""
    warmup_steps: int | None = None
    """Format warm-up steps of every arm (``None``: the preset's)."""
    solver_samples: int | None = None
    """``EnvConfig.solver_samples`` (k, the solver's attempts per task: the advantage group)
    of every arm (``None``: the preset's)."""
    lr: float | None = None
    """The learner's learning rate in every arm (``None``: the preset's)."""
    gate_probe_every: int = 0
    """With ``gate_probe_size``: probe the critic and recalibrate the gate every this many
    steps as well (``TrainConfig.probe_every``; 0: before the first step and after the last)."""
    gate_intact_pass: float | None = None
    """With ``gate_probe_size``: ``TrainConfig.gate_intact_pass``, the least share of the
    probe's intact seed questions the calibrated gate passes (``None``: the preset's)."""
    gate_critic: str | None = None
    """With ``gate_probe_size``: ``TrainConfig.gate_critic`` (``"warm_start"``: the gate reads
    a critic frozen at step 0; ``None``: the preset's, ``"policy"``)."""
    gate_probe_size: int = 0
    """Critic probe items (intact and corrupted seed questions of the arm's domains) that
    calibrate the quality gate of every arm whose protocol reads critic scores, once before
    training and per domain (the ``demo`` preset's ``gate_calibration`` and
    ``gate_per_domain``); 0: no probe, the preset's fixed alpha (SAGE's 0.7)."""
    seed: int = 0
    """Seed of every arm's run (sampling, task draws); the held-out sets are scored greedily."""
    out: str = "runs/learning_curve_results"
    """Where ``summary.json``, ``table.md``, the plot and the kept completions go. The default
    is under the git-ignored ``runs/``, so a run never overwrites committed results; give
    ``benchmarks/learning_curve/results/<name>`` to publish."""
    runs: str = "runs/learning_curve"
    """Where the training runs go (deleted at the end unless ``--keep-runs``)."""
    keep_runs: bool = False
    """Keep every arm's run folder (checkpoints, ``metrics.jsonl``, pool)."""
    progress: bool = True
    """A progress bar over training steps of all arms (the arms' own bars stay off)."""
    resume: bool = False
    """Continue arms from ``OUT/partial/<arm>.json`` and their run folders (a stopped
    invocation, or a larger ``--max-steps``) instead of training them from the start."""
    merge: bool = False
    """Keep the arms of an earlier ``summary.json`` in ``out`` (same model, sets and engine)
    that this invocation does not train: several short invocations make one summary."""
    variants: str = ""
    """Named training settings for arms written ``PROTOCOL@NAME``: ``"NAME=FLAGS;NAME=FLAGS"``,
    each FLAGS a string of ``sage-env train`` flags applied on top of the arm's configuration
    (``"int8-tis=--rollout.ct2-compute-type int8 --learner.tis-cap 2;"``
    ``"bf16=--learner.autocast-bf16"``).
    An arm ``rlvr@bf16`` is then compared with the plain ``rlvr`` arm on the same items
    (``summary.json``'s ``pairs``: final against final, exact McNemar)."""

    def parsed_variants(self) -> dict[str, list[str]]:
        """``{name: [flag, ...]}`` of :attr:`variants`.

        Raises:
            ValueError: on an entry without ``=``, an empty or repeated name, or a name
                holding ``@``, ``,`` or ``:``.
        """
        import shlex

        out: dict[str, list[str]] = {}
        for entry in (e.strip() for e in self.variants.split(";") if e.strip()):
            name, sep, flags = entry.partition("=")
            name = name.strip()
            if not sep or not name or any(c in name for c in "@,:/ "):
                raise ValueError(f"--variants entries are NAME=FLAGS, got {entry!r}")
            if name in out:
                raise ValueError(f"--variants repeats {name!r}")
            out[name] = shlex.split(flags)
        return out

    def parsed_sets(self) -> list[tuple[str, int, int]]:
        """``[(name, items, max_new_tokens), ...]``.

        Raises:
            ValueError: on an unknown set or a bad entry.
        """
        out = []
        for entry in (e.strip() for e in self.sets.split(",") if e.strip()):
            parts = entry.split(":")
            if len(parts) != 3 or parts[0] not in SETS:
                raise ValueError(f"--sets entries are name:items:max_new_tokens, name in {SETS}")
            n, t = int(parts[1]), int(parts[2])
            if n < 1 or t < 1:
                raise ValueError(f"--sets {entry}: items and max_new_tokens must be >= 1")
            out.append((parts[0], n, t))
        return out

    def every_chunk(self) -> set[str]:
        """Names of the sets scored after every chunk (:attr:`curve_sets`; empty: all).

        Raises:
            ValueError: on a name that is not in :attr:`sets`.
        """
        names = {n for n, _, _ in self.parsed_sets()}
        wanted = {x.strip() for x in self.curve_sets.split(",") if x.strip()}
        if wanted - names:
            raise ValueError(f"--curve-sets {sorted(wanted - names)} not in --sets")
        return wanted or names


def train_config(cfg: CurveConfig, protocol: str) -> Any:
    """The arm's :class:`~learners.training.config.TrainConfig` (``sage-env compare``'s, then ours).

    Ours: the rollout engine, the domains, no in-training validation or critic probe (the
    held-out sets are scored here, the same way for every arm), a checkpoint per chunk.
    ``protocol`` may name a frozen-pool arm (``azr:frozen``): ``pool_admission = "frozen"``,
    and its runs go to ``<runs>/azr-frozen-pool``.
    """
    from learners.engines.config import RolloutConfig
    from learners.training.compare import Arm, CompareConfig, run_config
    from learners.training.run_checks import reads_scores

    arm = protocol
    variant = split_variant(arm)[1]
    protocol, frozen_pool = split_arm(arm)

    ccfg = CompareConfig(
        protocols=protocol,
        algorithms=cfg.algorithm,
        seeds=(cfg.seed,),
        steps=cfg.eval_every,
        rounds_per_step=cfg.rounds_per_step,
        model=cfg.model,
        preset=cfg.preset,
        out=cfg.runs,
    )
    name = f"{protocol}-frozen-pool" if frozen_pool else protocol
    if variant is not None:
        name = f"{name}-{variant}"
    tcfg = run_config(ccfg, Arm(name, protocol, algorithm=cfg.algorithm), cfg.seed)
    env = dataclasses.replace(tcfg.env, domains=tuple(cfg.domains.split(",")))
    if frozen_pool:
        env = dataclasses.replace(env, pool_admission="frozen")
    if cfg.solver_samples is not None:
        env = dataclasses.replace(env, solver_samples=cfg.solver_samples)
    learner = tcfg.learner
    if cfg.lr is not None:
        learner = dataclasses.replace(learner, lr=cfg.lr)
    warm = tcfg.warmup
    if cfg.warmup_steps is not None:
        warm = dataclasses.replace(warm, steps=cfg.warmup_steps)
    # the execution solver's prefix opens its answer block: the closing fence ends the answer
    stops = {**tcfg.phase_stop_strings, "solve/exec": ("```",), "probe/exec": ("```",)}
    probe = cfg.gate_probe_size if reads_scores(tcfg.env.protocol) else 0
    tcfg = dataclasses.replace(
        tcfg,
        env=env,
        learner=learner,
        warmup=warm,
        phase_stop_strings=stops,
        rollout=dataclasses.replace(RolloutConfig(), engine=cfg.engine),
        val_every=0,
        heldout="",  # the held-out sets are scored here, not by the run
        # the probe sets the gate before the first step, every gate_probe_every steps and at the end
        critic_probe_size=probe,
        gate_calibration=probe > 0,
        gate_per_domain=probe > 0,
        probe_every=cfg.gate_probe_every if probe > 0 else 0,
        gate_intact_pass=(
            tcfg.gate_intact_pass if cfg.gate_intact_pass is None else cfg.gate_intact_pass
        ),
        gate_critic=cfg.gate_critic if probe > 0 and cfg.gate_critic else tcfg.gate_critic,
        save_every=cfg.eval_every,
        keep_checkpoints=1,
        report_to="none",
        device="cpu",
    )
    if variant is None:
        return tcfg
    return apply_flags(tcfg, cfg.parsed_variants()[variant])


def apply_flags(tcfg: Any, flags: list[str]) -> Any:
    """``tcfg`` with ``sage-env train`` flags applied on top (``["--learner.autocast-bf16"]``).

    Raises:
        ValueError: on a flag the configuration does not have, or a bad value.
    """
    import contextlib
    import io

    import tyro

    from learners.training.config import config_type

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return tyro.cli(
                config_type(tcfg.algorithm, tcfg.env.protocol), default=tcfg, args=flags
            )
    except SystemExit as exc:
        raise ValueError(f"variant flags {flags}: {err.getvalue().strip()[-400:]}") from exc


# --------------------------------------------------------------------------- the run
def run_curve(
    cfg: CurveConfig,
    train_fn: Callable[[Any], Any] | None = None,
    evaluate_fn: Callable[..., dict[str, list[bool]]] | None = None,
    model_of: Callable[[Path], str] | None = None,
) -> dict[str, Any]:
    """Train every arm in chunks, score the held-out sets, write the summary and the plot.

    ``train_fn`` (a TrainConfig -> None), ``evaluate_fn`` (as :func:`evaluate`) and
    ``model_of`` (run folder -> model path) default to the real ones; tests pass scripted
    stand-ins.

    Returns:
        The summary written to ``summary.json``.

    Raises:
        ValueError: on bad budgets or sets.
    """
    from learners.training.compare import final_model

    if train_fn is None:
        from learners.training.loop import train

        def train_fn(tcfg: Any) -> None:
            train(tcfg, progress=False)

    evaluate_fn = evaluate_fn or evaluate
    model_of = model_of or final_model
    if cfg.max_steps < 1 or cfg.eval_every < 1 or cfg.token_budget < 0:
        raise ValueError("max_steps and eval_every must be >= 1, token_budget >= 0")
    sets = cfg.parsed_sets()
    arms = parse_curve_arms(cfg.protocols, cfg.parsed_variants())
    for arm in arms:  # a bad variant flag fails before any scoring
        if split_variant(arm)[1] is not None:
            train_config(cfg, arm)
    out, runs = Path(cfg.out), Path(cfg.runs)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    base_file = out / "base_items.json"  # the base model's per-item scores, reused by reruns
    key = {"model": cfg.model, "sets": sets, "engine": cfg.eval_engine}
    cfg.every_chunk()  # a bad --curve-sets fails before any scoring
    cached = json.loads(base_file.read_text()) if base_file.exists() else {}
    if cached.get("key") == json.loads(json.dumps(key)):
        base, base_s = cached["correct"], cached["seconds"]
    else:
        base = evaluate_fn(cfg.model, sets, cfg, runs / "eval_base")
        base_s = time.perf_counter() - t0
        base_file.write_text(json.dumps({"key": key, "correct": base, "seconds": base_s}))
        keep_completions(runs / "eval_base", out / "items" / "base")
    per_arm: dict[str, dict[str, Any]] = {}
    earlier = out / "summary.json"
    if cfg.merge and earlier.exists():  # arms of an earlier invocation on the same base
        old = json.loads(earlier.read_text())
        if old.get("base_key") == json.loads(json.dumps(key)):
            from learners.training.build import code_provenance

            here = code_provenance()
            ours = {(here["git_commit"], here["git_diff_sha256"])}
            for p, a in old["protocols"].items():
                if p in arms:
                    continue
                theirs = {
                    (c.get("git_commit"), c.get("git_diff_sha256")) for c in a.get("code") or [{}]
                }
                if theirs != ours:  # a table of arms trained by different code
                    logger.warning(
                        "learning curve: merged arm %s was trained by other code (%s) than "
                        "this invocation (%s)",
                        p,
                        sorted(theirs, key=str),
                        sorted(ours, key=str),
                    )
                per_arm[p] = a
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(arms) * cfg.max_steps,
        desc="learning curve",
        unit="step",
        disable=not cfg.progress,
    )
    for protocol in arms:
        bar.set_postfix_str(protocol)
        per_arm[protocol] = train_arm(
            cfg, protocol, base, key, bar, train_fn, evaluate_fn, model_of
        )
        write_summary(cfg, per_arm, base_s, key, out, base)  # an arm's result survives a kill
    bar.close()
    if not cfg.keep_runs:
        shutil.rmtree(runs, ignore_errors=True)
    return write_summary(cfg, per_arm, base_s, key, out, base)


def _state_key(cfg: CurveConfig, protocol: str, key: dict) -> dict:
    """What must match for ``--resume`` to continue an arm's saved state."""
    fields = ("preset", "algorithm", "domains", "rounds_per_step", "eval_every", "token_budget",
              "curve_sets", "warmup_steps", "solver_samples", "lr", "seed", "engine")
    variant = split_variant(protocol)[1]
    flags = cfg.parsed_variants()[variant] if variant is not None else None
    return json.loads(json.dumps({"arm": protocol, "base": key, "flags": flags, **{
        f: getattr(cfg, f) for f in fields}}))


def train_arm(
    cfg: CurveConfig,
    protocol: str,
    base: dict[str, list[bool]],
    key: dict,
    bar: Any,
    train_fn: Callable[[Any], Any],
    evaluate_fn: Callable[..., dict[str, list[bool]]],
    model_of: Callable[[Path], str],
) -> dict[str, Any]:
    """Train one arm in chunks of ``eval_every`` steps, scoring after each; its summary entry.

    After every chunk the arm's curves so far go to ``OUT/partial/<arm>.json``. With
    ``--resume`` an arm whose state matches (same settings and base scores) continues from
    it: a finished arm is not trained again, an unfinished one resumes its run's last
    checkpoint (``TrainConfig.resume``); ``--max-steps`` may be raised to extend a run.
    """
    tcfg = train_config(cfg, protocol)
    run, out = Path(tcfg.out), Path(cfg.out)
    state_file = out / "partial" / f"{protocol.replace(':', '-').replace(VARIANT, '-')}.json"
    skey = _state_key(cfg, protocol, key)
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    sets = cfg.parsed_sets()
    every = cfg.every_chunk()
    curves = {name: [(0, base[name])] for name, _, _ in sets}
    step, totals, eval_s = 0, {"steps": 0, "rollout_tokens": 0.0, "train_seconds": 0.0}, 0.0
    resumable = cfg.resume and state.get("key") == skey
    if resumable and (state["done"] and state["steps"] >= cfg.max_steps or run.exists()):
        curves = {n: [(s_, xs) for s_, xs in c] for n, c in state["curves"].items()}
        step, totals, eval_s = state["steps"], state["totals"], state["eval_seconds"]
        logger.info("learning curve: %s resumes at step %d", protocol, step)
        bar.update(min(step, cfg.max_steps))
        if state["done"] and step >= cfg.max_steps:
            return state["result"]
    elif run.exists():
        shutil.rmtree(run)
    while step < cfg.max_steps:
        target = min(step + cfg.eval_every, cfg.max_steps)
        logger.info("learning curve: %s steps %d -> %d", protocol, step, target)
        train_fn(dataclasses.replace(tcfg, steps=target, resume=step > 0))
        totals = read_totals(run)
        bar.update(max(0, int(totals["steps"]) - step))
        step = int(totals["steps"])
        last = (
            step >= cfg.max_steps
            or step < target  # the run stopped early (it should not: no early stopping)
            or bool(cfg.token_budget and totals["rollout_tokens"] >= cfg.token_budget)
        )
        now = [s for s in sets if last or s[0] in every]
        t1 = time.perf_counter()
        scores = evaluate_fn(model_of(run), now, cfg, run / f"eval_step{step}")
        eval_s += time.perf_counter() - t1
        for name, _, _ in now:
            curves[name].append((step, scores[name]))
        state = {"key": skey, "curves": curves, "steps": step, "totals": totals,
                 "eval_seconds": eval_s, "done": False}
        if last:
            keep_completions(
                run / f"eval_step{step}",
                out / "items" / f"{protocol.replace(VARIANT, '-')}_step{step}",
            )
            break
        _write_atomic(state_file, state)
    result = {
        "budget": totals,
        "seconds_per_step": totals["train_seconds"] / totals["steps"] if totals["steps"] else None,
        "eval_seconds": eval_s,
        "sets": {name: set_summary(c) for name, c in curves.items()},
        "step_log": step_log(run) if run.exists() else state.get("result", {}).get("step_log", []),
        "code": _provenance(run) if run.exists() else state.get("result", {}).get("code"),
    }
    _write_atomic(state_file, {**state, "done": True, "result": result})
    if not cfg.keep_runs:
        shutil.rmtree(run, ignore_errors=True)
    bar.update(max(0, cfg.max_steps - step))  # an arm stopped by its token budget
    return result


def _provenance(run: Path) -> list | None:
    """The code that trained ``run`` (its ``provenance.json``: commit, edits, versions), or None."""
    p = run / "provenance.json"
    return json.loads(p.read_text()) if p.exists() else None


def _write_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def write_summary(
    cfg: CurveConfig,
    per_arm: dict[str, Any],
    base_s: float,
    key: dict,
    out: Path,
    base: dict[str, list[bool]] | None = None,
) -> dict[str, Any]:
    """Write ``summary.json``, ``table.md`` and the plot for the arms done so far; with the base
    model's per-item scores (``base``), also every variant arm against its plain arm
    (:func:`variant_pairs`)."""
    summary = {
        "config": dataclasses.asdict(cfg),
        "budget": (
            {"unit": "rollout tokens", "per_arm": cfg.token_budget, "max_steps": cfg.max_steps}
            if cfg.token_budget
            else {"unit": "steps", "steps": cfg.max_steps, "rounds_per_step": cfg.rounds_per_step}
        ),
        "decoding": "greedy",
        "interval": "Wilson score, 95%",
        "test": "exact McNemar, final vs base on the same items, two-sided",
        "base_eval_seconds": base_s,
        "base_key": key,
        "protocols": per_arm,
        "significant": [
            f"{p}/{name}"
            for p, arm in per_arm.items()
            for name, s in arm["sets"].items()
            if s["p_value"] < 0.05 and s["final"] > s["base"]
        ],
        "pairs": variant_pairs(per_arm, base),
    }
    summary["table"] = markdown(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "table.md").write_text(summary["table"] + "\n")
    plot(summary, out / "learning_curve.png")
    return summary


def markdown(summary: dict[str, Any]) -> str:
    """One row per arm and held-out set: base, final (Wilson 95%), steps, tokens, p."""

    def ci(c: list[float]) -> str:
        return f"[{c[0]:.2f}, {c[1]:.2f}]"

    lines = [
        "| protocol | held-out set | items | base (95% CI) | final (95% CI) | gained / lost "
        "| McNemar p | steps | rollout tokens | s/step |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p, arm in summary["protocols"].items():
        sps = arm["seconds_per_step"]
        for name, s in arm["sets"].items():
            lines.append(
                f"| {p} | {name} | {s['items']} | {s['base']:.3f} {ci(s['ci95']['base'])} | "
                f"{s['final']:.3f} {ci(s['ci95']['final'])} | {s['gained']} / {s['lost']} | "
                f"{s['p_value']:.3g} | {s['steps']} | {arm['budget']['rollout_tokens']:.0f} | "
                f"{'-' if sps is None else f'{sps:.0f}'} |"
            )
    if summary.get("pairs"):
        lines += [
            "",
            "| variant vs plain arm | held-out set | items | steps | variant final | plain final "
            "| only variant / only plain | McNemar p |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for pair, rows in summary["pairs"].items():
            for name, r in rows.items():
                lines.append(
                    f"| {pair} | {name} | {r['items']} | {r['steps']} | {r['variant']:.3f} | "
                    f"{r['plain']:.3f} | {r['variant_only']} / {r['plain_only']} | "
                    f"{r['p_value']:.3g} |"
                )
    return "\n".join(lines)


def plot(summary: dict[str, Any], path: Path) -> Path:
    """Accuracy against step per held-out set, one line per arm, Wilson 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    arms = summary["protocols"]
    names = list(dict.fromkeys(n for a in arms.values() for n in a["sets"]))
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(max(6.5, 4.2 * len(names)), 4))
    axes = [axes] if len(names) <= 1 else list(axes)
    for ax, name in zip(axes, names):
        for i, (p, arm) in enumerate(arms.items()):
            s = arm["sets"].get(name)
            if s is None:
                continue
            xs = [pt["step"] + 0.06 * (i - (len(arms) - 1) / 2) for pt in s["curve"]]
            ys = [pt["accuracy"] for pt in s["curve"]]
            err = [
                [max(0.0, y - pt["ci95"][0]) for y, pt in zip(ys, s["curve"])],
                [max(0.0, pt["ci95"][1] - y) for y, pt in zip(ys, s["curve"])],
            ]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=p, color=f"C{i % 10}")
        n = next(iter(a["sets"][name]["items"] for a in arms.values() if name in a["sets"]))
        ax.set(title=f"{name} ({n} items, greedy)", xlabel="step", ylabel="accuracy")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.set_ylim(-0.02, max(0.2, min(1.02, ax.get_ylim()[1])))
        ax.legend(fontsize=8)
    fig.suptitle("Held-out accuracy against training step (Wilson 95% intervals)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: every :class:`CurveConfig` field as ``--field-name`` (``--help`` lists
    them with their documentation)."""
    import tyro

    cfg = tyro.cli(CurveConfig, args=argv, description=__doc__.split("\n")[0])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    summary = run_curve(cfg)
    print(summary["table"])
    return summary


if __name__ == "__main__":
    main()
