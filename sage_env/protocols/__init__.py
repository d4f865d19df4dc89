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

    register_protocol("echo", Echo)  # or @register_protocol("echo") above the class, or an
                                     # entry point in group "sage_env.protocols"
    sage_env.check_protocol("echo")          # lists what is wrong, raises if anything is
    env = sage_env.env(protocol="echo")

A protocol with settings of its own declares their dataclass as ``config_cls``;
``EnvConfig.protocol_config`` then holds an instance (see :attr:`Protocol.config_cls`).
"""

from __future__ import annotations

from sage_env.protocols.azr import AZRConfig, AZRProtocol, learnability_reward
from sage_env.protocols.azr_qa import AZRQAConfig, AZRQAProtocol
from sage_env.protocols.base import Protocol, propose, public
from sage_env.protocols.mae import MAEConfig, MAEProtocol
from sage_env.protocols.registry import (
    PROTOCOL_GROUP,
    PROTOCOLS,
    available_protocols,
    make_protocol,
    protocol_config_cls,
    register_protocol,
)
from sage_env.protocols.rlvr import RLVRProtocol
from sage_env.protocols.sage import SAGEProtocol
from sage_env.text.prompts import CODE_PREFIX, DEFAULT_PREFIXES

__all__ = [
    "AZRConfig",
    "AZRProtocol",
    "AZRQAConfig",
    "AZRQAProtocol",
    "CODE_PREFIX",
    "DEFAULT_PREFIXES",
    "MAEConfig",
    "MAEProtocol",
    "PROTOCOL_GROUP",
    "PROTOCOLS",
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
