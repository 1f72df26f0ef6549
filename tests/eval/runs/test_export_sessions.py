"""Export unit: one sample per session (an (event, forecast date) of an episode, a day of a world), from real
runs of the LLM agent against a local chat-completions server and of the reader through the runner."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from forecast_env.eval.runs.export import export
from forecast_env.eval.runs.runner import run_benchmark
from forecast_env.store import Workspace
from tests.support.chat_server import ChatServer, last_user_or_tool, tool_call, tool_calls
from tests.support.env_data import build_workspace

WORLD_END = "2026-03-12"
ISO = re.compile(r"\b(20\d\d-\d\d-\d\d)\b")


def reading_policy():
    """Per date (or world day): search, note the first hit's title in the notebook, forecast."""
    turns: dict[str, int] = defaultdict(int)

    def respond(body: dict) -> dict:
        opening = body["messages"][1]["content"]
        day = ISO.search(opening[opening.find("{"):]).group(1)  # the session's own date
        n = turns[day]
        turns[day] += 1
        obs = last_user_or_tool(body)
        first = json.loads(opening[opening.find("{"):])
        if n == 0:
            query = first.get("question") or (first.get("questions") or [{}])[0].get("question") or "news"
            return tool_call("search", {"query": query, "k": 3})
        if n == 1:
            hits = (obs.get("tool_result") or {}).get("hits") or []
            if hits:
                return tool_call("notebook_add", {"claim": hits[0]["title"], "date_observed": hits[0]["day"],
                                                  "doc_ids": [hits[0]["doc_id"]]})
        if first.get("questions"):  # world: forecast every listed question, then end the day
            if n <= 2:
                return tool_calls([("forecast", {"question_id": q["question_id"],
                                                 "probabilities": [1 / len(q["options"])] * len(q["options"])})
                                   for q in first["questions"]])
            return tool_call("next_day", {})
        return tool_call("forecast", {"probabilities": [0.6] + [0.4 / (len(first["options"]) - 1)]
                                      * (len(first["options"]) - 1)})

    return respond


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    ws = build_workspace(tmp_path_factory.mktemp("export_sessions_ws"))
    with ChatServer([], default=reading_policy()) as srv:
        llm = {"llm": {"base_url": srv.base_url, "model": "test-model", "backoff_seconds": 0.0}}
        run_benchmark(ws, ["llm"], run_id="llm-episode", workers=1, progress=False, config=llm)
        run_benchmark(ws, ["llm"], run_id="llm-world", workers=1, progress=False, config=llm, mode="world",
                      world_end=WORLD_END)
    run_benchmark(ws, ["uniform", "retrieval"], run_id="reader-world", workers=1, progress=False, mode="world",
                  world_end=WORLD_END)
    return ws


def _samples(ws: Path, tmp: Path, run_id: str, **kw) -> list[dict]:
    s = export(ws, "eval", tmp / run_id, run_id=run_id, formats=["jsonl"], progress=False, **kw)
    return [json.loads(x) for x in Path(s["paths"]["trajectories"]["jsonl"]).read_text().splitlines()]


def _text(sample: dict) -> str:
    return json.dumps(sample["prompt"]) + json.dumps(sample["completion"])


def _nothing_after_its_date(sample: dict) -> None:
    """No date after the session's own in the sample's text, no label, score or answer key."""
    info = json.loads(sample["info"])
    text = _text(sample)
    later = sorted({d for d in ISO.findall(text) if d > info["forecast_date"]})
    assert not later, f"session {info['forecast_date']} ({info['agent']}, {info['event_id']}) shows {later}"
    for key in ("label", "brier", "answer", "reward", "log_vs_market"):
        assert f'\\"{key}\\"' not in text and f'"{key}"' not in text, key


def test_llm_episode_exports_one_sample_per_forecast_date(ws, tmp_path):
    samples = _samples(ws, tmp_path, "llm-episode")
    sched = pl.read_parquet(Workspace.at(ws).events_table("schedule")).filter(pl.col("event_id") != "pm-3")
    assert len(samples) == sched.height == 7
    by_event = defaultdict(list)
    for s in samples:
        info = json.loads(s["info"])
        assert info["source"] == "agent transcript" and info["mode"] == "episode"
        by_event[info["event_id"]].append((info["step"], s))
    dates = {(r["event_id"], r["step"]): r["forecast_date"].isoformat() for r in sched.iter_rows(named=True)}
    for eid, rows in by_event.items():
        rows.sort(key=lambda x: x[0])
        assert [step for step, _ in rows] == list(range(1, len(rows) + 1))
        for step, s in rows:
            # the session's own system message opens its prompt; no completion holds a system message
            assert [m["role"] for m in s["prompt"]] == ["system", "user"]
            assert f'"forecast_date": "{dates[(eid, step)]}"' in s["prompt"][1]["content"]
            assert "system" not in [m["role"] for m in s["completion"]]
            assert s["completion"][-1]["role"] == "assistant" and "forecast" in s["completion"][-1]["tool_calls"]
            _nothing_after_its_date(s)
            assert s["reward"] == -json.loads(s["info"])["scores"][0]["brier"]
    # a two-date (or longer) episode: the second date's system message opens the second sample
    first, second = by_event["pm-1"][0][1], by_event["pm-1"][1][1]
    assert dates[("pm-1", 2)] not in _text(first)
    assert second["prompt"][0]["content"] == first["prompt"][0]["content"]


def test_world_runs_export_one_sample_per_day(ws, tmp_path):
    for run_id, agents in (("llm-world", {"llm"}), ("reader-world", {"uniform", "retrieval"})):
        days = pl.read_parquet(Workspace.at(ws).runs_dir / run_id / "world_days.parquet")
        samples = _samples(ws, tmp_path, run_id)
        seen = defaultdict(list)
        for s in samples:
            info = json.loads(s["info"])
            assert info["mode"] == "world" and set(info["event_ids"]) <= {"pm-1", "pm-2", "pm-4"}
            seen[info["agent"]].append(info["forecast_date"])
            assert [m["role"] for m in s["prompt"]] == ["system", "user"]
            assert f'"date": "{info["forecast_date"]}"' in s["prompt"][1]["content"]
            _nothing_after_its_date(s)
            scored = [r for r in info["scores"] if r["brier"] is not None]
            assert set(json.loads(s["answer"])) == {r["event_id"] for r in scored}
            assert s["reward"] == (pytest.approx(-sum(r["brier"] for r in scored) / len(scored)) if scored else None)
        assert set(seen) == agents
        for agent, got in seen.items():  # every day of the world, once, in order
            assert got == [d.isoformat() for d in days.filter(pl.col("agent") == agent)["date"].to_list()]


def test_no_text_strips_the_notebook_in_every_session_opening(ws, tmp_path):
    titles = set(pl.read_parquet(Workspace.at(ws).articles_dir / "*.parquet")["title"].to_list())
    full = _samples(ws, tmp_path / "full", "llm-episode")
    later = [s for s in full if json.loads(s["info"])["step"] > 1]
    # the claims (article titles) the model noted on earlier dates open the later dates' sessions
    assert any(t in s["prompt"][1]["content"] for s in later for t in titles)
    bare = _samples(ws, tmp_path / "bare", "llm-episode", include_text=False)
    leaked = sorted(t for s in bare for t in titles if t in _text(s))
    assert leaked == [], leaked[:3]
    assert all(json.loads(s["info"])["forecast_date"] in s["prompt"][1]["content"] for s in bare)
