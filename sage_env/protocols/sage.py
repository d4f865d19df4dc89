"""The SAGE round (arXiv 2603.15255): Challenger, Critic, Solver, Planner.

1. ``challenger_0`` reads a seed task and proposes a new task with its verifier;
2. ``critic_0`` scores the question (q); when ``q >= alpha`` the question is accepted,
3. ``solver_0`` attempts it ``k`` times to measure difficulty d, and it joins the pool;
4. ``planner_0`` writes a plan for a task drawn from the pool;
5. ``critic_0`` scores the plan (p), also a badly formatted one (its text is reviewed as is);
6. ``solver_0`` solves the pool task ``k`` times, seeing the plan when it parses and
   ``p > beta``.

On an execution task (``EnvConfig.domains`` holding ``"exec"``) the challenger proposes as
AZR's proposer does (a program and an input, or inputs for a buffer program, for the
reference task's mode; :func:`~sage_env.protocols.azr.vet_exec_proposal`) and the sandboxed
executor computes the outputs, so the new task's ground truth is never the challenger's
claim; critic, planner and solver then play as on any task.

With ``EnvConfig.turn_order = "interleaved"`` the task of step 4 is drawn when the round
starts and the two halves alternate: 1, 4, 2, 5, 3, 6 (each turn whose observation is fixed
already is announced with ``env.announce``, so a driver samples both halves together).

Steps 2-3 are skipped when the proposal does not parse or its verifier fails its check, and
step 3 when the question fails the quality gate. The challenger's difficulty term is
``d = difficulty(r)``, r the probes' mean verifier score, under
``RewardConfig.difficulty_rule``: by default AZR's learnability (``1 - r`` when
``0 < r < 1``, else 0), so a math or code question that no probe solves (whose stored answer
may simply be wrong) earns d = 0 and stays out of the pool; the paper's rule
(``"inverse_accuracy"``, ``d = 1 - r``) pays it d = 1 and pools it. An execution question,
whose truth the sandbox computes, earns ``1 - r`` and joins the pool under every rule. With
``pool_admission="solvable"`` any question that no probe solves stays out of the pool and
earns no difficulty term.
Rewards: ``docs/reference/rewards.md``; with ``critic_plan_grounding > 0`` the plan review is paid
after step 6, from how well ``p`` predicted the solver's mean verifier score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sage_env import rewards
from sage_env.protocols.azr import ExecChallenger, vet_exec_challenge
from sage_env.protocols.base import (
    gate_estimate,
    propose,
    review,
    review_parts,
)
from sage_env.protocols.registry import register_protocol
from sage_env.text import parsing, prompts

if TYPE_CHECKING:
    from sage_env.protocols.api import ProtocolEnv


@register_protocol("sage")
class SAGEProtocol(ExecChallenger):
    """The four-role SAGE game (default protocol ``"sage"``)."""

    name = "sage"
    agents = ("challenger_0", "planner_0", "solver_0", "critic_0")

    def start(self, env: ProtocolEnv) -> None:
        """Draw a seed task and give the turn to the challenger."""
        self.reference = env.draw_reference()
        self.proposal = None
        self.check = None
        self.new_task = None
        self.q = 0.0
        self.probe_scores: list[float] = []
        self.task = None
        self.plan = None
        self.plan_format = 0.0
        self.p = 0.0
        self.plan_shown = False
        self.plan_review: tuple[float | None, float, float] | None = None
        self.plan_review_details: dict = {}
        self.solve_scores: list[float] = []
        self.exec_parsed: dict | None = None
        self.wide = env.config.turn_order == "interleaved"
        self.review_obs: dict | None = None  # interleaved: the question review to come
        self.plan_review_obs: dict | None = None
        self.probing = False  # interleaved: the question passed the gate, probes to come
        env.select("challenger_0", "challenge", self.reference, self._proposer_observation(env))
        if self.wide:  # the planned task is drawn now: the planner's turn is fixed already
            self.task = env.pool.sample(env.rng)
            env.announce("planner_0", "plan", self.task, prompts.planner(self.task))

    def _challenge_exec(self, env: ProtocolEnv, text: str) -> None:
        self.exec_parsed, self.check, task, f = vet_exec_challenge(
            env, text, self.reference, self.exec_refs, self.name
        )
        if task is None:
            f = env.soft(f, 0.0)
            env.deliver(
                "challenger_0",
                *rewards.challenger_reward(0.0, None, f, env.config.rewards),
                parsed=self.exec_parsed,
                accepted=False,
                verifier_check=self.check,
            )
            self._after_challenge(env, None)
            return
        self.new_task = task
        self._after_challenge(env, prompts.critic_question(task.prompt, task.domain, None))

    # phase handlers --------------------------------------------------------------
    def on_challenge(self, env: ProtocolEnv, text: str) -> None:
        """Vet the proposal; send it to review or skip to planning."""
        if self.reference.domain == "exec":
            self._challenge_exec(env, text)
            return
        self.proposal, self.new_task, self.check = propose(env, text, self.reference)
        if self.new_task is None:
            f = env.soft(self.proposal.format_score, 0.0)
            env.deliver(
                "challenger_0",
                *rewards.challenger_reward(0.0, None, f, env.config.rewards),
                parsed=self._parsed(),
                accepted=False,
                verifier_check=self.check,
            )
            self._after_challenge(env, None)
            return
        self._after_challenge(
            env,
            prompts.critic_question(
                self.new_task.prompt,
                self.new_task.domain,
                prompts.verifier_text(self.new_task) if env.config.critic_sees_verifier else None,
            ),
        )

    def _after_challenge(self, env: ProtocolEnv, review_obs: dict | None) -> None:
        """Next turn after the proposal: its review (``review_obs``) or, without one, the plan.

        Interleaved: always the planner, with the question review announced when there is one.
        """
        if not self.wide:
            if review_obs is None:
                self._start_plan(env)
            else:
                env.select("critic_0", "review_question", self.new_task, review_obs)
            return
        self.review_obs = review_obs
        env.select("planner_0", "plan", self.task, prompts.planner(self.task))
        if review_obs is not None:
            env.announce("critic_0", "review_question", self.new_task, review_obs)

    def on_review_question(self, env: ProtocolEnv, text: str) -> None:
        """Score the question; probe its difficulty when it passes the quality gate."""
        cfg = env.config.rewards
        self.q = review(env, "critic_0", text, "question", "q")
        domain = self.new_task.domain if self.new_task is not None else None
        if rewards.quality_gate(self.q, cfg, domain):
            self.probe_scores = []
            if self.wide:  # the plan's review first; the probes come after it
                self.probing = True
                env.select("critic_0", "review_plan", self.task, self.plan_review_obs)
                env.announce(
                    "solver_0",
                    "probe",
                    self.new_task,
                    prompts.solver(self.new_task),
                    repeats=env.config.solver_samples,
                )
                return
            env.select(
                "solver_0",
                "probe",
                self.new_task,
                prompts.solver(self.new_task),
                repeats=env.config.solver_samples,
            )
            return
        env.deliver(
            "challenger_0",
            *rewards.challenger_reward(self.q, None, 1.0, cfg),
            parsed=self._parsed(),
            verifier_check=self.check,
            accepted=False,
            gate=f"q={self.q:.3f} < alpha={rewards.gate_alpha(cfg, domain):.3f}: rejected",
        )
        if self.wide:  # no probes: the plan's review is next
            env.select("critic_0", "review_plan", self.task, self.plan_review_obs)
            return
        self._start_plan(env)

    def on_probe(self, env: ProtocolEnv, text: str) -> None:
        """One difficulty attempt; after k, credit the challenger and pool the task."""
        cfg = env.config.rewards
        s_gt, f, verdict = env.verify(self.new_task, text)
        self.probe_scores.append(s_gt)
        env.deliver(
            "solver_0",
            *rewards.solver_reward(None, s_gt, f, cfg),
            verdict=verdict,
            plan_shown=False,
            # frozen pool: a probe only judges the new question; it does not train
            **({"train": False} if env.pool.frozen else {}),
        )
        if len(self.probe_scores) < env.config.solver_samples:
            return
        task = self.new_task
        r = sum(self.probe_scores) / len(self.probe_scores)
        d = rewards.task_difficulty(r, cfg.difficulty_rule, task.domain)
        unsolved = not rewards.solved_by_any(self.probe_scores)  # a full pass is evidence
        suspect = rewards.needs_solvability_evidence(cfg.difficulty_rule, task.domain)
        if unsolved and (suspect or env.config.pool_admission == "solvable"):
            if suspect:  # the rule pays d = 0; partial passes (r > 0) are no evidence either
                d, gate = 0.0, (
                    "no difficulty probe solved it in full: no evidence that its stored "
                    f"answer or tests are right (difficulty_rule={cfg.difficulty_rule!r}): "
                    "d = 0, not pooled"
                )
            else:  # pool_admission="solvable" drops d, as for a gated question
                d = None
                gate = "no difficulty probe solved it (pool_admission='solvable'): rejected"
            env.deliver(
                "challenger_0",
                *rewards.challenger_reward(self.q, d, 1.0, cfg),
                parsed=self._parsed(),
                verifier_check=self.check,
                accepted=False,
                added_to_pool=False,
                probe_scores=list(self.probe_scores),
                gate=gate,
            )
            self._after_probes(env)
            return
        task.meta.update({"q": self.q, "d": d, "probe_scores": list(self.probe_scores)})
        added = env.pool.add(task)
        env.deliver(
            "challenger_0",
            *rewards.challenger_reward(self.q, d, 1.0, cfg),
            parsed=self._parsed(),
            verifier_check=self.check,
            accepted=True,
            added_to_pool=added,
            new_task_id=task.task_id,
        )
        self._after_probes(env)

    def _after_probes(self, env: ProtocolEnv) -> None:
        """Next turn once the question is settled: the plan, or (interleaved) what is left."""
        if self.wide:  # the plan was reviewed before the probes
            self._start_solve(env)
        else:
            self._start_plan(env)

    def _start_plan(self, env: ProtocolEnv) -> None:
        self.task = env.pool.sample(env.rng)
        env.select("planner_0", "plan", self.task, prompts.planner(self.task))

    def on_plan(self, env: ProtocolEnv, text: str) -> None:
        """Send every plan to review; a badly formatted one is reviewed as raw text."""
        self.plan = parsing.parse_plan(text)
        self.plan_format = parsing.plan_format_score(text)
        shown_text = self.plan if self.plan is not None else text.strip()[:2000]
        self.plan_review_obs = prompts.critic_plan(self.task, shown_text)
        if self.wide and self.review_obs is not None:  # the question's review comes first
            env.select("critic_0", "review_question", self.new_task, self.review_obs)
            env.announce("critic_0", "review_plan", self.task, self.plan_review_obs)
            return
        env.select("critic_0", "review_plan", self.task, self.plan_review_obs)

    def on_review_plan(self, env: ProtocolEnv, text: str) -> None:
        """Score the plan, credit critic and planner, open the plan gate."""
        cfg = env.config.rewards
        if cfg.critic_plan_grounding > 0:  # paid after the solves (critic_plan_reward)
            raw, f, sampled = review_parts(env, text)
            self.p, self.plan_review_details = gate_estimate(env, sampled)
            self.plan_review_details["reason"] = parsing.critic_reply_reason(text)
            self.plan_review = (raw, f, sampled)  # the critic is paid for its sampled p
        else:
            self.p = review(env, "critic_0", text, "plan", "p")
        plan_ok = self.plan is not None
        self.plan_shown = plan_ok and rewards.plan_gate(self.p, cfg)
        env.deliver(
            "planner_0",
            *rewards.planner_reward(self.p, env.soft(self.plan_format, float(plan_ok)), cfg),
            plan=self.plan,
            plan_shown=self.plan_shown,
            reason="" if plan_ok else "missing <plan> with at least 2 numbered steps",
            gate=(
                f"p={self.p:.3f} > beta={cfg.beta}: plan shown"
                if self.plan_shown
                else f"p={self.p:.3f} <= beta={cfg.beta}: plan not shown"
                if plan_ok
                else "no parseable plan: plan not shown"
            ),
        )
        if self.probing:  # interleaved: the question's probes first, then the solves
            env.select(
                "solver_0",
                "probe",
                self.new_task,
                prompts.solver(self.new_task),
                repeats=env.config.solver_samples,
            )
            env.announce(
                "solver_0",
                "solve",
                self.task,
                self._solve_obs(),
                repeats=env.config.solver_samples,
            )
            return
        self._start_solve(env)

    def _solve_obs(self) -> dict:
        return prompts.solver(self.task, self.plan if self.plan_shown else None)

    def _start_solve(self, env: ProtocolEnv) -> None:
        self.solve_scores = []
        env.select(
            "solver_0", "solve", self.task, self._solve_obs(), repeats=env.config.solver_samples
        )

    def on_solve(self, env: ProtocolEnv, text: str) -> None:
        """One solve attempt; the round ends after k."""
        s_gt, f, verdict = env.verify(self.task, text)
        p = self.p if self.plan_shown else None
        env.deliver(
            "solver_0",
            *rewards.solver_reward(p, s_gt, f, env.config.rewards),
            verdict=verdict,
            plan_shown=self.plan_shown,
        )
        self.solve_scores.append(s_gt)
        if len(self.solve_scores) < env.config.solver_samples:
            return
        if self.plan_review is not None:
            raw, f, sampled = self.plan_review
            s_mean = sum(self.solve_scores) / len(self.solve_scores)
            env.deliver(
                "critic_0",
                *rewards.critic_plan_reward(
                    f,
                    None if raw is None else sampled,
                    s_mean,
                    env.config.rewards.critic_plan_grounding,
                ),
                raw_score=raw,
                review="plan",
                p=self.p,
                **self.plan_review_details,
            )
        env.finish()
