"""``check_protocol``: tell the author of a protocol what is wrong with it."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import re
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from sage_env.protocols.base import Protocol

Player = Callable[[str, dict, dict, Any], str]
"""``(agent, observation, info, env) -> action``, as in :mod:`sage_env.interactive.play`."""
_AGENT_RE = re.compile(r"^[a-z][a-z0-9]*_\d+$")
MAX_TURNS = 200
"""Turns after which a round counts as never ending."""
GARBAGE = "\x00 garbage 😀 <score>"
"""The garbage player's reply in every phase."""


class ProtocolError(ValueError):
    """Raised by :func:`check_protocol`; the message lists every problem found."""


def _instantiate(spec: str | Protocol | Callable[[], Protocol]) -> Protocol:
    from sage_env.protocols import make_protocol

    if isinstance(spec, (str, Protocol)):
        return make_protocol(spec)
    return spec()


class ProtocolReport(list):
    """What :func:`check_protocol` found: a ``list`` of problems (empty when sound) plus coverage.

    Attributes:
        phases_reached: ``{phase: times played}`` over every round of the check.
        phases_declared: The protocol's :meth:`~sage_env.protocols.Protocol.handled_phases`.
        rounds: Rounds played.
    """

    def __init__(
        self,
        problems: list[str] = (),
        phases_reached: dict[str, int] | None = None,
        phases_declared: set[str] | None = None,
        rounds: int = 0,
    ) -> None:
        super().__init__(problems)
        self.phases_reached = dict(phases_reached or {})
        self.phases_declared = set(phases_declared or ())
        self.rounds = rounds


class _Coverage:
    """Turns, credits and unscripted phases over all rounds of one check."""

    def __init__(self) -> None:
        self.phases: Counter[str] = Counter()
        self.acted: dict[str, Counter[str]] = {}
        self.credited: Counter[str] = Counter()
        self.unscripted: set[str] = set()
        self.rounds = 0


def check_protocol(
    spec: str | Protocol | Callable[[], Protocol],
    rounds: int = 3,
    seeds: list | None = None,
    raise_on_error: bool = True,
    players: Mapping[str, Player] | None = None,
    protocol_config: Any = None,
    **env_overrides: Any,
) -> ProtocolReport:
    """Play rounds with garbage, scripted and your own players and report every broken rule.

    Scripted players reply with the protocol's own
    :meth:`~sage_env.protocols.Protocol.scripted_actions` (valid proposals, passing and
    failing scores, right and wrong answers, rotated so that both sides of every gate run),
    so the rounds reach every phase, whatever the protocol names them.

    Checks: agent ids look like ``role_0`` and are unique; ``start`` selects an agent; no
    handler raises, on garbage, scripted or your players' output; every action is credited
    exactly once, before the same agent acts again or at the end of the round; rewards are
    finite; every round ends within 200 turns; every phase of
    :meth:`~sage_env.protocols.Protocol.handled_phases` is reached and has scripted actions;
    every agent acts and every agent that acts is credited; ``pettingzoo.test.api_test``
    passes; a ``config_cls`` (the protocol's own settings) is a dataclass that builds with
    its defaults and comes back equal from a mapping of its fields (a YAML round trip).

    Args:
        spec: A registered name, a :class:`Protocol` class (or factory), or an instance.
        rounds: Rounds per player kind (seeded 0..rounds-1); the kinds are garbage, scripted
            from the first reply, scripted from the second, and each of ``players``.
        seeds: Reference tasks (default: one math and one code seed of the bundled set).
        raise_on_error: Raise :class:`ProtocolError` when a problem is found.
        players: More players to play every agent with, ``{name: player}``, each a
            ``(agent, observation, info, env) -> str`` callable (:mod:`sage_env.interactive.play`).
        protocol_config: The protocol's settings to play with: an instance of its
            ``config_cls`` or a mapping of its fields (default: its defaults). Check each
            setting that changes what a handler does.
        **env_overrides: :class:`~sage_env.config.EnvConfig` overrides for every environment
            played, e.g. ``turn_order="interleaved"``.

    Returns:
        A :class:`ProtocolReport`: the problems found (empty when the protocol is sound) and
        the phases reached.

    Raises:
        ProtocolError: if a problem is found and ``raise_on_error`` is True.
    """
    from sage_env.tasks.task import load_seeds

    problems: list[str] = []
    try:
        proto = _instantiate(spec)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.append(f"cannot create the protocol: {exc!r}")
        return _finish(problems, raise_on_error)
    agents = tuple(getattr(proto, "agents", ()))
    problems += _agent_problems(proto, agents)
    settings, config_problems = _settings(proto, protocol_config)
    problems += config_problems
    if problems:
        return _finish(problems, raise_on_error)
    if seeds is None:
        all_seeds = load_seeds()
        seeds = [next(t for t in all_seeds if t.domain == d) for d in ("math", "code")]

    cov = _Coverage()
    problems += _play_rounds(spec, seeds, settings, env_overrides, players, rounds, cov)
    problems += _coverage_problems(proto, agents, cov)
    problems += _api_test_problems(spec, seeds, settings, env_overrides)
    report = ProtocolReport(
        sorted(set(problems), key=problems.index),
        cov.phases,
        _declared(proto),
        cov.rounds,
    )
    return _finish(report, raise_on_error)


def _agent_problems(proto: Protocol, agents: tuple) -> list[str]:
    """What is wrong with ``proto``'s agent ids and ``start`` (checked before any round)."""
    problems: list[str] = []
    if not agents:
        problems.append("`agents` is empty: list the agent ids, e.g. ('solver_0',)")
    if len(set(agents)) != len(agents):
        problems.append(f"agent ids repeat: {agents}")
    problems += [
        f"agent id {a!r} should look like 'role_0'"
        for a in agents
        if not isinstance(a, str) or not _AGENT_RE.match(a)
    ]
    if type(proto).start is Protocol.start:
        problems.append("`start` is not implemented")
    return problems


def _play_rounds(
    spec: str | Protocol | Callable[[], Protocol],
    seeds: list,
    settings: Any,
    env_overrides: dict,
    players: Mapping[str, Player] | None,
    rounds: int,
    cov: _Coverage,
) -> list[str]:
    """The problems of ``rounds`` rounds per player kind (garbage, scripted, ``players``)."""
    from sage_env.env import raw_env

    problems: list[str] = []
    kinds: list[tuple[str, Callable[[], Player]]] = [
        ("garbage players", lambda: _garbage),
        ("scripted players, first reply", lambda: _scripted_player(0, cov)),
        ("scripted players, second reply", lambda: _scripted_player(1, cov)),
    ]
    kinds += [(f"{name!r} players", lambda p=p: p) for name, p in (players or {}).items()]
    for kind, make_player in kinds:
        for seed in range(rounds):
            where = f"[{kind}, seed {seed}]"
            e = raw_env(
                protocol=_instantiate(spec),
                seeds=seeds,
                solver_samples=2,
                protocol_config=settings,
                **env_overrides,
            )
            try:
                problems += _play_and_audit(e, make_player(), seed, where, cov)
            finally:
                e.close()
    return problems


def _api_test_problems(
    spec: str | Protocol | Callable[[], Protocol], seeds: list, settings: Any, env_overrides: dict
) -> list[str]:
    """``["pettingzoo api_test fails: ..."]`` when PettingZoo's ``api_test`` fails, else ``[]``."""
    from sage_env.env import env as make_env

    problems: list[str] = []
    try:
        from pettingzoo.test import api_test

        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # api_test's hints about Box/Discrete spaces
            api_test(
                make_env(
                    protocol=_instantiate(spec),
                    seeds=seeds,
                    solver_samples=1,
                    protocol_config=settings,
                    **env_overrides,
                ),
                num_cycles=20,
            )
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.append(f"pettingzoo api_test fails: {exc!r}")
    return problems


def _settings(proto: Protocol, value: Any) -> tuple[Any, list[str]]:
    """The settings to play with and the problems of the protocol's ``config_cls``."""
    from sage_env.config import build_protocol_config

    cls = getattr(proto, "config_cls", None)
    if cls is None:
        if value is not None:
            return None, [f"protocol_config={value!r} given, but the protocol has no config_cls"]
        return None, []
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return None, [f"config_cls must be a dataclass (or None), got {cls!r}"]
    try:
        default = cls()
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return None, [
            f"config_cls {cls.__name__}() fails ({exc!r}): give every field a default, so "
            "that a config naming none of them works"
        ]
    problems = []
    try:
        again = build_protocol_config(cls, dataclasses.asdict(default), proto.name)
    except Exception as exc:  # noqa: BLE001
        again = exc
    if again != default:
        problems.append(
            f"config_cls {cls.__name__} does not round-trip through a mapping (YAML): "
            f"{cls.__name__}(**asdict({default!r})) gives {again!r}; keep its fields plain "
            "values (numbers, strings, bools, tuples of them)"
        )
    try:
        return build_protocol_config(cls, value, proto.name), problems
    except Exception as exc:  # noqa: BLE001
        return None, [*problems, f"protocol_config={value!r} does not fit: {exc}"]


def _garbage(agent: str, obs: dict, info: dict, env) -> str:
    return GARBAGE


def _scripted_player(offset: int, cov: _Coverage) -> Player:
    """A player replying with the protocol's scripted actions.

    The n-th turn of a phase in a round takes reply ``(n + offset) % len(replies)``; a phase
    without any gets garbage (and is recorded in ``cov.unscripted``).
    """
    turns: Counter[str] = Counter()

    def player(agent: str, obs: dict, info: dict, env) -> str:
        raw = env.unwrapped
        phase = info.get("phase")
        actions = raw.protocol.scripted_actions(phase, obs, raw.current_task)
        n = turns[phase]
        turns[phase] += 1
        if not actions:
            cov.unscripted.add(phase)
            return GARBAGE
        return str(actions[(n + offset) % len(actions)])

    return player


def _declared(proto: Protocol) -> set[str]:
    try:
        return set(proto.handled_phases())
    except Exception:  # noqa: BLE001 - a broken override is reported by its rounds
        return set()


def _coverage_problems(proto: Protocol, agents: tuple[str, ...], cov: _Coverage) -> list[str]:
    problems = []
    for phase in sorted(_declared(proto) - set(cov.phases)):
        problems.append(
            f"phase {phase!r} (on_{phase}) was never reached in {cov.rounds} rounds: no "
            f"player's reply led there; give scripted_actions a reply for the phase before it"
        )
    for phase in sorted(p for p in cov.unscripted if p is not None):
        problems.append(
            f"phase {phase!r} has no scripted actions, so only garbage was played in it: name "
            f"its kind in `phases` (e.g. {{{phase!r}: 'solve'}}) or override scripted_actions"
        )
    for agent in agents:
        acted = cov.acted.get(agent)
        if not acted:
            problems.append(f"{agent} is in `agents` but never acted in {cov.rounds} rounds")
        elif not cov.credited[agent]:
            problems.append(
                f"{agent} acted {sum(acted.values())} times (phases {sorted(acted)}) but was "
                "never credited (call env.deliver)"
            )
    return problems


def _play_and_audit(e, player, seed: int, where: str, cov: _Coverage | None = None) -> list[str]:
    cov = cov if cov is not None else _Coverage()
    cov.rounds += 1
    problems: list[str] = []
    pending: dict[str, int] = {}
    last_phase: dict[str, str] = {}
    original = e.deliver

    def audited_deliver(agent, reward, terms, **details):
        if not isinstance(reward, (int, float)) or not math.isfinite(reward):
            problems.append(f"{where} non-finite reward {reward!r} for {agent}")
        if pending.get(agent, 0) <= 0:
            problems.append(
                f"{where} reward delivered to {agent} with no uncredited action "
                f"(double credit?) in phase {e.infos[agent].get('phase')!r}"
            )
        else:
            pending[agent] -= 1
            cov.credited[agent] += 1
        original(agent, reward, terms, **details)

    e.deliver = audited_deliver
    try:
        e.reset(seed=seed)
    except Exception:  # noqa: BLE001
        return [f"{where} start() raised:\n{_tb()}"]
    if e.agent_selection not in e.possible_agents:
        return [f"{where} start() selected no agent (call env.select(...))"]
    for _turn in range(MAX_TURNS):
        agent = e.agent_selection
        if e.terminations.get(agent) or e.truncations.get(agent):
            e.step(None)
            if not e.agents:
                break
            continue
        phase = e.infos[agent].get("phase")
        if pending.get(agent, 0) > 0:
            problems.append(
                f"{where} {agent} acts again (phase {phase!r}) before its previous action "
                f"was credited"
            )
        pending[agent] = pending.get(agent, 0) + 1
        last_phase[agent] = phase
        cov.phases[phase] += 1
        cov.acted.setdefault(agent, Counter())[phase] += 1
        try:
            e.step(player(agent, e.observe(agent), e.infos[agent], e))
        except Exception:  # noqa: BLE001
            problems.append(f"{where} step of {agent} in phase {phase!r} raised:\n{_tb()}")
            return problems
    else:
        problems.append(
            f"{where} the round did not end within {MAX_TURNS} turns (call env.finish())"
        )
    problems += [
        f"{where} {a}'s last action was never credited (phase {last_phase.get(a)!r})"
        for a, n in pending.items()
        if n > 0
    ]
    return problems


def _tb() -> str:
    return "".join(traceback.format_exc(limit=3).splitlines(keepends=True)[-4:])


def _finish(problems: list[str], raise_on_error: bool) -> ProtocolReport:
    report = problems if isinstance(problems, ProtocolReport) else ProtocolReport(problems)
    if report and raise_on_error:
        raise ProtocolError("protocol check failed:\n- " + "\n- ".join(report))
    return report
