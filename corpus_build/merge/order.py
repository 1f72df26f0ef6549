"""Step 2 of the merge: the order of the whole build, from the keys sidecars' order columns alone.

The records read twice (same doc id: a WARC file under two names) and each article's rank in
visibility order (`dedup.order_articles`' order), over global row ids (the parts concatenated in input
order). No keys and no bodies are read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forecast_env.corpus_build.merge.frames import frame
from forecast_env.corpus_build.merge.profiles import profile_dropped_ids

#: The columns of the order pass (no keys, no text).
ORDER_COLUMNS = ("doc_id", "warc_file", "warc_offset", "v", "t_crawl", "day")


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
        df = frame(table)
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
