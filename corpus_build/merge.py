"""The merge after the per-WARC parts, out of core: dedup over keys, then the store month by month.

The per-WARC stages leave one *part* per input (`WS/corpus/parts/`). The merge turns the parts into
the store (docs/design.md §2.dedup, §2.10) without ever holding the corpus's bodies in one process:

1. **Keys**, per part (in parallel on the core executor, cached next to the part): the columns the
   dedup rule compares, i.e. doc id, file and offset, visibility order keys, day, the URL, canonical
   and title keys and the MinHash band keys of the body. A part's body is read here and nowhere
   else before the shards are written.
2. **Order**: the order columns of every part (no keys, no bodies) give the records read twice
   (same doc id) and each article's rank in visibility order (`dedup.order_articles`' order).
3. **Pairs**: the three stages of `dedup` run over key columns read per stage (one band at a time),
   split into partitions by key hash so that a task's memory is bounded; each task returns only
   the (rank, earlier partner) pairs it found. `--engine ray` runs these tasks on Ray.
4. **Store**: each month shard is assembled from only the kept rows of the parts that hold that
   month, and each dropped-stage table from only that stage's rows; a file is rewritten only when
   its bytes change. These tasks run on Ray too with `--engine ray`.

Steps 3 and 4 on Ray read the parts from the workspace, so on a cluster the workspace must be on
storage every node sees. The result is the store of `merge_in_memory` (the reference kept for tests
and benchmarks), byte for byte.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forecast_env import schema
from forecast_env.corpus_build.dedup import (
    band_arrays,
    band_partners,
    combine_partners,
    find_duplicates,
    make_hasher,
    min_partner,
    normalize_title,
    normalize_url,
    title_partners,
    url_pairs,
    url_partners,
)
from forecast_env.corpus_build.quality import PROFILE_NAMES, active_profile
from forecast_env.corpus_build.report import (
    DROPPED_COUNTS,
    ArticleTally,
    combine_tallies,
    dropped_counts,
    tally_articles,
)
from forecast_env.crashpoints import crash_point
from forecast_env.errors import CorpusError
from forecast_env.executor import map_unordered
from forecast_env.store import (
    Workspace,
    atomic_save_npy,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_table,
    commit_temp,
    conform,
    naming_full_disk,
    sha256_file,
    temp_beside,
)

#: Bump when the keys a part's sidecar holds change, so sidecars are recomputed.
KEYS_VERSION = 1
#: The `dedup` settings the keys depend on (the others apply when the stages run).
KEY_SETTINGS = ("num_perm", "seed", "minhash_scheme", "shingle_hash", "shingle_words", "bands", "rows")
#: The article columns the keys pass reads from a part (the only pass before the store that reads a body).
KEY_SOURCE_COLUMNS = ("doc_id", "url", "canonical_url", "title", "body", "t", "visible_at", "t_crawl", "day",
                      "warc_file", "warc_offset")
#: The columns of the order pass (no keys, no text).
ORDER_COLUMNS = ("doc_id", "warc_file", "warc_offset", "v", "t_crawl", "day")
#: The kept articles' columns the funnel report reads (`report.build_report`).
REPORT_COLUMNS = ("t_source", "t_rule", "t_pub_rule", "t_mod_rule", "visible_source", "visible_moves", "day",
                  "leak_flag", "leak_reason", "market_quote")
#: Bump when a month shard's bytes would change for the same rows (sort, writer settings), so every
#: month is rebuilt once instead of being skipped by its recorded plan.
STORE_VERSION = 2
#: Rows per Parquet row group of a month shard or dropped table (the store's one writer setting
#: besides zstd). The writer holds one row group at a time, so a month of the paper's 1.3M
#: articles is written in about 80 steps of ~80 MB instead of all at once (docs/scaling.md).
ROW_GROUP_ROWS = 16_384
#: Rows per pair-finding task: a stage's keys are split into ceil(articles / this) hash partitions.
ROWS_PER_TASK = 4_000_000
_SORT_SHARD = ["day", "doc_id", "warc_file", "warc_offset"]
_SORT_DROPPED = ["warc_file", "warc_offset", "doc_id", "reason"]


def _frame(table: pa.Table) -> pl.DataFrame:
    """A pyarrow table as a polars DataFrame (pyarrow is untyped here, so polars' overloads of `from_arrow`
    cannot tell a table, which gives a DataFrame, from an array)."""
    return cast(pl.DataFrame, pl.from_arrow(table))


def _series(array: pa.ChunkedArray) -> pl.Series:
    """A pyarrow column as a polars Series (see `_frame`)."""
    return cast(pl.Series, pl.from_arrow(array))
_HASH_SEED = 20250301


def keys_schema(bands: int, rows: int) -> pa.Schema:
    """Schema of a part's keys sidecar: order columns, URL/title keys, signature flag, one column per band."""
    return pa.schema([
        ("doc_id", pa.string()), ("warc_file", pa.string()), ("warc_offset", pa.int64()), ("day", pa.date32()),
        ("v", pa.timestamp("us", tz="UTC")), ("t_crawl", pa.timestamp("us", tz="UTC")),
        ("url_key", pa.string()), ("canon_key", pa.string()), ("title_key", pa.string()), ("sig_ok", pa.bool_()),
        *[(f"band_{b}", pa.binary(4 * rows)) for b in range(bands)],
    ])


def keys_config_hash(dedup_cfg: dict[str, Any]) -> str:
    """Hash of the key settings (a change recomputes every sidecar)."""
    blob = f"{KEYS_VERSION}|" + "|".join(f"{k}={dedup_cfg.get(k)!r}" for k in KEY_SETTINGS)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def keys_path(articles_path: str | Path, dedup_cfg: dict[str, Any]) -> Path:
    """Where the keys sidecar of a part's articles file lives."""
    p = Path(articles_path)
    base = p.name.removesuffix(".articles.parquet")
    return p.with_name(f"{base}.keys-{keys_config_hash(dedup_cfg)}.parquet")


@dataclass(frozen=True)
class PartFiles:
    """One part of the build: its articles and dropped tables and its keys sidecar."""

    articles: Path
    dropped: Path
    keys: Path


# ---------------------------------------------------------------------------------------------
# quality profiles: a part holds every profile's verdicts; the merge keeps the active profile's rows
# ---------------------------------------------------------------------------------------------


def _rows_for(dropped: pa.Table, profile: str) -> pa.Table:
    """The drop rows of a part's table that hold for `profile` (its own and the unmarked ones), in the
    store's schema (`schema.DROPPED`); a table without a `profile` column holds one profile's rows."""
    if "profile" in dropped.column_names:
        marks = dropped["profile"]
        dropped = dropped.filter(pc.fill_null(pc.or_(pc.is_null(marks), pc.equal(marks, profile)), True))
    return conform(dropped, schema.DROPPED)


def part_dropped(path: str | Path, stage: str, profile: str | None) -> tuple[pa.Table, dict]:
    """A part's dropped rows of `stage` that hold for `profile` (None: every row) in the store's schema,
    and for stage quality what the other profiles decide differently (`profile_differences`), from one
    read of the file."""
    raw = pq.read_table(path, filters=pc.field("stage") == stage)
    if profile is None:
        return conform(raw, schema.DROPPED), {}
    differences = profile_differences(raw, profile) if stage == "quality" else {}
    return _rows_for(raw, profile), differences


def profile_dropped_ids(path: str | Path, profile: str) -> pa.Array:
    """The doc ids `profile`'s quality filters drop in one part: rows of its articles table that another
    profile kept, which this profile's corpus leaves out (no id when the part holds one profile's rows)."""
    if "profile" not in pq.read_schema(path).names:
        return pa.array([], pa.string())
    expr = (pc.field("stage") == "quality") & (pc.field("profile") == profile)
    return pq.read_table(path, columns=["doc_id"], filters=expr)["doc_id"].combine_chunks()


def profile_view(articles: pa.Table, dropped: pa.Table, profile: str) -> tuple[pa.Table, pa.Table]:
    """One quality profile's (articles, dropped rows as `schema.DROPPED`) from a part's tables: the
    articles it keeps, and the drop rows that hold for it (`schema.PART_DROPPED` explains the marks)."""
    if "profile" not in dropped.column_names:
        return articles, dropped
    out = pc.and_(pc.equal(dropped["stage"], "quality"), pc.fill_null(pc.equal(dropped["profile"], profile), False))
    gone = pc.unique(dropped.filter(out)["doc_id"])
    articles = articles.filter(pc.invert(pc.is_in(articles["doc_id"], value_set=gone)))
    return articles, _rows_for(dropped, profile)


def profile_differences(rows: pa.Table, profile: str) -> dict[str, dict[str, dict[str, int]]]:
    """What each other profile decides differently on one part's quality rows (doc_id, reason, profile),
    for the funnel: per other profile, `would_keep` (this profile's drops it passes, by this profile's
    reason) and `would_drop` (records this profile passes, by the other's reason)."""
    if "profile" not in rows.column_names or not rows.num_rows:
        return {}
    df = pl.from_arrow(rows.select(["doc_id", "reason", "profile"]))
    assert isinstance(df, pl.DataFrame)
    mine = df.filter(pl.col("profile") == profile)
    out: dict[str, dict[str, dict[str, int]]] = {}
    for other in sorted(set(PROFILE_NAMES) - {profile}):
        theirs = df.filter(pl.col("profile") == other)
        keep = mine.join(theirs.select("doc_id"), on="doc_id", how="anti")["reason"].value_counts()
        drop = theirs.join(mine.select("doc_id"), on="doc_id", how="anti")["reason"].value_counts()
        out[other] = {"would_keep": {str(r): int(n) for r, n in keep.iter_rows()},
                      "would_drop": {str(r): int(n) for r, n in drop.iter_rows()}}
    return out


def add_differences(total: dict[str, dict[str, dict[str, int]]], part: dict[str, dict[str, dict[str, int]]]) -> None:
    """Sum one part's `profile_differences` into `total`."""
    for name, sides in part.items():
        entry = total.setdefault(name, {"would_keep": {}, "would_drop": {}})
        for side, counts in sides.items():
            for reason, n in counts.items():
                entry[side][reason] = entry[side].get(reason, 0) + n


def part_keys(articles: pa.Table, dedup_cfg: dict[str, Any]) -> pa.Table:
    """The dedup keys of one part's articles (same row order)."""
    bands, rows = int(dedup_cfg.get("bands", 8)), int(dedup_cfg.get("rows", 16))
    sig, ok = make_hasher(dedup_cfg).signatures(articles["body"].to_pylist())
    if bands * rows != sig.shape[1]:
        raise CorpusError(f"dedup.bands x dedup.rows = {bands} x {rows} must equal num_perm {sig.shape[1]}")
    band_cols = band_arrays(sig, bands, rows) if articles.num_rows else [
        pa.array([], pa.binary(4 * rows)) for _ in range(bands)]
    v = pc.coalesce(articles["visible_at"], articles["t"])
    cols = [
        articles["doc_id"], articles["warc_file"], articles["warc_offset"], articles["day"], v, articles["t_crawl"],
        pa.array([normalize_url(u) for u in articles["url"].to_pylist()], pa.string()),
        pa.array([normalize_url(u) for u in articles["canonical_url"].to_pylist()], pa.string()),
        pa.array([normalize_title(t) for t in articles["title"].to_pylist()], pa.string()),
        pa.array(ok, pa.bool_()), *band_cols,
    ]
    sch = keys_schema(bands, rows)
    return pa.Table.from_arrays([pa.chunked_array(c).cast(f.type) if isinstance(c, pa.ChunkedArray) else c.cast(f.type)
                                 for c, f in zip(cols, sch)], schema=sch)


def write_part_keys(task: tuple[str, str, dict[str, Any]]) -> str:
    """Compute and atomically write the keys sidecar of one part: (articles path, keys path, dedup cfg)."""
    articles_path, out, dedup_cfg = task
    crash_point("merge.task")  # at the start of each keys, pair and store task (a worker lost mid-merge)
    table = pq.read_table(articles_path, columns=list(KEY_SOURCE_COLUMNS))
    atomic_write_table(out, part_keys(table, dedup_cfg), None)
    return out


# ---------------------------------------------------------------------------------------------
# order: repeats and ranks
# ---------------------------------------------------------------------------------------------


@dataclass
class Order:
    """The visibility order of the whole build, over global row ids (parts concatenated in input order)."""

    offsets: np.ndarray          # row id of each part's first row; last entry: total rows
    ranks: np.ndarray            # per row id: its rank, -1 for a record read twice (not its first copy)
    ranked: pl.DataFrame         # (rank, gid, doc_id, day) sorted by rank
    repeats: pl.DataFrame        # (gid, doc_id) of the later copies of a record read twice

    @property
    def rows(self) -> int:
        return int(self.offsets[-1])


def read_order(keys: Sequence[Path], dropped: Sequence[Path] | None = None, profile: str | None = None) -> Order:
    """Read the order columns of every sidecar and number the articles in visibility order.

    `dropped[i]`, `profile`: part i's dropped table and the active quality profile; the rows that
    profile drops (`profile_dropped_ids`, read part by part) keep their row ids but get no rank, so no
    pair, month or dedup row sees them."""
    # file names first (one small column), so each part's order columns are slimmed as they are read
    names: set[str] = set()
    for path in keys:
        names.update(n for n in pc.unique(pq.read_table(path, columns=["warc_file"])["warc_file"]).to_pylist() if n is not None)
    # a file name as its rank among all names: the same order as the name, four bytes a row
    name_rank = {n: i for i, n in enumerate(sorted(names))}
    slim, sizes = [], []
    for i, path in enumerate(keys):
        table = pq.read_table(path, columns=list(ORDER_COLUMNS))
        gone = profile_dropped_ids(dropped[i], profile) if dropped is not None and profile is not None else None
        out = (pl.Series(pc.is_in(table["doc_id"], value_set=gone).to_numpy(zero_copy_only=False))
               if gone is not None and len(gone) else pl.lit(False))
        df = _frame(table)
        sizes.append(df.height)
        slim.append(df.select(
            "doc_id", pl.col("warc_file").replace_strict(name_rank, default=None, return_dtype=pl.UInt32).alias("fr"),
            "warc_offset", pl.col("v").cast(pl.Int64), pl.col("t_crawl").cast(pl.Int64), "day",
            out.alias("out")))
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    empty = {"doc_id": pl.Utf8, "fr": pl.UInt32, "warc_offset": pl.Int64, "v": pl.Int64, "t_crawl": pl.Int64,
             "day": pl.Date, "out": pl.Boolean}
    df = pl.concat(slim) if slim else pl.DataFrame(schema=empty)
    del slim
    df = df.with_row_index("gid").with_columns(pl.col("gid").cast(pl.Int64))
    df = df.filter(~pl.col("out")).drop("out")  # another profile's articles: row ids kept, no rank
    # the same WARC record read twice (a file under two names) is one article: its first copy
    df = df.sort(["doc_id", "fr", "warc_offset"], maintain_order=True)
    first = df["doc_id"].is_first_distinct()
    repeats = df.filter(~first).select("gid", "doc_id")
    ranked = (df.filter(first).select("gid", "doc_id", "v", "t_crawl", "day")
              .sort(["v", "t_crawl", "doc_id"], nulls_last=True)
              .with_row_index("rank").with_columns(pl.col("rank").cast(pl.Int64))
              .select("rank", "gid", "doc_id", "day"))
    del df
    ranks = np.full(int(offsets[-1]), -1, dtype=np.int64)
    ranks[ranked["gid"].to_numpy()] = ranked["rank"].to_numpy()
    return Order(offsets=offsets, ranks=ranks, ranked=ranked, repeats=repeats)


# ---------------------------------------------------------------------------------------------
# pairs: the three stages over key columns, in bounded tasks
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairTask:
    """One stage (url, title, or band b) over one hash partition of its keys."""

    stage: str
    band: int
    partition: int
    partitions: int
    keys: tuple[str, ...]
    ranks: str                    # .npy file of the ranks per global row id
    offsets: tuple[int, ...]
    cfg: dict[str, Any] = field(default_factory=dict)


def _string_partition(col: pl.Series, task: PairTask) -> pl.Series:
    return (col.hash(seed=_HASH_SEED) % task.partitions) == task.partition


def _band_partition(keys: pa.Array, task: PairTask) -> np.ndarray:
    # the band bytes are min-hash values, uniform: their first four bytes pick the partition
    width = keys.type.byte_width
    raw = np.frombuffer(keys.buffers()[1], dtype=np.uint8)[keys.offset * width:(keys.offset + len(keys)) * width]
    head = raw.reshape(len(keys), width)[:, :4].copy().view("<u4").ravel()
    return (head % np.uint32(task.partitions)) == task.partition


def find_pairs(task: PairTask) -> pl.DataFrame:
    """(rank, partner) of one stage over one partition: what `dedup.find_duplicates` finds there."""
    ranks = np.load(task.ranks, mmap_mode="r")
    frames: list[pl.DataFrame] = []
    bands: list[tuple[np.ndarray, pa.Array]] = []
    for i, path in enumerate(task.keys):
        r = np.asarray(ranks[task.offsets[i]:task.offsets[i + 1]])
        if task.stage == "url":
            t = pq.read_table(path, columns=["url_key", "canon_key"])
            keep = r >= 0
            pairs = url_pairs(r[keep], _series(t["canon_key"]).filter(keep),
                              _series(t["url_key"]).filter(keep))
            if task.partitions > 1:
                pairs = pairs.filter(_string_partition(pairs["key"], task))
            frames.append(pairs)
        elif task.stage == "title":
            t = pq.read_table(path, columns=["title_key", "v"])
            df = pl.DataFrame({"rank": r, "v": pl.from_arrow(t["v"]), "key": pl.from_arrow(t["title_key"])})
            df = df.filter(pl.col("rank") >= 0)
            if task.partitions > 1:
                df = df.filter(_string_partition(df["key"], task))
            frames.append(df)
        else:
            t = pq.read_table(path, columns=[f"band_{task.band}", "sig_ok"])
            keys = t[f"band_{task.band}"].combine_chunks()
            keep = (r >= 0) & t["sig_ok"].to_numpy(zero_copy_only=False)
            if task.partitions > 1:
                keep &= _band_partition(keys, task)
            idx = np.flatnonzero(keep)
            bands.append((r[idx], keys.take(pa.array(idx, pa.int64()))))
    if task.stage == "url":
        return url_partners(pl.concat(frames).unique()) if frames else min_partner([])
    if task.stage == "title":
        if not frames:
            return min_partner([])
        return title_partners(pl.concat(frames), task.cfg)
    if not bands:
        return min_partner([])
    return band_partners(np.concatenate([b[0] for b in bands]), pa.concat_arrays([b[1] for b in bands]))


def pair_tasks(keys: Sequence[Path], ranks_path: Path, order: Order, cfg: dict[str, Any],
               rows_per_task: int = ROWS_PER_TASK) -> list[PairTask]:
    """Every (stage, band, partition) task of the dedup pairs."""
    partitions = max(1, math.ceil(order.rows / max(1, rows_per_task)))
    common: dict[str, Any] = {"keys": tuple(str(k) for k in keys), "ranks": str(ranks_path),
              "offsets": tuple(int(o) for o in order.offsets), "cfg": dict(cfg), "partitions": partitions}
    stages = [("url", 0), ("title", 0)] + [("band", b) for b in range(int(cfg.get("bands", 8)))]
    return [PairTask(stage=s, band=b, partition=j, **common) for s, b in stages for j in range(partitions)]


def _collect_hits(results: Sequence[tuple[PairTask, pl.DataFrame]]) -> pl.DataFrame:
    by_stage: dict[str, list[pl.DataFrame]] = {"url": [], "title": [], "band": []}
    for task, frame in results:
        by_stage[task.stage].append(frame)
    canon = min_partner(by_stage["url"])
    title = min_partner(by_stage["title"])  # one title per article: partitions never share a rank
    lsh = min_partner(by_stage["band"])
    return combine_partners(canon, title, lsh)


def _run_pair_task(task: PairTask) -> tuple[PairTask, pl.DataFrame]:
    crash_point("merge.task")
    return task, find_pairs(task)


# ---------------------------------------------------------------------------------------------
# store: month shards and dropped tables, each from only the rows it holds
# ---------------------------------------------------------------------------------------------


def _table_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    return sink.getvalue()


def write_if_changed(path: Path, table: pa.Table) -> bool:
    """Write `table` as Parquet atomically unless the file already holds exactly these bytes."""
    data = _table_bytes(table)
    if path.exists() and path.stat().st_size == len(data) and sha256_file(path) == hashlib.sha256(data).hexdigest():
        return False
    atomic_write_bytes(path, data)
    return True


class RowGroupWriter:
    """A store table written piece by piece, in final row order, one row group in memory at a time.

    Pieces of any size go in; whole row groups of `ROW_GROUP_ROWS` rows go out to a temporary file
    beside `path`, so the bytes are those of `write_if_changed(path, whole_table)` (tested). `close()`
    renames the file into place unless `path` already holds the same bytes, and says whether it
    wrote; `discard()` (or an exception inside a `with` block) removes the temporary file.
    """

    def __init__(self, path: Path, table_schema: pa.Schema) -> None:
        self.path = Path(path)
        self.schema = table_schema
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._tmp = temp_beside(self.path)
        self._writer: pq.ParquetWriter | None = None

    def __enter__(self) -> RowGroupWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.discard()

    def add(self, piece: pa.Table) -> None:
        """Append rows that follow every row added before."""
        if piece.num_rows == 0:
            return
        self._pending.append(conform(piece, self.schema))
        self._pending_rows += piece.num_rows
        self.rows += piece.num_rows
        while self._pending_rows >= ROW_GROUP_ROWS:
            self._flush(ROW_GROUP_ROWS)

    def _flush(self, rows: int) -> None:
        buf = pa.concat_tables(self._pending)
        with naming_full_disk(self.path):
            if self._writer is None:
                self._writer = pq.ParquetWriter(self._tmp, self.schema, compression="zstd")
            self._writer.write_table(buf.slice(0, rows).combine_chunks())
        crash_point("write.rowgroup")
        rest = buf.slice(rows)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def close(self) -> bool:
        """Finish the file; True when it was (re)written, False when `path` already held these bytes."""
        if self.rows == 0:  # an empty table's bytes are `write_table`'s, not an empty writer's
            self.discard()
            return write_if_changed(self.path, self.schema.empty_table())
        if self._pending_rows:
            self._flush(self._pending_rows)
        assert self._writer is not None
        with naming_full_disk(self.path):
            self._writer.close()
        self._writer = None
        if self.path.exists() and self.path.stat().st_size == self._tmp.stat().st_size \
                and sha256_file(self.path) == sha256_file(self._tmp):
            self.discard()
            return False
        commit_temp(self._tmp, self.path)
        return True

    def discard(self) -> None:
        """Drop what was written (nothing happens to `path`)."""
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                with contextlib.suppress(OSError, pa.ArrowException):  # a writer that cannot flush (a full disk)
                    writer.close()
        finally:
            self._tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class MonthTask:
    """One month shard: the kept rows of each part that holds the month."""

    month: str
    sources: tuple[tuple[str, np.ndarray], ...]   # (articles file, row numbers within it, ascending)
    out: str
    plan: str = ""                                 # digest of the sources (`month_plan`)
    recorded: tuple[int, int] | None = None        # (size, mtime_ns) of the shard last written for this plan


def month_plan(month: str, sources: Sequence[tuple[str, np.ndarray]]) -> str:
    """Digest of what a month shard is made of: each part file (path, size, mtime) and its rows."""
    h = hashlib.sha256(f"{STORE_VERSION}|{pa.__version__}|{schema.ARTICLES}|{month}".encode())
    for path, rows in sources:
        st = Path(path).stat()
        h.update(f"|{path}|{st.st_size}|{st.st_mtime_ns}|".encode())
        h.update(np.ascontiguousarray(rows, dtype=np.int64).tobytes())
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class DroppedTask:
    """One dropped-stage table: that stage's rows of every part, plus the dedup drops for stage dedup."""

    stage: str
    sources: tuple[str, ...]
    extra: pa.Table | None
    out: str
    profile: str | None = None  # the active quality profile (a part holds every profile's rows)


def month_table(task: MonthTask) -> pa.Table:
    """A month shard's table, sorted by (day, doc id), in the store's schema."""
    tables = [pq.read_table(path).take(pa.array(rows, pa.int64())) for path, rows in task.sources]
    table = pa.concat_tables(tables).cast(schema.ARTICLES)
    del tables
    # sort on the key columns only, then gather the rows once (no second copy of the text)
    order = _frame(table.select(_SORT_SHARD)).with_row_index("i").sort(_SORT_SHARD)["i"].to_numpy()
    return conform(table.take(pa.array(order, pa.int64())), schema.ARTICLES).combine_chunks()


def month_rows(task: MonthTask) -> int:
    """How many rows a month shard will hold."""
    return int(sum(len(rows) for _, rows in task.sources))


def _month_order(task: MonthTask) -> dict[int, np.ndarray]:
    """Each source's rows' positions in the shard (its `rows` order), from the sort columns alone."""
    sort_types = pa.schema([schema.ARTICLES.field(c) for c in _SORT_SHARD])
    frames = []
    for i, (path, rows) in enumerate(task.sources):
        keys = pq.read_table(path, columns=_SORT_SHARD).take(pa.array(rows, pa.int64())).cast(sort_types)
        frames.append(_frame(keys).with_columns(pl.lit(i, pl.Int32).alias("_src"),
                                                       pl.int_range(0, keys.num_rows, dtype=pl.Int64).alias("_row")))
    order = pl.concat(frames).sort(_SORT_SHARD).with_row_index("_pos")
    out = {}
    for (src,), sub in order.group_by(["_src"]):
        sub = sub.sort("_row")
        out[int(src)] = sub["_pos"].to_numpy().astype(np.int64)
    return out


def _month_spill(task: MonthTask, spill: Path) -> int:
    """Stream a month's rows into one Arrow file per row group of the shard (each part read once):
    returns how many row groups there are. Each spilled row carries its position (`_pos`)."""
    positions = _month_order(task)
    groups = math.ceil(month_rows(task) / ROW_GROUP_ROWS)
    spill.mkdir(parents=True, exist_ok=True)
    opts = pa.ipc.IpcWriteOptions(compression="zstd")
    spill_schema = schema.ARTICLES.append(pa.field("_pos", pa.int64()))
    writers: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
    try:
        for i, (path, rows) in enumerate(task.sources):
            table = pq.read_table(path).take(pa.array(rows, pa.int64())).cast(schema.ARTICLES)
            pos = positions[i]
            table = table.append_column("_pos", pa.array(pos, pa.int64()))
            group = pos // ROW_GROUP_ROWS
            for g in np.unique(group).tolist():
                if g not in writers:
                    writers[g] = pa.ipc.new_stream(str(spill / f"{g:06d}.arrow"), spill_schema, options=opts)
                writers[g].write_table(table.filter(pa.array(group == g)))
                crash_point("merge.spill")
            del table
    finally:
        for w in writers.values():
            w.close()
    return groups


def _write_month_streamed(task: MonthTask, out: Path) -> tuple[bool, ArticleTally]:
    """A month shard of more than one row group, one row group in memory at a time (same bytes as
    `write_if_changed(out, month_table(task))`): the parts' rows are spilled by row group, then each
    group is sorted and written. Returns (written, the funnel's tally of its rows)."""
    spill = out.with_name(f".{out.stem}.spill")
    shutil.rmtree(spill, ignore_errors=True)
    reports = []
    try:
        groups = _month_spill(task, spill)
        with RowGroupWriter(out, schema.ARTICLES) as writer:
            for g in range(groups):
                with pa.ipc.open_stream(str(spill / f"{g:06d}.arrow")) as reader:
                    piece = reader.read_all()
                (spill / f"{g:06d}.arrow").unlink()
                crash_point("merge.group")
                piece = piece.take(pc.sort_indices(piece["_pos"])).drop_columns(["_pos"])
                writer.add(piece)
                reports.append(tally_articles(piece.select(list(REPORT_COLUMNS))))
                del piece
            written = writer.close()
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    return written, combine_tallies(reports)


def write_month(task: MonthTask) -> tuple[str, bool, ArticleTally, tuple[int, int]]:
    """Write one month shard if its bytes changed: (month, written, the funnel's tally of its rows,
    the shard's (size, mtime_ns)). A shard written for the same plan and untouched since is not
    even rebuilt (an incremental build reads only the months it changes). A month of more than
    `ROW_GROUP_ROWS` rows is written one row group at a time (`_write_month_streamed`)."""
    out = Path(task.out)
    if task.recorded is not None and out.exists():
        st = out.stat()
        if (st.st_size, st.st_mtime_ns) == tuple(task.recorded):
            return task.month, False, tally_articles(pq.read_table(out, columns=list(REPORT_COLUMNS))), task.recorded
    if month_rows(task) > ROW_GROUP_ROWS:
        written, report = _write_month_streamed(task, out)
    else:
        table = month_table(task)
        written = write_if_changed(out, table)
        report = tally_articles(table.select(list(REPORT_COLUMNS)))
        del table
    st = out.stat()
    return task.month, written, report, (st.st_size, st.st_mtime_ns)


def dropped_table(task: DroppedTask) -> tuple[pa.Table, dict[str, dict[str, dict[str, int]]]]:
    """A dropped-stage table, sorted by (file, offset, doc id, reason), and for stage quality the other
    profiles' differences summed over the parts."""
    tables: list[pa.Table] = []
    differences: dict[str, dict[str, dict[str, int]]] = {}
    for path in task.sources:
        table, part_differences = part_dropped(path, task.stage, task.profile)
        tables.append(table)
        add_differences(differences, part_differences)
    if task.extra is not None:
        tables.append(task.extra)
    ddf = _frame(pa.concat_tables(tables) if tables else schema.DROPPED.empty_table())
    return conform(ddf.sort(_SORT_DROPPED, nulls_last=True).to_arrow(), schema.DROPPED), differences


def _stream_files(task: DroppedTask) -> list[tuple[str, str | None]] | None:
    """(WARC file, source) in sorted file order when every source's rows of the stage come from one
    WARC file of its own (a part is one file) and every extra row names one of them; else None."""
    files: dict[str, str] = {}
    for path in task.sources:
        col = pq.read_table(path, columns=["warc_file"], filters=[("stage", "==", task.stage)])["warc_file"]
        if len(col) == 0:
            continue
        uniq = pc.unique(col)
        if uniq.null_count or len(uniq) != 1 or uniq[0].as_py() in files:
            return None
        files[uniq[0].as_py()] = path
    pieces: list[tuple[str, str | None]] = sorted(files.items())
    if task.extra is not None and task.extra.num_rows:
        extra_files = pc.unique(task.extra["warc_file"])
        if extra_files.null_count:
            return None
        for name in extra_files.to_pylist():
            if name not in files:
                pieces.append((name, None))
        pieces.sort()
    return pieces


def write_dropped(task: DroppedTask) -> tuple[str, bool, pa.Table, dict[str, dict[str, dict[str, int]]]]:
    """Write one dropped-stage table if its bytes changed: (stage, written, its rows counted per reason,
    `report.dropped_counts`, for the funnel, and for stage quality the other profiles' differences,
    `profile_differences`). When each part's rows come from its own WARC file (always, for parts), the
    table is written file by file, one part's rows and one row group in memory at a time; otherwise it
    is sorted whole (`dropped_table`)."""
    out = Path(task.out)
    pieces = _stream_files(task)
    if pieces is None:
        table, differences = dropped_table(task)
        return task.stage, write_if_changed(out, table), dropped_counts(table), differences
    differences = {}
    extra: dict[Any, pl.DataFrame] = {}
    if task.extra is not None and task.extra.num_rows:
        extra = pl.DataFrame(pl.from_arrow(task.extra)).partition_by("warc_file", as_dict=True)
    counts = []
    with RowGroupWriter(out, schema.DROPPED) as writer:
        for name, path in pieces:
            tables = []
            if path is not None:
                table, part_differences = part_dropped(path, task.stage, task.profile)
                tables.append(table)
                add_differences(differences, part_differences)
            if (name,) in extra:
                tables.append(extra.pop((name,)).to_arrow().cast(schema.DROPPED))
            piece = pa.concat_tables(tables)
            counts.append(dropped_counts(piece))
            writer.add(conform(_frame(piece).sort(_SORT_DROPPED, nulls_last=True).to_arrow(), schema.DROPPED))
        counted = dropped_counts(pa.concat_tables(counts)) if counts else DROPPED_COUNTS.empty_table()
        return task.stage, writer.close(), counted, differences


def _run_store_task(task: MonthTask | DroppedTask) -> tuple[str, str, bool, ArticleTally | pa.Table, Any]:
    """(kind, name, written, what the funnel counts of it, then the shard's (size, mtime_ns) for a month
    or the other profiles' differences for a dropped stage)."""
    crash_point("merge.task")
    if isinstance(task, MonthTask):
        month, written, tally, stat = write_month(task)
        return "articles", month, written, tally, stat
    stage, written, counts, differences = write_dropped(task)
    return "dropped", stage, written, counts, differences


def _dedup_drops(parts: Sequence[PartFiles], order: Order, hits: pl.DataFrame, keep_text: bool = False) -> pa.Table:
    """The rows of stage dedup: suppressed articles with their earliest partner, and records read twice
    (`keep_text`: with the first `schema.DROPPED_TEXT_CHARS` characters of the body, `corpus build
    --keep-dropped-text`)."""
    ids = order.ranked.select("rank", "gid", "doc_id")
    dups = (hits.join(ids, on="rank")
            .join(ids.select(pl.col("rank").alias("partner"), pl.col("doc_id").alias("dup_of")), on="partner")
            .sort("rank").select("gid", "reason", pl.lit(None, dtype=pl.Utf8).alias("detail"), "dup_of"))
    reps = order.repeats.select("gid", pl.lit("dup_canonical_url").alias("reason"),
                                pl.lit("same record").alias("detail"), pl.col("doc_id").alias("dup_of"))
    wanted = pl.concat([dups, reps])
    if wanted.height == 0:
        return schema.DROPPED.empty_table()
    # the URL and position of each dropped row, read from its part (only those rows)
    part_of = np.searchsorted(order.offsets, wanted["gid"].to_numpy(), side="right") - 1
    wanted = wanted.with_columns(pl.Series("part", part_of, dtype=pl.Int64), pl.Series("seq", np.arange(wanted.height)))
    rows = []
    for (p,), sub in wanted.group_by(["part"]):
        local = (sub["gid"] - int(order.offsets[p])).to_numpy()
        cols = ["doc_id", "url", "warc_file", "warc_offset"] + (["body"] if keep_text else [])
        t = pq.read_table(parts[p].articles, columns=cols).take(pa.array(local, pa.int64()))
        frame = _frame(t).with_columns(sub["seq"].alias("seq"))
        if keep_text:
            frame = frame.with_columns(pl.col("body").str.slice(0, schema.DROPPED_TEXT_CHARS).alias("text_head")).drop("body")
        rows.append(frame)
    info = pl.concat(rows).sort("seq")
    out = pl.concat([info.drop("seq"), wanted.sort("seq").select(
        pl.lit("dedup").alias("stage"), "reason", "detail", "dup_of")], how="horizontal")
    return conform(out.select(["doc_id", "url", "warc_file", "warc_offset", "stage", "reason", "detail",
                               "dup_of"] + (["text_head"] if keep_text else [])).to_arrow(), schema.DROPPED)


def _month_tasks(ws: Workspace, parts: Sequence[PartFiles], order: Order, hits: pl.DataFrame,
                 recorded: dict[str, dict]) -> list[MonthTask]:
    kept = order.ranked.join(hits.select("rank"), on="rank", how="anti").select("gid", "day")
    if kept.height == 0:
        return []
    part_of = np.searchsorted(order.offsets, kept["gid"].to_numpy(), side="right") - 1
    kept = kept.with_columns(pl.Series("part", part_of, dtype=pl.Int64),
                             pl.col("day").dt.strftime("%Y-%m").alias("month"))
    tasks = []
    for (month,), sub in sorted(kept.group_by(["month"]), key=lambda g: g[0][0]):
        sources = []
        for (p,), rows in sorted(sub.group_by(["part"]), key=lambda g: g[0][0]):
            local = np.sort((rows["gid"] - int(order.offsets[p])).to_numpy())
            sources.append((str(parts[p].articles), local))
        plan = month_plan(month, sources)
        rec = recorded.get(month) or {}
        tasks.append(MonthTask(month=month, sources=tuple(sources), out=str(ws.articles_dir / f"{month}.parquet"),
                               plan=plan, recorded=(rec["size"], rec["mtime_ns"]) if rec.get("plan") == plan else None))
    return tasks


# ---------------------------------------------------------------------------------------------
# on Ray nodes that share no disk with the driver (a workspace on object storage)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteMerge:
    """A merge whose workspace is on object storage: its URL and the driver's staged folder (the
    tasks' paths are under it; `wsio.staged`)."""

    url: str
    root: str


def _rebase(obj: Any, old: str, new: str) -> Any:
    """`obj` (a task: dataclass, tuple, dict, path string) with every path under `old` moved under `new`."""
    if isinstance(obj, str):
        return new + obj[len(old):] if obj == old or obj.startswith(old.rstrip("/") + "/") else obj
    if isinstance(obj, tuple):
        return tuple(_rebase(o, old, new) for o in obj)
    if isinstance(obj, list):
        return [_rebase(o, old, new) for o in obj]
    if isinstance(obj, dict):
        return {k: _rebase(v, old, new) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: _rebase(getattr(obj, f.name), old, new)
                                           for f in dataclasses.fields(obj) if f.init})
    return obj


def task_files(task: Any) -> tuple[list[str], list[str]]:
    """(the files a merge task reads, the files it writes): keys task, `PairTask`, `MonthTask`, `DroppedTask`."""
    if isinstance(task, PairTask):
        return [*task.keys, task.ranks], []
    if isinstance(task, MonthTask):
        return [src for src, _ in task.sources], [task.out]
    if isinstance(task, DroppedTask):
        return list(task.sources), [task.out]
    articles, out, _ = task
    return [articles], [out]


@dataclass(frozen=True)
class TaskOnNode:
    """A merge task (keys, pairs, store) on a Ray node that shares no disk with the driver.

    The task fetches the files it reads from the bucket (each verified against its marker's sha256;
    a node keeps what it fetched in its own scratch for the URL, `wsio.scratch_for`, so a node reads
    each part once), runs there, and publishes what it wrote as that file's own unit (a keys sidecar
    into its part's unit, a month shard as `corpus/articles/YYYY-MM`, a dropped table as
    `corpus/dropped/<stage>`: data first, marker last, so a node lost mid-task leaves nothing anyone
    reads and a retry elsewhere publishes the same bytes). The driver then fetches the outputs
    (`_fetch_outputs`). Memory per task is what the task itself holds: no file is read whole into memory
    to move it (`wsio.BLOCK`)."""

    remote: RemoteMerge
    fn: Callable[[Any], Any]

    def __call__(self, task: Any) -> Any:
        """Fetch `task`'s inputs into this node's scratch, run it there, publish its outputs."""
        from forecast_env.workspace import remote as wsio

        node = wsio.scratch_for(self.remote.url)
        inputs, outputs = task_files(task)
        with wsio.task_log(*_task_name(task)):
            bucket = wsio.RemoteWorkspace.at(self.remote.url)
            bucket.fetch([_rel(p, self.remote.root) for p in inputs], node)
            result = self.fn(_rebase(task, self.remote.root, str(node)))
            written = [r for r in (_rel(p, self.remote.root) for p in outputs) if (node / r).is_file()]
            if written:
                bucket.publish(node, relpaths=written)
        return result


def _task_name(task: Any) -> tuple[str, str]:
    # (kind, name) of a merge task for `wsio.task_log`
    if isinstance(task, PairTask):
        return "merge.pairs", f"{task.stage}{task.band if task.stage == 'band' else ''}/{task.partition}"
    if isinstance(task, MonthTask):
        return "merge.month", task.month
    if isinstance(task, DroppedTask):
        return "merge.dropped", task.stage
    return "merge.keys", Path(task[0]).name.split(".", 1)[0]


def _rel(path: str | Path, root: str) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError as exc:
        raise CorpusError(f"{path}: a merge file outside the staged workspace {root}") from exc


def _ensure_published(remote: RemoteMerge, paths: Sequence[str | Path]) -> None:
    """Publish those of the driver's files the nodes will read that no marker lists yet (parts are
    published as they finish and the staged folder was pulled from the bucket, so a listed file is
    the driver's; e.g. parts of a workspace first built locally and pushed without them)."""
    from forecast_env.workspace import remote as wsio

    rels = sorted({_rel(p, remote.root) for p in paths})
    bucket = wsio.RemoteWorkspace.at(remote.url)
    listed = {r for m in bucket.markers_of(wsio.unit_of(r) for r in rels).values() for r in m["files"]}
    missing = [r for r in rels if r not in listed]
    if missing:
        bucket.publish(Path(remote.root), relpaths=missing)


def _stat(path: Path) -> tuple[int, int] | None:
    return (path.stat().st_size, path.stat().st_mtime_ns) if path.exists() else None


def _fetch_outputs(remote: RemoteMerge, paths: Sequence[str | Path],
                   before: Sequence[tuple[int, int] | None] | None = None) -> list[bool]:
    """Bring the files nodes published into the driver's staged folder; per file, whether the driver's
    copy changed since `before` (its (size, mtime_ns) before the tasks ran; default: before this fetch).
    A task that ran on the driver's own machine with the same scratch wrote the copy itself: `before`
    taken ahead of the tasks still sees that."""
    from forecast_env.workspace import remote as wsio

    local = [Path(p) for p in paths]
    was = list(before) if before is not None else [_stat(p) for p in local]
    wsio.RemoteWorkspace.at(remote.url).fetch([_rel(p, remote.root) for p in local], remote.root)
    return [_stat(p) != b for p, b in zip(local, was)]


def _on_nodes(fn: Callable[[Any], Any], remote: RemoteMerge | None) -> Callable[[Any], Any]:
    return TaskOnNode(remote, fn) if remote is not None else fn


# ---------------------------------------------------------------------------------------------
# the merge
# ---------------------------------------------------------------------------------------------


@dataclass
class MergeResult:
    """What the merge wrote and what the funnel report needs (no article text)."""

    written: dict[str, list[str]]
    dropped: pa.Table            # (stage, reason, n): dropped rows counted per stage and reason, dedup included
    articles: ArticleTally       # the funnel's counts of the kept articles (one tally per month, summed)
    timings: dict[str, float]
    #: per other quality profile: what it would have kept of this profile's quality drops and dropped of
    #: what this profile passed, per reason (`profile_differences`)
    quality_profiles: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


def _map(fn: Callable[[Any], Any], items: list, engine: str, workers: int, ray_address: str | None,
         desc: str, progress: bool) -> list:
    from tqdm import tqdm

    out = []
    with tqdm(total=len(items), desc=desc, unit="task", disable=not progress) as bar:
        for res in map_unordered(fn, items, engine=engine, workers=workers, threads=1 if engine == "ray" else None,
                                 ray_address=ray_address, error=CorpusError,
                                 broken_advice="Rerun the build: finished parts and keys are kept."):
            out.append(res)
            bar.update(1)
    return out


def compute_keys(parts: Sequence[PartFiles], cfg: dict[str, Any], engine: str = "local", workers: int = 1,
                 ray_address: str | None = None, progress: bool = False, remote: RemoteMerge | None = None) -> int:
    """Write the keys sidecar of every part that lacks one; returns how many were computed. With
    `remote` (Ray nodes over object storage) each runs on a node (`TaskOnNode`) and the driver
    fetches the sidecars it published."""
    dedup_cfg = cfg.get("dedup") or {}
    todo = [(str(p.articles), str(p.keys), dedup_cfg) for p in parts if not p.keys.exists()]
    if todo:
        if remote is not None:
            _ensure_published(remote, [t[0] for t in todo])
        _map(_on_nodes(write_part_keys, remote), todo, engine, workers, ray_address, "dedup keys", progress)
        if remote is not None:
            _fetch_outputs(remote, [t[1] for t in todo])
    return len(todo)


def merge_parts(ws: Workspace, parts: Sequence[PartFiles], cfg: dict[str, Any], engine: str = "local",
                workers: int = 1, ray_address: str | None = None, progress: bool = False,
                rows_per_task: int = ROWS_PER_TASK, on_phase: Callable[[str], None] | None = None,
                remote: RemoteMerge | None = None) -> MergeResult:
    """Dedup every part's articles and write the store (month shards, dropped tables), out of core.

    Keys are computed on the executor (`workers` processes or Ray); the pair and store tasks run in
    this process for `engine="local"` (one task's memory at a time) and on Ray for `engine="ray"`
    (one Ray session for the three phases). `on_phase(name)` is called after each phase ("keys",
    "pairs", "store"), e.g. to sample memory. `remote`: the workspace is on object storage and `ws` is
    the driver's staged copy; on Ray every task then runs on whichever node, reading its inputs from
    the bucket and publishing its outputs there (`TaskOnNode`), so no node needs the driver's disk.
    """
    remote = remote if engine == "ray" else None
    if engine == "ray":
        from forecast_env.executor import ray_session

        with ray_session(ray_address, workers, CorpusError):
            return _merge(ws, parts, cfg, engine, workers, ray_address, progress, rows_per_task, on_phase, remote)
    return _merge(ws, parts, cfg, engine, workers, ray_address, progress, rows_per_task, on_phase, remote)


def find_duplicate_pairs(keys: Sequence[Path], dedup_cfg: dict[str, Any], work: Path, engine: str = "local",
                         workers: int = 1, ray_address: str | None = None, progress: bool = False,
                         rows_per_task: int = ROWS_PER_TASK,
                         on_phase: Callable[[str], None] | None = None, dropped: Sequence[Path] | None = None,
                         profile: str | None = None, remote: RemoteMerge | None = None) -> tuple[Order, pl.DataFrame]:
    """The dedup passes over keys sidecars: (the visibility order, (rank, partner, reason) per suppressed
    article). `work` holds the ranks file the pair tasks read; `on_phase("order")` after the order;
    `dropped`, `profile`: the parts' dropped tables and the active quality profile (`read_order`);
    `remote`: the pair tasks run on nodes over object storage (`TaskOnNode`), the ranks file published
    for them first."""
    order = read_order(keys, dropped, profile)
    if on_phase:
        on_phase("order")
    work.mkdir(parents=True, exist_ok=True)
    for tmp in work.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    ranks_path = work / "ranks.npy"
    atomic_save_npy(ranks_path, order.ranks)  # chunked Python writes: a full disk raises with its errno
    tasks = pair_tasks(keys, ranks_path, order, dedup_cfg, rows_per_task)
    task_workers = workers if engine == "ray" else 1
    if remote is not None:
        from forecast_env.workspace import remote as wsio

        _ensure_published(remote, keys)
        wsio.RemoteWorkspace.at(remote.url).publish(Path(remote.root), relpaths=[_rel(ranks_path, remote.root)])
    hits = _collect_hits(_map(_on_nodes(_run_pair_task, remote), tasks, engine, task_workers, ray_address,
                              "dedup pairs", progress))
    ranks_path.unlink(missing_ok=True)
    return order, hits


def _merge(ws: Workspace, parts: Sequence[PartFiles], cfg: dict[str, Any], engine: str, workers: int,
           ray_address: str | None, progress: bool, rows_per_task: int,
           on_phase: Callable[[str], None] | None, remote: RemoteMerge | None = None) -> MergeResult:
    phase = on_phase or (lambda name: None)
    t0 = time.perf_counter()
    dedup_cfg = dict(cfg.get("dedup") or {})
    compute_keys(parts, cfg, engine, workers, ray_address, progress, remote)
    t_keys = time.perf_counter()
    phase("keys")

    work = ws.corpus_dir / "merge"
    profile = active_profile(cfg.get("quality"))
    order, hits = find_duplicate_pairs([p.keys for p in parts], dedup_cfg, work, engine, workers, ray_address,
                                       progress, rows_per_task, phase, [p.dropped for p in parts], profile, remote)
    task_workers = workers if engine == "ray" else 1
    t_pairs = time.perf_counter()
    phase("pairs")

    dedup_rows = _dedup_drops(parts, order, hits, keep_text=bool(cfg.get("keep_dropped_text")))
    plans_path = work / "months.json"
    try:
        recorded = json.loads(plans_path.read_text()) if plans_path.exists() else {}
    except json.JSONDecodeError:
        recorded = {}
    store_tasks: list[MonthTask | DroppedTask] = list(_month_tasks(ws, parts, order, hits, recorded))
    plans = {t.month: t.plan for t in store_tasks if isinstance(t, MonthTask)}
    months = [t.month for t in store_tasks if isinstance(t, MonthTask)]  # only month tasks so far
    store_tasks += [DroppedTask(stage=s, sources=tuple(str(p.dropped) for p in parts),
                                extra=dedup_rows if s == "dedup" else None, out=str(ws.dropped_dir / f"{s}.parquet"),
                                profile=profile)
                    for s in schema.CORPUS_STAGES]
    del order
    written: dict[str, list[str]] = {"articles": [], "dropped": [], "removed": []}
    reports: dict[str, ArticleTally] = {}
    stage_counts: list[pa.Table] = []
    shards: dict[str, dict] = {}
    differences: dict[str, dict[str, dict[str, int]]] = {}
    if remote is not None:
        from forecast_env.workspace import remote as wsio

        _ensure_published(remote, [f for t in store_tasks for f in task_files(t)[0]])
        # the nodes publish month shards and dropped tables one by one: the corpus's own marker goes
        # first, so no reader takes a half-new store as a generation (`wsio.pull_workspace`)
        wsio.RemoteWorkspace.at(remote.url).unpublish("corpus")
    out_of = {("articles" if isinstance(t, MonthTask) else "dropped", t.month if isinstance(t, MonthTask) else t.stage):
              t.out for t in store_tasks}
    stat_before = {out: _stat(Path(out)) for out in out_of.values()} if remote is not None else {}
    for kind, name, did_write, report, stat in _map(_on_nodes(_run_store_task, remote), store_tasks, engine,
                                                    task_workers, ray_address, "store", progress):
        crash_point("merge.store")
        if remote is not None:  # a node wrote it: bring it here; written = the driver's copy changed
            out = out_of[(kind, name)]
            did_write = _fetch_outputs(remote, [out], [stat_before[out]])[0]
            if kind == "articles":
                stat = _stat(Path(out))
        if did_write:
            written[kind].append(name)
        if isinstance(report, ArticleTally):
            reports[name] = report
            shards[name] = {"plan": plans[name], "size": stat[0], "mtime_ns": stat[1]}
        else:
            stage_counts.append(report)
            add_differences(differences, stat)
    written["articles"].sort()
    written["dropped"] = [s for s in schema.CORPUS_STAGES if s in written["dropped"]]
    for old in sorted(ws.articles_dir.glob("????-??.parquet")):
        if old.stem not in months:
            old.unlink()
            written["removed"].append(old.name)
    crash_point("merge.plans")
    atomic_write_json(plans_path, dict(sorted(shards.items())))

    # counted while the dropped tables were written: the report needs (stage, reason) counts only
    dropped = dropped_counts(pa.concat_tables(stage_counts))
    articles = combine_tallies([reports[m] for m in sorted(reports)])
    t_end = time.perf_counter()
    phase("store")
    timings = {"keys_s": round(t_keys - t0, 3), "pairs_s": round(t_pairs - t_keys, 3),
               "store_s": round(t_end - t_pairs, 3)}
    quality_profiles = {name: {side: dict(sorted(v.items())) for side, v in sides.items()}
                        for name, sides in sorted(differences.items())}
    return MergeResult(written=written, dropped=dropped, articles=articles, timings=timings,
                       quality_profiles=quality_profiles)


def write_file_errors(ws: Workspace, file_errors: list[dict]) -> bool:
    """The table of files that could not be read whole."""
    fe = pa.Table.from_pylist(sorted(file_errors, key=lambda e: e["warc_file"]), schema=schema.FILE_ERRORS)
    return write_if_changed(ws.corpus_dir / "file_errors.parquet", fe)


# ---------------------------------------------------------------------------------------------
# the in-memory reference (the merge before it went out of core), for tests and benchmarks
# ---------------------------------------------------------------------------------------------


def apply_dedup(articles: pa.Table, cfg: dict[str, Any]) -> tuple[pl.DataFrame, pa.Table]:
    """Remove duplicates (docs/design.md §2.dedup) in memory: (kept articles, dropped rows of stage "dedup")."""
    df = pl.from_arrow(articles)
    if not isinstance(df, pl.DataFrame):  # a table with no rows may come back as a Series
        df = pl.DataFrame(df)
    df = df.sort(["doc_id", "warc_file", "warc_offset"])
    repeat = df.filter(pl.col("doc_id").is_duplicated() & ~pl.col("doc_id").is_first_distinct())
    df = df.filter(pl.col("doc_id").is_first_distinct())
    dups = find_duplicates(df, cfg.get("dedup") or {})
    rows = df.join(dups, on="doc_id", how="inner")
    kept = df.join(dups.select("doc_id"), on="doc_id", how="anti")
    dropped = pl.concat([
        rows.select(["doc_id", "url", "warc_file", "warc_offset", pl.lit("dedup").alias("stage"),
                     "reason", pl.lit(None, dtype=pl.Utf8).alias("detail"), "dup_of"]),
        repeat.select(["doc_id", "url", "warc_file", "warc_offset", pl.lit("dedup").alias("stage"),
                       pl.lit("dup_canonical_url").alias("reason"),
                       pl.lit("same record").alias("detail"), pl.col("doc_id").alias("dup_of")]),
    ])
    return kept, conform(dropped.to_arrow(), schema.DROPPED)


def write_store(ws: Workspace, articles: pl.DataFrame, dropped: pa.Table, file_errors: list[dict]) -> dict[str, list[str]]:
    """In memory: month shards, dropped tables and file errors; only changed files are rewritten."""
    written: dict[str, list[str]] = {"articles": [], "dropped": [], "removed": []}
    df = articles.with_columns(pl.col("day").dt.strftime("%Y-%m").alias("_month")).sort(_SORT_SHARD)
    months = sorted(df["_month"].unique().to_list()) if df.height else []
    for month in months:
        part = df.filter(pl.col("_month") == month)
        table = conform(part.drop("_month").to_arrow(), schema.ARTICLES)
        if write_if_changed(ws.articles_dir / f"{month}.parquet", table):
            written["articles"].append(month)
    for old in ws.articles_dir.glob("????-??.parquet"):
        if old.stem not in months:
            old.unlink()
            written["removed"].append(old.name)
    ddf = _frame(dropped)
    for stage in schema.CORPUS_STAGES:
        sub = ddf.filter(pl.col("stage") == stage).sort(_SORT_DROPPED, nulls_last=True)
        if write_if_changed(ws.dropped_dir / f"{stage}.parquet", conform(sub.to_arrow(), schema.DROPPED)):
            written["dropped"].append(stage)
    write_file_errors(ws, file_errors)
    return written


def merge_in_memory(ws: Workspace, parts: Sequence[PartFiles], cfg: dict[str, Any],
                    file_errors: list[dict] | None = None) -> tuple[dict, pa.Table, pa.Table, dict]:
    """The reference merge: every part's articles, bodies included, in this process.

    Returns (written, all dropped rows, kept articles, the other profiles' differences), the inputs of
    the funnel report.
    """
    profile = active_profile(cfg.get("quality"))
    raw = [pq.read_table(p.dropped) for p in parts]
    differences: dict[str, dict[str, dict[str, int]]] = {}
    for table in raw:
        if "profile" in table.column_names:
            add_differences(differences, profile_differences(table.filter(pc.equal(table["stage"], "quality")),
                                                             profile))
    views = [profile_view(pq.read_table(p.articles), d, profile) for p, d in zip(parts, raw)]
    articles = pa.concat_tables([a for a, _ in views]).cast(schema.ARTICLES)
    dropped = pa.concat_tables([d for _, d in views]).cast(schema.DROPPED)
    del views
    articles_df, dedup_drops = apply_dedup(articles, cfg)
    del articles
    dropped = pa.concat_tables([dropped, dedup_drops])
    written = write_store(ws, articles_df, dropped, list(file_errors or []))
    return written, dropped, articles_df.to_arrow(), differences


__all__ = [
    "MergeResult",
    "PartFiles",
    "apply_dedup",
    "compute_keys",
    "find_duplicate_pairs",
    "find_pairs",
    "keys_path",
    "merge_in_memory",
    "merge_parts",
    "part_dropped",
    "part_keys",
    "profile_differences",
    "profile_view",
    "read_order",
    "write_file_errors",
    "write_if_changed",
    "write_store",
]
