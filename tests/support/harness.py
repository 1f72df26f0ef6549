"""Sessions under load, faults and bad input: one harness for the servers that play many sessions at once.

The verifiers rollout service (`rollout_service.EnvironmentService`) and the OpenEnv server
(`openenv.serve`) each play many sessions in one process on environments that share one searcher. This
module drives either through a small `Driver` (open a unit, call a tool, finish or vanish) with
deterministic `ScriptedPlayer`s (their calls depend only on their seed and on what the environment
answered), so that the same checks and the same benchmark run against both:

- `check_isolation`: every (unit, seed) played alone, then all of them at once: each session's replies and
  its recorded part must be identical to its solo play (0 cross-talk).
- `run_load`: many sessions playing whole units concurrently: steps/s, p50 / p99 step latency.
- `churn`: sessions opened and closed in turn; private resident memory sampled (growth after warm-up).
- `recorded_episode`: a part as the comparison reads it (rollout numbers, timings and ids dropped).

The fault checks specific to a server (idle timeout with an injectable clock, the session cap, retried
request ids, bad arguments) are in tests/adapters/test_sessions_load.py, written with these pieces.
Everything listens on 127.0.0.1 only and is bounded in sessions and calls.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from forecast_env.enums import SEARCH_MODES

#: Calls one scripted session makes at most (a unit ends sooner: its forecasts are made by then).
MAX_CALLS = 60
#: Keys of a recorded part (and its rows) that differ between two plays of the same session by design.
VOLATILE_KEYS = frozenset({"rollout", "seconds", "run_id", "latency_ms", "elapsed_ms", "ms", "t_wall", "wall_s",
                           "trace_id", "started", "finished", "time", "duration_ms"})


@dataclass(frozen=True)
class Unit:
    """What one session plays: an event's forecast date (`step`), or the whole event (step None)."""

    event_id: str
    step: int | None = None


@dataclass(frozen=True)
class Reply:
    """One tool call's answer as the harness reads it from any server."""

    observation: dict[str, Any]
    """The environment's observation after the call (empty when the server answered with an error only)."""
    text: str
    error: bool
    done: bool


@dataclass
class Played:
    """One session as its player saw it."""

    unit: Unit
    seed: int
    rollout: int
    transcript: list[tuple[str, str, str]] = field(default_factory=list)
    """(tool, JSON arguments, reply text) per call."""
    latencies: list[float] = field(default_factory=list)
    """Seconds per call."""


class Driver(Protocol):
    """How the harness plays sessions on one server."""

    run_dir: Path

    def open(self, unit: Unit) -> Any:
        """Start a session on `unit`; returns its handle."""

    def rollout(self, handle: Any) -> int:
        """The rollout number the session records under."""

    def observation(self, handle: Any) -> dict[str, Any]:
        """The session's opening observation."""

    def call(self, handle: Any, tool: str, args: Any, request_id: Any = None) -> Reply:
        """Play one tool call."""

    def finish(self, handle: Any) -> None:
        """End the session as its player would (its part recorded)."""


# ---------------------------------------------------------------------------------------------
# the player
# ---------------------------------------------------------------------------------------------


class ScriptedPlayer:
    """Search, read a hit, take a note and forecast on every date, with choices drawn from `seed` and from
    what the environment answered (a crossed reply changes every later call)."""

    MODES = SEARCH_MODES

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.phase = 0
        self.hits: list[str] = []

    def next_call(self, obs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The next (tool, arguments) given the latest observation."""
        rng = self.rng
        raw = obs.get("tool_result")
        result: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        if isinstance(result.get("hits"), list):
            self.hits = [h["doc_id"] for h in result["hits"] if isinstance(h, Mapping) and "doc_id" in h]
        phase, self.phase = self.phase, (self.phase + 1) % 4
        words = [w for w in str(obs.get("question", "")).replace("?", " ").split() if len(w) > 3] or ["news"]
        if phase == 0 or (phase == 1 and not self.hits):
            query = " ".join(rng.sample(words, min(len(words), rng.randint(1, 4))))
            return "search", {"query": f"{query} {self.seed % 7}", "k": rng.randint(2, 6),
                              "mode": rng.choice(self.MODES)}
        if phase == 1:
            return "open_article", {"doc_id": rng.choice(self.hits)}
        if phase == 2:
            return "notebook_add", {"claim": f"player {self.seed} saw {len(self.hits)} hits",
                                    "date_observed": obs.get("forecast_date"), "doc_ids": self.hits[:1]}
        options = list(obs.get("options") or [])
        raw = [rng.random() + 0.05 for _ in options]
        return "forecast", {"probabilities": {o: w / sum(raw) for o, w in zip(options, raw)}}


def play(driver: Driver, unit: Unit, seed: int, clock: Callable[[], float] = time.perf_counter) -> Played:
    """One whole session: open, the scripted calls until the unit is over, finish."""
    handle = driver.open(unit)
    out = Played(unit, seed, driver.rollout(handle))
    player = ScriptedPlayer(seed)
    obs = driver.observation(handle)
    try:
        for _ in range(MAX_CALLS):
            tool, args = player.next_call(obs)
            t0 = clock()
            reply = driver.call(handle, tool, args)
            out.latencies.append(clock() - t0)
            out.transcript.append((tool, json.dumps(args, sort_keys=True), reply.text))
            if reply.done:
                break
            obs = reply.observation or obs
    finally:
        driver.finish(handle)
    return out


# ---------------------------------------------------------------------------------------------
# isolation, load, churn
# ---------------------------------------------------------------------------------------------


def recorded_episode(run_dir: Path, label: str, event_id: str, rollout: int) -> dict[str, Any]:
    """A recorded part as the comparison reads it: what was played, without rollout numbers, timings, ids."""
    from forecast_env.eval.runs.store import Task, part_path
    from forecast_env.store import drop_keys

    part = json.loads(part_path(run_dir, Task(label, event_id, rollout)).read_text())
    return drop_keys({k: part.get(k) for k in ("event_id", "forecasts", "tool_calls", "notebook", "steps",
                                               "complete", "session")}, VOLATILE_KEYS)


@dataclass
class LoadResult:
    """Sessions played at once: what they saw and how fast."""

    played: list[Played]
    seconds: float

    @property
    def steps(self) -> int:
        return sum(len(p.latencies) for p in self.played)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def latency_ms(self, q: float) -> float:
        """The q-quantile (0..1) of the step latency, in milliseconds."""
        import numpy as np

        lat = [x for p in self.played for x in p.latencies]
        return float(np.quantile(lat, q) * 1000) if lat else 0.0


def run_load(driver: Driver, jobs: Sequence[tuple[Unit, int]], concurrency: int) -> LoadResult:
    """Play every (unit, seed) job, `concurrency` sessions at a time (threads, each a client)."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, int(concurrency)), thread_name_prefix="session") as pool:
        played = list(pool.map(lambda job: play(driver, *job), jobs))
    return LoadResult(played, time.perf_counter() - t0)


def check_isolation(driver: Driver, jobs: Sequence[tuple[Unit, int]], concurrency: int,
                    label: str) -> tuple[LoadResult, list[str]]:
    """Play each job alone, then all at once: the differences between a session's concurrent play and its
    solo play (replies or recorded part), one line each. An empty list: no cross-talk."""
    alone = [play(driver, *job) for job in jobs]
    together = run_load(driver, jobs, concurrency)
    problems = []
    for a, b in zip(alone, together.played, strict=True):
        what = f"{a.unit.event_id}@{a.unit.step} seed {a.seed}"
        if a.transcript != b.transcript:
            at = next(i for i, (x, y) in enumerate(zip(a.transcript + [None], b.transcript + [None])) if x != y)
            problems.append(f"{what}: replies differ from the solo play at call {at}")
        elif (recorded_episode(driver.run_dir, label, a.unit.event_id, a.rollout)
              != recorded_episode(driver.run_dir, label, b.unit.event_id, b.rollout)):
            problems.append(f"{what}: the recorded part differs from the solo play's")
    return together, problems


def resident_mb() -> float:
    """This process's private resident memory in MB (`RssAnon` of /proc/self/status): the heap, without the
    memory-mapped index pages, which are page cache that grows with the articles read and is shared."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1e3
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def churn(driver: Driver, units: Sequence[Unit], n: int, concurrency: int = 1, calls: int = 1,
          sample_every: int = 500, progress: Callable[[int], None] | None = None) -> list[tuple[int, float]]:
    """Open and close `n` sessions (each `calls` scripted calls, then finished), `concurrency` at a time;
    returns (sessions done, resident MB) samples."""
    samples = [(0, resident_mb())]
    lock = threading.Lock()
    done = [0]

    def one(i: int) -> None:
        handle = driver.open(units[i % len(units)])
        try:
            player = ScriptedPlayer(i)
            obs = driver.observation(handle)
            for _ in range(calls):
                reply = driver.call(handle, *player.next_call(obs))
                if reply.done:
                    break
                obs = reply.observation or obs
        finally:
            driver.finish(handle)
        with lock:
            done[0] += 1
            if done[0] % sample_every == 0:
                samples.append((done[0], resident_mb()))
                if progress is not None:
                    progress(done[0])

    with ThreadPoolExecutor(max(1, int(concurrency)), thread_name_prefix="churn") as pool:
        list(pool.map(one, range(n)))
    if samples[-1][0] != n:
        samples.append((n, resident_mb()))
    return samples


# ---------------------------------------------------------------------------------------------
# drivers
# ---------------------------------------------------------------------------------------------


class RolloutServiceDriver:
    """Sessions of the verifiers rollout service: opened and finished in process (as verifiers' setup and
    cleanup do), every tool call over its HTTP endpoint (as the rollouts' tool servers send them)."""

    def __init__(self, service: Any) -> None:
        import httpx

        self.service = service
        self.run_dir = Path(service.run_dir)
        self.label = service.cfg.label
        self._http = httpx.Client(base_url=service.url, timeout=120.0)

    def open(self, unit: Unit) -> str:
        return self.service.open(unit.event_id, unit.step)

    def rollout(self, handle: str) -> int:
        return int(self.service.describe(handle)["rollout"])

    def observation(self, handle: str) -> dict[str, Any]:
        return json.loads(self.call(handle, "observe", {}).text)

    def post(self, body: Any) -> dict[str, Any]:
        """One raw POST /call (any JSON, for the bad-input checks)."""
        r = self._http.post("/call", content=json.dumps(body, default=str))
        return r.json()

    def call(self, handle: str, tool: str, args: Any, request_id: Any = None) -> Reply:
        body = {"session": handle, "tool": tool, "arguments": args}
        if request_id is not None:
            body["request_id"] = request_id
        reply = self.post(body)
        text = reply["text"]
        try:
            obs = json.loads(text)
        except json.JSONDecodeError:
            obs = {}
        if not isinstance(obs, dict) or "question" not in obs:
            obs = {}
        return Reply(observation=obs, text=text, error=bool(reply["is_error"]), done=bool(reply["finished"]))

    def finish(self, handle: str) -> None:
        self.service.finish(handle, None)

    def close(self) -> None:
        self._http.close()


class OpenEnvDriver:
    """Sessions of the OpenEnv server: each one OpenEnv's own WebSocket client (one connection)."""

    def __init__(self, server: Any, unit: str = "event") -> None:
        self.server = server
        self.run_dir = Path(server.run.run_dir)
        self.label = server.run.label

    def open(self, unit: Unit) -> dict[str, Any]:
        client = self.server.client()
        try:
            result = client.reset(event_id=unit.event_id, **({} if unit.step is None else {"step": unit.step}))
        except Exception:
            client.close()
            raise
        return {"client": client, "obs": result.observation}

    def rollout(self, handle: dict[str, Any]) -> int:
        return int(handle["client"].state().rollout)

    def observation(self, handle: dict[str, Any]) -> dict[str, Any]:
        return handle["obs"].model_dump(exclude={"reward", "done", "metadata"})

    def call(self, handle: dict[str, Any], tool: str, args: Any, request_id: Any = None) -> Reply:
        from forecast_env.adapters.openenv import ForecastAction

        result = handle["client"].step(ForecastAction(tool=tool, args=args))
        obs = result.observation.model_dump(exclude={"reward", "done", "metadata"})
        return Reply(observation=obs, text=json.dumps(obs, sort_keys=True, default=str),
                     error=obs.get("error") is not None, done=bool(result.done))

    def finish(self, handle: dict[str, Any]) -> None:
        handle["client"].close()


# ---------------------------------------------------------------------------------------------
# MCP: one client per server process
# ---------------------------------------------------------------------------------------------


class McpHttpServer:
    """The MCP server's streamable HTTP transport (token gate included) on 127.0.0.1 in this process."""

    def __init__(self, workspace: str | Path, event_id: str, run_id: str, token: str = "harness-token") -> None:
        import uvicorn

        from forecast_env.adapters.mcp import HarnessSession, _Gate, build_server

        self.session = HarnessSession(workspace, event_ids=[event_id], run_id=run_id)
        self.token = token
        app = build_server(self.session).streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
        self._server = uvicorn.Server(uvicorn.Config(_Gate(app, token), host="127.0.0.1", port=0,
                                                     log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, name="mcp-harness", daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the MCP server did not start")
            self._thread.join(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> Path:
        """Stop serving and record the session; returns the run's folder."""
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self.session.close()
        return Path(self.session.run_dir)


async def _mcp_play(client: Any, seed: int, between: Callable[[int], Any] | None = None) -> list[tuple[str, str, str]]:
    """A scripted whole episode over an MCP client; `between(i)` runs before call i (the intruders)."""
    player = ScriptedPlayer(seed)
    obs = json.loads((await client.call_tool("observe", {})).content[0].text)
    transcript = []
    for i in range(MAX_CALLS):
        if between is not None:
            await between(i)
        tool, args = player.next_call(obs)
        text = (await client.call_tool(tool, args)).content[0].text
        transcript.append((tool, json.dumps(args, sort_keys=True), text))
        reply = json.loads(text)
        if "question" in reply:
            obs = reply
        if tool == "forecast" and "no episodes are left" in str(reply.get("message", "")):
            break
    return transcript


def check_mcp_one_client(workspace: str | Path, event_id: str, seed: int = 0,
                         intruders: int = 3) -> dict[str, Any]:
    """MCP serves one client per process: a first client plays a scripted episode while `intruders` further
    clients try to start sessions between its calls (each must be refused, HTTP 409); the first's replies
    and recorded part must equal a solo play of the same seed on a fresh server."""
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    def client(url: str, token: str) -> Any:
        return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0, read=300.0))))

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "intruder", "version": "0"}}}

    def run(intrude: bool) -> tuple[list[tuple[str, str, str]], list[int], Path]:
        server = McpHttpServer(workspace, event_id, run_id=f"mcp-harness-{os.getpid()}-{int(intrude)}-"
                                                            f"{time.time_ns() % 10**9}")
        refused: list[int] = []

        async def between(i: int) -> None:
            if intrude and i < intruders:
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}",
                                                       "Accept": "application/json, text/event-stream"}) as h:
                    refused.append((await h.post(server.url, json=init)).status_code)

        async def main() -> list[tuple[str, str, str]]:
            async with client(server.url, server.token) as first:
                return await _mcp_play(first, seed, between)

        try:
            transcript = asyncio.run(main())
        finally:
            run_dir = server.stop()
        return transcript, refused, run_dir

    solo, _, solo_dir = run(False)
    together, refused, run_dir = run(True)
    label = "harness"
    return {"refused": refused, "same_replies": solo == together,
            "same_part": (recorded_episode(run_dir, label, event_id, 0) == recorded_episode(solo_dir, label, event_id, 0)),
            "calls": len(together)}
