"""Games the environment can play: ``"sage"`` (default), ``"azr"``, ``"mae"``, or your own.

Built in: ``"sage"``, ``"azr"`` (AZR on execution tasks), ``"azr-qa"`` (AZR's reward on
math/code questions), ``"mae"``, ``"rlvr"``.

A new protocol is a :class:`Protocol` subclass registered under a name; nothing in the
library changes for it::

    from sage_env.protocols import Protocol, register_protocol

    class Echo(Protocol):
        name = "echo"
        agents = ("solver_0",)
        def start(self, env):
            env.select("solver_0", "solve", env.draw_reference(), {"system": "", "user": "?"})
        def on_solve(self, env, text):
            env.deliver("solver_0", 1.0, {"const": 1.0})
            env.finish()

    register_protocol("echo", Echo)      # or an entry point in group "sage_env.protocols"
    sage_env.check_protocol("echo")          # lists what is wrong, raises if anything is
    env = sage_env.env(protocol="echo")

A protocol with settings of its own declares their dataclass as ``config_cls``;
``EnvConfig.protocol_config`` then holds an instance (see :attr:`Protocol.config_cls`).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from importlib.metadata import entry_points

from sage_env.protocols.azr import AZRConfig, AZRProtocol, learnability_reward
from sage_env.protocols.azr_qa import AZRQAConfig, AZRQAProtocol
from sage_env.protocols.base import CODE_PREFIX, DEFAULT_PREFIXES, Protocol, propose, public
from sage_env.protocols.mae import MAEConfig, MAEProtocol
from sage_env.protocols.rlvr import RLVRProtocol
from sage_env.protocols.sage import SAGEProtocol

_REGISTRY: dict[str, Callable[[], Protocol]] = {}


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
    if isinstance(spec, Protocol):
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
    if isinstance(spec, Protocol):
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


for _cls in (SAGEProtocol, AZRProtocol, AZRQAProtocol, MAEProtocol, RLVRProtocol):
    register_protocol(_cls.name, _cls)

__all__ = [
    "AZRConfig",
    "AZRProtocol",
    "AZRQAConfig",
    "AZRQAProtocol",
    "CODE_PREFIX",
    "DEFAULT_PREFIXES",
    "MAEConfig",
    "MAEProtocol",
    "Protocol",
    "RLVRProtocol",
    "SAGEProtocol",
    "available_protocols",
    "learnability_reward",
    "make_protocol",
    "propose",
    "protocol_config_cls",
    "public",
    "register_protocol",
]
