"""Expose one role of a sage-env round as a single-agent Gymnasium environment.

:class:`SingleRoleEnv` turns the multi-agent AEC round into a ``gymnasium.Env`` for one agent
(say ``"challenger_0"``); every other agent is played by a *player*, the same callable
``(agent, observation, info, env) -> str`` that :mod:`sage_env.interactive.play` uses. Any Gymnasium
algorithm — Stable-Baselines3, CleanRL, your own loop — can then train that role. See
``docs/guide/sb3.md``.

This module imports neither Stable-Baselines3 nor torch: it is plain Gymnasium.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
from pettingzoo import AECEnv

from sage_env.env import env as make_env
from sage_env.interactive.play import PLAYERS, Player

MAX_AEC_STEPS = 10_000
"""Safety bound on the other agents' AEC steps between two turns of the role."""


class SingleRoleEnv(gymnasium.Env):
    """One agent of a ``sage_env`` AEC environment as a Gymnasium environment.

    The other agents of the round are played by ``players``. :meth:`reset` starts a round and
    plays the others until it is the role's turn; :meth:`step` applies the role's action, then
    plays the others until the role's next turn or the end of the round.

    **Reward.** The reward returned by :meth:`step` is exactly the role's reward for the
    action just taken: the environment delivers every reward before the same agent acts again
    or at the end of the round (``docs/reference/rewards.md``), so it is read with ``env.last()``
    at the role's next turn or at its terminated turn. Rewards are floats, in [0, 1] for the
    built-in protocols (except ``azr`` with ``AZRConfig.format_penalty``).

    **Episodes.** By default one Gymnasium episode is one round: ``terminated`` is True on the
    step after which the round ended. A role that acts several times per round (the solver:
    ``k`` probes and ``k`` solves; the critic: two reviews) takes several steps per episode.
    With ``rounds_per_episode=n`` the episode chains ``n`` rounds: at a round's end a new round
    starts at once (its RNG continues, it is not reseeded) and the step returns the first
    observation of the new round with ``terminated=False``. A round in which the role never
    gets a turn is skipped.

    **Spaces.** The environment's own text spaces: observations ``{"system": str,
    "user": str, "prefix": str}`` in ``Dict(system=AnyText, user=AnyText, prefix=AnyText)``
    (``prefix`` is the start of the reply; an action is the whole reply, so a policy
    returns ``prefix + completion``); actions any ``str`` in
    ``AnyText(max_action_chars)`` (longer text is cut, malformed text scores format 0).
    Stable-Baselines3's algorithms cannot consume text; wrap this environment to map a
    numeric action to text and text to a numeric observation (``examples/sb3_curriculum.py``).

    **Info.** ``info`` is the environment's ``infos[role]`` at the role's turn: ``phase``,
    ``task_id`` and ``domain`` of the role's next action (``phase == "done"`` at the round's
    end) and ``last``, the :class:`~sage_env.outcome.Outcome` of its most recently scored
    action: every parsed field, verifier verdict, gate and reward term (``None`` before the
    first; when a chained round has just started,
    still the record of the action that ended the previous one). It also holds ``round``
    (rounds started in this episode, from 1).

    Args:
        env: A ``sage_env`` AEC environment (``sage_env.env(...)``); ``None`` to build one
            with ``sage_env.env(**env_kwargs)``. This wrapper owns it: :meth:`close` closes it.
        role: The agent id exposed, e.g. ``"challenger_0"``.
        players: The other agents' players: one :data:`~sage_env.interactive.play.Player` for all of
            them, or ``{agent_id: player}`` (missing agents get the default). Default:
            ``sage_env.interactive.play.PLAYERS["scripted"]``.
        rounds_per_episode: Rounds chained into one episode (>= 1).
        max_skipped_rounds: How many rounds in a row without a turn for the role are
            tolerated before :class:`RuntimeError`.
        **env_kwargs: Passed to ``sage_env.env`` when ``env`` is ``None`` (config overrides
            such as ``solver_samples=2``, ``domains=("math",)``, ``render_mode="ansi"``).

    Raises:
        ValueError: if ``role`` is not an agent of the environment, ``rounds_per_episode < 1``,
            or ``env`` and ``env_kwargs`` are both given.
    """

    metadata = {"render_modes": ["human", "ansi"]}

    def __init__(
        self,
        env: AECEnv | None = None,
        role: str = "challenger_0",
        players: Player | Mapping[str, Player] | None = None,
        rounds_per_episode: int = 1,
        max_skipped_rounds: int = 100,
        **env_kwargs: Any,
    ) -> None:
        if env is not None and env_kwargs:
            raise ValueError("pass either an environment or sage_env.env keyword arguments")
        if env is None:
            env = make_env(**env_kwargs)
        if role not in env.possible_agents:
            raise ValueError(f"role {role!r} is not one of {list(env.possible_agents)}")
        if rounds_per_episode < 1:
            raise ValueError(f"rounds_per_episode must be >= 1, got {rounds_per_episode}")
        self.aec = env
        self.role = role
        self.rounds_per_episode = int(rounds_per_episode)
        self.max_skipped_rounds = int(max_skipped_rounds)
        default = PLAYERS["scripted"]
        if players is None or callable(players):
            one: Player = players if players is not None else default
            self.players: dict[str, Player] = {a: one for a in env.possible_agents if a != role}
        else:
            unknown = set(players) - set(env.possible_agents)
            if unknown:
                raise ValueError(f"players for unknown agents: {sorted(unknown)}")
            self.players = {a: players.get(a, default) for a in env.possible_agents if a != role}
        self.observation_space = env.observation_space(role)
        self.action_space = env.action_space(role)
        self.render_mode = getattr(env.unwrapped, "render_mode", None)
        self._round = 0
        self._done = True

    # --------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """Start an episode: reset the round and play the others until the role's turn.

        Args:
            seed: Reseeds the environment's RNG (seed-task and pool draws) and
                ``self.np_random``; ``None`` continues the current RNG.
            options: Unused.

        Returns:
            ``(observation, info)``: the role's ``{"system", "user", "prefix"}`` and its info.

        Raises:
            RuntimeError: if the role gets no turn in ``max_skipped_rounds`` rounds in a row.
        """
        super().reset(seed=seed)
        self._round = 0
        self._done = False
        self._start_round(seed)
        return self._observe(), self._info()

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        """Apply the role's action, then play the others until its next turn or round end.

        Args:
            action: The role's text (any ``str``; other values are coerced by the env).

        Returns:
            ``(observation, reward, terminated, truncated, info)``. ``reward`` is the role's
            reward for ``action`` (a float, unitless). At the episode's end ``observation``
            is the role's last observation and ``info["phase"] == "done"``.

        Raises:
            RuntimeError: if called before :meth:`reset` or after the episode ended, or if
                the round never returns the turn to the role.
        """
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset()")
        self.aec.step(action)
        self._play_others()
        obs, reward, terminated, truncated, _ = self.aec.last()
        reward = float(reward)
        if not (terminated or truncated):
            return self._observe(), reward, False, False, self._info()
        if self._round < self.rounds_per_episode:
            last = self._info()["last"]
            self._drain()
            self._start_round(None)
            info = self._info()
            info["last"] = last  # the record of the rewarded action, from the ended round
            return self._observe(), reward, False, False, info
        observation, info = self._observe(), self._info()
        self._drain()
        self._done = True
        return observation, reward, bool(terminated), bool(truncated), info

    def render(self) -> str | None:
        """Render the underlying round (``render_mode="ansi"`` returns the transcript)."""
        return self.aec.render()

    def close(self) -> None:
        """Close the underlying AEC environment (its verifier worker processes)."""
        self.aec.close()

    # ---------------------------------------------------------------- internals
    def _start_round(self, seed: int | None) -> None:
        for _ in range(self.max_skipped_rounds + 1):
            self.aec.reset(seed=seed)
            seed = None
            self._round += 1
            self._play_others()
            if not (self.aec.terminations[self.role] or self.aec.truncations[self.role]):
                return
            self._drain()  # the round ended without a turn for the role: skip it
        raise RuntimeError(
            f"{self.role} got no turn in {self.max_skipped_rounds + 1} rounds in a row"
        )

    def _play_others(self) -> None:
        """Step the AEC env until the selected agent is the role (live or terminated)."""
        for _ in range(MAX_AEC_STEPS):
            agent = self.aec.agent_selection
            if agent == self.role:
                return
            obs, _, terminated, truncated, info = self.aec.last()
            if terminated or truncated:
                self.aec.step(None)
            else:
                self.aec.step(self.players[agent](agent, obs, info, self.aec))
        raise RuntimeError(f"no turn for {self.role} within {MAX_AEC_STEPS} steps")

    def _drain(self) -> None:
        """Remove every terminated agent so the finished round is closed cleanly."""
        for _ in range(MAX_AEC_STEPS):
            if not self.aec.agents:
                return
            agent = self.aec.agent_selection
            obs, _, terminated, truncated, info = self.aec.last()
            if terminated or truncated or agent == self.role:
                self.aec.step(None)
            else:  # an agent still live after the role's end: let its player finish
                self.aec.step(self.players[agent](agent, obs, info, self.aec))
        raise RuntimeError("the round did not end")

    def _observe(self) -> dict[str, str]:
        obs = self.aec.observe(self.role)
        return {"system": obs["system"], "user": obs["user"], "prefix": obs.get("prefix", "")}

    def _info(self) -> dict[str, Any]:
        info = dict(self.aec.infos[self.role])  # "last": an Outcome, immutable, or None
        info["round"] = self._round
        return info
