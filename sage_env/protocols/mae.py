"""An MAE-style round (Multi-Agent Evolve, arXiv 2510.23595): Proposer, Solver, Judge.

1. ``proposer_0`` reads a seed task and proposes a new task (same format as the SAGE
   challenger; on an execution task, a program and an input as AZR's proposer does, the
   outputs computed by the sandboxed executor, :func:`~sage_env.protocols.azr.vet_exec_challenge`);
2. ``judge_0`` scores the question (q, 1-10 -> [0, 1]); when ``q >= alpha`` it is accepted;
3. ``solver_0`` answers the accepted question ``k`` times (otherwise a task drawn from the
   pool), and after each answer ``judge_0`` scores it (j in [0, 1]); then the accepted
   question joins the pool.

Rewards: proposer ``(q + d + f) / 3`` with ``d = difficulty(mean(j))`` under
``RewardConfig.difficulty_rule`` (the SAGE challenger formula with the judge in place of the
verifier; d dropped when rejected, as ``difficulty_when_gated`` says). The paper's MAE rule is
``"inverse_accuracy"``, ``d = 1 - mean(j)``; under the default ``"learnability"`` a math or
code task whose every answer the judge scores 0 earns d = 0 and stays out of the pool
(an execution task keeps ``1 - mean(j)``). The evidence is the judge's, not a verifier's:
the judge never sees the stored answer, so a wrong stored answer does not change MAE's
rewards; solver ``w_j j + w_f f`` (``MAEConfig.solver_weights`` in
``EnvConfig.protocol_config``, default 0.8, 0.2); judge: its format score. The external
verifier's score is still computed and reported in ``infos`` (``verdict``) so that judge
accuracy can be measured, but it is not rewarded: MAE learns without ground truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sage_env import rewards
from sage_env.protocols.azr import ExecChallenger, vet_exec_challenge
from sage_env.protocols.base import gate_estimate, propose, review, review_parts
from sage_env.protocols.registry import register_protocol
from sage_env.text import parsing, prompts

if TYPE_CHECKING:
    from sage_env.protocols.api import ProtocolEnv


@dataclass
class MAEConfig:
    """Settings of protocol ``"mae"``.

    ``EnvConfig.protocol_config``; flags ``--env.protocol-config.*`` after ``--protocol mae``.

    Raises:
        ValueError: if ``solver_weights`` is not two finite numbers.
    """

    solver_weights: tuple[float, float] = (0.8, 0.2)
    """Weights (w_j, w_f) of the solver reward ``w_j j + w_f f``, j the judge's normalised
    score of the answer, f its format score. Formerly ``RewardConfig.mae_solver_weights``."""

    def __post_init__(self) -> None:
        weights = tuple(self.solver_weights)
        if len(weights) != 2 or not all(
            isinstance(w, (int, float)) and math.isfinite(w) for w in weights
        ):
            raise ValueError(f"solver_weights must be two finite numbers, got {weights!r}")
        self.solver_weights = (float(weights[0]), float(weights[1]))


@register_protocol("mae")
class MAEProtocol(ExecChallenger):
    """Proposer/solver/judge without ground-truth rewards (protocol ``"mae"``)."""

    name = "mae"
    agents = ("proposer_0", "solver_0", "judge_0")
    config_cls = MAEConfig

    def start(self, env: ProtocolEnv) -> None:
        """Draw a seed task and give the turn to the proposer."""
        self.reference = env.draw_reference()
        self.proposal = None
        self.check = None
        self.task = None
        self.accepted = False
        self.judging = False  # the solver's answers only judge the task (frozen pool)
        self.q = 0.0
        self.answer = ""
        self.answer_format = 0.0
        self.answer_verdict: dict = {}
        self.judged: list[float] = []
        self.exec_parsed: dict | None = None
        env.select("proposer_0", "propose", self.reference, self._proposer_observation(env))

    def on_propose(self, env: ProtocolEnv, text: str) -> None:
        """Vet the proposal; send it to the judge or skip to solving a pool task.

        On an execution task the executor computes the new task's outputs, and the judge
        reads the question without a verifier (the ground truth is the executor's).
        """
        if self.reference.domain == "exec":
            self.exec_parsed, self.check, candidate, f = vet_exec_challenge(
                env, text, self.reference, self.exec_refs, self.name
            )
        else:
            self.proposal, candidate, self.check = propose(env, text, self.reference)
            f = self.proposal.format_score
        if candidate is None:
            f = env.soft(f, 0.0)
            env.deliver(
                "proposer_0",
                *rewards.challenger_reward(0.0, None, f, env.config.rewards),
                parsed=self._parsed(),
                accepted=False,
                verifier_check=self.check,
            )
            self._start_solve(env, env.pool.sample(env.rng))
            return
        self.task = candidate
        env.select(
            "judge_0",
            "judge_question",
            candidate,
            prompts.critic_question(
                candidate.prompt,
                candidate.domain,
                prompts.verifier_text(candidate)
                if env.config.critic_sees_verifier and candidate.domain != "exec"
                else None,
            ),
        )

    def on_judge_question(self, env: ProtocolEnv, text: str) -> None:
        """Score the question; accepted questions join the pool and are solved."""
        cfg = env.config.rewards
        self.q = review(env, "judge_0", text, "question", "q")
        domain = self.task.domain if self.task is not None else None
        self.accepted = rewards.quality_gate(self.q, cfg, domain)
        if self.accepted:  # it joins the pool once its answers are judged
            self.judging = env.pool.frozen  # frozen pool: these answers only judge the task
            self._start_solve(env, self.task)
            return
        env.deliver(
            "proposer_0",
            *rewards.challenger_reward(self.q, None, 1.0, cfg),
            parsed=self._parsed(),
            verifier_check=self.check,
            accepted=False,
            gate=f"q={self.q:.3f} < alpha={rewards.gate_alpha(cfg, domain):.3f}: rejected",
        )
        self._start_solve(env, env.pool.sample(env.rng))

    def _credit_proposer(self, env: ProtocolEnv) -> None:
        """Pay the proposer for an accepted task after its k judged answers; pool it.

        ``d = difficulty(mean j)`` under ``RewardConfig.difficulty_rule`` (``1 - mean j`` on an
        execution task). MAE has no verifier in its rewards: r is the judge's mean score, and
        under the evidence rules a math or code task whose every answer the judge scored 0
        earns d = 0 and stays out of the pool, as SAGE's unsolved question does.
        """
        cfg = env.config.rewards
        task = self.task
        d = rewards.task_difficulty(
            sum(self.judged) / len(self.judged), cfg.difficulty_rule, task.domain
        )
        task.meta.update({"q": self.q, "d": d, "judge_scores": list(self.judged)})
        unsolved = max(self.judged) <= 0.0
        if unsolved and rewards.needs_solvability_evidence(cfg.difficulty_rule, task.domain):
            env.deliver(
                "proposer_0",
                *rewards.challenger_reward(self.q, d, 1.0, cfg),
                parsed=self._parsed(),
                verifier_check=self.check,
                accepted=False,
                added_to_pool=False,
                judge_scores=list(self.judged),
                gate=(
                    "the judge scored no answer above 0: no evidence that the task can be "
                    f"solved (difficulty_rule={cfg.difficulty_rule!r}): d = {d:g}, not pooled"
                ),
            )
            return
        added = env.pool.add(task)
        env.deliver(
            "proposer_0",
            *rewards.challenger_reward(self.q, d, 1.0, cfg),
            parsed=self._parsed(),
            verifier_check=self.check,
            accepted=True,
            added_to_pool=added,
            new_task_id=task.task_id,
        )

    def _start_solve(self, env: ProtocolEnv, task) -> None:
        self.task = task
        self.judged = []
        env.select(
            "solver_0", "solve", task, prompts.solver(task), repeats=env.config.solver_samples
        )

    def on_solve(self, env: ProtocolEnv, text: str) -> None:
        """Record the answer (and the verifier's view of it); the judge scores it next."""
        _, self.answer_format, self.answer_verdict = env.verify(self.task, text)
        self.answer = text.strip()[:4000]
        env.select(
            "judge_0", "judge_answer", self.task, prompts.judge_answer(self.task, self.answer)
        )

    def on_judge_answer(self, env: ProtocolEnv, text: str) -> None:
        """Score the answer; credit judge and solver; after k answers, the proposer."""
        raw, f, sampled = review_parts(env, text)
        j, details = gate_estimate(env, sampled)
        self.judged.append(j)
        env.deliver(
            "judge_0",
            *rewards.critic_reward(f),
            raw_score=raw,
            reason=parsing.critic_reply_reason(text),
            j=j,
            review="answer",
            verifier_agrees=(j >= 0.5) == (self.answer_verdict.get("score", 0) >= 1.0),
            **details,
        )
        wj, wf = env.config.protocol_config.solver_weights
        env.deliver(
            "solver_0",
            wj * j + wf * self.answer_format,
            {"j": j, "f": self.answer_format},
            verdict=self.answer_verdict,
            **({"train": False} if self.judging else {}),
        )
        if len(self.judged) < env.config.solver_samples:
            left = env.config.solver_samples - len(self.judged)
            env.select("solver_0", "solve", self.task, prompts.solver(self.task), repeats=left)
            return
        if self.accepted:
            self._credit_proposer(env)
            if self.judging:  # frozen pool: the solver trains on a seed
                self.accepted = self.judging = False
                self._start_solve(env, env.pool.sample(env.rng))
                return
        env.finish()
