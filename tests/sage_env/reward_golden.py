"""Every reward and reward term of scripted rounds of every protocol, as a golden record.

``python -m tests.sage_env.reward_golden`` writes :data:`GOLDEN` from the code as it is; the
test ``test_rewards_match_golden.py`` plays the same rounds and compares exactly. Floats are
kept as ``repr`` strings, so a change in the last bit shows.

The rounds: every registered protocol, under a few configs that reach other reward paths
(execution tasks, interleaved turns, the expected critic score, program-grounded math) where
the protocol has them, each
played by three players (garbage; the protocol's scripted actions from their first reply;
from their second, so both sides of every gate run) on seeds 0 and 1 with
``solver_samples=2``. Each ``deliver`` is recorded (agent, phase, reward, terms), and so is
each reward an agent reads from ``env.last()`` at its next turn.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from sage_env.protocols.check import GARBAGE
from sage_env.protocols.registry import available_protocols, make_protocol
from tests.scripted import CODE_SEED, MATH_SEED

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "reward_golden.json"
"""Where the record lives (``tests/data/reward_golden.json``)."""

CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "exec": {"domains": ("math", "code", "exec")},
    "interleaved": {"turn_order": "interleaved"},
    "expected_score": {"critic_score_estimate": "expected"},
    "program": {"math_grounding": "program"},
}
"""Config overrides per case name."""
ONLY: dict[str, set[str]] = {
    "exec": {"sage", "mae", "rlvr", "azr-qa"},  # azr plays execution tasks by default
    "interleaved": {"sage"},
    "expected_score": {"sage", "mae"},
    "program": {"sage", "mae", "azr-qa"},
}
"""The protocols a case changes anything for (every protocol when not named)."""
SEEDS = (0, 1)
PLAYERS = ("garbage", "scripted0", "scripted1")


def _num(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else repr(value)
    return repr(value)


def _last_field(last: Any, name: str) -> Any:
    """``last.reward`` / ``last.terms`` whether the record is a dict or a typed outcome."""
    if hasattr(last, name) and not isinstance(last, dict):
        return getattr(last, name)
    return last[name]


def _player(kind: str):
    turns: Counter[str] = Counter()
    offset = 0 if kind == "scripted0" else 1

    def player(agent: str, obs: dict, info: dict, env) -> str:
        if kind == "garbage":
            return GARBAGE
        phase = info.get("phase")
        actions = env.protocol.scripted_actions(phase, obs, env.current_task)
        n = turns[phase]
        turns[phase] += 1
        if not actions:
            return GARBAGE
        return str(actions[(n + offset) % len(actions)])

    return player


def play(protocol: str, case: str, player_kind: str, seed: int) -> list[list[Any]]:
    """One round's record: ``["deliver", agent, phase, reward, terms]`` per credit and
    ``["read", agent, reward]`` per reward read at an agent's turn (both as ``repr``s)."""
    from sage_env.env import raw_env

    e = raw_env(
        protocol=protocol,
        seeds=[MATH_SEED, CODE_SEED],
        solver_samples=2,
        **CONFIGS[case],
    )
    record: list[list[Any]] = []
    original = e.deliver

    def recording_deliver(agent, reward, terms, **details):
        original(agent, reward, terms, **details)
        last = e.infos[agent]["last"]
        terms_now = _last_field(last, "terms")
        record.append(
            [
                "deliver",
                agent,
                e.infos[agent]["phase"],
                _num(_last_field(last, "reward")),
                {str(k): _num(v) for k, v in sorted(terms_now.items())},
            ]
        )

    e.deliver = recording_deliver
    player = _player(player_kind)
    try:
        e.reset(seed=seed)
        for _turn in range(200):
            agent = e.agent_selection
            record.append(["read", agent, _num(e.rewards[agent])])
            if e.terminations.get(agent) or e.truncations.get(agent):
                e.step(None)
                if not e.agents:
                    break
                continue
            e.step(player(agent, e.observe(agent), e.infos[agent], e))
    finally:
        e.close()
    return record


def builtin_protocols() -> list[str]:
    """The registered protocols that ``sage_env`` itself defines (tests register their own, such
    as ``echo_test``, in the same process; those are not in the record)."""
    return [
        p for p in available_protocols() if type(make_protocol(p)).__module__.startswith("sage_env.")
    ]


def cases() -> list[tuple[str, str, str, int]]:
    """Every (protocol, config case, player, seed) the record holds."""
    return [
        (p, c, k, s)
        for p in builtin_protocols()
        for c in CONFIGS
        if p in ONLY.get(c, {p})
        for k in PLAYERS
        for s in SEEDS
    ]


def key(protocol: str, case: str, player_kind: str, seed: int) -> str:
    """The record's key of one round."""
    return f"{protocol}/{case}/{player_kind}/{seed}"


def build() -> dict[str, list[list[Any]]]:
    """The record of every case, from the code as it is now."""
    return {key(*c): play(*c) for c in cases()}


if __name__ == "__main__":
    data = build()
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    n = sum(sum(r[0] == "deliver" for r in v) for v in data.values())
    print(f"wrote {GOLDEN}: {len(data)} rounds, {n} credits", file=sys.stderr)
