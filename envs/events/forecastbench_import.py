"""ForecastBench rounds as events (docs/forecastbench.md; source "forecastbench", ids "fb-...").

`envs/events/forecastbench.py` reads the published question and resolution sets; this module turns the
rounds into event candidates and one item row per resolution-set row (`schema.FORECASTBENCH_ITEMS`), and
`build.import_forecastbench` runs them through the same stages as every other source.

How ForecastBench's items map to events:

* **Market question** (Manifold, Metaculus, INFER, Polymarket): ONE event per round it appears in (due date,
  source, id): ForecastBench's market item, with one forecast date. Its label is the question's resolution
  (0 -> "No", 1 -> "Yes", from any round's resolved row); its market belief on that date is the round's freeze
  value (the market price on the freeze day). Not one event over the rounds: that event's `steps_total` (shown to
  the agent) would count the rounds the question stays open in, and a question still open four rounds later is
  one that did not resolve early: the schedule would carry the label.
* **Dataset question** (ACLED, DBnomics, FRED, Wikipedia, yfinance): ONE event per item (due date, source, id,
  horizon), with one forecast date: the round's freeze day. Its text has `{forecast_due_date}` and
  `{resolution_date}` filled in; the freeze value (the series' level) is in its description, as ForecastBench
  gives it. It has no market.
* **Forecast date.** The environment's forecast date is the round's FREEZE day: the agent searches news visible
  up to it, never after (ForecastBench froze the question set, and its market values, on that day). The item
  keeps the round's due date, ForecastBench's forecast date, for scoring (`eval/report/forecastbench.py`).
* **Not imported** (each item row says why, `status`): combination questions (`combo`), rows of a round whose
  question set lacks the question (`no_question`; e.g. a question set the snapshot did not carry), sources
  ForecastBench does not score (`unknown_source`). Questions no resolution row resolves (or whose round has
  no resolution set yet) are excluded at the label stage as `unresolved` and their items are `pending`:
  re-import after the resolution sets update. A market question that its round's resolution set leaves out
  (it resolved between the freeze and due dates; ForecastBench drops it) is `label/no_resolution_row` there.
  A question's label and home split come from EVERY round of the folder (`History`), not the imported ones.
* **Splits** by due date (`forecastbench.splits` in configs/events.yaml): an event is in the split whose window
  holds its round's due date. A market question takes the split of the FIRST round it appears in: its events of
  rounds in a later split are excluded (`split/crossing_split`), so no eval question's label was trained on. An
  event of a split that another split follows (train) must also resolve before that split ends (else
  `crossing_split`): a 180-day FRED item of a train round would otherwise tell the eval period's data.
* **Screens.** Polymarket's span, activity and signal filters do not apply (there are no trades). The corpus
  screen runs at tau* like everywhere; its `leakage` and `judge_error` verdicts exclude, and
  `forecastbench.screen_records_only` (default `insufficient`, `partial`) are recorded only: a FRED series'
  value is not news, so the corpus rarely holds evidence on a data question, and ForecastBench scores it anyway.
* **Polymarket duplicates.** ForecastBench's Polymarket id is the market's condition id. When a Polymarket
  event built from Gamma in the same workspace holds that condition, the Polymarket build's event is kept (it
  has the daily price history and the environment's own schedule) and the ForecastBench one is excluded as
  `parse/duplicate`; its items say `duplicate` and name the kept event. This holds in either import order.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import polars as pl
import pyarrow as pa

from forecast_env import schema
from forecast_env.envs.events.candidate import Candidate, Leg
from forecast_env.envs.events.forecastbench import Question, Resolution, Round
from forecast_env.envs.events.funnel import BuildRun
from forecast_env.envs.events.splits import Splits
from forecast_env.errors import EventsError
from forecast_env.store import EVENT_TABLES, Workspace, atomic_write_table, read_table
from forecast_env.timeparse import parse_api_time

log = logging.getLogger(__name__)

#: The options of every imported question, in this order (ForecastBench asks for P(Yes)).
OPTIONS = ["Yes", "No"]

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")
_ROUNDS = re.compile(r"^(\d{4}-\d{2}-\d{2})?(?:\.\.(\d{4}-\d{2}-\d{2})?)?$")


def parse_rounds(spec: str | None) -> tuple[str | None, str | None]:
    """`A..B`, `A..`, `..B`, `A` (one round) or None/"" (all) as (first, last) ISO due dates."""
    if spec is None or not spec.strip():
        return None, None
    m = _ROUNDS.match(spec.strip())
    if not m or (m.group(1) is None and m.group(2) is None):
        raise EventsError(f"--rounds {spec!r}: expected A..B, A.., ..B or A (due dates YYYY-MM-DD)")
    first, last = m.group(1), m.group(2)
    if ".." not in spec:
        last = first
    for d in (first, last):
        if d is not None:
            try:
                date.fromisoformat(d)
            except ValueError as exc:
                raise EventsError(f"--rounds {spec!r}: {d} is not a date") from exc
    if first and last and first > last:
        raise EventsError(f"--rounds {spec!r}: {first} is after {last}")
    return first, last


def safe_id(qid: str) -> str:
    """The id as it may appear in an event id (and a file name): itself, or 16 hex of its sha256."""
    return qid if _SAFE_ID.match(qid) else hashlib.sha256(qid.encode("utf-8")).hexdigest()[:16]


def market_event_id(due: str, source: str, qid: str) -> str:
    return f"fb-{due}-{source}-{safe_id(qid)}"


def dataset_event_id(due: str, source: str, qid: str, horizon: int) -> str:
    return f"fb-{due}-{source}-{safe_id(qid)}-h{horizon}"


def question_pk(kind: str | None, due: str, source: str, qid: str, horizon: int) -> str:
    """ForecastBench's primary key (`src/leaderboard/main.py`): due_source_id (+ _horizon for dataset items)."""
    base = f"{due}_{source}_{qid}"
    return f"{base}_{horizon}" if kind == "dataset" else base


def _midnight(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


@dataclass
class Imported:
    """The candidates of some rounds, their item rows, and the rows' exclusions."""

    candidates: list[Candidate] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    exclusions: list[tuple[str, str, str, str]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    buffer_days: int = 2  # the schedule's buffer (events config): t_end = freeze day + it
    n_in: int = 0  # questions considered as events (market questions once, dataset items each)


def _freeze(q: Question, due: date) -> tuple[datetime, date]:
    """The freeze time and day of a question (its published freeze_datetime; else 10 days before the due date,
    ForecastBench's usual gap, recorded as a repair)."""
    t = parse_api_time(q.freeze_datetime) if q.freeze_datetime else None
    if t is None or t.date() > due:
        d = due - timedelta(days=10)
        return _midnight(d), d
    return t, t.date()


def _fill(text: str, due: str, resolution_date: str) -> str:
    return text.replace("{forecast_due_date}", due).replace("{resolution_date}", resolution_date)


def _label(values: list[float]) -> tuple[str | None, str | None, str | None]:
    """(label, reason, detail) from the resolved values of one event's rows."""
    distinct = sorted(set(values))
    if len(distinct) > 1:
        return None, "conflicting", f"resolution sets disagree: resolved_to {distinct}"
    v = distinct[0]
    if v not in (0.0, 1.0):
        return None, "not_binary", f"resolved_to {v} is neither 0 nor 1 (no option to score against)"
    return ("Yes" if v == 1.0 else "No"), None, None


def _item(rnd: Round, r: Resolution, q: Question | None, freeze_day: date | None) -> dict[str, Any]:
    due = date.fromisoformat(rnd.due_date)
    res = date.fromisoformat(r.resolution_date)
    horizon = (res - due).days
    return {
        "question_pk": question_pk(r.kind, rnd.due_date, r.source, r.id, horizon),
        "kind": r.kind, "due_date": due, "freeze_date": freeze_day, "source": r.source, "id": r.id,
        "combo": r.combo, "horizon": horizon, "resolution_date": res, "resolved": r.resolved,
        "resolved_to": r.resolved_to,
        "freeze_value": q.freeze_value if q is not None and r.kind == "market" else None,
        "market_value_due": None, "event_id": None, "forecast_date": None, "status": "", "detail": None,
    }


def _description(q: Question, with_value: bool) -> str:
    parts = []
    if q.resolution_criteria:
        parts.append(f"Resolution criteria: {q.resolution_criteria}")
    if q.background:
        parts.append(q.background)
    if with_value and q.freeze_value_text not in ("", "N/A"):
        parts.append(f"The latest value as of the question's freeze date ({q.freeze_datetime[:10]}): "
                     f"{q.freeze_value_text}.")
    return "\n\n".join(parts)


def _candidate(out: Imported, eid: str, q: Question, question: str, description: str, t_freeze: datetime,
               t_close: datetime, label: str, prices: list[tuple[int, int, float]], kind: str) -> Candidate:
    """The event of one item: it starts at the freeze time and its scheduled end `t_end` is the freeze day +
    `buffer_days`, so its grid (and its world-mode listing) is the freeze day alone, whenever it resolved: a
    listing that ran to the resolution day would tell an early resolution. `t_close` is the resolution day."""
    t_end = _midnight(t_freeze.date() + timedelta(days=out.buffer_days))
    t_close = max(t_close, t_freeze)
    legs = [Leg(o, k, None, None, None, t_freeze, t_close, t_end, market_index=k) for k, o in enumerate(OPTIONS)]
    return Candidate(
        event_id=eid, source="forecastbench", slug=None, question=question, description=description,
        options=list(OPTIONS), type="binary", category=q.source, tags=["forecastbench", kind], t_start=t_freeze,
        t_close=t_close, t_end=t_end, label=label, volume=None, legs=legs, prices=prices, dates=[t_freeze.date()],
    )


def _split_of(splits: Splits, due: date) -> tuple[str, datetime] | None:
    t = _midnight(due)
    for name, start, end in splits.windows:
        if start <= t < end:
            return name, end
    return None


def _outlives(splits: Splits, split: tuple[str, datetime], resolution: date) -> str | None:
    """Why an event of `split` resolving on `resolution` may not be in it: it resolves on or after the end of a
    split that another split follows (its label would tell what happened in the later split); else None."""
    name, end = split
    followed = any(start >= end for _, start, _ in splits.windows)
    if followed and _midnight(resolution) >= end:
        return (f"resolves on {resolution}, on or after the end of {name} ({end:%Y-%m-%d}): its label would tell "
                "what happened in the next split")
    return None


@dataclass(frozen=True)
class History:
    """What every round of the folder says of each market question (not only the imported rounds): the first
    due date it appears on (question or resolution row: its home split) and its resolved values."""

    first_due: dict[tuple[str, str], str]
    resolved: dict[tuple[str, str], list[tuple[str, float]]]  # (resolution date, resolved_to)
    with_resolution_set: frozenset[str]  # due dates whose resolution set could be read

    @classmethod
    def of(cls, rounds: list[Round]) -> History:
        first: dict[tuple[str, str], str] = {}
        resolved: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
        with_set = set()
        for rnd in sorted(rounds, key=lambda r: r.due_date):
            if rnd.resolutions:
                with_set.add(rnd.due_date)
            keys = [(q.source, q.id) for q in rnd.questions if q.kind == "market" and not q.combo]
            keys += [(r.source, r.id) for r in rnd.resolutions.values() if r.kind == "market" and not r.combo]
            for key in keys:
                first.setdefault(key, rnd.due_date)
            for r in rnd.resolutions.values():
                if r.kind == "market" and not r.combo and r.resolved and r.resolved_to is not None:
                    resolved[(r.source, r.id)].append((r.resolution_date, r.resolved_to))
        return cls(first, dict(resolved), frozenset(with_set))


def import_rounds(rounds: list[Round], splits: Splits, polymarket_conditions: Mapping[str, str],
                  buffer_days: int = 2, history: History | None = None) -> Imported:
    """Candidates and item rows of `rounds` (oldest first). `polymarket_conditions`: condition id -> the
    Polymarket event of this workspace that holds it (those ForecastBench questions are duplicates).
    `history`: every round of the folder (default: `rounds` alone), so that a question's home split and label
    do not depend on which rounds are imported."""
    out = Imported(buffer_days=buffer_days)
    history = history or History.of(rounds)
    for rnd in rounds:
        out.errors.extend(rnd.errors)
    # market questions: every round they appear in, with that round's question record
    market: dict[tuple[str, str], list[tuple[Round, Question, Resolution | None]]] = defaultdict(list)
    market_items: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rnd in rounds:
        due = date.fromisoformat(rnd.due_date)
        qs = {(q.source, q.id): q for q in rnd.questions}
        by_q: dict[tuple[str, str], list[Resolution]] = defaultdict(list)
        for r in rnd.resolutions.values():
            by_q[(r.source, r.id)].append(r)
        for mq in rnd.questions:
            if mq.kind == "market" and not mq.combo:
                rows = by_q.get((mq.source, mq.id), [])
                market[(mq.source, mq.id)].append((rnd, mq, rows[0] if rows else None))
        for r in rnd.resolutions.values():
            q = qs.get((r.source, r.id))
            item = _item(rnd, r, q, _freeze(q, due)[1] if q is not None else None)
            out.items.append(item)
            if r.combo:
                item["status"] = "combo"
            elif r.kind is None:
                item["status"] = "unknown_source"
            elif q is None:
                item["status"] = "no_question"
                item["detail"] = "the round's question set is missing or lacks this question"
            elif r.kind == "dataset":
                _dataset(out, rnd, q, r, item, splits)
            else:
                market_items[(r.source, r.id)].append(item)
    for (source, qid), appearances in sorted(market.items()):
        _market(out, source, qid, appearances, market_items.get((source, qid), []), splits, polymarket_conditions,
                history)
    out.counts["combination_rows_skipped"] = sum(1 for i in out.items if i["status"] == "combo")
    out.counts["rows_without_question"] = sum(1 for i in out.items if i["status"] == "no_question")
    return out


def _dataset(out: Imported, rnd: Round, q: Question, r: Resolution, item: dict[str, Any], splits: Splits) -> None:
    due = date.fromisoformat(rnd.due_date)
    t_freeze = _freeze(q, due)[0]
    eid = dataset_event_id(rnd.due_date, r.source, r.id, int(item["horizon"]))
    item["event_id"] = eid
    out.n_in += 1
    if not r.resolved:
        item["status"] = "pending"
        out.exclusions.append((eid, "label", "unresolved", f"pending: not resolved in the {rnd.due_date} set"))
        return
    label, reason, detail = _label([r.resolved_to] if r.resolved_to is not None else [])
    if label is None:
        out.exclusions.append((eid, "label", str(reason), str(detail)))
        return
    split = _split_of(splits, due)
    res_day = date.fromisoformat(r.resolution_date)
    if split is None:
        out.exclusions.append((eid, "split", "outside_splits", f"due date {rnd.due_date} is in no forecastbench split"))
        return
    late = _outlives(splits, split, res_day)
    if late is not None:
        out.exclusions.append((eid, "split", "crossing_split", late))
        return
    cand = _candidate(out, eid, q, _fill(q.question, rnd.due_date, r.resolution_date), _description(q, True),
                      t_freeze, _midnight(res_day), label, [], "dataset")
    cand.metrics["split"] = split[0]
    out.candidates.append(cand)


def _market(out: Imported, source: str, qid: str, appearances: list[tuple[Round, Question, Resolution | None]],
            items: list[dict[str, Any]], splits: Splits, polymarket_conditions: Mapping[str, str],
            history: History) -> None:
    """One event per round the question appears in (see the module docstring: never one event over rounds)."""
    by_due = {i["due_date"]: i for i in items if i["status"] == ""}
    kept_pm = polymarket_conditions.get(qid.lower()) if source == "polymarket" else None
    resolved = history.resolved.get((source, qid), [])
    label, reason, detail = _label([v for _, v in resolved]) if resolved else (None, "unresolved", "")
    first_due = history.first_due.get((source, qid), appearances[0][0].due_date)
    home = _split_of(splits, date.fromisoformat(first_due))
    for rnd, q, _ in appearances:
        due = date.fromisoformat(rnd.due_date)
        eid = market_event_id(rnd.due_date, source, qid)
        out.n_in += 1
        item = by_due.get(due)
        if item is not None:
            item["event_id"] = eid
        elif rnd.due_date not in history.with_resolution_set:
            out.exclusions.append((eid, "label", "unresolved",
                                   f"pending: the round {rnd.due_date} has no resolution set yet"))
            continue
        else:  # ForecastBench drops a question that resolved between its freeze and due dates from the round
            out.exclusions.append((eid, "label", "no_resolution_row",
                                   f"the {rnd.due_date} resolution set has no row for it (ForecastBench does not "
                                   "score it in this round)"))
            continue
        if kept_pm is not None:
            if item is not None:
                item["status"], item["detail"] = "duplicate", f"the Polymarket build's event {kept_pm} holds this market"
            out.exclusions.append((eid, "parse", "duplicate",
                                   f"kept {kept_pm} (Polymarket build: daily price history) for condition {qid}"))
            continue
        if label is None:
            if reason == "unresolved":
                if item is not None:
                    item["status"] = "pending"
                out.exclusions.append((eid, "label", "unresolved", "pending: no resolution set resolves it yet"))
            else:
                out.exclusions.append((eid, "label", str(reason), str(detail)))
            continue
        split = _split_of(splits, due)
        if split is None:
            out.exclusions.append((eid, "split", "outside_splits", f"due date {rnd.due_date} is in no forecastbench split"))
            continue
        if home is None or split[0] != home[0]:
            out.exclusions.append((eid, "split", "crossing_split",
                                   f"the question first appeared in round {first_due} "
                                   f"({home[0] if home else 'no split'}), not in {split[0]}"))
            continue
        late = _outlives(splits, split, date.fromisoformat(min(d for d, _ in resolved)))
        if late is not None:
            out.exclusions.append((eid, "split", "crossing_split", late))
            continue
        t_freeze = _freeze(q, due)[0]
        prices: list[tuple[int, int, float]] = []
        v = q.freeze_value
        if v is not None and 0.0 <= v <= 1.0:
            prices = [(0, int(t_freeze.timestamp()), v), (1, int(t_freeze.timestamp()), 1.0 - v)]
        t_close = _midnight(date.fromisoformat(min(d for d, _ in resolved)))
        cand = _candidate(out, eid, q, q.question, _description(q, False), t_freeze, t_close, label, prices, "market")
        cand.metrics["split"] = split[0]
        out.candidates.append(cand)


# ---------------------------------------------------------------------------------------------
# The items table and Polymarket duplicates (after the events tables are written)
# ---------------------------------------------------------------------------------------------


def items_path(ws: Workspace) -> Path:
    """`WS/events/forecastbench.parquet`."""
    return ws.events_dir / "forecastbench.parquet"


def _frame(table: pa.Table) -> pl.DataFrame:
    return cast(pl.DataFrame, pl.from_arrow(table))


def _stored(ws: Workspace, name: str) -> pl.DataFrame | None:
    path = ws.events_table(name)
    return _frame(read_table(path, EVENT_TABLES[name])) if path.exists() else None


def polymarket_conditions(ws: Workspace) -> dict[str, str]:
    """Condition id (lower case) -> the Polymarket event of the workspace holding that market."""
    legs = _stored(ws, "legs")
    if legs is None:
        return {}
    pm = legs.filter(pl.col("event_id").str.starts_with("pm-") & pl.col("condition_id").is_not_null())
    return {str(c).lower(): str(e) for e, c in pm.select("event_id", "condition_id").unique().iter_rows()}


def _due_values(ws: Workspace, items: list[dict[str, Any]]) -> None:
    """`market_value_due` of Polymarket items whose market a Polymarket event of the workspace holds: that
    leg's own YES price (day mean) on the due date ("Yes" of a binary market: its first outcome)."""
    legs, beliefs = _stored(ws, "legs"), _stored(ws, "beliefs")
    if legs is None or beliefs is None:
        return
    pm = legs.filter(pl.col("event_id").str.starts_with("pm-") & pl.col("condition_id").is_not_null())
    option_of: dict[str, tuple[str, str]] = {}
    for eid, cond, option, market_index in pm.sort("option_index").select(
            "event_id", "condition_id", "option", "market_index").iter_rows():
        key = str(cond).lower()
        if key not in option_of or option == "Yes" or (option_of[key][1] != "Yes" and market_index == 0):
            option_of[key] = (str(eid), str(option))
    wanted = [i for i in items if i["source"] == "polymarket" and i["kind"] == "market" and i["id"].lower() in option_of]
    if not wanted:
        return
    price = {(e, d, o): p for e, d, o, p in beliefs.select("event_id", "day", "option", "price").iter_rows()
             if p is not None}
    for i in wanted:
        eid, option = option_of[i["id"].lower()]
        i["market_value_due"] = price.get((eid, i["due_date"], option))


def write_items(ws: Workspace, items: list[dict[str, Any]], run: BuildRun) -> Path:
    """Settle each item's status against the written tables, then write the items table."""
    events, schedule = _stored(ws, "events"), _stored(ws, "schedule")
    kept = set(events.filter(pl.col("source") == "forecastbench")["event_id"].to_list()) if events is not None else set()
    offered: set[tuple[str, date]] = set()
    if schedule is not None:
        fb = schedule.filter(pl.col("event_id").str.starts_with("fb-"))
        offered = {(e, d) for e, d in fb.select("event_id", "forecast_date").iter_rows()}
    why = {eid: f"{stage}/{reason}: {detail}" for eid, stage, reason, detail in run.exclusions}
    cut = {eid: rec.get("cut") for eid, rec in run.cuts.items()}
    for i in items:
        if i["status"] or i["event_id"] is None:
            continue
        eid, day = i["event_id"], i["freeze_date"]
        if eid in kept and (eid, day) in offered:
            i["forecast_date"] = day
            if i["resolved"]:
                i["status"] = "scored"
            else:
                i["status"], i["detail"] = "pending", "not resolved in this round's set (the date is played)"
        elif eid in kept:
            i["status"] = "cut"
            i["detail"] = f"freeze day {day} not offered: on or after the schedule's cut {cut.get(eid)}"
        else:
            i["status"], i["detail"] = "excluded", why.get(eid, "not kept")
    _due_values(ws, items)
    path = items_path(ws)
    table = pa.Table.from_pylist(items, schema=schema.FORECASTBENCH_ITEMS) if items else \
        schema.FORECASTBENCH_ITEMS.empty_table()
    atomic_write_table(path, table, schema.FORECASTBENCH_ITEMS)
    return path


def read_items(workspace: str | Path) -> pl.DataFrame:
    """The items table of a workspace (a clear error when no ForecastBench round was imported)."""
    ws = Workspace.at(workspace)
    path = ws.require(items_path(ws), "ForecastBench items table",
                      "forecast-env events import --forecastbench REPO --workspace WS")
    return _frame(read_table(path, schema.FORECASTBENCH_ITEMS))


def drop_duplicates(ws: Workspace) -> list[str]:
    """Remove stored ForecastBench events whose market a Polymarket event now holds (a Polymarket build after the
    import); their exclusion rows and items say so. Returns the removed event ids."""
    path = items_path(ws)
    if not path.exists():
        return []
    conditions = polymarket_conditions(ws)
    items = _frame(read_table(path, schema.FORECASTBENCH_ITEMS)).to_dicts()
    dup = {i["event_id"]: conditions[i["id"].lower()] for i in items
           if i["source"] == "polymarket" and i["kind"] == "market" and i["event_id"] is not None
           and i["id"].lower() in conditions and i["status"] != "duplicate"}
    if not dup:
        return []
    ids = pl.DataFrame({"event_id": list(dup)}, schema={"event_id": pl.Utf8})
    for name, sch in EVENT_TABLES.items():
        frame = _stored(ws, name)
        if frame is None:
            continue
        frame = frame.join(ids, on="event_id", how="anti")
        if name == "excluded":
            extra = pl.DataFrame([{"event_id": e, "stage": "parse", "reason": "duplicate",
                                   "detail": f"kept {pm} (Polymarket build: daily price history)"}
                                  for e, pm in sorted(dup.items())], schema=frame.schema)
            frame = pl.concat([frame, extra]).sort("event_id", maintain_order=True)
        atomic_write_table(ws.events_table(name), frame.to_arrow(), sch)
    for i in items:
        if i["event_id"] in dup:
            i["status"], i["forecast_date"] = "duplicate", None
            i["detail"] = f"the Polymarket build's event {dup[i['event_id']]} holds this market"
    _due_values(ws, items)
    atomic_write_table(path, pa.Table.from_pylist(items, schema=schema.FORECASTBENCH_ITEMS),
                       schema.FORECASTBENCH_ITEMS)
    log.info("forecastbench: %d event(s) dropped as duplicates of Polymarket events", len(dup))
    return sorted(dup)
