"""Sessions of a trainer or server: one forecasting unit per session, recorded as a part of one run.

The TRL, SkyRL-gym and OpenEnv adapters (docs/training.md) all play the same way: a trainer (or a server)
opens many short sessions, each one (event, forecast date) or one whole event, on pooled `ForecastEnv`s that
share one `Searcher`, and every session ends as one recorded part of one run in `WS/runs/<run_id>/`, written
through the run store (`forecast_env.eval.runs.store`), so `forecast-env report` reads a training run like any
other. This module owns that loop; the adapters only translate their library's calls into it.

- `TrainingRun(workspace, engine=..., unit="date" | "event")`: the run (its record says `engine`, `unit` and
  the `session` kind: `per_date` for one-date units, `episode` for whole events), the shared searcher and
  the environment pool. `open(event_id, step)` starts a session; `close()` consolidates the run.
- `UnitSession`: `call(tool, args)` plays one tool call (never raises for what a model sends) and says when
  the unit is over; `finish()` closes it (the empty report for an unforecast date, as the `llm` agent's last
  resort, so the environment scores its uniform fallback), records its part and returns its reward: minus
  the mean Brier of its scored dates (the environment's episode reward over the unit). `abandon()` records
  it as incomplete instead (its unplayed dates *missing*, never scored).

No score, reward or label appears in any reply text; scores reach the trainer only through `finish()`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from forecast_env.adapters.limits import MAX_ARGUMENT_BYTES, ToolCallError, check_tool_call
from forecast_env.config import load_config
from forecast_env.errors import RunError

#: Units a session may play: one (event, forecast date), or one whole event.
UNITS = ("date", "event")
#: The tools a session's player may call (the environment's own).
TOOLS = ("search", "open_article", "notebook_add", "notebook_supersede", "forecast")
#: Idle seconds after which a server closes a session whose client stopped sending (None: never).
DEFAULT_IDLE_TIMEOUT = 900.0


#: glibc malloc arenas a long-running server process keeps (`limit_malloc_arenas`).
SERVER_MALLOC_ARENAS = 2


def limit_malloc_arenas(n: int = SERVER_MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas for the arenas made from now on (`mallopt(M_ARENA_MAX, n)`, as the
    `MALLOC_ARENA_MAX` environment variable does at start). A server's sessions run on many threads; with
    glibc's default of one arena per thread up to 8 per core, memory freed by closed sessions stays
    fragmented across arenas and the process's resident memory creeps up with every session opened and
    closed, although nothing is retained. Returns whether it was applied (False off glibc)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(-8, int(n)))  # M_ARENA_MAX
    except (OSError, AttributeError):
        return False


class IdleSession(Protocol):
    """What `IdleTimeout.reap` needs of a server's session: when its client last sent, a lock held while one
    of its requests is played (a busy session is never idle), and whether it is closed already."""

    last_active: float
    lock: threading.Lock
    closed: bool


K = TypeVar("K")
S = TypeVar("S", bound=IdleSession)


class IdleTimeout:
    """A server's idle timeout: a session whose client sent nothing for more than `seconds` (of `clock`,
    injectable so tests move time without sleeping) is closed and its slot freed. Both servers (the OpenEnv
    server and the verifiers rollout service) apply it through `reap`, so a vanished client cannot keep a
    slot of the session cap."""

    def __init__(self, seconds: float | None = DEFAULT_IDLE_TIMEOUT, clock: Callable[[], float] = time.monotonic,
                 ) -> None:
        if seconds is not None and (isinstance(seconds, bool) or not seconds > 0):
            raise RunError(f"idle_timeout = {seconds}: give a positive number of seconds (None: never)")
        self.seconds = None if seconds is None else float(seconds)
        self.clock = clock

    def why(self, what: str = "call") -> str:
        """Why a reaped session was closed (recorded with its incomplete part)."""
        return f"no {what} for more than {self.seconds:g} s (its client is gone); recorded incomplete"

    def reap(self, table: MutableMapping[K, S], table_lock: threading.Lock,
             close: Callable[[K, S], None]) -> list[tuple[K, S]]:
        """Remove the idle sessions from `table` and `close` each one (its lock held: no request of it is
        being played); returns the (key, session) pairs reaped. A session busy now, closed meanwhile or
        active again at the second look is left alone. `table_lock` guards `table`."""
        if self.seconds is None:
            return []
        now = self.clock()
        with table_lock:
            stale = [(k, s) for k, s in table.items() if now - s.last_active > self.seconds]
        reaped: list[tuple[K, S]] = []
        for key, session in stale:
            if not session.lock.acquire(blocking=False):
                continue  # a request of it is being played: not idle
            try:
                if session.closed or self.clock() - session.last_active <= self.seconds:
                    continue
                with table_lock:
                    if table.get(key) is not session:
                        continue
                    del table[key]
                close(key, session)
                reaped.append((key, session))
            finally:
                session.lock.release()
        return reaped


@dataclass(frozen=True)
class Reply:
    """What one tool call returns to the player: the text it sees and whether its unit is over."""

    text: str
    """The environment's reply: compact (tool result, error, message, budget) or the full observation."""
    observation: str
    """The environment's full observation (JSON) after the call."""
    error: bool
    done: bool


@dataclass(frozen=True)
class UnitResult:
    """A finished session: its reward, its scored dates and where it was recorded."""

    reward: float
    """Minus the mean Brier over the unit's scored dates (0.0 when none was scored)."""
    scores: list[dict[str, Any]]
    event_id: str
    step: int | None
    rollout: int
    complete: bool


class TrainingRun:
    """One recorded run that many sessions play into, sharing one searcher and a pool of environments.

    Thread-safe: sessions may be opened, played and finished from many threads at once (each session is
    played by one thread at a time; the searcher is shared)."""

    def __init__(self, workspace: str | Path, *, engine: str, unit: str = "date", split: str = "train",
                 label: str | None = None, run_id: str | None = None, env: Mapping[str, Any] | None = None,
                 event_ids: Sequence[str] | None = None, session: str | None = None) -> None:
        from forecast_env.envs.episodes import load_episodes
        from forecast_env.eval.runs import store as runs
        from forecast_env.store import Workspace

        if unit not in UNITS:
            raise RunError(f"unit {unit!r} is unknown; use one of {', '.join(UNITS)}")
        self.ws = Workspace.at(workspace)
        self.engine = engine
        self.unit = unit
        self.split = split
        self.label = label or engine
        self.session_kind = session or ("per_date" if unit == "date" else "episode")
        self.env_config = dict(load_config("env", overrides={**dict(env or {}), "split": split}))
        self.episodes = load_episodes(self.ws.root, split, event_ids)
        if not self.episodes:
            raise RunError(f"split {split!r} of {self.ws.root} has no events to play")
        self.event_ids = [e.event_id for e in self.episodes]
        self._by_id = {e.event_id: e for e in self.episodes}
        rec = runs.run_record(self.ws, "", split, self.event_ids, [runs.AgentSpec(engine, self.label)], 1, 0,
                              load_config("benchmark"), self.env_config, session=self.session_kind,
                              extra={"engine": engine, "unit": unit})
        self.run = runs.open_run(self.ws, rec, run_id=run_id or runs.new_run_id(engine), if_exists="join")
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._searcher: Any = None
        self._open = 0
        self._closed = False

    @property
    def run_dir(self) -> Path:
        return self.run.dir

    @property
    def run_id(self) -> str:
        return self.run.run_id

    # -- sessions ---------------------------------------------------------------------------------

    def units(self) -> list[tuple[str, int | None]]:
        """Every unit of the run's event set: (event id, step) per forecast date, or (event id, None)."""
        if self.unit == "event":
            return [(e.event_id, None) for e in self.episodes]
        return [(e.event_id, d.step) for e in self.episodes for d in e.dates]

    def open(self, event_id: str, step: int | None = None) -> UnitSession:
        """Start a session at (event, step); step None starts a whole event (unit `event`) or, for unit `date`,
        the event's first date."""
        if event_id not in self._by_id:
            raise RunError(f"event {event_id!r} is not in split {self.split!r} of this run")
        if self.unit == "date" and step is None:
            step = self._by_id[event_id].dates[0].step
        if self.unit == "event" and step is not None:
            raise RunError("this run plays whole events: open a session without a step")
        env = self._acquire()
        try:
            rollout = self.run.claim_rollout(self.label, event_id)
            options: dict[str, Any] = {"event_id": event_id, "rollout": rollout}
            if step is not None:
                options["step"] = int(step)
            env.reset(seed=0, options=options)
        except Exception:
            self._release(env)
            raise
        with self._lock:
            self._open += 1
        return UnitSession(self, env, event_id, None if self.unit == "event" or step is None else int(step), rollout)

    def close(self) -> dict[str, Any]:
        """Consolidate the run's tables and mark it complete (every part complete) or incomplete; close the
        pooled environments and the shared searcher. Returns the run record."""
        with self._lock:
            if self._closed:
                return self.run.read_record()
            self._closed = True
            idle, self._idle = self._idle, []
        try:
            counts = self.run.consolidate(self.event_ids)
            parts = list(self.run.parts())
            summary = self.run.summary().to_dicts()
            return self.run.finish(complete=bool(parts) and all(p.get("complete", True) for p in parts),
                                   episodes_done=counts["episodes"], rollouts_recorded=len(parts), summary=summary)
        finally:
            for env in idle:
                env.close()
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None

    # -- pool -------------------------------------------------------------------------------------

    def _acquire(self) -> Any:
        from forecast_env.envs.forecast_env import ForecastEnv

        with self._lock:
            if self._closed:
                raise RunError(f"run {self.run_id} is closed; start a new TrainingRun")
            if self._idle:
                return self._idle.pop()
            searcher = self._shared_searcher()
        return ForecastEnv(self.ws.root, split=self.split, config=self.env_config,
                           event_ids=self.event_ids, searcher=searcher)

    def _shared_searcher(self) -> Any:
        """The one searcher every pooled environment uses (opened at the first environment; called locked)."""
        if self._searcher is None:
            from forecast_env.envs.tools import hidden_set
            from forecast_env.errors import ForecastEnvError
            from forecast_env.retrieval import Searcher

            try:
                self._searcher = Searcher.open(self.ws.root, hide=hidden_set(self.env_config))
            except ForecastEnvError:
                return None  # no index: each environment says what is missing at its first search
        return self._searcher

    def _release(self, env: Any) -> None:
        with self._lock:
            if self._closed:
                if env.searcher is not self._searcher:
                    env.close()
                return
            self._idle.append(env)

    def _session_done(self) -> None:
        with self._lock:
            self._open -= 1


class UnitSession:
    """One session: a unit (one forecast date, or a whole event) played on a pooled environment."""

    def __init__(self, trun: TrainingRun, env: Any, event_id: str, step: int | None, rollout: int) -> None:
        self.trun = trun
        self.env = env
        self.event_id = event_id
        self.step = step
        self.rollout = rollout
        self.started = time.perf_counter()
        self.observation: str = env.unwrapped.episode_log()["steps"][-1]["observation"]
        self.result: UnitResult | None = None
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        """The unit's forecast (every date's, for a whole event) is recorded, or the session is finished."""
        return self.result is not None or self._unit_done()

    @property
    def forecast_date(self) -> str:
        return json.loads(self.observation)["forecast_date"]

    def call(self, tool: Any, arguments: Any, compact: bool = True) -> Reply:
        """Play one tool call; every problem (unknown tool, bad arguments, a unit already over) is an error
        reply, never an exception. `compact` replies carry the tool result, error, message, forecast date and
        budget only (the question and description are in the player's prompt already)."""
        with self._lock:
            if self.done:
                return self._error(self._over())
            try:
                args = check_tool_call(tool, arguments, TOOLS)
            except ToolCallError as exc:
                return self._error(str(exc))
            obs, _reward, _term, _trunc, info = self.env.step({"tool": tool, "args": args})
            self.observation = obs
            done = self._unit_done()
            text = self._compact(obs, done) if compact else obs
            return Reply(text=text, observation=obs, error=bool(info.get("error")), done=done)

    def act(self, action: Any) -> Reply:
        """Play one raw action as the environment takes it (a tool-call object, or its JSON text); anything
        else is the environment's invalid action (an error observation counted against the date's budget).
        The reply is the full observation."""
        with self._lock:
            if self.done:
                return self._error(self._over())
            size = len(json.dumps(action, default=str).encode())
            if size > MAX_ARGUMENT_BYTES:
                return self._error(f"the action is {size:,} bytes; the limit is {MAX_ARGUMENT_BYTES:,}")
            obs, _reward, _term, _trunc, info = self.env.step(action)
            self.observation = obs
            return Reply(text=obs, observation=obs, error=bool(info.get("error")), done=self._unit_done())

    def finish(self, messages: Any = None) -> UnitResult:
        """Close the session: the empty report for its unforecast dates (the uniform fallback), then its part.
        Idempotent: a second call returns the first result."""
        return self._close(complete=True, messages=messages)

    def abandon(self, reason: str = "the session ended before its forecast", messages: Any = None) -> UnitResult:
        """Close the session as incomplete: its unplayed dates are recorded *missing* (never scored)."""
        return self._close(complete=False, messages=messages, reason=reason)

    # -- internals --------------------------------------------------------------------------------

    def _close(self, complete: bool, messages: Any, reason: str = "") -> UnitResult:
        from forecast_env.eval.runs.store import Task

        with self._lock:
            if self.result is not None:
                return self.result
            env = self.env
            for _ in range(len(env.unwrapped.current_event.dates) + 1):
                if self._unit_done():
                    break
                if complete:
                    env.step({"tool": "forecast", "args": {"probabilities": {}}})
                else:
                    env.skip_date(reason)
            log_ = env.unwrapped.episode_log()
            keep = (lambda r: True) if self.step is None else (lambda r: r["step"] == self.step)
            log_ = {**log_, "forecasts": [r for r in log_["forecasts"] if keep(r)],
                    "tool_calls": [r for r in log_["tool_calls"] if keep(r)],
                    "notebook": [r for r in log_["notebook"] if keep(r)]}
            trun = self.trun
            trun.run.record_part(Task(trun.label, self.event_id, self.rollout), log_, seed=0,
                                 seconds=round(time.perf_counter() - self.started, 3), session=trun.session_kind,
                                 messages=messages, complete=complete,
                                 extra={"engine": trun.engine, "unit_step": self.step})
            scores = [{k: r.get(k) for k in ("step", "forecast_date", "brier", "accuracy", "fallback")}
                      for r in log_["forecasts"] if not r.get("missing") and r.get("brier") is not None]
            scores = json.loads(json.dumps(scores, default=str))
            reward = -sum(s["brier"] for s in scores) / len(scores) if scores else 0.0
            self.result = UnitResult(reward=float(reward), scores=scores, event_id=self.event_id, step=self.step,
                                     rollout=self.rollout, complete=complete)
            self.env = None
        trun._release(env)
        trun._session_done()
        return self.result

    def _unit_done(self) -> bool:
        if self.env is None:
            return True
        log_ = self.env.unwrapped.episode_log()
        if self.step is not None:
            return any(r["step"] == self.step for r in log_["forecasts"])
        return bool(log_["steps"]) and bool(log_["steps"][-1].get("terminated"))

    def _over(self) -> str:
        what = "the event's last forecast" if self.step is None else "this date's forecast"
        return f"this session is over: {what} is recorded, and no further tool call is played"

    def _error(self, message: str) -> Reply:
        text = json.dumps({"error": message})
        return Reply(text=text, observation=self.observation, error=True, done=self.done)

    def _compact(self, obs: str, done: bool) -> str:
        o = json.loads(obs)
        out = {k: o.get(k) for k in ("tool_result", "error", "message", "forecast_date", "budget_left")}
        if done:
            out["message"] = ((out["message"] or "") + "; " if out["message"] else "") + "this session is over"
        return json.dumps(out, default=str, ensure_ascii=False)
