"""The protocol interface: what a game played by :class:`sage_env.raw_env` must provide.

A protocol owns the turn order and the rewards of one round; the environment owns the AEC
bookkeeping (spaces, rewards, infos, rendering), the verifiers and the pool. A protocol talks
to the environment only through its *protocol API*:

- ``env.select(agent, phase, task, observation, repeats=1)``: give the turn to ``agent``
  (``repeats``: how many actions in a row it will give on this observation, e.g. k solver
  attempts; drivers then sample them in one batch);
- ``env.announce(agent, phase, task, observation, repeats=1)``, after ``select``: a later
  turn of this round that is certain to come and whose observation is fixed already
  (``infos[agent]["ahead"]``; drivers sample it in the current batch);
- ``env.deliver(agent, reward, terms, **details)``: credit the agent's last action (its
  :class:`~sage_env.outcome.Outcome`; ``details`` are keys of :data:`sage_env.outcome.KEYS`);
- ``env.finish()``: end the round;
- ``env.verify(task, text)`` -> ``(s_gt, format, verdict)``: score an answer externally;
- ``env.check_verifier(task)``: check a proposed task's own verifier;
- ``env.draw_reference()``, ``env.pool``, ``env.rng``, ``env.config``, ``env.soft(...)``,
  ``env.new_task(...)``;
- ``env.check_rng``: the generator of the sandbox's check runs (``check_rng=`` of
  :mod:`sage_env.verifiers.executor`'s and
  :mod:`sage_env.verifiers.answer_checks`' checks), apart from ``env.rng``;
- ``env.config.protocol_config``: the protocol's own settings, an instance of its
  :attr:`Protocol.config_cls` (``None`` when it has none).

Rules a protocol must keep (``sage_env.check_protocol`` tests them): ``start`` selects an
agent; every action is credited exactly once, before the same agent acts again or at the
round's end; rewards are finite; every round ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sage_env import rewards
from sage_env.text import parsing
from sage_env.text.prompts import CODE_PREFIX, DEFAULT_PREFIXES

if TYPE_CHECKING:
    from sage_env.protocols.api import ProtocolEnv
    from sage_env.protocols.demonstrations import Demonstration
    from sage_env.tasks.task import Task


class Protocol:
    """Base class of a game.

    Subclass it, set ``name`` and ``agents``, and implement :meth:`start` and one
    ``on_<phase>(env, text)`` method per phase you select.

    One protocol instance serves one environment; keep per-round state on ``self`` and reset
    it in :meth:`start`.
    """

    name: str = "protocol"
    """Registry name (``EnvConfig.protocol``)."""
    agents: tuple[str, ...] = ()
    """PettingZoo agent ids, ``role_index`` (``"solver_0"``); the role names the learner's
    advantage group."""

    domains: tuple[str, ...] | None = None
    """Task domains this game trains the solver on whatever ``EnvConfig.domains`` says (AZR:
    ``("exec",)``), or ``None`` (default): ``EnvConfig.domains``. ``sage-env compare`` scores
    each arm on the held-out sets of these domains."""

    config_cls: type | None = None
    """The dataclass of this protocol's own settings, or ``None`` (default: it has none).

    ``EnvConfig.protocol_config`` then holds an instance of it (its defaults unless given),
    built from a mapping in Python (``protocol_config={"format_penalty": True}``), a YAML
    ``env: {protocol_config: ...}`` section or ``--env.protocol-config.*`` flags; an unknown
    key is an error naming the known ones. Handlers read it as
    ``env.config.protocol_config``. Give every field a default, a plain type (numbers,
    strings, bools, tuples of them) and a docstring, which becomes the flag's help; validate
    values in ``__post_init__``. Example: :class:`~sage_env.protocols.azr.AZRConfig`."""

    phases: dict[str, str] = {}
    """Kind (``"propose"``, ``"review"``, ``"plan"`` or ``"solve"``) of phases whose reply
    looks like a built-in one, e.g. ``{"attempt": "solve"}``; it tells scripted players and
    :func:`sage_env.check_protocol` how to play them (:mod:`sage_env.protocols.scripted`).
    Built-in phase names, and phases whose observation uses a built-in role prompt of
    :mod:`sage_env.text.prompts`, need no entry. A phase of another kind needs
    :meth:`scripted_actions`."""

    def start(self, env: ProtocolEnv) -> None:
        """Begin a round: set up state and ``env.select`` the first agent."""
        raise NotImplementedError

    def phase_kind(self, phase: str, observation: dict | None = None) -> str | None:
        """The kind of ``phase``: :attr:`phases`, else the built-in name, else the observation.

        Returns:
            ``"propose"``, ``"review"``, ``"plan"``, ``"solve"``, or ``None`` when unknown.
        """
        from sage_env.protocols import scripted

        return (
            self.phases.get(phase)
            or scripted.PHASE_KINDS.get(phase)
            or scripted.infer_kind(observation)
        )

    def handled_phases(self) -> set[str]:
        """Phases this protocol can play: its ``on_<phase>`` handlers and :attr:`phases`.

        :func:`sage_env.check_protocol` reports each one its rounds never reach.
        """
        handlers = {
            name[3:]
            for name in dir(type(self))
            if name.startswith("on_") and callable(getattr(type(self), name, None))
        }
        return handlers | set(self.phases)

    def scripted_actions(self, phase: str, observation: dict, task: Task | None) -> list[str]:
        """Well-formed replies a scripted player may give in ``phase`` on ``task``.

        :func:`sage_env.check_protocol` plays them in turn (the first, then the next, per
        phase and round; a second pass starts at the second), so list one reply per branch
        your handler takes: a passing and a failing score, a right and a wrong answer. The
        ``oracle`` and ``scripted`` players of ``sage-env play`` give the first (``scripted``
        answers solve-kind phases wrong).

        Default: the replies of the phase's kind (:meth:`phase_kind`, table in
        :mod:`sage_env.protocols.scripted`); ``[]`` for an unknown kind, which
        ``check_protocol`` reports. Override it for a phase of your own kind.

        Args:
            phase: The phase name given to ``env.select``.
            observation: The acting agent's observation (``system``, ``user``, ``prefix``).
            task: The task of the phase (``env.current_task``; the seed for a proposer).

        Returns:
            The replies, best first (a gold answer before a wrong one, a passing score
            before a failing one).
        """
        from sage_env.protocols import scripted

        return scripted.replies(self.phase_kind(phase, observation), task, observation)

    def demonstrations(
        self,
        domains: tuple[str, ...] | list[str],
        seeds: list[Task],
        n: int,
        mix: dict[str, float],
        seed: int = 0,
        exclude: list[Task] | None = None,
        math_grounding: str = "claim",
        domain_weights: dict[str, float] | None = None,
    ) -> list[Demonstration]:
        """The game's warm-up demonstrations, built only from ``seeds``.

        A supervised format warm-up before RL;
        :func:`sage_env.protocols.warmup.demonstrations_for` calls it with the run's
        settings.

        Default: SAGE's four roles' formats
        (:func:`sage_env.protocols.warmup.sage_formats`). Override it when the game's
        replies look different (AZR: its execution tasks in its own prompts).
        ``domain_weights``: ``EnvConfig.domain_weights`` (the rounds' domain mix; ``None``:
        uniform), passed only when set.
        """
        from sage_env.protocols.warmup import sage_formats

        return sage_formats(
            domains, seeds, n, mix, seed, exclude, math_grounding, domain_weights=domain_weights
        )

    def prefix(self, phase: str, task: Task) -> str:
        """The start of the reply the environment asks for in ``phase`` on ``task``.

        Default: :data:`DEFAULT_PREFIXES` by phase name; ``probe``/``solve`` get
        :data:`CODE_PREFIX` on code tasks; on ``exec`` tasks the proposing and solving phases
        open the fenced block of the task's mode (:data:`sage_env.tasks.exec_tasks.SOLVER_PREFIX`,
        :func:`~sage_env.tasks.exec_tasks.proposer_prefix`); any other phase ``""``. Override it (or
        put ``"prefix"`` into the observation passed to ``env.select``) for other phases.
        """
        if task.domain == "exec":  # AZR's execution tasks: open the block the mode asks for
            from sage_env.tasks import exec_tasks

            mode = exec_tasks.exec_mode(task) or "deduction"
            if phase in ("probe", "solve"):
                return exec_tasks.SOLVER_PREFIX[mode]
            if phase in ("challenge", "propose"):
                return exec_tasks.proposer_prefix(mode, task)
        if phase in ("probe", "solve"):
            return CODE_PREFIX if task.domain == "code" else ""
        return DEFAULT_PREFIXES.get(phase, "")

    def step(self, env: ProtocolEnv, agent: str, phase: str, text: str) -> None:
        """Handle ``agent``'s action ``text`` in ``phase`` (default: call ``on_<phase>``).

        Raises:
            NotImplementedError: if the protocol has no handler for ``phase``.
        """
        handler = getattr(self, f"on_{phase}", None)
        if handler is None:
            raise NotImplementedError(f"protocol {self.name!r} has no on_{phase} handler")
        handler(env, text)


def propose(
    env: ProtocolEnv, text: str, reference: Task
) -> tuple[parsing.ChallengerOutput, Task | None, dict | None]:
    """Parse and vet a proposed task (Challenger/Proposer action) against ``reference``.

    A well-formed proposal becomes a candidate :class:`Task`; it is then rejected when the
    pool already holds it (format score 0) or when its own verifier fails
    :meth:`raw_env.check_verifier` (format score 0.5, the question part was fine). Under
    ``math_grounding = "program"`` that check runs a math proposal's answer program, and the
    candidate's answer becomes the program's value (``docs/reference/rewards.md``,
    "Math grounding").

    Returns:
        ``(parsed, candidate or None, verifier check or None)``.
    """
    out = parsing.parse_challenger(text, reference.domain, env.config.max_task_chars)
    if not out.valid:
        return out, None, None
    candidate = env.new_task(out, reference)
    duplicate = env.pool.duplicate_of(candidate) or _copies_example(candidate.prompt)
    if duplicate is not None:
        out.valid, out.format_score, out.reason = False, 0.0, duplicate
        return out, None, None
    check = env.check_verifier(candidate)
    if check["status"] != "passed":
        out.valid, out.format_score = False, 0.5
        out.reason = f"verifier check failed: {check['reason']}"
        return out, None, check
    return out, candidate, check


def _copies_example(question: str) -> str | None:
    from sage_env.tasks.pool import jaccard, shingles
    from sage_env.text.prompts import EXAMPLE_QUESTIONS

    mine = shingles(question)
    for example in EXAMPLE_QUESTIONS:
        if jaccard(mine, shingles(example)) >= 0.9:
            return "copies the example question of the prompt"
    return None


def review_parts(env: ProtocolEnv, text: str) -> tuple[float | None, float, float]:
    """Parse a critic/judge reply: ``(raw 1-10 score or None, format score, normalised score)``.

    The format score follows ``format_rule``; the score is normalised by
    ``critic_score_rule`` (0 when unparseable).
    """
    raw = parsing.parse_critic_score(text)
    f = env.soft(parsing.critic_format_score(text), parsing.critic_format_binary(text))
    return raw, f, rewards.normalise_critic_score(raw, env.config.rewards.critic_score_rule)


def gate_estimate(env: ProtocolEnv, sampled: float) -> tuple[float, dict]:
    """The review score the gates and the reviewed role's reward use, and its ``infos``.

    Under ``critic_score_estimate = "expected"`` and when the action carried a valid score
    distribution (:class:`~sage_env.text.parsing.ScoredReply`), the normalised expected score
    ``sum_s s p(s)``; otherwise ``sampled``, the normalised score of the sampled reply.

    Returns:
        ``(score in [0, 1], details)``; ``details`` is empty under ``"sampled"``, else it
        names the estimate used (``score_estimate``), the expected raw score and the
        sampled score.
    """
    rules = env.config.rewards
    if rules.critic_score_estimate != "expected":
        return sampled, {}
    value = parsing.expected_critic_score(env.action_score_probs)
    if value is None:
        return sampled, {"score_estimate": "sampled", "sampled_score": sampled}
    score = rewards.normalise_critic_score(value, rules.critic_score_rule)
    return score, {
        "score_estimate": "expected",
        "expected_raw_score": round(value, 4),
        "sampled_score": sampled,
    }


def review(env: ProtocolEnv, agent: str, text: str, kind: str, key: str) -> float:
    """Score a critic/judge action: parse its 1-10 score, credit its format, return the score.

    The reviewer's reward is its format score (soft or binary per ``format_rule``); the score
    is normalised by ``critic_score_rule`` (0 when unparseable). ``infos`` get ``reason``:
    why the reply lost format credit (:func:`~sage_env.text.parsing.critic_reply_reason`; ``""``
    when well-formed). The score returned (and
    published as ``infos[agent]["last"][key]``) is :func:`gate_estimate`'s: the sampled
    score, or the expected one under ``critic_score_estimate = "expected"``.

    Args:
        env: The environment.
        agent: The reviewing agent (``"critic_0"``, ``"judge_0"``).
        text: Its action.
        kind: What was reviewed (``"question"``, ``"plan"``, ``"answer"``), for ``infos``.
        key: Name of the normalised score in ``infos`` (``"q"``, ``"p"``, ``"j"``).

    Returns:
        The normalised score in [0, 1].
    """
    raw, f, sampled = review_parts(env, text)
    score, details = gate_estimate(env, sampled)
    env.deliver(
        agent,
        *rewards.critic_reward(f),
        raw_score=raw,
        reason=parsing.critic_reply_reason(text),
        review=kind,
        **{key: score},
        **details,
    )
    return score


def public(out: parsing.ChallengerOutput | None) -> dict:
    """The parsed fields of a proposal, for ``infos``."""
    if out is None:
        return {}
    return {
        "question": out.question,
        "answer": out.answer,
        "tests": out.tests,
        "entry_point": out.entry_point,
        "program": out.program,
        "valid": out.valid,
        "well_formed": out.well_formed,
        "format_score": out.format_score,
        "reason": out.reason,
    }
