"""``check_protocol``: tell the author of a protocol what is wrong with it."""

from __future__ import annotations

import contextlib
import io
import math
import re
import traceback
import warnings
from collections.abc import Callable

from sage_env.protocols.base import Protocol

_AGENT_RE = re.compile(r"^[a-z][a-z0-9]*_\d+$")
MAX_TURNS = 200


class ProtocolError(ValueError):
    """Raised by :func:`check_protocol`; the message lists every problem found."""


def _instantiate(spec: str | Protocol | Callable[[], Protocol]) -> Protocol:
    from sage_env.protocols import make_protocol

    if isinstance(spec, (str, Protocol)):
        return make_protocol(spec)
    return spec()


def check_protocol(
    spec: str | Protocol | Callable[[], Protocol],
    rounds: int = 3,
    seeds: list | None = None,
    raise_on_error: bool = True,
) -> list[str]:
    """Play ``rounds`` rounds per player kind and report every broken rule.

    Checks: agent ids look like ``role_0`` and are unique; ``start`` selects an agent; no
    handler raises, on garbage, scripted or oracle output; every action is credited exactly
    once, before the same agent acts again or at the end of the round; rewards are finite;
    every round ends within 200 turns; ``pettingzoo.test.api_test`` passes.

    Args:
        spec: A registered name, a :class:`Protocol` class (or factory), or an instance.
        rounds: Rounds per player kind (seeded 0..rounds-1).
        seeds: Reference tasks (default: one math and one code seed of the bundled set).
        raise_on_error: Raise :class:`ProtocolError` when a problem is found.

    Returns:
        The problems found (empty when the protocol is sound).

    Raises:
        ProtocolError: if a problem is found and ``raise_on_error`` is True.
    """
    from sage_env.env import env as make_env
    from sage_env.env import raw_env
    from sage_env.play import PLAYERS
    from sage_env.tasks import load_seeds

    problems: list[str] = []
    try:
        proto = _instantiate(spec)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.append(f"cannot create the protocol: {exc!r}")
        return _finish(problems, raise_on_error)
    agents = tuple(getattr(proto, "agents", ()))
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
    if problems:
        return _finish(problems, raise_on_error)
    if seeds is None:
        all_seeds = load_seeds()
        seeds = [next(t for t in all_seeds if t.domain == d) for d in ("math", "code")]

    garbage = lambda *a: "\x00 garbage 😀 <score>"  # noqa: E731
    kinds = {"garbage": garbage, "scripted": PLAYERS["scripted"], "oracle": PLAYERS["oracle"]}
    for kind, player in kinds.items():
        for seed in range(rounds):
            where = f"[{kind} players, seed {seed}]"
            e = raw_env(protocol=_instantiate(spec), seeds=seeds, solver_samples=2)
            try:
                problems += _play_and_audit(e, player, seed, where)
            finally:
                e.close()
    try:
        from pettingzoo.test import api_test

        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # api_test's hints about Box/Discrete spaces
            api_test(
                make_env(protocol=_instantiate(spec), seeds=seeds, solver_samples=1),
                num_cycles=20,
            )
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.append(f"pettingzoo api_test fails: {exc!r}")
    return _finish(sorted(set(problems), key=problems.index), raise_on_error)


def _play_and_audit(e, player, seed: int, where: str) -> list[str]:
    problems: list[str] = []
    pending: dict[str, int] = {}
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
        if pending.get(agent, 0) > 0:
            problems.append(
                f"{where} {agent} acts again (phase "
                f"{e.infos[agent].get('phase')!r}) before its previous action "
                f"was credited"
            )
        pending[agent] = pending.get(agent, 0) + 1
        try:
            e.step(player(agent, e.observe(agent), e.infos[agent], e))
        except Exception:  # noqa: BLE001
            problems.append(
                f"{where} step of {agent} in phase {e.infos[agent].get('phase')!r} raised:\n{_tb()}"
            )
            return problems
    else:
        problems.append(
            f"{where} the round did not end within {MAX_TURNS} turns (call env.finish())"
        )
    problems += [
        f"{where} {a}'s last action was never credited" for a, n in pending.items() if n > 0
    ]
    return problems


def _tb() -> str:
    return "".join(traceback.format_exc(limit=3).splitlines(keepends=True)[-4:])


def _finish(problems: list[str], raise_on_error: bool) -> list[str]:
    if problems and raise_on_error:
        raise ProtocolError("protocol check failed:\n- " + "\n- ".join(problems))
    return problems
