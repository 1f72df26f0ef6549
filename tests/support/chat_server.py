"""A local OpenAI-compatible chat-completions server for tests (a real HTTP round trip, no mocks).

`ChatServer(script)` listens on 127.0.0.1 (port 0) in a thread and answers POST
/v1/chat/completions from a script: each request takes the next item, which is a response body
(dict), a `Status(code, body, headers)`, or a callable `f(request_json) -> dict | Status`. When the
script runs out, `default` answers (a dict, Status or callable; None -> HTTP 500). Every request
body is recorded in `server.requests`. A request with `"stream": true` gets a scripted dict reply as
server-sent events (one `chat.completion.chunk` carrying the whole message, then `[DONE]`), as an
OpenAI-compatible server streams it.

    with ChatServer([tool_call("search", {"query": "x"}), text("Yes: 70%")]) as srv:
        agent = LLMAgent(base_url=srv.base_url, model="test-model", backoff_seconds=0)
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

_ids = itertools.count(1)


@dataclass
class Status:
    """A non-200 (or raw) reply."""

    code: int
    body: Any = field(default_factory=lambda: {"error": {"message": "scripted failure"}})
    headers: dict[str, str] = field(default_factory=dict)


def _response(message: dict, prompt_tokens: int = 100, completion_tokens: int = 20) -> dict:
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def tool_calls(calls: Iterable[tuple[str, Any]], content: str | None = None, **usage: int) -> dict:
    """A response with several tool calls; arguments given as a dict (JSON-encoded) or a raw string."""
    out = []
    for name, args in calls:
        raw = args if isinstance(args, str) else json.dumps(args)
        out.append({"id": f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": raw}})
    return _response({"role": "assistant", "content": content, "tool_calls": out}, **usage)


def tool_call(name: str, args: Any, **usage: int) -> dict:
    """A response with one tool call."""
    return tool_calls([(name, args)], **usage)


def text(content: str, **usage: int) -> dict:
    """A plain-text response."""
    return _response({"role": "assistant", "content": content}, **usage)


def sse_events(response: dict) -> str:
    """A chat-completions response as the server-sent events of a streamed reply."""
    choice = response["choices"][0]
    message = dict(choice["message"])
    if message.get("tool_calls"):
        message["tool_calls"] = [{**c, "index": i} for i, c in enumerate(message["tool_calls"])]
    chunk = {k: v for k, v in response.items() if k != "choices"}
    chunk.update(object="chat.completion.chunk",
                 choices=[{"index": 0, "delta": message, "finish_reason": choice.get("finish_reason")}])
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"


Item = dict | Status | Callable[[dict], "dict | Status"]


class ChatServer:
    """A scripted chat-completions endpoint on 127.0.0.1 (use as a context manager)."""

    def __init__(self, script: Iterable[Item] = (), default: Item | None = None) -> None:
        self.script = list(script)
        self.default = default
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(Status(404, {"error": {"message": f"no route {self.path}"}}))
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(Status(400, {"error": {"message": "request is not JSON"}}))
                    return
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    item = server.script.pop(0) if server.script else server.default
                if callable(item):
                    item = item(body)
                if item is None:
                    item = Status(500)
                if isinstance(item, dict) and body.get("stream"):
                    item = Status(200, sse_events(item), {"Content-Type": "text/event-stream"})
                self._send(item)

            def _send(self, item: dict | Status) -> None:
                status = item if isinstance(item, Status) else Status(200, item)
                payload = status.body if isinstance(status.body, (bytes, str)) else json.dumps(status.body)
                data = payload.encode() if isinstance(payload, str) else payload
                self.send_response(status.code)
                if not any(k.lower() == "content-type" for k in status.headers):
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in status.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # stop() waits for the loop to look at its flag: every 0.05 s, not socketserver's 0.5 s per server
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ChatServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def last_user_or_tool(request: dict) -> dict:
    """The observation the agent sent last (a user or tool message), parsed as JSON when it is."""
    for m in reversed(request.get("messages", [])):
        if m.get("role") in ("user", "tool"):
            content = m.get("content") or ""
            start = content.find("{")
            try:
                return json.loads(content[start:]) if start >= 0 else {}
            except json.JSONDecodeError:
                return {}
    return {}


def forecasting_policy(searches: int = 1) -> Callable[[dict], dict]:
    """A callable script item: search `searches` times per date, then forecast uniform-ish (60% on the first option)."""
    state: dict[str, int] = {}

    def respond(body: dict) -> dict:
        obs = last_user_or_tool(body)
        key = str(obs.get("forecast_date"))
        n = state.get(key, 0)
        state[key] = n + 1
        options = obs.get("options") or []
        if n < searches and obs.get("question"):
            return tool_call("search", {"query": obs["question"], "k": 5})
        if not options:
            return text("I cannot tell.")
        rest = 0.4 / max(1, len(options) - 1) if len(options) > 1 else 0.0
        probs = {o: (0.6 if i == 0 else rest) for i, o in enumerate(options)} if len(options) > 1 else {options[0]: 1.0}
        return tool_call("forecast", {"probabilities": probs})

    return respond
