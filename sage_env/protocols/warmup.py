"""The warm-up set of a run: the demonstrations each protocol's format warm-up gets.

Each protocol owns its warm-up: :func:`demonstrations_for` asks the run's protocol for its set
(:meth:`sage_env.protocols.Protocol.demonstrations`: by default SAGE's formats,
:func:`sage_formats`; AZR's own are its execution tasks in its prompts,
:mod:`sage_env.protocols.exec_demonstrations`). :func:`sage_formats` draws SAGE's role
demonstrations from the math/code seeds (:mod:`sage_env.protocols.demonstrations`) and, when
the run's domains hold ``"exec"``, from the execution seeds too.

Text only; the learner does the supervised step (``learners.training.warmup``).
"""

from __future__ import annotations

import random
from typing import Any

from sage_env.protocols.demonstrations import (
    Demonstration,
    build_demonstrations,
    build_exec_reviews,
)
from sage_env.protocols.exec_demonstrations import build_exec_demonstrations, exec_seeds
from sage_env.tasks.task import Task
from sage_env.text import prompts


def demonstrations_for(
    protocol: Any,
    domains: tuple[str, ...] | list[str],
    seeds: list[Task],
    n: int = 64,
    mix: dict[str, float] | None = None,
    seed: int = 0,
    exclude: list[Task] | None = None,
    math_grounding: str = "claim",
    domain_weights: dict[str, float] | None = None,
) -> list[Demonstration]:
    """The warm-up demonstrations a run of ``protocol`` over ``domains`` needs.

    The protocol's own (:meth:`sage_env.protocols.Protocol.demonstrations`; AZR's are its
    execution tasks, :meth:`sage_env.protocols.azr.AZRProtocol.demonstrations`).

    ``protocol`` is a registered name or a :class:`~sage_env.protocols.Protocol` instance; a name
    nothing registered gets SAGE's (:func:`sage_formats`). ``mix`` defaults to 40% challenger, 40%
    critic, 10% planner, 10% solver. ``seeds`` may hold ``exec`` tasks or not; the bundled execution
    seeds are loaded when a protocol needs them and ``seeds`` has none. ``exclude`` as in
    :func:`build_demonstrations` (an excluded task's id also removes execution seeds built from
    it). ``math_grounding`` as in :func:`build_demonstrations`. ``domain_weights``
    (``EnvConfig.domain_weights``) is passed on only when set, so a protocol written before it
    still works without it.
    """
    from sage_env.protocols.registry import PROTOCOLS, make_protocol

    mix = dict(mix or {"challenger": 0.4, "critic": 0.4, "planner": 0.1, "solver": 0.1})
    if isinstance(protocol, str) and protocol not in PROTOCOLS.names():
        return sage_formats(
            domains, seeds, n, mix, seed, exclude, math_grounding, domain_weights=domain_weights
        )
    weights = {} if domain_weights is None else {"domain_weights": domain_weights}
    return make_protocol(protocol).demonstrations(
        domains,
        seeds,
        n=n,
        mix=mix,
        seed=seed,
        exclude=exclude,
        math_grounding=math_grounding,
        **weights,
    )


def sage_formats(
    domains: tuple[str, ...] | list[str],
    seeds: list[Task],
    n: int,
    mix: dict[str, float],
    seed: int = 0,
    exclude: list[Task] | None = None,
    math_grounding: str = "claim",
    domain_weights: dict[str, float] | None = None,
) -> list[Demonstration]:
    """SAGE's warm-up (every protocol's unless it has its own): its four roles' formats.

    - ``"exec"`` in ``domains`` (SAGE over execution tasks): the proposing and solving shares
      are split between the math/code seeds (:func:`build_demonstrations`) and the execution
      seeds (:func:`build_exec_demonstrations` with SAGE's solver prompt), in proportion to
      the number of domains (or to ``domain_weights``, the rounds' mix); so is the critic's
      share (:func:`build_exec_reviews`: the critic reviews execution questions too);
      planner demonstrations stay math/code.
    - otherwise: :func:`build_demonstrations`.
    """
    plain = [t for t in seeds if t.domain != "exec"]
    if "exec" not in domains:
        return build_demonstrations(
            plain, n, mix, seed=seed, exclude=exclude, math_grounding=math_grounding
        )
    exe = exec_seeds(seeds)
    excluded = {t.task_id for t in exclude or []}
    other = [d for d in domains if d != "exec"]
    frac = 1.0 / len(domains)
    if domain_weights is not None:
        weights = {d: float(domain_weights.get(d, 1.0)) for d in domains}
        frac = weights["exec"] / (sum(weights.values()) or 1.0)
    total = sum(mix.values()) or 1.0
    active = mix.get("challenger", 0.0) + mix.get("solver", 0.0)
    n_exec = round(n * frac * active / total)
    exec_mix = {"challenger": mix.get("challenger", 0.0), "solver": mix.get("solver", 0.0)}
    demos = build_exec_demonstrations(
        exe, n_exec, exec_mix, seed=seed, solver_prompt=prompts.solver, exclude_ids=excluded
    )
    n_reviews = round(n * frac * mix.get("critic", 0.0) / total)
    demos += build_exec_reviews(exe, n_reviews, seed=seed, exclude_ids=excluded)
    if other:
        plain = [t for t in plain if t.domain in other]
        demos += build_demonstrations(
            plain, n - len(demos), mix, seed=seed, exclude=exclude, math_grounding=math_grounding
        )
    random.Random(seed).shuffle(demos)
    return demos
