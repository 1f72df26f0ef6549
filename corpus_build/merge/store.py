"""Step 4 of the merge: the store, each month shard and dropped-stage table from only the rows it holds.

A month shard is assembled from only the kept rows of the parts that hold that month, and each
dropped-stage table from only that stage's rows; a file is rewritten only when its bytes change
(`write_if_changed`), and one of more than `ROW_GROUP_ROWS` rows is written one row group at a time
(`RowGroupWriter`). These tasks run on Ray too with `--engine ray`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forecast_env import schema
from forecast_env.corpus_build.merge.frames import frame
from forecast_env.corpus_build.merge.keys import PartFiles
from forecast_env.corpus_build.merge.order import Order
from forecast_env.corpus_build.merge.profiles import add_differences, part_dropped
from forecast_env.corpus_build.report import (
    DROPPED_COUNTS,
    ArticleTally,
    combine_tallies,
    dropped_counts,
    tally_articles,
)
from forecast_env.crashpoints import crash_point
from forecast_env.store import (
    Workspace,
    atomic_write_bytes,
    commit_temp,
    conform,
    naming_full_disk,
    sha256_file,
    temp_beside,
)
from forecast_env.workspace.task import WorkItem, relative_to

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
_SORT_SHARD = ["day", "doc_id", "warc_file", "warc_offset"]
_SORT_DROPPED = ["warc_file", "warc_offset", "doc_id", "reason"]


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
class MonthTask(WorkItem):
    """One month shard: the kept rows of each part that holds the month (paths under `root`)."""

    kind: ClassVar[str] = "merge.month"
    month: str
    sources: tuple[tuple[str, np.ndarray], ...]   # (articles file, row numbers within it, ascending)
    out: str
    plan: str = ""                                 # digest of the sources (`month_plan`)
    recorded: tuple[int, int] | None = None        # (size, mtime_ns) of the shard last written for this plan

    @property
    def name(self) -> str:
        """The month, YYYY-MM."""
        return self.month

    def inputs(self) -> tuple[str, ...]:
        """The articles tables of the parts that hold the month."""
        return tuple(src for src, _ in self.sources)

    def outputs(self, result: Any) -> tuple[str, ...]:
        """The month shard."""
        return (self.out,)


def month_plan(month: str, sources: Sequence[tuple[str, np.ndarray]]) -> str:
    """Digest of what a month shard is made of: each part file (path, size, mtime) and its rows."""
    h = hashlib.sha256(f"{STORE_VERSION}|{pa.__version__}|{schema.ARTICLES}|{month}".encode())
    for path, rows in sources:
        st = Path(path).stat()
        h.update(f"|{path}|{st.st_size}|{st.st_mtime_ns}|".encode())
        h.update(np.ascontiguousarray(rows, dtype=np.int64).tobytes())
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class DroppedTask(WorkItem):
    """One dropped-stage table: that stage's rows of every part, plus the dedup drops for stage dedup
    (paths under `root`)."""

    kind: ClassVar[str] = "merge.dropped"
    stage: str
    sources: tuple[str, ...]
    extra: pa.Table | None
    out: str
    profile: str | None = None  # the active quality profile (a part holds every profile's rows)

    @property
    def name(self) -> str:
        """The stage."""
        return self.stage

    def inputs(self) -> tuple[str, ...]:
        """Every part's dropped table."""
        return self.sources

    def outputs(self, result: Any) -> tuple[str, ...]:
        """The stage's table."""
        return (self.out,)


def month_table(task: MonthTask) -> pa.Table:
    """A month shard's table, sorted by (day, doc id), in the store's schema."""
    tables = [pq.read_table(task.path(path)).take(pa.array(rows, pa.int64())) for path, rows in task.sources]
    table = pa.concat_tables(tables).cast(schema.ARTICLES)
    del tables
    # sort on the key columns only, then gather the rows once (no second copy of the text)
    order = frame(table.select(_SORT_SHARD)).with_row_index("i").sort(_SORT_SHARD)["i"].to_numpy()
    return conform(table.take(pa.array(order, pa.int64())), schema.ARTICLES).combine_chunks()


def month_rows(task: MonthTask) -> int:
    """How many rows a month shard will hold."""
    return int(sum(len(rows) for _, rows in task.sources))


def _month_order(task: MonthTask) -> dict[int, np.ndarray]:
    """Each source's rows' positions in the shard (its `rows` order), from the sort columns alone."""
    sort_types = pa.schema([schema.ARTICLES.field(c) for c in _SORT_SHARD])
    frames = []
    for i, (path, rows) in enumerate(task.sources):
        keys = pq.read_table(task.path(path), columns=_SORT_SHARD).take(pa.array(rows, pa.int64())).cast(sort_types)
        frames.append(frame(keys).with_columns(pl.lit(i, pl.Int32).alias("_src"),
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
            table = pq.read_table(task.path(path)).take(pa.array(rows, pa.int64())).cast(schema.ARTICLES)
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
    out = task.path(task.out)
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
        table, part_differences = part_dropped(task.path(path), task.stage, task.profile)
        tables.append(table)
        add_differences(differences, part_differences)
    if task.extra is not None:
        tables.append(task.extra)
    ddf = frame(pa.concat_tables(tables) if tables else schema.DROPPED.empty_table())
    return conform(ddf.sort(_SORT_DROPPED, nulls_last=True).to_arrow(), schema.DROPPED), differences


def _stream_files(task: DroppedTask) -> list[tuple[str, str | None]] | None:
    """(WARC file, source) in sorted file order when every source's rows of the stage come from one
    WARC file of its own (a part is one file) and every extra row names one of them; else None."""
    files: dict[str, str] = {}
    for path in task.sources:
        col = pq.read_table(task.path(path), columns=["warc_file"], filters=[("stage", "==", task.stage)])["warc_file"]
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
    out = task.path(task.out)
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
                table, part_differences = part_dropped(task.path(path), task.stage, task.profile)
                tables.append(table)
                add_differences(differences, part_differences)
            if (name,) in extra:
                tables.append(extra.pop((name,)).to_arrow().cast(schema.DROPPED))
            piece = pa.concat_tables(tables)
            counts.append(dropped_counts(piece))
            writer.add(conform(frame(piece).sort(_SORT_DROPPED, nulls_last=True).to_arrow(), schema.DROPPED))
        counted = dropped_counts(pa.concat_tables(counts)) if counts else DROPPED_COUNTS.empty_table()
        return task.stage, writer.close(), counted, differences


def run_store_task(task: MonthTask | DroppedTask) -> tuple[str, str, bool, ArticleTally | pa.Table, Any]:
    """(kind, name, written, what the funnel counts of it, then the shard's (size, mtime_ns) for a month
    or the other profiles' differences for a dropped stage)."""
    crash_point("merge.task")
    if isinstance(task, MonthTask):
        month, written, tally, stat = write_month(task)
        return "articles", month, written, tally, stat
    stage, written, counts, differences = write_dropped(task)
    return "dropped", stage, written, counts, differences


def month_tasks(ws: Workspace, parts: Sequence[PartFiles], order: Order, hits: pl.DataFrame,
                recorded: dict[str, dict], root: str = "") -> list[MonthTask]:
    """A task per month of the kept articles (hits suppressed; paths relative to `root`, "": as they
    are); a shard written for the same plan (`recorded`: the merge's months.json) and untouched since
    is not rebuilt."""
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
        tasks.append(MonthTask(root=root, month=month,
                               sources=tuple((relative_to(root, path), rows) for path, rows in sources),
                               out=relative_to(root, ws.articles_dir / f"{month}.parquet"), plan=plan,
                               recorded=(rec["size"], rec["mtime_ns"]) if rec.get("plan") == plan else None))
    return tasks


def write_file_errors(ws: Workspace, file_errors: list[dict]) -> bool:
    """The table of files that could not be read whole."""
    fe = pa.Table.from_pylist(sorted(file_errors, key=lambda e: e["warc_file"]), schema=schema.FILE_ERRORS)
    return write_if_changed(ws.corpus_dir / "file_errors.parquet", fe)
