"""The run viewer's data (eval/viewer/data.py, index.py) against the run's own files, read independently: the events
page's means, a question's forecasts, search hits, market and public day; the parts' index built once and a question
reading only its own parts; truncated parts, an unwritable run directory, compare mode, world and training runs."""

from __future__ import annotations

import builtins
import io
import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from forecast_env.errors import RunError
from forecast_env.eval.viewer import RunView, UnknownQuestion
from forecast_env.eval.viewer.index import INDEX_NAME
from tests.eval.viewer.conftest import EPISODE_RUN, PLANTED, PLANTED_QUESTION, WORLD_RUN, copy_workspace


@pytest.fixture(scope="module")
def ws(viewer_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace(viewer_base, tmp_path_factory.mktemp("viewer_data") / "ws")


@pytest.fixture(scope="module")
def run_dir(ws: Path) -> Path:
    return ws / "runs" / EPISODE_RUN


@pytest.fixture(scope="module")
def view(run_dir: Path) -> RunView:
    return RunView.open(run_dir)


def _p_label(row: dict) -> float:
    return row["probs"][row["options"].index(row["label"])]


def _mean(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def test_events_rows_are_the_forecasts_means(view: RunView, run_dir: Path) -> None:
    fc = pl.read_parquet(run_dir / "forecasts.parquet").to_dicts()
    rows = {r["event_id"]: r for r in view.events()["events"]}
    keys = {s["agent"]: s["key"] for s in view.run_summary()["series"]}
    assert set(keys) == {"uniform", "retrieval"} and set(rows) == {r["event_id"] for r in fc}
    for eid, row in rows.items():
        for agent, key in keys.items():
            scored = [r for r in fc if r["event_id"] == eid and r["agent"] == agent and not r["missing"]
                      and r["brier"] is not None]
            got = row["metrics"][key]
            assert got["n"] == len(scored) > 0
            assert got["brier"] == pytest.approx(_mean([r["brier"] for r in scored]))
            assert got["accuracy"] == pytest.approx(_mean([r["accuracy"] for r in scored]))
            want_lvm = _mean([r["log_vs_market"] for r in scored])
            assert got["log_vs_market"] == (pytest.approx(want_lvm) if want_lvm is not None else None)
            gaps = [abs(_p_label(r) - r["market_prob"]) for r in scored if r["market_prob"] is not None]
            assert got["gap"] == (pytest.approx(_mean(gaps)) if gaps else None)
    planted = rows[PLANTED]
    assert planted["question"] == PLANTED_QUESTION["question"] and planted["n_options"] == 2
    assert planted["source"] == "questions" and planted["close_day"] == "2026-04-25"
    market = pl.read_parquet(run_dir / "market.parquet")
    for eid, row in rows.items():
        want = market.filter(pl.col("event_id") == eid)["brier"].mean()
        assert row["market_brier"] == (pytest.approx(want) if want is not None else None)


def test_question_forecasts_are_the_forecasts_table(view: RunView, run_dir: Path) -> None:
    fc = pl.read_parquet(run_dir / "forecasts.parquet")
    for eid in view.event_ids:
        q = view.question(eid)
        assert q["notes"] == [] and {s["agent"] for s in q["series"]} == {"uniform", "retrieval"}
        for s in q["series"]:
            for ro in s["rollouts"]:
                want = fc.filter((pl.col("event_id") == eid) & (pl.col("agent") == s["agent"])
                                 & (pl.col("rollout") == ro["rollout"])).sort("step").to_dicts()
                assert [(d["date"], d["step"]) for d in ro["dates"]] == [
                    (r["forecast_date"].isoformat(), r["step"]) for r in want]
                for d, r in zip(ro["dates"], want):
                    assert d["forecast"]["probs"] == dict(zip(r["options"], r["probs"]))
                    assert d["forecast"]["brier"] == pytest.approx(r["brier"])
                    assert d["steps_total"] == r["steps_total"]


def test_search_hits_opened_articles_and_notes_come_from_the_parts(view: RunView, ws: Path) -> None:
    titles = dict(pl.read_parquet(ws / "corpus" / "articles", columns=["doc_id", "title"]).iter_rows())
    q = view.question(view.event_ids[0])
    retrieval = next(s for s in q["series"] if s["agent"] == "retrieval")
    events = [e for d in retrieval["rollouts"][0]["dates"] for e in d["events"]]
    hits = [h for e in events if e["kind"] == "search" for h in e["hits"]]
    opens = [e for e in events if e["kind"] == "open"]
    assert hits and opens and any(e["kind"] == "note_add" for e in events)
    assert all(h["title"] == titles[h["doc_id"]] and h["date"] and h["source"] for h in hits)
    assert all(e["title"] == titles[e["doc_id"]] and e["excerpt"] for e in opens)
    assert all(e["query"] for e in events if e["kind"] == "search")
    last = retrieval["rollouts"][0]["dates"][-1]
    assert last["notebook"] and all(n["status"] in ("active", "superseded") for n in last["notebook"])


def test_market_rows_are_the_daily_beliefs(view: RunView, viewer_base: Path) -> None:
    beliefs = pl.read_parquet(viewer_base / "events" / "beliefs.parquet")
    events = pl.read_parquet(viewer_base / "events" / "events.parquet")
    for eid in view.event_ids:
        ev = events.filter(pl.col("event_id") == eid).row(0, named=True)
        want = (beliefs.filter((pl.col("event_id") == eid) & pl.col("belief").is_not_null()
                               & (pl.col("day") >= ev["start_day"]) & (pl.col("day") <= ev["close_day"])))
        got = view.question(eid)["market"]
        assert got, eid
        assert [(m["date"], o, p) for m in got for o, p in sorted(m["probs"].items())] == [
            (d.isoformat(), o, p) for d, o, p in want.sort("day", "option").select("day", "option", "belief").iter_rows()]
        block = view.question(eid)["event"]
        known = [(d, k) for d, k in ((ev["d_known"], "d_known"), (ev["exposure_day"], "exposure")) if d is not None]
        day, kind = min(known) if known else (ev["close_day"], "close")
        assert (block["public_day"], block["public_day_kind"]) == (day.isoformat(), kind)


def _recording_open(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real = builtins.open

    def spy(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(io, "open", spy)
    return opened


def test_index_is_built_once_and_a_question_reads_only_its_parts(run_dir: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    run = shutil.copytree(run_dir, tmp_path / "runs" / "copy")
    (run / INDEX_NAME).unlink(missing_ok=True)  # the module's views built one (copied with the folders' times)
    first = RunView.open(run)
    first.question(PLANTED)
    index = run / INDEX_NAME
    assert index.exists() and first.runs[0]._index is not None and first.runs[0]._index.built
    stamp = index.stat().st_mtime_ns
    second = RunView.open(run)
    other = next(e for e in second.event_ids if e != PLANTED)
    opened = _recording_open(monkeypatch)
    q = second.question(other)
    monkeypatch.undo()
    assert second.runs[0]._index is not None and not second.runs[0]._index.built
    assert index.stat().st_mtime_ns == stamp
    parts = [Path(p) for p in opened if "/parts/" in p]
    assert sorted(p.relative_to(run).parts[1:3] for p in parts) == [("retrieval", other), ("uniform", other)]
    assert q["series"] and all(p.parent.name == other for p in parts)
    # a new part changes the parts folder: the next view rebuilds the index
    src = run / "parts" / "uniform" / other / "r0.json"
    (run / "parts" / "uniform" / other / "r1.json").write_bytes(src.read_bytes())
    third = RunView.open(run)
    q = third.question(other)
    assert third.runs[0]._index is not None and third.runs[0]._index.built and index.stat().st_mtime_ns != stamp
    assert [r["rollout"] for s in q["series"] if s["agent"] == "uniform" for r in s["rollouts"]] == [0, 1]


def test_a_truncated_part_is_skipped_with_a_note(run_dir: Path, tmp_path: Path) -> None:
    run = shutil.copytree(run_dir, tmp_path / "runs" / "copy")
    part = run / "parts" / "retrieval" / PLANTED / "r0.json"
    part.write_bytes(part.read_bytes()[:500])
    q = RunView.open(run).question(PLANTED)
    assert [s["agent"] for s in q["series"]] == ["uniform", "retrieval"]  # retrieval from its forecasts alone
    assert any("retrieval" in n and "unreadable" in n and "r0.json" in n for n in q["notes"])
    retrieval = q["series"][1]["rollouts"][0]["dates"]
    assert retrieval and all(d["events"] == [] and d["forecast"]["brier"] is not None for d in retrieval)


def test_a_truncated_world_part_is_skipped_with_a_note(ws: Path, tmp_path: Path) -> None:
    run = shutil.copytree(ws / "runs" / WORLD_RUN, tmp_path / "runs" / WORLD_RUN)
    (run / INDEX_NAME).unlink(missing_ok=True)
    (part,) = (run / "parts" / "retrieval").glob("*/r0.json")
    part.write_bytes(part.read_bytes()[:-200])
    view = RunView.open(run)
    eid = next(r["event_id"] for r in view.events()["events"] if r["metrics"])
    q = view.question(eid)
    assert any(n.startswith("retrieval: ") and "unreadable" in n for n in q["notes"])
    assert not any(n.startswith("uniform: ") for n in q["notes"])
    by_agent = {s["agent"]: s for s in q["series"]}
    assert by_agent["retrieval"]["rollouts"][0]["dates"]  # its forecasts, without the calls
    assert all(d["events"] == [] for d in by_agent["retrieval"]["rollouts"][0]["dates"])
    assert any("unreadable" in n for n in view.run_summary()["notes"])
    again = RunView.open(run)  # the note is kept in the index, not only in the view that built it
    assert any("unreadable" in n for n in again.question(eid)["notes"])
    assert again.runs[0]._index is not None and not again.runs[0]._index.built


def test_an_unwritable_run_directory_keeps_the_index_in_memory(run_dir: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from forecast_env.eval.viewer import index as index_mod

    run = shutil.copytree(run_dir, tmp_path / "runs" / "copy")

    def refuse(path: Any, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(index_mod, "atomic_write_table", refuse)
    (run / INDEX_NAME).unlink(missing_ok=True)
    view = RunView.open(run)
    view.prepare()
    assert view.question(PLANTED)["series"]
    view.question(view.event_ids[0])
    notes = [n for n in view.run_summary()["notes"] if "in memory" in n]
    assert len(notes) == 1 and not (run / INDEX_NAME).exists()


def test_unknown_questions_and_the_events_filter(run_dir: Path) -> None:
    view = RunView.open(run_dir, events=[PLANTED])
    assert view.event_ids == [PLANTED] and [r["event_id"] for r in view.events()["events"]] == [PLANTED]
    for bad in ("../../x", "nope", ""):
        with pytest.raises(UnknownQuestion):
            view.question(bad)
    with pytest.raises(RunError, match="not in run"):
        RunView.open(run_dir, events=["nope"])
    with pytest.raises(RunError, match="not a run directory"):
        RunView.open(run_dir / "parts")


def test_compare_mode_labels_the_second_runs_series(run_dir: Path) -> None:
    view = RunView.open(run_dir, compare=WORLD_RUN)  # an id beside the run
    run = view.run_summary()
    assert run["compare_run_id"] == WORLD_RUN and run["mode"] == "episode"
    assert [(s["key"], s["label"], s["run_id"]) for s in run["series"]] == [
        ("s0", "uniform", EPISODE_RUN), ("s1", "retrieval", EPISODE_RUN),
        ("s2", f"uniform ({WORLD_RUN})", WORLD_RUN), ("s3", f"retrieval ({WORLD_RUN})", WORLD_RUN)]
    rows = view.events()["events"]
    assert any({"s0", "s2"} <= set(r["metrics"]) for r in rows)
    q = view.question(next(r["event_id"] for r in rows if {"s0", "s2"} <= set(r["metrics"])))
    assert {s["key"] for s in q["series"]} == {"s0", "s1", "s2", "s3"}


def test_a_world_run_opens(ws: Path) -> None:
    run = ws / "runs" / WORLD_RUN
    view = RunView.open(run)
    assert view.run_summary()["mode"] == "world"
    fc = pl.read_parquet(run / "forecasts.parquet")
    rows = [r for r in view.events()["events"] if r["metrics"]]
    assert rows
    read_any = False
    for row in rows:
        q = view.question(row["event_id"])
        for s in q["series"]:
            for ro in s["rollouts"]:
                want = fc.filter((pl.col("event_id") == row["event_id"]) & (pl.col("agent") == s["agent"])
                                 & (pl.col("rollout") == ro["rollout"])).sort("step")
                assert [d["date"] for d in ro["dates"]] == [d.isoformat() for d in want["forecast_date"]]
                for d in ro["dates"]:
                    assert all(e["day"] <= d["date"] for e in d["events"])
                    read_any |= any(e["kind"] == "open" and e["title"] for e in d["events"])
    assert read_any  # the retrieval agent's reading, attributed to its questions
    assert (run / INDEX_NAME).exists()


def test_a_world_llm_transcript_is_shown_per_day(ws: Path, tmp_path: Path) -> None:
    """A world LLM agent's transcript (one chat per day it acted on) reaches the question's dates through the index."""
    run = shutil.copytree(ws / "runs" / WORLD_RUN, tmp_path / "runs" / WORLD_RUN)
    (run / INDEX_NAME).unlink(missing_ok=True)
    (path,) = (run / "parts" / "retrieval").glob("*/r0.json")
    part = json.loads(path.read_text())
    days = {d["day"]: d["date"] for d in part["days"]}
    acted: list[int] = []
    for call in part["tool_calls"]:
        if not acted or acted[-1] != call["step"]:
            acted.append(call["step"])
    part["messages"] = [m for day in acted for m in (
        {"role": "system", "content": "world"}, {"role": "user", "content": f"today is {days[day]} </script>"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "function": {"name": "next_day"}}]})]
    path.write_text(json.dumps(part))
    view = RunView.open(run)
    shown = 0
    for eid in view.event_ids:
        for s in view.question(eid)["series"]:
            for ro in s["rollouts"]:
                for d in ro["dates"]:
                    if s["agent"] != "retrieval" or not d["messages"]:
                        continue
                    said = [m["content"] for m in d["messages"] if m["role"] == "user"]
                    assert said == [f"today is {day} </script>" for day in sorted({e["day"] for e in d["events"]})]
                    assert "next_day" in d["messages"][2]["content"]
                    shown += 1
    assert shown and not any("transcript" in n for n in view.notes)


def test_a_training_run_opens(ws: Path) -> None:
    """A trainer's sessions (adapters/sessions.py, as TRL's): one part per (event, date) unit."""
    from forecast_env.adapters.sessions import TrainingRun

    trun = TrainingRun(ws, engine="trl", unit="date", split="eval", run_id="trl-units")
    eid, step = trun.units()[0]
    for unit_step in (step, step):  # the same date twice: two rollouts
        session = trun.open(eid, unit_step)
        session.call("search", {"query": "results"})
        session.finish(messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                 {"role": "assistant", "content": "a"}])
    trun.close()
    view = RunView.open(trun.run_dir)
    assert view.run_summary()["mode"] == "training"
    (series,) = view.question(eid)["series"]
    assert [r["rollout"] for r in series["rollouts"]] == [0, 1]
    for ro in series["rollouts"]:
        (d,) = ro["dates"]
        assert d["step"] == step and d["events"][0]["kind"] == "search" and d["forecast"] is not None
        assert [m["role"] for m in d["messages"]] == ["system", "user", "assistant"]
    assert json.loads(json.dumps(view.question(eid))) == view.question(eid)
