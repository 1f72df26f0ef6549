"""The environment's tools over the Model Context Protocol (docs/design.md §5, Integrations).

`forecast-env mcp --workspace WS [--split S] [--event ID] [--world] [--transport stdio|http]` serves
one environment to one MCP client (an agent harness such as Codex, Claude Code or OpenCode). The
server is a thin shell: the tools are the environment's own tools with their JSON schemas and
descriptions, plus `observe` (the current observation); in world mode also `next_day` and
`get_question` come from the world environment. What the server guarantees:

- The server holds the date. Tools never take a date; an argument that tries to set one (`as_of`,
  `date`, ...) is refused by the environment like any undeclared argument.
- No score, reward or label ever appears in a tool result: results carry the observation only.
- One client session per server process; over HTTP a second session is refused and every request
  needs the bearer token printed at start.
- Every episode is recorded in `WS/runs/<run_id>/` exactly like a runner episode (parts, run.json,
  consolidated tables), with `session: harness` (a harness keeps its own memory, so the memory
  ablation does not compare it with per-date sessions). A client that disconnects mid-episode
  leaves what it played recorded and the run marked `incomplete`.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecast_env.adapters.limits import OBSERVE, ToolCallError, check_tool_call
from forecast_env.config import load_config
from forecast_env.errors import ForecastEnvError
from forecast_env.eval.runs import store as runs
from forecast_env.eval.runs.store import WorldWindow
from forecast_env.store import Workspace

log = logging.getLogger(__name__)

OBSERVE_SPEC: dict[str, Any] = {
    "name": OBSERVE,
    "description": "The current observation (question, options, forecast date, step, notebook, budget) as JSON. "
                   "Free: it does not count against the call budget.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
}


@dataclass(frozen=True)
class ToolReply:
    """What one tool call returns to the client: observation text, and whether it reports an error."""

    text: str
    is_error: bool


class HarnessSession:
    """One environment played by one client, event after event, each episode recorded like a runner's.

    `call(name, arguments)` is the whole protocol: the MCP shell only translates. Thread-safe (one lock), so
    the HTTP transport's worker threads cannot interleave two tool calls.
    """

    def __init__(self, workspace: str | Path, split: str = "eval", event_ids: Sequence[str] | None = None,
                 label: str = "harness", run_id: str | None = None, env_config: Mapping[str, Any] | None = None,
                 world: bool = False, world_options: Mapping[str, Any] | None = None) -> None:
        self.ws = Workspace.at(workspace)
        self.split = split
        self.label = label
        self.world = world
        self._lock = threading.Lock()
        self.env_config = load_config("env", overrides=dict(env_config or {}))
        world_options = dict(world_options or {})
        self.env = self._make_env(world, world_options)
        window = None
        if world:
            from forecast_env.envs.world import load_world

            w = load_world(self.ws.root, split, world_options.get("start"), world_options.get("end"))
            self.event_ids = [q.question_id for q in w.questions]
            window = WorldWindow(w.start.isoformat(), w.end.isoformat(), w.world_id)
            self.units = [window.world_id]  # one episode: the whole world
        else:
            ids = list(event_ids) if event_ids else list(self.env.event_ids)
            unknown = [e for e in ids if e not in set(self.env.event_ids)]
            if unknown:
                raise ForecastEnvError(f"event(s) {', '.join(unknown)} are not in split {split!r} of {self.ws.root}; "
                                       "`forecast-env events show` lists them")
            if not ids:
                raise ForecastEnvError(f"split {split!r} of {self.ws.root} has no events to serve")
            self.event_ids = ids
            self.units = ids
        # the environment's specs are in OpenAI function-calling format: serve their `function` part as is
        self.tool_specs: list[dict[str, Any]] = [OBSERVE_SPEC, *(s.get("function", s) for s in self.env.unwrapped.tool_specs)]
        self._names = {s["name"] for s in self.tool_specs}
        rec = runs.run_record(self.ws, "", split, self.event_ids, [runs.AgentSpec(label, label, {})], 1, 0,
                              load_config("benchmark"), self.env_config, session="harness",
                              mode="world" if world else "episode", world=window, extra={"engine": "mcp"})
        # an MCP run is never resumed: a harness keeps its own memory
        self.run = runs.open_run(self.ws, rec, run_id=run_id or runs.new_run_id(f"mcp-{secrets.token_hex(3)}"),
                                 if_exists="refuse")
        self.run_id = self.run.run_id
        self.run_dir = self.run.dir
        self._cursor = 0
        self._started = time.perf_counter()
        self._episode_started = time.perf_counter()
        self._finished: list[str] = []
        self._closed = False
        self._obs: str | None = self._start(self.units[0])  # None: every episode is played
        self._warm_up()

    # -- the protocol ---------------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolReply:
        """Run one tool call; never raises for anything the client sends."""
        with self._lock:
            try:
                return self._call(name, arguments)
            except ToolCallError as exc:
                return ToolReply(json.dumps({"error": str(exc)}), True)

    def _call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolReply:
        if self._closed:
            raise ToolCallError("the session is closed")
        args = check_tool_call(name, arguments, self._names)
        if self._obs is None:
            raise ToolCallError(f"all {len(self.units)} episode(s) of this session are finished; the run is "
                                f"recorded in {self.run_dir}")
        if name == OBSERVE:
            return ToolReply(self._obs, False)
        obs, _reward, terminated, truncated, info = self.env.step({"tool": name, "args": args})
        error = info.get("error") if isinstance(info, Mapping) else None
        if terminated or truncated:
            self._finish_episode(complete=True)
            nxt = self._next_episode()
            notice = (f"episode {self._finished[-1]} is finished and recorded; "
                      + ("the next one has started: call observe" if nxt else "no episodes are left"))
            self._obs = nxt
            return ToolReply(json.dumps({"message": notice, "last_observation": json.loads(obs)}), False)
        self._obs = obs
        return ToolReply(obs, bool(error))

    def close(self) -> None:
        """Record what was played; an episode in progress is kept and the run marked incomplete."""
        with self._lock:
            if self._closed:
                return
            if self._obs is not None:
                self._finish_episode(complete=False)
            self._closed = True
            done = len(self._finished)
            self.run.finish(complete=self._obs is None and done == len(self.units), episodes_total=len(self.units),
                            episodes_done=done, seconds=round(time.perf_counter() - self._started, 3))
            self.env.close()

    # -- internals ------------------------------------------------------------------------------

    def _make_env(self, world: bool, world_options: dict[str, Any]) -> Any:
        if world:
            try:
                from forecast_env.envs.world_env import ForecastWorldEnv
            except ImportError as exc:
                raise ForecastEnvError("world mode is not available in this installation") from exc
            return ForecastWorldEnv(self.ws.root, split=self.split, config=self.env_config, **world_options)
        from forecast_env.envs import ForecastEnv

        return ForecastEnv(self.ws.root, split=self.split, config=self.env_config)

    def _warm_up(self) -> None:
        """Open the index and load the query embedder now, so the client's first search is not the one that
        waits for them (a harness's tool-call timeout is often a few seconds)."""
        try:
            searcher = self.env.unwrapped.searcher
        except ForecastEnvError as exc:  # no index: the first search will say so, as it would in the env
            log.warning("no searcher: %s", exc)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            searcher.search("warm up", as_of=getattr(searcher, "first_day", None) or "2000-01-01", k=1, mode="hybrid")

    def _start(self, event_id: str) -> str:
        self._episode_started = time.perf_counter()
        options: dict[str, Any] = {"rollout": 0} if self.world else {"event_id": event_id, "rollout": 0}
        obs, _info = self.env.reset(seed=0, options=options)
        return obs

    def _next_episode(self) -> str | None:
        self._cursor += 1
        if self._cursor >= len(self.units):
            return None
        return self._start(self.units[self._cursor])

    def _finish_episode(self, complete: bool) -> None:
        unit = self.units[self._cursor]
        self.run.record_part(runs.Task(self.label, unit, 0), self.env.unwrapped.episode_log(), seed=0,
                             seconds=round(time.perf_counter() - self._episode_started, 3), session="harness",
                             complete=complete)
        self._finished.append(unit)
        self.run.consolidate(self.event_ids)


# ---------------------------------------------------------------------------------------------
# the MCP shell
# ---------------------------------------------------------------------------------------------


def build_server(session: HarnessSession) -> Any:
    """A low-level MCP server whose tools are the session's tool specs (the environment's own schemas)."""
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=s["name"], description=s.get("description", ""),
                        input_schema=s.get("parameters") or {"type": "object", "properties": {}})
             for s in session.tool_specs]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        reply = await anyio.to_thread.run_sync(session.call, params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text=reply.text)], is_error=reply.is_error)

    return Server("forecast-env", version=_version(),
                  instructions=("A forecasting episode. Call observe to see the question, its options and the "
                                "forecast date; search and open_article read only news published by that date; "
                                "forecast(probabilities) reports one probability per option and moves to the next "
                                "date."),
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("forecast-env")
    except PackageNotFoundError:
        return "0"


def serve_stdio(session: HarnessSession) -> None:
    """Serve one client over stdin/stdout until it disconnects; then record and close."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(session)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        session.close()


def serve_unix(session: HarnessSession, path: str | Path,
               announce: Callable[[str], None] | None = None) -> None:
    """Serve one client over a Unix socket (newline-delimited JSON-RPC, as on stdio), then record and close.

    The listener accepts exactly one connection and closes: a second client finds no server. This is the
    transport for sandboxed harnesses: bind the socket's folder into the sandbox and run
    `adapters/mcp_relay.py` there as the MCP server command (README, "Sandbox a harness").
    """
    import socket

    import anyio
    from mcp.server.stdio import stdio_server

    path = Path(path)
    if path.exists():
        raise ForecastEnvError(f"{path} exists; remove it or choose another --socket path")
    server = build_server(session)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(1)
        (announce or (lambda line: print(line, file=sys.stderr, flush=True)))(
            f"forecast-env MCP server on unix socket {path} (one client)")
        conn, _ = listener.accept()
    finally:
        listener.close()
        path.unlink(missing_ok=True)
    reader = conn.makefile("r", encoding="utf-8", errors="replace", newline="\n")
    writer = conn.makefile("w", encoding="utf-8", newline="\n")

    async def main() -> None:
        async with stdio_server(stdin=anyio.wrap_file(reader), stdout=anyio.wrap_file(writer)) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        for f in (reader, writer, conn):
            try:
                f.close()
            except OSError:
                pass
        session.close()


class _Gate:
    """ASGI middleware for the HTTP transport: the bearer token, and one MCP session per process.

    The gate admits the session-based (initialize handshake) protocol only: the first `initialize` claims the
    server, and every later request must carry that session's `Mcp-Session-Id`. A client that probes the
    session-less protocol first (`server/discover`) is told no and falls back to the handshake.
    """

    def __init__(self, app: Callable, token: str) -> None:
        self.app = app
        self.token = token.encode()
        self.session_id: str | None = None
        self._lock = threading.Lock()

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        auth = headers.get("authorization", "")
        given = auth[7:].encode() if auth.lower().startswith("bearer ") else b""
        if not hmac.compare_digest(given, self.token):
            await _respond(send, 401, "missing or wrong bearer token (printed by the server at start)")
            return
        sid = headers.get("mcp-session-id")
        with self._lock:
            claimed = self.session_id
        if claimed is not None:
            if sid != claimed:
                await _respond(send, 409, "this server already serves one client session; start another "
                                          "server for another client")
                return
            await self.app(scope, receive, send)
            return
        body, replay = await _buffer(receive)
        try:
            method = json.loads(body or b"null").get("method")
        except (ValueError, AttributeError):
            method = None
        if scope.get("method") != "POST" or method != "initialize":
            await _respond(send, 400, "start with an initialize request (this server speaks the "
                                      "session-based MCP protocol)")
            return

        async def send_and_claim(message: dict) -> None:
            if message.get("type") == "http.response.start":
                for k, v in message.get("headers", []):
                    if k.decode("latin-1").lower() == "mcp-session-id":
                        with self._lock:
                            self.session_id = self.session_id or v.decode("latin-1")
            await send(message)

        await self.app(scope, replay, send_and_claim)


async def _buffer(receive: Callable) -> tuple[bytes, Callable]:
    """Read a request body whole; return it and a `receive` that replays it."""
    chunks, more = [], True
    while more:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


async def _respond(send: Callable, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def serve_http(session: HarnessSession, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
               announce: Callable[[str], None] | None = None) -> None:
    """Serve one client over streamable HTTP at `http://host:port/mcp` with a bearer token."""
    import uvicorn

    server = build_server(session)
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    token = token or secrets.token_urlsafe(24)
    gated = _Gate(app, token)
    say = announce or (lambda line: print(line, file=sys.stderr, flush=True))
    say(f"forecast-env MCP server on http://{host}:{port}/mcp")
    say(f"token: {token}")
    say(f"recording to {session.run_dir}")
    try:
        uvicorn.run(gated, host=host, port=port, log_level="warning", lifespan="on")
    finally:
        session.close()
