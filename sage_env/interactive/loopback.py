"""A scripted OpenAI-compatible chat endpoint on loopback, for trying the chat front ends.

The game's chat front ends (``vf_env.py``, any OpenAI client) then play without a model server
or an API key.

:func:`serve_chat` runs a ``ThreadingHTTPServer`` on ``127.0.0.1`` (a free port) that answers
``POST /v1/chat/completions`` with ``reply(messages)`` as a ``chat.completion``, and records
the requests it got. :func:`scripted_chat`, the default ``reply``, answers by the role its
prompt asks for (:mod:`sage_env.protocols.scripted`): a valid proposal, a passing review (the
``<score>`` prefix left for the environment to put in front), a three-step plan, an answer.
Standard library only; nothing here imports verifiers or openai.

    from sage_env.interactive.loopback import serve_chat
    with serve_chat() as server:
        print(server.base_url)  # http://127.0.0.1:PORT/v1, for any OpenAI-compatible client
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sage_env.protocols import scripted

Reply = Callable[[list[dict]], str]
"""A scripted model: the request's chat messages (``{"role", "content"}``) to the reply text."""


def scripted_chat(messages: list[dict]) -> str:
    r"""A well-formed reply by the role the messages ask for (what a client can see).

    Proposal: :func:`sage_env.protocols.scripted.proposal` (code when the prompt is about a
    Python function, else math); review: a passing score without its ``<score>`` prefix; plan:
    :data:`~sage_env.protocols.scripted.PLAN`; solve: ``\boxed{71}`` (right on the scripted
    math proposal, wrong on most pool tasks) or a stub function on a code task; anything else
    ``""``.
    """
    by_role = {str(m.get("role")): str(m.get("content") or "") for m in messages}
    system, user = by_role.get("system", ""), by_role.get("user", "")
    kind = scripted.infer_kind({"system": system, "user": user})
    code = "python" in user.lower()
    if kind == "propose":
        return scripted.proposal("code" if code else "math", {"user": user})
    if kind == "review":
        return scripted.REVIEW_PASS.removeprefix("<score>")
    if kind == "plan":
        return scripted.PLAN
    if kind == "solve":
        if code:
            return "```python\ndef solution(*args, **kwargs):\n    return None\n```"
        return "The total is \\boxed{71}."
    return ""


@dataclass
class ChatServer:
    """A running loopback endpoint (:func:`serve_chat`).

    Attributes:
        base_url: ``http://127.0.0.1:PORT/v1``: an OpenAI client's ``base_url``.
        requests: ``(path, body)`` of every request, in order.
    """

    base_url: str
    requests: list[tuple[str, dict]] = field(default_factory=list)


@contextmanager
def serve_chat(reply: Reply = scripted_chat, model: str = "scripted") -> Iterator[ChatServer]:
    """Serve ``reply`` as an OpenAI-compatible chat endpoint on loopback until the block exits.

    Args:
        reply: The scripted model (default :func:`scripted_chat`); an exception in it answers
            HTTP 500 (the client sees a failed call, the server goes on).
        model: The model name echoed in each response.

    Yields:
        The :class:`ChatServer` (``base_url``, ``requests``); any API key is accepted.
    """
    server_info = ChatServer(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                server_info.requests.append((self.path, body))
                text = reply(list(body.get("messages") or []))
                data = _completion(len(server_info.requests), body.get("model") or model, text)
                status = 200
            except Exception as exc:  # a broken script fails the call, not the server
                data, status = json.dumps({"error": {"message": str(exc)}}).encode(), 500
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server_info.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield server_info
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _completion(n: int, model: str, text: str) -> bytes:
    """A ``chat.completion`` response body holding ``text``."""
    return json.dumps(
        {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()
