"""The environment service behind the verifiers environment: rollouts' tool calls played on pooled envs.

`forecast_env.adapters.verifiers` serves the environment's tools to verifiers' harnesses over MCP; its tool
server forwards every call here, to the process that runs the verifiers `Env` (docs/design.md §5,
Integrations). This module needs no verifiers: a `RolloutRun` names the workspace, split, unit and run,
`task_rows` builds the rollouts' prompts (the environment's observations), `EnvironmentService` opens a
session per rollout on a pooled `ForecastEnv` (one shared searcher, one lock), plays its tool calls (never
raising for anything the model sends), closes it (the empty report for an unforecast unit, as the `llm`
agent's last resort) and records it as a part of `WS/runs/<run_id>/` like a runner episode; `close`
records what is left (unplayed dates missing) and consolidates the run.
"""

import json
import logging
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_env.config import load_config
from forecast_env.errors import RunError

if TYPE_CHECKING:
    from forecast_env.eval.runs import Run

log = logging.getLogger(__name__)

#: Largest accepted JSON size of one tool call's arguments (as for the MCP server).
MAX_ARGUMENT_BYTES = 32_000

PER_DATE_NOTE = ("This rollout is this one forecast date: it ends when your forecast for {day} is recorded "
                 "(call the forecast tool before budget_left reaches zero).")


def _tool_names() -> frozenset[str]:
    from forecast_env.envs.tools import tool_specs

    return frozenset(s["function"]["name"] for s in tool_specs()) | {"observe"}


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
    """Overrides of the `env` config section (forecast_env/defaults/env.yaml)."""

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
    """The run the rollouts of `cfg` are recorded in (`eval/runs.py`), created or joined."""
    from forecast_env.eval import runs
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


class EnvironmentService:
    """Plays rollouts' tool calls on pooled `ForecastEnv`s and records each finished rollout in the run.

    `open` starts a session at its (event, date) or event, `call` plays one tool call (never raises for
    anything the model sends), `finish` closes a session (the empty report for an unforecast unit), writes its
    part and returns its scores and reward, `close` records what is left and consolidates the run. Calls reach
    it over HTTP from the rollouts' tool servers (`url`); all environment work is serialized by one lock.
    """

    def __init__(self, cfg: RolloutRun) -> None:
        from forecast_env.store import Workspace

        self.cfg = cfg
        self.ws = Workspace.at(cfg.workspace)
        self.run = open_rollout_run(cfg)
        self.run_dir = self.run.dir
        self.session_kind = _session_kind(cfg)
        self._env_lock = threading.Lock()
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._owner: Any = None  # the environment whose searcher every pooled environment shares
        self._sessions: dict[str, _Session] = {}
        self._closed = False
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name="forecast-env-verifiers", daemon=True).start()
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"

    # -- sessions ---------------------------------------------------------------------------------

    def open(self, event_id: str, step: int | None, trace_id: str = "") -> str:
        """Start a rollout's session at (event, step) (step None: the whole event); returns its id."""
        with self._env_lock:
            env = self._acquire()
            rollout = self.run.claim_rollout(self.cfg.label, event_id)
            options: dict[str, Any] = {"event_id": event_id, "rollout": rollout}
            if step is not None:
                options["step"] = step
            try:
                env.reset(seed=0, options=options)
            except Exception:
                self._idle.append(env)
                raise
        sid = secrets.token_urlsafe(24)
        with self._lock:
            self._sessions[sid] = _Session(env, event_id, step, rollout, trace_id)
        return sid

    def call(self, sid: str, tool: Any, arguments: Any) -> dict[str, Any]:
        """Play one tool call: `{"text", "is_error", "finished"}`; errors are replies, never exceptions."""
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None:
            return _error("unknown session: this rollout's environment session does not exist (or is closed)")
        with session.lock:
            if session.done:
                return {**_error(self._over(session)), "finished": True}
            if not isinstance(tool, str) or tool not in TOOL_NAMES:
                return _error(f"unknown tool {str(tool)[:80]!r}; tools: {', '.join(sorted(TOOL_NAMES))}")
            if not isinstance(arguments, dict):
                return _error(f"{tool}: arguments must be a JSON object")
            size = len(json.dumps(arguments, default=str).encode())
            if size > MAX_ARGUMENT_BYTES:
                return _error(f"{tool}: arguments are {size:,} bytes; the limit is {MAX_ARGUMENT_BYTES:,}")
            env = session.env
            with self._env_lock:
                if tool == "observe":
                    if arguments:
                        return _error("observe takes no arguments")
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
        scored dates and reward."""
        session = self._pop(sid)
        if session is None:
            raise RunError(f"finish: no open session {str(sid)[:12]!r} (the rollout's setup did not open one)")
        with session.lock, self._env_lock:
            env = session.env
            for _ in range(len(env.unwrapped.current_event.dates) + 1):
                if self._unit_done(session):
                    break
                env.step({"tool": "forecast", "args": {"probabilities": {}}})
            result = self._write(session, messages, model, complete=True)
            self._idle.append(env)
        return result

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
            with session.lock, self._env_lock:
                for _ in range(len(session.env.unwrapped.current_event.dates) + 1):
                    if self._unit_done(session):
                        break
                    session.env.skip_date("the rollout ended before its forecast (it failed or was abandoned)")
                self._write(session, None, None, complete=False)
                self._idle.append(session.env)
        self._httpd.shutdown()
        self._httpd.server_close()
        try:
            self.consolidate()
        finally:
            for env in [e for e in self._idle if e is not self._owner] + ([self._owner] if self._owner else []):
                env.close()
            self._idle.clear()

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
        if self._closed:
            raise RunError("the environment service is closed; load the environment again")
        if self._idle:
            return self._idle.pop()
        from forecast_env.envs.forecast_env import ForecastEnv

        overrides = dict(self.cfg.env)
        if self._owner is None:
            self._owner = ForecastEnv(self.ws.root, split=self.cfg.split, config=overrides)
            return self._owner
        return ForecastEnv(self.ws.root, split=self.cfg.split, config=overrides, searcher=self._owner.searcher)

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
        from forecast_env.eval.runs import Task

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
                        reply, code = service.call(body.get("session"), body.get("tool"), body.get("arguments")), 200
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
