"""Why is this article missing? Every record of a URL in a built corpus, and what became of it.

`explain_url(workspace, url)` reads the store the build wrote (docs/design.md §2.10): the month shards
`corpus/articles/YYYY-MM.parquet` and the dropped-record tables `corpus/dropped/<stage>.parquet`. A URL
matches a record when both normalise to the same key with the build's own rule (`dedup.normalize_url`:
no scheme, no `www.`, no fragment or tracking parameters, sorted query, no trailing slash); a kept
article's canonical link counts too. Each record comes back as one of

- ``kept``: in the store, with its day and which timestamp (and cascade rule) gave that day;
- ``dropped``: the stage, reason code and detail of its drop (read, extract, lang, quality, time);
- ``duplicate``: removed by dedup, with the article it duplicates (that article's URL and day);

a dropped record built with `corpus build --keep-dropped-text` also shows the first characters of its
text (`text_head`); a record that reached the quality stage shows what each other quality profile
decides on it (read from its part, which holds every profile's verdicts: `--set quality.profile=...`
would re-run the merge only); and a URL with no record at all is ``never seen`` (the CLI exits 3 for
it, so scripts can tell).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from forecast_env.corpus_build.dedup import normalize_url
from forecast_env.errors import CorpusError
from forecast_env.store import Workspace

__all__ = ["RecordStatus", "WhyAnswer", "explain_url", "render_why"]

#: Exit status of `forecast-env corpus why` when the URL matches no record of the build.
NEVER_SEEN_EXIT = 3


@dataclass
class RecordStatus:
    """What became of one WARC record whose URL matches."""

    status: str  # kept | dropped | duplicate
    doc_id: str | None
    url: str | None
    warc_file: str | None
    warc_offset: int | None
    day: str | None = None  # kept: the UTC day of its visibility time
    visible_source: str | None = None  # kept: pub | mod | crawl, the timestamp that gave the day
    t_rule: str | None = None  # kept: the cascade rule that gave the assigned timestamp
    title: str | None = None
    stage: str | None = None  # dropped / duplicate: the stage
    reason: str | None = None
    detail: str | None = None
    dup_of: str | None = None  # duplicate: the doc id of the earlier article
    dup_of_url: str | None = None
    dup_of_day: str | None = None
    text_head: str | None = None  # dropped: the first characters of its text (`corpus build --keep-dropped-text`)
    #: a record that reached the quality stage: per other quality profile, None when that profile's
    #: filters pass it, else its drop reason and detail ("gopher_alpha_words (ratio=0.592)")
    other_profiles: dict[str, str | None] | None = None


@dataclass
class WhyAnswer:
    """Every matching record (kept first, then by WARC file and offset); empty = never seen."""

    url: str
    key: str | None
    records: list[RecordStatus]

    @property
    def seen(self) -> bool:
        return bool(self.records)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "key": self.key, "seen": self.seen, "records": [asdict(r) for r in self.records]}


def _read(paths: list[Path], columns: list[str]) -> pl.DataFrame:
    frames = [pl.read_parquet(p, columns=[c for c in columns if c in pl.read_parquet_schema(p)]) for p in paths]
    frames = [f for f in frames if f.height]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def _key_col(col: str) -> pl.Expr:
    return pl.col(col).map_elements(normalize_url, return_dtype=pl.Utf8)


def explain_url(workspace: str | Path, url: str) -> WhyAnswer:
    """Every record of `url` in the workspace's corpus and its fate (see the module docstring)."""
    ws = Workspace.at(workspace)
    if not (ws.corpus_dir / "manifest.json").exists() and not ws.dropped_dir.is_dir():
        raise CorpusError(f"{ws.root}: no corpus built here (no corpus/manifest.json); run `forecast-env corpus build`")
    key = normalize_url(url)
    if key is None:
        raise CorpusError(f"{url!r} is not a URL")
    art_cols = ["doc_id", "url", "canonical_url", "title", "day", "visible_source", "t_rule", "warc_file",
                "warc_offset"]
    articles = _read(ws.article_shards(), art_cols)
    dropped = _read(sorted(ws.dropped_dir.glob("*.parquet")),
                    ["doc_id", "url", "warc_file", "warc_offset", "stage", "reason", "detail", "dup_of",
                     "text_head"])
    records: list[RecordStatus] = []
    if articles.height:
        hit = articles.filter((_key_col("url") == key) | (_key_col("canonical_url").fill_null("") == key))
        for r in hit.sort(["warc_file", "warc_offset"]).iter_rows(named=True):
            records.append(RecordStatus("kept", r["doc_id"], r["url"], r["warc_file"], r["warc_offset"],
                                        day=str(r["day"]), visible_source=r.get("visible_source"),
                                        t_rule=r.get("t_rule"), title=r.get("title")))
    if dropped.height:
        hit = dropped.filter(_key_col("url") == key).sort(["warc_file", "warc_offset"], nulls_last=True)
        by_id = {}
        if articles.height:
            for r in articles.select(["doc_id", "url", "day"]).iter_rows(named=True):
                by_id[r["doc_id"]] = r
        for r in hit.iter_rows(named=True):
            status = "duplicate" if r["stage"] == "dedup" else "dropped"
            rec = RecordStatus(status, r["doc_id"], r["url"], r["warc_file"], r["warc_offset"], stage=r["stage"],
                               reason=r["reason"], detail=r["detail"], dup_of=r["dup_of"],
                               text_head=r.get("text_head"))
            if status == "duplicate" and r["dup_of"] in by_id:
                rec.dup_of_url = by_id[r["dup_of"]]["url"]
                rec.dup_of_day = str(by_id[r["dup_of"]]["day"])
            records.append(rec)
    _add_other_profiles(ws, records)
    return WhyAnswer(url, key, records)


#: Stages a record has passed the quality stage to reach (a drop at one of them, or kept).
_AFTER_QUALITY = ("time", "dedup")


def _add_other_profiles(ws: Workspace, records: list[RecordStatus]) -> None:
    """Fill `other_profiles` of the records that reached the quality stage, from their parts' dropped
    tables (the build's manifest names each input's part); left None when the part is gone."""
    from forecast_env.corpus_build.quality import PROFILE_NAMES, active_profile

    try:
        manifest = json.loads((ws.corpus_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return
    parts: dict[str, list[str]] = manifest.get("parts") or {}
    active = active_profile((manifest.get("config") or {}).get("quality"))
    for rec in records:
        reached = rec.status == "kept" or rec.stage == "quality" or rec.stage in _AFTER_QUALITY
        paths = [ws.corpus_dir / p for p in parts.get(rec.warc_file or "", [])]
        paths = [p for p in paths if p.is_file() and "profile" in pl.read_parquet_schema(p)]
        if not reached or rec.doc_id is None or not paths:
            continue
        mine = (pl.col("doc_id") == rec.doc_id) & (pl.col("stage") == "quality")
        by_profile = {r["profile"]: r for p in paths for r in pl.scan_parquet(p).filter(mine)
                      .select(["profile", "reason", "detail"]).collect().iter_rows(named=True)}
        rec.other_profiles = {}
        for name in PROFILE_NAMES:
            if name == active:
                continue
            r = by_profile.get(name)
            rec.other_profiles[name] = None if r is None else (
                f"{r['reason']} ({r['detail']})" if r["detail"] else str(r["reason"]))


def render_why(answer: WhyAnswer) -> str:
    """Plain-text answer, one line per record."""
    if not answer.seen:
        return (f"{answer.url}: never seen: no record of this build matches (key {answer.key}); the URL is in no "
                "input WARC file, or its response was not a record the reader saw\n")
    lines = [f"{answer.url}: {len(answer.records)} record(s) (key {answer.key})"]
    for r in answer.records:
        where = f"{r.warc_file}@{r.warc_offset}"
        if r.status == "kept":
            lines.append(f"  kept       day {r.day} (visibility from {r.visible_source}, rule {r.t_rule})  "
                         f"doc {r.doc_id}  {where}")
        elif r.status == "duplicate":
            of = f"{r.dup_of} ({r.dup_of_url}, day {r.dup_of_day})" if r.dup_of_url else str(r.dup_of)
            lines.append(f"  duplicate  {r.reason} of {of}  doc {r.doc_id}  {where}")
        else:
            detail = f" ({r.detail})" if r.detail else ""
            lines.append(f"  dropped    stage {r.stage}: {r.reason}{detail}  doc {r.doc_id}  {where}")
        if r.text_head:
            head = " ".join(r.text_head.split())
            lines.append(f"             text: {head}")
        for name, verdict in (r.other_profiles or {}).items():
            said = "passes its quality filters" if verdict is None else f"drops it at quality: {verdict}"
            lines.append(f"             the {name} profile {said} (--set quality.profile={name}: the merge only)")
    return "\n".join(lines) + "\n"
