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

A learner plugin's own checks are in :mod:`learners.algorithms.plugin_checks`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from learners.algorithms.registry import learner_spec
from sage_env.protocols import make_protocol

ROLE_DOMAIN = "role_domain"
"""``advantage_group`` of a learner whose baseline is the (role, domain) group (TRR++)."""
ROLE_PROMPT = "role_prompt"
"""``advantage_group`` of a learner whose baseline is the (role, prompt) group (GRPO,
REINFORCE++-baseline, RLOO): only the k samples of one prompt share a group."""

ONE_ACTION_ROLES = frozenset({"challenger", "proposer", "planner"})
"""Roles that act exactly once per round in every built-in protocol (a proposal, a plan);
the solver acts k times per task and the critic or judge a varying number of times."""


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

    Reads the metrics :meth:`learners.algorithms.pg.PolicyGradientLearner.update` returns:
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
            "docs/guide/debugging.md#5-a-run-that-trains-nothing)"
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
    return [a.rsplit("_", 1)[0] for a in make_protocol(protocol).agents]


def reads_scores(protocol: str) -> bool:
    """Whether a protocol has a role of :data:`SCORE_READERS` (else the probe means nothing)."""
    return bool(set(SCORE_READERS) & set(protocol_roles(protocol)))


def phases_of(protocol: str) -> set[str]:
    """The phases a protocol can ask for (its ``on_<phase>`` handlers), for budget checks."""
    return make_protocol(protocol).handled_phases()


def ignored_settings(cfg: Any, base: Any | None = None) -> list[str]:
    """Settings of ``cfg`` that do nothing because another setting overrides or disables them.

    Always checked: ``early_stopping_patience`` without validation; ``gate_calibration``
    without the critic probe; ``probe_every`` without it; the critic probe under a protocol
    with no critic or judge.
    Given ``base`` (the preset the flags were laid over), also settings changed from it
    that another one overrides: ``max_new_tokens`` when
    ``phase_max_new_tokens`` sets every phase of the protocol, ``val_limit``/``val_max_new_tokens``/
    ``val_at_start`` with ``val_every = 0``, ``env.turn_order`` under a protocol other than
    ``"sage"``, ``gate_seed_quantile``, ``gate_per_domain`` and ``gate_intact_pass`` without
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
    if cfg.probe_every > 0 and cfg.critic_probe_size == 0:
        out.append(
            f"probe_every = {cfg.probe_every} does nothing: the critic probe is off "
            "(critic_probe_size = 0)"
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
    for name in ("gate_seed_quantile", "gate_per_domain", "gate_intact_pass"):
        if not cfg.gate_calibration and changed(name):
            out.append(
                f"{name} = {getattr(cfg, name)} does nothing without "
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
