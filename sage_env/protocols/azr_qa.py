"""AZR's learnability reward on SAGE's question/answer tasks (protocol ``"azr-qa"``).

This was protocol ``"azr"`` before execution tasks existed; ``"azr"`` is now AZR as its
paper defines it (:mod:`sage_env.protocols.azr`: deduction, abduction, induction, ground
truth from the executor). ``"azr-qa"`` keeps the older game for comparison: the same
Proposer/Solver round and learnability reward, on math and code tasks whose verifier the
proposer writes (a math answer is then the proposer's claim).

1. ``proposer_0`` reads a seed task and proposes a new task with its verifier (same format as
   the SAGE challenger);
2. ``solver_0`` attempts the proposed task ``k`` times (when the proposal is invalid, a task
   drawn from the pool instead, so the solver always trains);
3. the proposer gets the *learnability* reward of AZR Eq. 4: ``1 - acc`` when
   ``0 < acc < 1``, else 0, with ``acc`` the solver's mean verifier score on its task; the
   solver gets its verifier score ``s_gt``.

A valid proposal joins the pool (AZR's task buffer) once at least one of the k attempts
has solved it: the answer is the proposer's claim, so a task that no attempt solves may be
wrong (learnability pays it 0 too; ``docs/reference/rewards.md``, "Difficulty rule").

AZR's reference code additionally maps some zero rewards to -0.5 / -1 format penalties;
this protocol follows the paper's formula, with format penalties off (rewards stay in
[0, 1]) unless ``AZRConfig.format_penalty`` is set (``EnvConfig.protocol_config``): then an
invalid proposal gets -1 and an unformatted answer -1, a formatted wrong answer -0.5
(AZR Eq. 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sage_env.protocols.base import Protocol, propose, public
from sage_env.protocols.registry import register_protocol
from sage_env.rewards import learnability_reward, solved_by_any
from sage_env.text import prompts

if TYPE_CHECKING:
    from sage_env.protocols.api import ProtocolEnv


@dataclass
class AZRQAConfig:
    """Settings of protocol ``"azr-qa"``.

    ``EnvConfig.protocol_config``; flags ``--env.protocol-config.*`` after
    ``--protocol azr-qa``.
    """

    format_penalty: bool = False
    """Use AZR Eq. 6 penalties (-1 for an invalid proposal or an unformatted answer, -0.5 for a
    formatted wrong answer) instead of 0; rewards then leave [0, 1]. Formerly
    ``RewardConfig.azr_format_penalty``."""


@register_protocol("azr-qa")
class AZRQAProtocol(Protocol):
    """Proposer/solver self-play with the learnability reward on math/code questions."""

    name = "azr-qa"
    agents = ("proposer_0", "solver_0")
    config_cls = AZRQAConfig

    def start(self, env: ProtocolEnv) -> None:
        """Draw a seed task and give the turn to the proposer."""
        self.reference = env.draw_reference()
        self.proposal = None
        self.check = None
        self.task = None
        self.scores: list[float] = []
        env.select(
            "proposer_0",
            "propose",
            self.reference,
            prompts.challenger(self.reference, env.config.math_grounding),
        )

    def on_propose(self, env: ProtocolEnv, text: str) -> None:
        """Vet the proposal; the solver attempts it (or a pool task when invalid)."""
        self.proposal, candidate, self.check = propose(env, text, self.reference)
        if candidate is None:
            penalty = -1.0 if env.config.protocol_config.format_penalty else 0.0
            env.deliver(
                "proposer_0",
                penalty,
                {"acc": None, "valid": False},
                parsed=public(self.proposal),
                verifier_check=self.check,
            )
            self.task = env.pool.sample(env.rng)
        else:  # it joins the pool once an attempt has solved it (on_solve)
            self.task = candidate
        self.scores = []
        env.select(
            "solver_0",
            "solve",
            self.task,
            prompts.solver(self.task),
            repeats=env.config.solver_samples,
        )

    def on_solve(self, env: ProtocolEnv, text: str) -> None:
        """One attempt; after k, credit the proposer with the learnability reward."""
        s_gt, f, verdict = env.verify(self.task, text)
        self.scores.append(s_gt)
        reward = s_gt
        if env.config.protocol_config.format_penalty and s_gt == 0.0:
            reward = -0.5 if f > 0 else -1.0
        env.deliver("solver_0", reward, {"s_gt": s_gt, "f": f}, verdict=verdict)
        if len(self.scores) < env.config.solver_samples:
            return
        if self.proposal is not None and self.proposal.valid:
            acc = sum(self.scores) / len(self.scores)
            self.task.meta.update({"acc": acc, "scores": list(self.scores)})
            solved = solved_by_any(self.scores)  # a partial pass is no evidence
            if solved:
                pooled = {"added_to_pool": env.pool.add(self.task)}
            else:
                pooled = {
                    "added_to_pool": False,
                    "gate": "no attempt solved it in full: no evidence that its stored answer "
                    "or tests are right: not pooled, reward 0",
                }
            env.deliver(
                "proposer_0",
                learnability_reward(acc) if solved else 0.0,
                {"acc": acc, "valid": True},
                parsed=public(self.proposal),
                verifier_check=self.check,
                new_task_id=self.task.task_id,
                **pooled,
            )
        env.finish()
