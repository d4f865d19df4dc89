"""The game through OpenEnv: a server any OpenEnv client (TRL among them) can play.

``pip install -e '.[openenv]'`` first; ``import sage_env`` never imports this module, and
this module is the only one that imports ``openenv`` (docs/guide/openenv.md).

Mapping onto the AEC environment (docs/guide/environment.md):

- **Session**: one OpenEnv WebSocket session owns one AEC environment (:func:`sage_env.env`),
  built from the server's :class:`~sage_env.config.EnvConfig` at the session's first
  ``reset``. Sessions share nothing: each has its own pool, RNG and verifiers, so concurrent
  sessions never see each other's tasks (a session's pool grows over its own rounds, as one
  AEC environment's does over its resets).
- **Episode**: ``reset(seed=...)`` starts one round (``env.reset(seed=...)``); the episode
  ends (``done``) when the round ends (every agent terminated).
- **Action**: :class:`SageAction` ``reply``, the whole reply (prefix + completion), passed to
  ``env.step`` unchanged: any JSON value is accepted and gets the environment's own handling
  (``None`` -> ``""``, other non-strings -> ``str()``, text past ``max_action_chars`` cut).
- **Observation**: :class:`SageObservation` holds the acting agent's ``system``, ``user``,
  ``prefix`` and its ``agent``, ``phase``, ``task_id``, ``domain``, ``repeats``; plus
  ``rewards`` (what this step credited to each agent), ``cumulative_rewards`` (per-agent
  totals of the round so far) and ``infos`` (:func:`public_infos`: each agent's turn and its
  last reward with its terms, decisions and parse reasons (``why``, a review's or plan's
  ``reason``), never a verdict's text or a parsed reply, which can hold a gold answer).
  ``reward`` is the sum of ``rewards``.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import uuid
from typing import Any

from sage_env.config import EnvConfig
from sage_env.outcome import Outcome

INSTALL_HINT = "the OpenEnv server needs openenv-core: pip install -e '.[openenv]'"

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(INSTALL_HINT) from exc


class SageAction(Action):
    """One turn's action: the whole reply of the agent whose turn it is."""

    reply: Any = Field(
        default="",
        description="The whole reply (prefix + completion). Any value: None becomes '', "
        "other non-strings str(), text past max_action_chars is cut (docs/guide/environment.md).",
    )


class SageObservation(Observation):
    """The turn to play next (empty texts once ``done``) and what the last step credited."""

    system: str = Field(default="", description="The acting role's system message.")
    user: str = Field(default="", description="The acting role's user message.")
    prefix: str = Field(default="", description="The start of the reply (write it first).")
    agent: str = Field(default="", description="Agent to act next; '' when done.")
    phase: str = Field(default="", description="Its phase ('done' at the end).")
    task_id: str | None = Field(default=None, description="Task of the next action.")
    domain: str | None = Field(default=None, description="Domain of that task.")
    repeats: int = Field(default=1, description="Actions in a row asked on this observation.")
    acted: str = Field(default="", description="Agent whose action this step applied.")
    rewards: dict[str, float] = Field(
        default_factory=dict, description="Reward this step credited to each agent."
    )
    cumulative_rewards: dict[str, float] = Field(
        default_factory=dict, description="Each agent's total reward in this round so far."
    )
    infos: dict[str, Any] = Field(
        default_factory=dict,
        description="Per agent, the public part of the AEC env's infos (public_infos): the "
        "turn, the last reward with its terms, decisions and parse reasons (why); no verdict "
        "texts.",
    )


class SageState(State):
    """A session's state: the protocol, the turn, the round's totals and the pool size."""

    protocol: str = ""
    agent: str = ""
    phase: str = ""
    done: bool = False
    rounds: int = 0
    pool_size: int = 0
    cumulative_rewards: dict[str, float] = Field(default_factory=dict)


PUBLIC_INFO = ("phase", "task_id", "domain", "repeats", "group", "action_truncated")
"""Per-agent ``infos`` keys a client is sent (the turn, and the cut flag of its reply)."""
PUBLIC_LAST = (
    "phase", "reward", "terms", "accepted", "added_to_pool", "plan_shown", "raw_score", "q",
    "review", "train", "new_task_id",
)  # fmt: skip
"""Keys of ``infos[agent]["last"]`` a client is sent: the reward, its terms and the
decisions, never a text that could hold a gold answer (a verdict's reason reads ``"7 != gold
386"``; ``parsed`` holds the challenger's answer or tests). Parse reasons go too: ``why``
(:func:`sage_env.env_scoring.term_reasons`: one line per format term, read off the reply's
format, never its answer) and the ``reason`` of a review or a plan (what the critic's or
planner's reply lacked: :func:`sage_env.text.parsing.critic_reply_reason`)."""


def public_infos(infos: dict[str, dict]) -> dict[str, dict]:
    """The part of the AEC ``infos`` a remote client may see, per agent.

    The in-process environment shows everything, for debugging; over the network a client is
    an adversary's seat. A solver that read its first attempt's verdict (``"7 != gold 386"``)
    could copy the gold into its next attempt of the same task, and a client that collected
    verdicts and the challenger's ``parsed`` answers across rounds could build a table of gold
    answers for tasks that come back. So only :data:`PUBLIC_INFO` keys are sent, ``last``
    only with :data:`PUBLIC_LAST` keys, every reward term's name with its value when it is a
    number, bool or None (else None), a verdict or verifier check only as its ``status`` and
    ``score``, ``why`` as strings, and ``reason`` only on a review or a plan (a parse reason;
    a verdict's or a proposal check's reason is never sent).
    """
    out: dict[str, dict] = {}
    for agent, info in infos.items():
        kept = {k: info[k] for k in PUBLIC_INFO if k in info}
        last = info.get("last")
        if last is not None:
            kept["last"] = public_outcome(last)
        out[str(agent)] = kept
    return out


def public_outcome(last: Outcome) -> dict[str, Any]:
    """The part of an :class:`~sage_env.outcome.Outcome` a remote client may see.

    :data:`PUBLIC_LAST` of its flat form, the terms with their non-number values as None, a
    verdict or verifier check only as its ``status`` and ``score``, ``why``, and ``reason``
    only on a review or a plan (see :func:`public_infos`).
    """
    flat = last.to_dict()
    public: dict[str, Any] = {k: flat[k] for k in PUBLIC_LAST if k in flat}
    public["terms"] = {
        str(k): v if v is None or isinstance(v, (int, float)) else None
        for k, v in last.terms.items()
    }
    for key, record in (("verdict", last.verdict), ("verifier_check", last.verifier_check)):
        if isinstance(record, dict):
            public[key] = {k: record[k] for k in ("status", "score") if k in record}
    if last.why:
        public["why"] = {str(k): str(v) for k, v in last.why.items()}
    planned = last.decision is not None and last.decision.plan_shown is not None
    if isinstance(last.reason, str) and (last.review is not None or planned):
        public["reason"] = last.reason  # a review's or a plan's parse reason (a solver has none)
    return public


def _json_safe(value: Any) -> Any:
    """``value`` as plain JSON data (unknown objects as ``str``, non-finite floats as None)."""

    def fix(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {str(k): fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    return fix(json.loads(json.dumps(value, default=str)))


class SageEnvironment(Environment[SageAction, SageObservation, SageState]):
    """One OpenEnv session: one AEC environment of ``config``, built at the first reset.

    The AEC environment is built lazily because OpenEnv also instantiates the class for
    stateless requests (``/state``, ``/metadata`` over HTTP) that never play.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, config: EnvConfig | None = None) -> None:
        super().__init__()
        self._config = copy.deepcopy(config) if config is not None else EnvConfig()
        self._env: Any = None
        self._totals: dict[str, float] = {}
        self._state = SageState(protocol=self._config.protocol)

    @property
    def aec_env(self) -> Any:
        """The session's AEC environment (``None`` before the first reset)."""
        return self._env

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> SageObservation:
        """Start a round (``env.reset(seed=seed)``); the pool of earlier rounds is kept."""
        if self._env is None:
            import sage_env

            self._env = sage_env.env(self._config)
        self._env.reset(seed=seed)
        raw = self._env.unwrapped
        self._totals = dict.fromkeys(raw.possible_agents, 0.0)
        self._state = SageState(
            episode_id=episode_id or str(uuid.uuid4()), protocol=self._config.protocol
        )
        return self._observe(acted="", credited=dict.fromkeys(raw.possible_agents, 0.0))

    def step(
        self, action: SageAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SageObservation:
        """Apply the acting agent's reply; raises (an error reply, not a crash) after the end."""
        if self._env is None:
            raise RuntimeError("no round: call reset() first")
        if self._state.done:
            raise RuntimeError("the round is over: call reset() to play the next one")
        raw = self._env.unwrapped
        acted = raw.agent_selection
        reply = action.reply if isinstance(action, SageAction) else action
        self._env.step(reply)
        credited = {a: float(raw.rewards.get(a, 0.0)) for a in raw.possible_agents}
        for agent, reward in credited.items():
            self._totals[agent] = self._totals.get(agent, 0.0) + reward
        self._state.step_count += 1
        return self._observe(acted=acted, credited=credited)

    def _observe(self, acted: str, credited: dict[str, float]) -> SageObservation:
        raw = self._env.unwrapped
        done = not raw.agents or all(
            raw.terminations.get(a) or raw.truncations.get(a) for a in raw.agents
        )
        agent = "" if done else raw.agent_selection
        info = raw.infos.get(agent, {}) if agent else {}
        texts = raw.observe(agent) if agent else {}
        state = self._state
        state.agent, state.phase, state.done = agent, "done" if done else info["phase"], done
        state.rounds, state.pool_size = raw.episode, len(raw.pool.tasks)
        state.cumulative_rewards = dict(self._totals)
        return SageObservation(
            done=done,
            reward=sum(credited.values()),
            system=str(texts.get("system", "")),
            user=str(texts.get("user", "")),
            prefix=str(texts.get("prefix", "")),
            agent=agent,
            phase=state.phase,
            task_id=info.get("task_id"),
            domain=info.get("domain"),
            repeats=int(info.get("repeats", 1) or 1),
            acted=acted,
            rewards=credited,
            cumulative_rewards=dict(self._totals),
            infos=_json_safe(public_infos(raw.infos)),
        )

    @property
    def state(self) -> SageState:
        """The session's :class:`SageState`."""
        return self._state

    def close(self) -> None:
        """Close the AEC environment (its verifier workers)."""
        if self._env is not None:
            self._env.close()
            self._env = None


class SageEnvClient(EnvClient[SageAction, SageObservation, SageState]):
    """OpenEnv client of a sage-env server (async; ``.sync()`` for a blocking one)."""

    def _step_payload(self, action: SageAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SageObservation]:
        fields = dict(payload.get("observation", {}))
        fields.update(done=payload.get("done", False), reward=payload.get("reward"))
        observation = SageObservation.model_validate(fields)
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> SageState:
        return SageState.model_validate(payload)


def make_app(config: EnvConfig | None = None, max_sessions: int = 8) -> Any:
    """The FastAPI app serving ``config``'s game to at most ``max_sessions`` sessions at once."""
    factory = functools.partial(SageEnvironment, config)  # one instance per session
    return create_fastapi_app(
        factory, SageAction, SageObservation, max_concurrent_envs=max_sessions
    )


def serve(
    config: EnvConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 8,
) -> None:
    """Run the server until interrupted (uvicorn)."""
    import uvicorn

    uvicorn.run(make_app(config, max_sessions), host=host, port=port)
