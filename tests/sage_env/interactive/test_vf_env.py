"""The game as a verifiers environment (``sage_env/interactive/vf_env.py``): a real verifiers
rollout of a whole ``sage`` round, the model a scripted policy behind a loopback
OpenAI-compatible server that verifiers' own client talks to. Runs in the ``.venv-verifiers`` lane
of ``.ci/run``."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

vf = pytest.importorskip("verifiers.v1")

import sage_env  # noqa: E402
from sage_env.interactive.vf_env import (  # noqa: E402
    SEATS,
    action_text,
    load_environment,
    play_loopback,
)
from sage_env.protocols import scripted  # noqa: E402
from tests.scripted import play_round  # noqa: E402

CONFIG = {"domains": ["math"], "solver_samples": 2}
PHASES = ["challenge", "review_question", "probe", "probe", "plan", "review_plan", "solve", "solve"]
AGENTS = [
    "challenger_0",
    "critic_0",
    "solver_0",
    "solver_0",
    "planner_0",
    "critic_0",
    "solver_0",
    "solver_0",
]


def policy(system: str, user: str) -> str:
    """The scripted model: a reply by the role its prompt asks for. Reviews leave out the
    ``<score>`` prefix (the environment puts it in front); solves answer 71, right on the
    challenger's question and wrong on most pool tasks."""
    kind = scripted.infer_kind({"system": system, "user": user})
    if kind == "propose":
        return scripted.proposal("math", {"user": user})
    if kind == "review":
        return scripted.REVIEW_PASS.removeprefix("<score>")
    if kind == "plan":
        return scripted.PLAN
    return "The total is \\boxed{71}."


class _Model(BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, body))
        messages = {m["role"]: m["content"] for m in body["messages"]}
        reply = policy(messages.get("system", ""), messages["user"])
        data = json.dumps(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": reply},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def model_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def rollout(model_url):
    """One verifiers rollout of round 0 (``reset(seed=0)``) and the requests the model got."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SAGE_VF_TEST_KEY", "loopback")
    env = load_environment("sage", **CONFIG)
    task = next(iter(env.taskset))
    ctx = vf.ModelContext(
        model="scripted",
        client=vf.EvalClientConfig(base_url=model_url, api_key_var="SAGE_VF_TEST_KEY"),
    )

    async def play():
        async with env.serving():
            return await asyncio.wait_for(env.run_episode(task, ctx), timeout=120)

    _Model.requests.clear()
    episode = asyncio.run(play())
    mp.undo()
    return task, episode, list(_Model.requests)


def test_a_rollout_plays_one_whole_round(rollout):
    task, episode, requests = rollout
    assert task.data.info == {"seed": 0}
    assert episode.ok, episode.errors
    assert [t.agent.name for t in episode.traces] == AGENTS
    assert [t.info["sage"]["phase"] for t in episode.traces] == PHASES
    assert all(t.ok and t.num_turns == 1 for t in episode.traces)


def test_each_turn_is_the_observation_as_chat_messages(rollout):
    _, episode, requests = rollout
    assert len(requests) == len(PHASES)
    for trace, (path, body) in zip(episode.traces, requests):
        data = trace.task.data
        assert path == "/v1/chat/completions" and body["model"] == "scripted"
        assert body["messages"] == [
            {"role": "system", "content": data.system_prompt},
            {"role": "user", "content": data.prompt},
        ]
        assert trace.info["sage"]["action"].startswith(data.info["prefix"])
    critic = [t.info["sage"]["action"] for t in episode.traces if t.agent.name == "critic_0"]
    assert critic == [scripted.REVIEW_PASS] * 2  # the prefix went in front of the reply


def test_rewards_are_those_of_the_same_actions_stepped_directly(rollout):
    _, episode, _ = rollout
    env = sage_env.env(**CONFIG)
    try:
        direct = play_round(
            env,
            lambda agent, phase, obs, n: action_text(obs, policy(obs["system"], obs["user"])),
            seed=0,
        )
    finally:
        env.close()
    assert [(a, p) for a, p, _, _ in direct] == list(zip(AGENTS, PHASES))
    got = [(t.agent.name, t.info["sage"]["phase"], t.rewards["sage"].score) for t in episode.traces]
    assert got == [(a, p, pytest.approx(r)) for a, p, r, _ in direct]
    assert [t.reward for t in episode.traces] == pytest.approx([r for _, _, r, _ in direct])
    totals = {}
    for agent, _, reward, _ in direct:
        totals[agent] = totals.get(agent, 0.0) + reward
    assert set(totals) == {"challenger_0", "critic_0", "planner_0", "solver_0"}
    assert totals["solver_0"] > 0 and totals["critic_0"] == pytest.approx(2.0)
    for trace in episode.traces:
        for agent, total in totals.items():
            assert trace.metrics[f"reward_{agent}"] == pytest.approx(total)
        assert trace.metrics["reward_round"] == pytest.approx(sum(totals.values()))


def test_load_environment_checks_its_arguments():
    with pytest.raises(ValueError):
        load_environment("no-such-protocol")
    with pytest.raises((TypeError, ValueError)):
        load_environment("sage", no_such_field=1)
    env = load_environment("azr")
    assert env.taskset.config.protocol == "azr"
    assert {"proposer_0", "solver_0"} <= set(SEATS)


def test_action_text_puts_the_prefix_in_front_unless_written():
    obs = {"system": "", "user": "", "prefix": "<score>"}
    assert action_text(obs, "<score>3</score> ok") == "<score>3</score> ok"
    assert action_text(obs, "3</score> ok") == "<score>3</score> ok"
    assert action_text({"prefix": ""}, "x") == "x"


def test_play_loopback_plays_rounds_without_an_endpoint():
    """The documented way to try the environment with no model server (issue 51, item 5)."""
    episodes = play_loopback("sage", rounds=2, **CONFIG)
    assert len(episodes) == 2 and all(e.ok for e in episodes), [e.errors for e in episodes]
    assert [t.agent.name for t in episodes[0].traces] == AGENTS
    critic = [t for t in episodes[0].traces if t.agent.name == "critic_0"]
    assert [t.info["sage"]["action"] for t in critic] == [scripted.REVIEW_PASS] * 2
    assert all(t.reward == pytest.approx(1.0) for t in critic)
