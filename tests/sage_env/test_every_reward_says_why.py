"""Every reward says why (issue 51, item 3): ``infos[agent]["last"]["why"]`` holds one line per
format term, and a reply that only holds the environment's own response prefix earns no
format credit, in every phase of every protocol that has a prefix."""

from __future__ import annotations

import pytest

import sage_env
from sage_env import env_scoring
from sage_env.config import EnvConfig
from sage_env.protocols.registry import available_protocols
from sage_env.tasks.task import Task
from sage_env.text import parsing
from sage_env.verifiers import CodeVerifier, MathVerifier

UNREADABLE = "zz qq ?? this is not readable at all"
SEEDS = range(6)


def _play(protocol: str, reply_for, seeds=SEEDS):
    """Play rounds of ``protocol``; ``reply_for(agent, phase, obs, task)`` returns the action
    or None for the protocol's first scripted reply. Returns ``[(key, acted, last)]`` per
    delivery, where ``acted`` is the credited action's ``(phase, prefix, text)``."""
    out = []
    for seed in seeds:
        env = sage_env.raw_env(protocol=protocol, solver_samples=2)
        env.reset(seed=seed)
        acted = {}
        deliver = env.deliver

        def recording(agent, reward, terms, _deliver=deliver, _env=env, _acted=acted, **details):
            _deliver(agent, reward, terms, **details)
            out.append((_acted.get(agent), dict(_env.infos[agent]["last"])))

        env.deliver = recording
        for agent in env.agent_iter(max_iter=300):
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            task = env.current_task
            text = reply_for(agent, info["phase"], obs, task)
            if text is None:
                replies = env.protocol.scripted_actions(info["phase"], obs, task)
                text = replies[seed % len(replies)] if replies else ""
            mode = (task.meta.get("exec") or {}).get("mode") if task and task.meta else None
            acted[agent] = (info["phase"], task.domain if task else None, mode, obs["prefix"], text)
            env.step(text)
        env.close()
    return out


def _format_terms(terms: dict) -> dict:
    return {k: v for k, v in terms.items() if k in env_scoring.FORMAT_TERMS}


@pytest.mark.parametrize("protocol", available_protocols())
def test_every_nonzero_format_term_carries_a_one_line_reason(protocol):
    def mixed(agent, phase, obs, task):  # well-formed replies, and every third one garbage
        mixed.n += 1
        return obs["prefix"] + UNREADABLE if mixed.n % 3 == 0 else None

    mixed.n = 0
    rows = _play(protocol, mixed, seeds=range(4))
    assert rows
    explained = 0
    for acted, last in rows:
        for term, value in _format_terms(last["terms"]).items():
            if term == "f" and not value:
                continue
            why = last.get("why", {}).get(term)
            assert isinstance(why, str) and why and "\n" not in why, (protocol, acted, last)
            assert not why.startswith("no reason recorded"), (protocol, acted, why)
            explained += 1
    assert explained


@pytest.mark.parametrize("tail", ["", "\n", UNREADABLE])
@pytest.mark.parametrize("protocol", available_protocols())
def test_a_reply_that_only_holds_the_prefix_earns_no_format_credit(protocol, tail):
    """Each phase (per domain and AZR mode) with a non-empty prefix is answered once with its
    prefix alone (plus ``tail``); the delivery that credits that reply has format 0."""
    tried: set = set()

    def prefix_only(agent, phase, obs, task):
        mode = (task.meta.get("exec") or {}).get("mode") if task and task.meta else None
        key = (phase, task.domain if task else None, mode)
        if obs["prefix"] and key not in tried:
            tried.add(key)
            return obs["prefix"] + tail
        return None

    rows = _play(protocol, prefix_only)
    credited = {}
    for acted, last in rows:
        if acted is None or acted[4] != acted[3] + tail:
            continue
        credited.setdefault(acted[:3], []).append(last)
    assert credited and set(credited) == tried, (tried, set(credited))
    for key, lasts in credited.items():
        for last in lasts:
            terms = last["terms"]
            if "f" in terms and terms["f"] is not None:
                assert terms["f"] == 0.0, (protocol, key, last)
            if "formatted" in terms:
                assert terms["formatted"] is False, (protocol, key, last)
    # every built-in protocol has at least one prefixed phase
    assert any(p for p in tried)


def test_the_code_fence_prefix_is_not_code_but_the_models_own_code_is():
    task = Task(
        task_id="t",
        domain="code",
        prompt="Write add(a, b).",
        tests=["assert add(1, 2) == 3"],
        entry_point="add",
    )
    cfg = EnvConfig()
    mv, cv = MathVerifier(workers=0), CodeVerifier()
    fence = "```python\n"

    def fmt(text, prefix=fence):
        return env_scoring.verify(task, text, cfg, mv, cv, prefix=prefix)

    s, f, verdict = fmt(fence + UNREADABLE)
    assert (s, f) == (0.0, 0.0)
    assert "only the environment's" in verdict["format"]
    # without the prefix in play (the reply wrote the fence itself) the soft 0.5 stands
    assert fmt(fence + UNREADABLE, prefix="")[1] == 0.5
    # the model's own code: a broken def still earns the soft 0.5, a right one 1
    assert fmt(fence + "def add(a, b):\n    return a +\n```")[1] == 0.5
    s, f, verdict = fmt(fence + "def add(a, b):\n    return a + b\n```")
    assert (s, f) == (1.0, 1.0) and "compiles" in verdict["format"]
    # a second fence the model opened itself counts as its own
    assert fmt(fence + "```python\nzz qq ??\n```")[1] == 0.5


def test_format_reasons_name_what_was_earned_and_what_was_lost():
    assert parsing.critic_format_reason("<score>8</score> Clear and well posed.") == (
        "<score>8</score> parses (0.75); rationale of 4 words (0.25)"
    )
    assert "(0 of 0.25)" in parsing.critic_format_reason("<score>8</score>")
    assert parsing.plan_format_reason("<plan>\n1. a\n2. b\n</plan>") == (
        "<plan>...</plan> pair (0.5); 2 numbered steps inside <plan> (0.5)"
    )
    assert "want 2 (0 of 0.5)" in parsing.plan_format_reason("<plan>\n1.")


def test_azr_terms_are_explained_in_infos_and_the_transcript():
    env = sage_env.raw_env(protocol="azr", solver_samples=1, render_mode="ansi")
    env.reset(seed=0)
    lasts = []
    for agent in env.agent_iter(max_iter=50):
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        replies = env.protocol.scripted_actions(info["phase"], obs, env.current_task)
        env.step(replies[0])
        if env.infos[agent]["last"] is not None:
            lasts.append(env.infos[agent]["last"])
    azr = [x for x in lasts if "passable" in x.get("terms", {})]
    assert azr
    for last in azr:
        assert set(last["why"]) >= {"passable", "formatted"}
    transcript = env.render()
    assert "why passable=" in transcript and "why formatted=" in transcript
    env.close()
