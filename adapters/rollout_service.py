"""The environment service behind the verifiers environment: rollouts' tool calls played on pooled envs.

`forecast_env.adapters.verifiers` serves the environment's tools to verifiers' harnesses over MCP; its tool
server forwards every call here, to the process that runs the verifiers `Env` (docs/design.md §5,
Integrations). This module needs no verifiers: a `RolloutRun` names the workspace, split, unit and run,
`task_rows` builds the rollouts' prompts (the environment's observations), `EnvironmentService` opens a
session per rollout on a pooled `ForecastEnv` (one shared, thread-safe searcher whose queued searches are
answered together), plays its tool calls (never raising for anything the model sends), closes it (the empty
report for an unforecast unit, as the `llm` agent's last resort) and records it as a part of
`WS/runs/<run_id>/` like a runner episode; `close` records what is left (unplayed dates missing) and
consolidates the run.

Sessions run concurrently (each session's calls one at a time, under its own lock). At most `max_sessions`
are open (one more is refused, politely); a session without a call for `idle_timeout` seconds (its client
vanished) is closed as incomplete and its slot freed; a call that carries a `request_id` already answered
in its session gets that answer again instead of being played twice (a client's retry).
"""

import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_env.adapters.limits import OBSERVE, ToolCallError, check_tool_call
from forecast_env.adapters.sessions import DEFAULT_IDLE_TIMEOUT, IdleTimeout
from forecast_env.config import load_config
from forecast_env.errors import RunError

if TYPE_CHECKING:
    from forecast_env.eval.runs.store import Run

log = logging.getLogger(__name__)

#: Sessions one service holds open at most (`max_sessions`), and the idle seconds after which a session
#: whose client stopped calling is closed as incomplete (`idle_timeout`; None: never).
DEFAULT_MAX_SESSIONS = 256
#: Answers kept per session for retried request ids, and closed-session ids remembered for their errors.
REPLAYS_KEPT = 64
CLOSED_KEPT = 4096
#: Longest accepted request id (a string or an integer).
MAX_REQUEST_ID = 200

PER_DATE_NOTE = ("This rollout is this one forecast date: it ends when your forecast for {day} is recorded "
                 "(call the forecast tool before budget_left reaches zero).")


def _tool_names() -> frozenset[str]:
    from forecast_env.envs.tools import tool_specs

    return frozenset(s["function"]["name"] for s in tool_specs()) | {OBSERVE}


#: The tools a rollout may call: the environment's, and the free `observe`.
TOOL_NAMES = _tool_names()


@dataclass(frozen=True)
class RolloutRun:
    """What every rollout of one verifiers environment shares: where, which unit, which run."""

    workspace: str
    run_id: str
    split: str = "eval"
    episode: bool = False
    """False: a rollout is one (event, forecast date); True: one whole event."""
    label: str = "verifiers"
    """The agent label of the run's rows."""
    events: tuple[str, ...] | None = None
    """Narrows the split to these events (None: all of them)."""
    env: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the `env` config section (configs/env.yaml)."""

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)


# ---------------------------------------------------------------------------------------------
# tasks, the run record
# ---------------------------------------------------------------------------------------------


def task_rows(cfg: RolloutRun) -> Iterator[dict[str, Any]]:
    """The taskset's rows: per (event, forecast date), or per event, the prompt opening with the observation."""
    from forecast_env.agents.llm import system_prompt
    from forecast_env.envs.forecast_env import ForecastEnv

    env = ForecastEnv(cfg.workspace, split=cfg.split, config=dict(cfg.env), event_ids=cfg.events)
    system = system_prompt()
    try:
        for ep in env.episodes:
            starts = [None] if cfg.episode else [d.step for d in ep.dates]
            for step in starts:
                options = {"event_id": ep.event_id} if step is None else {"event_id": ep.event_id, "step": step}
                obs, _ = env.reset(seed=0, options=options)
                o = json.loads(obs)
                if step is None:
                    prompt = f"A new forecasting episode starts.\n{obs}"
                else:
                    opening = "A new forecasting episode starts." if step == 1 else "A new forecast date starts."
                    prompt = f"{opening} {PER_DATE_NOTE.format(day=o['forecast_date'])}\n{obs}"
                yield {"id": ep.event_id if step is None else f"{ep.event_id}@{step}", "name": ep.question[:200],
                       "event_id": ep.event_id, "step": step, "forecast_date": o["forecast_date"],
                       "system_prompt": system, "prompt": prompt}
    finally:
        env.close()


def _event_ids(cfg: RolloutRun) -> list[str]:
    from forecast_env.envs.episodes import load_episodes

    return [e.event_id for e in load_episodes(Path(cfg.workspace), cfg.split, cfg.events)]


def ensure_run_record(cfg: RolloutRun) -> Path:
    """Create `WS/runs/<run_id>/` (a runner's record with engine, unit and session) or join it when it exists
    with the same settings (every process serving the environment records into one run)."""
    return open_rollout_run(cfg).dir


def open_rollout_run(cfg: RolloutRun) -> "Run":
    """The run the rollouts of `cfg` are recorded in (`eval/runs/store.py`), created or joined."""
    from forecast_env.eval.runs import store as runs
    from forecast_env.store import Workspace

    if not cfg.workspace or not cfg.run_id:
        raise RunError(f"a rollout run needs a workspace and a run id (got {cfg.workspace!r}, {cfg.run_id!r})")
    ws = Workspace.at(cfg.workspace)
    env_cfg = load_config("env", overrides=dict(cfg.env))  # as the runner records it (the split is its own field)
    rec = runs.run_record(ws, cfg.run_id, cfg.split, _event_ids(cfg), [runs.AgentSpec("verifiers", cfg.label, {})],
                          1, 0, load_config("benchmark"), env_cfg, session=_session_kind(cfg),
                          extra={"engine": "verifiers", "unit": "event" if cfg.episode else "date"})
    return runs.open_run(ws, rec, if_exists="join")


def _session_kind(cfg: RolloutRun) -> str:
    """A whole-event rollout keeps its own chat (`episode`); a per-date one sees one date alone (`per_date`)."""
    return "episode" if cfg.episode else "per_date"


# ---------------------------------------------------------------------------------------------
# the environment service: sessions of rollouts, played on pooled environments
# ---------------------------------------------------------------------------------------------


class _Session:
    """One rollout's environment and its place in the run."""

    def __init__(self, env: Any, event_id: str, step: int | None, rollout: int, trace_id: str) -> None:
        self.env = env
        self.event_id = event_id
        self.step = step
        self.rollout = rollout
        self.trace_id = trace_id
        self.started = time.perf_counter()
        self.done = False  # the unit's forecast is recorded (or its episode terminated)
        self.lock = threading.Lock()
        self.last_active = 0.0  # the service's clock at the session's last call
        self.closed = False  # finished or abandoned: its environment is back in the pool
        self.replies: OrderedDict[Any, tuple[str, str, dict[str, Any]]] = OrderedDict()  # request id -> answer


class EnvironmentService:
    """Plays rollouts' tool calls on pooled `ForecastEnv`s and records each finished rollout in the run.

    `open` starts a session at its (event, date) or event, `call` plays one tool call (never raises for
    anything the model sends), `finish` closes a session (the empty report for an unforecast unit), writes its
    part and returns its scores and reward, `close` records what is left and consolidates the run. Calls reach
    it over HTTP from the rollouts' tool servers (`url`, 127.0.0.1 only). Sessions play concurrently, each
    under its own lock, on environments sharing one searcher; `max_sessions`, `idle_timeout` (seconds of
    `clock`, injectable for tests; `reap_idle` applies it, as every open and call does) bound them.
    """

    def __init__(self, cfg: RolloutRun, *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT, clock: Callable[[], float] = time.monotonic,
                 batch_searches: bool = True) -> None:
        from forecast_env.store import Workspace

        if max_sessions < 1:
            raise RunError(f"max_sessions = {max_sessions}: give at least 1")
        self._idle_timeout = IdleTimeout(idle_timeout, clock)  # the timeout both servers share (sessions.py)
        self.max_sessions = int(max_sessions)
        self.idle_timeout = idle_timeout
        self.clock = clock
        self.batch_searches = batch_searches
        self.cfg = cfg
        self.ws = Workspace.at(cfg.workspace)
        self.run = open_rollout_run(cfg)
        self.run_dir = self.run.dir
        self.session_kind = _session_kind(cfg)
        self._lock = threading.Lock()  # the pool, the session table and the counts (never held for env work)
        self._idle: list[Any] = []
        self._searcher: Any = None  # the one searcher every pooled environment shares
        self._sessions: dict[str, _Session] = {}
        self._opening = 0  # sessions being opened (counted against max_sessions)
        self._ended: OrderedDict[str, dict[str, Any]] = OrderedDict()  # closed by the service: why, and the result
        self._closed = False
        self._httpd = _Server(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._httpd.serve_forever, name="forecast-env-verifiers", daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_port}"

    # -- sessions ---------------------------------------------------------------------------------

    def open(self, event_id: str, step: int | None, trace_id: str = "") -> str:
        """Start a rollout's session at (event, step) (step None: the whole event); returns its id.

        Refused (RunError, saying so) when `max_sessions` sessions are open."""
        self.reap_idle()
        with self._lock:
            if self._closed:
                raise RunError("the environment service is closed; load the environment again")
            if len(self._sessions) + self._opening >= self.max_sessions:
                raise RunError(f"the environment service is at its limit of {self.max_sessions} open sessions; "
                               "finish a rollout (or wait for idle ones to time out) and open this one again")
            self._opening += 1
        try:
            env = self._acquire()
            try:
                rollout = self.run.claim_rollout(self.cfg.label, event_id)
                options: dict[str, Any] = {"event_id": event_id, "rollout": rollout}
                if step is not None:
                    options["step"] = step
                env.reset(seed=0, options=options)
            except Exception:
                self._release(env)
                raise
            sid = secrets.token_urlsafe(24)
            session = _Session(env, event_id, step, rollout, trace_id)
            session.last_active = self.clock()
            with self._lock:
                self._sessions[sid] = session
        finally:
            with self._lock:
                self._opening -= 1
        return sid

    def describe(self, sid: str) -> dict[str, Any]:
        """An open session's unit and rollout number: `{"event_id", "step", "rollout"}` (RunError if none)."""
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            raise RunError(f"no open session {str(sid)[:12]!r}")
        return {"event_id": session.event_id, "step": session.step, "rollout": session.rollout}

    @property
    def open_sessions(self) -> int:
        """Sessions open now (their slots taken)."""
        with self._lock:
            return len(self._sessions)

    def call(self, sid: Any, tool: Any, arguments: Any, request_id: Any = None) -> dict[str, Any]:
        """Play one tool call: `{"text", "is_error", "finished"}`; errors are replies, never exceptions.

        `request_id` (optional, a string or integer): a retry of an answered request of this session gets
        the same answer without the call being played again; the same id with another call is an error."""
        self.reap_idle()
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            ended = self._ended.get(sid) if isinstance(sid, str) else None
            if ended is not None:
                return _error(f"this rollout's session was closed: {ended['why']}")
            return _error("unknown session: this rollout's environment session does not exist (or is closed)")
        if request_id is not None and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))
                                       or len(str(request_id)) > MAX_REQUEST_ID):
            return _error(f"request_id must be a string or an integer of at most {MAX_REQUEST_ID} characters")
        with session.lock:
            session.last_active = self.clock()
            if request_id is not None:
                try:
                    key = json.dumps([tool, arguments], sort_keys=True, default=str)
                except (TypeError, ValueError):
                    key = repr((tool, arguments))
                seen = session.replies.get(request_id)
                if seen is not None:
                    if seen[0] != key:
                        return _error(f"request_id {str(request_id)[:40]!r} was already used for another call "
                                      "in this session; give each call its own id")
                    return dict(seen[2])
            reply = self._play(session, tool, arguments)
            if request_id is not None:
                session.replies[request_id] = (key, str(tool), reply)
                while len(session.replies) > REPLAYS_KEPT:
                    session.replies.popitem(last=False)
            return dict(reply)

    def _play(self, session: _Session, tool: Any, arguments: Any) -> dict[str, Any]:
        """One tool call of a session (its lock held)."""
        if session.closed:
            return _error("this rollout's session was closed; no further tool call is played")
        if session.done:
            return {**_error(self._over(session)), "finished": True}
        try:
            arguments = check_tool_call(tool, arguments, TOOL_NAMES)
        except ToolCallError as exc:
            return _error(str(exc))
        env = session.env
        if tool == OBSERVE:
            return {"text": env.unwrapped.episode_log()["steps"][-1]["observation"], "is_error": False,
                    "finished": False}
        obs, _reward, _terminated, _trunc, info = env.step({"tool": tool, "args": arguments})
        error = bool(info.get("error")) if isinstance(info, Mapping) else False
        if self._unit_done(session):
            session.done = True
            return {"text": self._closing(session, obs), "is_error": error, "finished": True}
        return {"text": obs, "is_error": error, "finished": False}

    def finish(self, sid: str, messages: list[dict[str, Any]] | None, model: str | None = None) -> dict[str, Any]:
        """Close a rollout's session: the empty report for its unforecast dates, then its part; returns its
        scored dates and reward (a session the service already closed, idle, returns that result)."""
        session = self._pop(sid)
        if session is None:
            ended = self._ended.get(sid) if isinstance(sid, str) else None
            if ended is not None:
                return dict(ended["result"])
            raise RunError(f"finish: no open session {str(sid)[:12]!r} (the rollout's setup did not open one)")
        with session.lock:
            env = session.env
            for _ in range(len(env.unwrapped.current_event.dates) + 1):
                if self._unit_done(session):
                    break
                env.step({"tool": "forecast", "args": {"probabilities": {}}})
            result = self._write(session, messages, model, complete=True)
            session.closed = True
        self._release(env)
        return result

    def reap_idle(self) -> int:
        """Close the sessions idle for more than `idle_timeout` (their clients vanished) as incomplete: their
        unplayed dates missing, their slots freed. Returns how many."""
        why = self._idle_timeout.why("call") if self.idle_timeout is not None else ""

        def close(sid: str, session: _Session) -> None:
            self._remember(sid, why, self._abandon(session, why))

        reaped = self._idle_timeout.reap(self._sessions, self._lock, close)
        for _sid, session in reaped:
            self._release(session.env)
        return len(reaped)

    def _abandon(self, session: _Session, why: str) -> dict[str, Any]:
        """Record a session the rollout did not finish (its lock held): unplayed dates missing, part incomplete."""
        for _ in range(len(session.env.unwrapped.current_event.dates) + 1):
            if self._unit_done(session):
                break
            session.env.skip_date(f"the rollout ended before its forecast ({why})")
        result = self._write(session, None, None, complete=False)
        session.closed = True
        return {**result, "complete": False}

    def _remember(self, sid: str, why: str, result: dict[str, Any]) -> None:
        with self._lock:
            self._ended[sid] = {"why": why, "result": result}
            while len(self._ended) > CLOSED_KEPT:
                self._ended.popitem(last=False)

    def close(self) -> None:
        """Record the sessions still open (their unplayed dates missing), consolidate the run, stop serving."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            left = list(self._sessions)
        for sid in left:
            session = self._pop(sid)
            if session is None:
                continue
            with session.lock:
                if not session.closed:
                    self._abandon(session, "it failed or was abandoned")
            with self._lock:
                self._idle.append(session.env)
        self._httpd.shutdown()
        self._httpd.server_close()
        try:
            self.consolidate()
        finally:
            with self._lock:
                idle, self._idle = self._idle, []
            for env in idle:
                env.close()
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None

    def consolidate(self) -> dict[str, Any]:
        """Write the run's tables from its parts and update run.json (status, counts, summary)."""
        counts = self.run.consolidate()
        parts = list(self.run.parts())
        self.run.finish(complete=bool(parts) and all(p.get("complete", True) for p in parts),
                        episodes_done=counts["episodes"], rollouts_recorded=len(parts),
                        summary=self.run.summary().to_dicts())
        return counts

    # -- internals --------------------------------------------------------------------------------

    def _acquire(self) -> Any:
        from forecast_env.envs.forecast_env import ForecastEnv

        with self._lock:
            if self._closed:
                raise RunError("the environment service is closed; load the environment again")
            if self._idle:
                return self._idle.pop()
            searcher = self._shared_searcher()
        return ForecastEnv(self.ws.root, split=self.cfg.split, config=dict(self.cfg.env), searcher=searcher)

    def _shared_searcher(self) -> Any:
        """The searcher every pooled environment uses, opened with the first (called with `_lock` held); its
        searches that queue up are answered together (`BatchedSearcher`, same hits bit for bit)."""
        if self._searcher is None:
            from forecast_env.envs.tools import hidden_set
            from forecast_env.errors import ForecastEnvError
            from forecast_env.retrieval import Searcher
            from forecast_env.retrieval.batcher import BatchedSearcher

            try:
                searcher = Searcher.open(self.ws.root, hide=hidden_set(load_config("env", overrides=dict(self.cfg.env))))
            except ForecastEnvError:
                return None  # no index: each environment says what is missing at its first search
            self._searcher = BatchedSearcher(searcher) if self.batch_searches else searcher
        return self._searcher

    def _release(self, env: Any) -> None:
        """Return an environment to the pool (closed instead once the service is)."""
        with self._lock:
            if not self._closed:
                self._idle.append(env)
                return
        env.close()

    def _pop(self, sid: Any) -> _Session | None:
        with self._lock:
            return self._sessions.pop(sid, None) if isinstance(sid, str) else None

    def _unit_done(self, session: _Session) -> bool:
        log_ = session.env.unwrapped.episode_log()
        if session.step is not None:
            return any(r["step"] == session.step for r in log_["forecasts"])
        return bool(log_["steps"]) and bool(log_["steps"][-1].get("terminated"))

    def _over(self, session: _Session) -> str:
        what = "the event's last forecast" if session.step is None else "this date's forecast"
        return f"this rollout is over: {what} is recorded, and no further tool call is played"

    def _closing(self, session: _Session, obs: str) -> str:
        """The reply that ends a unit: the forecast receipt (no score), and that the rollout is over."""
        o = json.loads(obs)
        if session.step is None:
            return json.dumps({"message": "the event's last forecast is recorded: this rollout is over",
                               "last_observation": o})
        row = next(r for r in session.env.unwrapped.episode_log()["forecasts"] if r["step"] == session.step)
        note = f"the forecast for {row['forecast_date']} is recorded: this rollout is over"
        if row.get("fallback") == "budget_exhausted":
            note = f"the call budget of {row['forecast_date']} is spent: the uniform forecast was recorded and " \
                   "this rollout is over"
        return json.dumps({"message": note, "tool_result": o.get("tool_result"), "error": o.get("error")},
                          default=str)

    def _write(self, session: _Session, messages: Any, model: str | None, complete: bool) -> dict[str, Any]:
        from forecast_env.eval.runs.store import Task

        log_ = session.env.unwrapped.episode_log()
        forecasts = [r for r in log_["forecasts"] if session.step is None or r["step"] == session.step]
        log_ = {**log_, "forecasts": forecasts,
                "tool_calls": [r for r in log_["tool_calls"] if session.step is None or r["step"] == session.step],
                "notebook": [r for r in log_["notebook"] if session.step is None or r["step"] == session.step]}
        self.run.record_part(Task(self.cfg.label, session.event_id, session.rollout), log_, seed=0,
                             seconds=round(time.perf_counter() - session.started, 3), session=self.session_kind,
                             messages=messages, complete=complete,
                             extra={"engine": "verifiers", "unit_step": session.step, "model": model,
                                    "trace_id": session.trace_id})
        scores = [{k: r.get(k) for k in ("step", "forecast_date", "brier", "accuracy", "log_vs_market", "fallback")}
                  for r in forecasts if not r.get("missing") and r.get("brier") is not None]
        scores = json.loads(json.dumps(scores, default=str))
        reward = -sum(s["brier"] for s in scores) / len(scores) if scores else 0.0
        return {"scores": scores, "reward": reward, "rollout": session.rollout}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(length)) if self.path == "/call" else None
                    if not isinstance(body, dict):
                        reply, code = _error("POST /call with a JSON object"), 400
                    else:
                        reply = service.call(body.get("session"), body.get("tool"), body.get("arguments"),
                                             body.get("request_id"))
                        code = 200
                except Exception as exc:  # a bug: the tool server still gets an answer
                    log.error("environment service: call failed", exc_info=True)
                    reply, code = _error(f"internal error {type(exc).__name__}: {str(exc)[:200]}"), 200
                data = json.dumps(reply, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class _Server(ThreadingHTTPServer):
    """The service's HTTP endpoint: a thread per connection, and a listen backlog for many rollouts' tool
    servers connecting at once (socketserver's default of 5 resets connections beyond it)."""

    daemon_threads = True
    request_queue_size = 1024


def _error(message: str) -> dict[str, Any]:
    return {"text": json.dumps({"error": message}), "is_error": True, "finished": False}


_SERVICES: dict[str, EnvironmentService] = {}
_SERVICES_LOCK = threading.Lock()


def service_for(cfg: RolloutRun) -> EnvironmentService:
    """This process's environment service for a task config (started at first use)."""
    key = cfg.key()
    with _SERVICES_LOCK:
        service = _SERVICES.get(key)
        if service is None or service._closed:
            service = _SERVICES[key] = EnvironmentService(cfg)
        return service


def close_services(cfg: RolloutRun | None = None) -> None:
    """Close (record, consolidate) this process's service for `cfg`, or all of them."""
    with _SERVICES_LOCK:
        keys = [k for k in _SERVICES if cfg is None or k == cfg.key()]
        services = [_SERVICES.pop(k) for k in keys]
    for service in services:
        service.close()
