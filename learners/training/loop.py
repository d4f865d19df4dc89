"""The SAGE training loop: rollouts on the environment, learner updates, logging, checkpoints.

``sage-env train --preset demo`` runs it on the bundled seeds with the default model. The
pieces live one idea to a file: setting a run up (``learners.training.build``), the config
and YAML loading (``learners.training.config``), the presets (``learners.training.presets``),
checkpoints (``learners.training.checkpoint``), validation, best model, early stopping and the
critic probe (``learners.training.monitors``), metrics and transcripts
(``learners.training.metrics``). Import their names from those modules. Output folder layout::

    OUT/config.yaml          the full resolved config
    OUT/metrics.jsonl        one JSON object per step
    OUT/tb/                  TensorBoard events (--report-to tensorboard, the default)
    OUT/wandb/               W&B run files (--report-to wandb)
    OUT/pool.jsonl           the task pool (seeds + accepted generated tasks)
    OUT/transcripts/         round transcripts: step_N.txt readable, step_N.jsonl structured
    OUT/checkpoints/step_N/  model (or LoRA adapter), optimizer, pool, RNG state, step (atomic)
    OUT/base/                with LoRA after a warm-up: the warmed base the adapters sit on
    OUT/training.png         per-role reward and pool size
    OUT/report.html          the run as one HTML page (sage-env report; --report-every N)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import yaml

from learners.algorithms.registry import learner_spec
from learners.distributed import collectives
from learners.engines.registry import require_engine, syncs_weights
from learners.evaluation import heldout
from learners.evaluation.during_training import validation_accuracy
from learners.policy.hf_policy import HFPolicy
from learners.reports.plots import plot_training
from learners.training import preflight
from learners.training import run_checks as checks
from learners.training.build import Run, build_run, model_source, plain
from learners.training.checkpoint import checkpoint_dirs, save_checkpoint
from learners.training.config import TrainConfig
from learners.training.interrupt import deferred
from learners.training.metrics import (
    GAP_KEYS,
    logprob_gap_metrics,
    peak_rss_mb,
    pool_dynamics_metrics,
    rollout_metrics,
    write_transcripts,
)
from learners.types import RolloutResult
from sage_env.verifiers import MathVerifier

logger = logging.getLogger("sage_env.train")


def train(cfg: TrainConfig, progress: bool = True, desc: str | None = None) -> dict[str, float]:
    """Run SAGE training as configured; returns the last step's metrics.

    ``desc`` labels the progress bar (default ``"<protocol> train"``; ``sage-env compare``
    names each run's arm and seed).

    Every environment and verifier it opens is closed when it returns or raises. Before
    anything heavy loads, :func:`learners.training.preflight.check_train` checks the device, the
    model,
    the tracker package and the launch mode.

    Raises:
        FileExistsError: if ``cfg.out`` already holds a run and ``cfg.resume`` is False.
        ValueError: on an unknown protocol, algorithm or frozen role, or a config in which
            every advantage is 0 in every step
            (:func:`learners.training.run_checks.certain_no_update`).
        learners.policy.model_check.PreflightError: naming what is missing (no CUDA device, model
            weights neither cached nor downloadable, ``wandb`` not installed, a DeepSpeed
            launch, an FSDP launch without ``--distributed.strategy fsdp2``).
    """
    roles = checks.protocol_roles(cfg.env.protocol)
    frozen = set(cfg.freeze)
    if frozen - set(roles):
        raise ValueError(
            f"--freeze names unknown role(s) {sorted(frozen - set(roles))}; "
            f"protocol {cfg.env.protocol!r} has roles {roles}"
        )
    learner_spec(cfg.algorithm)  # an unknown algorithm fails before the model loads
    certain = checks.certain_no_update(cfg)  # every advantage 0 in every step: refuse
    if certain:
        raise ValueError(certain)
    if os.environ.get("RANK", "0") == "0":  # before the process group opens: rank 0 says it
        for message in checks.ignored_settings(cfg):
            logger.warning("%s", message)
    out = Path(cfg.out)
    # device, model, tracker, launcher and a vllm engine without vLLM: one line, before loading
    preflight.check_train(cfg, model_source(cfg, out, checkpoint_dirs(out)))
    require_engine(cfg.rollout.engine)
    with contextlib.ExitStack() as stack:
        # torchrun / accelerate launch: open the process group
        # (learners.distributed.collectives); the Accelerator also holds the tracker of report_to
        log_with = None if cfg.report_to == "none" else cfg.report_to
        accelerator = collectives.init(cfg.device, log_with, str(out))
        if accelerator is not None:
            stack.callback(collectives.shutdown)
        existing = checkpoint_dirs(out)
        if (existing or (out / "metrics.jsonl").exists()) and not cfg.resume:
            raise FileExistsError(
                f"{out} already holds a run; pass --resume to continue it or choose another --out"
            )
        collectives.barrier()  # every rank has looked at out before rank 0 writes to it
        main = collectives.is_main()
        if main:
            out.mkdir(parents=True, exist_ok=True)
            resolved = plain(dataclasses.asdict(cfg))
            with deferred():  # SIGINT / SIGTERM wait for a whole file (interrupt.py)
                (out / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
        metrics = _run(
            cfg,
            out,
            roles,
            frozen,
            existing,
            progress and main,
            stack,
            accelerator,
            desc or f"{cfg.env.protocol} train",
        )
    if main and (out / "metrics.jsonl").exists():
        with deferred():
            plot_training(out / "metrics.jsonl", out / "training.png")
            _write_report(out)
    return metrics


def _write_report(out: Path) -> None:
    """Write ``out/report.html``; a failure is logged, never raised (the run is what counts)."""
    from learners.reports.run_report import write_report

    try:
        write_report([out], out / "report.html")
    except Exception as exc:  # noqa: BLE001 - a report must never end a training run
        logger.warning("could not write %s: %s", out / "report.html", exc)


def _run(
    cfg: TrainConfig,
    out: Path,
    roles: list[str],
    frozen: set[str],
    existing: list[Path],
    progress: bool,
    stack: contextlib.ExitStack,
    accelerator: Any = None,
    desc: str = "sage train",
) -> dict[str, float]:
    """The loop; whatever it opens is registered on ``stack`` (closed by :func:`train`).

    :func:`~learners.training.build.build_run` loads everything, :func:`_first_row` logs step 0,
    then every step is
    :func:`_step` (rollouts, update, weight sync, metrics) and :func:`_after_step` (logs,
    transcripts, checkpoints, early stopping).
    """
    from tqdm.auto import tqdm

    run = build_run(cfg, out, existing, progress, stack, accelerator)
    _first_row(cfg, run)
    bar = tqdm(
        total=cfg.steps,
        initial=run.start,
        desc=desc,
        unit="step",
        disable=not progress,
        dynamic_ncols=True,
    )
    stack.callback(bar.close)
    metrics: dict[str, Any] = {}
    for step in range(run.start + 1, cfg.steps + 1):
        metrics, acc, result = _step(cfg, run, step, roles, frozen)  # SIGINT: abandoned
        with deferred():  # a signal waits for the step's files and checkpoint (interrupt.py)
            stop = _after_step(cfg, run, out, step, metrics, acc, result)
        bar.update(1)
        bar.set_postfix(
            {r[:2]: _fmt(metrics.get(f"reward/{r}")) for r in roles}
            | {"pool": len(run.pool), "s/step": f"{metrics['time/step_s']:.0f}"}
        )
        if stop:
            best = run.stopping.best
            logger.info(
                "early stopping at step %d: no better validation accuracy than "
                "%.3f (step %d) for %d validations",
                step,
                best["accuracy"],
                best["step"],
                best["stale"],
            )
            break
    return metrics


def _first_row(cfg: TrainConfig, run: Run) -> None:
    """Step 0: the warm-up's metrics, the critic probe and validation before any update."""
    policy, envs = run.policy, run.envs
    if cfg.gate_calibration and run.start > 0:
        run.probe(policy, envs)  # a resumed run gates by the critic it resumed with
    if run.start == 0:
        _heldout_start(cfg, run, Path(cfg.out))
    logged = run.val_tasks or run.probe.items or run.warm_metrics or run.heldout
    if not (logged and run.start == 0):
        return
    row: dict[str, Any] = {"step": 0, "pool/size": float(len(run.pool)), **run.warm_metrics}
    for label, scores in run.heldout.items():  # untouched, start
        for name, xs in scores.items():
            row.update(heldout.point(f"heldout/{name}/{label}", xs))
    row.update(run.probe(policy, envs))
    if run.val_tasks and cfg.val_at_start:
        t0 = time.perf_counter()
        acc = _validate(policy, run.val_tasks, run.math_verifier, cfg.val_max_new_tokens, run)
        row["val/accuracy"] = acc
        row["time/validation_s"] = time.perf_counter() - t0
        if collectives.is_main():
            run.stopping.record(0, acc, policy)
    if run.log is not None:
        with deferred():
            run.log.write(row)


def _heldout_start(cfg: TrainConfig, run: Run, out: Path) -> None:
    """Score ``TrainConfig.heldout`` at the start of RL (after the warm-up; rank 0)."""
    sets = heldout.parse_heldout(cfg.heldout)
    if not sets:
        return
    got = None
    if collectives.is_main():
        got = heldout.score(run.policy, sets, out / "heldout" / "start", run.progress)
    run.heldout["start"] = collectives.broadcast(got)
    if collectives.is_main():
        (out / "heldout.json").write_text(json.dumps(run.heldout), encoding="utf-8")


def _heldout_final(cfg: TrainConfig, run: Run, out: Path) -> dict[str, float]:
    """Score ``TrainConfig.heldout`` after the last step; log one line per set."""
    sets = heldout.parse_heldout(cfg.heldout)
    if not sets or "start" not in run.heldout:
        return {}
    got = None
    if collectives.is_main():
        got = heldout.score(run.policy, sets, out / "heldout" / "final", run.progress)
    got = collectives.broadcast(got)
    metrics: dict[str, float] = {}
    lines = []
    for s in sets:
        start, final = run.heldout["start"][s.name], got[s.name]
        metrics.update(heldout.final_metrics(s.name, start, final))
        points = {k: v[s.name] for k, v in run.heldout.items() if s.name in v}
        lines.append(heldout.report_line(s.name, {**points, "final": final}))
        logger.info("%s", lines[-1])
    if collectives.is_main():  # sage-env train prints it when the run ends
        (out / "heldout.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return metrics


def _step(
    cfg: TrainConfig, run: Run, step: int, roles: list[str], frozen: set[str]
) -> tuple[dict[str, Any], float | None, RolloutResult]:
    """One step: rollouts, update, weight sync, validation: ``(metrics, accuracy, rollouts)``."""
    policy, pool, learner = run.policy, run.pool, run.learner
    t0 = time.perf_counter()
    snapshot = pool.snapshot() if collectives.world_size() > 1 else None
    result = run.driver.collect(collectives.rank_seeds(run.rng, len(run.envs)))
    learner.observe([t for t in result.transitions if t.role not in frozen and t.trains])
    # ct2 drops its converted model (0.6-0.7 GB) for the update; the sync below loads the
    # updated weights, so nothing is converted twice (docs/write-ups/memory.md,
    # "Where the memory goes")
    policy.release_engine()
    t1 = time.perf_counter()
    update = learner.update()
    t_update = time.perf_counter() - t1
    idle = checks.nothing_trained(update)  # all advantages 0, no loss called, no gradient
    if idle is not None and collectives.is_main():
        logger.warning("step %d trained nothing: %s", step, idle)
    t1 = time.perf_counter()
    policy.sync_engine()  # the next rollout (and validation) samples the updated weights
    t_sync = time.perf_counter() - t1
    if snapshot is not None:  # several ranks: every rank's accepted tasks, in rank order
        collectives.sync_pool(pool, snapshot)
        collectives.check_identical(collectives.pool_digest(pool), "the task pool")
    result = collectives.merge_rollouts(result)  # metrics of every rank's rounds
    validate = cfg.val_every > 0 and step % cfg.val_every == 0
    acc = t_val = None
    if run.val_tasks and validate:
        t_val = time.perf_counter()
        acc = _validate(policy, run.val_tasks, run.math_verifier, cfg.val_max_new_tokens, run)
        t_val = time.perf_counter() - t_val
    probed = _probe(cfg, run) if probe_due(cfg, step, validate) else {}
    if step == cfg.steps:
        probed.update(_heldout_final(cfg, run, Path(cfg.out)))
    metrics = {
        "step": step,
        **rollout_metrics(result, roles),
        **pool_dynamics_metrics(result, pool),
        **{f"learner/{k}": v for k, v in update.items() if k not in GAP_KEYS},
        **checks.trained_metric(update),
        "pool/size": float(len(pool)),
        "pool/seeds": float(len(pool) - pool.num_generated),
        "pool/generated": float(pool.num_generated),
        **probed,
        "time/update_s": t_update,
        **({"time/weight_sync_s": t_sync} if syncs_weights(cfg.rollout.engine) else {}),
        **logprob_gap_metrics(update),
        "time/step_s": time.perf_counter() - t0,
        "memory/peak_rss_mb": peak_rss_mb(),
    }
    if acc is not None:
        metrics["val/accuracy"] = acc
        metrics["time/validation_s"] = t_val
    return metrics, acc, result


def probe_due(cfg: TrainConfig, step: int, validate: bool) -> bool:
    """Whether the critic probe (and the gate's calibration) runs after ``step`` (1-based):
    at the last step, at a validation step, and every ``cfg.probe_every`` steps."""
    every = cfg.probe_every > 0 and step % cfg.probe_every == 0
    return step == cfg.steps or validate or every


def _probe(cfg: TrainConfig, run: Run) -> dict[str, Any]:
    """The critic probe (:class:`~learners.training.monitors.CriticProbe`).

    When it reads score distributions (``critic_score_estimate = "expected"``: forward
    passes, no generate call) the engine's converted model is released first. Free and
    exact: it has not sampled since the last sync (validation's greedy model, or the synced
    one at the last step), the next rollout's temperature would replace it and a later
    generate would reload it with its seeds. (Step 0's probe keeps it: validation at the
    start would convert it again.)
    """
    if run.probe.items and cfg.env.rewards.critic_score_estimate == "expected":
        run.policy.release_engine()
    return run.probe(run.policy, run.envs)


def _after_step(
    cfg: TrainConfig,
    run: Run,
    out: Path,
    step: int,
    metrics: dict[str, Any],
    acc: float | None,
    result: RolloutResult,
) -> bool:
    """Log, write transcripts and the pool, checkpoint; True when early stopping ends the run."""
    main = collectives.is_main()
    stop = acc is not None and main and run.stopping.record(step, acc, run.policy)
    stop = collectives.broadcast(stop)  # rank 0 decides
    if main:
        run.log.write(metrics)
        write_transcripts(out, step, result, cfg.transcripts_per_step)
        run.pool.save(out / "pool.jsonl")
        if cfg.report_every and step % cfg.report_every == 0 and step < cfg.steps:
            _write_report(out)
    if step % cfg.save_every == 0 or step == cfg.steps or stop:
        states = collectives.rank_states(run.policy, run.learner)  # all ranks; None on one
        # every rank: several write the model and optimiser shards (torch DCP)
        save_checkpoint(
            out, step, run.policy, run.learner, run.pool, run.rng, cfg.keep_checkpoints, states
        )
    return stop


def _validate(
    policy: HFPolicy, tasks: list, verifier: MathVerifier, max_new_tokens: int, run: Run
) -> float:
    """Greedy validation accuracy, computed on rank 0 and broadcast to every rank."""
    acc = None
    if collectives.is_main():
        acc = validation_accuracy(policy, tasks, verifier, max_new_tokens, progress=run.progress)
    return collectives.broadcast(acc)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


__all__ = ["train"]
