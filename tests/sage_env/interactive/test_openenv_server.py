"""The game through OpenEnv (sage_env/interactive/openenv_server.py): a server on loopback, played
with OpenEnv's own client classes, gives what the AEC environment gives for the same actions."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

import sage_env
from sage_env.config import EnvConfig
from sage_env.protocols import scripted


def _server_module():
    """``sage_env.interactive.openenv_server``, or skip the test without openenv-core."""
    pytest.importorskip("openenv.core.env_client")
    return pytest.importorskip("sage_env.interactive.openenv_server")


# math only (no code sandbox), k = 2; the in-process math verifier (the test is the client)
CONFIG = EnvConfig(domains=("math",), solver_samples=2, math_workers=0)

SAGE_TURNS = [
    ("challenger_0", "challenge"),
    ("critic_0", "review_question"),
    ("solver_0", "probe"),
    ("solver_0", "probe"),
    ("planner_0", "plan"),
    ("critic_0", "review_plan"),
    ("solver_0", "solve"),
    ("solver_0", "solve"),
]
"""The sequential order of a round whose proposal parses and passes review (k = 2)."""


@pytest.fixture(scope="module")
def base_url():
    uvicorn = pytest.importorskip("uvicorn")
    make_app = _server_module().make_app
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(CONFIG, max_sessions=4), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def reply_for(obs: dict) -> str:
    """A well-formed reply written from the observation alone (what a client can see)."""
    kind = scripted.PHASE_KINDS.get(obs["phase"]) or scripted.infer_kind(obs)
    if kind == "propose":
        return scripted.proposal(obs["domain"] or "math", obs)
    if kind == "review":
        return scripted.REVIEW_PASS
    if kind == "plan":
        return scripted.PLAN
    return scripted.wrong_answer(None)  # "\boxed{0}": well formed, (almost surely) wrong


def play_direct(seed: int, policy) -> dict:
    """A round on ``sage_env.env`` with PettingZoo's loop; rewards summed per agent."""
    env = sage_env.env(CONFIG)
    env.reset(seed=seed)
    turns, actions, totals = [], [], {}
    try:
        for agent in env.agent_iter():
            obs, reward, terminated, truncated, info = env.last()
            totals[agent] = totals.get(agent, 0.0) + reward
            if terminated or truncated:
                env.step(None)
                continue
            view = {**obs, "agent": agent, "phase": info["phase"], "domain": info["domain"]}
            action = policy(view)
            turns.append((agent, info["phase"]))
            actions.append(action)
            env.step(action)
        return {
            "turns": turns,
            "actions": actions,
            "totals": totals,
            "pool": len(env.unwrapped.pool.tasks),
        }
    finally:
        env.close()


def play_remote(client, seed: int, policy, typed: bool = True) -> dict:
    """The same round through an OpenEnv client: the policy sees only the observation."""
    SageAction = _server_module().SageAction
    result = client.reset(seed=seed)
    turns, steps = [], []
    while not result.done:
        obs = result.observation
        view = obs.model_dump() if typed else obs
        turns.append((view["agent"], view["phase"]))
        reply = policy(view)
        result = client.step(SageAction(reply=reply) if typed else {"reply": reply})
        steps.append(result)
    return {"turns": turns, "steps": steps, "last": result.observation}


@pytest.mark.slow
def test_a_round_through_openenv_equals_the_aec_env(base_url):
    SageEnvClient = _server_module().SageEnvClient
    direct = play_direct(3, reply_for)
    assert direct["turns"] == SAGE_TURNS
    with SageEnvClient(base_url=base_url).sync() as client:
        remote = play_remote(client, 3, reply_for)
        state = client.state()
    assert remote["turns"] == SAGE_TURNS
    last = remote["last"]
    assert last.done and last.agent == "" and last.phase == "done"
    assert last.system == last.user == last.prefix == ""
    assert set(last.cumulative_rewards) == {"challenger_0", "critic_0", "solver_0", "planner_0"}
    assert last.cumulative_rewards == pytest.approx(direct["totals"])
    assert sum(direct["totals"].values()) > 0  # the comparison is not all zeros
    for step in remote["steps"]:  # the scalar reward is what the step credited, summed
        assert step.reward == pytest.approx(sum(step.observation.rewards.values()))
    # the step rewards add up to the totals, agent by agent
    for agent, total in direct["totals"].items():
        credited = sum(s.observation.rewards[agent] for s in remote["steps"])
        assert credited == pytest.approx(total)
    assert [s.observation.acted for s in remote["steps"]] == [a for a, _ in SAGE_TURNS]
    # infos carry the reward terms of each agent's last credited action
    assert last.infos["critic_0"]["last"]["phase"] == "review_plan"
    assert state.done and state.step_count == len(SAGE_TURNS) and state.rounds == 1
    assert state.cumulative_rewards == pytest.approx(direct["totals"])
    assert state.pool_size == direct["pool"]


@pytest.mark.slow
def test_the_first_observation_is_the_challengers(base_url):
    SageEnvClient = _server_module().SageEnvClient
    with SageEnvClient(base_url=base_url).sync() as client:
        first = client.reset(seed=3)
    obs = first.observation
    env = sage_env.env(CONFIG)
    try:
        env.reset(seed=3)
        assert obs.model_dump(include={"system", "user", "prefix"}) == env.observe("challenger_0")
        assert (obs.agent, obs.phase, obs.domain) == ("challenger_0", "challenge", "math")
        assert obs.task_id == env.unwrapped.infos["challenger_0"]["task_id"]
    finally:
        env.close()
    assert not first.done and first.reward == 0
    assert obs.prefix == "<question>"


@pytest.mark.slow
def test_two_concurrent_sessions_do_not_interfere(base_url):
    SageAction, SageEnvClient = _server_module().SageAction, _server_module().SageEnvClient
    seeds = (3, 11)
    direct = {s: play_direct(s, reply_for) for s in seeds}
    a = SageEnvClient(base_url=base_url).sync()
    b = SageEnvClient(base_url=base_url).sync()
    with a, b:
        results = {c: c.reset(seed=s) for c, s in zip((a, b), seeds)}
        firsts = [r.observation.user for r in results.values()]
        assert firsts[0] != firsts[1]  # two different rounds
        totals = {}
        while not all(r.done for r in results.values()):  # step the two rounds in turn
            for client, seed in zip((a, b), seeds):
                if not results[client].done:
                    reply = reply_for(results[client].observation.model_dump())
                    results[client] = client.step(SageAction(reply=reply))
                totals[seed] = results[client].observation.cumulative_rewards
        states = {s: c.state() for c, s in zip((a, b), seeds)}
        # both sessions are open at once, each with its own pool
        assert states[3].episode_id != states[11].episode_id
    for seed in seeds:
        assert totals[seed] == pytest.approx(direct[seed]["totals"])
        assert states[seed].pool_size == direct[seed]["pool"]

    # truly parallel: two threads, each its own client and session
    out: dict[int, dict] = {}

    def run(seed: int) -> None:
        with SageEnvClient(base_url=base_url).sync() as client:
            out[seed] = play_remote(client, seed, reply_for)

    threads = [threading.Thread(target=run, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for seed in seeds:
        assert out[seed]["last"].cumulative_rewards == pytest.approx(direct[seed]["totals"])


MALFORMED = [12345, None, "x" * 1_000_000, ["a", 1], {"k": 1}, 1.5, True, "é" * 30_000]


def malformed_policy():
    replies = iter(MALFORMED * 4)
    return lambda obs: next(replies)


@pytest.mark.slow
def test_malformed_actions_get_the_envs_handling_not_a_crash(base_url):
    from openenv.core.generic_client import GenericEnvClient

    direct = play_direct(5, malformed_policy())
    with GenericEnvClient(base_url=base_url).sync() as client:  # raw JSON actions
        remote = play_remote(client, 5, malformed_policy(), typed=False)
        last = remote["last"]
        assert remote["turns"] == direct["turns"]
        assert last["cumulative_rewards"] == pytest.approx(direct["totals"])
        # the proposal (12345) does not parse: format score 0, the round goes on
        assert remote["turns"][:2] == [("challenger_0", "challenge"), ("planner_0", "plan")]
        assert last["cumulative_rewards"]["challenger_0"] == 0.0
        # the huge reply was cut and flagged
        cut = [
            s.observation["infos"][a].get("action_truncated")
            for s, (a, _) in zip(remote["steps"], remote["turns"])
        ]
        assert {"chars": 1_000_000, "kept": CONFIG.max_action_chars} in cut
        # a payload that is not an action, and a step after the end: error replies
        with pytest.raises(RuntimeError, match="Server error"):
            client.step({"text": "not the field"})
        with pytest.raises(RuntimeError, match="round is over"):
            client.step({"reply": "late"})
        # the session still serves: the next round starts
        again = client.reset(seed=5)
        assert not again.done and again.observation["agent"] == "challenger_0"


def test_import_sage_env_does_not_import_openenv():
    code = "import sys, sage_env, sage_env.interactive.play; print('openenv' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_serve_without_openenv_says_how_to_install(monkeypatch, capsys):
    import importlib.util

    from learners.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openenv" else real(name, *a)
    )
    assert main(["serve", "--port", "0"]) == 2
    assert "pip install -e '.[openenv]'" in capsys.readouterr().err


def test_serve_rejects_an_unknown_protocol(capsys):
    _server_module()
    from learners.cli import main

    assert main(["serve", "--protocol", "no-such-game", "--port", "0"]) == 2
    assert "unknown protocol" in capsys.readouterr().err


def test_serve_rejects_bad_settings_before_serving(capsys):
    from learners.cli import main

    assert main(["serve", "--max-sessions", "0", "--port", "0"]) == 2
    assert "--max-sessions must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:  # argparse refuses a choice it does not offer
        main(["serve", "--math-grounding", "nope", "--port", "0"])
    assert done.value.code == 2


@pytest.mark.slow
def test_a_client_never_sees_a_gold_answer(base_url):
    """A verdict's reason reads "0 != gold 386" and the challenger's parsed reply holds its
    answer: over the network neither is sent, so a solver cannot copy the gold into its next
    attempt, nor a client collect gold answers across rounds. The reward terms still are."""
    import json

    server = _server_module()
    SageEnvClient = server.SageEnvClient
    seen = []
    with SageEnvClient(base_url=base_url).sync() as client:
        for seed in (3, 4, 5):
            remote = play_remote(client, seed, reply_for)
            seen += [s.observation for s in remote["steps"]]
    # the same rounds in process: the gold answers of the tasks played and the proposals
    golds, reasons, parsed_answers = set(), [], set()
    for seed in (3, 4, 5):
        env = sage_env.env(CONFIG)
        env.reset(seed=seed)
        for agent in env.agent_iter():
            obs, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            task = env.unwrapped.current_task
            if task is not None and task.answer:
                golds.add(str(task.answer))
            view = {**obs, "agent": agent, "phase": info["phase"], "domain": info["domain"]}
            env.step(reply_for(view))
            last = env.unwrapped.infos[agent].get("last") or {}
            verdict = last.get("verdict", {})
            if verdict.get("reason") != verdict.get("format"):  # "no Python code found" is both
                reasons.append(str(verdict.get("reason", "")))
            reasons.append(str(last.get("verifier_check", {}).get("reason", "")))
            parsed_answers.add(str((last.get("parsed") or {}).get("answer") or ""))
        env.close()
    assert any("gold" in r for r in reasons)  # in process the verdict names the gold
    assert golds
    leaks = {r for r in reasons if len(r) > 3} | {a for a in parsed_answers if len(a) > 3}
    assert leaks
    for obs in seen:
        text = json.dumps(obs.infos)
        assert "gold" not in text and '"parsed"' not in text
        assert not [leak for leak in leaks if leak in text], obs.infos
    solver_last = [o.infos["solver_0"]["last"] for o in seen if o.infos["solver_0"].get("last")]
    assert solver_last and all(set(x["verdict"]) <= {"status", "score"} for x in solver_last)
    assert all(isinstance(x["terms"]["s_gt"], float) for x in solver_last)
    # parse reasons and term names do cross (issue 51): why each format term has its value,
    # and a review's reason (what its reply lacked: "" when well-formed)
    whys = [x["why"]["f"] for x in solver_last]  # "\boxed{0}" on math and on code tasks
    assert set(whys) == {"a \\boxed{} answer", "no Python code found"}
    lasts = [x["last"] for o in seen for x in o.infos.values() if x.get("last")]
    reviews = [x for x in lasts if "review" in x]
    assert reviews and all(x["reason"] == "" and x["why"]["f"] for x in reviews)
    challenger = [x for x in lasts if "q" in x["terms"]]
    assert challenger and all({"q", "d", "f"} <= set(x["terms"]) for x in challenger)
    assert all("reason" not in x for x in solver_last + challenger)
