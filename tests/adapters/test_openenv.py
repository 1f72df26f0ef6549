"""The OpenEnv server, played by OpenEnv's own WebSocket client (`EnvClient`), many sessions at once.

The server runs in this process (`serve(..., port=0)`); every session is a real WebSocket connection through
openenv-core's `HTTPEnvServer`. The checks compare the rewards the client receives and the run the server
records with the environment's scoring computed here from the events table.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import polars as pl
import pytest
from websockets.sync.client import connect as ws_connect

from forecast_env import scoring
from forecast_env.adapters.openenv import ForecastAction, ForecastEnvClient, serve
from forecast_env.cli.main import main
from forecast_env.envs.events.build import load_events
from tests.support.leaks import SCORE_KEYS, nested_keys


def _label(ws: Path, event_id: str) -> str:
    ev = load_events(ws).events.filter(pl.col("event_id") == event_id)
    return ev["label"][0]


def _report(options: list[str], k: int) -> dict[str, float]:
    """A different, valid report per session k (so a crossed reply would show in the score)."""
    raw = {o: 1.0 + ((i + k) % len(options)) * (k + 1) for i, o in enumerate(options)}
    total = sum(raw.values())
    return {o: v / total for o, v in raw.items()}


def _play(client: ForecastEnvClient, event_id: str, k: int) -> dict:
    """One whole episode: a search and a forecast on every date; returns what the client saw."""
    result = client.reset(event_id=event_id)
    obs = result.observation
    assert obs.event_id == event_id and result.reward is None and not result.done
    sent, queries = [], []
    while not result.done:
        q = f"{obs.question[:40]} session {k}"
        queries.append(q)
        result = client.step(ForecastAction(tool="search", args={"query": q, "k": 3}))
        assert not result.done and result.reward is None and result.observation.error is None
        report = _report(result.observation.options, k)
        sent.append((result.observation.forecast_date, report, list(result.observation.options)))
        result = client.step(ForecastAction(tool="forecast", args={"probabilities": report}))
        assert result.done or result.reward is None  # no score before the episode's end
        assert not SCORE_KEYS & nested_keys(result.observation.model_dump(exclude={"reward"}))
        obs = result.observation
    state = client.state()
    return {"event_id": event_id, "reward": result.reward, "sent": sent, "queries": queries, "state": state}


def test_concurrent_sessions_share_one_server_and_record_their_own_episodes(micro_events: Path,
                                                                             tmp_path: Path) -> None:
    ws = micro_events
    with serve(ws, split="eval", max_sessions=8, run_id="openenv-concurrent") as server:
        trun = server.run
        events = trun.event_ids[:3]
        jobs = [(events[k % len(events)], k) for k in range(6)]  # two sessions per event, all at once

        def one(job: tuple[str, int]) -> dict:
            client = server.client()
            try:
                return _play(client, *job)
            finally:
                client.close()

        with ThreadPoolExecutor(len(jobs)) as pool:
            played = list(pool.map(one, jobs))
        searcher_ids = {id(env.searcher) for env in trun._idle}
        assert len(searcher_ids) == 1  # every pooled environment used the one shared searcher
    rec = json.loads((trun.run_dir / "run.json").read_text())
    assert rec["engine"] == "openenv" and rec["session"] == "episode" and rec["status"] == "complete"
    assert rec["rollouts_recorded"] == len(jobs)

    forecasts = pl.read_parquet(trun.run_dir / "forecasts.parquet")
    calls = pl.read_parquet(trun.run_dir / "tool_calls.parquet")
    for p in played:
        label = _label(ws, p["event_id"])
        briers = [scoring.brier(scoring.normalize_report(r, opts).probs, label, opts) for _, r, opts in p["sent"]]
        assert p["reward"] == pytest.approx(-sum(briers) / len(briers), abs=1e-12)
        # the recorded episode is this session's own: its dates' briers and its own queries (no cross-talk)
        rollout = p["state"].rollout
        mine = forecasts.filter((pl.col("event_id") == p["event_id"]) & (pl.col("rollout") == rollout)).sort("step")
        assert mine["brier"].to_list() == pytest.approx(briers, abs=1e-12)
        got_q = [json.loads(a)["query"] for a in calls.filter(
            (pl.col("event_id") == p["event_id"]) & (pl.col("rollout") == rollout) & (pl.col("tool") == "search")
        ).sort("call_index")["args_json"].to_list()]
        assert got_q == p["queries"]
    # the recorded run reports like any other run
    assert main(["report", "--run", str(trun.run_dir), "--out", str(tmp_path / "report"), "--no-compare"]) == 0


def test_token_capacity_and_a_vanished_client(micro_events: Path) -> None:
    ws = micro_events
    with serve(ws, split="eval", max_sessions=2, run_id="openenv-limits") as server:
        # no token, a wrong token: neither the WebSocket nor HTTP is served
        with pytest.raises(ConnectionError):
            ForecastEnvClient(base_url=server.url).connect()
        with pytest.raises(ConnectionError):
            ForecastEnvClient(base_url=f"{server.url}/not-the-token").connect()
        assert httpx.get(f"{server.url}/health").status_code == 401
        assert httpx.get(f"{server.url}/health", headers={"Authorization": f"Bearer {server.token}"}).status_code == 200
        # OpenEnv's stateless /reset (a fresh environment per request) is refused even with the token
        assert httpx.post(f"{server.base_url}/reset", json={}).status_code == 405

        a, b = server.client(), server.client()
        a.reset()
        b.reset()
        # a third session: the cap refuses it politely (OpenEnv's error message, then the close)
        with ws_connect(server.base_url.replace("http://", "ws://") + "/ws") as raw:
            refusal = json.loads(raw.recv(timeout=30))
        assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED"
        assert refusal["data"]["max_sessions"] == 2
        # a bad action is an error observation, the session goes on
        r = a.step(ForecastAction(tool="open_article", args={"doc_id": 12}))
        assert r.observation.error and not r.done
        r = a.step(ForecastAction(tool="no_such_tool", args={}))
        assert "unknown tool" in r.observation.error
        event_b = b.state().event_id
        b.close()  # vanishes mid-episode: its slot is freed, its episode recorded incomplete
        d = server.client()
        d.reset(event_id=event_b)
        d.close()
        a.close()
    parts = list(server.run.run.parts())
    assert len(parts) == 3 and not any(p["complete"] for p in parts)
    assert all(p["session"] == "episode" and p["engine"] == "openenv" for p in parts)
    assert all(f["missing"] for p in parts for f in p["forecasts"])  # unplayed dates are missing, never scored
    assert json.loads((server.run.run_dir / "run.json").read_text())["status"] == "incomplete"


def test_cli_refuses_bad_arguments(micro_events: Path) -> None:
    assert main(["serve", "--openenv", "--workspace", str(micro_events), "--max-sessions", "0"]) == 2
    assert main(["serve", "--openenv", "--workspace", str(micro_events), "--idle-timeout", "-1"]) == 2


def test_one_date_sessions(micro_events: Path) -> None:
    with serve(micro_events, split="eval", unit="date", max_sessions=2, run_id="openenv-dates") as server:
        ep = max(server.run.episodes, key=lambda e: len(e.dates))
        d = ep.dates[-1]
        with server.client() as client:
            r = client.reset(event_id=ep.event_id, step=d.step)
            assert r.observation.forecast_date == d.day.isoformat() and r.observation.step == d.step
            report = _report(list(d.options), 1)
            r = client.step(ForecastAction(tool="forecast", args={"probabilities": report}))
            assert r.done
    label = _label(micro_events, ep.event_id)
    brier = scoring.brier(scoring.normalize_report(report, list(d.options)).probs, label, list(d.options))
    assert r.reward == pytest.approx(-brier, abs=1e-12)
    rec = json.loads((server.run.run_dir / "run.json").read_text())
    assert rec["unit"] == "date" and rec["status"] == "complete"
