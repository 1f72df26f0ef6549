"""The question pipeline end to end over HTTP (a scripted OpenAI-compatible server): generate, resolve, vet, the
events build, an episode on a generated event, the report and `why`; and replay from the recording, with no
endpoint, to the same bytes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from forecast_env.cli.main import main as cli_main
from forecast_env.errors import QuestionsError
from forecast_env.questions import explain_question, generate_questions, questions_report, resolve_questions
from forecast_env.questions.store import QuestionFiles
from tests.support.chat_server import ChatServer
from tests.support.question_data import scripted_model, world_facts

DATES = "2025-11-10..2026-04-20"


def _cfg(base_url: str, **extra: object) -> dict:
    return {"llm": {"model": "scripted", "base_url": base_url, "backoff_seconds": 0.0, "max_retries": 0},
            "seeds": {"per_date": 3}, "dates": {"every_days": 7}, **extra}


@pytest.fixture(scope="module")
def run(questions_world: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    ws = tmp_path_factory.mktemp("qpipe") / "ws"
    shutil.copytree(questions_world / "ws", ws)
    facts = world_facts(questions_world)
    with ChatServer(default=scripted_model(facts, wrong_resolver=1)) as srv:
        gen = generate_questions(ws, DATES, _cfg(srv.base_url), progress=False)
        res = resolve_questions(ws, _cfg(srv.base_url), progress=False)
        n_requests = len(srv.requests)
    files = QuestionFiles.of(ws)
    snapshot = {p.name: p.read_bytes() for p in files.root.iterdir() if p.is_file()}
    return {"ws": ws, "facts": facts, "gen": gen, "res": res, "n_requests": n_requests, "snapshot": snapshot}


def test_generate_and_resolve_accept_questions_resolved_as_the_truth_says(run: dict) -> None:
    ws, facts = run["ws"], run["facts"]
    rows = [json.loads(line) for line in QuestionFiles.of(ws).resolved.read_text().splitlines()]
    accepted = [r for r in rows if r["status"] == "accepted"]
    assert run["gen"]["routes"] == ["prospective", "retrospective"]
    assert {r["route"] for r in accepted} == {"prospective", "retrospective"}
    assert len(accepted) >= 4
    for r in accepted:
        ev = next(e for e in facts.events.values() if e["options"] == r["options"]
                  and (e["title"] in r["question"]))
        assert r["resolved"] == ev["label"]  # the wrong resolver (seed 1) was outvoted every time
        assert len(r["votes"]) == 3 and sum(v["answer"] != ev["label"] for v in r["votes"]) == 1
        # the first visible report: an article after D, never after the report day the truth gives
        assert r["date"] < r["known_day"] <= ev["outcome_report_day"]
    assert run["res"]["live_calls"] > 0


def test_accepted_questions_become_generated_events_with_a_label_free_schedule(run: dict) -> None:
    ws = run["ws"]
    ev = pl.read_parquet(ws / "events" / "events.parquet")
    gen = ev.filter(pl.col("event_id").str.starts_with("g-"))
    accepted = [json.loads(x) for x in QuestionFiles.of(ws).accepted.read_text().splitlines()]
    assert gen.height >= 1 and set(gen["source"]) == {"generated"}
    assert ev.filter(pl.col("event_id").str.starts_with("pm-")).height > 0  # the market events are kept
    sched = pl.read_parquet(ws / "events" / "schedule.parquet").filter(pl.col("event_id").str.starts_with("g-"))
    known = {f"g-{a['id']}": a["known_date"] for a in accepted}
    for eid, last in sched.group_by("event_id").agg(pl.col("forecast_date").max()).iter_rows():
        assert str(last) < known[eid]  # every forecast date is before the first report of the outcome
    report = json.loads((ws / "events" / "report.json").read_text())
    assert report["generated"]["events_in"] == len(accepted)


def test_an_episode_runs_on_a_generated_event_without_a_market(run: dict) -> None:
    from forecast_env.agents.registry import make_agent
    from forecast_env.envs.forecast_env import ForecastEnv

    ws = run["ws"]
    gen = pl.read_parquet(ws / "events" / "events.parquet").filter(pl.col("event_id").str.starts_with("g-"))
    eid = gen["event_id"][0]
    env = ForecastEnv(workspace=ws, split=gen.filter(pl.col("event_id") == eid)["split"][0], event_ids=[eid])
    try:
        agent = make_agent("retrieval")
        obs, info = env.reset(seed=0)
        agent.reset(seed=0)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            done = term or trunc
    finally:
        env.close()
    assert info["event_id"] == eid and info["terminated"]
    scores = info["scores"]
    assert scores and all(s["brier"] is not None and s["log_vs_market"] is None for s in scores)


def test_replay_from_the_recording_needs_no_endpoint_and_writes_the_same_bytes(run: dict) -> None:
    ws = run["ws"]
    only = {"replay": "only", "llm": {"model": "scripted", "base_url": "http://127.0.0.1:9/v1"},
            "seeds": {"per_date": 3}, "dates": {"every_days": 7}}
    gen = generate_questions(ws, DATES, only, progress=False)
    res = resolve_questions(ws, only, progress=False)
    assert gen["live_calls"] == res["live_calls"] == 0 and gen["replayed_calls"] > 0
    files = QuestionFiles.of(ws)
    again = {p.name: p.read_bytes() for p in files.root.iterdir() if p.is_file()}
    assert again.keys() == run["snapshot"].keys()
    assert {k for k in again if again[k] != run["snapshot"][k]} == set()
    # a request the recording lacks is an error in replay-only mode, never a silent fallback
    with pytest.raises(QuestionsError, match="replay only"):
        generate_questions(ws, "2026-05-01..2026-05-02", only, progress=False)


def test_report_and_why(run: dict, capsys: pytest.CaptureFixture[str]) -> None:
    ws = run["ws"]
    rep = questions_report(ws)
    assert rep["accepted"] == run["res"]["status"]["accepted"]
    assert rep["funnel"][-1]["remaining"] == rep["accepted"]
    assert rep["agreement"]["pairwise_agreement"] is not None and rep["agreement"]["pairwise_agreement"] < 1
    assert rep["tokens"]["per_accepted"] > 0
    assert cli_main(["questions", "report", "--workspace", str(ws)]) == 0
    out = capsys.readouterr().out
    assert "## Funnel" in out and "accepted" in out
    dropped = next(json.loads(x) for x in QuestionFiles.of(ws).resolved.read_text().splitlines()
                   if json.loads(x)["drop"] and json.loads(x)["question"])
    assert cli_main(["questions", "why", dropped["qid"], "--workspace", str(ws)]) == 0
    assert dropped["drop"]["reason"] in capsys.readouterr().out
    acc = json.loads(QuestionFiles.of(ws).accepted.read_text().splitlines()[0])
    why = explain_question(ws, f"g-{acc['id']}")
    assert why["stage"] == "accepted" and why["event_id"] == f"g-{acc['id']}"
    with pytest.raises(QuestionsError, match="no question"):
        explain_question(ws, "nope")
