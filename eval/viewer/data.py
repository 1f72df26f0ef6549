"""The run viewer's data (the contract: the run, the events page, a question page), read from a run directory only.

    view = RunView.open("WS/runs/RUN", compare="WS/runs/OTHER")
    view.run_summary()      # GET api/run
    view.events()           # GET api/events: one row per question with per-series means
    view.question("pm-1")   # GET api/question?id=pm-1 (UnknownQuestion for an id the run does not hold)

Everything is read, nothing written, except the index of the parts (`index.py`, `viewer_index.parquet`). Where the
data come from:

- the run's `run.json` (agents, mode, workspace), `forecasts.parquet` (metrics and, in world runs, the forecasts of a
  question), `events.parquet` and `market.parquet` (the market's Brier on the forecast dates);
- the workspace's (`run.json` "workspace", else the run directory's grandparent) `events/events.parquet` (source,
  description, close day, d_known, exposure day) and `events/beliefs.parquet` (the market's daily beliefs), both
  read once per view, filtered to the run's events as they are read;
- the parts (`parts/<agent>/<event>/r<k>.json`): an episode part (the runner, the MCP harness, a trainer's session,
  whose part holds one forecast date) is read whole for its question; a world part only at the byte ranges the index
  attributes to the question (its calls, the steps they produced, its notebook entries, and an LLM agent's chats of
  the days it was read about);
- the workspace's search index (`WS/index`, `ArticleText`) for what an observation cut to its cap left out (search
  hits dropped, an article body shortened): such hits and articles are marked "cut".

Missing or odd data never raise: what could not be shown is said in the response's `notes`.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from forecast_env.errors import RunError
from forecast_env.eval.viewer.index import IndexResult, load_index, read_ranges

#: Characters of an opened article's text kept in the question page.
EXCERPT_CHARS = 600
#: Question pages kept in memory (the server answers a page again without reading its parts).
CACHE_SIZE = 32
#: doc id -> the article's fields (`ArticleText.get`).
Lookup = Callable[[Any], "dict[str, Any] | None"]
#: Run engines that record a trainer's or a rollout service's sessions (`mode` "training").
TRAINING_ENGINES = ("trl", "skyrl", "openenv", "verifiers")
_EVENT_COLUMNS = ("event_id", "question", "description", "options", "type", "category", "label", "split", "source",
                  "start_day", "close_day", "d_known", "exposure_day")
_SOURCE_OF_PREFIX = {"pm-": "polymarket", "q-": "questions", "g-": "generated", "fb-": "forecastbench"}


class UnknownQuestion(KeyError):
    """An event id that no run of the view holds."""


class ArticleText:
    """The title, url, day and text of an article by doc id, from the workspace's search index (`WS/index`: the doc
    id lookup arrays and the memory-mapped month text shards, retrieval/layout.py). Fills in what an observation cut
    to its cap left out (search hits dropped, an article body shortened); None for an unknown id or no index."""

    def __init__(self, workspace: Path) -> None:
        self.index_dir = workspace / "index"
        self._ready: bool | None = None
        self._texts: dict[int, pa.Table] = {}
        self._lock = threading.Lock()
        self.offsets: list[int] = []
        self.months: list[str] = []
        self.doc_hash: Any = None
        self.doc_row: Any = None

    def _open(self) -> bool:
        import numpy as np

        if self._ready is None:
            try:
                manifest = json.loads((self.index_dir / "manifest.json").read_text())
                self.months = [str(m["month"]) for m in manifest["months"]]
                self.offsets = [0]
                for m in manifest["months"]:
                    self.offsets.append(self.offsets[-1] + int(m["rows"]))
                self.doc_hash = np.load(self.index_dir / "rows" / "doc_hash.npy", mmap_mode="r")
                self.doc_row = np.load(self.index_dir / "rows" / "doc_row.npy", mmap_mode="r")
                self._ready = True
            except (OSError, ValueError, KeyError, TypeError):
                self._ready = False
        return bool(self._ready)

    def _text(self, m: int) -> pa.Table:
        if m not in self._texts:
            path = self.index_dir / "text" / f"{self.months[m]}.arrow"
            self._texts[m] = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
        return self._texts[m]

    def get(self, doc_id: Any) -> dict[str, Any] | None:
        import bisect

        import numpy as np

        from forecast_env.retrieval.layout import doc_hash

        if not isinstance(doc_id, str) or not doc_id:
            return None
        with self._lock:
            if not self._open():
                return None
            try:
                h = np.uint64(doc_hash(doc_id))
                i = int(np.searchsorted(self.doc_hash, h))
                while i < len(self.doc_hash) and self.doc_hash[i] == h:
                    row = int(self.doc_row[i])
                    m = bisect.bisect_right(self.offsets, row) - 1
                    table = self._text(m)
                    local = row - self.offsets[m]
                    if table.column("doc_id")[local].as_py() == doc_id:
                        return {k: table.column(k)[local].as_py() for k in ("doc_id", "day", "title", "url", "body")}
                    i += 1
            except (OSError, ValueError, IndexError, KeyError, pa.ArrowException):
                return None
        return None


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------


def _num(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def finite(obj: Any) -> Any:
    """`obj` with every non-finite float (NaN, inf) as None: the contract's JSON has no NaN."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite(v) for v in obj]
    return obj


def _int(x: Any) -> int | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def _day(x: Any) -> str | None:
    if x is None:
        return None
    if isinstance(x, (date, datetime)):
        return x.isoformat()[:10]
    text = str(x)[:10]
    return text or None


def _text(x: Any) -> str | None:
    return None if x is None else str(x)


def _host(url: Any) -> str | None:
    if not isinstance(url, str) or not url:
        return None
    try:
        host = urlparse(url).hostname or ""
    except ValueError:
        return None
    return host[4:] if host.startswith("www.") else (host or None)


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


def _args(call: Mapping[str, Any]) -> dict[str, Any]:
    args = _loads(call.get("args_json"))
    return args if isinstance(args, dict) else {}


def _mean(values: Iterable[Any]) -> float | None:
    vals = [v for v in (_num(x) for x in values) if v is not None]
    return sum(vals) / len(vals) if vals else None


def _sum(values: Iterable[Any]) -> Any:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def run_mode(record: Mapping[str, Any]) -> str:
    """`world`, `training` (a trainer's or a rollout service's sessions) or `episode`."""
    if record.get("mode") == "world":
        return "world"
    if record.get("unit") is not None or record.get("engine") in TRAINING_ENGINES:
        return "training"
    return "episode"


def _read_parquet(path: Path, columns: Sequence[str] | None = None,
                  ids: Sequence[str] | None = None) -> pl.DataFrame | None:
    """A Parquet file (only `columns` that it has; only rows of `ids`, filtered as it is read), None when missing or
    unreadable."""
    if not path.exists():
        return None
    try:
        names = pq.read_schema(path).names
        cols = [c for c in columns if c in names] if columns is not None else None
        filters = [("event_id", "in", list(ids))] if ids is not None and "event_id" in names else None
        table = pq.read_table(path, columns=cols, filters=filters)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return cast(pl.DataFrame, pl.from_arrow(table))


# ---------------------------------------------------------------------------------------------
# one run of the view
# ---------------------------------------------------------------------------------------------


@dataclass
class _Run:
    """One run directory of the view: its record, tables and index (built on the first question)."""

    run_dir: Path
    record: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    _index: IndexResult | None = None
    _forecasts: pl.DataFrame | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def run_id(self) -> str:
        return str(self.record.get("run_id") or self.run_dir.name)

    @property
    def mode(self) -> str:
        return run_mode(self.record)

    @property
    def workspace(self) -> Path:
        ws = self.record.get("workspace")
        if ws and (Path(ws) / "events").is_dir():
            return Path(ws)
        return self.run_dir.parent.parent  # a copied run: beside its workspace's runs/

    def agents(self) -> list[str]:
        """The run's agent labels: the record's order, then any other the forecasts or parts carry."""
        out: list[str] = []
        for spec in self.record.get("agents") or []:
            label = spec.get("label") or spec.get("name") if isinstance(spec, Mapping) else spec
            if isinstance(label, str) and label not in out:
                out.append(label)
        fc = self.forecasts()
        for label in sorted(set(fc["agent"].to_list())) if "agent" in fc.columns else []:
            if label not in out:
                out.append(label)
        if not out:
            parts = self.run_dir / "parts"
            out = sorted(p.name for p in parts.iterdir() if p.is_dir()) if parts.is_dir() else []
        return out

    def forecasts(self) -> pl.DataFrame:
        """forecasts.parquet (empty, with a note, when the run has none yet)."""
        with self._lock:
            if self._forecasts is None:
                fc = _read_parquet(self.run_dir / "forecasts.parquet")
                if fc is None:
                    self.notes.append(f"{self.run_dir}: no readable forecasts.parquet (the run is not consolidated "
                                      "yet?); its metrics are not shown")
                    fc = pl.DataFrame(schema={"agent": pl.String, "event_id": pl.String, "rollout": pl.Int32,
                                              "step": pl.Int32})
                self._forecasts = fc
            return self._forecasts

    def event_ids(self) -> list[str]:
        ids: dict[str, None] = dict.fromkeys(str(x) for x in self.record.get("event_ids") or [])
        ev = _read_parquet(self.run_dir / "events.parquet", ["event_id"])
        if ev is not None:
            ids.update(dict.fromkeys(ev["event_id"].to_list()))
        fc = self.forecasts()
        if "event_id" in fc.columns:
            ids.update(dict.fromkeys(fc["event_id"].unique(maintain_order=True).to_list()))
        return list(ids)

    def index(self) -> pl.DataFrame:
        """The parts' index (`index.py`), built or read on the first call."""
        with self._lock:
            if self._index is None:
                ids = [str(x) for x in self.record.get("event_ids") or []]
                labels = [str(s.get("label") or s.get("name")) for s in self.record.get("agents") or []
                          if isinstance(s, Mapping)]
                self._index = load_index(self.run_dir, labels, ids, world=self.mode == "world")
                self.notes.extend(self._index.notes)
                problems = self._index.table.filter(pl.col("kind").is_in(["skip", "warn"]))
                self.notes.extend(f"run {self.run_id}: {n}" for n in problems["note"].to_list())
            return self._index.table


def _resolve_run_dir(run: str | Path, near: Path | None = None) -> Path:
    path = Path(run)
    if not path.is_dir() and near is not None and (near.parent / str(run)).is_dir():
        path = near.parent / str(run)  # a run id beside the main run
    if not (path / "run.json").exists() and not (path / "forecasts.parquet").exists():
        raise RunError(f"{path}: not a run directory (no run.json, no forecasts.parquet); give WS/runs/<run_id>, or "
                       "--workspace WS with --run-id ID")
    return path


def _open_run(run_dir: Path) -> _Run:
    try:
        record = json.loads((run_dir / "run.json").read_text())
        notes: list[str] = []
    except (OSError, ValueError) as exc:
        record, notes = {}, [f"{run_dir}/run.json: unreadable ({exc}); agents and mode read from the tables"]
    if not isinstance(record, dict):
        record = {}
    return _Run(run_dir, record, notes)


# ---------------------------------------------------------------------------------------------
# the view
# ---------------------------------------------------------------------------------------------


@dataclass
class Series:
    """One (run, agent) of the view."""

    key: str
    run: _Run
    agent: str
    label: str

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "run_id": self.run.run_id, "agent": self.agent, "label": self.label}


class RunView:
    """A run (and optionally a second one to compare) as the viewer shows it; see the module docstring."""

    def __init__(self, runs: list[_Run], events: Sequence[str] | None = None) -> None:
        self.runs = runs
        self.series: list[Series] = []
        for n, run in enumerate(runs):
            for agent in run.agents():
                label = agent if n == 0 else f"{agent} ({run.run_id})"
                self.series.append(Series(f"s{len(self.series)}", run, agent, label))
        ids: dict[str, None] = {}
        for run in runs:
            ids.update(dict.fromkeys(run.event_ids()))
        if events is not None:
            unknown = [e for e in events if e not in ids]
            if unknown:
                raise RunError(f"--events: {', '.join(unknown[:5])} not in run {runs[0].run_id}")
            ids = dict.fromkeys(events)
        self._ids = list(ids)
        self._id_set = set(ids)
        self._meta: dict[str, dict[str, Any]] | None = None
        self._listing: list[dict[str, Any]] | None = None
        self._beliefs: pl.DataFrame | None = None
        self._cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._texts: dict[Path, ArticleText] = {}
        self._lock = threading.RLock()

    @classmethod
    def open(cls, run_dir: str | Path, compare: str | Path | None = None,
             events: Sequence[str] | None = None) -> RunView:
        """The view of the run in `run_dir`; `compare`: a second run (its directory, or its id beside the first);
        `events`: only these questions."""
        main = _resolve_run_dir(run_dir)
        runs = [_open_run(main)]
        if compare is not None:
            other = _resolve_run_dir(compare, near=main)
            if other.resolve() == main.resolve():
                raise RunError(f"--compare {compare}: the same run as --run")
            runs.append(_open_run(other))
        return cls(runs, events)

    def prepare(self) -> None:
        """Build (or read) every run's index of its parts now rather than at the first question."""
        for run in self.runs:
            run.index()

    @property
    def event_ids(self) -> list[str]:
        return list(self._ids)

    @property
    def notes(self) -> list[str]:
        return [n for run in self.runs for n in run.notes]

    # -- the run ------------------------------------------------------------------------------------

    def run_summary(self) -> dict[str, Any]:
        """GET api/run."""
        main = self.runs[0]
        meta = self._events_meta()
        rec = main.record
        return {
            "run_id": main.run_id, "mode": main.mode, "workspace": str(main.workspace),
            "series": [s.as_dict() for s in self.series],
            "compare_run_id": self.runs[1].run_id if len(self.runs) > 1 else None,
            "splits": sorted({str(m["split"]) for m in meta.values() if m.get("split")}),
            "categories": sorted({str(m["category"]) for m in meta.values() if m.get("category")}),
            "n_events": len(self._ids),
            "created": _created(rec, main.run_id),
            "static": False,
            "notes": self.notes,
        }

    # -- the events page ---------------------------------------------------------------------------

    def events(self) -> dict[str, Any]:
        """GET api/events: one row per question with each series' means over its scored forecasts (computed once;
        a new list each call, so a caller may change its rows)."""
        with self._lock:
            if self._listing is None:
                self._listing = self._events_listing()
            return {"events": [dict(r) for r in self._listing]}

    def _events_listing(self) -> list[dict[str, Any]]:
        meta = self._events_meta()
        metrics: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for s in self.series:
            for row in _series_metrics(s.run.forecasts(), s.agent).iter_rows(named=True):
                metrics[row["event_id"]][s.key] = {k: row[k] for k in ("brier", "log_vs_market", "accuracy", "gap")} \
                    | {"n": row["n"]}
        market = self._market_briers()
        rows = []
        for eid in self._ids:
            m = meta.get(eid, {})
            options = list(m.get("options") or [])
            rows.append({
                "event_id": eid, "question": _text(m.get("question")), "split": _text(m.get("split")),
                "category": _text(m.get("category")), "source": _text(m.get("source")),
                "type": _text(m.get("type")) or ("binary" if len(options) == 2 else "multi" if options else None),
                "n_options": len(options), "label": _text(m.get("label")), "close_day": _day(m.get("close_day")),
                "data_file": None, "metrics": metrics.get(eid, {}), "market_brier": market.get(eid),
            })
        return cast(list[dict[str, Any]], finite(rows))

    def _market_briers(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for run in reversed(self.runs):  # the main run's market wins
            mk = _read_parquet(run.run_dir / "market.parquet", ["event_id", "brier"])
            if mk is None or mk.height == 0:
                continue
            agg = mk.group_by("event_id").agg(pl.col("brier").mean())
            out.update({e: _num(b) for e, b in agg.iter_rows()})
        return out

    def _events_meta(self) -> dict[str, dict[str, Any]]:
        """Per event id: the workspace's events row (else the run's), read once, filtered to the view's events."""
        with self._lock:
            if self._meta is not None:
                return self._meta
            meta: dict[str, dict[str, Any]] = {}
            wanted = set(self._ids)
            for run in self.runs:
                missing = [e for e in self._ids if e not in meta]
                if not missing:
                    break
                ev = _read_parquet(run.workspace / "events" / "events.parquet", _EVENT_COLUMNS, missing)
                if ev is not None:
                    meta.update({r["event_id"]: r for r in ev.iter_rows(named=True) if r["event_id"] in wanted})
            for run in self.runs:
                missing = [e for e in self._ids if e not in meta]
                if not missing:
                    break
                ev = _read_parquet(run.run_dir / "events.parquet", None, missing)
                if ev is not None:
                    meta.update({r["event_id"]: r for r in ev.iter_rows(named=True) if r["event_id"] in wanted})
            lacking = [e for e in self._ids if e not in meta]
            if lacking:
                self.runs[0].notes.append(f"{len(lacking)} event(s) not found in the workspace's or the run's events "
                                          f"table (e.g. {lacking[0]}); their text is not shown")
            for eid, m in meta.items():
                if not m.get("source"):
                    m["source"] = next((v for k, v in _SOURCE_OF_PREFIX.items() if eid.startswith(k)), None)
            self._meta = meta
            return meta

    # -- a question --------------------------------------------------------------------------------

    def question(self, event_id: str) -> dict[str, Any]:
        """GET api/question?id=EVENT (UnknownQuestion when no run of the view holds it)."""
        if not isinstance(event_id, str) or event_id not in self._id_set:
            raise UnknownQuestion(event_id)
        with self._lock:
            if event_id in self._cache:
                self._cache.move_to_end(event_id)
                return self._cache[event_id]
        notes: list[str] = []
        meta = self._events_meta().get(event_id, {})
        event = _event_block(event_id, meta)
        series: list[dict[str, Any]] = []
        out: dict[str, Any] = {"event": event, "market": self._market(event_id, meta), "series": series,
                               "notes": notes}
        for s in self.series:
            try:
                rollouts = self._rollouts(s, event_id, notes)
            except Exception as exc:  # odd data: the page still shows the rest
                notes.append(f"{s.label}: could not be read ({type(exc).__name__}: {str(exc)[:200]})")
                rollouts = []
            if rollouts:
                series.append({**s.as_dict(), "rollouts": rollouts})
        out = finite(out)
        with self._lock:
            self._cache[event_id] = out
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return out

    def _market(self, event_id: str, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
        beliefs = self._beliefs_table()
        sub = beliefs.filter(pl.col("event_id") == event_id)
        if sub.height == 0:
            return []
        first, last = meta.get("start_day"), meta.get("close_day")
        if isinstance(first, date):
            sub = sub.filter(pl.col("day") >= first)
        if isinstance(last, date):
            sub = sub.filter(pl.col("day") <= last)
        order = {o: k for k, o in enumerate(meta.get("options") or [])}
        days: dict[str, dict[str, float]] = {}
        for _eid, day, option, belief in sub.sort("day").iter_rows():
            p = _num(belief)
            if p is not None:
                days.setdefault(_day(day) or "", {})[option] = p
        return [{"date": d, "probs": dict(sorted(p.items(), key=lambda kv: order.get(kv[0], len(order))))}
                for d, p in days.items()]

    def _beliefs_table(self) -> pl.DataFrame:
        """The workspace's daily beliefs of the view's events (non-null), read once."""
        with self._lock:
            if self._beliefs is None:
                frames = []
                missing = set(self._ids)
                seen: set[Path] = set()
                for run in self.runs:
                    path = run.workspace / "events" / "beliefs.parquet"
                    if path in seen or not missing:
                        continue
                    seen.add(path)
                    b = _read_parquet(path, ["event_id", "day", "option", "belief"], sorted(missing))
                    if b is not None and b.height:
                        b = b.filter(pl.col("belief").is_not_null())
                        frames.append(b)
                        missing -= set(b["event_id"].unique().to_list())
                self._beliefs = (pl.concat(frames, how="vertical_relaxed") if frames else
                                 pl.DataFrame(schema={"event_id": pl.String, "day": pl.Date, "option": pl.String,
                                                      "belief": pl.Float64}))
            return self._beliefs

    def _articles(self, workspace: Path) -> ArticleText:
        with self._lock:
            if workspace not in self._texts:
                self._texts[workspace] = ArticleText(workspace)
            return self._texts[workspace]

    def _rollouts(self, s: Series, event_id: str, notes: list[str]) -> list[dict[str, Any]]:
        index = s.run.index()
        problems = index.filter(pl.col("kind").is_in(["skip", "warn"]) & (pl.col("agent") == s.agent)
                                & (pl.col("event_id").is_null() | (pl.col("event_id") == event_id)))
        notes.extend(f"{s.label}: {n}" for n in problems["note"].to_list())
        if s.run.mode == "world":
            return _world_rollouts(s, event_id, index, notes, self._articles(s.run.workspace).get)
        rows = index.filter((pl.col("kind") == "part") & (pl.col("event_id") == event_id)
                            & (pl.col("agent") == s.agent)).sort("rollout")
        out = []
        for row in rows.iter_rows(named=True):
            path = s.run.run_dir / row["part"]
            try:
                with open(path, "rb") as fh:
                    part = json.loads(fh.read())
            except (OSError, ValueError) as exc:
                notes.append(f"{s.label}: {row['part']} unreadable ({type(exc).__name__}: the part is truncated or "
                             "missing); skipped")
                continue
            if not isinstance(part, dict):
                notes.append(f"{s.label}: {row['part']} is not an episode part; skipped")
                continue
            out.append(episode_rollout(part, row["rollout"], notes, f"{s.label}: {row['part']}",
                                       self._articles(s.run.workspace).get))
        if not out:  # no parts (removed, or never written): the forecasts alone
            out = _forecast_only(s, event_id)
        return out


def _created(rec: Mapping[str, Any], run_id: str) -> str | None:
    for key in ("created", "started", "started_at"):
        if rec.get(key):
            return str(rec[key])
    try:
        return datetime.strptime(run_id[:15], "%Y%m%d-%H%M%S").isoformat()
    except ValueError:
        return None


def _event_block(event_id: str, m: Mapping[str, Any]) -> dict[str, Any]:
    known, exposure, close = m.get("d_known"), m.get("exposure_day"), m.get("close_day")
    candidates = [(d, kind) for d, kind in ((known, "d_known"), (exposure, "exposure")) if d is not None]
    public, kind = min(candidates, key=lambda dk: str(dk[0])) if candidates else (close, "close" if close else None)
    return {"event_id": event_id, "question": _text(m.get("question")), "description": _text(m.get("description")),
            "options": [str(o) for o in m.get("options") or []], "label": _text(m.get("label")),
            "split": _text(m.get("split")), "category": _text(m.get("category")), "source": _text(m.get("source")),
            "close_day": _day(close), "public_day": _day(public), "public_day_kind": kind if public else None}


def _series_metrics(fc: pl.DataFrame, agent: str) -> pl.DataFrame:
    """Per event: mean Brier, log score vs market, accuracy and |p(label) - market_prob| over the agent's scored
    forecasts (all rollouts and dates), and their number."""
    empty = pl.DataFrame(schema={"event_id": pl.String, "brier": pl.Float64, "log_vs_market": pl.Float64,
                                 "accuracy": pl.Float64, "gap": pl.Float64, "n": pl.Int64})
    need = {"agent", "event_id", "brier"}
    if fc.height == 0 or not need <= set(fc.columns):
        return empty
    sub = fc.filter((pl.col("agent") == agent) & pl.col("brier").is_not_null())
    if "missing" in sub.columns:
        sub = sub.filter(~pl.col("missing").fill_null(False))
    if sub.height == 0:
        return empty
    for col in ("log_vs_market", "accuracy", "market_prob"):
        if col not in sub.columns:
            sub = sub.with_columns(pl.lit(None, pl.Float64).alias(col))
    if {"options", "probs", "label"} <= set(sub.columns):
        p_label = (sub.with_row_index("_i").select("_i", "options", "probs", "label")
                   .explode("options", "probs").filter(pl.col("options") == pl.col("label"))
                   .group_by("_i").agg(pl.col("probs").first().alias("_p")))
        sub = sub.with_row_index("_i").join(p_label, on="_i", how="left")
    else:
        sub = sub.with_columns(pl.lit(None, pl.Float64).alias("_p"))
    gap = (pl.col("_p") - pl.col("market_prob")).abs()
    out = sub.group_by("event_id").agg(
        pl.col("brier").mean(), pl.col("log_vs_market").mean(), pl.col("accuracy").mean(),
        gap.filter(pl.col("market_prob").is_not_null() & pl.col("_p").is_not_null()).mean().alias("gap"),
        pl.len().cast(pl.Int64).alias("n"))
    return out.with_columns(pl.col(c).fill_nan(None) for c in ("brier", "log_vs_market", "accuracy", "gap"))


# ---------------------------------------------------------------------------------------------
# a question's rollouts
# ---------------------------------------------------------------------------------------------


def _forecast_block(f: Mapping[str, Any]) -> dict[str, Any]:
    options = list(f.get("options") or [])
    probs = list(f.get("probs") or [])
    return {"probs": {str(o): _num(p) for o, p in zip(options, probs)}, "brier": _num(f.get("brier")),
            "accuracy": _num(f.get("accuracy")), "log_vs_market": _num(f.get("log_vs_market")),
            "fallback": _text(f.get("fallback")), "missing": bool(f.get("missing")),
            "raw_report": _text(f.get("raw_report"))}


def call_event(call: Mapping[str, Any], obs: Mapping[str, Any] | None, lookup: Lookup | None = None) -> dict[str, Any]:
    """One tool call as a question page's event, from its tool-call row and the observation it produced; `lookup`
    (doc id -> the article's fields) fills in hits and text the observation's cap cut (those are marked "cut")."""
    tool = call.get("tool")
    args = _args(call)
    error = _text(call.get("error"))
    result = obs.get("tool_result") if isinstance(obs, Mapping) else None
    res = result if isinstance(result, dict) else {}
    if tool == "search":
        raw_hits = res["hits"] if isinstance(res.get("hits"), list) else []
        hits: list[dict[str, Any]] = [{"doc_id": _text(h.get("doc_id")), "date": _day(h.get("day") or h.get("date")),
                 "title": _text(h.get("title")), "source": _host(h.get("url")), "url": _text(h.get("url"))}
                for h in raw_hits if isinstance(h, Mapping)]
        shown = {h["doc_id"] for h in hits}
        for hit_id in [str(d) for d in call.get("result_doc_ids") or []]:
            if hit_id not in shown:  # cut from the observation: the store's record of it
                art = (lookup(hit_id) if lookup else None) or {}
                hits.append({"doc_id": hit_id, "date": _day(art.get("day")), "title": _text(art.get("title")),
                             "source": _host(art.get("url")), "url": _text(art.get("url")), "cut": True})
        return {"kind": "search", "query": _text(args.get("query")), "mode": _text(args.get("mode")),
                "k": _int(args.get("k")), "hits": hits, "error": error}
    if tool == "open_article":
        doc_id = _text(res.get("doc_id") or args.get("doc_id"))
        body = res.get("body") if isinstance(res.get("body"), str) else res.get("text")
        event: dict[str, Any] = {"kind": "open", "doc_id": doc_id, "title": _text(res.get("title")),
                 "date": _day(res.get("day") or res.get("date")), "source": _host(res.get("url")),
                 "url": _text(res.get("url")), "excerpt": body[:EXCERPT_CHARS] if isinstance(body, str) else None,
                 "error": error}
        short = not isinstance(body, str) or (res.get("body_truncated") and len(body) < EXCERPT_CHARS)
        if error is None and short and lookup is not None:
            art = lookup(doc_id) or {}
            if art:
                event.update(title=event["title"] or _text(art.get("title")),
                             date=event["date"] or _day(art.get("day")), url=event["url"] or _text(art.get("url")),
                             excerpt=str(art.get("body") or "")[:EXCERPT_CHARS], cut=True)
                event["source"] = _host(event["url"])
        return event
    if tool == "notebook_add":
        added: dict[str, Any] = res["added"] if isinstance(res.get("added"), dict) else {}
        return {"kind": "note_add", "entry_id": _int(added.get("entry_id")),
                "claim": _text(added.get("claim") or args.get("claim")),
                "date_observed": _text(added.get("date_observed") or args.get("date_observed")),
                "doc_ids": [str(d) for d in (added.get("doc_ids") or args.get("doc_ids") or [])],
                "question_ids": args.get("question_ids"), "error": error}
    if tool == "notebook_supersede":
        return {"kind": "note_supersede", "entry_id": _int(args.get("entry_id")), "reason": _text(args.get("reason")),
                "error": error}
    return {"kind": "other", "tool": _text(tool), "args": _text(call.get("args_json")), "error": error}


def _notebook_entry(n: Mapping[str, Any]) -> dict[str, Any]:
    return {"entry_id": _int(n.get("entry_id")), "claim": _text(n.get("claim")),
            "date_observed": _text(n.get("date_observed")), "status": _text(n.get("status")),
            "created_step": _int(n.get("created_step")), "doc_ids": [str(d) for d in n.get("doc_ids") or []],
            "superseded_reason": _text(n.get("superseded_reason"))}


def _flat_message(m: Any) -> dict[str, Any]:
    if not isinstance(m, Mapping):
        return {"role": "unknown", "content": json.dumps(m, default=str)}
    content = m.get("content")
    if not isinstance(content, str):
        content = json.dumps(content, default=str) if content is not None else ""
    calls = m.get("tool_calls")
    if calls:
        content = (content + "\n" if content else "") + "tool calls: " + json.dumps(calls, default=str)
    return {"role": str(m.get("role")), "content": content}


def _telemetry(calls: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], Any]:
    return ({"prompt": _sum(_int(c.get("prompt_tokens")) for c in calls),
             "completion": _sum(_int(c.get("completion_tokens")) for c in calls)},
            _sum(_num(c.get("cost_usd")) for c in calls))


def episode_rollout(part: Mapping[str, Any], rollout: int, notes: list[str], where: str,
                    lookup: Lookup | None = None) -> dict[str, Any]:
    """One episode part (one event, one rollout; a trainer's part may hold one date) as the contract's rollout."""
    from forecast_env.eval.runs.export import split_chats

    forecasts = sorted((f for f in part.get("forecasts") or [] if isinstance(f, Mapping)),
                       key=lambda f: _int(f.get("step")) or 0)
    calls = [c for c in part.get("tool_calls") or [] if isinstance(c, Mapping)]
    steps = [s for s in part.get("steps") or [] if isinstance(s, Mapping)]
    observations = [_loads(s.get("observation")) for s in steps]
    aligned = len(steps) == len(calls) + 1
    if calls and not aligned:
        notes.append(f"{where}: {len(steps)} steps for {len(calls)} tool calls; tool results are not shown")
    date_of: dict[int, str | None] = {}
    total_of: dict[int, int | None] = {}
    for f in forecasts:
        step = _int(f.get("step"))
        if step is not None:
            date_of[step], total_of[step] = _day(f.get("forecast_date")), _int(f.get("steps_total"))
    for o in observations:
        if isinstance(o, dict) and _int(o.get("step")) is not None:
            step = cast(int, _int(o.get("step")))
            date_of.setdefault(step, _day(o.get("forecast_date")))
            total_of.setdefault(step, _int(o.get("steps_total")))
    by_step = {(_int(f.get("step")) or 0): f for f in forecasts}
    events: dict[int, list[dict[str, Any]]] = defaultdict(list)
    calls_of: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    acted: list[int] = []
    for i, call in enumerate(calls):
        step = _int(call.get("step")) or 0
        obs = observations[i + 1] if aligned else None
        events[step].append(call_event(call, obs if isinstance(obs, dict) else None, lookup))
        calls_of[step].append(call)
        if step not in acted:
            acted.append(step)
    notebook: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for n in part.get("notebook") or []:
        if isinstance(n, Mapping) and _int(n.get("step")) is not None:
            notebook[cast(int, _int(n.get("step")))].append(_notebook_entry(n))
    messages: dict[int, list[dict[str, Any]]] = {}
    raw_messages = part.get("messages")
    if isinstance(raw_messages, list) and raw_messages:
        chats = split_chats(raw_messages)
        if chats and len(chats) == len(acted):
            messages = {step: [_flat_message(m) for m in chat] for step, chat in zip(acted, chats)}
        else:
            first = acted[0] if acted else min(by_step, default=0)
            messages = {first: [_flat_message(m) for m in raw_messages]}
            notes.append(f"{where}: the agent's transcript is not one chat per forecast date; all of it is shown on "
                         "the first date")
    dates: list[dict[str, Any]] = []
    for step in sorted(set(by_step) | set(events)):  # dates forecast or acted on (not the next one merely shown)
        tokens, cost = _telemetry(calls_of.get(step, []))
        fr = by_step.get(step)
        dates.append({"date": date_of.get(step), "step": step, "steps_total": total_of.get(step),
                      "forecast": _forecast_block(fr) if fr is not None else None, "events": events.get(step, []),
                      "notebook": notebook.get(step, []), "messages": messages.get(step),
                      "tokens": tokens, "cost_usd": cost})
    out: dict[str, Any] = {"rollout": rollout, "dates": dates}
    if part.get("unit_step") is not None:
        out["unit_step"] = _int(part.get("unit_step"))
    if part.get("complete") is False:
        out["complete"] = False
    return out


def _forecast_only(s: Series, event_id: str) -> list[dict[str, Any]]:
    fc = s.run.forecasts()
    if fc.height == 0 or "agent" not in fc.columns:
        return []
    sub = fc.filter((pl.col("agent") == s.agent) & (pl.col("event_id") == event_id))
    out = []
    for (rollout,), grp in sorted(sub.group_by(["rollout"]), key=lambda kv: kv[0][0]):
        dates: list[dict[str, Any]] = [{"date": _day(f.get("forecast_date")), "step": _int(f.get("step")),
                  "steps_total": _int(f.get("steps_total")), "forecast": _forecast_block(f), "events": [],
                  "notebook": [], "messages": None, "tokens": {"prompt": None, "completion": None}, "cost_usd": None}
                 for f in grp.sort("step").iter_rows(named=True)]
        out.append({"rollout": int(cast(int, rollout)), "dates": dates})
    return out


def _world_rollouts(s: Series, event_id: str, index: pl.DataFrame, notes: list[str],
                    lookup: Lookup | None = None) -> list[dict[str, Any]]:
    """A world run's rollouts of one question: its scored dates (forecasts.parquet), and on each date tau_t the
    calls attributed to the question on the days after tau_{t-1} up to tau_t (index.py), read at their byte ranges."""
    rows = index.filter((pl.col("event_id") == event_id) & (pl.col("agent") == s.agent)
                        & pl.col("kind").is_in(["call", "note"]))
    fc = s.run.forecasts()
    if fc.height and {"agent", "event_id"} <= set(fc.columns):
        fc = fc.filter((pl.col("agent") == s.agent) & (pl.col("event_id") == event_id))
    rollouts = sorted(set(rows["rollout"].to_list()) | (set(fc["rollout"].to_list()) if fc.height else set()))
    out = []
    for rollout in rollouts:
        mine = rows.filter(pl.col("rollout") == rollout).sort("pos")
        forecasts = fc.filter(pl.col("rollout") == rollout).sort("step").to_dicts() if fc.height else []
        calls: list[tuple[str | None, dict[str, Any], dict[str, Any]]] = []
        entries: dict[int, tuple[str | None, dict[str, Any]]] = {}
        chats: dict[str, list[dict[str, Any]]] = {}  # date -> that day's chat
        for (part_rel,), grp in mine.group_by(["part"]):
            grp = grp.sort("kind", "pos")
            days = {r["day"] for r in grp.iter_rows(named=True) if r["kind"] == "call"}
            chat_rows = index.filter((pl.col("kind") == "chat") & (pl.col("part") == part_rel)
                                     & pl.col("day").is_in(sorted(days)))
            ranges: list[tuple[int, int]] = []
            for r in grp.iter_rows(named=True):
                ranges.append((r["start"], r["end"]))
                if r["kind"] == "call" and r["step_start"] is not None:
                    ranges.append((r["step_start"], r["step_end"]))
            ranges += [(r["start"], r["end"]) for r in chat_rows.iter_rows(named=True)]
            try:
                chunks = iter(read_ranges(s.run.run_dir / str(part_rel), ranges))
                for r in grp.iter_rows(named=True):
                    item = json.loads(next(chunks))
                    if r["kind"] == "note":
                        if isinstance(item, dict):
                            entries[_int(item.get("entry_id")) or 0] = (r["date"], item)
                        continue
                    step = json.loads(next(chunks)) if r["step_start"] is not None else None
                    obs = _loads(step.get("observation")) if isinstance(step, dict) else None
                    calls.append((r["date"], item, obs if isinstance(obs, dict) else {}))
                for r in chat_rows.iter_rows(named=True):
                    chat = json.loads(b"[" + next(chunks) + b"]")
                    chats[str(r["date"])] = [_flat_message(m) for m in chat]
            except (OSError, ValueError, StopIteration) as exc:
                notes.append(f"{s.label}: {part_rel} unreadable at its indexed ranges ({type(exc).__name__}; the part "
                             "changed since the index was built?); its calls are not shown")
        dates: list[dict[str, Any]] = []
        prev: str | None = None
        for f in forecasts:
            tau = _day(f.get("forecast_date"))
            here = [(d, c, o) for d, c, o in calls if d is not None and tau is not None and d <= tau
                    and (prev is None or d > prev)]
            tokens, cost = _telemetry([c for _, c, _ in here])
            said = [m for day in sorted({d for d, _, _ in here if d is not None}) for m in chats.get(day, [])]
            notebook = [{**_notebook_entry(e)} for d, e in sorted(entries.values(), key=lambda de: _int(de[1].get(
                "entry_id")) or 0) if d is not None and tau is not None and d <= tau]
            dates.append({"date": tau, "step": _int(f.get("step")), "steps_total": _int(f.get("steps_total")),
                          "forecast": _forecast_block(f), "events": [{**call_event(c, o, lookup), "day": d} for d, c, o in here],
                          "notebook": notebook, "messages": said or None, "tokens": tokens, "cost_usd": cost})
            prev = tau
        if entries:
            notes.append(f"{s.label}: a world run records its notebook once, at the world's end; entry statuses "
                         "are as of then")
        late = [d for d, _, _ in calls if d is not None and (prev is None or d > prev)]
        if late:
            notes.append(f"{s.label} rollout {rollout}: {len(late)} call(s) for this question after its last scored "
                         "date are not shown")
        out.append({"rollout": int(rollout), "dates": dates})
    return out
