"""The SAGE round as a PettingZoo AEC environment.

One episode is one round (DESIGN.md):

1. ``challenger_0`` reads a seed task and proposes a new task with its verifier;
2. ``critic_0`` scores the question (q); when ``q >= alpha`` the question is accepted,
3. ``solver_0`` attempts it ``k`` times to measure difficulty d, and it joins the pool;
4. ``planner_0`` writes a plan for a task drawn from the pool;
5. ``critic_0`` scores the plan (p), also a badly formatted one (its text is reviewed as is);
6. ``solver_0`` solves the pool task ``k`` times, seeing the plan when ``p > beta``.

Steps 2-3 are skipped when the Challenger's output does not parse (nothing to review), and
step 3 when the question fails the quality gate. Only a well-formed plan is shown to the
solver. A reward for an action is delivered before the same agent acts again or at the end of
the round, so ``env.last()`` at an agent's next turn returns exactly the reward of its
previous action.
"""

from __future__ import annotations

import random
from dataclasses import fields, replace
from typing import Any

import gymnasium
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from sage_env import parsing, prompts, rewards
from sage_env.config import EnvConfig, RewardConfig
from sage_env.pool import TaskPool
from sage_env.tasks import Task, load_seeds
from sage_env.verifiers import CodeVerifier, MathVerifier, extract_boxed, extract_code

AGENTS = ("challenger_0", "planner_0", "solver_0", "critic_0")
MAX_TEXT = 1 << 20


class AnyText(spaces.Text):
    """A text space that contains any Python ``str`` up to ``max_length`` characters.

    ``gymnasium.spaces.Text`` only contains strings over its charset (alphanumeric by
    default), which rejects the newlines, emoji and LaTeX a language model writes.
    ``sample()`` still draws from the default charset.
    """

    def __init__(self, max_length: int = MAX_TEXT, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=0, seed=seed)

    def contains(self, x: Any) -> bool:
        """True for any ``str`` of at most ``max_length`` characters."""
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.max_length})"


def _apply_overrides(config: EnvConfig, overrides: dict) -> EnvConfig:
    env_keys = {f.name for f in fields(EnvConfig)}
    reward_keys = {f.name for f in fields(RewardConfig)}
    env_kw = {k: v for k, v in overrides.items() if k in env_keys}
    rew_kw = {k: v for k, v in overrides.items() if k in reward_keys}
    unknown = set(overrides) - env_keys - reward_keys
    if unknown:
        raise TypeError(f"unknown EnvConfig option(s): {sorted(unknown)}")
    config = replace(config, **env_kw)
    if rew_kw:
        config = replace(config, rewards=replace(config.rewards, **rew_kw))
    return config


def make_pool(config: EnvConfig, tasks: list[Task]) -> TaskPool:
    """A :class:`TaskPool` holding ``tasks`` with the pool settings of ``config``."""
    return TaskPool(
        tasks,
        near_duplicate_threshold=config.pool_near_duplicate_threshold,
        max_generated=config.pool_max_generated,
    )


def env(config: EnvConfig | None = None, **kwargs: Any) -> AECEnv:
    """Create the SAGE environment wrapped in PettingZoo's order-enforcing wrappers.

    Args:
        config: An :class:`EnvConfig`; ``None`` for the paper defaults.
        **kwargs: Either :class:`raw_env` arguments (``render_mode``, ``seeds``, ``pool``,
            ``math_verifier``, ``code_verifier``) or config overrides such as ``alpha=0.5``
            or ``solver_samples=4``.

    Raises:
        TypeError: on an unknown keyword.
        ValueError: on an invalid configuration value.
    """
    e = raw_env(config, **kwargs)
    e = wrappers.OrderEnforcingWrapper(e)
    return e


class raw_env(AECEnv):  # noqa: N801 - PettingZoo naming convention
    """The unwrapped SAGE AEC environment. See the module docstring for the round.

    Observations are ``{"system": str, "user": str}`` (the role's chat messages); actions are
    one ``str`` (any string is legal; malformed output gets format score 0).

    ``infos[agent]`` holds ``phase``, ``task_id`` and ``domain`` of the agent's next action
    and ``last``: every parsed field, verifier verdict, gate decision and reward term of its
    most recently scored action.

    Args:
        config: Environment configuration (paper defaults when ``None``).
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the round transcript).
        seeds: Reference tasks for the Challenger (default: the 500 bundled seeds).
        pool: A :class:`TaskPool` to draw planner tasks from and add accepted tasks to; share
            one between environment copies. Default: a new pool holding ``seeds``.
        math_verifier, code_verifier: Shared verifier instances (default: new ones built from
            the config; closed by :meth:`close`).
        **overrides: Config overrides, e.g. ``alpha=0.5``.
    """

    metadata = {"name": "sage_v0", "render_modes": ["human", "ansi"], "is_parallelizable": False}

    def __init__(
        self,
        config: EnvConfig | None = None,
        render_mode: str | None = None,
        seeds: list[Task] | None = None,
        pool: TaskPool | None = None,
        math_verifier: MathVerifier | None = None,
        code_verifier: CodeVerifier | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__()
        config = config if config is not None else EnvConfig()
        self.config = _apply_overrides(config, overrides) if overrides else config
        if render_mode not in (None, "human", "ansi"):
            raise ValueError(f"render_mode must be None, 'human' or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        self.seeds = list(seeds) if seeds is not None else load_seeds()
        if not self.seeds:
            raise ValueError("seeds must not be empty")
        self.pool = pool if pool is not None else make_pool(self.config, self.seeds)
        self._own_verifiers = []
        if math_verifier is None:
            math_verifier = MathVerifier(workers=self.config.math_workers)
            self._own_verifiers.append(math_verifier)
        if code_verifier is None:
            code_verifier = CodeVerifier(
                timeout_s=self.config.code_timeout_s, memory_mb=self.config.code_memory_mb
            )
            self._own_verifiers.append(code_verifier)
        self.math_verifier, self.code_verifier = math_verifier, code_verifier
        self.possible_agents = list(AGENTS)
        self._obs_space = spaces.Dict({"system": AnyText(), "user": AnyText()})
        self._act_space = AnyText(max_length=self.config.max_action_chars)
        self._rng = random.Random(self.config.seed)
        self._episode = 0
        self._transcript: list[str] = []
        self._printed = 0
        self._current_task: Task | None = None

    # ----------------------------------------------------------------- spaces
    def observation_space(self, agent: str) -> gymnasium.Space:
        """The same ``Dict(system=AnyText, user=AnyText)`` object for every agent."""
        return self._obs_space

    def action_space(self, agent: str) -> gymnasium.Space:
        """The same :class:`AnyText` object for every agent."""
        return self._act_space

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """Start a new round. ``seed`` reseeds the environment's RNG (task draws)."""
        if seed is not None:
            self._rng = random.Random(seed)
            self._act_space.seed(seed)
            self._obs_space.seed(seed)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {
            a: {"phase": None, "task_id": None, "domain": None, "last": {}} for a in self.agents
        }
        self._obs = {a: {"system": "", "user": ""} for a in self.agents}
        self._transcript = []
        self._printed = 0
        self._episode += 1
        domains = [d for d in self.config.domains if any(t.domain == d for t in self.seeds)]
        domain = self._rng.choice(domains) if domains else self.seeds[0].domain
        candidates = [t for t in self.seeds if t.domain == domain]
        self._reference = candidates[self._rng.randrange(len(candidates))]
        self._proposal: parsing.ChallengerOutput | None = None
        self._verifier_check: dict | None = None
        self._new_task: Task | None = None
        self._q = 0.0
        self._probe_scores: list[float] = []
        self._task: Task | None = None
        self._plan: str | None = None
        self._plan_text = ""
        self._plan_format = 0.0
        self._p: float | None = None
        self._plan_shown = False
        self._solve_count = 0
        self._select(
            "challenger_0", "challenge", self._reference, prompts.challenger(self._reference)
        )

    def observe(self, agent: str) -> dict[str, str]:
        """The agent's current observation ``{"system": str, "user": str}``."""
        return self._obs.get(agent, {"system": "", "user": ""})

    def render(self) -> str | None:
        """Render the round transcript: every observation, action and reward term.

        ``render_mode="ansi"`` returns the transcript of the round so far as a string;
        ``"human"`` prints the part not printed yet to stdout and returns None.
        """
        if self.render_mode == "ansi":
            return "\n".join(self._transcript) + "\n"
        if self.render_mode == "human":
            new = self._transcript[self._printed :]
            self._printed = len(self._transcript)
            if new:
                print("\n".join(new), flush=True)
            return None
        gymnasium.logger.warn("render() called without a render_mode")
        return None

    def close(self) -> None:
        """Release verifier worker processes this environment created."""
        for verifier in self._own_verifiers:
            verifier_close = getattr(verifier, "close", None)
            if verifier_close is not None:
                verifier_close()
        self._own_verifiers = []

    # ------------------------------------------------------------------- step
    def step(self, action: str | None) -> None:
        """Apply the selected agent's action (one string; anything else is coerced)."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        text = action if isinstance(action, str) else ("" if action is None else str(action))
        text = text[: self.config.max_action_chars]
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: 0.0 for a in self.agents}
        phase = self.infos[agent]["phase"]
        self._log(
            f"=== {phase}: {agent} ===\n--- observation ---\n{self._obs[agent]['user']}\n"
            f"--- action ---\n{text}"
        )
        getattr(self, f"_on_{phase}")(text)
        self._accumulate_rewards()

    # ------------------------------------------------------------ the phases
    def _on_challenge(self, text: str) -> None:
        ref = self._reference
        out = parsing.parse_challenger(text, ref.domain, self.config.max_task_chars)
        check = None
        if out.valid:
            candidate = self._make_task(out, ref)
            duplicate = self.pool.duplicate_of(candidate)
            if duplicate is not None:
                out.valid, out.format_score = False, 0.0
                out.reason = duplicate
            else:
                check = self._check_verifier(candidate)
                if check["status"] != "passed":
                    # the question is fine, its verifier is not: half the format credit
                    out.valid, out.format_score = False, 0.5
                    out.reason = f"verifier check failed: {check['reason']}"
        self._proposal, self._verifier_check = out, check
        if not out.valid:
            self._deliver(
                "challenger_0",
                *rewards.challenger_reward(
                    0.0, None, self._soft(out.format_score, 0.0), self.config.rewards
                ),
                parsed=_public(out),
                accepted=False,
                verifier_check=check,
            )
            self._start_plan()
            return
        self._new_task = candidate
        self._select(
            "critic_0",
            "review_question",
            candidate,
            prompts.critic_question(candidate.prompt, candidate.domain),
        )

    def _on_review_question(self, text: str) -> None:
        cfg = self.config.rewards
        raw = parsing.parse_critic_score(text)
        f = self._soft(parsing.critic_format_score(text), float(raw is not None))
        self._q = rewards.normalise_critic_score(raw, cfg.critic_score_rule)
        accepted = rewards.quality_gate(self._q, cfg)
        self._deliver(
            "critic_0", *rewards.critic_reward(f), raw_score=raw, q=self._q, review="question"
        )
        if accepted:
            self._probe_scores = []
            self._select("solver_0", "probe", self._new_task, prompts.solver(self._new_task))
            return
        self._deliver(
            "challenger_0",
            *rewards.challenger_reward(self._q, None, 1.0, cfg),
            parsed=_public(self._proposal),
            verifier_check=self._verifier_check,
            accepted=False,
            gate=f"q={self._q:.3f} < alpha={cfg.alpha}",
        )
        self._start_plan()

    def _on_probe(self, text: str) -> None:
        cfg = self.config.rewards
        s_gt, f, verdict = self._verify(self._new_task, text)
        self._probe_scores.append(s_gt)
        self._deliver(
            "solver_0",
            *rewards.solver_reward(None, s_gt, f, cfg),
            verdict=verdict,
            plan_shown=False,
        )
        if len(self._probe_scores) < self.config.solver_samples:
            return
        d = 1.0 - sum(self._probe_scores) / len(self._probe_scores)
        task = self._new_task
        task.meta.update({"q": self._q, "d": d, "probe_scores": list(self._probe_scores)})
        added = self.pool.add(task)
        self._deliver(
            "challenger_0",
            *rewards.challenger_reward(self._q, d, 1.0, cfg),
            parsed=_public(self._proposal),
            verifier_check=self._verifier_check,
            accepted=True,
            added_to_pool=added,
            new_task_id=task.task_id,
        )
        self._start_plan()

    def _start_plan(self) -> None:
        self._task = self.pool.sample(self._rng)
        self._select("planner_0", "plan", self._task, prompts.planner(self._task))

    def _on_plan(self, text: str) -> None:
        # The critic reviews every plan: a badly formatted one still gets a quality score p
        # (the planner's format term is 0 then), but only a well-formed plan is ever shown
        # to the solver.
        self._plan = parsing.parse_plan(text)
        self._plan_format = parsing.plan_format_score(text)
        self._plan_text = self._plan if self._plan is not None else text.strip()[:2000]
        self._select(
            "critic_0", "review_plan", self._task, prompts.critic_plan(self._task, self._plan_text)
        )

    def _on_review_plan(self, text: str) -> None:
        cfg = self.config.rewards
        raw = parsing.parse_critic_score(text)
        f = self._soft(parsing.critic_format_score(text), float(raw is not None))
        self._p = rewards.normalise_critic_score(raw, cfg.critic_score_rule)
        plan_ok = self._plan is not None
        self._plan_shown = plan_ok and rewards.plan_gate(self._p, cfg)
        self._deliver(
            "critic_0", *rewards.critic_reward(f), raw_score=raw, p=self._p, review="plan"
        )
        self._deliver(
            "planner_0",
            *rewards.planner_reward(self._p, self._soft(self._plan_format, float(plan_ok)), cfg),
            plan=self._plan,
            plan_shown=self._plan_shown,
            reason="" if plan_ok else "missing <plan> with at least 2 numbered steps",
            gate=f"p={self._p:.3f} vs beta={cfg.beta}",
        )
        self._start_solve()

    def _start_solve(self) -> None:
        self._solve_count = 0
        plan = self._plan if self._plan_shown else None
        self._select("solver_0", "solve", self._task, prompts.solver(self._task, plan))

    def _on_solve(self, text: str) -> None:
        s_gt, f, verdict = self._verify(self._task, text)
        p = self._p if self._plan_shown else None
        self._deliver(
            "solver_0",
            *rewards.solver_reward(p, s_gt, f, self.config.rewards),
            verdict=verdict,
            plan_shown=self._plan_shown,
        )
        self._solve_count += 1
        if self._solve_count >= self.config.solver_samples:
            self._finish()

    def _finish(self) -> None:
        for a in self.agents:
            self.terminations[a] = True
            self.infos[a]["phase"] = "done"
        self.agent_selection = self.agents[0]

    # ---------------------------------------------------------------- helpers
    @property
    def current_task(self) -> Task | None:
        """The task the selected agent acts on (the seed for the challenger), for debugging."""
        return self._current_task

    def _select(self, agent: str, phase: str, task: Task, obs: dict[str, str]) -> None:
        self._current_task = task
        self._obs[agent] = obs
        self.infos[agent].update(phase=phase, task_id=task.task_id, domain=task.domain)
        self.agent_selection = agent

    def _deliver(self, agent: str, reward: float, terms: dict, **details: Any) -> None:
        self.rewards[agent] += reward
        self.infos[agent]["last"] = {
            "phase": self.infos[agent]["phase"],
            "reward": reward,
            "terms": terms,
            **details,
        }
        self._log(f"--- reward {agent}: {reward:.4f} {terms} {_short(details)}")

    def _verify(self, task: Task, text: str) -> tuple[float, float, dict]:
        """Score a solver answer with the external verifier: (s_gt, format, verdict)."""
        if task.domain == "math":
            if extract_boxed(text) is None:
                return 0.0, 0.0, {"status": "invalid", "reason": "no \\boxed{} answer"}
            res = self.math_verifier.verify(text, task.answer or "")
        else:
            program = extract_code(text, task.entry_point)
            if program is None:
                return 0.0, 0.0, {"status": "invalid", "reason": "no Python code found"}
            res = self.code_verifier.verify(program, task.tests, task.test_setup)
        # soft format: code that does not even compile earns half the format credit
        fmt = self._soft(0.5, 1.0) if res.status == "syntax_error" else 1.0
        return (
            float(res.score),
            fmt,
            {"status": res.status, "reason": res.reason, "score": res.score},
        )

    def _check_verifier(self, task: Task) -> dict:
        """Check a proposed task's verifier before it is used.

        Math: the answer must parse (math-verify accepts it against itself). Code: the tests
        parsed already; a reference solution, when given, must pass all of them in the
        sandbox. Without a reference solution the tests are accepted unchecked.
        """
        if task.domain == "math":
            res = self.math_verifier.verify(f"\\boxed{{{task.answer}}}", task.answer or "")
            if res.score < 1.0:
                return {"status": "failed", "reason": f"answer does not parse ({res.reason})"}
            return {"status": "passed", "reason": "answer parses"}
        if not task.reference_solution:
            return {"status": "passed", "reason": "no reference solution to check the tests"}
        program = extract_code(task.reference_solution, task.entry_point)
        if program is None:
            return {"status": "failed", "reason": "reference solution has no Python code"}
        res = self.code_verifier.verify(program, task.tests, task.test_setup)
        if res.score < 1.0:
            return {
                "status": "failed",
                "reason": f"reference solution fails its tests ({res.status}: {res.reason})",
            }
        return {"status": "passed", "reason": "reference solution passes every test"}

    def _soft(self, soft: float, binary: float) -> float:
        """Pick the format score of the configured ``format_rule``."""
        return soft if self.config.rewards.format_rule == "soft" else binary

    def _make_task(self, out: parsing.ChallengerOutput, ref: Task) -> Task:
        return Task(
            task_id=self.pool.new_id(),
            domain=ref.domain,
            prompt=out.question,
            answer=out.answer,
            tests=list(out.tests),
            entry_point=out.entry_point,
            source="generated",
            parent_id=ref.task_id,
            reference_solution=out.solution,
            meta={"episode": self._episode},
        )

    def _log(self, line: str) -> None:
        if self.render_mode is not None:
            self._transcript.append(line)


def _public(out: parsing.ChallengerOutput | None) -> dict:
    if out is None:
        return {}
    return {
        "question": out.question,
        "answer": out.answer,
        "tests": out.tests,
        "entry_point": out.entry_point,
        "valid": out.valid,
        "reason": out.reason,
    }


def _short(details: dict) -> str:
    keep = {k: v for k, v in details.items() if k not in ("parsed", "plan")}
    return str(keep)[:300]
