"""The SAGE training loop: rollouts on the environment, learner updates, logging, checkpoints.

``sage-env train --preset demo`` runs it on the bundled seeds with the default model. The
pieces live one idea to a file: the config and YAML loading (``learners.train_config``), the
presets (``learners.presets``), checkpoints (``learners.checkpoint``), validation, best model,
early stopping and the critic probe (``learners.validation``), metrics and transcripts
(``learners.metrics``). Their public names are re-exported here. Output folder layout::

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
import logging
import os
import random
import time
from pathlib import Path
from typing import Any

import torch
import yaml

import sage_env
from learners import checks, distributed, preflight
from learners.base import learner_spec, make_learner
from learners.checkpoint import (
    checkpoint_dirs,
    load_checkpoint,
    save_checkpoint,
    truncate_metrics,
)
from learners.engines import SYNCED_ENGINES, require_engine
from learners.evaluation import validation_accuracy
from learners.metrics import (
    MetricsLog,
    logprob_gap_metrics,
    peak_rss_mb,
    rollout_metrics,
    write_transcripts,
)
from learners.plots import plot_training
from learners.policy import HFPolicy, SamplingConfig
from learners.presets import DEMO_BUDGETS, DEMO_STOPS, PRESETS
from learners.rollout import RolloutDriver, Transition
from learners.train_config import (
    TrainConfig,
    config_from_dict,
    config_type,
    load_yaml_config,
    protocol_config_type,
    with_algorithm,
    with_protocol,
)
from learners.validation import CriticProbe, EarlyStopping
from learners.warmup import run_warmup
from sage_env.demonstrations import build_demonstrations
from sage_env.env import make_pool
from sage_env.verifiers import CodeVerifier, MathVerifier

logger = logging.getLogger("sage_env.train")


def train(cfg: TrainConfig, progress: bool = True, desc: str | None = None) -> dict[str, float]:
    """Run SAGE training as configured; returns the last step's metrics.

    ``desc`` labels the progress bar (default ``"<protocol> train"``; ``sage-env compare``
    names each run's arm and seed).

    Every environment and verifier it opens is closed when it returns or raises. Before
    anything heavy loads, :func:`learners.preflight.check_train` checks the device, the model,
    the tracker package and the launch mode.

    Raises:
        FileExistsError: if ``cfg.out`` already holds a run and ``cfg.resume`` is False.
        ValueError: on an unknown protocol, algorithm or frozen role, or a config in which
            every advantage is 0 in every step (:func:`learners.checks.certain_no_update`).
        learners.preflight.PreflightError: naming what is missing (no CUDA device, model
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
    preflight.check_train(cfg, _model_source(cfg, out, checkpoint_dirs(out)))
    require_engine(cfg.rollout.engine)
    with contextlib.ExitStack() as stack:
        # torchrun / accelerate launch: open the process group (learners.distributed); the
        # Accelerator also holds the tracker of report_to
        log_with = None if cfg.report_to == "none" else cfg.report_to
        accelerator = distributed.init(cfg.device, log_with, str(out))
        if accelerator is not None:
            stack.callback(distributed.shutdown)
        existing = checkpoint_dirs(out)
        if (existing or (out / "metrics.jsonl").exists()) and not cfg.resume:
            raise FileExistsError(
                f"{out} already holds a run; pass --resume to continue it or choose another --out"
            )
        distributed.barrier()  # every rank has looked at out before rank 0 writes to it
        main = distributed.is_main()
        if main:
            out.mkdir(parents=True, exist_ok=True)
            plain = _plain(dataclasses.asdict(cfg))
            (out / "config.yaml").write_text(yaml.safe_dump(plain, sort_keys=False))
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
        plot_training(out / "metrics.jsonl", out / "training.png")
        _write_report(out)
    return metrics


def _write_report(out: Path) -> None:
    """Write ``out/report.html``; a failure is logged, never raised (the run is what counts)."""
    from learners.report import write_report

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
    """The loop; whatever it opens is registered on ``stack`` (closed by :func:`train`)."""
    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one progress bar: ours
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    t_load = time.perf_counter()
    main = distributed.is_main()
    device = cfg.device
    if device in ("auto", "cuda") and distributed.world_size() > 1:
        device = str(distributed.device())  # this rank's GPU (cuda:LOCAL_RANK) or the CPU
    seed = distributed.rank_sampling_seed(cfg.seed)  # rank-distinct sampling
    lora = getattr(cfg.learner, "lora", None)
    lora_on = lora is not None and lora.enabled
    base_dir = out / "base"  # a LoRA run's warmed base (adapters sit on it)
    # each rank owns its engine (a colocated vLLM on its own GPU)
    policy = HFPolicy(
        _model_source(cfg, out, existing),
        device=device,
        dtype=cfg.dtype,
        seed=seed,
        rollout=cfg.rollout,
    )
    stack.callback(policy.close)
    n_params = sum(p.numel() for p in policy.model.parameters())
    logger.info(
        "loaded %s (%.1f M params) on %s/%s in %.1f s",
        cfg.model,
        n_params / 1e6,
        policy.device,
        policy.dtype,
        time.perf_counter() - t_load,
    )
    math_verifier = MathVerifier(workers=cfg.env.math_workers)
    stack.callback(math_verifier.close)
    code_verifier = CodeVerifier(timeout_s=cfg.env.code_timeout_s, memory_mb=cfg.env.code_memory_mb)
    stack.callback(getattr(code_verifier, "close", lambda: None))

    pool = make_pool(cfg.env, sage_env.load_seeds())
    start = 0
    seeds = [t for t in pool.tasks if t.source != "generated"]
    probe = CriticProbe(cfg, seeds)
    warm_metrics: dict[str, float] = {}
    if cfg.warmup.steps > 0 and not (cfg.resume and existing):  # a resume has its weights
        demos = build_demonstrations(
            seeds,
            cfg.warmup.num_demonstrations,
            cfg.warmup.mix,
            seed=cfg.warmup.seed,
            exclude=sage_env.load_validation() + [t for t in seeds if t.task_id in probe.task_ids],
        )
        if main:  # several ranks: rank 0 warms up, the weights are broadcast below
            warm_metrics = run_warmup(policy, demos, cfg.warmup, cfg.model, progress)
            logger.info("warm-up: %s", warm_metrics)
            if lora_on:  # the adapters' checkpoints need the warmed base to resume and export
                policy.save(base_dir)
        warm_metrics = distributed.broadcast(warm_metrics)
        if lora_on:
            policy.path = str(base_dir)
    distributed.broadcast_parameters(policy.model)  # every rank starts from rank 0's weights
    learner = make_learner(
        cfg.algorithm, policy, cfg.learner, temperature=cfg.temperature, seed=cfg.seed
    )
    # several ranks: DDP or FSDP2 (--distributed.strategy) sums the gradients; the
    # optimiser is pointed at the wrapped parameters (before a checkpoint fills it)
    distributed.prepare(policy, learner, cfg.distributed)
    if cfg.resume and existing:
        start, pool = load_checkpoint(existing[-1], policy, learner, rng, cfg.env)
        states = distributed.load_rank_states(existing[-1])
        distributed.restore_rank_state(states, policy, learner, cfg.seed, start)
        logger.info("resumed from %s (step %d, pool %d)", existing[-1], start, len(pool))
        if main:
            truncate_metrics(out / "metrics.jsonl", start)
    elif cfg.resume:
        logger.warning("--resume: no complete checkpoint in %s; starting a new run", out)
        if main:
            (out / "metrics.jsonl").unlink(missing_ok=True)
    distributed.barrier()  # rank 0 has truncated the metrics before anyone goes on
    policy.sync_engine()  # the engine generates from the warmed / resumed / broadcast weights
    envs = []
    for _ in range(cfg.rounds_per_step):
        envs.append(
            sage_env.env(
                cfg.env,
                render_mode="ansi",
                seeds=seeds,
                pool=pool,
                math_verifier=math_verifier,
                code_verifier=code_verifier,
            )
        )
        stack.callback(envs[-1].close)
    sampling = SamplingConfig(
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_prompt_tokens=cfg.max_prompt_tokens,
        batch_size=cfg.generation_batch_size,
    )
    driver = RolloutDriver(envs, policy, sampling, cfg.phase_max_new_tokens, cfg.phase_stop_strings)
    log = None
    if main:  # only rank 0 writes (and accelerate logs to trackers on the main process only)
        config = _plain(dataclasses.asdict(cfg))
        log = MetricsLog(out, cfg.report_to, accelerator, config, start + 1 if start else None)
    if log is not None:
        stack.callback(log.close)
    val_tasks = sage_env.load_validation(cfg.val_limit) if cfg.val_every > 0 else []
    stopping = EarlyStopping(out, cfg.early_stopping_patience)

    if cfg.gate_calibration and start > 0:
        probe(policy, envs)  # a resumed run gates by the critic it resumed with
    if (val_tasks or probe.items or warm_metrics) and start == 0:
        row: dict[str, Any] = {"step": 0, "pool/size": float(len(pool)), **warm_metrics}
        row.update(probe(policy, envs))
        if val_tasks and cfg.val_at_start:
            acc = _validate(policy, val_tasks, math_verifier, cfg.val_max_new_tokens)
            row["val/accuracy"] = acc
            if main:
                stopping.record(0, acc, policy)
        if log is not None:
            log.write(row)
    bar = tqdm(
        total=cfg.steps,
        initial=start,
        desc=desc,
        unit="step",
        disable=not progress,
        dynamic_ncols=True,
    )
    stack.callback(bar.close)
    metrics: dict[str, Any] = {}
    for step in range(start + 1, cfg.steps + 1):
        t0 = time.perf_counter()
        snapshot = pool.snapshot() if distributed.world_size() > 1 else None
        result = driver.collect(distributed.rank_seeds(rng, len(envs)))
        learner.observe([t for t in result.transitions if t.role not in frozen])
        t1 = time.perf_counter()
        update = learner.update()
        t_update = time.perf_counter() - t1
        idle = checks.nothing_trained(update)  # all advantages 0, no loss called, no gradient
        if idle is not None and main:
            logger.warning("step %d trained nothing: %s", step, idle)
        t1 = time.perf_counter()
        policy.sync_engine()  # the next rollout (and validation) samples the updated weights
        t_sync = time.perf_counter() - t1
        if snapshot is not None:  # several ranks: every rank's accepted tasks, in rank order
            distributed.sync_pool(pool, snapshot)
            distributed.check_identical(distributed.pool_digest(pool), "the task pool")
        result = distributed.merge_rollouts(result)  # metrics of every rank's rounds
        validate = cfg.val_every > 0 and step % cfg.val_every == 0
        acc = None
        if val_tasks and validate:
            acc = _validate(policy, val_tasks, math_verifier, cfg.val_max_new_tokens)
        probed = probe(policy, envs) if step == cfg.steps or validate else {}
        metrics = {
            "step": step,
            **rollout_metrics(result, roles),
            **{f"learner/{k}": v for k, v in update.items()},
            **checks.trained_metric(update),
            "pool/size": float(len(pool)),
            "pool/seeds": float(len(pool) - pool.num_generated),
            "pool/generated": float(pool.num_generated),
            **probed,
            "time/update_s": t_update,
            **({"time/weight_sync_s": t_sync} if cfg.rollout.engine in SYNCED_ENGINES else {}),
            **logprob_gap_metrics(update),
            "time/step_s": time.perf_counter() - t0,
            "memory/peak_rss_mb": peak_rss_mb(),
        }
        if acc is not None:
            metrics["val/accuracy"] = acc
        stop = acc is not None and main and stopping.record(step, acc, policy)
        stop = distributed.broadcast(stop)  # rank 0 decides
        if main:
            log.write(metrics)
            write_transcripts(out, step, result, cfg.transcripts_per_step)
            pool.save(out / "pool.jsonl")
            if cfg.report_every and step % cfg.report_every == 0 and step < cfg.steps:
                _write_report(out)
        if step % cfg.save_every == 0 or step == cfg.steps or stop:
            states = distributed.rank_states(policy, learner)  # all ranks; None on one
            # every rank: several write the model and optimiser shards (torch DCP)
            save_checkpoint(out, step, policy, learner, pool, rng, cfg.keep_checkpoints, states)
        bar.update(1)
        bar.set_postfix(
            {r[:2]: _fmt(metrics.get(f"reward/{r}")) for r in roles}
            | {"pool": len(pool), "s/step": f"{metrics['time/step_s']:.0f}"}
        )
        if stop:
            best = stopping.best
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


def _model_source(cfg: TrainConfig, out: Path, existing: list[Path]) -> str:
    """What the policy loads: ``cfg.model``, or a resumed LoRA run's warmed base ``out/base``."""
    lora = getattr(cfg.learner, "lora", None)
    base_dir = out / "base"
    if lora is not None and lora.enabled and cfg.resume and existing:
        if (base_dir / "config.json").exists():
            return str(base_dir)
    return cfg.model


def _validate(policy: HFPolicy, tasks: list, verifier: MathVerifier, max_new_tokens: int) -> float:
    """Greedy validation accuracy, computed on rank 0 and broadcast to every rank."""
    acc = None
    if distributed.is_main():
        acc = validation_accuracy(policy, tasks, verifier, max_new_tokens)
    return distributed.broadcast(acc)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


__all__ = [
    "DEMO_BUDGETS",
    "DEMO_STOPS",
    "PRESETS",
    "TrainConfig",
    "Transition",
    "config_from_dict",
    "config_type",
    "load_checkpoint",
    "load_yaml_config",
    "protocol_config_type",
    "rollout_metrics",
    "save_checkpoint",
    "train",
    "with_algorithm",
    "with_protocol",
]
