"""The registry of protocols by name: register, discover (entry points), build.

Each built-in protocol registers itself with ``@register_protocol(name)`` above its class
(``sage_env.protocols.sage``, ``azr``, ``azr_qa``, ``mae``, ``rlvr``); :data:`PROTOCOLS`
imports those modules on the first lookup (a :class:`sage_env.registry.Registry`). This module
imports no protocol, so :mod:`sage_env.config` can look a protocol's settings class up
without an import cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sage_env.registry import Registry

Protocol = Any
"""A :class:`sage_env.protocols.base.Protocol` (not imported: this module stays a leaf)."""

PROTOCOL_GROUP = "sage_env.protocols"
"""Entry-point group searched for protocols of installed packages:
``name = "module:ProtocolClass"`` (or a module that registers its protocols on import)."""

PROTOCOLS: Registry[Callable[[], Protocol]] = Registry(
    "protocol",
    builtins=(
        "sage_env.protocols.sage",
        "sage_env.protocols.azr",
        "sage_env.protocols.azr_qa",
        "sage_env.protocols.mae",
        "sage_env.protocols.rlvr",
    ),
    group=PROTOCOL_GROUP,
)
"""Protocol name (``EnvConfig.protocol``) -> factory (usually the class)."""


def register_protocol(
    name: str, factory: Callable[[], Protocol] | None = None, overwrite: bool = False
) -> Any:
    """Make ``factory()`` available as ``EnvConfig(protocol=name)``.

    As a decorator above the class, ``@register_protocol("echo")``; as a plain call,
    ``register_protocol("echo", Echo)``.

    Returns:
        ``factory`` (or, without it, a decorator that registers and returns its class).

    Raises:
        ValueError: if ``name`` is taken and ``overwrite`` is False.
    """
    return PROTOCOLS.register(name, factory, overwrite=overwrite)


def available_protocols() -> list[str]:
    """Registered protocol names (built-ins, entry points of ``sage_env.protocols``), sorted."""
    return sorted(PROTOCOLS.names())


def make_protocol(spec: str | Protocol) -> Protocol:
    """A fresh protocol instance for a registered name (or ``spec`` itself if an instance).

    Raises:
        ValueError: on an unknown name (the message lists the registered ones).
    """
    if not isinstance(spec, str):  # already a protocol instance
        return spec
    return PROTOCOLS.get(spec)()


def protocol_config_cls(spec: str | Protocol) -> type | None:
    """The settings dataclass (:attr:`Protocol.config_cls`) of a registered protocol or instance.

    Reads the attribute of a registered class without instantiating it; a registered factory
    function is called once.

    Returns:
        The dataclass, or ``None`` when the protocol has no settings of its own.

    Raises:
        ValueError: on an unknown name (as :func:`make_protocol`).
        TypeError: if ``config_cls`` is neither ``None`` nor a dataclass.
    """
    if not isinstance(spec, str):  # a protocol instance
        cls, name = getattr(spec, "config_cls", None), spec.name
    else:
        factory = PROTOCOLS.get(spec)
        owner = factory if isinstance(factory, type) else factory()
        cls, name = getattr(owner, "config_cls", None), spec
    if cls is not None and not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"protocol {name!r}: config_cls must be a dataclass or None, got {cls!r}")
    return cls
