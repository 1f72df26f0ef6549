"""Audit check 1 `schedule` (docs/design.md §8): FAIL on the old label-dependent schedule, on a stored old
schedule, on a closedTime moved before the dates, and on a date on or after the exposure day."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import polars as pl

from forecast_env.eval.audit.run import FAIL, run_audit
from forecast_env.store import Workspace, atomic_write_table, read_table
from tests.support.audit_data import FAST, SIBLINGS_FAST, build_old_schedule


def test_schedule_check_fails_on_the_old_label_dependent_schedule(ws_copy: Path) -> None:
    # a bundle whose losing legs were added later, as Polymarket does
    legs = pl.read_parquet(ws_copy / "events" / "legs.parquet")
    events = pl.read_parquet(ws_copy / "events" / "events.parquet").filter(pl.col("split") == "eval")
    ev = events.sort("event_id").row(0, named=True)
    losers = [o for o in ev["options"] if o != ev["label"]]
    late = ev["start_day"] + timedelta(days=6)
    legs = legs.with_columns(pl.when((pl.col("event_id") == ev["event_id"]) & pl.col("option").is_in(losers[:1]))
                             .then(pl.lit(late)).otherwise(pl.col("start_day")).alias("start_day"))
    legs.write_parquet(ws_copy / "events" / "legs.parquet")
    res = run_audit(ws_copy, "eval", checks=["schedule"], settings=FAST,
                    schedule_builder=build_old_schedule).check("schedule")
    assert res.verdict == FAIL
    assert res.figures["label_changes_schedule"] >= 1, res.figures
    assert res.figures["close_moves_schedule"] >= 1, res.figures
    assert "label_changes_schedule" in res.reason


def test_schedule_check_fails_on_a_stored_old_schedule(ws_copy: Path) -> None:
    """The stored table of an old build: a late leg missing from the first date, which lies before t_all."""
    path = ws_copy / "events" / "schedule.parquet"
    sched = pl.read_parquet(path)
    events = pl.read_parquet(ws_copy / "events" / "events.parquet").filter(pl.col("split") == "eval")
    ev = events.sort("event_id").row(0, named=True)
    first = sched.filter((pl.col("event_id") == ev["event_id"]) & (pl.col("step") == 1)).row(0, named=True)
    early = first["forecast_date"] - timedelta(days=30)
    fixed = sched.with_columns(
        pl.when((pl.col("event_id") == ev["event_id"]) & (pl.col("step") == 1)).then(pl.lit(early))
        .otherwise(pl.col("forecast_date")).alias("forecast_date"),
        pl.when((pl.col("event_id") == ev["event_id"]) & (pl.col("step") == 1))
        .then(pl.lit([ev["label"]], dtype=pl.List(pl.String))).otherwise(pl.col("options")).alias("options"))
    fixed.write_parquet(path)
    res = run_audit(ws_copy, "eval", checks=["schedule"], settings=FAST).check("schedule")
    assert res.verdict == FAIL
    assert res.figures["all_options"] >= 1 and res.figures["before_t_all"] >= 1, res.figures
    assert res.figures["stored_vs_rebuilt"] >= 1


def test_schedule_check_fails_when_closed_time_moved_before_the_dates(ws_copy: Path) -> None:
    path = ws_copy / "events" / "events.parquet"
    events = pl.read_parquet(path)
    sched = pl.read_parquet(ws_copy / "events" / "schedule.parquet")
    eid = sorted(events.filter(pl.col("split") == "eval")["event_id"].to_list())[0]
    last = sched.filter(pl.col("event_id") == eid)["forecast_date"].max()
    events = events.with_columns(pl.when(pl.col("event_id") == eid).then(pl.lit(last + timedelta(days=1)))
                                 .otherwise(pl.col("close_day")).alias("close_day"))
    events.write_parquet(path)
    res = run_audit(ws_copy, "eval", checks=["schedule"], settings=FAST).check("schedule")
    assert res.verdict == FAIL
    assert res.figures["after_close"] >= 1, res.figures


def test_check1_catches_a_date_on_or_after_the_exposure_day(siblings, tmp_path: Path) -> None:
    from forecast_env import schema

    ws = tmp_path / "ws"
    shutil.copytree(siblings["on"], ws)
    w = Workspace.at(ws)
    ev = pl.from_arrow(read_table(w.events_table("events"), schema.EVENTS))
    sched = pl.from_arrow(read_table(w.events_table("schedule"), schema.SCHEDULE))
    eid = sched.filter(pl.col("step") == 1).join(ev.filter(pl.col("split") == "eval"), on="event_id")["event_id"][0]
    first = sched.filter((pl.col("event_id") == eid) & (pl.col("step") == 1))["forecast_date"][0]
    ev = ev.with_columns(pl.when(pl.col("event_id") == eid).then(pl.lit(first - timedelta(days=0)))
                         .otherwise(pl.col("exposure_day")).alias("exposure_day"))
    atomic_write_table(w.events_table("events"), ev.to_arrow(), schema.EVENTS)
    res = run_audit(ws, "eval", checks=["schedule"], settings=SIBLINGS_FAST).check("schedule")
    assert res.verdict == FAIL and res.figures["on_or_after_exposure"] >= 1
    assert res.figures["stored_vs_rebuilt"] >= 1  # the rebuild with the exposure day offers fewer dates
