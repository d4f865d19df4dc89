"""``sage-env play``: step one round turn by turn and see every reward term (text only: no
torch unless a ``model`` player is asked for)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Generic

from learners.commands import register_command
from learners.commands.common import import_plugins, preparser
from learners.policy.loading import DEFAULT_MODEL
from sage_env.config import EnvConfig, ProtocolConfigT


@dataclass
class PlayConfig(Generic[ProtocolConfigT]):
    """Options of ``sage-env play`` (``PlayConfig[AZRConfig]``: ``env.protocol_config`` type)."""

    seed: int = 0
    """Reset seed of the round (picks the reference and pool tasks)."""
    players: str = "scripted"
    """Who plays: one kind for all agents, or ``role=kind`` pairs separated by commas, e.g.
    ``challenger=human,solver=oracle`` (others scripted). Kinds: human (type the action,
    end with a line '.'), scripted (well-formed answers), oracle (scripted, but the solver
    gives the gold answer), model (the --model policy)."""
    model: str = DEFAULT_MODEL
    """Model for ``model`` players (alias, hub id or path)."""
    max_new_tokens: int = 256
    """Completion budget of ``model`` players."""
    replay: str | None = None
    """Re-score a round saved with --save: same seed, actions and environment config as when
    it was saved (``--env.*`` flags given explicitly override the saved config)."""
    save: str | None = None
    """Write the played round as JSON, for --replay."""
    env: EnvConfig[ProtocolConfigT] = field(default_factory=EnvConfig)
    """Environment configuration (gates, reward weights, k; the protocol's own settings in
    ``env.protocol_config``, flags ``--env.protocol-config.*`` after ``--protocol NAME``)."""


def _players(spec: str, cfg: PlayConfig, agents: list[str] | None = None) -> dict:
    from sage_env.interactive.play import PLAYERS
    from sage_env.protocols import make_protocol

    agents = list(agents or make_protocol(cfg.env.protocol).agents)
    kinds = dict.fromkeys(agents, "scripted")
    if "=" not in spec:
        kinds = dict.fromkeys(agents, spec.strip())
    else:
        for pair in spec.split(","):
            role, _, kind = pair.partition("=")
            agent = role.strip() if role.strip().endswith("_0") else f"{role.strip()}_0"
            if agent not in kinds:
                roles = ", ".join(a.rsplit("_", 1)[0] for a in agents)
                raise ValueError(
                    f"unknown role {role!r} for protocol {cfg.env.protocol!r}; roles: {roles}"
                )
            kinds[agent] = kind.strip()
    players = {}
    model_player = None
    for agent, kind in kinds.items():
        if kind == "model":
            if model_player is None:
                model_player = _model_player(cfg)
            players[agent] = model_player
        elif kind in PLAYERS:
            players[agent] = PLAYERS[kind]
        else:
            raise ValueError(f"unknown player kind {kind!r}; kinds: {sorted(PLAYERS)} + model")
    return players


def _model_player(cfg: PlayConfig):
    from learners.policy import HFPolicy, SamplingConfig

    policy = HFPolicy(cfg.model, seed=cfg.seed)
    sampling = SamplingConfig(max_new_tokens=cfg.max_new_tokens, do_sample=False)

    def player(agent, obs, info, env):
        return policy.generate([obs], sampling)[0].action  # prefix + completion

    return player


@register_command(
    "play",
    summary="step one round turn by turn and see every reward term (sage-env play --help)",
)
def play_command(argv: list[str]) -> int:
    import tyro

    import sage_env
    from learners.training.tyro_types import protocol_config_type
    from sage_env.interactive.play import PlayStopped, RoundRecord, play, replay, summary

    known, argv = preparser().parse_known_args(argv)
    if not import_plugins(known.imports, "play"):
        return 2
    peek = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    peek.add_argument("--replay", default=None)
    saved = None
    try:
        replay_path = peek.parse_known_args(argv)[0].replay
        if replay_path:
            # the saved config is the default; --env.* flags given now override it
            saved = RoundRecord.load(replay_path)
            env_default = _saved_env_config(saved.config, known.protocol)
        else:
            env_default = EnvConfig().with_protocol(known.protocol or "sage")
        play_type = PlayConfig[protocol_config_type(env_default.protocol)]
    except (OSError, ValueError) as exc:
        print(f"sage-env play: error: {exc}", file=sys.stderr)
        return 2
    cfg = tyro.cli(
        play_type,
        default=PlayConfig(env=env_default),
        args=argv,
        prog="sage-env play",
        description="Step one SAGE round turn by turn; prints every observation, "
        "action, parsed field, verifier verdict, gate and reward term. Also accepts "
        "--import MODULE (repeatable: a module that registers a protocol) and --protocol "
        "NAME (read first: the --env.protocol-config.* flags are that protocol's settings).",
    )
    env = None
    try:
        env = sage_env.env(cfg.env, render_mode="human")
        if saved is not None:
            record = replay(env, saved)
        else:
            record = play(env, _players(cfg.players, cfg, env.possible_agents), seed=cfg.seed)
    except PlayStopped as exc:  # a human player's stdin ended: show what was played
        if exc.record is not None and exc.record.rewards:
            print("\n" + summary(exc.record))
        print(f"sage-env play: stopped: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"sage-env play: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if env is not None:
            env.close()
    print("\n" + summary(record))
    if cfg.save:
        record.save(cfg.save)
        print(f"saved to {cfg.save}")
    return 0


def _saved_env_config(saved: dict, protocol: str | None = None) -> EnvConfig:
    """The EnvConfig saved with a round (keys this version does not know are ignored).

    Reward fields saved under their old names move to ``protocol_config``
    (:func:`learners.training.config.config_from_dict`); ``protocol``, when given, replaces the
    saved protocol (its settings then take their defaults).

    Raises:
        ValueError: if a saved value does not fit its field.
    """
    from learners.training.config import config_from_dict

    known = {f.name for f in dataclasses.fields(EnvConfig)}
    env = {k: v for k, v in saved.items() if k in known}
    if protocol and protocol != env.get("protocol"):
        env.pop("protocol_config", None)
    return config_from_dict({"env": env}, protocol=protocol).env
