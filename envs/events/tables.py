"""The tables of `WS/events/`: from candidates to Arrow tables, the merge of two sources, reading back.

The written tables hold the kept events only (events, legs, beliefs, trades_daily, schedule); the
`screen` table holds every verdict and `excluded` one row per excluded event. Polymarket events
(`pm-` ids) and imported questions (`q-` ids) share the tables: a build of one source replaces that
source's rows and keeps the other's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, cast

import polars as pl
import pyarrow as pa

from forecast_env import schema
from forecast_env.crashpoints import crash_point
from forecast_env.envs.events.candidate import Candidate
from forecast_env.store import EVENT_TABLES, Workspace, atomic_write_table, conform, read_table

#: Event-id prefix of each source.
#: generated: questions/ (docs/questions.md); forecastbench: ForecastBench rounds (docs/forecastbench.md)
SOURCE_PREFIX = {"polymarket": "pm-", "questions": "q-", "generated": "g-", "forecastbench": "fb-"}

#: A table row (a dict of column -> value; the values' types vary by column).
Row = dict[str, Any]


@dataclass
class EventTables:
    """Every table of `WS/events/` as polars DataFrames."""

    events: pl.DataFrame
    legs: pl.DataFrame
    beliefs: pl.DataFrame
    trades_daily: pl.DataFrame
    schedule: pl.DataFrame
    screen: pl.DataFrame
    excluded: pl.DataFrame


def load_events(workspace: str | Path) -> EventTables:
    """Read every events table of a workspace (a clear error when the build has not run)."""
    ws = Workspace.at(workspace)
    frames: dict[str, pl.DataFrame] = {}
    for name, sch in EVENT_TABLES.items():
        path = ws.require(ws.events_table(name), f"events table {name!r}",
                          "forecast-env events build --polymarket DIR --workspace WS")
        frames[name] = _frame(read_table(path, sch))
    return EventTables(**frames)


def _frame(table: pa.Table) -> pl.DataFrame:
    # `pl.from_arrow` is typed DataFrame | Series; a Table always gives a DataFrame
    return cast(pl.DataFrame, pl.from_arrow(table))


def options_frame(cands: list[Candidate]) -> pl.DataFrame:
    """One row per (event, option) in the offered order; `binary` marks Polymarket binary events."""
    rows = [(c.event_id, k, o, c.source == "polymarket" and c.type == "binary")
            for c in cands for k, o in enumerate(c.options)]
    return pl.DataFrame(rows, schema={"event_id": pl.Utf8, "option_index": pl.Int32, "option": pl.Utf8,
                                      "binary": pl.Boolean}, orient="row")


def series_frames(cands: list[Candidate]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The raw price observations and trades of every candidate as long tables."""
    def frame(attr: str, value: str) -> pl.DataFrame:
        eids, idx, ts, vs = [], [], [], []
        for c in cands:
            for k, t, v in getattr(c, attr):
                eids.append(c.event_id)
                idx.append(k)
                ts.append(t)
                vs.append(v)
        return pl.DataFrame({"event_id": eids, "option_index": idx, "t": ts, value: vs},
                            schema={"event_id": pl.Utf8, "option_index": pl.Int32, "t": pl.Int64, value: pl.Float64})

    return frame("prices", "p"), frame("trades", "size")


def clip_to_span(df: pl.DataFrame, cands: list[Candidate]) -> pl.DataFrame:
    """Rows of `df` whose `day` lies in its event's trading life (start day .. close day)."""
    spans = pl.DataFrame({"event_id": [c.event_id for c in cands], "_s": [c.start_day for c in cands],
                          "_e": [c.close_day for c in cands]},
                         schema={"event_id": pl.Utf8, "_s": pl.Date, "_e": pl.Date})
    return (df.join(spans, on="event_id", how="inner")
            .filter((pl.col("day") >= pl.col("_s")) & (pl.col("day") <= pl.col("_e"))).drop("_s", "_e"))


def by_event(df: pl.DataFrame, key_cols: tuple[str, ...], value_cols: tuple[str, ...]) -> dict[str, dict]:
    """{event_id: {key (or key tuple): value (or value tuple)}} from a long table."""
    out: dict[str, dict] = {}
    for row in df.select("event_id", *key_cols, *value_cols).iter_rows():
        eid, rest = row[0], row[1:]
        key = rest[: len(key_cols)]
        val = rest[len(key_cols):]
        out.setdefault(eid, {})[key[0] if len(key) == 1 else key] = val[0] if len(val) == 1 else val
    return out


def event_row(c: Candidate) -> Row:
    """The EVENTS row of a kept candidate (its metrics hold the filters', split's, schedule's and screen's)."""
    m = c.metrics
    return {
        "event_id": c.event_id, "source": c.source, "slug": c.slug, "question": c.question,
        "description": c.description, "options": c.options, "type": c.type, "category": c.category,
        "tags": c.tags, "t_start": c.t_start, "t_close": c.t_close, "start_day": c.start_day,
        "close_day": c.close_day, "t_end": c.t_end, "end_day": c.end_day, "option_seed": c.option_seed,
        "label": c.label, "volume": c.volume,
        **{k: m.get(k) for k in ("split", "rho", "max_unfaithful_run", "mid_share", "total_variation", "screen_verdict",
                                 "screen_leak", "t_all", "d_known", "cut", "cut_by", "steps_total", "steps_offered",
                                 "late_leg_days", "exposure_day", "exposed_by", "exposure_words")},
    }


def leg_rows(c: Candidate) -> list[Row]:
    """The LEGS rows of a kept candidate, in the offered order."""
    return [{"event_id": c.event_id, "option": leg.option, "option_index": leg.option_index,
             "market_id": leg.market_id, "condition_id": leg.condition_id, "token_id": leg.token_id,
             "leg_start": leg.leg_start, "leg_close": leg.leg_close, "leg_end": leg.leg_end,
             "first_trade": leg.first_trade, "start_day": leg.start_day, "market_index": leg.market_index,
             "neg_risk_other": leg.neg_risk_other} for leg in c.legs]


def _table(rows: list[Row], sch: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=sch) if rows else sch.empty_table()


def assemble_tables(final: list[Candidate], beliefs: pl.DataFrame, trades_daily: pl.DataFrame,
                    schedule_rows: list[Row], screen_rows: list[Row],
                    exclusions: list[tuple[str, str, str, str | None]]) -> dict[str, pa.Table]:
    """The seven events tables of one build (kept events only, except `screen` and `excluded`)."""
    ids = pl.DataFrame({"event_id": [c.event_id for c in final]}, schema={"event_id": pl.Utf8})
    excl = [dict(zip(("event_id", "stage", "reason", "detail"), r)) for r in exclusions]
    return {
        "events": _table([event_row(c) for c in final], schema.EVENTS),
        "legs": _table([r for c in final for r in leg_rows(c)], schema.LEGS),
        "beliefs": beliefs.join(ids, on="event_id", how="semi").to_arrow(),
        "trades_daily": trades_daily.join(ids, on="event_id", how="semi").to_arrow(),
        "schedule": _table(schedule_rows, schema.SCHEDULE),
        "screen": _table(screen_rows, schema.SCREEN),
        "excluded": _table(excl, schema.EXCLUDED),
    }


def write_tables(ws: Workspace, tables: Mapping[str, pa.Table], source: str) -> None:
    """Write the tables of one source, keeping the rows of the other (re-imported ids replace theirs)."""
    prefix = SOURCE_PREFIX[source]
    for name, sch in EVENT_TABLES.items():
        path = ws.events_table(name)
        new = _frame(conform(tables[name], sch))
        if path.exists():
            old = _frame(read_table(path, sch))
            old = old.filter(~pl.col("event_id").str.starts_with(prefix))
            if source == "questions":  # re-imported ids replace their old rows
                old = old.join(new.select("event_id").unique(), on="event_id", how="anti")
            new = pl.concat([old, new], how="vertical_relaxed")
        # sorted on the first build too: a rerun over a stopped build's tables writes the same bytes
        new = new.sort("event_id", maintain_order=True)
        atomic_write_table(path, new.to_arrow(), sch)
        crash_point("events.table")


def day_of(value: date | str) -> date:
    """A date, or an ISO date string, as a date."""
    return value if isinstance(value, date) else date.fromisoformat(str(value))
