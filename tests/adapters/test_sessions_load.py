"""Many sessions per server under load, faults and bad input (tests/support/harness.py), small counts: the
verifiers rollout service and the OpenEnv server. benchmarks/serving/sessions_per_server.py runs the same harness big."""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect as ws_connect

from forecast_env.adapters.rollout_service import EnvironmentService, RolloutRun
from forecast_env.envs.episodes import load_episodes
from forecast_env.errors import RunError
from forecast_env.eval.runs.store import Task, part_path
from tests.support.harness import (
    OpenEnvDriver,
    RolloutServiceDriver,
    ScriptedPlayer,
    Unit,
    check_isolation,
    churn,
    play,
    recorded_episode,
)


class FakeClock:
    """An injectable clock: time moves only when the test says so (no sleeps)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def date_units(ws: Path, n_events: int = 3) -> list[Unit]:
    eps = load_episodes(ws, "eval", None)[:n_events]
    return [Unit(e.event_id, d.step) for e in eps for d in e.dates[:2]]


def service(ws: Path, run_id: str, **kw) -> EnvironmentService:
    return EnvironmentService(RolloutRun(str(ws), run_id=f"{run_id}-{secrets.token_hex(3)}", split="eval"), **kw)


def part(svc: EnvironmentService, unit: Unit, rollout: int) -> dict:
    return json.loads(part_path(svc.run_dir, Task(svc.cfg.label, unit.event_id, rollout)).read_text())


# ------------------------------------------------------------------ rollout service


def test_rollout_service_sessions_play_concurrently_without_cross_talk(micro_events: Path) -> None:
    units = date_units(micro_events)
    jobs = [(units[i % len(units)], 100 + i % 5) for i in range(10)]  # repeated units, seeds repeated too
    svc = service(micro_events, "load-rs", max_sessions=16)
    driver = RolloutServiceDriver(svc)
    try:
        result, problems = check_isolation(driver, jobs, concurrency=8, label=svc.cfg.label)
        assert problems == []
        assert svc.open_sessions == 0 and len(svc._idle) <= 8  # every slot freed, the pool bounded
        assert len({tuple(p.transcript) for p in result.played}) > 1  # the seeds play differently
        assert all(p.transcript[-1][0] == "forecast" for p in result.played)
        assert result.steps > 0 and result.latency_ms(0.99) >= result.latency_ms(0.5) > 0
        samples = churn(driver, units, 40, concurrency=4, sample_every=10)
        assert [n for n, _ in samples] == [0, 10, 20, 30, 40] and svc.open_sessions == 0
    finally:
        driver.close()
        svc.close()
    rec = json.loads((svc.run_dir / "run.json").read_text())
    assert rec["status"] == "complete" and rec["rollouts_recorded"] == 2 * len(jobs) + 40


def test_a_vanished_client_is_timed_out_its_slot_freed_and_its_part_incomplete(micro_events: Path) -> None:
    clock = FakeClock()
    units = date_units(micro_events)
    svc = service(micro_events, "load-idle", max_sessions=2, idle_timeout=30, clock=clock)
    driver = RolloutServiceDriver(svc)
    try:
        gone, alive = driver.open(units[0]), driver.open(units[1])
        gone_rollout = driver.rollout(gone)
        driver.call(gone, "search", {"query": "election"})
        with pytest.raises(RunError, match="limit of 2 open sessions"):
            driver.open(units[2])
        clock.now += 20
        assert not driver.call(alive, "search", {"query": "market"}).error  # alive is active at +20
        clock.now += 15  # gone: 35 s without a call; alive: 15 s
        assert svc.reap_idle() == 1 and svc.open_sessions == 1
        p = part(svc, units[0], gone_rollout)
        assert p["complete"] is False and all(f.get("missing") for f in p["forecasts"])
        assert [c["tool"] for c in p["tool_calls"]] == ["search", "skip_date"]  # what was played, then the skip
        late = driver.call(gone, "search", {"query": "late"})
        assert late.error and "no call for more than 30 s" in late.text
        assert svc.finish(gone, None)["complete"] is False  # the client's late cleanup gets the result
        third = driver.open(units[2])  # the freed slot
        for handle in (alive, third):
            player = ScriptedPlayer(7)
            obs = driver.observation(handle)
            for _ in range(8):
                reply = driver.call(handle, *player.next_call(obs))
                if reply.done:
                    break
                obs = reply.observation or obs
            assert reply.done
            driver.finish(handle)
        assert svc.open_sessions == 0
    finally:
        driver.close()
        svc.close()
    assert json.loads((svc.run_dir / "run.json").read_text())["status"] == "incomplete"


def test_no_timeout_without_idle_time_and_none_disables_it(micro_events: Path) -> None:
    clock = FakeClock()
    units = date_units(micro_events)
    svc = service(micro_events, "load-noidle", idle_timeout=None, clock=clock)
    try:
        sid = svc.open(units[0].event_id, units[0].step)
        clock.now += 10 ** 9
        assert svc.reap_idle() == 0 and svc.open_sessions == 1
        svc.finish(sid, None)
    finally:
        svc.close()
    with pytest.raises(RunError, match="idle_timeout"):
        service(micro_events, "load-bad", idle_timeout=0)


def test_a_retried_request_id_gets_the_same_answer_played_once(micro_events: Path) -> None:
    units = date_units(micro_events)
    svc = service(micro_events, "load-retry")
    driver = RolloutServiceDriver(svc)
    try:
        sid = driver.open(units[0])
        rollout = driver.rollout(sid)
        first = driver.call(sid, "notebook_add", {"claim": "one note", "date_observed": "2025-01-01"}, "req-1")
        again = driver.call(sid, "notebook_add", {"claim": "one note", "date_observed": "2025-01-01"}, "req-1")
        assert first == again
        other = driver.call(sid, "search", {"query": "oil"}, "req-1")
        assert other.error and "already used for another call" in other.text
        for bad in (["list"], {"a": 1}, True, "x" * 500):
            assert driver.call(sid, "search", {"query": "oil"}, bad).error
        assert not driver.call(sid, "search", {"query": "oil"}, 7).error  # integer ids are fine
        assert driver.call(sid, "search", {"query": "oil"}, 7) == driver.call(sid, "search", {"query": "oil"}, 7)
        svc.finish(sid, None)
    finally:
        driver.close()
        svc.close()
    calls = [c["tool"] for c in part(svc, units[0], rollout)["tool_calls"]]
    assert calls.count("notebook_add") == 1 and calls.count("search") == 1, calls


def test_bad_input_gets_tool_errors_and_another_session_plays_on_unharmed(micro_events: Path) -> None:
    units = date_units(micro_events)
    svc = service(micro_events, "load-bad-input")
    driver = RolloutServiceDriver(svc)
    try:
        solo = play(driver, units[1], seed=5)
        victim = driver.open(units[1])
        closed = driver.open(units[0])
        driver.finish(closed)
        bad_bodies = [
            {"session": victim, "tool": "search", "arguments": {"query": "x" * 40_000}},  # oversized
            {"session": victim, "tool": 5, "arguments": {}},  # wrong types
            {"session": victim, "tool": "search", "arguments": ["oil"]},
            {"session": victim, "tool": "no_such_tool", "arguments": {}},
            {"session": 12345, "tool": "search", "arguments": {"query": "oil"}},
            {"session": closed, "tool": "search", "arguments": {"query": "oil"}},  # a finished session's id
            {"session": secrets.token_urlsafe(24), "tool": "search", "arguments": {"query": "oil"}},  # not a session
        ]
        player = ScriptedPlayer(5)
        obs = driver.observation(victim)
        transcript = []
        for i in range(60):
            if i < len(bad_bodies):
                reply = driver.post(bad_bodies[i])
                assert reply["is_error"] is True and "error" in json.loads(reply["text"]), bad_bodies[i]
            tool, args = player.next_call(obs)
            r = driver.call(victim, tool, args)
            transcript.append((tool, json.dumps(args, sort_keys=True), r.text))
            if r.done:
                break
            obs = r.observation or obs
        rollout = driver.rollout(victim)
        driver.finish(victim)
        assert transcript == solo.transcript
        assert (recorded_episode(svc.run_dir, svc.cfg.label, units[1].event_id, rollout)
                == recorded_episode(svc.run_dir, svc.cfg.label, units[1].event_id, solo.rollout))
        assert driver.post(["not", "an", "object"])["is_error"] is True
    finally:
        driver.close()
        svc.close()


# ------------------------------------------------------------------ OpenEnv server


def test_openenv_sessions_play_concurrently_without_cross_talk(micro_events: Path) -> None:
    from forecast_env.adapters.openenv import serve

    eps = load_episodes(micro_events, "eval", None)[:3]
    jobs = [(Unit(eps[i % len(eps)].event_id), 200 + i % 4) for i in range(8)]
    with serve(micro_events, split="eval", max_sessions=8, run_id=f"load-oe-{secrets.token_hex(3)}") as server:
        driver = OpenEnvDriver(server)
        result, problems = check_isolation(driver, jobs, concurrency=8, label=driver.label)
        assert problems == []
        assert len({tuple(p.transcript) for p in result.played}) > 1
        assert server.run._open == 0


def test_openenv_cap_refuses_and_a_vanished_client_leaves_an_incomplete_part(micro_events: Path) -> None:
    from forecast_env.adapters.openenv import serve

    eps = load_episodes(micro_events, "eval", None)[:2]
    with serve(micro_events, split="eval", max_sessions=2, run_id=f"load-oe-cap-{secrets.token_hex(3)}") as server:
        driver = OpenEnvDriver(server)
        a, b = driver.open(Unit(eps[0].event_id)), driver.open(Unit(eps[1].event_id))
        with ws_connect(server.base_url.replace("http://", "ws://") + "/ws") as raw:  # a third: refused, politely
            refusal = json.loads(raw.recv(timeout=30))
        assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED"
        gone_rollout = driver.rollout(a)
        assert not driver.call(a, "search", {"query": "election"}).error
        big = driver.call(b, "search", {"query": "x" * 40_000})
        assert big.error and "limit" in big.observation["error"]
        driver.finish(a)  # the client leaves mid-episode: its slot frees, its part is incomplete
        c = driver.open(Unit(eps[0].event_id))
        driver.finish(b)
        driver.finish(c)
        label = driver.label
    p = json.loads(part_path(server.run.run_dir, Task(label, eps[0].event_id, gone_rollout)).read_text())
    tools = [t["tool"] for t in p["tool_calls"]]
    assert p["complete"] is False and tools[0] == "search" and set(tools[1:]) == {"skip_date"}
    assert all(f.get("missing") for f in p["forecasts"])  # its unplayed dates: missing, never scored


def capacity_refused(ws_url: str) -> bool:
    """Whether a new connection is refused for the session cap. It asks for its state: an admitted connection is
    answered with the state, a refused one gets the refusal, which the server sends before reading anything (so
    no timeout decides it)."""
    from websockets.exceptions import ConnectionClosed

    with ws_connect(ws_url, open_timeout=60) as raw:
        try:
            raw.send(json.dumps({"type": "state"}))
        except ConnectionClosed:  # refused and closed already: the refusal is still queued for recv
            pass
        reply = json.loads(raw.recv(timeout=60))
    return reply["type"] == "error" and reply["data"]["code"] == "CAPACITY_REACHED"


class LagAfterReply:
    """ASGI middleware outside the server's gates: once the reply to the first message containing `marker` has
    gone out, that connection's handler task stops until `release` is set: a server loop that gets back to a
    handler late (as on a loaded machine), or a reply stuck in a send to a client that stopped reading."""

    def __init__(self, app: Any, marker: str) -> None:
        self.app = app
        self.marker = marker
        self.lagging = threading.Event()
        self.release = threading.Event()

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        armed = False

        async def recv() -> dict:
            nonlocal armed
            message = await receive()
            armed = armed or (message.get("type") == "websocket.receive" and self.marker in (message.get("text") or ""))
            return message

        async def snd(message: dict) -> None:
            nonlocal armed
            if armed and message["type"] == "websocket.send":
                armed = False
                self.lagging.set()  # before the reply goes out: the client sees the lag begun
                await send(message)
                await asyncio.to_thread(self.release.wait, 120)
                return
            await send(message)

        await self.app(scope, recv, snd)


def test_openenv_idle_timeout_frees_a_silent_clients_slot(micro_events: Path) -> None:
    """A connected client that stops sending keeps its slot until the idle clock passes the timeout; then the
    server closes it (its part incomplete, its dates missing) and a new client connects under the cap. The
    server's handler of the silent client lags behind its last reply all along (`LagAfterReply`): the idle clock
    counts from the reply, and the reap frees the slot itself, so the newcomer's admission does not wait on
    that handler."""
    from forecast_env.adapters.openenv import ForecastAction, OpenEnvServer, make_app

    clock = FakeClock()
    eps = load_episodes(micro_events, "eval", None)[:2]
    app, trun, token = make_app(micro_events, split="eval", max_sessions=2, idle_timeout=60, clock=clock,
                                run_id=f"load-oe-idle-{secrets.token_hex(3)}")
    lag = LagAfterReply(app, marker="election")
    with OpenEnvServer(lag, trun, token, "127.0.0.1", 0) as server:
        try:
            driver = OpenEnvDriver(server)
            ws_url = server.base_url.replace("http://", "ws://") + "/ws"
            silent, busy = driver.open(Unit(eps[0].event_id)), driver.open(Unit(eps[1].event_id))
            silent_rollout = driver.rollout(silent)
            assert not driver.call(silent, "search", {"query": "election"}).error
            assert lag.lagging.is_set()  # the server's handler of `silent` is now stopped after its reply
            clock.now += 59
            assert not driver.call(busy, "search", {"query": "oil"}).error  # busy keeps itself active
            assert capacity_refused(ws_url)  # neither is idle yet (59 s of 60): the cap holds
            assert server.reap_idle() == 0
            clock.now += 2  # silent: 61 s since its last reply; busy: 2 s
            newcomer = driver.open(Unit(eps[0].event_id))  # admitted: the reap freed the silent client's slot
            assert capacity_refused(ws_url)  # busy + newcomer: at the cap again
            lag.release.set()
            with pytest.raises(Exception):  # noqa: B017 - the server closed the silent client's connection
                silent["client"].step(ForecastAction(tool="search", args={"query": "late"}))
            assert not driver.call(busy, "search", {"query": "oil again"}).error  # the active one plays on
            clock.now += 30
            assert server.reap_idle() == 0  # nobody idle past 60 s
            for h in (busy, newcomer):
                driver.finish(h)
            try:
                silent["client"].close()
            except Exception:  # its connection is gone already
                pass
            label = driver.label
        finally:
            lag.release.set()  # a failed check leaves no handler waiting on it
    p = json.loads(part_path(server.run.run_dir, Task(label, eps[0].event_id, silent_rollout)).read_text())
    tools = [t["tool"] for t in p["tool_calls"]]
    assert p["complete"] is False and tools[0] == "search" and set(tools[1:]) == {"skip_date"}
    assert "no message for more than 60 s" in json.dumps(p["tool_calls"][1:])
    assert all(f.get("missing") for f in p["forecasts"])  # its unplayed dates: missing, never scored


def test_openenv_idle_timeout_none_never_reaps(micro_events: Path) -> None:
    from forecast_env.adapters.openenv import serve
    from forecast_env.errors import ForecastEnvError

    clock = FakeClock()
    eps = load_episodes(micro_events, "eval", None)[:1]
    with serve(micro_events, split="eval", max_sessions=1, idle_timeout=None, clock=clock,
               run_id=f"load-oe-noidle-{secrets.token_hex(3)}") as server:
        driver = OpenEnvDriver(server)
        h = driver.open(Unit(eps[0].event_id))
        clock.now += 10 ** 9
        assert server.reap_idle() == 0
        assert not driver.call(h, "search", {"query": "election"}).error
        driver.finish(h)
    with pytest.raises(ForecastEnvError, match="idle_timeout"):
        serve(micro_events, split="eval", idle_timeout=0)


# ------------------------------------------------------------------ MCP


def test_mcp_refuses_further_clients_while_the_first_plays_on_unharmed(micro_events: Path) -> None:
    from tests.support.harness import check_mcp_one_client

    event_id = load_episodes(micro_events, "eval", None)[0].event_id
    out = check_mcp_one_client(micro_events, event_id, seed=3, intruders=3)
    assert out["refused"] == [409, 409, 409]
    assert out["same_replies"] and out["same_part"] and out["calls"] > 4
