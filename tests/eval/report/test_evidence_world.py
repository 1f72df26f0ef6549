"""Evidence diagnostics of world runs: the articles read per question, counted by hand on a small record,
and on real world runs of three reader configurations through the runner and the report."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from forecast_env.eval.report.evidence import world_evidence_diagnostics, world_reading

DAY0 = date(2026, 3, 1)
SCHEDULE = {"q": {1: date(2026, 3, 2), 2: date(2026, 3, 5), 3: date(2026, 3, 9)},
            "p": {1: date(2026, 3, 2), 2: date(2026, 3, 6)}}


def _day(i: int) -> date:
    return DAY0 + timedelta(days=i - 1)


def _calls(agent: str, script: dict[int, list[tuple]]) -> list[dict]:
    """script: day index -> [(tool, args, error)]"""
    rows, k = [], 0
    for day, calls in sorted(script.items()):
        for tool, args, *err in calls:
            rows.append({"agent": agent, "rollout": 0, "step": day, "call_index": k, "tool": tool,
                         "args_json": json.dumps(args), "error": err[0] if err else None})
            k += 1
    return rows


def _open(doc: str, *err: str) -> tuple:
    return ("open_article", {"doc_id": doc}, *err)


def _fc(qid: str, *err: str) -> tuple:
    return ("forecast", {"question_id": qid, "probabilities": [0.5, 0.5]}, *err)


TOOL_CALLS = pl.DataFrame(
    _calls("r1", {
        2: [("search", {"query": "x"}), _open("d1"), _fc("q"), _open("d2"), _fc("p"), _open("d3")],  # d3: no question
        4: [_open("d4"), _open("d4"), _fc("q")],
        5: [_open("d5", "not found"), _fc("q", "not listed"), _open("d6"), _fc("q")],  # a failed forecast ends nothing
        6: [_open("d7"), _fc("p")],
    })
    + _calls("r2", {2: [_open("e1"), _fc("p"), _open("e2"), _fc("q")], 3: [_open("e3"), _open("e4"), _fc("q")],
                    7: [_open("e5"), _open("e6"), _fc("q")], 8: [("next_day", {})]})
    + _calls("u", {2: [_fc("q"), _fc("p")]}),
    schema={"agent": pl.String, "rollout": pl.Int32, "step": pl.Int32, "call_index": pl.Int32, "tool": pl.String,
            "args_json": pl.String, "error": pl.String})
DAYS = pl.DataFrame([{"agent": a, "rollout": 0, "day": i, "date": _day(i)} for a in ("r1", "r2", "u")
                     for i in range(1, 11)], schema={"agent": pl.String, "rollout": pl.Int32, "day": pl.Int32,
                                                     "date": pl.Date})
BRIER = {"r1": {"q": [0.5, 0.3, 0.2], "p": [0.5, 0.4]}, "r2": {"q": [0.5, 0.5, 0.3], "p": [0.5, 0.6]},
         "u": {"q": [0.5, 0.5, 0.5], "p": [0.5, 0.5]}}
FORECASTS = pl.DataFrame([
    {"agent": a, "event_id": e, "rollout": 0, "step": s, "steps_total": len(SCHEDULE[e]), "forecast_date": d,
     "memory": False, "missing": False, "brier": BRIER[a][e][s - 1], "n_search": 9, "n_open": 9}
    for a in BRIER for e in SCHEDULE for s, d in SCHEDULE[e].items()])


def test_articles_read_per_question_by_hand():
    got = {(r["agent"], r["event_id"], r["step"]): (r["own"], r["searches"], r["opens"])
           for r in world_reading(FORECASTS, TOOL_CALLS, DAYS).to_dicts()}
    assert got[("r1", "q", 1)] == (1, 1, 1)  # day 2: search, d1, then forecast(q)
    assert got[("r1", "p", 1)] == (1, 0, 1)  # d2, then forecast(p); d3 came after the day's last forecast
    assert got[("r1", "q", 2)] == (2, 0, 3)  # d4 (opened twice) on day 4, d6 on day 5 (d5 failed)
    assert got[("r1", "q", 3)] == (0, 0, 0)  # nothing read for q after 5 March
    assert got[("r1", "p", 2)] == (1, 0, 1)  # d7 on day 6
    assert got[("r2", "q", 2)] == (2, 0, 2) and got[("r2", "q", 3)] == (2, 0, 2) and got[("r2", "p", 2)] == (0, 0, 0)
    assert got[("u", "q", 2)] == (0, 0, 0)


def test_world_diagnostics_from_reading():
    res = world_evidence_diagnostics(FORECASTS, TOOL_CALLS, DAYS, draws=200)
    assert res.basis == "reading" and res.keepers == ("r1", "r2")
    per = {r["agent"]: r for r in res.per_agent.to_dicts()}
    # own (q2, q3, p2): r1 = (2, 0, 1), r2 = (2, 2, 0); each one's A is the other's counts
    assert per["r1"]["kappa"] == pytest.approx((2 * 2 + 0 * 2 + 1 * 0) / (4 + 4 + 0))
    assert per["r2"]["kappa"] == pytest.approx((2 * 2 + 2 * 0 + 0 * 1) / (4 + 0 + 1))
    assert per["u"]["kappa"] is None and "read no article" in per["u"]["kappa_note"]
    # searches and opens per scored row are the attributed ones, not the day totals the rows carry (9)
    assert per["r1"]["searches"] == pytest.approx(1 / 5) and per["r1"]["opens"] == pytest.approx(6 / 5)
    # G: first minus last Brier per question, then over questions
    assert per["r1"]["G"] == pytest.approx(((0.5 - 0.2) + (0.5 - 0.4)) / 2)
    assert res.grouping == "values" and "spearman_kappa" in res.notes and "reading agents" in res.notes[
        "spearman_kappa"]


def test_one_reader_leaves_kappa_undefined_with_the_reason():
    res = world_evidence_diagnostics(FORECASTS.filter(pl.col("agent") != "r2"),
                                     TOOL_CALLS.filter(pl.col("agent") != "r2"), DAYS, draws=50)
    per = {r["agent"]: r for r in res.per_agent.to_dicts()}
    assert per["r1"]["kappa"] is None and "no other agent read articles" in per["r1"]["kappa_note"]
    assert res.grouping == "none" and "two reading agents" in res.notes["quartiles"]


@pytest.fixture(scope="module")
def world_run(tmp_path_factory) -> Path:
    from forecast_env.eval.runs.runner import run_benchmark
    from tests.support.env_data import build_workspace

    ws = build_workspace(tmp_path_factory.mktemp("evidence_world_ws"))
    agents = ["uniform", "retrieval", {"name": "retrieval", "label": "retrieval-skim", "open_articles": 1},
              {"name": "retrieval", "label": "retrieval-deep", "open_articles": 3, "search_k": 5}]
    return run_benchmark(ws, agents, run_id="world-readers", workers=1, progress=False, mode="world",
                         world_end="2026-03-16")


def test_world_report_has_evidence_diagnostics(world_run):
    from forecast_env.eval.report.render import build_report

    paths = build_report(world_run, plots=False)
    res = json.loads(Path(paths["json"]).read_text())
    md = Path(paths["markdown"]).read_text()
    ev = res["evidence"]
    assert ev["basis"] == "reading" and ev["keepers"] == ["retrieval", "retrieval-deep", "retrieval-skim"]
    per = {r["agent"]: r for r in ev["per_agent"]}
    for agent in ev["keepers"]:
        assert per[agent]["kappa"] is not None and per[agent]["kappa_note"] is None, per[agent]
    assert per["uniform"]["kappa"] is None and per["uniform"]["opens"] == 0
    assert "## Evidence diagnostics (articles read per question)" in md
    # the attributed opens: the deep reader opens more per question than the skimmer
    assert per["retrieval-deep"]["opens"] > per["retrieval-skim"]["opens"] > 0
