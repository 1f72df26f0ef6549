"""Your own questions: JSONL import, validation errors per line, beliefs from daily probabilities."""

from __future__ import annotations

import json

import polars as pl
import pytest

from forecast_env.cli.main import main as cli_main
from forecast_env.envs.events.build import build_events, import_questions, load_events
from forecast_env.envs.events.questions import read_questions
from forecast_env.errors import EventsError
from tests.support.hand_cache import MARKET_ONLY, HandCache, wiggle

GOOD = {"id": "a1", "question": "Will the Veltria budget pass?", "options": ["Yes", "No"],
        "open_date": "2026-03-05", "close_date": "2026-03-30", "resolved_option": "No",
        "daily_probabilities": {"2026-03-06": {"Yes": 0.4}, "2026-03-07": {"Yes": 0.3, "No": 0.7}}}
MULTI = {"question": "Which city hosts?", "options": ["Ava", "Bel", "Cor"], "open_date": "2026-03-10",
         "close_date": "2026-04-20", "resolved_option": "Bel", "category": "sports",
         "daily_probabilities": [{"date": "2026-03-11", "probabilities": {"Ava": 0.2, "Bel": 0.2}}]}


def _write(path, lines):
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_validation_errors_name_line_and_key(tmp_path):
    f = _write(tmp_path / "q.jsonl", [
        GOOD, "{not json", {**GOOD, "id": "b", "resolved_option": "Maybe"}, {**GOOD, "id": "c", "options": ["Yes"]},
        {**GOOD, "id": "d", "open_date": "March 5"}, {**GOOD, "id": "e", "daily_probabilities": {"2026-03-06": {"Yes": 2}}},
        "", {**GOOD}, MULTI,
    ])
    parsed = read_questions(f)
    assert [c.event_id for c in parsed.candidates] == ["q-a1", "q-9"]
    errs = [d for _, d in parsed.errors]
    assert errs[0].startswith("q.jsonl line 2: not valid JSON")
    assert "line 3: key 'resolved_option'" in errs[1] and "line 4: key 'options'" in errs[2]
    assert "line 5: key 'open_date'" in errs[3] and "line 6: key 'daily_probabilities'" in errs[4]
    assert "line 8: key 'id': duplicate" in errs[5]
    with pytest.raises(EventsError, match="no such questions file"):
        read_questions(tmp_path / "missing.jsonl")


def test_import_merges_with_polymarket_events(tmp_path):
    from datetime import UTC, datetime, timedelta

    h = HandCache()
    s = datetime(2025, 7, 1, 8, tzinfo=UTC)
    h.event("1", [h.market(s, s + timedelta(days=19), wiggle(20), ("1", "0"))])
    h.write(tmp_path / "pm")
    build_events(tmp_path / "pm", tmp_path / "ws", config=MARKET_ONLY, progress=False)
    f = _write(tmp_path / "q.jsonl", [GOOD, MULTI, "[1, 2]"])
    summary = import_questions(f, tmp_path / "ws", config=MARKET_ONLY, progress=False)
    assert summary["events_in"] == 3 and summary["kept"] == 2
    t = load_events(tmp_path / "ws")
    assert sorted(t.events["event_id"].to_list()) == ["pm-1", "q-2", "q-a1"]
    assert set(t.events.filter(pl.col("source") == "questions")["split"].to_list()) == {"eval"}
    b = t.beliefs.filter(pl.col("event_id") == "q-a1").sort("day", "option")
    assert b.filter(pl.col("day").cast(pl.Utf8) == "2026-03-06")["price"].to_list() == pytest.approx([0.6, 0.4])
    m = t.beliefs.filter(pl.col("event_id") == "q-2")
    assert m.filter(pl.col("option") == "Ava")["belief"].to_list() == [0.5]
    assert m.filter(pl.col("option") == "Cor")["belief"].to_list() == [None]
    sched = t.schedule.filter(pl.col("event_id") == "q-a1")
    assert sched.height == 4 and sched["options"].to_list()[0] == ["Yes", "No"]
    # re-import replaces the questions' rows, Polymarket rows stay
    import_questions(_write(tmp_path / "q2.jsonl", [GOOD]), tmp_path / "ws", config=MARKET_ONLY, progress=False)
    assert sorted(load_events(tmp_path / "ws").events["event_id"].to_list()) == ["pm-1", "q-a1"]
    build_events(tmp_path / "pm", tmp_path / "ws", config=MARKET_ONLY, progress=False)
    assert sorted(load_events(tmp_path / "ws").events["event_id"].to_list()) == ["pm-1", "q-a1"]
    report = json.loads((tmp_path / "ws" / "events" / "report.json").read_text())
    assert set(report) >= {"polymarket", "questions", "totals"}


def test_cli_import(tmp_path, capsys):
    f = _write(tmp_path / "q.jsonl", [GOOD, "oops"])
    rc = cli_main(["events", "import", "--questions", str(f), "--workspace", str(tmp_path / "ws"), "--no-progress",
                   "--set", "screen.enabled=false", "--set", "schedule.require_index=false"])
    assert rc == 0 and "kept: 1" in capsys.readouterr().out


def test_imported_question_d_known_only_from_daily_probabilities(tmp_path):
    """close_date is both t_end and t_close; d_known comes from the daily probabilities when given."""
    from datetime import date, timedelta

    probs = {(date(2026, 3, 5) + timedelta(days=i)).isoformat(): {"No": 0.5 if i < 15 else 0.98} for i in range(25)}
    f = _write(tmp_path / "q.jsonl", [{**GOOD, "daily_probabilities": probs}, {**GOOD, "id": "plain",
                                                                               "daily_probabilities": None}])
    import_questions(f, tmp_path / "ws", config=MARKET_ONLY, progress=False)
    ev = {r["event_id"]: r for r in load_events(tmp_path / "ws").events.iter_rows(named=True)}
    known, plain = ev["q-a1"], ev["q-plain"]
    assert known["d_known"] == date(2026, 3, 20) and known["cut_by"] == "d_known"
    assert (known["steps_total"], known["steps_offered"]) == (4, 2)  # bins of 6 days from 03-05; the third ends 03-22
    assert plain["d_known"] is None and plain["cut"] == date(2026, 3, 29) and plain["steps_offered"] == 4
    assert known["end_day"] == known["close_day"] == date(2026, 3, 30)
