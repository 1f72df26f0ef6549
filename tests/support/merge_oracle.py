"""The in-memory merge: the reference the out-of-core merge (corpus_build/merge/) is tested against.

The merge before it went out of core: every part's articles, bodies included, in one process, dedup
over the whole table (`dedup.find_duplicates`), then the store written from it. tests/corpus_build/
test_merge.py and benchmarks/corpus/merge.py compare `merge_parts` with it byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forecast_env import schema
from forecast_env.corpus_build.dedup import find_duplicates
from forecast_env.corpus_build.merge import PartFiles, profile_differences, profile_view, write_file_errors
from forecast_env.corpus_build.merge.frames import frame
from forecast_env.corpus_build.merge.profiles import add_differences
from forecast_env.corpus_build.merge.store import _SORT_DROPPED, _SORT_SHARD, write_if_changed
from forecast_env.corpus_build.quality import active_profile
from forecast_env.store import Workspace, conform


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
    ddf = frame(dropped)
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
