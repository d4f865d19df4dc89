"""How :class:`sage_env.env.raw_env` builds its configuration and task pool from values.

Plain functions of what they read: keyword overrides of an
:class:`~sage_env.config.EnvConfig` (:func:`apply_overrides`), binding a protocol's own
config (:func:`bind_protocol_config`) and a task pool with the config's pool settings
(:func:`make_pool`, also what a training run builds its shared pool with).
"""

from __future__ import annotations

import copy
from dataclasses import fields, replace

from sage_env.config import EnvConfig, RewardConfig, build_protocol_config
from sage_env.protocols import Protocol, protocol_config_cls
from sage_env.tasks.pool import TaskPool
from sage_env.tasks.task import Task


def apply_overrides(config: EnvConfig, overrides: dict) -> EnvConfig:
    """``config`` with keyword overrides of its fields or its reward fields.

    A new ``protocol`` resets ``protocol_config`` to that protocol's defaults unless it is
    given too.

    Raises:
        TypeError: on a name that is neither a field of ``EnvConfig`` nor of ``RewardConfig``.
    """
    env_keys = {f.name for f in fields(EnvConfig)}
    reward_keys = {f.name for f in fields(RewardConfig)}
    env_kw = {k: v for k, v in overrides.items() if k in env_keys}
    rew_kw = {k: v for k, v in overrides.items() if k in reward_keys}
    unknown = set(overrides) - env_keys - reward_keys
    if unknown:
        raise TypeError(f"unknown EnvConfig option(s): {sorted(unknown)}")
    protocol = env_kw.get("protocol", config.protocol)
    if protocol != config.protocol and "protocol_config" not in env_kw:
        env_kw["protocol_config"] = None
    config = replace(config, **env_kw)
    if rew_kw:
        config = replace(config, rewards=replace(config.rewards, **rew_kw))
    return config


def bind_protocol_config(config: EnvConfig, protocol: Protocol) -> EnvConfig:
    """``config`` whose ``protocol_config`` is an instance of ``protocol``'s ``config_cls``.

    Needed when a protocol instance overrides ``config.protocol``, or the protocol was
    registered after the config was built.

    Raises:
        ValueError: if ``config.protocol_config`` does not fit (see
            :func:`~sage_env.config.build_protocol_config`).
        TypeError: if the protocol's ``config_cls`` is not a dataclass.
    """
    value = build_protocol_config(
        protocol_config_cls(protocol), config.protocol_config, protocol.name
    )
    if value is config.protocol_config:
        return config
    config = copy.copy(config)  # not replace(): config.protocol may name another protocol
    config.protocol_config = value
    return config


def make_pool(config: EnvConfig, tasks: list[Task]) -> TaskPool:
    """A :class:`TaskPool` holding ``tasks`` with the pool settings of ``config``."""
    return TaskPool(
        tasks,
        near_duplicate_threshold=config.pool_near_duplicate_threshold,
        max_generated=config.pool_max_generated,
        frozen=config.pool_admission == "frozen",
    )
