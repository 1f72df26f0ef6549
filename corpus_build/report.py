"""The corpus funnel report (docs/design.md §2): records in, drops per stage and reason, kept, timestamp
sources, duplicates per stage, leak flags and files that could not be read whole.

`build_report` returns a JSON-able dict (written to `WS/corpus/report.json`); `render_markdown`
and `render_summary` turn it into the Markdown funnel and a short console summary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from forecast_env import schema
from forecast_env.errors import WorkspaceError
from forecast_env.store import Workspace


def _counts(df: pl.DataFrame, col: str) -> dict[str, int]:
    """Rows per value of `col`, most first; a frame with a count column `n` counts its rows n times."""
    if df.height == 0 or col not in df.columns:
        return {}
    size = pl.col("n").sum().alias("len") if "n" in df.columns else pl.len()
    vc = df.group_by(col).agg(size).sort(["len", col], descending=[True, False])
    return {str(k): int(v) for k, v in zip(vc[col].to_list(), vc["len"].to_list())}


def dropped_counts(dropped: pa.Table) -> pa.Table:
    """(stage, reason, n): a dropped table's rows counted per stage and reason (what `build_report`
    reads; summing per part keeps the merge's memory independent of the number of dropped rows)."""
    if dropped.num_rows == 0:
        return DROPPED_COUNTS.empty_table()
    weighted = "n" in dropped.column_names  # counts already: add them up
    df = pl.DataFrame(pl.from_arrow(dropped.select(["stage", "reason", *(["n"] if weighted else [])])))
    agg = df.group_by(["stage", "reason"]).agg(pl.col("n").sum() if weighted else pl.len().alias("n"))
    return agg.sort(["stage", "reason"]).to_arrow().cast(DROPPED_COUNTS)


#: The schema of `dropped_counts`.
DROPPED_COUNTS = pa.schema([("stage", pa.string()), ("reason", pa.string()), ("n", pa.int64())])


def dropped_total(dropped: pa.Table) -> int:
    """How many dropped rows a dropped table or its counts (`dropped_counts`) stand for."""
    return int(pc.sum(dropped["n"]).as_py() or 0) if "n" in dropped.column_names else dropped.num_rows


#: The columns of an article tally (`tally_articles`): what the funnel counts, with a count `n`.
_TALLY_KEYS = ("t_source", "t_rule", "t_pub_rule", "t_mod_rule", "visible_source", "leak_flag", "leak_kind",
               "market_quote", "month", "net")


@dataclass
class ArticleTally:
    """The kept articles as the funnel report counts them, without one row per article: `keys` holds
    one row per distinct combination of `_TALLY_KEYS` with its count `n`, `moves` one row per
    visibility rule (articles moved, days in total, fewest and most days). Tallies of disjoint sets
    of articles add up (`combine_tallies`), so the merge sums one per month shard."""

    keys: pl.DataFrame
    moves: pl.DataFrame

    @property
    def articles(self) -> int:
        return int(self.keys["n"].sum()) if self.keys.height else 0


_KEY_SCHEMA = pl.Schema({"t_source": pl.Utf8, "t_rule": pl.Utf8, "t_pub_rule": pl.Utf8, "t_mod_rule": pl.Utf8,
                         "visible_source": pl.Utf8, "leak_flag": pl.Boolean, "leak_kind": pl.Utf8,
                         "market_quote": pl.Boolean, "month": pl.Utf8, "net": pl.Int64, "n": pl.Int64})
_MOVE_SCHEMA = pl.Schema({"rule": pl.Utf8, "articles": pl.Int64, "days_total": pl.Int64, "days_min": pl.Int64,
                          "days_max": pl.Int64})


def tally_articles(articles: pa.Table) -> ArticleTally:
    """The funnel's counts of kept articles (a table with the columns `merge.REPORT_COLUMNS`)."""
    if articles.num_rows == 0:
        return ArticleTally(pl.DataFrame(schema=_KEY_SCHEMA), pl.DataFrame(schema=_MOVE_SCHEMA))
    adf = pl.DataFrame(pl.from_arrow(articles))
    keys = adf.select(
        *(pl.col(c).cast(pl.Utf8) for c in ("t_source", "t_rule", "t_pub_rule", "t_mod_rule", "visible_source")),
        pl.col("leak_flag").fill_null(False),
        pl.col("leak_reason").str.split(":").list.first().alias("leak_kind"),
        pl.col("market_quote").fill_null(False),
        pl.col("day").dt.strftime("%Y-%m").alias("month"),
        pl.col("visible_moves").list.eval(pl.element().struct.field("days")).list.sum().fill_null(0).alias("net"),
    ).group_by(list(_TALLY_KEYS)).len("n")
    moves = pl.DataFrame(schema=_MOVE_SCHEMA)
    flat = adf.select(pl.col("visible_moves").explode()).drop_nulls()
    if flat.height:
        moves = flat.unnest("visible_moves").group_by("rule").agg(
            pl.len().alias("articles"), pl.col("days").sum().alias("days_total"),
            pl.col("days").min().alias("days_min"), pl.col("days").max().alias("days_max"))
    return ArticleTally(keys.cast(_KEY_SCHEMA), moves.cast(_MOVE_SCHEMA))


def combine_tallies(tallies: Sequence[ArticleTally]) -> ArticleTally:
    """The tally of the union of disjoint article sets."""
    if not tallies:
        return tally_articles(pa.table({}))
    keys = pl.concat([t.keys for t in tallies]).group_by(list(_TALLY_KEYS)).agg(pl.col("n").sum())
    moves = pl.concat([t.moves for t in tallies]).group_by("rule").agg(
        pl.col("articles").sum(), pl.col("days_total").sum(), pl.col("days_min").min(), pl.col("days_max").max())
    return ArticleTally(keys.cast(_KEY_SCHEMA), moves.cast(_MOVE_SCHEMA))


def visibility_moves(articles: pa.Table | ArticleTally) -> dict[str, Any]:
    """How many articles each visibility rule moved away from the paper's day, and by how many days
    (docs/design.md §2.timestamps); `net_days`: articles per net shift of their day."""
    tally = articles if isinstance(articles, ArticleTally) else tally_articles(articles)
    if tally.articles == 0:
        return {"sources": {}, "rules": {}, "net_days": {}, "articles_moved": 0}
    rules = {r.pop("rule"): {k: int(v) for k, v in r.items()} for r in tally.moves.sort("rule").iter_rows(named=True)}
    counts = tally.keys.group_by("net").agg(pl.col("n").sum()).sort("net")
    net_days = {str(int(d)): int(n) for d, n in zip(counts["net"].to_list(), counts["n"].to_list())}
    return {"sources": _counts(tally.keys, "visible_source"), "rules": rules, "net_days": net_days,
            "articles_moved": int(sum(n for d, n in net_days.items() if d != "0"))}


def build_report(counters: Sequence[Mapping[str, Any]], dropped: pa.Table, articles: pa.Table | ArticleTally,
                 file_errors: Sequence[Mapping[str, Any]],
                 quality_profiles: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None) -> dict[str, Any]:
    """The funnel of one build from per-file counters, all dropped rows (or their `dropped_counts`),
    the kept articles (or their `tally_articles`) and what the other quality profiles would have
    decided differently (`merge.profile_differences`, summed)."""
    # a pyarrow table gives a DataFrame (pyarrow is untyped here, so polars' overloads cannot tell)
    ddf = cast(pl.DataFrame, pl.from_arrow(dropped_counts(dropped))) if dropped.num_rows else pl.DataFrame(
        schema={"stage": pl.Utf8, "reason": pl.Utf8, "n": pl.Int64})
    tally = articles if isinstance(articles, ArticleTally) else tally_articles(articles)
    adf = tally.keys
    records_in = int(sum(int(c.get("records_in", 0)) for c in counters))
    stages: list[dict[str, Any]] = []
    remaining = records_in
    for stage in schema.CORPUS_STAGES:
        sub = ddf.filter(pl.col("stage") == stage)
        n = int(sub["n"].sum())
        stages.append({"stage": stage, "in": remaining, "dropped": n, "out": remaining - n,
                       "reasons": _counts(sub, "reason")})
        remaining -= n
    kept = tally.articles
    sources = _counts(adf, "t_source")
    shares = {s: (round(100.0 * sources.get(s, 0) / kept, 2) if kept else 0.0) for s in ("pub", "mod", "crawl")}
    leak = adf.filter(pl.col("leak_flag"))
    return {
        "files": len(counters),
        "records_in": records_in,
        "non_response_skipped": int(sum(int(c.get("non_response_skipped", 0)) for c in counters)),
        "stages": stages,
        "kept": kept,
        "consistent": remaining == kept,
        "timestamps": {
            "source_counts": {s: sources.get(s, 0) for s in ("pub", "mod", "crawl")},
            "source_share_pct": shares,
            "rules": _counts(adf, "t_rule"),
            "pub_rules": _counts(adf.drop_nulls("t_pub_rule"), "t_pub_rule"),
            "mod_rules": _counts(adf.drop_nulls("t_mod_rule"), "t_mod_rule"),
        },
        "dedup": {r: stages[-1]["reasons"].get(r, 0) for r in schema.CORPUS_REASONS["dedup"]},
        "visibility": visibility_moves(tally),
        "leak_flags": int(leak["n"].sum()) if leak.height else 0,
        "leak_kinds": _counts(leak, "leak_kind"),
        "market_quotes": int(adf.filter(pl.col("market_quote"))["n"].sum()) if kept else 0,
        "months": dict(sorted(_counts(adf, "month").items())),
        "file_errors": [dict(e) for e in file_errors],
        "quality_profiles": {name: {side: dict(sorted(v.items())) for side, v in sides.items()}
                             for name, sides in sorted((quality_profiles or {}).items())},
    }


def render_other_profiles(report: Mapping[str, Any]) -> list[str]:
    """The funnel's lines on what the other quality profile(s) would have decided differently."""
    lines: list[str] = []
    for name, sides in (report.get("quality_profiles") or {}).items():
        keep, drop = sides.get("would_keep") or {}, sides.get("would_drop") or {}
        lines += ["", f"## Quality: the {name} profile", "",
                  (f"It would have kept {sum(keep.values()):,} of this build's quality drops and dropped "
                   f"{sum(drop.values()):,} of the records this build's profile passed "
                   "(docs/corpus_quality.md)."), "",
                  "| filter reason | would keep (dropped here) | would drop (passed here) |", "|---|---:|---:|"]
        lines += [f"| {r} | {keep.get(r, 0):,} | {drop.get(r, 0):,} |" for r in sorted(set(keep) | set(drop))]
    return lines


def render_markdown(report: Mapping[str, Any]) -> str:
    """The funnel as Markdown (like the paper's Table 5, one line per quality filter)."""
    lines = ["# Corpus build report", "",
             (f"{report['files']} WARC files, {report['records_in']:,} response records "
              f"({report['non_response_skipped']:,} non-response records skipped)."), "",
             "## Funnel", "", "| stage | in | dropped | out |", "|---|---:|---:|---:|"]
    for s in report["stages"]:
        lines.append(f"| {s['stage']} | {s['in']:,} | {s['dropped']:,} | {s['out']:,} |")
    lines += ["", f"Kept: **{report['kept']:,}** articles.", "", "## Drops per reason", "",
              "| stage | reason | dropped |", "|---|---|---:|"]
    for s in report["stages"]:
        for reason, n in s["reasons"].items():
            lines.append(f"| {s['stage']} | {reason} | {n:,} |")
    ts = report["timestamps"]
    lines += ["", "## Timestamp sources", "", "| source | articles | share |", "|---|---:|---:|"]
    for src in ("pub", "mod", "crawl"):
        lines.append(f"| {src} | {ts['source_counts'][src]:,} | {ts['source_share_pct'][src]:.1f}% |")
    lines += ["", "| rule that gave t | articles |", "|---|---:|"]
    lines += [f"| {rule} | {n:,} |" for rule, n in ts["rules"].items()]
    lines += ["", "## Duplicates removed", "", "| stage | removed |", "|---|---:|"]
    lines += [f"| {r} | {n:,} |" for r, n in report["dedup"].items()]
    vis = report.get("visibility") or {}
    lines += ["", "## Visibility time", "",
              (f"{vis.get('articles_moved', 0):,} articles are visible on another day than the paper's rule "
               "(publication time, naive = UTC) gives; which rule moved them and by how many days:"), "",
              "| rule | articles | days total | min | max |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r} | {v['articles']:,} | {v['days_total']:+,} | {v['days_min']:+} | {v['days_max']:+} |"
              for r, v in (vis.get("rules") or {}).items()]
    lines += ["", "| visible from | articles |", "|---|---:|"]
    lines += [f"| {s} | {n:,} |" for s, n in (vis.get("sources") or {}).items()]
    kinds = ", ".join(f"{k}: {v}" for k, v in report["leak_kinds"].items()) or "none"
    lines += ["", "## Leakage screen", "",
              (f"{report['leak_flags']:,} articles flagged ({kinds}); "
               "they stay in the store and are hidden from search by default."), "",
              "## Market quotes", "",
              (f"{report.get('market_quotes', 0):,} articles quote a betting or prediction market's odds; "
               "hidden from search by default (env.hide_market_quotes)."), ""]
    lines += ["## Articles per month", "", "| month | articles |", "|---|---:|"]
    lines += [f"| {m} | {n:,} |" for m, n in report["months"].items()]
    lines += ["", "## Files not read whole", ""]
    if report["file_errors"]:
        # every file fault with its kind: read faults (records kept up to the fault) and files not had at all
        lines += ["| file | kind | records read | error |", "|---|---|---:|---|"]
        lines += [f"| {e['warc_file']} | {e.get('kind') or ''} | {e['records_read']} | {e['error']} |"
                  for e in report["file_errors"]]
    else:
        lines.append("none")
    lines += render_other_profiles(report)
    lines += render_transfer(report.get("transfer"))
    return "\n".join(lines) + "\n"


def render_transfer(transfer: Mapping[str, Any] | None) -> list[str]:
    """The streamed files' section of the funnel: bytes, requests, resumes, politeness, failed files."""
    if transfer is None:
        return []
    st = (transfer or {}).get("streamed") or {}
    if not st.get("files") and not (transfer or {}).get("failed"):
        return []
    lines = ["", "## Streamed files", "",
             (f"{st.get('files', 0)} files streamed whole ({st.get('bytes', 0) / 1e6:,.1f} MB; "
              f"{st.get('bytes_fetched', 0) / 1e6:,.1f} MB fetched) in {st.get('requests', 0)} requests: "
              f"{st.get('resumes', 0)} resumed with Range, {st.get('restarts_from_zero', 0)} restarted from zero, "
              f"{st.get('retries', 0)} retries; {len(transfer.get('failed') or [])} files failed (listed above)."), ""]
    lim = transfer.get("limiter")
    if lim:
        lines += [f"Politeness (one limiter for every worker): at most {lim['peak_connections']} of "
                  f"{lim['max_connections']} connections open, {lim['max_rate']:g} requests/s, lowered to "
                  f"{lim['lowest_rate']:g} after {lim['throttled']} answers 503/429.", ""]
    return lines


def render_summary(summary: Mapping[str, Any]) -> str:
    """A short console summary of `build_corpus`'s result."""
    r = summary["report"]
    c = summary["counts"]
    t = summary["timings"]
    stage_line = ", ".join(f"{s['stage']} -{s['dropped']:,}" for s in r["stages"])
    ts = r["timestamps"]["source_share_pct"]
    lines = [
        (f"corpus {summary['snapshot_id']}: {r['kept']:,} articles kept of {r['records_in']:,} records "
         f"({c['files']} files, {c['files_processed']} processed now)"),
        f"  dropped per stage: {stage_line}",
        f"  timestamps: pub {ts['pub']:.1f}% / mod {ts['mod']:.1f}% / crawl {ts['crawl']:.1f}%",
        "  duplicates: " + ", ".join(f"{k} {v:,}" for k, v in r["dedup"].items()),
        (f"  leak flags: {r['leak_flags']:,}; market quotes: {r.get('market_quotes', 0):,}; "
         f"moved by the visibility rules: {(r.get('visibility') or {}).get('articles_moved', 0):,}; "
         f"files not read whole: {len(r['file_errors'])}"),
        (f"  time: {t['total_s']:.1f}s (per-file stages {t['process_s']:.1f}s, dedup {t['dedup_s']:.1f}s, "
         f"store {t['store_s']:.1f}s)"),
        f"  output: {summary['paths']['articles']} (report: {summary['paths']['report']})",
    ]
    return "\n".join(lines)


def load_report(workspace: str | Path) -> dict[str, Any]:
    """Read `WS/corpus/report.json`."""
    ws = Workspace.at(workspace)
    path = ws.require(ws.corpus_dir / "report.json", "corpus report", "forecast-env corpus build")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise WorkspaceError(f"{path}: corrupt report ({exc}); rerun `forecast-env corpus build`") from exc
