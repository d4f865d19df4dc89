"""Rollout driver: plays many environment copies at once with one batched generate per tick.

At each tick the driver collects every live environment's current (agent, observation), makes
one :meth:`Policy.generate` call for all of them (the backbone is shared, so roles mix in one
batch), and steps each environment with its completion. When the environment announces that
an agent will act several times in a row on one observation (``infos[agent]["repeats"]``,
e.g. k solver attempts), all those samples are drawn in the first call; turns announced ahead
(``infos[agent]["ahead"]``: later turns whose observation is fixed already, e.g. the planner's
while the challenger acts under ``EnvConfig.turn_order = "interleaved"``) are drawn in the
same call too, and a turn whose sample is ready is played without a call. Rewards are read with
``env.last()`` at the agent's next turn, which under PettingZoo AEC semantics is exactly the
reward of its previous action (``sage_env`` delivers every reward before the agent acts again).
"""

from __future__ import annotations

import contextlib
import inspect
import time
from dataclasses import replace
from typing import Any

from pettingzoo import AECEnv

from learners.policy.protocols import Policy
from learners.types import RolloutResult, SamplingConfig, Transition, action_text
from sage_env.text.parsing import ScoredReply

MAX_REPEATS = 16
"""Most completions sampled ahead for one announced run of repeats (``infos["repeats"]``)."""


class RolloutDriver:
    """Steps ``envs`` to the end of one episode each, batching generation across them.

    Args:
        envs: PettingZoo AEC environments (all sharing one policy).
        policy: Anything with ``generate(observations, sampling) -> list[Completion]``.
        sampling: Sampling settings.
        phase_max_new_tokens: Token budget per phase or per ``"phase/domain"`` (which wins),
            e.g. ``{"review_question": 48, "challenge/code": 224}``; phases not named use
            ``sampling.max_new_tokens``.
        phase_stop_strings: Stop strings per phase, or per ``"phase/domain"`` (which wins),
            e.g. ``{"plan": ("</plan>",), "solve/code": ("```",)}``; others use
            ``sampling.stop``. A policy whose ``generate`` takes ``budgets`` and ``stops``
            keywords gets every request of a tick in one call with per-row limits; any other
            policy gets one call per distinct (budget, stops).
        lookahead: Sample the turns an environment announces ahead (``infos[agent]["ahead"]``)
            in the current batch. False: only the current turns (and their repeats).

    Raises:
        ValueError: if ``envs`` is empty or a budget is < 1.
    """

    def __init__(
        self,
        envs: list[AECEnv],
        policy: Policy,
        sampling: SamplingConfig,
        phase_max_new_tokens: dict[str, int] | None = None,
        phase_stop_strings: dict[str, tuple[str, ...]] | None = None,
        lookahead: bool = True,
    ) -> None:
        if not envs:
            raise ValueError("RolloutDriver needs at least one environment")
        self.envs, self.policy, self.sampling = envs, policy, sampling
        self.phase_max_new_tokens = dict(phase_max_new_tokens or {})
        bad = {k: v for k, v in self.phase_max_new_tokens.items() if int(v) < 1}
        if bad:
            raise ValueError(f"phase token budgets must be >= 1, got {bad}")
        self.phase_stop_strings = {
            k: tuple(v) for k, v in (phase_stop_strings or {}).items() if v is not None
        }
        self.lookahead = lookahead
        self.frozen_score_phases: frozenset[str] = frozenset()
        """Review phases whose score distributions are read from the policy's frozen scorer
        (``score_distribution(..., frozen=True)``; ``TrainConfig.gate_critic``)."""
        self._rows = 0
        self._calls = 0

    def budget(self, phase: str | None, domain: str | None = None) -> int:
        """The completion budget (tokens) of ``phase`` on a task of ``domain``.

        A ``"phase/domain"`` key wins over ``"phase"``.
        """
        for key in (f"{phase}/{domain}", str(phase)):
            if key in self.phase_max_new_tokens:
                return int(self.phase_max_new_tokens[key])
        return int(self.sampling.max_new_tokens)

    def stops(self, phase: str | None, domain: str | None = None) -> tuple[str, ...]:
        """The stop strings of ``phase`` on a task of ``domain``."""
        for key in (f"{phase}/{domain}", str(phase)):
            if key in self.phase_stop_strings:
                return self.phase_stop_strings[key]
        return tuple(self.sampling.stop)

    def _generate(self, requests: list[tuple[int, str, Any, dict]]) -> list:
        limits = [
            (
                self.budget(info.get("phase"), info.get("domain")),
                self.stops(info.get("phase"), info.get("domain")),
            )
            for _i, _agent, _obs, info in requests
        ]
        observations = [obs for _i, _agent, obs, _info in requests]
        self._rows += len(observations)
        if _takes_row_limits(self.policy.generate):
            self._calls += 1
            return self.policy.generate(
                observations,
                self.sampling,
                budgets=[b for b, _ in limits],
                stops=[st for _, st in limits],
            )
        groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
        for j, key in enumerate(limits):
            groups.setdefault(key, []).append(j)
        completions: list = [None] * len(requests)
        for (budget, stop), idx in sorted(groups.items()):
            sampling = replace(self.sampling, max_new_tokens=budget, stop=stop)
            self._calls += 1
            for j, comp in zip(idx, self.policy.generate([observations[j] for j in idx], sampling)):
                completions[j] = comp
        return completions

    def collect(self, seeds: list[int] | None = None) -> RolloutResult:
        """Reset every environment (with ``seeds[i]`` if given) and play one episode each.

        The whole episode runs inside the policy's ``rollout_session()`` when it has one
        (:meth:`HFPolicy.rollout_session <learners.policy.HFPolicy.rollout_session>`: a
        colocated vLLM engine wakes before it and sleeps after).

        Returns:
            A :class:`RolloutResult` whose transitions carry their rewards.
        """
        session = getattr(self.policy, "rollout_session", None)
        with session() if callable(session) else contextlib.nullcontext():
            return self._collect(seeds)

    def _collect(self, seeds: list[int] | None) -> RolloutResult:
        env_time = 0.0
        gen_time = 0.0
        ticks = 0
        self._rows = self._calls = 0
        self._tokens = 0
        t0 = time.perf_counter()
        for i, e in enumerate(self.envs):
            e.reset(seed=None if seeds is None else seeds[i])
        env_time += time.perf_counter() - t0
        transitions: list[Transition] = []
        awaiting: dict[tuple[int, str], Transition] = {}
        # (env, agent) -> [observation, [(completion, score probs), ...]] entries, in turn order
        ready: dict[tuple[int, str], list[list]] = {}
        announced: dict[int, list[dict]] = {}  # turns announced ahead, not sampled yet
        live = set(range(len(self.envs)))
        while live:
            t0 = time.perf_counter()
            requests: list[tuple[int, str, Any, dict]] = []
            for i in sorted(live):
                while True:  # play env i until it needs a fresh sample
                    request = self._advance(i, awaiting)
                    if request is None:
                        live.discard(i)
                        break
                    if self.lookahead:
                        announced.setdefault(i, []).extend(request[3].get("ahead") or ())
                    sample = _take(ready, request)
                    if sample is None:
                        requests.append(request)
                        break
                    self._play(request, *sample, transitions, awaiting)
            env_time += time.perf_counter() - t0
            if not requests:
                break
            t0 = time.perf_counter()
            samples = self._sample(requests, announced, ready)
            ticks += 1
            gen_time += time.perf_counter() - t0
            t0 = time.perf_counter()
            for request, sample in zip(requests, samples):
                self._play(request, *sample, transitions, awaiting)
            env_time += time.perf_counter() - t0
        transcripts = []
        for e in self.envs:
            text = e.render() if getattr(e, "render_mode", None) == "ansi" else None
            transcripts.append(text or "")
        return RolloutResult(
            transitions,
            transcripts,
            gen_time,
            env_time,
            self._tokens,
            ticks,
            self._rows,
            self._calls,
        )

    def _play(
        self,
        request: tuple[int, str, Any, dict],
        comp: Any,
        probs: tuple | None,
        transitions: list[Transition],
        awaiting: dict[tuple[int, str], Transition],
    ) -> None:
        """Step env ``i`` of ``request`` with ``comp`` and record the transition."""
        i, agent, obs, info = request
        tr = Transition(
            agent=agent,
            role=agent.rsplit("_", 1)[0],
            domain=str(info.get("domain")),
            phase=str(info.get("phase")),
            prompt_ids=comp.prompt_ids,
            completion_ids=comp.completion_ids,
            logprobs=comp.logprobs,
            text=action_text(comp),
            env_index=i,
            prefix=getattr(comp, "prefix", ""),
            truncated=bool(getattr(comp, "truncated", False)),
            group=str(info.get("group") or ""),
            task_id=str(info.get("task_id") or ""),
            observation=str(obs.get("user", "")) if isinstance(obs, dict) else "",
        )
        self._tokens += len(comp.completion_ids)
        transitions.append(tr)
        awaiting[(i, agent)] = tr
        self.envs[i].step(tr.text if probs is None else ScoredReply(tr.text, probs))

    def _score_probs(self, requests: list[tuple[int, str, Any, dict]]) -> dict[int, tuple]:
        """Score distributions for the requests whose ``info`` asks for one.

        The environment sets ``info["score_probs"]`` on critic reviews under
        ``critic_score_estimate = "expected"``; a policy with ``score_distribution``
        (:meth:`HFPolicy.score_distribution <learners.policy.HFPolicy.score_distribution>`)
        reads them in one batched forward pass (the phases in :attr:`frozen_score_phases`
        in a second, from its frozen scorer). Returns ``{request index: probabilities}``;
        empty when nothing asks or the policy cannot answer (the environment then uses the
        sampled score).
        """
        read = getattr(self.policy, "score_distribution", None)
        wanted = [j for j, (_i, _a, _o, info) in enumerate(requests) if info.get("score_probs")]
        if not wanted or not callable(read):
            return {}
        out: dict[int, tuple] = {}
        for frozen in (False, True):
            rows = [
                j
                for j in wanted
                if (requests[j][3].get("phase") in self.frozen_score_phases) == frozen
            ]
            if not rows:
                continue
            kwargs = {"frozen": True} if frozen else {}
            probs = read(
                [requests[j][2] for j in rows],
                temperature=self.sampling.temperature,
                max_prompt_tokens=self.sampling.max_prompt_tokens,
                **kwargs,
            )
            out.update({j: p for j, p in zip(rows, probs) if p is not None})
        return out

    def _sample(
        self,
        requests: list[tuple[int, str, Any, dict]],
        announced: dict[int, list[dict]],
        ready: dict[tuple[int, str], list[list]],
    ) -> list[tuple[Any, tuple | None]]:
        """One ``(completion, score probs)`` per request, drawing ahead in the same batch.

        A request whose ``info["repeats"]`` is n > 1 (the environment will ask the same
        agent n times in a row on this observation, e.g. k solver attempts) gets n samples;
        every turn announced ahead (``announced``, from ``infos[agent]["ahead"]``) that has
        no sample waiting gets its ``repeats`` samples too. The samples not used now wait
        in ``ready`` and answer the turns whose (env, agent, observation) they were drawn
        for. Weights do not change inside a rollout, so these are the same i.i.d. samples
        that separate calls would draw when the turns come, at one call's decoding steps.
        Score distributions are read once per observation (they do not depend on the
        sample).
        """
        rows: list[tuple[int, str, Any, dict]] = []  # one per distinct turn to sample
        counts: list[int] = []
        for i, agent, obs, info in requests:
            rows.append((i, agent, obs, info))
            counts.append(_repeats(info))
        for i in sorted(announced):
            for turn in announced.pop(i):
                key = (i, turn["agent"])
                obs = turn["observation"]
                if any(o == obs for o, _ in ready.get(key, ())) or any(
                    (r[0], r[1], r[2]) == (i, turn["agent"], obs) for r in rows
                ):
                    continue
                rows.append((i, turn["agent"], obs, turn))
                counts.append(_repeats(turn))
        expanded = [row for row, n in zip(rows, counts) for _ in range(n)]
        out = iter(self._generate(expanded))
        probs = self._score_probs(rows)
        samples: list[tuple[Any, tuple | None]] = []
        for j, ((i, agent, obs, _info), n) in enumerate(zip(rows, counts)):
            batch = [(next(out), probs.get(j)) for _ in range(n)]
            if j < len(requests):
                samples.append(batch.pop(0))
            if batch:
                ready.setdefault((i, agent), []).append([dict(obs), batch])
        return samples

    def _advance(
        self, i: int, awaiting: dict[tuple[int, str], Transition]
    ) -> tuple[int, str, Any, dict] | None:
        """Credit rewards and step finished agents until env ``i`` needs an action."""
        e = self.envs[i]
        while e.agents:
            agent = e.agent_selection
            obs, reward, terminated, truncated, info = e.last()
            previous = awaiting.pop((i, agent), None)
            if previous is not None:
                previous.reward = float(reward)
                previous.outcome = info.get("last")
            if terminated or truncated:
                e.step(None)
                continue
            return i, agent, obs, info
        return None


def _repeats(info: dict) -> int:
    """Samples to draw for a turn: its ``repeats`` hint, clipped to [1, MAX_REPEATS]."""
    return min(max(1, int(info.get("repeats", 1) or 1)), MAX_REPEATS)


def _take(
    ready: dict[tuple[int, str], list[list]], request: tuple[int, str, Any, dict]
) -> tuple[Any, tuple | None] | None:
    """Pop a waiting sample drawn for ``request``'s (env, agent, observation), or None."""
    i, agent, obs, _info = request
    entries = ready.get((i, agent))
    if not entries:
        return None
    for entry in entries:
        if entry[0] == obs and entry[1]:
            sample = entry[1].pop(0)
            if not entry[1]:
                entries.remove(entry)
            return sample
    return None


def _takes_row_limits(generate: Any) -> bool:
    """True when ``generate`` accepts per-row ``budgets`` and ``stops`` keywords."""
    try:
        params = inspect.signature(generate).parameters
    except (TypeError, ValueError):
        return False
    return {"budgets", "stops"} <= set(params)
