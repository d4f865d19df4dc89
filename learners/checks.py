"""Checks that a run trains something and that every setting given does something.

A run can train nothing and still exit 0: with one round per step, a group baseline made of
one sequence is that sequence's own reward, so every advantage is 0 and the loss hook is
never called. Three checks catch it, from the earliest point each can:

- :func:`certain_no_update`, before the model loads: the configuration makes every advantage
  0 in every step (``sage-env train`` stops with an error naming the fix);
- :func:`nothing_trained`, after every update: this step trained nothing (logged as
  ``learner/trained`` = 0 with a warning that says why);
- :func:`ignored_settings`, at start-up: a setting that another one overrides or switches off
  (``--max-new-tokens`` under per-phase budgets that cover every phase, ``--val-limit``
  without validation ...), logged as a warning.

:func:`check_learner_class` checks a learner plugin when it is registered (before the model
loads): that it is a learner and not its config, that its config is a dataclass, and that its
hooks (``loss``, ``advantages``) have the signatures the training loop calls, naming the
user's file and line.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from typing import Any

ROLE_DOMAIN = "role_domain"
"""``advantage_group`` of a learner whose baseline is the (role, domain) group (TRR++)."""
ROLE_PROMPT = "role_prompt"
"""``advantage_group`` of a learner whose baseline is the (role, prompt) group (GRPO,
REINFORCE++-baseline, RLOO): only the k samples of one prompt share a group."""

ONE_ACTION_ROLES = frozenset({"challenger", "proposer", "planner"})
"""Roles that act exactly once per round in every built-in protocol (a proposal, a plan);
the solver acts k times per task and the critic or judge a varying number of times."""

LEARNER_METHODS = ("act", "observe", "update", "state_dict", "load_state_dict")
"""What the training loop calls on a learner (:class:`learners.base.Learner`)."""


class LearnerPluginError(TypeError):
    """A registered learner that the training loop cannot use; the message names the file."""


# --------------------------------------------------------------------------- advantages
def advantage_group(cls: Any) -> str | None:
    """The advantage group a learner class declares, if its ``advantages`` is the one declared.

    A learner declares ``advantage_group = "role_domain"`` or ``"role_prompt"`` (class
    attribute). A subclass that overrides ``advantages`` without declaring it again inherits
    no declaration (its grouping is unknown), so nothing is assumed about it.

    Returns:
        :data:`ROLE_DOMAIN`, :data:`ROLE_PROMPT` or ``None`` (unknown).
    """
    if not isinstance(cls, type):
        return None
    owner_adv = next((c for c in cls.__mro__ if "advantages" in vars(c)), None)
    owner_group = next((c for c in cls.__mro__ if "advantage_group" in vars(c)), None)
    if owner_adv is None or owner_group is None or not issubclass(owner_group, owner_adv):
        return None
    group = vars(owner_group)["advantage_group"]
    return group if group in (ROLE_DOMAIN, ROLE_PROMPT) else None


def certain_no_update(cfg: Any, world_size: int | None = None) -> str | None:
    """Why ``cfg`` (a ``TrainConfig``) makes every advantage 0 in every step, or ``None``.

    A group baseline of one sequence is that sequence's reward, so its advantage is 0. With
    one round per step on one process (``rounds_per_step * world_size == 1``):

    - a (role, prompt) baseline (``grpo``, ``reinforce_pp``) has groups of more than one
      only among the solver's k samples of one task: certain with ``solver_samples = 1`` or
      the solver frozen;
    - a (role, domain) baseline (``trr``) is certain when every trained role acts once per
      round (:data:`ONE_ACTION_ROLES`, e.g. ``--freeze solver critic``).

    Learners with another baseline (``ema`` carries it across steps) or an unknown one
    (a plugin that declares no ``advantage_group``) are never flagged here; the per-step
    check :func:`nothing_trained` still sees them.

    Args:
        cfg: The run's ``TrainConfig``.
        world_size: Processes of the run (default: ``$WORLD_SIZE`` or 1).

    Returns:
        A sentence naming the cause and the flags that fix it, or ``None``.
    """
    from learners.base import learner_spec

    world = world_size if world_size is not None else int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.rounds_per_step * max(world, 1) > 1:
        return None
    group = advantage_group(learner_spec(cfg.algorithm).factory)
    roles = set(protocol_roles(cfg.env.protocol))
    trained = roles - set(cfg.freeze)
    head = (
        f"algorithm {cfg.algorithm!r} with one round per step (rounds_per_step = "
        f"{cfg.rounds_per_step}) trains nothing: every advantage group holds one sequence, "
        "whose baseline is its own reward, so every advantage is 0"
    )
    if group == ROLE_PROMPT and (cfg.env.solver_samples == 1 or "solver" not in trained):
        why = (
            "its baseline is the (role, prompt) group and only the solver's k samples of one "
            "task share a prompt"
            + (" (k = 1)" if cfg.env.solver_samples == 1 else " (the solver is frozen)")
        )
        return (
            f"{head} ({why}); use --rounds-per-step 2 or more, --env.solver-samples 2 or "
            "more, or --algorithm ema (a baseline carried across steps)"
        )
    if group == ROLE_DOMAIN and trained and trained <= ONE_ACTION_ROLES:
        why = (
            f"its baseline is the (role, domain) group and the trained roles {sorted(trained)} "
            "act once per round"
        )
        return f"{head} ({why}); use --rounds-per-step 2 or more, or train more roles"
    return None


def nothing_trained(update: dict[str, float]) -> str | None:
    """Why a learner's update changed nothing, read from its metrics; ``None`` when it trained.

    Reads the metrics :meth:`learners.pg.PolicyGradientLearner.update` returns:
    ``num_sequences`` 0 (nothing buffered), ``skipped_share`` 1 (every advantage exactly 0,
    so the loss hook was never called) or ``grad_norm`` 0. A learner that reports none of
    them is assumed to have trained.
    """
    if update.get("num_sequences", 1.0) <= 0:
        return "no sequence to train on (every role frozen, or no action produced a token)"
    if update.get("skipped_share", 0.0) >= 1.0:
        return (
            "every advantage is 0, so the loss hook was never called (rewards were equal "
            "within every advantage group: learner/adv_abs_mean = "
            f"{update.get('adv_abs_mean', 0.0):.3g}; see reward/<role> and "
            "docs/debugging.md#5-a-run-that-trains-nothing)"
        )
    if "grad_norm" in update and update["grad_norm"] == 0.0:
        return "the gradient is 0 (the loss does not depend on the trained weights)"
    return None


def trained_metric(update: dict[str, float]) -> dict[str, float]:
    """The step's ``learner/trained`` metric: 1.0, or 0.0 when :func:`nothing_trained`.

    ``{}`` for a learner that reports none of the metrics it reads.
    """
    if not any(k in update for k in ("num_sequences", "skipped_share", "grad_norm")):
        return {}
    return {"learner/trained": 0.0 if nothing_trained(update) else 1.0}


# --------------------------------------------------------------------------- settings
SCORE_READERS = ("critic", "judge")
"""Roles whose replies are scores: the critic probe and its calibrated gate are about them."""


def protocol_roles(protocol: str) -> list[str]:
    """The roles of a protocol's agents, in turn order (``"critic_0"`` -> ``"critic"``)."""
    from sage_env.protocols import make_protocol

    return [a.rsplit("_", 1)[0] for a in make_protocol(protocol).agents]


def reads_scores(protocol: str) -> bool:
    """Whether a protocol has a role of :data:`SCORE_READERS` (else the probe means nothing)."""
    return bool(set(SCORE_READERS) & set(protocol_roles(protocol)))


def phases_of(protocol: str) -> set[str]:
    """The phases a protocol can ask for (its ``on_<phase>`` handlers), for budget checks."""
    from sage_env.protocols import make_protocol

    return make_protocol(protocol).handled_phases()


def ignored_settings(cfg: Any, base: Any | None = None) -> list[str]:
    """Settings of ``cfg`` that do nothing because another setting overrides or disables them.

    Always checked: ``early_stopping_patience`` without validation; ``gate_calibration``
    without the critic probe; the critic probe under a protocol with no critic or judge.
    Given ``base`` (the preset the flags were laid over), also settings changed from it
    that another one overrides: ``max_new_tokens`` when
    ``phase_max_new_tokens`` sets every phase of the protocol, ``val_limit``/``val_max_new_tokens``/
    ``val_at_start`` with ``val_every = 0``, ``env.turn_order`` under a protocol other than
    ``"sage"``, ``gate_seed_quantile`` without
    ``gate_calibration``, ``warmup.*`` with ``warmup.steps = 0``.

    Returns:
        One sentence per ignored setting, naming the setting that wins.
    """
    out: list[str] = []
    if cfg.early_stopping_patience > 0 and cfg.val_every == 0:
        out.append(
            f"early_stopping_patience = {cfg.early_stopping_patience} does nothing without "
            "validation (val_every = 0): add --val-every N"
        )
    if cfg.critic_probe_size > 0 and not reads_scores(cfg.env.protocol):
        roles = sorted(set(protocol_roles(cfg.env.protocol)))
        out.append(
            f"critic_probe_size = {cfg.critic_probe_size} does nothing: protocol "
            f"{cfg.env.protocol!r} has no critic or judge (roles {roles}), so the "
            "probe and gate_calibration are off"
        )
    elif cfg.gate_calibration and cfg.critic_probe_size == 0:
        out.append(
            "gate_calibration is off: it sets alpha from the critic probe, which is off "
            "(critic_probe_size = 0); alpha stays "
            f"{cfg.env.rewards.alpha} (--critic-probe-size 32 turns both on)"
        )
    if base is None:
        return out

    def changed(name: str, obj: Any = cfg, ref: Any = base) -> bool:
        return getattr(obj, name) != getattr(ref, name)

    if changed("max_new_tokens"):
        budgets = {k for k in cfg.phase_max_new_tokens if "/" not in k}
        phases = phases_of(cfg.env.protocol)
        if phases and phases <= budgets:
            out.append(
                f"max_new_tokens = {cfg.max_new_tokens} is not used: phase_max_new_tokens "
                f"sets every phase of protocol {cfg.env.protocol!r} "
                f"({', '.join(sorted(phases))})"
            )
    if changed("turn_order", cfg.env, base.env) and cfg.env.protocol != "sage":
        out.append(
            f"env.turn_order = {cfg.env.turn_order!r} does nothing: it orders the turns of "
            f"protocol 'sage', not {cfg.env.protocol!r}"
        )
    if cfg.val_every == 0:
        for name in ("val_limit", "val_max_new_tokens", "val_at_start"):
            if changed(name):
                out.append(
                    f"{name} = {getattr(cfg, name)} does nothing without validation "
                    "(val_every = 0): add --val-every N"
                )
    if not cfg.gate_calibration and changed("gate_seed_quantile"):
        out.append(
            f"gate_seed_quantile = {cfg.gate_seed_quantile} does nothing without "
            "gate_calibration (--gate-calibration)"
        )
    if cfg.warmup.steps == 0:
        for f in dataclasses.fields(cfg.warmup):
            if f.name != "steps" and changed(f.name, cfg.warmup, base.warmup):
                out.append(
                    f"warmup.{f.name} does nothing with warmup.steps = 0 "
                    "(--warmup.steps N turns the warm-up on)"
                )
    return out


# --------------------------------------------------------------------------- plugins
def where(obj: Any) -> str:
    """``file:line`` where ``obj`` (a class or function) is defined, or its qualified name."""
    target = inspect.unwrap(obj)
    try:
        path = inspect.getsourcefile(target) or inspect.getfile(target)
        line = inspect.getsourcelines(target)[1]
        return f"{path}:{line}"
    except (OSError, TypeError):
        return getattr(target, "__qualname__", repr(target))


def _hook_problem(cls: type, name: str, arguments: int) -> str | None:
    """A problem with hook ``name`` of ``cls`` (called as ``self.name(*arguments)``)."""
    fn = inspect.getattr_static(cls, name, None)
    if fn is None:
        return None
    if isinstance(fn, (staticmethod, classmethod)):
        return f"{name} must be a plain method (def {name}(self, ...)), not a {type(fn).__name__}"
    if not callable(fn):
        return f"{name} must be a method, got {fn!r}"
    try:
        inspect.signature(fn).bind(object(), *([None] * arguments))
    except TypeError:
        return (
            f"{name}{inspect.signature(fn)} cannot be called as self.{name}("
            + ", ".join(["inputs"] if name == "loss" else ["batch"])
            + ")"
        )
    except ValueError:  # no signature (a builtin): nothing to check
        return None
    ret = inspect.signature(fn).return_annotation
    if name == "loss" and ret in (float, int, "float", "int"):
        return (
            f"loss is annotated to return {getattr(ret, '__name__', ret)}; it must " + LOSS_RETURN
        )
    return None


LOSS_RETURN = (
    "return (loss, metrics): a scalar torch.Tensor with grad (e.g. self.aggregate(per_token, "
    "inputs)) and a dict of floats"
)
"""What the ``loss`` hook must return (the end of its error messages)."""


def check_learner_class(name: str, cls: Any, config_cls: Any) -> None:
    """Check a learner before it is registered: is it one, with a dataclass config and hooks.

    Checks that ``cls`` is a learner class (it has :data:`LEARNER_METHODS`; a dataclass
    registered in its place is named as the config it probably is) or a factory function;
    that ``config_cls`` is a dataclass and not a learner; and, for a subclass of
    :class:`~learners.pg.PolicyGradientLearner`, that ``loss(inputs)`` and
    ``advantages(batch)`` take one argument, that ``loss`` is not annotated to return a
    number, and that a ``loss`` override called on a tiny synthetic micro-batch returns
    ``(tensor with grad, dict)`` (skipped when it needs state a bare instance lacks).

    Raises:
        LearnerPluginError: naming the learner, its file and line, what is wrong and the fix.
    """
    at = where(cls)
    label = f"learner {name!r} ({at})"
    missing = [m for m in LEARNER_METHODS if not callable(getattr(cls, m, None))]
    if isinstance(cls, type) and missing and dataclasses.is_dataclass(cls):
        raise LearnerPluginError(
            f"{label}: {cls.__name__} is a dataclass without {', '.join(missing)}: "
            "it looks like the learner's config. Register the learner class: "
            f"register_learner({name!r}, MyLearner, config_cls={cls.__name__})"
        )
    if not callable(cls):
        raise LearnerPluginError(f"{label}: expected a learner class or factory, got {cls!r}")
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise LearnerPluginError(
            f"{label}: config_cls must be a dataclass (@dataclass class MyConfig(PGConfig)), "
            f"got {config_cls!r}"
        )
    if isinstance(cls, type) and missing:
        raise LearnerPluginError(
            f"{label}: {cls.__name__} lacks {', '.join(missing)}; a learner implements "
            f"{', '.join(LEARNER_METHODS)} (subclass learners.pg.PolicyGradientLearner)"
        )
    if all(callable(getattr(config_cls, m, None)) for m in ("act", "update")):
        raise LearnerPluginError(
            f"{label}: config_cls {config_cls.__name__} is a learner, not a config dataclass"
        )
    from learners.pg import PolicyGradientLearner

    if not (isinstance(cls, type) and issubclass(cls, PolicyGradientLearner)):
        return
    for hook, arguments in (("loss", 1), ("advantages", 1), ("aggregate", 2)):
        problem = _hook_problem(cls, hook, arguments)
        if problem:
            fn = inspect.getattr_static(cls, hook)
            raise LearnerPluginError(f"learner {name!r} ({where(fn)}): {problem}")
    if cls.loss is not PolicyGradientLearner.loss:
        _dry_run_loss(name, cls, config_cls)


def check_loss_result(learner: Any, result: Any) -> tuple[Any, dict]:
    """Validate what a ``loss`` hook returned; returns ``(loss, metrics)``.

    Raises:
        LearnerPluginError: naming the hook's file and line when the result is not a pair of
            a scalar tensor that requires grad and a dict.
    """
    import torch

    problem = None
    if not (isinstance(result, tuple) and len(result) == 2):
        problem = f"it returned {type(result).__name__} {_short(result)}"
    else:
        loss, metrics = result
        if not isinstance(loss, torch.Tensor):
            problem = f"its loss is a {type(loss).__name__} ({_short(loss)}), not a tensor"
        elif loss.dim() != 0:
            problem = f"its loss has shape {tuple(loss.shape)}, not a scalar"
        elif not loss.requires_grad:
            problem = "its loss does not require grad (built from detached values or .item())"
        elif not isinstance(metrics, dict):
            problem = f"its metrics are a {type(metrics).__name__}, not a dict"
    if problem is None:
        return result
    fn = getattr(type(learner), "loss", None)
    raise LearnerPluginError(
        f"{type(learner).__name__}.loss ({where(fn)}): {problem}; it must {LOSS_RETURN}"
    )


def _dry_run_loss(name: str, cls: type, config_cls: type) -> None:
    """Call ``cls.loss`` on a 2 x 3 synthetic micro-batch; raise if what it returns is wrong."""
    import torch

    from learners.pg import LossInputs

    try:
        config = config_cls()
    except Exception:  # a config without defaults: nothing to try
        return
    learner = object.__new__(cls)
    learner.config = config
    learner.temperature = 1.0
    learner.use_reference = False
    learner.skip_zero_advantage = True
    logp = torch.full((2, 3), -1.0, requires_grad=True)
    inputs = LossInputs(
        logp=logp,
        old_logp=torch.full((2, 3), -1.0),
        advantages=torch.tensor([[1.0], [-1.0]]),
        mask=torch.ones(2, 3),
        ref_logp=None,
        num_tokens=6,
        num_sequences=2,
    )
    try:
        result = cls.loss(learner, inputs)
    except Exception:  # it needs state a bare instance lacks; the runtime check covers it
        return
    try:
        check_loss_result(learner, result)
    except LearnerPluginError as exc:
        raise LearnerPluginError(f"learner {name!r}: {exc} (found on a test micro-batch)") from None


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
