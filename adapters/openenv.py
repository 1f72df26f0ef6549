"""The forecasting environment as an OpenEnv server: many concurrent sessions in one process (docs/training.md).

`forecast-env serve --openenv --workspace WS [--host H] [--port N] [--max-sessions N]` serves the environment
on `openenv-core`'s own server types: typed `ForecastAction` / `ForecastObservation` / `ForecastState`, an
`Environment` subclass marked `SUPPORTS_CONCURRENT_SESSIONS`, and OpenEnv's `HTTPEnvServer` with its
WebSocket session protocol at `/ws` (`reset` / `step` / `state` / `close` messages; OpenEnv's `EnvClient`
speaks it). Each WebSocket connection is one session: its own `ForecastOpenEnv` on a pooled `ForecastEnv`, all
of them sharing one `Searcher` (one index in memory however many sessions are open), each episode its own
recorded part of one run (`adapters/sessions.py`, `session: episode`: the client keeps its own memory within
an episode). Up to `max_sessions` at once; OpenEnv refuses one more with `CAPACITY_REACHED`.

- **Episode.** `reset(event_id=..., step=...)` starts an event (default: the next of the split's events, in
  turn); with `unit="date"` a session plays one (event, forecast date). `step(ForecastAction(tool, args))`
  plays one tool call; the observation has the environment's keys. A reset before the end, or a client that
  disconnects, records the episode as incomplete (its unplayed dates *missing*, never scored).
- **Reward.** `reward` is None until the episode ends, then minus the mean Brier over its scored dates (the
  environment's episode reward); no score or label is in any observation field.
- **Access.** A bearer token, as for the MCP HTTP transport: `Authorization: Bearer <token>` on every request
  and WebSocket handshake, or the token as the first path segment (`http://host:port/<token>` as the client's
  base URL: OpenEnv's `EnvClient` cannot set headers). OpenEnv's stateless HTTP `/reset` and `/step` (a fresh
  environment per request) are refused: a session is a WebSocket.

Python: `serve(workspace, port=0)` starts a server in this process and returns an `OpenEnvServer` (its `url`,
`token`, `client()`, `stop()`); `make_app(workspace, ...)` returns the ASGI app and its `TrainingRun`.
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import itertools
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field
from starlette.websockets import WebSocketDisconnect

from forecast_env.adapters.sessions import (
    DEFAULT_IDLE_TIMEOUT,
    TOOLS,
    IdleTimeout,
    TrainingRun,
    UnitSession,
    limit_malloc_arenas,
)
from forecast_env.errors import ForecastEnvError

log = logging.getLogger(__name__)

#: Default number of concurrent sessions one server admits.
DEFAULT_MAX_SESSIONS = 64


# ---------------------------------------------------------------------------------------------
# typed action, observation, state
# ---------------------------------------------------------------------------------------------


class ForecastAction(Action):
    """One tool call: `tool` is one of the environment's tools, `args` its arguments (the date is held by
    the environment; no argument can move it)."""

    tool: str = Field(description=f"one of {', '.join(TOOLS)}")
    args: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments (a JSON object)")


class ForecastObservation(Observation):
    """The environment's observation (docs/design.md §5): question, description as of the date, options, date,
    step, tool result, error, notebook, budget, message. `reward` is set at the episode's end only."""

    event_id: str = ""
    question: str = ""
    description: str = ""
    options: list[str] = Field(default_factory=list)
    forecast_date: str = ""
    step: int = 0
    steps_total: int = 0
    tool_result: Any = None
    error: str | None = None
    notebook: list[Any] = Field(default_factory=list)
    budget_left: int = 0
    message: str | None = None


class ForecastState(State):
    """Where a session stands: its episode (event, rollout), the date, and the run it records into."""

    event_id: str | None = None
    rollout: int | None = None
    forecast_date: str | None = None
    unit_step: int | None = None
    done: bool = False
    run_id: str = ""


# ---------------------------------------------------------------------------------------------
# the environment: one per session
# ---------------------------------------------------------------------------------------------


class ForecastOpenEnv(Environment[ForecastAction, ForecastObservation, ForecastState]):
    """One OpenEnv session of the forecasting environment, played on the shared `TrainingRun`."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, trun: TrainingRun, next_unit: Callable[[], tuple[str, int | None]]) -> None:
        super().__init__()
        self._trun = trun
        self._next_unit = next_unit
        self._session: UnitSession | None = None
        self._steps = 0
        self._episode_id: str | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, event_id: str | None = None,
              step: int | None = None, **kwargs: Any) -> ForecastObservation:
        """Start an episode: `event_id` (default: the next event in turn), `step` for a one-date unit."""
        if kwargs:
            raise ForecastEnvError(f"reset: unknown argument(s) {', '.join(sorted(kwargs))}; "
                                   "give event_id and, for one-date units, step")
        self._end("the client reset before the episode's end")
        if event_id is None:
            event_id, auto_step = self._next_unit()
            step = auto_step if step is None else step
        self._session = self._trun.open(str(event_id), None if step is None else int(step))
        self._steps = 0
        self._episode_id = episode_id or f"{self._session.event_id}/r{self._session.rollout}"
        return self._observation(self._session.observation, done=False, reward=None)

    def step(self, action: ForecastAction, timeout_s: float | None = None, **kwargs: Any) -> ForecastObservation:
        """Play one tool call; the episode's reward comes with the observation that ends it."""
        session = self._session
        if session is None:
            raise ForecastEnvError("step before reset: send a reset message first")
        self._steps += 1
        reply = session.call(action.tool, action.args, compact=False)
        if reply.done:
            result = session.finish()
            return self._observation(reply.observation, done=True, reward=result.reward,
                                     error=json.loads(reply.text).get("error") if reply.error else None)
        return self._observation(reply.observation, done=False, reward=None,
                                 error=json.loads(reply.text).get("error") if reply.error else None)

    @property
    def state(self) -> ForecastState:
        s = self._session
        if s is None:
            return ForecastState(step_count=self._steps, run_id=self._trun.run_id)
        return ForecastState(episode_id=self._episode_id, step_count=self._steps, event_id=s.event_id,
                             rollout=s.rollout, forecast_date=s.forecast_date, unit_step=s.step, done=s.done,
                             run_id=self._trun.run_id)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="forecast-env", description=(
            "Offline forecasting environment: search a frozen news corpus as of each forecast date, keep a "
            "notebook, forecast resolved questions; scored by Brier at the episode's end."), version=_version())

    def close(self) -> None:
        """The session ended (the client closed or vanished): record an unfinished episode as incomplete."""
        self._end("the client left before the episode's end")

    def expire(self, reason: str) -> None:
        """The server closes this session (its client sent nothing for too long): an unfinished episode is
        recorded incomplete, with `reason`."""
        self._end(reason)

    def _end(self, reason: str) -> None:
        session, self._session = self._session, None
        if session is None or session.result is not None:
            return
        if session.done:
            session.finish()
        else:
            session.abandon(reason)

    def _observation(self, obs: str, done: bool, reward: float | None, error: str | None = None) -> ForecastObservation:
        o = json.loads(obs)
        assert self._session is not None
        return ForecastObservation(
            done=done, reward=reward, event_id=self._session.event_id, question=o["question"],
            description=o["description"], options=list(o["options"]), forecast_date=str(o["forecast_date"]),
            step=int(o["step"]), steps_total=int(o["steps_total"]), tool_result=o.get("tool_result"),
            error=error if error is not None else o.get("error"), notebook=list(o.get("notebook") or []),
            budget_left=int(o.get("budget_left") or 0), message=o.get("message"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("forecast-env")
    except PackageNotFoundError:
        return "0"


# ---------------------------------------------------------------------------------------------
# the app: OpenEnv's server behind a token gate
# ---------------------------------------------------------------------------------------------


class _TokenGate:
    """ASGI middleware: the bearer token (header, or the first path segment) on every request and WebSocket
    handshake; OpenEnv's stateless HTTP /reset and /step refused (a session is a WebSocket)."""

    def __init__(self, app: Callable, token: str) -> None:
        self.app = app
        self.token = token
        self.prefix = f"/{token}"

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        given = auth[7:] if auth.lower().startswith("bearer ") else ""
        if path == self.prefix or path.startswith(self.prefix + "/"):
            given, path = self.token, path[len(self.prefix):] or "/"
            scope = {**scope, "path": path, "raw_path": path.encode()}
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return await _refuse(scope, send, 401, "missing or wrong bearer token (printed by the server at start)")
        if scope["type"] == "http" and path in ("/reset", "/step"):
            return await _refuse(scope, send, 405, "stateless /reset and /step are not served: open a session "
                                                   "on the WebSocket at /ws (OpenEnv's EnvClient does)")
        return await self.app(scope, receive, send)


class _Connection:
    """One WebSocket connection (one OpenEnv session) as the idle gate sees it (`IdleSession`)."""

    def __init__(self, now: float) -> None:
        self.last_active = now  # the idle clock when the client last sent, or was last answered
        self.lock = threading.Lock()  # held while one of its messages is being played (or while it is reaped)
        self.busy = False  # the loop holds `lock`: a message of it is being played
        self.closed = False
        self.env: ForecastOpenEnv | None = None  # attached by the environment factory
        self.gone = asyncio.Event()  # set when the gate closes it (idle)

    def answered(self, now: float) -> None:
        """Its message is answered (or needs no answer): idle from `now` on, its lock free for a reap. Called in
        the server's loop."""
        if self.busy:
            self.last_active = now
            self.busy = False
            self.lock.release()


#: The connection whose handler is running (read by the environment factory, in the handler's own task).
_CONNECTION: contextvars.ContextVar[_Connection | None] = contextvars.ContextVar("forecast_env_openenv_conn",
                                                                                   default=None)


class _IdleGate:
    """ASGI middleware: closes OpenEnv sessions whose client sent nothing for `idle.seconds` (openenv-core
    0.2.1 never applies its own `session_timeout`). A reaped session's episode is recorded incomplete, its
    OpenEnv slot freed by the reap itself and its WebSocket closed. Reaping runs before every new connection
    is admitted (so a newcomer finds the slots of idle clients free) and every `seconds / 4` (at most 30 s) in
    the server's loop; `reap_idle()` does it from any thread.

    Two orderings make this deterministic (tests/adapters/test_sessions_load.py holds both with a handler made
    to lag): a connection is idle from the moment its reply is handed to the socket (not from its handler's next
    receive, which a loaded loop may reach after the client has moved on), and the slot is freed in the reap
    (not when the reaped handler's task next runs), so the admission after a reap always finds it free."""

    def __init__(self, app: Callable, idle: IdleTimeout, server: HTTPEnvServer | None = None) -> None:
        self.app = app
        self.idle = idle
        self.server = server  # OpenEnv's server, whose slot of a reaped session the reap frees
        self._conns: dict[int, _Connection] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.Task | None = None
        self._reaping: asyncio.Lock | None = None  # made in the server's loop
        self._ids = itertools.count()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._conns)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        try:
            await self._websocket(scope, receive, send)
        except WebSocketDisconnect:
            # openenv-core closes the socket after its session is destroyed; when the client closed first,
            # that close raises here: the session is over and its slot free already, nothing is lost
            pass

    async def _websocket(self, scope: dict, receive: Callable, send: Callable) -> None:
        if self.idle.seconds is None:
            return await self.app(scope, receive, send)
        self._loop = asyncio.get_running_loop()
        if self._ticker is None or self._ticker.done():
            self._ticker = self._loop.create_task(self._tick())
        await self._reap()
        conn = _Connection(self.idle.clock())
        key = next(self._ids)
        with self._lock:
            self._conns[key] = conn
        token = _CONNECTION.set(conn)
        try:
            await self.app(scope, self._receiver(conn, receive), self._sender(conn, send))
        finally:
            _CONNECTION.reset(token)
            with self._lock:
                self._conns.pop(key, None)
            conn.answered(conn.last_active)
            conn.closed = True

    def _sender(self, conn: _Connection, send: Callable) -> Callable:
        """`send`, marking the connection answered (idle from now, reapable) before its reply goes out: once the
        client has the reply, the server counts it idle from then, however late its handler gets back to
        `receive`."""

        async def wrapped(message: dict) -> None:
            if message.get("type") == "websocket.send":
                conn.answered(self.idle.clock())
            await send(message)

        return wrapped

    def _receiver(self, conn: _Connection, receive: Callable) -> Callable:
        """`receive`, marking the connection busy from a message's arrival until its answer is sent (`_sender`;
        the next receive, for a message without an answer), and answering a disconnect once the gate closed it."""
        disconnect = {"type": "websocket.disconnect", "code": 1001, "reason": "idle timeout"}

        async def wrapped() -> dict:
            conn.answered(self.idle.clock())  # a message that got no reply (the reply's send marks it otherwise)
            if conn.gone.is_set() or conn.closed:
                return disconnect
            got = asyncio.ensure_future(receive())
            gone = asyncio.ensure_future(conn.gone.wait())
            await asyncio.wait((got, gone), return_when=asyncio.FIRST_COMPLETED)
            if not got.done():
                got.cancel()
                return disconnect
            gone.cancel()
            message = got.result()
            if message.get("type") == "websocket.receive":
                if conn.gone.is_set() or conn.closed or not conn.lock.acquire(blocking=False):
                    return disconnect  # reaped, or being reaped right now
                if conn.closed:
                    conn.lock.release()
                    return disconnect
                conn.busy = True
                conn.last_active = self.idle.clock()
            return message

        return wrapped

    async def _reap(self) -> int:
        """Reap the idle connections (in a worker thread: recording their parts writes files), free their OpenEnv
        slots, and tell their handlers to end (which closes their sockets)."""
        if self._reaping is None:
            self._reaping = asyncio.Lock()
        async with self._reaping:  # one reap at a time: a newcomer waits for the slots a running reap frees
            with self._lock:
                if not self._conns:
                    return 0
            reaped = await asyncio.to_thread(self._reap_now)
            for _key, conn in reaped:
                conn.gone.set()  # its handler's next receive is a disconnect: it ends and closes the socket
                await self._free_slot(conn)
            return len(reaped)

    async def _free_slot(self, conn: _Connection) -> None:
        """Free a reaped connection's OpenEnv slot now, in the reap, rather than when its handler's task next
        runs (a loaded loop may run it after the next admission; a send to a client that stopped reading may
        hold it for long): the admission after a reap finds the slot free. openenv-core 0.2.1's session table
        (`_sessions`, `_destroy_session`, pinned in constraints.txt); the handler's own destroy then finds
        nothing to do."""
        server = self.server
        if server is None or conn.env is None:
            return  # no session was created for it (or no OpenEnv server known): its handler frees nothing
        for session_id, env in list(server._sessions.items()):
            if env is conn.env:
                await server._destroy_session(session_id)  # closes the env: its episode is recorded already
                return

    def _reap_now(self) -> list[tuple[int, _Connection]]:
        why = self.idle.why("message")

        def close(_key: int, conn: _Connection) -> None:
            conn.closed = True
            if conn.env is not None:
                try:
                    conn.env.expire(f"the client sent no message for more than {self.idle.seconds:g} s")
                except Exception:  # the part could not be written: the slot is freed all the same
                    log.exception("recording an idle OpenEnv session failed (%s)", why)

        return self.idle.reap(self._conns, self._lock, close)

    async def _tick(self) -> None:
        assert self.idle.seconds is not None
        every = min(max(self.idle.seconds / 4, 0.5), 30.0)
        while True:
            await asyncio.sleep(every)
            try:
                await self._reap()
            except Exception:
                log.exception("reaping idle OpenEnv sessions failed")

    def reap_idle(self) -> int:
        """Reap idle sessions now, from any thread but the server's loop; returns how many were closed."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return 0
        return asyncio.run_coroutine_threadsafe(self._reap(), loop).result(timeout=60)


async def _refuse(scope: dict, send: Callable, status: int, message: str) -> None:
    if scope["type"] == "websocket":
        # a close before accept: the handshake is answered 403 (ASGI has no other status for it)
        await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
        return
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def make_app(workspace: str | Path, *, split: str = "eval", token: str | None = None,
             max_sessions: int = DEFAULT_MAX_SESSIONS, unit: str = "event", label: str = "openenv",
             run_id: str | None = None, env: Mapping[str, Any] | None = None,
             event_ids: Sequence[str] | None = None, idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
             clock: Callable[[], float] = time.monotonic) -> tuple[Any, TrainingRun, str]:
    """The token-gated ASGI app serving OpenEnv sessions of the environment; returns (app, run, token).

    `idle_timeout` (seconds of `clock`, injectable for tests; None: never): a session whose client sent
    nothing for longer is closed, its episode recorded incomplete and its slot freed (`_IdleGate`).
    The caller closes the run (`run.close()`: consolidates it) when the server stops."""
    from fastapi import FastAPI

    if max_sessions < 1:
        raise ForecastEnvError(f"max_sessions = {max_sessions}: give at least 1")
    idle = IdleTimeout(idle_timeout, clock)
    trun = TrainingRun(workspace, engine="openenv", unit=unit, split=split, label=label, run_id=run_id, env=env,
                       event_ids=event_ids, session="episode")
    units = trun.units()
    turn = itertools.count()
    turn_lock = threading.Lock()

    def next_unit() -> tuple[str, int | None]:
        with turn_lock:
            return units[next(turn) % len(units)]

    def new_env() -> ForecastOpenEnv:
        env = ForecastOpenEnv(trun, next_unit)
        conn = _CONNECTION.get()
        if conn is not None:
            conn.env = env  # so the idle gate can record it when it closes the connection
        return env

    server = HTTPEnvServer(new_env, ForecastAction, ForecastObservation, max_concurrent_envs=max_sessions)
    app = FastAPI(title="forecast-env (OpenEnv)", version=_version())
    server.register_routes(app)
    app.state.openenv_server = server
    gate = _IdleGate(app, idle, server)
    app.state.idle_gate = gate
    token = token or secrets.token_urlsafe(24)
    return _TokenGate(gate, token), trun, token


def _find_idle_gate(app: Any) -> _IdleGate | None:
    """The idle gate inside `app`'s chain of ASGI middlewares (each holding the next as `.app`), if any."""
    for _ in range(16):
        if isinstance(app, _IdleGate):
            return app
        app = getattr(app, "app", None)
        if app is None:
            break
    return None


class OpenEnvServer:
    """A running OpenEnv server in this process (uvicorn on a thread): `url`, `token`, `client()`, `stop()`."""

    def __init__(self, app: Any, trun: TrainingRun, token: str, host: str, port: int) -> None:
        import uvicorn

        self.run = trun
        self.token = token
        self.idle_gate = _find_idle_gate(app)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, ws="websockets-sansio",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="forecast-env-openenv", daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise ForecastEnvError(f"the OpenEnv server did not start on {host}:{port} (see the log above)")
            self._thread.join(0.01)
        sock = self._server.servers[0].sockets[0]
        self.host, self.port = sock.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The URL an OpenEnv client takes as `base_url` (the token as its first path segment)."""
        return f"{self.url}/{self.token}"

    def reap_idle(self) -> int:
        """Close the sessions idle past the idle timeout now (as the server does before admitting a new
        connection, and periodically); returns how many."""
        return self.idle_gate.reap_idle() if self.idle_gate is not None else 0

    def client(self, **kwargs: Any) -> ForecastEnvClient:
        """A connected OpenEnv client of this server."""
        return ForecastEnvClient(base_url=self.base_url, **kwargs).connect()

    def stop(self) -> dict[str, Any]:
        """Stop serving, then consolidate the run; returns its record."""
        self._server.should_exit = True
        self._thread.join(timeout=30)
        return self.run.close()

    def __enter__(self) -> OpenEnvServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(workspace: str | Path, *, host: str = "127.0.0.1", port: int = 0, **kwargs: Any) -> OpenEnvServer:
    """Start serving in this process (port 0: a free port) and return the running server."""
    app, trun, token = make_app(workspace, **kwargs)
    try:
        return OpenEnvServer(app, trun, token, host, port)
    except Exception:
        trun.close()
        raise


def serve_forever(workspace: str | Path, *, host: str = "127.0.0.1", port: int = 8770,
                  say: Callable[[str], None] = print, **kwargs: Any) -> dict[str, Any]:
    """The CLI's server: serve until interrupted, then consolidate the run; returns its record."""
    import uvicorn

    limit_malloc_arenas()  # this process is the server: keep its memory flat over many sessions
    app, trun, token = make_app(workspace, **kwargs)
    idle = kwargs.get("idle_timeout", DEFAULT_IDLE_TIMEOUT)
    say(f"forecast-env serve --openenv: http://{host}:{port} ({len(trun.event_ids)} event(s), up to "
        f"{kwargs.get('max_sessions', DEFAULT_MAX_SESSIONS)} sessions, idle timeout "
        f"{'none' if idle is None else f'{idle:g} s'}); recording to {trun.run_dir}")
    say(f"token: {token}")
    say(f"client base_url: http://{host}:{port}/{token}")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, ws="websockets-sansio",
                    lifespan="off")
    finally:
        rec = trun.close()
    return rec


# ---------------------------------------------------------------------------------------------
# the typed client
# ---------------------------------------------------------------------------------------------


class ForecastEnvClient(EnvClient[ForecastAction, ForecastObservation, ForecastState]):
    """OpenEnv's WebSocket client, typed for this environment (`base_url` = the server's URL + `/<token>`)."""

    def _step_payload(self, action: ForecastAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ForecastObservation]:
        obs = ForecastObservation(**payload.get("observation", {}), done=bool(payload.get("done")),
                                  reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"), done=bool(payload.get("done")))

    def _parse_state(self, payload: dict[str, Any]) -> ForecastState:
        return ForecastState(**payload)
