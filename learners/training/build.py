"""Setting a training run up: policy, verifiers, pool, warm-up, learner, resume, environments.

:func:`build_run` returns the :class:`Run` the step loop (:mod:`learners.training.loop`)
works on; whatever it opens is registered on the caller's ``ExitStack``. It also records
which code runs it (``OUT/provenance.json``, :func:`code_provenance`): one seed makes a run
bitwise reproducible only under the same code (``docs/guide/training.md``, "Reproducibility").
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import json
import logging
import platform
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

import sage_env
from learners.algorithms.registry import make_learner
from learners.distributed import collectives, data_parallel
from learners.memory import release_memory
from learners.policy.hf_policy import HFPolicy
from learners.rollout import RolloutDriver
from learners.training.checkpoint import load_checkpoint, truncate_metrics
from learners.training.config import TrainConfig
from learners.training.metrics import MetricsLog
from learners.training.monitors import CriticProbe, EarlyStopping
from learners.training.warmup import run_warmup
from learners.types import SamplingConfig
from sage_env.env_setup import make_pool
from sage_env.protocols.warmup import demonstrations_for
from sage_env.tasks.exec_tasks import load_exec_seeds
from sage_env.verifiers import CodeVerifier, MathVerifier

logger = logging.getLogger("sage_env.train")


@dataclasses.dataclass
class Run:
    """What one training run holds between steps (built by :func:`build_run`)."""

    policy: HFPolicy
    learner: Any
    pool: Any
    envs: list
    driver: RolloutDriver
    probe: CriticProbe
    stopping: EarlyStopping
    math_verifier: MathVerifier
    rng: random.Random
    log: MetricsLog | None
    val_tasks: list
    start: int
    warm_metrics: dict[str, float]
    heldout: dict[str, dict[str, list[bool]]] = dataclasses.field(default_factory=dict)
    """Held-out scores so far, ``{"untouched" | "start": {set: [bool, ...]}}``
    (``TrainConfig.heldout``; kept in ``OUT/heldout.json`` for a resume)."""
    progress: bool = False
    """Progress bars on the waits between steps (validation, held-out scoring; the probe
    holds its own flag); on the main process only."""


def sampling_config(cfg: TrainConfig) -> SamplingConfig:
    """The rollouts' sampling settings of a run: ``cfg``'s budget, temperature, top-p, prompt
    cap and generation batch (phase budgets and stop strings go to the driver separately)."""
    return SamplingConfig(
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_prompt_tokens=cfg.max_prompt_tokens,
        batch_size=cfg.generation_batch_size,
    )


def build_run(
    cfg: TrainConfig,
    out: Path,
    existing: list[Path],
    progress: bool,
    stack: contextlib.ExitStack,
    accelerator: Any,
) -> Run:
    """Load the policy, verifiers, pool, learner and environments (warm-up, resume)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one progress bar: ours
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    policy = _load_policy(cfg, out, existing, stack)
    math_verifier = MathVerifier(workers=cfg.env.math_workers)
    stack.callback(math_verifier.close)
    code_verifier = CodeVerifier(timeout_s=cfg.env.code_timeout_s, memory_mb=cfg.env.code_memory_mb)
    stack.callback(getattr(code_verifier, "close", lambda: None))
    tasks = sage_env.load_seeds()
    if "exec" in cfg.env.domains:  # the execution seeds, as the env adds them: the critic probe
        tasks += load_exec_seeds()  # (and its per-domain gate) must see the exec questions too
    pool = make_pool(cfg.env, tasks)
    seeds = [t for t in pool.tasks if t.source != "generated"]
    probe = CriticProbe(cfg, seeds, progress=progress and collectives.is_main())
    heldout = _heldout_before_warm_up(cfg, out, existing, policy, progress)
    warm_metrics = _warm_up(cfg, out, existing, policy, seeds, probe, progress)
    collectives.broadcast_parameters(policy.model)  # every rank starts from rank 0's weights
    _freeze_gate_critic(cfg, policy, existing)
    learner = make_learner(
        cfg.algorithm, policy, cfg.learner, temperature=cfg.temperature, seed=cfg.seed
    )
    # several ranks: DDP or FSDP2 (--distributed.strategy) sums the gradients; the
    # optimiser is pointed at the wrapped parameters (before a checkpoint fills it)
    data_parallel.prepare(policy, learner, cfg.distributed)
    start, pool = _resume(cfg, out, existing, policy, learner, rng, pool)
    if cfg.gate_critic == "warm_start" and policy.scorer is None:
        logger.warning(
            "gate_critic = 'warm_start': this run resumed after a warm-up keeps no copy of its "
            "step-0 weights; the gate reads the resumed weights, frozen from here"
        )
        policy.freeze_scorer()
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
    sampling = sampling_config(cfg)
    driver = RolloutDriver(envs, policy, sampling, cfg.phase_max_new_tokens, cfg.phase_stop_strings)
    if cfg.gate_critic == "warm_start":  # the gate's question scores come from step 0's weights
        driver.frozen_score_phases = frozenset({"review_question"})
    log = None
    if collectives.is_main():  # only rank 0 writes (accelerate logs on the main process only)
        config = plain(dataclasses.asdict(cfg))
        log = MetricsLog(out, cfg.report_to, accelerator, config, start + 1 if start else None)
        stack.callback(log.close)
        record_provenance(out, start)
    val_tasks = sage_env.load_validation(cfg.val_limit) if cfg.val_every > 0 else []
    stopping = EarlyStopping(out, cfg.early_stopping_patience)
    return Run(
        policy, learner, pool, envs, driver, probe, stopping, math_verifier, rng, log,
        val_tasks, start, warm_metrics, heldout, progress and collectives.is_main(),
    )  # fmt: skip


def _load_policy(
    cfg: TrainConfig, out: Path, existing: list[Path], stack: contextlib.ExitStack
) -> HFPolicy:
    """This rank's policy (each rank owns its engine, e.g. a colocated vLLM on its GPU)."""
    t_load = time.perf_counter()
    device = cfg.device
    if device in ("auto", "cuda") and collectives.world_size() > 1:
        device = str(collectives.device())  # this rank's GPU (cuda:LOCAL_RANK) or the CPU
    policy = HFPolicy(
        model_source(cfg, out, existing),
        device=device,
        dtype=cfg.dtype,
        seed=collectives.rank_sampling_seed(cfg.seed),  # rank-distinct sampling
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
    return policy


def _warm_up(
    cfg: TrainConfig,
    out: Path,
    existing: list[Path],
    policy: HFPolicy,
    seeds: list,
    probe: CriticProbe,
    progress: bool,
) -> dict[str, float]:
    """Supervised warm-up on demonstrations (rank 0; a resume has its weights already)."""
    if cfg.warmup.steps <= 0 or (cfg.resume and existing):
        return {}
    lora = getattr(cfg.learner, "lora", None)
    lora_on = lora is not None and lora.enabled
    base_dir = out / "base"  # a LoRA run's warmed base (adapters sit on it)
    demos = demonstrations_for(  # the protocol's formats: azr's are execution tasks
        cfg.env.protocol,
        cfg.env.domains,
        seeds,
        cfg.warmup.num_demonstrations,
        cfg.warmup.mix,
        seed=cfg.warmup.seed,
        exclude=sage_env.load_validation() + [t for t in seeds if t.task_id in probe.task_ids],
        math_grounding=cfg.env.math_grounding,
        domain_weights=cfg.env.domain_weights,
    )
    warm_metrics: dict[str, float] = {}
    if collectives.is_main():  # several ranks: rank 0 warms up, the weights are broadcast
        # memory: the held-out scoring's converted model is not needed again (the engine syncs
        # after the warm-up), and the learner's checkpointing setting holds for the warm-up's
        # backward too (the same gradient; docs/write-ups/memory.md, "The warm-up")
        policy.release_engine()
        if getattr(cfg.learner, "gradient_checkpointing", False):
            policy.enable_gradient_checkpointing()
        warm_metrics = run_warmup(policy, demos, cfg.warmup, cfg.model, progress)
        release_memory()  # the warm-up's AdamW state and activations, freed but kept by malloc
        logger.info("warm-up: %s", warm_metrics)
        if lora_on:  # the adapters' checkpoints need the warmed base to resume and export
            policy.save(base_dir)
    warm_metrics = collectives.broadcast(warm_metrics)
    if lora_on:
        policy.path = str(base_dir)
    return warm_metrics


def _heldout_before_warm_up(
    cfg: TrainConfig, out: Path, existing: list[Path], policy: HFPolicy, progress: bool
) -> dict[str, dict[str, list[bool]]]:
    """The held-out scores a run has so far: ``{"untouched": {set: [bool, ...]}}``.

    On resume, what ``OUT/heldout.json`` holds; else the untouched model's scores on
    ``TrainConfig.heldout`` (rank 0, before the warm-up changes the model).
    """
    from learners.evaluation.heldout import parse_heldout, score

    sets = parse_heldout(cfg.heldout)
    path = out / "heldout.json"
    if not sets:
        return {}
    if cfg.resume and existing and path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    got: dict[str, dict[str, list[bool]]] = {}
    if collectives.is_main() and cfg.warmup.steps > 0:
        got["untouched"] = score(policy, sets, out / "heldout" / "untouched", progress)
        path.write_text(json.dumps(got), encoding="utf-8")
    return collectives.broadcast(got)


def _freeze_gate_critic(cfg: TrainConfig, policy: HFPolicy, existing: list[Path]) -> None:
    """``gate_critic = "warm_start"``: freeze the weights the gate reads, step 0's.

    Called before a checkpoint is loaded: a fresh run's weights are then its warm start (after
    the warm-up); a resumed run's are too when it had no warm-up (``cfg.model``) or trains
    LoRA adapters (the warmed base, adapters at zero). A run resumed after a full-weight
    warm-up holds the unwarmed model here, so it freezes later, at the resumed weights.
    """
    if cfg.gate_critic != "warm_start":
        return
    lora = getattr(cfg.learner, "lora", None)
    lora_on = lora is not None and lora.enabled
    if cfg.resume and existing and cfg.warmup.steps > 0 and not lora_on:
        return  # frozen after the resume (build_run)
    policy.freeze_scorer()


def _resume(
    cfg: TrainConfig,
    out: Path,
    existing: list[Path],
    policy: HFPolicy,
    learner: Any,
    rng: random.Random,
    pool: Any,
) -> tuple[int, Any]:
    """``(start step, pool)``: from the last checkpoint with ``--resume``, else ``(0, pool)``."""
    start = 0
    main = collectives.is_main()
    if cfg.resume and existing:
        start, pool = load_checkpoint(existing[-1], policy, learner, rng, cfg.env)
        states = collectives.load_rank_states(existing[-1])
        collectives.restore_rank_state(states, policy, learner, cfg.seed, start)
        logger.info("resumed from %s (step %d, pool %d)", existing[-1], start, len(pool))
        if main:
            truncate_metrics(out / "metrics.jsonl", start)
    elif cfg.resume:
        logger.warning("--resume: no complete checkpoint in %s; starting a new run", out)
        if main:
            (out / "metrics.jsonl").unlink(missing_ok=True)
    collectives.barrier()  # rank 0 has truncated the metrics before anyone goes on
    return start, pool


PROVENANCE_PACKAGES = ("sage-env", "torch", "transformers", "ctranslate2", "math-verify")
"""Installed packages whose versions :func:`code_provenance` records."""


def code_provenance() -> dict[str, Any]:
    """Which code runs this process: package versions and, from a git checkout, its commit.

    Git is asked read-only (``--no-optional-locks``), and only when this package's folder is
    the top of a checkout (an install inside someone else's repository records no commit).

    Returns:
        ``{"git_commit": 40 hex digits or None, "git_dirty": whether tracked files differ
        from the commit (None without git), "git_diff_sha256": SHA-256 of ``git diff HEAD``
        (None when clean or without git), "python": version, "packages": {name: version or
        None}}``. Never raises.
    """
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "--no-optional-locks", "-C", str(root), *args],
                capture_output=True,
                timeout=30,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.decode("utf-8", "replace")

    top = git("rev-parse", "--show-toplevel")
    commit = dirty = digest = None
    if top is not None and Path(top.strip()).resolve() == root:
        commit = (git("rev-parse", "HEAD") or "").strip() or None
        diff = git("diff", "HEAD", "--no-ext-diff", "--binary")
        if diff is not None:
            dirty = bool(diff)
            digest = hashlib.sha256(diff.encode()).hexdigest() if diff else None
    packages: dict[str, str | None] = {}
    for name in PROVENANCE_PACKAGES:
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = None
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        "git_diff_sha256": digest,
        "python": platform.python_version(),
        "packages": packages,
    }


def record_provenance(out: Path, start: int) -> list[dict[str, Any]]:
    """Append this process's :func:`code_provenance` to ``out/provenance.json``.

    One entry per start of the run (``{"start_step": start, **code}``): a run resumed under
    other code than it started with holds two different entries, and a warning says so.

    Returns:
        Every entry, oldest first.
    """
    path = out / "provenance.json"
    entries: list[dict[str, Any]] = []
    if start > 0 and path.exists():
        try:
            entries = list(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError):
            entries = []
    entries = [e for e in entries if isinstance(e, dict) and e.get("start_step", 0) < start]
    code = code_provenance()
    if entries and {k: v for k, v in entries[-1].items() if k != "start_step"} != code:
        logger.warning(
            "resuming %s under other code than its start at step %s (%s)",
            out,
            entries[-1].get("start_step"),
            path,
        )
    entries.append({"start_step": start, **code})
    path.write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")
    return entries


def model_source(cfg: TrainConfig, out: Path, existing: list[Path]) -> str:
    """What the policy loads: ``cfg.model``, or a resumed LoRA run's warmed base ``out/base``."""
    lora = getattr(cfg.learner, "lora", None)
    base_dir = out / "base"
    if lora is not None and lora.enabled and cfg.resume and existing:
        if (base_dir / "config.json").exists():
            return str(base_dir)
    return cfg.model


def plain(x: Any) -> Any:
    """``x`` with tuples as lists, recursively (what ``yaml.safe_dump`` and trackers take)."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x
