"""Step 1 of the merge: each part's dedup keys, computed once and cached beside the part (its sidecar).

The keys are the columns the dedup rule compares: doc id, file and offset, visibility order keys, day,
the URL, canonical and title keys and the MinHash band keys of the body. A part's body is read here
and nowhere else before the month shards are written.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forecast_env.corpus_build.dedup import band_arrays, make_hasher, normalize_title, normalize_url
from forecast_env.crashpoints import crash_point
from forecast_env.errors import CorpusError
from forecast_env.store import atomic_write_table
from forecast_env.workspace.task import WorkItem

#: Bump when the keys a part's sidecar holds change, so sidecars are recomputed.
KEYS_VERSION = 1
#: The `dedup` settings the keys depend on (the others apply when the stages run).
KEY_SETTINGS = ("num_perm", "seed", "minhash_scheme", "shingle_hash", "shingle_words", "bands", "rows")
#: The article columns the keys pass reads from a part (the only pass before the store that reads a body).
KEY_SOURCE_COLUMNS = ("doc_id", "url", "canonical_url", "title", "body", "t", "visible_at", "t_crawl", "day",
                      "warc_file", "warc_offset")


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


@dataclass(frozen=True)
class KeysTask(WorkItem):
    """The keys sidecar of one part: its articles table in, the sidecar out (paths under `root`)."""

    kind: ClassVar[str] = "merge.keys"
    articles: str
    out: str
    dedup: dict[str, Any]

    @property
    def name(self) -> str:
        """The part's name (its file name up to the first dot)."""
        return Path(self.articles).name.split(".", 1)[0]

    def inputs(self) -> tuple[str, ...]:
        """The part's articles table."""
        return (self.articles,)

    def outputs(self, result: Any) -> tuple[str, ...]:
        """The keys sidecar."""
        return (self.out,)


def write_part_keys(task: KeysTask) -> str:
    """Compute and atomically write the keys sidecar of one part; returns its path."""
    crash_point("merge.task")  # at the start of each keys, pair and store task (a worker lost mid-merge)
    table = pq.read_table(task.path(task.articles), columns=list(KEY_SOURCE_COLUMNS))
    out = task.path(task.out)
    atomic_write_table(out, part_keys(table, task.dedup), None)
    return str(out)
