"""sage-env: the SAGE self-evolving loop (arXiv 2603.15255) as a PettingZoo AEC environment.

Text in, text out, rewards out: this package never imports torch or transformers.

>>> import sage_env
>>> env = sage_env.env(render_mode="ansi")
>>> env.reset(seed=0)
>>> for agent in env.agent_iter():
...     obs, reward, terminated, truncated, info = env.last()
...     env.step(None if terminated or truncated else "my answer")

An action is one ``str``; a critic's reply may be a :class:`ScoredReply` (still a ``str``)
carrying the policy's score distribution (``docs/guide/environment.md``, "Action").
"""

from sage_env.config import EnvConfig, RewardConfig
from sage_env.env import AGENTS, AnyText, env, raw_env
from sage_env.outcome import Decision, Outcome, Parse, Review
from sage_env.protocols import Protocol, available_protocols, register_protocol
from sage_env.protocols.check import ProtocolError, check_protocol
from sage_env.tasks.pool import TaskPool
from sage_env.tasks.task import Task, load_seeds, load_validation
from sage_env.text.parsing import ScoredReply

__all__ = [
    "Protocol",
    "ProtocolError",
    "available_protocols",
    "check_protocol",
    "register_protocol",
    "AGENTS",
    "AnyText",
    "Decision",
    "EnvConfig",
    "Outcome",
    "Parse",
    "Review",
    "RewardConfig",
    "ScoredReply",
    "Task",
    "TaskPool",
    "env",
    "load_seeds",
    "load_validation",
    "raw_env",
]
__version__ = "0.1.0"
