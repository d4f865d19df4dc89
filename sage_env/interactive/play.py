"""Step one SAGE round turn by turn, for debugging a reward (``sage-env play``).

Each agent is played by a *player*: a callable ``(agent, observation, info, env) -> str``.
This module ships text-only players (a human typing at the terminal, a scripted player that
writes well-formed answers, an oracle that answers with the gold answer); ``learners`` adds a
model player. After every step the round so far is printed with every parsed field, verifier
verdict, gate and reward term (the ``"human"`` render mode). A round can be saved as JSON and
re-scored later with :func:`replay`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pettingzoo import AECEnv

from sage_env.config import EnvConfig
from sage_env.protocols import scripted
from sage_env.tasks.task import Task

Player = Callable[[str, dict, dict, AECEnv], str]
PLAN = scripted.PLAN


@dataclass
class RoundRecord:
    """One played round: the seed, the config and every action, in order; plus the rewards.

    ``actions`` items are ``{"agent", "phase", "action"}`` (a replay adds ``"filled": True``
    to a turn the saved round lacked); ``rewards`` items are ``{"agent", "phase", "reward",
    "terms"}`` in the order the actions were credited.
    """

    seed: int
    config: dict
    actions: list[dict] = field(default_factory=list)
    rewards: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What a :func:`replay` changed: saved actions skipped, turns the saved round lacked."""

    def save(self, path: str | os.PathLike) -> None:
        """Write the record as JSON (UTF-8)."""
        Path(path).write_text(
            json.dumps(asdict(self), ensure_ascii=False, indent=1), encoding="utf-8"
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> RoundRecord:
        """Read a record written by :meth:`save`.

        Raises:
            ValueError: if the file is not a saved round.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(
                seed=int(data["seed"]),
                config=dict(data["config"]),
                actions=list(data["actions"]),
                rewards=list(data.get("rewards", [])),
                notes=[str(n) for n in data.get("notes", [])],
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path} is not a saved round: {exc}") from exc


class PlayStopped(Exception):
    """The round stopped before its end: a human player's input ended (EOF).

    Attributes:
        record: The :class:`RoundRecord` of the turns played so far (set by :func:`play`).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.record: RoundRecord | None = None


def human_player(agent: str, obs: dict, info: dict, env: AECEnv) -> str:
    """Show the observation, then read the reply from stdin (end it with a line ``.``, or EOF).

    The reply starts with the observation's ``prefix`` (printed last, as the start of the
    reply): type the rest. The action is prefix + what was typed. With stdin piped (not a
    terminal) the prefix is printed on a line of its own, so that what follows does not run
    into it.

    Raises:
        PlayStopped: when stdin ends before anything was typed for this turn (the round
            cannot go on without an action; an empty reply is a line ``.`` alone).
    """
    prefix = obs.get("prefix", "") or ""
    print(
        f"\n>>> {agent} [{info.get('phase')}] on {info.get('task_id')} ({info.get('domain')})\n"
        f"--- system ---\n{obs.get('system', '')}\n--- user ---\n{obs.get('user', '')}\n"
        "--- your reply (type the rest; end with a line '.') ---",
        flush=True,
    )
    interactive = sys.stdin.isatty()
    if prefix:  # a terminal echoes the typed rest after it; piped input echoes nothing
        print(prefix, end="" if interactive else "\n", flush=True)
    lines = []
    ended = False
    for line in sys.stdin:
        if line.rstrip("\n") == ".":
            ended = True
            break
        lines.append(line)
    if not ended and not lines:
        raise PlayStopped(
            f"stdin ended before {agent} [{info.get('phase')}] replied: the round stops here "
            "(end every reply with a line '.'; a line '.' alone is an empty reply)"
        )
    return prefix + "".join(lines).rstrip("\n")


def _scripted(env: AECEnv, obs: dict, info: dict) -> tuple[str | None, list[str], Task | None]:
    protocol = env.unwrapped.protocol
    task: Task | None = getattr(env.unwrapped, "current_task", None)
    phase = info.get("phase")
    return (
        protocol.phase_kind(phase, obs),
        protocol.scripted_actions(phase, obs, task),
        task,
    )


def scripted_player(agent: str, obs: dict, info: dict, env: AECEnv) -> str:
    """Write well-formed (not necessarily correct) output for every phase.

    The first of the protocol's :meth:`~sage_env.protocols.Protocol.scripted_actions` (a
    valid proposal, a passing review, a plan), but a wrong answer in solve-kind phases: the
    protocol's own well-formed wrong reply when it lists one after the right one (an
    ```` ```output ```` block on an execution task), else :func:`scripted.wrong_answer`.
    """
    kind, actions, task = _scripted(env, obs, info)
    if kind == "solve":
        return actions[1] if len(actions) > 1 else scripted.wrong_answer(task)
    if not actions:
        return scripted.wrong_answer(task)
    return actions[0]


def oracle_player(agent: str, obs: dict, info: dict, env: AECEnv) -> str:
    r"""Like :func:`scripted_player`, but the solver answers with the gold answer.

    Math gets ``\boxed{answer}``, code the task's reference solution, so that a correct
    solve can be checked end to end.
    """
    _, actions, task = _scripted(env, obs, info)
    return actions[0] if actions else scripted.wrong_answer(task)


PLAYERS: dict[str, Player] = {
    "human": human_player,
    "scripted": scripted_player,
    "oracle": oracle_player,
}
"""Built-in players by name."""


def play(env: AECEnv, players: dict[str, Player], seed: int = 0) -> RoundRecord:
    """Play one round of ``env`` with one player per agent; return its record.

    Args:
        env: A ``sage_env`` environment (``render_mode="human"`` prints as it goes).
        players: ``{agent_id: player}``; every agent of the env needs one.
        seed: Reset seed.

    Raises:
        KeyError: if an agent has no player.
        PlayStopped: if a player stops the round (a human player's input ended); its
            ``record`` holds the turns played so far.
    """
    config = asdict(getattr(env.unwrapped, "config", EnvConfig()))
    record = RoundRecord(seed=seed, config=config)
    env.reset(seed=seed)
    try:
        for agent in env.agent_iter():
            obs, reward, term, trunc, info = env.last()
            _credit(record, agent, reward, info)
            if term or trunc:
                env.step(None)
                continue
            action = players[agent](agent, obs, info, env)
            record.actions.append({"agent": agent, "phase": info["phase"], "action": action})
            env.step(action)
            if env.unwrapped.render_mode == "human":
                env.render()
    except PlayStopped as exc:
        exc.record = record
        raise
    return record


def replay(env: AECEnv, record: RoundRecord) -> RoundRecord:
    """Re-score the actions of a saved round on ``env`` (same seed, same actions).

    Each turn gets the next saved action of the same agent and phase. When the new config
    changes the turn order (a gate now decides differently, k changed), the round is still
    played to its end and re-scored: saved actions the round no longer asks for are skipped,
    and a turn the saved round lacks is played by the scripted player (marked ``"filled"``
    in ``actions``). Every such change is listed in the returned record's ``notes`` (and by
    :func:`summary`).
    """
    queue = list(record.actions)
    notes: list[str] = []
    turns: list[bool] = []  # per action played: filled by the scripted player?

    def from_record(agent: str, obs: dict, info: dict, env: AECEnv) -> str:
        phase = info.get("phase")
        turns.append(False)
        for i, item in enumerate(queue):
            if item["agent"] == agent and item["phase"] == phase:
                for skipped in queue[:i]:
                    notes.append(
                        f"skipped the saved {skipped['agent']} [{skipped['phase']}] action: "
                        f"the round now goes from there to {agent} [{phase}]"
                    )
                del queue[: i + 1]
                return item["action"]
        notes.append(
            f"{agent} [{phase}]: the saved round has no action for this turn (the new "
            "config asks for it); the scripted player filled it"
        )
        turns[-1] = True
        return scripted_player(agent, obs, info, env)

    players = {a: from_record for a in env.possible_agents}
    out = play(env, players, seed=record.seed)
    for item in queue:
        notes.append(
            f"skipped the saved {item['agent']} [{item['phase']}] action: the round ended before it"
        )
    for item, filled in zip(out.actions, turns):
        if filled:
            item["filled"] = True
    out.notes = notes
    return out


def _credit(record: RoundRecord, agent: str, reward: float, info: dict) -> None:
    last = info.get("last")
    acted = sum(1 for a in record.actions if a["agent"] == agent)
    credited = sum(1 for r in record.rewards if r["agent"] == agent)
    if acted > credited:
        record.rewards.append(
            {
                "agent": agent,
                "phase": last.phase if last is not None else None,
                "reward": reward,
                "terms": last.terms if last is not None else {},
            }
        )


def summary(record: RoundRecord) -> str:
    """A table of every credited action: agent, phase, reward and its terms.

    A replayed round's :attr:`RoundRecord.notes` (turns skipped or filled) follow it.
    """
    lines = [f"{'agent':<14} {'phase':<16} {'reward':>7}  terms"]
    for r in record.rewards:
        lines.append(
            f"{r['agent']:<14} {str(r['phase']):<16} {r['reward']:>7.4f}  {_fmt_terms(r['terms'])}"
        )
    if record.notes:
        lines.append("replay: the turn order changed under this config:")
        lines.extend(f"  - {note}" for note in record.notes)
    return "\n".join(lines)


def _fmt_terms(terms: dict[str, Any]) -> str:
    return ", ".join(f"{k}={'-' if v is None else round(v, 4)}" for k, v in terms.items())
