"""Date-restricted search over the indexed corpus (docs/design.md §3): `Searcher`, `Hit`, `Article`.

Only articles with `day <= as_of` are candidates, and the restriction is applied before ranking:
rows are numbered globally in (day, doc_id) order, so the eligible set is a row prefix; dense search
scans full month shards before the date's month and a row range of that month; BM25 statistics are
computed over the prefix.

Hiding (docs/design.md §3.hiding): the Searcher is the one place that decides. Articles carrying a
flag named in `hide` (default: every flag, `leak_flag` and `market_quote`; an environment passes the
set its `env.hide_leak_flagged` / `env.hide_market_quotes` keys select) are removed before ranking in
every mode: from hits, from the BM25 statistics (N, df, avgdl) and from dense
candidates, from `day_counts`, and from `open_article`, which refuses an unknown, a not-yet-visible
and a hidden id with one error type and one message.

Index layout: the public contract in `forecast_env.retrieval.layout` (written by
`forecast_env.corpus_build.index.build_index`).

Threads: one Searcher may serve many threads at once (the servers' concurrent sessions share one).
What it opens lazily (text shards, the query encoder, its thread pools) is opened under a lock, once;
the query vector cache locks itself; the memory-mapped arrays and FAISS indexes are only read. `close`
must not race searches. `search_many` answers many (query, date) pairs at once with exactly the hits
and float scores that one `search` each returns (docs/design.md §3).
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from forecast_env.config import default_config, load_config
from forecast_env.enums import SEARCH_MODES
from forecast_env.errors import (
    ArticleUnavailableError,
    ConfigError,
    IndexMissingError,
    QueryError,
    WorkspaceError,
)
from forecast_env.retrieval.bm25 import BM25Index
from forecast_env.retrieval.dense import DenseShards, Embedder
from forecast_env.retrieval.hybrid import rrf
from forecast_env.retrieval.layout import EPOCH, REBUILD, day_number, doc_hash, query_embedding
from forecast_env.retrieval.tokenize import tokenize
from forecast_env.timeparse import parse_day as _read_day

MODES = SEARCH_MODES
#: Article flags that `hide` may name, with the per-row array the index stores for each.
HIDE_FLAGS = {"leak_flag": "leak.npy", "market_quote": "market_quote.npy"}


@dataclass
class Hit:
    """One search result."""

    doc_id: str
    day: date
    title: str
    url: str
    summary: str
    score: float
    rank: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["day"] = self.day.isoformat()
        return d


@dataclass
class Article:
    """One article opened by doc id."""

    doc_id: str
    day: date
    title: str
    url: str
    summary: str
    body: str
    t: datetime | None
    t_source: str
    leak_flag: bool
    market_quote: bool

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["day"] = self.day.isoformat()
        d["t"] = self.t.isoformat() if self.t is not None else None
        return d


def parse_day(value: date | datetime | str, what: str = "as_of") -> date:
    """A date from a `date`, `datetime` or ISO `YYYY-MM-DD` string (QueryError otherwise)."""
    if isinstance(value, np.datetime64):
        return value.astype("datetime64[D]").item()
    day = _read_day(value) if isinstance(value, (date, str)) else None
    if day is not None:
        return day
    raise QueryError(f"{what} = {value!r} is not a date; give a datetime.date or an ISO string like 2025-06-30")


def read_index_manifest(index_dir: Path) -> dict[str, Any]:
    path = index_dir / "manifest.json"
    if not path.exists():
        raise IndexMissingError(f"{index_dir.parent}: no search index at {index_dir}; build it with "
                                f"`forecast-env index build --workspace {index_dir.parent}`")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise WorkspaceError(f"{path}: corrupt index manifest ({exc}); rebuild with `{REBUILD}`") from exc


def open_text(path: Path) -> pa.Table:
    """Memory-map one month's Arrow IPC text copy."""
    try:
        return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    except (OSError, pa.ArrowException) as exc:
        raise WorkspaceError(f"{path}: unreadable article text shard ({exc}); rebuild with `{REBUILD}`") from exc


def load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise WorkspaceError(f"{path}: unreadable index file ({exc}); rebuild with `{REBUILD}`") from exc


def hidden_flags(value: bool | Iterable[str]) -> tuple[str, ...]:
    """The article flags to hide: True = all of HIDE_FLAGS, False = none, or the names given."""
    if isinstance(value, bool):
        return tuple(HIDE_FLAGS) if value else ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(f"hide = {value!r}: give a list of article flags out of "
                          f"{', '.join(HIDE_FLAGS)} (an empty list shows everything)")
    names = tuple(dict.fromkeys(value))
    unknown = [n for n in names if n not in HIDE_FLAGS]
    if unknown:
        raise ConfigError(f"hide names {unknown[0]!r}, which is not an article flag; "
                          f"allowed: {', '.join(HIDE_FLAGS)}")
    return names


def search_threads(value: Any, months: list[dict[str, Any]]) -> int:
    """Threads one search uses (`retrieval.search_threads`): the value, or with 0 / None (auto) the
    machine's cores up to 4 when the index has approximate months (a large corpus, where one query
    scans many months), else 1 (small corpora gain nothing). Auto stays within the process's compute
    thread budget, `OMP_NUM_THREADS` when set: the runner's and the builds' pool workers (and Ray
    actors) get 1, so many env processes sharing the cores do not multiply threads."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ConfigError(f"retrieval.search_threads = {value!r}: give a whole number of threads (0: auto)")
    if value:
        return int(value)
    if not any(m.get("kind") == "ivf" for m in months):
        return 1
    n = min(4, os.cpu_count() or 1)
    budget = os.environ.get("OMP_NUM_THREADS", "")
    if budget.strip().isdigit() and int(budget) > 0:
        n = min(n, int(budget))
    return max(1, n)


_MAPPED = ("bm25", "dense", "days", "flags", "doc_hash", "doc_row", "visible")


class Searcher:
    """Read-only, date-restricted access to an indexed workspace (many processes may open one index)."""

    def __init__(self, root: Path, manifest: dict[str, Any], config: dict[str, Any], hide: tuple[str, ...],
                 embedder: Any = None):
        self.root = root
        self.index_dir = root / "index"
        self.manifest = manifest
        self.config = config
        self.hidden = hide  # the flags hidden from search and open_article
        self.retrieval = config["retrieval"]
        self.months: list[dict[str, Any]] = manifest["months"]
        self.offsets = np.zeros(len(self.months) + 1, dtype=np.int64)
        for i, m in enumerate(self.months):
            self.offsets[i + 1] = self.offsets[i] + int(m["rows"])
        rows_dir = self.index_dir / "rows"
        self.days = np.asarray(load_npy(rows_dir / "days.npy"), dtype=np.int32)
        self.flags = {flag: np.asarray(load_npy(rows_dir / name), dtype=bool) for flag, name in HIDE_FLAGS.items()}
        self.doc_hash = load_npy(rows_dir / "doc_hash.npy")
        self.doc_row = load_npy(rows_dir / "doc_row.npy")
        if len(self.days) != self.offsets[-1]:
            raise WorkspaceError(f"{rows_dir}: {len(self.days)} rows but the manifest lists {self.offsets[-1]}; "
                                 f"rebuild with `{REBUILD}`")
        for flag, values in self.flags.items():
            if len(values) != len(self.days):
                raise WorkspaceError(f"{rows_dir}: {HIDE_FLAGS[flag]} has {len(values)} rows, days.npy "
                                     f"{len(self.days)}; rebuild with `{REBUILD}`")
        hidden_rows = np.zeros(len(self.days), dtype=bool)
        for flag in hide:
            hidden_rows |= self.flags[flag]
        hidden = hidden_rows if hide else None
        self.visible = ~hidden_rows
        self.bm25 = BM25Index(self.index_dir / "bm25", hidden, self.retrieval["bm25_k1"], self.retrieval["bm25_b"])
        index_cfg = config.get("index") or {}
        self.threads = search_threads(self.retrieval.get("search_threads"), self.months)
        # nprobe / candidates are search-time settings: the config's, when set, else the manifest's
        self.dense = DenseShards.open_months(self.index_dir, self.months, self.offsets, hidden,
                                             nprobe=int(index_cfg.get("ann_nprobe") or 0),
                                             candidates=int(index_cfg.get("ann_candidates") or 0),
                                             threads=self.threads)
        self._bg: Any = None  # the threads that run the dense half of hybrid searches
        self._lazy = threading.Lock()  # opens what is opened at first use (text shards, encoder, pool), once
        self._texts: dict[int, pa.Table] = {}
        self._embedder = embedder
        self.snapshot_id: str | None = manifest.get("snapshot_id")
        vis_days = self.days[self.visible]
        self.first_day: date | None = EPOCH.fromordinal(EPOCH.toordinal() + int(vis_days[0])) if len(vis_days) else None
        self.last_day: date | None = EPOCH.fromordinal(EPOCH.toordinal() + int(vis_days[-1])) if len(vis_days) else None

    @classmethod
    def open(cls, workspace: str | Path, config: dict[str, Any] | None = None,
             hide: bool | Iterable[str] | None = None, *, embedder: Any = None) -> Searcher:
        """Open the index of `workspace` (config: `load_config("corpus")`; embedder: query encoder override).

        `hide`: the article flags whose articles are hidden (None or True: every flag of HIDE_FLAGS, the
        default; False: none; or the names). Environments pass the set their env config selects.
        """
        from forecast_env.workspace.remote import local_for_reading

        # an object-store workspace is searched from its pulled local copy (shards are memory-mapped)
        root = Path(local_for_reading(workspace)).expanduser().resolve()
        manifest = read_index_manifest(root / "index")
        cfg = config if config is not None else load_config("corpus")
        return cls(root, manifest, cfg, hidden_flags(True if hide is None else hide), embedder)

    @property
    def shows_market_quotes(self) -> bool:
        """True in the recorded ablation that shows articles quoting market odds."""
        return "market_quote" not in self.hidden

    # ------------------------------------------------------------------ helpers
    @property
    def embedder(self) -> Any:
        """The query encoder: exactly the model and backend the index was built with (a config that
        asks for another is a ConfigError naming both); device and batch size from the config."""
        if self._embedder is None:
            with self._lazy:
                if self._embedder is None:
                    embed = query_embedding(self.index_dir, self.manifest.get("embedding"), self.config["embed"],
                                            default_config("corpus")["embed"])
                    self._embedder = Embedder.from_config(embed)
        return self._embedder

    def _prefix_end(self, d: date) -> int:
        return int(np.searchsorted(self.days, self._day_key(d), side="right"))

    def _day_key(self, d: date) -> np.integer:
        # a value of the array's own dtype: with a Python int numpy casts the whole 4-byte-per-row
        # array for every call (18 ms at 10M rows), with an np.int32 it binary-searches it
        return self.days.dtype.type(day_number(d))

    def _check_as_of(self, as_of: date | str) -> date:
        d = parse_day(as_of)
        if self.first_day is None or self.last_day is None:
            warnings.warn(f"{self.root}: the index holds no articles; every search is empty", stacklevel=3)
        elif d < self.first_day:
            warnings.warn(f"as_of {d} is before the corpus ({self.first_day} .. {self.last_day}): no hits",
                          stacklevel=3)
        elif d > self.last_day:
            warnings.warn(f"as_of {d} is after the corpus ({self.first_day} .. {self.last_day}): "
                          "searching every article", stacklevel=3)
        return d

    def _check_query(self, query: str) -> str:
        if not isinstance(query, str) or not query.strip():
            raise QueryError(f"empty search query {query!r}; give some words to search for")
        cap = int(self.retrieval["max_query_chars"])
        if len(query) > cap:
            warnings.warn(f"query of {len(query)} characters cut to retrieval.max_query_chars = {cap}", stacklevel=3)
            query = query[:cap]
        return query

    @staticmethod
    def _check_mode(mode: str, k: int) -> None:
        if mode not in MODES:
            raise QueryError(f"unknown search mode {mode!r}; allowed: {', '.join(MODES)}")
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise QueryError(f"k = {k!r}: the number of hits must be a positive integer")

    def _locate(self, row: int) -> tuple[int, int]:
        m = int(np.searchsorted(self.offsets, row, side="right")) - 1
        return m, row - int(self.offsets[m])

    def _text(self, m: int) -> pa.Table:
        table = self._texts.get(m)
        if table is None:
            with self._lazy:
                table = self._texts.get(m)
                if table is None:
                    table = open_text(self.index_dir / "text" / f"{self.months[m]['month']}.arrow")
                    if table.num_rows != int(self.months[m]["rows"]):
                        raise WorkspaceError(
                            f"{self.index_dir / 'text'}: month {self.months[m]['month']} has {table.num_rows} "
                            f"rows, manifest {self.months[m]['rows']}; rebuild with `{REBUILD}`")
                    self._texts[m] = table
        return table

    def _row_fields(self, row: int, fields: tuple[str, ...]) -> dict[str, Any]:
        m, local = self._locate(row)
        table = self._text(m)
        return {f: table.column(f)[local].as_py() for f in fields}

    def _hits(self, rows: np.ndarray, scores: np.ndarray) -> list[Hit]:
        hits = []
        for rank, (row, score) in enumerate(zip(rows.tolist(), scores.tolist()), start=1):
            f = self._row_fields(int(row), ("doc_id", "day", "title", "url", "summary"))
            hits.append(Hit(doc_id=f["doc_id"], day=f["day"], title=f["title"] or "", url=f["url"] or "",
                            summary=f["summary"] or "", score=float(score), rank=rank))
        return hits

    def _background(self) -> Any:
        """The pool that runs dense halves of hybrid searches while BM25 runs on the caller's thread."""
        if self._bg is None:
            with self._lazy:
                if self._bg is None:
                    from concurrent.futures import ThreadPoolExecutor

                    # one worker per search thread: concurrent callers' dense halves do not queue behind one
                    self._bg = ThreadPoolExecutor(self.threads, thread_name_prefix="hybrid")
        return self._bg

    def _ranked(self, queries: list[str], lo: int, hi: int, k: int, mode: str,
                vectors: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        n = len(queries)
        return self._ranked_ranges(queries, [lo] * n, [hi] * n, k, mode, vectors)

    def _ranked_ranges(self, queries: list[str], los: Sequence[int], his: Sequence[int], k: int, mode: str,
                       vectors: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query i: (rows, scores) of its top k among visible rows [los[i], his[i])."""
        dense_res: list[Any] = [None] * len(queries)
        bm25_res: list[Any] = [None] * len(queries)
        live = [i for i in range(len(queries)) if his[i] > los[i]]
        pending = None
        if mode in ("dense", "hybrid") and live:
            if vectors is None:
                vecs = np.asarray(self.embedder.encode_queries([queries[i] for i in live]), dtype=np.float32)
            else:
                vecs = np.asarray(vectors, dtype=np.float32)[live]
            args = (vecs, [los[i] for i in live], [his[i] for i in live], k)
            if mode == "hybrid" and self.threads > 1:  # dense months on the pool while BM25 runs here
                pending = self._background().submit(self.dense.search_ranges, *args)
            else:
                for i, res in zip(live, self.dense.search_ranges(*args)):
                    dense_res[i] = res
        if mode in ("bm25", "hybrid"):
            for i in live:
                bm25_res[i] = self.bm25.score(tokenize(queries[i]), his[i], k, start=los[i])
        if pending is not None:
            for i, res in zip(live, pending.result()):
                dense_res[i] = res
        empty = (np.zeros(0, np.int64), np.zeros(0, np.float64))
        out = []
        for i in range(len(queries)):
            if his[i] <= los[i]:
                out.append(empty)
            elif mode == "dense":
                out.append(dense_res[i])
            elif mode == "bm25":
                out.append(bm25_res[i])
            else:
                out.append(rrf([dense_res[i][0], bm25_res[i][0]], k, int(self.retrieval["rrf_k"])))
        return out

    # ------------------------------------------------------------------ public API
    def search(self, query: str, as_of: date | str, k: int = 10, mode: str = "hybrid") -> list[Hit]:
        """Top-k articles with `day <= as_of` for `query` (mode: hybrid, dense or bm25)."""
        return self.search_batch([query], as_of, k=k, mode=mode)[0]

    def search_batch(self, queries: list[str], as_of: date | str, k: int = 10, mode: str = "hybrid") -> list[list[Hit]]:
        """`search` for many queries at one date (query embeddings computed in one batch)."""
        self._check_mode(mode, k)
        queries = [self._check_query(q) for q in queries]
        d = self._check_as_of(as_of)
        hi = self._prefix_end(d)
        return [self._hits(r, s) for r, s in self._ranked(queries, 0, hi, int(k), mode)]

    def search_many(self, queries: Sequence[str], days: Sequence[date | str], k: int = 10,
                    mode: str = "hybrid") -> list[list[Hit]]:
        """`search(queries[i], days[i], k, mode)` for every i, answered together (docs/design.md §3).

        The same hits and the same float scores, bit for bit, as one `search` each (scores are recorded
        and replayed): each query is embedded alone, as `search` embeds it (a padded batch would round
        differently), and the index searches group the queries that scan the same rows of a month into
        one FAISS call, in chunks below FAISS's BLAS threshold (a BLAS product rounds differently from
        the per-query scan). What batching saves is the per-call work around the arithmetic (month
        loops, selectors, thread hand-offs) and the cores that a batch's queries share."""
        self._check_mode(mode, k)
        if isinstance(queries, str) or isinstance(days, (str, date)):
            raise QueryError("search_many takes a list of queries and a list of dates, one date per query")
        queries, days = list(queries), list(days)
        if len(queries) != len(days):
            raise QueryError(f"search_many: {len(queries)} queries but {len(days)} dates; give one date per query")
        queries = [self._check_query(q) for q in queries]
        his = [self._prefix_end(self._check_as_of(d)) for d in days]
        vectors = None
        live = [i for i, hi in enumerate(his) if hi > 0]
        if mode != "bm25" and live:
            # one query per encoder call, as `search` makes it: the same vector, the same cache use
            alone = {i: np.asarray(self.embedder.encode_queries([queries[i]]), dtype=np.float32)[0] for i in live}
            width = len(alone[live[0]])
            vectors = np.stack([alone[i] if i in alone else np.zeros(width, np.float32) for i in range(len(queries))])
        ranked = self._ranked_ranges(queries, [0] * len(queries), his, int(k), mode, vectors)
        return [self._hits(r, s) for r, s in ranked]

    def search_vectors(self, vectors: np.ndarray, as_of: date | str, k: int = 10) -> list[list[Hit]]:
        """Dense search with ready query vectors (any model whose dimension matches the index)."""
        self._check_mode("dense", k)
        d = self._check_as_of(as_of)
        hi = self._prefix_end(d)
        vecs = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        if hi == 0:
            return [[] for _ in range(len(vecs))]
        return [self._hits(r, s) for r, s in self.dense.search(vecs, 0, hi, int(k))]

    def evidence_set(self, queries: list[str], start: date | str, end: date | str,
                     per_query: int | None = None, size: int | None = None) -> list[Hit]:
        """docs/design.md §3: per query dense top-n + BM25 top-n in [start, end], fused by RRF; the best `size` docs."""
        per_query = int(per_query or self.retrieval["evidence_per_query"])
        size = int(size or self.retrieval["evidence_size"])
        self._check_mode("hybrid", per_query)
        queries = [self._check_query(q) for q in queries]
        d0, d1 = parse_day(start, "start"), parse_day(end, "end")
        lo = int(np.searchsorted(self.days, self._day_key(d0), side="left"))
        hi = self._prefix_end(d1)
        if not queries or hi <= lo:
            return []
        lists = []
        dense = self._ranked(queries, lo, hi, per_query, "dense")
        bm25 = self._ranked(queries, lo, hi, per_query, "bm25")
        for (dr, _), (br, _) in zip(dense, bm25):
            lists += [dr, br]
        rows, scores = rrf(lists, size, int(self.retrieval["rrf_k"]))
        return self._hits(rows, scores)

    def _find(self, doc_id: str) -> int | None:
        if not isinstance(doc_id, str) or not doc_id:
            return None
        h = np.uint64(doc_hash(doc_id))
        i = int(np.searchsorted(self.doc_hash, h))
        while i < len(self.doc_hash) and self.doc_hash[i] == h:
            row = int(self.doc_row[i])
            if self._row_fields(row, ("doc_id",))["doc_id"] == doc_id:
                return row
            i += 1
        return None

    def open_article(self, doc_id: str, as_of: date | str) -> Article:
        """The article `doc_id` as of `as_of`.

        Raises ArticleUnavailableError, with one message, for an unknown id, an article visible only
        after `as_of` and a hidden article alike (no existence oracle).
        """
        d = parse_day(as_of)
        row = self._find(doc_id)
        refusal = ArticleUnavailableError(
            f"no article {str(doc_id)[:80]!r} can be opened as of {d.isoformat()}; "
            "use a doc_id returned by search on or before that date")
        if row is None or not self.visible[row] or int(self.days[row]) > day_number(d):
            raise refusal
        f = self._row_fields(row, ("doc_id", "day", "title", "url", "summary", "body", "t", "t_source",
                                   "leak_flag", "market_quote"))
        if f["day"] > d:  # independent recheck on the stored text itself
            raise refusal
        return Article(doc_id=f["doc_id"], day=f["day"], title=f["title"] or "", url=f["url"] or "",
                       summary=f["summary"] or "", body=f["body"] or "", t=f["t"], t_source=f["t_source"] or "",
                       leak_flag=bool(f["leak_flag"]), market_quote=bool(f["market_quote"]))

    def close(self) -> None:
        """Drop the memory-mapped index files (text shards, postings, dense shards, row arrays)."""
        self._texts.clear()
        if "dense" in self.__dict__:
            self.dense.close()
        if self.__dict__.get("_bg") is not None:
            self._bg.shutdown(wait=False)
            self._bg = None
        for name in _MAPPED:
            self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        # reached only for attributes that are missing: those `close` dropped
        if name in _MAPPED:
            raise WorkspaceError(f"{self.__dict__.get('root')}: this Searcher was closed; open a new one "
                                 "with Searcher.open(workspace)")
        raise AttributeError(name)

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def day_counts(self) -> dict[date, int]:
        """Indexed articles per visibility day, hidden ones left out."""
        days, counts = np.unique(self.days[self.visible], return_counts=True)
        return {EPOCH.fromordinal(EPOCH.toordinal() + int(d)): int(c) for d, c in zip(days, counts)}

    def __len__(self) -> int:
        return int(self.visible.sum())
