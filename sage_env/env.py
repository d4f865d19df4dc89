"""SAGE self-play (arXiv 2603.15255) as a PettingZoo AEC environment: the spec card.

===================  ===========================================================================
Import               ``import sage_env; env = sage_env.env()`` (``raw_env`` unwrapped)
Name                 ``sage_v0`` (``metadata["name"]``)
API                  AEC only (``is_parallelizable`` False: turns depend on earlier actions)
Agents               ``challenger_0``, ``planner_0``, ``solver_0``, ``critic_0`` (protocol
                     ``"sage"``); another ``config.protocol`` brings its own (below)
Observation space    ``Dict(system=AnyText, user=AnyText, prefix=AnyText)``: the role's chat
                     messages and the start of its reply (``""`` when none)
Action space         ``AnyText(max_length=config.max_action_chars)``: one ``str``, the whole
                     reply ``prefix + completion``; any string is legal (malformed: format 0)
Rewards              per action, delivered before the agent acts again or at the round's end;
                     one record per credit, ``infos[agent]["last"]``: a
                     :class:`sage_env.outcome.Outcome`
Render modes         ``"ansi"`` (the round's transcript), ``"human"`` (printed as it grows)
===================  ===========================================================================

**Episode and turn order.** One episode is one round (``"sage"``,
:mod:`sage_env.protocols.sage`; ``k = config.solver_samples``):

1. ``challenger_0`` (phase ``challenge``) reads a seed task and proposes a new task and its
   verifier;
2. ``critic_0`` (``review_question``) scores the question, ``q``; gate ``q >= alpha``;
3. ``solver_0`` (``probe``, k times) attempts an accepted question: its difficulty ``d``;
4. ``planner_0`` (``plan``) plans a task drawn from the pool;
5. ``critic_0`` (``review_plan``) scores the plan, ``p``; gate ``p > beta`` shows it;
6. ``solver_0`` (``solve``, k times) solves the pool task.

Steps 2-3 are skipped for a proposal that does not parse or whose verifier fails its check,
step 3 for one that fails the gate. ``config.turn_order = "interleaved"`` plays 1, 4, 2, 5,
3, 6. ``infos[agent]`` holds ``phase``, ``task_id``, ``domain``, ``group`` and ``repeats`` of
the agent's next turn, ``ahead`` (turns announced for batching) and ``last``.

**Rewards by phase** (defaults of :class:`sage_env.config.RewardConfig`; the terms are
``Outcome.terms``; functions of :mod:`sage_env.rewards` unless named in full):

- ``challenge``: ``(q + d + f) / 3`` (``challenger_reward``): q the critic's score of the
  question; d ``task_difficulty`` of the probes' mean, ``None`` (dropped) when q < alpha; f
  the proposal's format (:func:`sage_env.protocols.base.propose`: 0 when unparsed or a
  duplicate, 0.5 when its verifier fails its check);
- ``review_question``, ``review_plan``: ``f`` (``critic_reward``), f from
  :func:`sage_env.text.parsing.critic_format_score`; the 1-10 score becomes q or p by
  ``normalise_critic_score`` (a grounded plan review: ``critic_plan_reward``);
- ``probe``, ``solve``: ``0.2 p + 0.6 s_gt + 0.2 f`` (``solver_reward``): s_gt and f from
  the external verifier (:func:`sage_env.env_scoring.verify`), never the critic; p the
  plan's score, ``None`` on a probe or when the plan was not shown;
- ``plan``: ``0.5 p + 0.5 f`` (``planner_reward``), f from
  :func:`sage_env.text.parsing.plan_format_score`.

Format scores follow ``format_rule`` (soft or binary, :func:`sage_env.env_scoring.format_score`);
``Outcome.why`` says why each format term has its value
(:func:`sage_env.env_scoring.term_reasons`). Every rule and option: ``docs/reference/rewards.md``.

**Other protocols** (``config.protocol``; :mod:`sage_env.protocols`): ``"azr"``
(``proposer_0``, ``solver_0`` on execution tasks; learnability ``1 - acc`` when
``0 < acc < 1``, :func:`sage_env.rewards.learnability_reward`, with AZR's format penalties,
:func:`sage_env.rewards.azr_reward`), ``"azr-qa"`` (the same game on math/code tasks),
``"mae"`` (``proposer_0``, ``solver_0``, ``judge_0``: the judge scores answers,
:mod:`sage_env.protocols.mae`), ``"rlvr"`` (``solver_0`` alone on seed tasks), or one you
register. Each module's docstring is its card.

**Version history.** v0: the first release.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
import random
from typing import Any

import gymnasium
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from sage_env import env_scoring
from sage_env.actions import AnyText, read_action
from sage_env.config import EnvConfig
from sage_env.env_setup import apply_overrides, bind_protocol_config, make_pool
from sage_env.outcome import Outcome
from sage_env.protocols import Protocol, SAGEProtocol, make_protocol
from sage_env.tasks.pool import TaskPool
from sage_env.tasks.task import Task, load_seeds
from sage_env.text import parsing
from sage_env.transcript import Transcript
from sage_env.verifiers import CodeVerifier, MathVerifier

AGENTS = SAGEProtocol.agents
"""Agent ids of the default ``"sage"`` protocol."""


def env(config: EnvConfig | None = None, **kwargs: Any) -> AECEnv:
    """Create the environment wrapped in PettingZoo's order-enforcing wrapper.

    Args:
        config: An :class:`EnvConfig`; ``None`` for the paper defaults.
        **kwargs: Either :class:`raw_env` arguments (``render_mode``, ``seeds``, ``pool``,
            ``math_verifier``, ``code_verifier``) or config overrides such as ``alpha=0.5``,
            ``solver_samples=4`` or ``protocol="azr"``.

    Raises:
        TypeError: on an unknown keyword.
        ValueError: on an invalid configuration value or an unknown protocol.
    """
    return wrappers.OrderEnforcingWrapper(raw_env(config, **kwargs))


class raw_env(AECEnv):  # noqa: N801 - PettingZoo naming convention
    """The unwrapped environment; the game is ``config.protocol`` (spec card: the module's).

    It does the AEC bookkeeping (spaces, rewards, infos, rendering), owns the verifiers and
    the task pool, and hands the game to the protocol; the methods under "protocol API" are
    what a :class:`~sage_env.protocols.Protocol` uses. The prefix is chosen by the protocol
    per phase (``""`` when ``config.prefixes`` is False); a review's action may be a
    :class:`sage_env.ScoredReply` (see :meth:`step`).

    Args:
        config: Environment configuration (paper defaults when ``None``).
        render_mode: ``None``, ``"ansi"`` (``render()`` returns the round transcript) or
            ``"human"`` (``render()`` prints what is new).
        seeds: Reference tasks for the proposer (default: the 500 bundled seeds).
        pool: A :class:`TaskPool` to draw tasks from and add accepted tasks to; share one
            between environment copies. Default: a new pool holding ``seeds``.
        math_verifier, code_verifier: Shared verifier instances (default: new ones built from
            the config; closed by :meth:`close`).
        protocol: A registered name (sets ``config.protocol``) or a
            :class:`~sage_env.protocols.Protocol` instance, overriding ``config.protocol``;
            for an instance ``config.protocol_config`` (or a ``protocol_config``
            override) is then built for its ``config_cls``.
        **overrides: Config overrides, e.g. ``alpha=0.5`` or
            ``protocol_config={"format_penalty": True}``.

    Raises:
        ValueError: on an unknown protocol, settings that do not fit it
            (``protocol_config``), empty seeds or a bad render mode.
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
        protocol: Protocol | str | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__()
        config = config if config is not None else EnvConfig()
        if isinstance(protocol, str):  # env(protocol="azr"): a config override
            overrides["protocol"], protocol = protocol, None
        settings = overrides.pop("protocol_config", None) if protocol is not None else None
        self.config = apply_overrides(config, overrides) if overrides else config
        if render_mode not in (None, "human", "ansi"):
            raise ValueError(f"render_mode must be None, 'human' or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        self.protocol = make_protocol(protocol if protocol is not None else self.config.protocol)
        if settings is not None:  # settings for the protocol instance, not config.protocol
            self.config = copy.copy(self.config)
            self.config.protocol_config = settings
        self.config = bind_protocol_config(self.config, self.protocol)
        self.seeds = list(seeds) if seeds is not None else load_seeds()
        if "exec" in self.config.domains and not any(t.domain == "exec" for t in self.seeds):
            from sage_env.tasks.exec_tasks import load_exec_seeds

            self.seeds += load_exec_seeds()
        if not self.seeds:
            raise ValueError("seeds must not be empty")
        self.pool = pool if pool is not None else make_pool(self.config, self.seeds)
        if "exec" in self.config.domains and not any(t.domain == "exec" for t in self.pool.tasks):
            for task in self.seeds:  # a given pool without execution tasks: seed its buffers
                if task.domain == "exec":
                    self.pool.add(task)
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
        self.possible_agents = list(self.protocol.agents)
        self._obs_space = spaces.Dict({"system": AnyText(), "user": AnyText(), "prefix": AnyText()})
        self._act_space = AnyText(max_length=self.config.max_action_chars)
        self._rng = random.Random(self.config.seed)
        self._check_rng = _check_rng(self.config.seed)
        self._episode = 0
        self._transcript = Transcript()
        self._current_task: Task | None = None

    # ----------------------------------------------------------------- spaces
    def observation_space(self, agent: str) -> gymnasium.Space:
        """The same ``Dict(system=AnyText, user=AnyText)`` object for every agent."""
        return self._obs_space

    def action_space(self, agent: str) -> gymnasium.Space:
        """The same :class:`AnyText` object for every agent.

        It holds any ``str`` (a :class:`sage_env.ScoredReply` too) up to
        ``config.max_action_chars``; :meth:`step` takes a longer one and cuts it.
        """
        return self._act_space

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """Start a new round. ``seed`` reseeds the environment's RNG (task draws)."""
        if seed is not None:
            self._rng = random.Random(seed)
            self._check_rng = _check_rng(seed)
            self._act_space.seed(seed)
            self._obs_space.seed(seed)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {
            a: {"phase": None, "task_id": None, "domain": None, "last": None} for a in self.agents
        }
        self._obs = {a: _empty_obs() for a in self.agents}
        self._transcript = Transcript()
        self._acted: dict[str, dict[str, Any]] = {}  # per agent: its last action, for deliver
        self._episode += 1
        self.protocol.start(self)

    def observe(self, agent: str) -> dict[str, str]:
        """The agent's current observation ``{"system": str, "user": str, "prefix": str}``."""
        return self._obs.get(agent) or _empty_obs()

    def render(self) -> str | None:
        """Render the round transcript: every observation, action and reward term.

        ``render_mode="ansi"`` returns the transcript of the round so far
        (:class:`~sage_env.transcript.Transcript`) as a string;
        ``"human"`` prints the part not printed yet to stdout and returns None.
        """
        if self.render_mode == "ansi":
            return self._transcript.text()
        if self.render_mode == "human":
            new = self._transcript.unprinted()
            if new is not None:
                print(new, flush=True)
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

    # ------------------------------------------------------------------- gate
    @property
    def gate_alpha(self) -> float:
        """The critic gate alpha (``config.rewards.alpha``); change it with :meth:`set_gate`.

        A proposal joins the pool when the critic's normalised score ``q >= alpha``.
        """
        return self.config.rewards.alpha

    def set_gate(self, alpha: float, domain: str | None = None) -> None:
        """Set the critic gate alpha for the turns to come (a learner's calibration).

        ``--gate-calibration`` calls it on every copy after each critic probe. ``config``
        becomes a copy with the new alpha (a config shared with other copies is left alone).
        With ``domain`` the gate of that domain's questions is set
        (``RewardConfig.domain_alpha``), not the shared one.

        Raises:
            ValueError: unless ``alpha`` is a real number in [0, 1] (NaN, infinities, a
                ``bool`` or a string are refused).
        """
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise ValueError(f"the critic gate alpha must be a number in [0, 1], got {alpha!r}")
        value = float(alpha)
        if not 0.0 <= value <= 1.0:  # NaN fails this too
            raise ValueError(f"the critic gate alpha must be a number in [0, 1], got {value!r}")
        config = copy.copy(self.config)  # not replace(): a protocol instance's config stays
        if domain is None:
            config.rewards = dataclasses.replace(config.rewards, alpha=value)
        else:
            gates = {**config.rewards.domain_alpha, domain: value}
            config.rewards = dataclasses.replace(config.rewards, domain_alpha=gates)
        self.config = config

    # ------------------------------------------------------------------- step
    def step(self, action: str | None) -> None:
        """Apply the selected agent's action: one ``str``, its whole reply (prefix + completion).

        The action contract (:mod:`sage_env.actions`, ``docs/guide/environment.md``): any string is
        legal (malformed output earns format score 0, never an exception); a non-``str`` is
        converted with ``str()``, ``None`` becomes ``""``; text beyond
        ``config.max_action_chars`` is cut and flagged in ``infos[agent]["action_truncated"]``.
        A :class:`sage_env.ScoredReply` is a ``str`` that also carries ``score_probs``, the
        policy's probabilities of the critic scores 1-10: on a review turn under
        ``critic_score_estimate = "expected"`` (``infos[agent]["score_probs"]`` is True) the
        gates use its expected score; a plain ``str`` or a malformed distribution falls back to
        the sampled score (``infos[agent]["last"]["score_estimate"]`` says which). Anywhere
        else the distribution is ignored.
        """
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        act = read_action(action, self.config.max_action_chars)
        self._score_probs = act.score_probs
        limit, cut_from, cut, text = self.config.max_action_chars, act.chars, act.cut, act.text
        if cut:  # flagged: a reply that lost its closing tags to the cut fails the format
            self.infos[agent]["action_truncated"] = {"chars": cut_from, "kept": limit}
        else:
            self.infos[agent].pop("action_truncated", None)
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: 0.0 for a in self.agents}
        phase = self.infos[agent]["phase"]
        self.infos[agent]["repeats"] = max(1, int(self.infos[agent].get("repeats", 1)) - 1)
        prefix = self._obs[agent].get("prefix", "")
        if self.render_mode is not None:
            cut_at = (cut_from, limit) if cut else None
            self._transcript.action(phase, agent, self._obs[agent]["user"], prefix, text, cut_at)
        self._acted[agent] = {
            "kind": self.protocol.phase_kind(phase, self._obs[agent]),
            "text": text,
            "prefix": prefix,
        }
        self._acting = agent
        try:
            self.protocol.step(self, agent, phase, text)
        finally:
            self._acting = None
        self._accumulate_rewards()

    # ----------------------------------------------------------- protocol API
    @property
    def rng(self) -> random.Random:
        """The environment's RNG (reseeded by ``reset(seed=...)``); use it for every draw."""
        return self._rng

    @property
    def check_rng(self) -> random.Random:
        """The generator of the sandbox's check runs (hash seeds, time zones).

        Reseeded by ``reset(seed=...)`` from the seed, apart from :attr:`rng`, so that drawing
        them never moves a task draw. See
        :func:`sage_env.verifiers.executor.draw_check_variants`.
        """
        return self._check_rng

    @property
    def episode(self) -> int:
        """Number of ``reset`` calls so far."""
        return self._episode

    @property
    def action_score_probs(self) -> tuple | None:
        """The score distribution the action being applied carried, or ``None``.

        Set by :meth:`step` from a :class:`~sage_env.text.parsing.ScoredReply`'s ``score_probs``
        (unvalidated: read it with :func:`~sage_env.text.parsing.expected_critic_score`).
        """
        return getattr(self, "_score_probs", None)

    @property
    def current_task(self) -> Task | None:
        """The task the selected agent acts on (the seed for a proposer), for debugging."""
        return self._current_task

    def select(
        self, agent: str, phase: str, task: Task, obs: dict[str, str], repeats: int = 1
    ) -> None:
        """Give the turn to ``agent`` in ``phase`` on ``task`` with observation ``obs``.

        ``obs`` holds ``system`` and ``user``; its ``prefix`` is set here by
        :meth:`prefix_for` (a ``prefix`` the protocol put in ``obs`` is kept unless
        ``config.prefix_overrides`` names the phase or ``config.prefixes`` is False).

        ``repeats`` is a hint for rollout drivers, published as ``infos[agent]["repeats"]``:
        how many actions in a row ``agent`` will be asked for on this same observation (the
        k attempts of a solver). The environment counts it down by one at every step of the
        agent (never below 1); a driver may sample that many completions in one batch and
        feed them in turn, since samples drawn from one observation under fixed weights are
        i.i.d. It never changes the game.
        """
        self._current_task = task
        self._obs[agent], turn = self._turn(phase, task, obs, repeats)
        self.infos[agent].update(turn)
        if not turn.get("score_probs"):
            self.infos[agent].pop("score_probs", None)
        self.infos[agent].pop("ahead", None)
        self.agent_selection = agent

    def announce(
        self, agent: str, phase: str, task: Task, obs: dict[str, str], repeats: int = 1
    ) -> None:
        """Tell drivers that ``agent`` will act in ``phase`` on ``obs`` later in this round.

        Call it after :meth:`select`, only for a turn that is certain to come (whatever the
        pending actions are) and whose observation is already fixed. The turn is appended to
        ``infos[selected agent]["ahead"]``, a list of ``{"agent", "observation", "phase",
        "task_id", "domain", "group", "repeats"[, "score_probs"]}`` in turn order (the
        observation exactly as :meth:`observe` will return it). A driver may sample those
        turns in the same batch as the current one and feed them when they come (weights are
        fixed inside a rollout, so the samples are those it would draw then); it never
        changes the game. Cleared when the next agent is selected.
        """
        observation, turn = self._turn(phase, task, obs, repeats)
        self.infos[self.agent_selection].setdefault("ahead", []).append(
            {"agent": agent, "observation": observation, **turn}
        )

    def _turn(
        self, phase: str, task: Task, obs: dict[str, str], repeats: int
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """The observation and the ``infos`` fields of a turn in ``phase`` on ``task``."""
        observation = {
            "system": str(obs.get("system", "")),
            "user": str(obs.get("user", "")),
            "prefix": self.prefix_for(phase, task, obs.get("prefix")),
        }
        turn: dict[str, Any] = {
            "phase": phase,
            "task_id": task.task_id,
            "domain": task.domain,
            "group": _group(task),
            "repeats": max(1, int(repeats)),
        }
        if (
            self.config.rewards.critic_score_estimate == "expected"
            and self.protocol.phase_kind(phase, observation) == "review"
            # the distribution is read right after the prefix: it must open the score
            and observation["prefix"].endswith("<score>")
        ):
            turn["score_probs"] = True
        return observation, turn

    def deliver(self, agent: str, reward: float, terms: dict, **details: Any) -> None:
        """Credit ``agent``'s most recent action with ``reward``.

        Builds the action's :class:`~sage_env.outcome.Outcome` (``infos[agent]["last"]``)
        from ``terms`` and ``details``, and logs it to the transcript. ``details`` are the
        flat keys of :data:`sage_env.outcome.KEYS` (``parsed``, ``verdict``, ``gate``,
        ``review``/``raw_score``/``q``...). A non-finite reward becomes 0. ``why`` says in
        one line per format term (``f``, AZR's ``formatted`` and ``passable``) why it has its
        value (:func:`sage_env.env_scoring.term_reasons`, from ``agent``'s most recent reply); a
        protocol may pass its own ``why={term: reason}``, which wins.

        Raises:
            TypeError: on a ``details`` key that :class:`~sage_env.outcome.Outcome` does not
                declare.
        """
        reward = float(reward) if math.isfinite(reward) else 0.0
        cut = self.infos[agent].get("action_truncated")
        if cut is not None:  # the credited action was cut at max_action_chars
            details = {**details, "action_truncated": cut}
        acted = getattr(self, "_acted", {}).get(agent, {})
        why = env_scoring.term_reasons(
            acted.get("kind"), terms, details, acted.get("text", ""), reward
        )
        given = details.pop("why", None)
        if isinstance(given, dict):
            why.update({str(k): str(v) for k, v in given.items()})
        outcome = Outcome.build(agent, self.infos[agent]["phase"], reward, terms, why, **details)
        self.rewards[agent] += reward
        self.infos[agent]["last"] = outcome
        if self.render_mode is not None:
            self._transcript.credit(agent, reward, terms, details, why)

    def prefix_for(self, phase: str, task: Task, chosen: str | None = None) -> str:
        """The response prefix of ``phase`` on ``task`` under the config.

        ``""`` when ``config.prefixes`` is False; else ``config.prefix_overrides[phase]`` when
        set; else ``chosen`` (a prefix the protocol wrote into the observation) or the
        protocol's :meth:`~sage_env.protocols.Protocol.prefix`.
        """
        default = str(chosen) if chosen is not None else self.protocol.prefix(phase, task)
        return self.config.resolve_prefix(phase, default)

    def finish(self) -> None:
        """End the round: every agent terminates (and then reads its last reward)."""
        for a in self.agents:
            self.terminations[a] = True
            self.infos[a]["phase"] = "done"
            self.infos[a].pop("ahead", None)
        self.agent_selection = self.agents[0]

    def draw_reference(self) -> Task:
        """Draw a seed task: a domain of ``config.domains`` (by ``domain_weights``), then a task."""
        weights = self.config.domain_weight_list() or [1.0] * len(self.config.domains)
        have = [
            (d, w)
            for d, w in zip(self.config.domains, weights)
            if w > 0 and any(t.domain == d for t in self.seeds)
        ]
        domains = [d for d, _ in have]
        if self.config.domain_weights is None or not domains:  # uniform: the same draws as ever
            domain = self._rng.choice(domains) if domains else self.seeds[0].domain
        else:
            domain = self._rng.choices(domains, weights=[w for _, w in have])[0]
        candidates = [t for t in self.seeds if t.domain == domain]
        return candidates[self._rng.randrange(len(candidates))]

    def soft(self, soft: float, binary: float) -> float:
        """Pick the format score of the configured ``format_rule``."""
        return env_scoring.format_score(self.config, soft, binary)

    def verify(self, task: Task, text: str) -> tuple[float, float, dict]:
        """Score an answer with the external verifier (:func:`sage_env.env_scoring.verify`).

        Called while an agent acts, the response prefix of that agent's turn goes along, so
        a reply that only holds the environment's code fence earns no format credit.
        """
        acting = getattr(self, "_acting", None)
        prefix = self._acted[acting]["prefix"] if acting is not None else ""
        return env_scoring.verify(
            task, text, self.config, self.math_verifier, self.code_verifier, prefix=prefix,
            check_rng=self._check_rng,
        )  # fmt: skip

    def verify_exec(self, task: Task, text: str) -> tuple[float, float, dict]:
        """Score an answer to an ``exec`` task (:func:`sage_env.env_scoring.verify_exec`)."""
        return env_scoring.verify_exec(task, text, self.config, check_rng=self._check_rng)

    def check_verifier(self, task: Task) -> dict:
        """Check a proposed task's verifier (:func:`sage_env.env_scoring.check_verifier`)."""
        return env_scoring.check_verifier(
            task, self.config, self.math_verifier, self.code_verifier,
            check_rng=self._check_rng,
        )  # fmt: skip

    def new_task(self, out: parsing.ChallengerOutput, reference: Task) -> Task:
        """A generated :class:`Task` from a parsed proposal, with provenance.

        Under ``config.math_grounding = "program"`` a math proposal's answer program is kept
        as ``meta["answer_program"]`` (``None`` when it wrote none), for
        :meth:`check_verifier` and as provenance.
        """
        meta: dict[str, Any] = {"episode": self._episode, "protocol": self.protocol.name}
        if reference.domain == "math" and self.config.math_grounding == "program":
            meta["answer_program"] = out.program
        return Task(
            task_id=self.pool.new_id(),
            domain=reference.domain,
            prompt=out.question,
            answer=out.answer,
            tests=list(out.tests),
            entry_point=out.entry_point,
            source="generated",
            parent_id=reference.task_id,
            reference_solution=out.solution,
            meta=meta,
        )

def _group(task: Task) -> str:
    """The advantage group of actions on ``task`` within a role.

    Its domain, or ``"exec/<mode>"`` for an execution task (AZR's per-(task type, role)
    baselines).
    """
    if task.domain == "exec" and isinstance(task.meta, dict):
        mode = (task.meta.get("exec") or {}).get("mode")
        if mode:
            return f"exec/{mode}"
    return task.domain


def _empty_obs() -> dict[str, str]:
    return {"system": "", "user": "", "prefix": ""}


def _check_rng(seed: int | None) -> random.Random:
    """The check runs' generator for ``seed``.

    Derived from it (a string seed is hashed with SHA-512, not by ``hash()``), so it is
    reproducible yet draws other numbers than ``random.Random(seed)``; ``None``: seeded from
    the OS, as :attr:`raw_env.rng` then is.
    """
    return random.Random(None if seed is None else f"sage-env check runs:{seed}")
