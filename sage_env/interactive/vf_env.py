"""The game as a verifiers environment (Prime Intellect's ``verifiers==0.4.0``, ``verifiers.v1``).

``load_environment(protocol="sage", **env_kwargs)`` returns a multi-agent ``vf.Env``: one
rollout (a verifiers *episode*) plays one round of the game, one AEC episode of
``sage_env.env(protocol=protocol, **env_kwargs)``. Every turn is one agent run on the seat
named after the acting agent (``challenger_0``, ``critic_0``, ``planner_0``, ``solver_0``;
``proposer_0`` and ``judge_0`` for ``azr`` / ``mae``): the observation's ``system`` and
``user`` become the chat messages, the model's reply (with the observation's ``prefix`` put
in front when the reply does not start with it) is the action. Each turn's trace carries the
reward the environment credited to that action (reward ``sage``); every trace of the round
also carries the round's per-role totals as metrics. ``docs/guide/verifiers_env.md``.

Only this module imports verifiers (the ``vf`` extra; it cannot share a virtual environment
with the ``openenv`` extra). The taskset, the environment and the harness are plugins under the id
:data:`PLUGIN_ID`.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import verifiers.v1 as vf
from openai import AsyncOpenAI
from pydantic import Field
from verifiers.v1.types import content_text

import sage_env

PLUGIN_ID = "sage_env_vf"
"""The verifiers plugin id of the taskset, environment and harness: an alias of this module.

verifiers imports a plugin by a top-level module name (a dotted id is looked up under
``verifiers.v1.tasksets`` and fails), so importing this module registers it under this name
in ``sys.modules``; a process that loads the environment from its config must import
``sage_env.interactive.vf_env`` first."""
SEATS = ("challenger_0", "critic_0", "planner_0", "solver_0", "proposer_0", "judge_0")
"""The agents of the built-in protocols; each is one seat (``--env.<seat>.*``)."""
REWARD = "sage"
"""Name of the reward each turn's trace carries: the environment's reward for that action."""
MAX_TURNS = 1000
"""Turns after which a round is cut (no built-in protocol comes near it)."""

sys.modules.setdefault(PLUGIN_ID, sys.modules[__name__])

__all__ = ["SageEnv", "SageHarness", "SageTaskset", "load_environment", "play_loopback"]


def load_environment(protocol: str = "sage", **env_kwargs: Any) -> SageEnv:
    """The game as a verifiers environment: one rollout plays one round.

    Args:
        protocol: The game (``sage_env.available_protocols()``).
        **env_kwargs: Config overrides for ``sage_env.env`` (``alpha=0.5``,
            ``solver_samples=2``, ``domains=["math"]``, ...); JSON values when the
            environment is served to other processes.

    Raises:
        TypeError: on an unknown override.
        ValueError: on an unknown protocol, a bad value, or a protocol with an agent that has
            no seat (:data:`SEATS`).
    """
    taskset = SageTasksetConfig(id=PLUGIN_ID, protocol=protocol, env_kwargs=dict(env_kwargs))
    probe = sage_env.env(
        protocol=protocol, math_verifier=_NoVerifier(), code_verifier=_NoVerifier(), **env_kwargs
    )
    unseated = sorted(set(probe.possible_agents) - set(SEATS))
    if unseated:
        raise ValueError(f"protocol {protocol!r} has agents without a seat: {unseated}")
    return SageEnv(SageEnvConfig(taskset=taskset))


LOOPBACK_KEY_VAR = "SAGE_VF_LOOPBACK_KEY"
"""The environment variable :func:`play_loopback` sets for verifiers' client (any key works)."""


def play_loopback(
    protocol: str = "sage",
    rounds: int = 1,
    reply: Callable[[list[dict]], str] | None = None,
    **env_kwargs: Any,
) -> list[vf.Episode]:
    """Play ``rounds`` rounds through verifiers against a scripted model: no endpoint needed.

    The model is :func:`sage_env.interactive.loopback.serve_chat`, an OpenAI-compatible chat
    endpoint on ``127.0.0.1`` answering with ``reply(messages)`` (default
    :func:`~sage_env.interactive.loopback.scripted_chat`: well-formed replies by role), and
    verifiers' own client talks to it, as it would to vLLM or an API. Round ``i`` is
    ``reset(seed=i)``. Call it from synchronous code (it runs its own event loop); in async
    code, use ``serve_chat`` and ``env.run_episode`` as it does.

    Args:
        protocol: The game (``sage_env.available_protocols()``).
        rounds: How many rounds (episodes) to play.
        reply: The scripted model: chat messages to reply text.
        **env_kwargs: Config overrides for ``sage_env.env``, as for :func:`load_environment`.

    Returns:
        One ``vf.Episode`` per round; ``episode.traces`` are its turns, each with
        ``trace.agent.name``, ``trace.info["sage"]`` (agent, phase, action) and
        ``trace.reward``.
    """
    import os

    from sage_env.interactive.loopback import scripted_chat, serve_chat

    env = load_environment(protocol, **env_kwargs)

    async def play(base_url: str) -> list[vf.Episode]:
        ctx = vf.ModelContext(
            model="scripted",
            client=vf.EvalClientConfig(base_url=base_url, api_key_var=LOOPBACK_KEY_VAR),
        )
        async with env.serving():
            tasks = list(itertools.islice(iter(env.taskset), rounds))
            return [await env.run_episode(task, ctx) for task in tasks]

    before = os.environ.get(LOOPBACK_KEY_VAR)
    os.environ[LOOPBACK_KEY_VAR] = "loopback"
    try:
        with serve_chat(reply or scripted_chat) as server:
            return asyncio.run(play(server.base_url))
    finally:
        if before is None:
            os.environ.pop(LOOPBACK_KEY_VAR, None)
        else:
            os.environ[LOOPBACK_KEY_VAR] = before


class _NoVerifier:
    """Stands in for the verifiers while :func:`load_environment` checks the arguments."""


# ----------------------------------------------------------------------------- taskset
class SageTasksetConfig(vf.TasksetConfig):
    """Which game a rollout plays: the protocol and the ``sage_env.env`` overrides."""

    protocol: str = "sage"
    """The game (``sage_env.available_protocols()``)."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Config overrides for ``sage_env.env`` (``EnvConfig`` fields)."""


class SageData(vf.TaskData):
    """A round (``info["seed"]``: the ``reset`` seed) or one turn of it (phase, agent)."""

    info: dict[str, Any] = Field(default_factory=dict)


class SageTask(vf.Task[SageData, vf.State, vf.TaskConfig]):
    """A round of the game, or one turn of it."""


class SageTaskset(vf.Taskset[SageTask, SageTasksetConfig]):
    """Round ``i`` is the round that ``reset(seed=i)`` starts; endless."""

    INFINITE = True

    def load(self) -> Iterator[SageTask]:
        """Yield round ``i`` for ``i = 0, 1, ...``."""
        for i in itertools.count():
            yield SageTask(
                SageData(
                    name=f"{self.config.protocol}#{i}",
                    prompt=f"one round of {self.config.protocol!r}, reset(seed={i})",
                    info={"seed": i},
                ),
                self.config.task,
            )


# ----------------------------------------------------------------------------- harness
class SageHarnessConfig(vf.HarnessConfig):
    """No settings: one chat completion per turn."""


class SageHarness(vf.Harness[SageHarnessConfig]):
    """One chat completion on the turn's messages, in process, through the interception."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_):
        """Ask the model once: ``system`` then ``user``; the reply lands on the trace."""
        system, prompt = self.resolve_prompt(data)
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt if isinstance(prompt, str) else str(prompt)}
        ]
        client = AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0)
        try:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        finally:
            await client.close()
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


# ----------------------------------------------------------------------------- env
def _seat() -> vf.AgentConfig:
    return vf.AgentConfig(runtime=vf.SubprocessConfig(), max_turns=1)


class SageEnvConfig(vf.EnvConfig):
    """One seat per agent of the built-in protocols (a seat the protocol lacks never runs)."""

    challenger_0: vf.AgentConfig = _seat()
    critic_0: vf.AgentConfig = _seat()
    planner_0: vf.AgentConfig = _seat()
    solver_0: vf.AgentConfig = _seat()
    proposer_0: vf.AgentConfig = _seat()
    judge_0: vf.AgentConfig = _seat()


def action_text(observation: dict, reply: str) -> str:
    """The action for ``reply``: the observation's prefix in front unless the reply starts with it.

    The action is the whole reply, and a chat endpoint cannot be made to continue a started one.
    """
    prefix = str(observation.get("prefix", "") or "")
    return reply if reply.startswith(prefix) else prefix + reply


def reply_of(trace: vf.Trace) -> str:
    """The model's reply on a turn's trace, as sampled (``""`` when the run failed)."""
    replies = trace.assistant_messages
    return content_text(replies[-1].content) if replies else ""


class SageEnv(vf.Env[SageEnvConfig]):
    """One rollout is one round: the environment drives the agents turn by turn.

    The rounds of one ``SageEnv`` share a task pool (what earlier rounds accepted, the
    self-evolution) and the answer verifiers; their steps run one at a time in a worker
    thread.
    """

    def __init__(self, config: SageEnvConfig) -> None:
        super().__init__(config)
        self._lock = threading.Lock()
        self._owner: Any = None

    def new_round(self, seed: int) -> Any:
        """A ``sage_env`` environment on this env's shared pool, seeds and verifiers, reset."""
        cfg = self.taskset.config
        with self._lock:
            if self._owner is None:  # its pool, seeds and verifiers serve every round
                self._owner = sage_env.env(protocol=cfg.protocol, **cfg.env_kwargs).unwrapped
            owner = self._owner
            game = sage_env.env(
                protocol=cfg.protocol,
                pool=owner.pool,
                seeds=owner.seeds,
                math_verifier=owner.math_verifier,
                code_verifier=owner.code_verifier,
                **cfg.env_kwargs,
            )
            game.reset(seed=seed)
        return game

    async def stop(self) -> None:
        """Close the shared verifiers' worker processes."""
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.close()

    def _step(self, game: Any, action: Any) -> None:
        with self._lock:
            game.step(action)

    async def run(self, task: SageTask, agents: vf.Agents) -> None:
        """Play round ``task.data.info["seed"]``: one agent run per turn."""
        game = await asyncio.to_thread(self.new_round, int(task.data.info["seed"]))
        waiting: dict[str, vf.Trace] = {}
        for n, agent in enumerate(game.agent_iter(max_iter=MAX_TURNS)):
            observation, reward, terminated, truncated, info = game.last()
            if agent in waiting:
                waiting.pop(agent).record_reward(REWARD, float(reward))
            if terminated or truncated:
                await asyncio.to_thread(self._step, game, None)
                continue
            turn = SageTask(
                SageData(
                    name=f"{task.data.name}/{n}:{info['phase']}",
                    system_prompt=observation["system"] or None,
                    prompt=observation["user"],
                    info={
                        "seed": task.data.info["seed"],
                        "turn": n,
                        "agent": agent,
                        "phase": info["phase"],
                        "task_id": info.get("task_id"),
                        "domain": info.get("domain"),
                        "prefix": observation["prefix"],
                    },
                )
            )
            trace = await getattr(agents, agent).run(turn)
            action = action_text(observation, reply_of(trace))
            trace.info["sage"] = {"agent": agent, "phase": info["phase"], "action": action}
            waiting[agent] = trace
            await asyncio.to_thread(self._step, game, action)
        game.close()

    async def finalize(self, task: SageTask, episode: vf.Episode) -> None:
        """Per-role totals of the round as metrics on each trace (docs/guide/verifiers_env.md)."""
        totals: dict[str, float] = {}
        for trace in episode.traces:
            agent = trace.info["sage"]["agent"]
            totals[agent] = totals.get(agent, 0.0) + trace.reward
        for trace in episode.traces:
            for agent, total in totals.items():
                trace.record_metric(f"reward_{agent}", total)
            trace.record_metric("reward_round", sum(totals.values()))
