"""The generator's pieces: question dates, seed sampling, the text checks on a draft, and the recorded model
(structured output, the corrective turn, replay only)."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast_env.errors import ConfigError, QuestionsError
from forecast_env.questions.generate import parse_dates, question_dates, sample_seeds
from forecast_env.questions.model import RecordedModel, request_key
from forecast_env.questions.records import draft_schema, rating_schema
from forecast_env.questions.text import options_of, quote_in
from tests.support.chat_server import ChatServer, Status, text

D0 = date(2026, 1, 1)


def test_question_dates_and_their_errors() -> None:
    assert question_dates(D0, D0 + timedelta(days=20), 7) == [D0, D0 + timedelta(days=7), D0 + timedelta(days=14)]
    assert parse_dates("2026-01-01..2026-02-01") == (D0, date(2026, 2, 1))
    for bad in ("2026-01-01", "x..y", "2026-01-01..", "..2026-01-01"):
        with pytest.raises(QuestionsError, match="A..B"):
            parse_dates(bad)
    with pytest.raises(QuestionsError, match="before the start"):
        question_dates(D0, D0 - timedelta(days=1), 7)


def _pool(rows: list[tuple[str, str, str, int]]) -> pl.DataFrame:
    return pl.DataFrame([{"doc_id": i, "host": h, "topic": t, "day": D0 + timedelta(days=d), "chars": 500,
                          "title": i, "url": f"https://{h}/{t}/{i}"} for i, h, t, d in rows])


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(["news", "sport", "politics"]),
                          st.integers(0, 6)), min_size=1, max_size=40), st.integers(1, 8), st.integers(0, 3))
def test_seeds_spread_over_sources_topics_and_days_and_never_repeat(rows: list, n: int, seed: int) -> None:
    import random

    pool = _pool([(f"d{i}", h, t, d) for i, (h, t, d) in enumerate(rows)])
    used: set[str] = set()
    got = sample_seeds(pool, D0, D0 + timedelta(days=6), n, random.Random(seed), used, 100)
    assert len(got) == min(n, pool.height) and len({r["doc_id"] for r in got}) == len(got)
    assert used == {r["doc_id"] for r in got}
    hosts = [r["host"] for r in got]
    available = set(pool["host"])
    # no source is drawn twice while another source is still unused
    assert len(set(hosts)) == min(len(got), len(available))
    again = sample_seeds(pool, D0, D0 + timedelta(days=6), n, random.Random(seed), set(), 100)
    assert [r["doc_id"] for r in again] == [r["doc_id"] for r in got]  # seeded
    before = set(used)
    more = sample_seeds(pool, D0, D0 + timedelta(days=6), n, random.Random(seed), used, 100)
    assert not {r["doc_id"] for r in more} & before  # used seeds are never drawn again
    assert len(more) == min(n, pool.height - len(before))


def test_topics_spread_within_one_source() -> None:
    import random

    pool = _pool([("a1", "h", "sport", 0), ("a2", "h", "sport", 1), ("a3", "h", "sport", 2), ("a4", "h", "politics", 3)])
    got = sample_seeds(pool, D0, D0 + timedelta(days=6), 2, random.Random(0), set(), 100)
    assert sorted(r["topic"] for r in got) == ["politics", "sport"]


def test_options_and_quotes() -> None:
    assert options_of(["yes", "NO"]) == ["Yes", "No"]
    assert options_of(["A", "a"]) is None and options_of(["A"]) is None and options_of(list("abcdefghi")) is None
    assert options_of(["A", ""]) is None and options_of(["A", True]) is None and options_of("A,B") is None
    assert options_of([" Ada  Lovelace ", "Bob"]) == ["Ada Lovelace", "Bob"]
    body = "The council \u201cvoted 7\u20132\u201d to approve\nthe plan on Tuesday."
    assert quote_in('"voted 7-2" to approve the plan', body)
    assert quote_in("THE COUNCIL \"VOTED", body)
    assert not quote_in("voted 8-1 to approve the plan", body)
    assert not quote_in("the plan", body)  # shorter than the minimum


def _ok(obj: dict) -> dict:
    return text(json.dumps(obj))


def test_structured_output_the_corrective_turn_and_the_recording(tmp_path: Path) -> None:
    schema = rating_schema(("poor", "great"))
    script = [text("I think it is great!"), _ok({"rating": "great", "reason": "ok"}),  # corrected
              text("no"), text("still no"),  # unreadable after one correction
              _ok({"rating": "poor", "reason": "```"})]
    with ChatServer(script) as srv:
        llm = {"model": "m", "base_url": srv.base_url, "temperature": 0.0, "max_tokens": 50, "seed": 0,
               "timeout_seconds": 5, "max_retries": 0, "structured": "json_schema"}
        model = RecordedModel(llm, tmp_path / "rec.jsonl")
        obj, convo = model.ask_json([{"role": "user", "content": "rate it"}], schema, "verify:quality")
        assert obj == {"rating": "great", "reason": "ok"} and len(convo) == 4 and "schema" in convo[2]["content"]
        assert srv.requests[0]["response_format"]["type"] == "json_schema"
        assert srv.requests[0]["response_format"]["json_schema"]["schema"] == schema
        obj, _ = model.ask_json([{"role": "user", "content": "rate that"}], schema, "verify:quality")
        assert obj is None
        model.close()
    assert model.usage.live == 4 and model.usage.calls["verify:quality"] == 4
    # the recording answers the same requests with no endpoint; another request is an error in replay-only mode
    replay = RecordedModel({**llm, "base_url": "http://127.0.0.1:9/v1"}, tmp_path / "rec.jsonl", replay="only")
    obj, _ = replay.ask_json([{"role": "user", "content": "rate it"}], schema, "verify:quality")
    assert obj == {"rating": "great", "reason": "ok"} and replay.usage.live == 0 and replay.usage.replayed == 2
    with pytest.raises(QuestionsError, match="replay only"):
        replay.ask_json([{"role": "user", "content": "something new"}], schema, "verify:quality")
    lines = (tmp_path / "rec.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(x)["key"] == request_key(json.loads(x)["request"]) for x in lines)


def test_response_format_per_endpoint_kind(tmp_path: Path) -> None:
    schema = draft_schema(2)
    base = {"model": "m", "base_url": "http://127.0.0.1:9/v1", "temperature": 0.0, "max_tokens": 50, "seed": 0,
            "timeout_seconds": 5, "max_retries": 0}
    body = RecordedModel({**base, "structured": "json_object"}, tmp_path / "r").payload([], schema=schema)
    assert body["response_format"] == {"type": "json_object", "schema": schema}
    assert "response_format" not in RecordedModel({**base, "structured": "none"}, tmp_path / "r").payload([], schema=schema)
    with pytest.raises(ConfigError, match="structured"):
        RecordedModel({**base, "structured": "grammar"}, tmp_path / "r")
    with pytest.raises(ConfigError, match="llm.model"):
        RecordedModel({**base, "model": None, "structured": "none"}, tmp_path / "r")


def test_a_refusing_endpoint_fails_with_its_status(tmp_path: Path) -> None:
    from forecast_env.errors import EndpointError

    with ChatServer([Status(400, {"error": {"message": "bad model"}})]) as srv:
        llm = {"model": "m", "base_url": srv.base_url, "temperature": 0.0, "max_tokens": 50, "seed": 0,
               "timeout_seconds": 5, "max_retries": 0, "structured": "none"}
        with pytest.raises(EndpointError, match="400"):
            RecordedModel(llm, tmp_path / "r").ask_json([{"role": "user", "content": "x"}], rating_schema(("a",)), "v")
