"""The scripted loopback chat endpoint (issue 51, item 5): a chat front end of the game can be
played without a model server; stdlib only, so it runs in every lane."""

from __future__ import annotations

import json
import urllib.request

import sage_env
from sage_env.interactive.loopback import scripted_chat, serve_chat
from tests.scripted import play_round


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer any"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_endpoint_answers_chat_completions_with_the_script_and_records_them():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    with serve_chat(lambda m: f"{len(m)} messages") as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        status, body = _post(server.base_url, {"model": "m", "messages": messages})
        assert status == 200
        assert body["object"] == "chat.completion" and body["model"] == "m"
        assert body["choices"][0]["message"] == {"role": "assistant", "content": "2 messages"}
        assert server.requests == [("/v1/chat/completions", {"model": "m", "messages": messages})]


def test_a_broken_script_fails_the_call_not_the_server():
    def broken(messages):
        raise RuntimeError("no")

    with serve_chat(broken) as server:
        assert _post(server.base_url, {"messages": []})[0] == 500
        assert _post(server.base_url, {"messages": []})[0] == 500


def test_the_scripted_chat_plays_a_whole_round_well_formed():
    """As a chat front end plays it: the messages in, the prefix put in front of the reply."""

    def player(agent, phase, obs, n):
        reply = scripted_chat(
            [{"role": "system", "content": obs["system"]}, {"role": "user", "content": obs["user"]}]
        )
        return reply if reply.startswith(obs["prefix"]) else obs["prefix"] + reply

    for domains in (["math"], ["code"]):
        env = sage_env.env(domains=domains, solver_samples=1)
        try:
            rows = play_round(env, player, seed=0)
        finally:
            env.close()
        phases = [p for _, p, _, _ in rows]
        assert phases[:2] == ["challenge", "review_question"] and phases[-1] == "solve"
        for _, phase, _, last in rows:
            if phase.startswith("review") or phase == "plan":
                assert last["terms"]["f"] == 1.0, (domains, phase, last)
        challenger = [last for _, p, _, last in rows if p == "challenge"][0]
        assert challenger["terms"]["f"] == 1.0, (domains, challenger)
