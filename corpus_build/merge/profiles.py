"""Quality profiles in the merge: a part holds every profile's verdicts; the merge keeps the active one's.

The per-WARC stages record, for each record, which quality profiles drop it (`schema.PART_DROPPED`):
a part's articles table holds the articles any profile keeps. These functions give one profile's view
of a part (its articles, its drop rows) and what the other profiles decide differently, for the funnel.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forecast_env import schema
from forecast_env.corpus_build.quality import PROFILE_NAMES
from forecast_env.store import conform


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

