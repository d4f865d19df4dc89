"""The registry of protocols by name: register, discover (entry points), build.

A leaf module: it imports no protocol (``sage_env.protocols`` registers the built-in ones
when imported, and importing this module runs that package first), so
:mod:`sage_env.config` can look a protocol's settings class up without an import cycle.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

Protocol = Any
"""A :class:`sage_env.protocols.base.Protocol` (not imported: this module stays a leaf)."""

_REGISTRY: dict[str, Callable[[], Protocol]] = {}
"""Protocol name -> factory (usually the class)."""


def register_protocol(name: str, factory: Callable[[], Protocol], overwrite: bool = False) -> None:
    """Make ``factory()`` available as ``EnvConfig(protocol=name)``.

    Raises:
        ValueError: if ``name`` is taken and ``overwrite`` is False.
    """
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"protocol {name!r} is already registered (pass overwrite=True)")
    _REGISTRY[name] = factory


PROTOCOL_GROUP = "sage_env.protocols"
"""Entry-point group searched for protocols of installed packages:
``name = "module:ProtocolClass"`` (or a module that registers its protocols on import)."""


def _discover() -> None:
    """Register the protocols of the ``sage_env.protocols`` entry points not yet known."""
    for ep in entry_points(group=PROTOCOL_GROUP):
        if ep.name in _REGISTRY:
            continue
        try:
            obj = ep.load()
        except Exception as exc:
            raise ImportError(
                f"entry point {ep.name} = {ep.value!r} ({PROTOCOL_GROUP}): {exc}"
            ) from exc
        if not isinstance(obj, types.ModuleType) and ep.name not in _REGISTRY:
            register_protocol(ep.name, obj)


def available_protocols() -> list[str]:
    """Registered protocol names, after loading the ``sage_env.protocols`` entry points."""
    _discover()
    return sorted(_REGISTRY)


def make_protocol(spec: str | Protocol) -> Protocol:
    """A fresh protocol instance for a registered name (or ``spec`` itself if an instance).

    Raises:
        ValueError: on an unknown name (the message lists the registered ones).
    """
    if not isinstance(spec, str):  # already a protocol instance
        return spec
    if spec not in _REGISTRY:
        _discover()
    factory = _REGISTRY.get(spec)
    if factory is None:
        raise ValueError(f"unknown protocol {spec!r}; registered: {available_protocols()}")
    return factory()


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
        if spec not in _REGISTRY:
            _discover()
        factory = _REGISTRY.get(spec)
        if factory is None:
            raise ValueError(f"unknown protocol {spec!r}; registered: {available_protocols()}")
        owner = factory if isinstance(factory, type) else factory()
        cls, name = getattr(owner, "config_cls", None), spec
    if cls is not None and not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"protocol {name!r}: config_cls must be a dataclass or None, got {cls!r}")
    return cls
