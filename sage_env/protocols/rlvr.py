"""Plain RLVR: the solver alone on the seed tasks, no self-play (protocol ``"rlvr"``).

The reference point for every self-play protocol: ``solver_0`` answers a seed task ``k``
times and each answer earns ``w_s s_gt + w_f f`` with the SAGE solver's weights for the no-plan
case (``RewardConfig.solver_weights``, renormalised when
``solver_plan_term_when_gated="renormalise"``). The pool never grows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sage_env import rewards
from sage_env.protocols.base import Protocol
from sage_env.protocols.registry import register_protocol
from sage_env.text import prompts

if TYPE_CHECKING:
    from sage_env.protocols.api import ProtocolEnv


@register_protocol("rlvr")
class RLVRProtocol(Protocol):
    """Solver-only training on the seeds with verifier rewards."""

    name = "rlvr"
    agents = ("solver_0",)

    def start(self, env: ProtocolEnv) -> None:
        """Draw a seed task for the solver."""
        self.task = env.draw_reference()
        self.solves = 0
        env.select(
            "solver_0",
            "solve",
            self.task,
            prompts.solver(self.task),
            repeats=env.config.solver_samples,
        )

    def on_solve(self, env: ProtocolEnv, text: str) -> None:
        """Score one attempt; the round ends after k."""
        s_gt, f, verdict = env.verify(self.task, text)
        env.deliver(
            "solver_0", *rewards.solver_reward(None, s_gt, f, env.config.rewards), verdict=verdict
        )
        self.solves += 1
        if self.solves >= env.config.solver_samples:
            env.finish()
