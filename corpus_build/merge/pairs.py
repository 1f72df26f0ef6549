"""Step 3 of the merge: the dedup pairs, from key columns read per stage, in tasks of bounded memory.

The three stages of `dedup` (canonical URL, title, MinHash bands) run over key columns read one stage
(one band) at a time, split into partitions by key hash so that a task's memory is bounded; each task
returns only the (rank, earlier partner) pairs it found. `--engine ray` runs these tasks on Ray.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from forecast_env.corpus_build.dedup import (
    band_partners,
    combine_partners,
    min_partner,
    title_partners,
    url_pairs,
    url_partners,
)
from forecast_env.corpus_build.merge.frames import series
from forecast_env.corpus_build.merge.order import Order
from forecast_env.crashpoints import crash_point
from forecast_env.workspace.task import WorkItem, relative_to

#: Rows per pair-finding task: a stage's keys are split into ceil(articles / this) hash partitions.
ROWS_PER_TASK = 4_000_000
_HASH_SEED = 20250301


@dataclass(frozen=True)
class PairTask(WorkItem):
    """One stage (url, title, or band b) over one hash partition of its keys (paths under `root`)."""

    kind: ClassVar[str] = "merge.pairs"
    stage: str
    band: int
    partition: int
    partitions: int
    keys: tuple[str, ...]
    ranks: str                    # .npy file of the ranks per global row id
    offsets: tuple[int, ...]
    cfg: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The stage (with its band) and the partition, e.g. `band3/0`."""
        return f"{self.stage}{self.band if self.stage == 'band' else ''}/{self.partition}"

    def inputs(self) -> tuple[str, ...]:
        """Every keys sidecar and the ranks file."""
        return (*self.keys, self.ranks)


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
    ranks = np.load(task.path(task.ranks), mmap_mode="r")
    frames: list[pl.DataFrame] = []
    bands: list[tuple[np.ndarray, pa.Array]] = []
    for i, rel in enumerate(task.keys):
        path = task.path(rel)
        r = np.asarray(ranks[task.offsets[i]:task.offsets[i + 1]])
        if task.stage == "url":
            t = pq.read_table(path, columns=["url_key", "canon_key"])
            keep = r >= 0
            pairs = url_pairs(r[keep], series(t["canon_key"]).filter(keep),
                              series(t["url_key"]).filter(keep))
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
               rows_per_task: int = ROWS_PER_TASK, *, root: str | Path) -> list[PairTask]:
    """Every (stage, band, partition) task of the dedup pairs (paths relative to the workspace `root`)."""
    partitions = max(1, math.ceil(order.rows / max(1, rows_per_task)))
    common: dict[str, Any] = {"root": str(root), "keys": tuple(relative_to(root, k) for k in keys),
                              "ranks": relative_to(root, ranks_path), "offsets": tuple(int(o) for o in order.offsets),
                              "cfg": dict(cfg), "partitions": partitions}
    stages = [("url", 0), ("title", 0)] + [("band", b) for b in range(int(cfg.get("bands", 8)))]
    return [PairTask(stage=s, band=b, partition=j, **common) for s, b in stages for j in range(partitions)]


def collect_hits(results: Sequence[tuple[PairTask, pl.DataFrame]]) -> pl.DataFrame:
    """(rank, partner, reason) per suppressed article, from every pair task's pairs."""
    by_stage: dict[str, list[pl.DataFrame]] = {"url": [], "title": [], "band": []}
    for task, pairs in results:
        by_stage[task.stage].append(pairs)
    canon = min_partner(by_stage["url"])
    title = min_partner(by_stage["title"])  # one title per article: partitions never share a rank
    lsh = min_partner(by_stage["band"])
    return combine_partners(canon, title, lsh)


def run_pair_task(task: PairTask) -> tuple[PairTask, pl.DataFrame]:
    """One pair task, returned with its pairs (the executor yields results out of order)."""
    crash_point("merge.task")
    return task, find_pairs(task)
