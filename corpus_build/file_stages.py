"""Stages 1-7 over one WARC file: read, extract, normalize, lang, quality, timestamps, corpus window, leakage.

`process_warc(path, config)` is a pure function of one WARC file or source; `FileRun` is the same
work chunk by chunk (what a build's worker runs, writing a part: `pipeline.run_part`), so a worker's
memory does not grow with its file. A part records every quality profile's verdicts
(`schema.PART_DROPPED`); `per_file_config_hash` names the settings these stages read, so a change
redoes every part.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from forecast_env import schema
from forecast_env.config import config_hash, load_config
from forecast_env.corpus_build.merge import profile_view
from forecast_env.corpus_build.source import Source
from forecast_env.corpus_build.warc import ReadDrop, WarcReader
from forecast_env.errors import CorpusError

#: Config keys that change what `process_warc` produces (a change invalidates every part).
PER_FILE_KEYS = ("corpus_start", "corpus_end", "read", "extract", "language", "quality", "timestamps", "leakage")
#: Config keys that change a part but not the corpus (excluded from the snapshot id): diagnostics only.
DIAGNOSTIC_KEYS = ("keep_dropped_text",)  # set by `build_corpus(keep_dropped_text=True)`
#: Characters of a dropped record's text kept with `--keep-dropped-text` (the `text_head` column).
DROPPED_TEXT_CHARS = schema.DROPPED_TEXT_CHARS

_WORKER: dict[str, Any] = {}


# ---------------------------------------------------------------------------------------------
# per-record helpers
# ---------------------------------------------------------------------------------------------


def make_doc_id(record_id: str | None, url: str | None, crawl_time: datetime | None) -> str:
    """First 16 hex of sha1(WARC-Record-ID), else of sha1(url + crawl time): stable across builds."""
    key = record_id or f"{url or ''}{crawl_time.isoformat() if crawl_time else ''}"
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]


def per_file_config_hash(cfg: dict[str, Any]) -> str:
    """Hash of the config keys that the per-WARC stages read (quality: every profile's resolved
    thresholds, not which profile is active, as a part records every profile's verdicts; extract: the
    resolved body mode; `keep_dropped_text` only when set, as it changes the dropped rows)."""
    blob = {**{k: cfg.get(k) for k in PER_FILE_KEYS}, "quality": _all_profiles_quality(cfg),
            "extract": resolved_extract(cfg)}
    blob.update({k: True for k in DIAGNOSTIC_KEYS if cfg.get(k)})
    return config_hash(blob)


def body_mode_of(cfg: dict[str, Any]) -> str:
    """The configured `extract.body_mode` (default `body.DEFAULT_BODY_MODE`), checked against `body.BODY_MODES`."""
    from forecast_env.corpus_build.body import BODY_MODES, DEFAULT_BODY_MODE

    mode = str((cfg.get("extract") or {}).get("body_mode") or DEFAULT_BODY_MODE)
    if mode not in BODY_MODES:
        raise CorpusError(f"config extract.body_mode = {mode!r} is not known; choose one of {', '.join(BODY_MODES)}")
    return mode


def resolved_extract(cfg: dict[str, Any]) -> dict[str, Any]:
    """The extract settings the build uses (a missing section = the defaults), so hashes do not differ
    between a config that spells the default out and one that leaves it off."""
    return {"body_mode": body_mode_of(cfg)}



def _all_profiles_quality(cfg: dict[str, Any]) -> dict[str, Any]:
    """Every profile's resolved thresholds (explicit overrides apply to each), checked: the profiles
    must clean lines alike, as a part holds one body per record for all of them."""
    from forecast_env.corpus_build.quality import PROFILE_NAMES, check_shared_cleanup, resolve_quality

    qcfg = cfg.get("quality")
    resolved = {name: resolve_quality(qcfg, name)["filters"] for name in PROFILE_NAMES}
    check_shared_cleanup(resolved)
    return resolved



def _as_date(value: Any) -> date | None:
    if value is None or value == "":
        return None
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError as exc:
        raise CorpusError(f"config corpus_start/corpus_end: {value!r} is not an ISO date (YYYY-MM-DD)") from exc


def _tools(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model and filters, loaded once per worker process (per config)."""
    key = per_file_config_hash(cfg)
    if _WORKER.get("key") != key:
        from forecast_env.corpus_build.langid import LanguageIdentifier
        from forecast_env.corpus_build.quality import PROFILE_NAMES, build_filters

        lid = _WORKER.get("lid") or LanguageIdentifier()
        _WORKER.clear()
        qcfg = cfg.get("quality") or {}
        _WORKER.update(key=key, lid=lid, filters={name: build_filters(qcfg, name) for name in PROFILE_NAMES},
                       gate=language_gate(cfg, lid))
    return _WORKER


def language_gate(cfg: dict[str, Any], lid: Any) -> Any:
    """The configured language gate (`language.gate_max_score`; null: none), `langid.LanguageGate`."""
    from forecast_env.corpus_build.langid import LanguageGate

    max_score = (cfg.get("language") or {}).get("gate_max_score")
    if max_score is None:
        return None
    try:
        return LanguageGate(lid, float(max_score))
    except (TypeError, ValueError) as exc:
        raise CorpusError(f"config language.gate_max_score = {max_score!r} is not a number in [0, 1]") from exc


#: Records per chunk of the per-file stages: language identification, the kept rows and the part's
#: row groups go chunk by chunk, and each page's HTML is dropped once extracted, so a worker's memory
#: does not grow with its file.
CHUNK_RECORDS = 512


class FileRun:
    """Stages 1-7 over one WARC source, chunk by chunk: iterate `chunks()` for (articles, dropped)
    tables, then read `counters`, `file_errors` and, for a remote source, `identity` (size, ETag,
    sha256 computed while streaming). A transfer failure raises `stream.TransferError`.

    The tables are a part's, with every quality profile's verdicts (`schema.PART_DROPPED`): the
    articles any profile keeps, and drop rows marked with the profile(s) they hold for;
    `merge.profile_view` gives one profile's rows."""

    def __init__(self, source: str | Path | Source, config: dict[str, Any] | None = None, *, limiter: Any = None,
                 keep_dir: str | Path | None = None, sleep: Callable[[float], None] | None = None,
                 on_bytes: Callable[[int], None] | None = None, client: Any = None,
                 on_chunk: Callable[[int, int], None] | None = None) -> None:
        self.source = source if isinstance(source, Source) else None
        self.path = Path(source) if not isinstance(source, Source) else None if source.remote else Path(source.uri)
        self.name = source.name if isinstance(source, Source) else Path(source).name
        self.cfg = config if config is not None else load_config("corpus")
        self.limiter, self.keep_dir, self.sleep, self.on_bytes, self.client = limiter, keep_dir, sleep, on_bytes, client
        self.on_chunk = on_chunk  # (records read, bytes of the file consumed) after each chunk
        self.counters: dict[str, Any] = {}
        self.file_errors: list[dict] = []
        self.identity: dict[str, Any] | None = None

    def chunks(self) -> Iterator[tuple[pa.Table, pa.Table]]:
        from forecast_env.corpus_build.source import open_source
        from forecast_env.corpus_build.stream import HttpSettings

        t0 = time.perf_counter()
        max_payload = int(self.cfg["read"]["max_payload_bytes"])
        if self.path is not None:
            reader = WarcReader(self.path, max_payload)
            yield from self._stages(reader)
        else:
            from forecast_env.corpus_build.stream import CheckedReader, RemoteStream

            assert self.source is not None  # no local path: a remote source
            settings = HttpSettings.from_config(self.cfg)
            with open_source(self.source, settings, limiter=self.limiter, keep_dir=self.keep_dir, sleep=self.sleep,
                             on_bytes=self.on_bytes, client=self.client) as raw:
                # http: a RemoteStream hashes and checks its own bytes; s3 (an fsspec file): a CheckedReader does
                fh = raw if isinstance(raw, RemoteStream) else CheckedReader(raw)
                reader = WarcReader(fh, max_payload, name=self.name)
                yield from self._stages(reader)
                if fh.failure is not None:
                    raise fh.failure
                self.identity = fh.identity()
        if reader.error:
            self.file_errors.append({"warc_file": self.name, "error": reader.error,
                                     "records_read": reader.records_read})
        self.counters = {
            "warc_file": self.name,
            "records_in": reader.responses,
            "non_response_skipped": reader.skipped_non_response,
            "kept": self._kept,
            "dropped": self._dropped,
            "seconds": round(time.perf_counter() - t0, 3),
        }

    def _stages(self, reader: WarcReader) -> Iterator[tuple[pa.Table, pa.Table]]:
        from forecast_env.corpus_build.extract import extract_page, normalize_text

        cfg = self.cfg
        self._tools = _tools(cfg)
        self._kept = self._dropped = 0  # rows of the part's tables (every profile's)
        self._start, self._end = _as_date(cfg.get("corpus_start")), _as_date(cfg.get("corpus_end"))
        self._min_score = float(cfg["language"]["min_english_score"])
        ts_cfg = cfg.get("timestamps") or {}
        self._years = int(ts_cfg.get("min_year", 2010)), int(ts_cfg.get("max_year", 2030))
        from forecast_env.corpus_build.timestamps import check_visibility

        self._visibility = check_visibility(str(ts_cfg.get("visibility", "conservative")))  # before any record
        self._leak_on = bool((cfg.get("leakage") or {}).get("enabled", True))
        body_mode = body_mode_of(cfg)
        keep_text = bool(cfg.get("keep_dropped_text"))
        name = self.name
        dropped: list[dict] = []
        pages: list = []

        def drop(stage: str, reason: str, url: str | None, offset: int, doc_id: str | None = None,
                 detail: str | None = None, text: str | None = None, profiles: Sequence[str] | None = None) -> None:
            """One drop row, or one per profile in `profiles` (None: the row holds for every profile)."""
            head = text[:DROPPED_TEXT_CHARS] if keep_text and text else None
            for profile in profiles or (None,):
                dropped.append({"doc_id": doc_id, "url": url, "warc_file": name, "warc_offset": offset,
                                "stage": stage, "reason": reason, "detail": detail, "dup_of": None, "text_head": head,
                                "profile": profile})

        position = records = 0
        for item in reader:
            records += 1
            position = item.offset
            if isinstance(item, ReadDrop):
                drop("read", item.reason, item.url, item.offset, None, item.detail)
            else:
                doc_id = make_doc_id(item.record_id, item.url, item.crawl_time)
                try:
                    ext = extract_page(item.html, item.url, body_mode=body_mode, gate=self._tools["gate"])
                    title = normalize_text(ext.title) if ext.title else None
                    summary = normalize_text(ext.summary) if ext.summary else None
                    body = normalize_text(ext.body) if ext.body else ""
                except Exception as exc:
                    drop("extract", "parse_error", item.url, item.offset, doc_id, f"{type(exc).__name__}: {exc}"[:300])
                    continue
                if ext.gate_score is not None:  # confidently not English: its body was never extracted
                    drop("lang", "not_english_page", item.url, item.offset, doc_id, f"{ext.gate_score:.3f}")
                    continue
                if not body.strip():
                    drop("extract", "no_body", item.url, item.offset, doc_id)
                    continue
                pages.append((dataclasses.replace(item, html=""), doc_id, ext, title or None, summary or None, body))
            if len(pages) >= CHUNK_RECORDS or len(dropped) >= 4 * CHUNK_RECORDS:
                yield self._finish(pages, dropped, drop)
                pages, dropped = [], []
                if self.on_chunk is not None:
                    self.on_chunk(records, position)
        if pages or dropped:
            yield self._finish(pages, dropped, drop)
            pages.clear()

    def _finish(self, pages: list, dropped: list[dict], drop: Callable[..., None]) -> tuple[pa.Table, pa.Table]:
        """Stages 4-7 over one chunk of extracted pages: (kept articles, every drop of the chunk)."""
        from forecast_env.corpus_build.leakage import find_market_quote, screen_leakage
        from forecast_env.corpus_build.quality import profile_verdicts
        from forecast_env.corpus_build.timestamps import assign_timestamps

        tools, name = self._tools, self.name
        min_year, max_year = self._years
        start, end = self._start, self._end
        kept: list[dict] = []
        scores = tools["lid"].english_scores([p[5] for p in pages]) if pages else []
        for (item, doc_id, ext, title, summary, body), score in zip(pages, scores):
            if score < self._min_score:
                drop("lang", "not_english", item.url, item.offset, doc_id, f"{score:.3f}", body)
                continue
            keepers: list[str] | None = None  # the profiles whose quality filters pass the record
            try:
                verdicts = profile_verdicts(body, tools["filters"], page=ext.page)
                for profile, res in verdicts.items():
                    if not res.keep:
                        drop("quality", res.reason or "unknown", item.url, item.offset, doc_id, res.detail, body,
                             profiles=(profile,))
                kept_by = [p for p, res in verdicts.items() if res.keep]
                if not kept_by:
                    continue
                keepers = None if len(kept_by) == len(verdicts) else kept_by
                cleaned = {verdicts[p].text for p in kept_by}
                if len(cleaned) > 1:  # check_shared_cleanup rules it out; never store one profile's text as another's
                    raise CorpusError(f"quality profiles {kept_by} cleaned {item.url} differently")
                text = cleaned.pop()
                body = text if text is not None else body
                ts = assign_timestamps(ext, item.url, item.last_modified, item.crawl_time, min_year, max_year,
                                       self._visibility)
                if start is not None and ts.day < start:
                    drop("time", "before_corpus_start", item.url, item.offset, doc_id, ts.day.isoformat(), body,
                         profiles=keepers)
                    continue
                if end is not None and ts.day > end:
                    drop("time", "after_corpus_end", item.url, item.offset, doc_id, ts.day.isoformat(), body,
                         profiles=keepers)
                    continue
                flag, why = screen_leakage(body, title, ts.visible_at) if self._leak_on else (False, None)
                market_quote = find_market_quote(body, title, summary) is not None
            except CorpusError:
                raise
            except Exception as exc:
                drop("extract", "parse_error", item.url, item.offset, doc_id, f"{type(exc).__name__}: {exc}"[:300],
                     body, profiles=keepers)
                continue
            kept.append({
                "doc_id": doc_id, "url": item.url, "canonical_url": ext.canonical_url or None,
                "title": title, "summary": summary, "body": body,
                "t_pub": ts.t_pub, "t_mod": ts.t_mod, "t_crawl": ts.t_crawl, "t": ts.t,
                "t_source": ts.t_source, "t_rule": ts.t_rule, "t_pub_rule": ts.t_pub_rule,
                "t_mod_rule": ts.t_mod_rule, "visible_at": ts.visible_at, "visible_source": ts.visible_source,
                "visible_moves": [{"rule": r, "days": d} for r, d in ts.moves], "day": ts.day,
                "lang_score": float(score), "leak_flag": bool(flag), "leak_reason": why, "market_quote": market_quote,
                "warc_file": name, "warc_offset": item.offset,
            })
        articles = pa.Table.from_pylist(kept, schema=schema.ARTICLES)
        drops = pa.Table.from_pylist(dropped, schema=schema.PART_DROPPED)
        self._kept += articles.num_rows
        self._dropped += drops.num_rows
        return articles, drops


def process_warc(path: str | Path | Source, config: dict[str, Any] | None = None, *, all_profiles: bool = False,
                 **stream: Any) -> tuple[pa.Table, pa.Table, dict, list[dict]]:
    """Run stages 1-7 over one WARC file or source: (articles, dropped, counters, file_errors).

    The rows are the configured quality profile's (`all_profiles=True`: the part's tables, every
    profile's verdicts, dropped rows as `schema.PART_DROPPED`). They come in file order (drops of a
    chunk after its records' kept rows are decided); `stream` passes `limiter`, `keep_dir`, `sleep`,
    `client` to a remote source (see `FileRun`).
    """
    from forecast_env.corpus_build.quality import active_profile

    run = FileRun(path, config, **stream)
    arts, drops = [], []
    for a, d in run.chunks():
        arts.append(a)
        drops.append(d)
    articles = pa.concat_tables(arts).cast(schema.ARTICLES) if arts else schema.ARTICLES.empty_table()
    dropped = pa.concat_tables(drops).cast(schema.PART_DROPPED) if drops else schema.PART_DROPPED.empty_table()
    if not all_profiles:
        articles, dropped = profile_view(articles, dropped, active_profile(run.cfg.get("quality")))
    counters = dict(run.counters)
    if run.identity is not None:
        counters["source"] = run.identity
    return articles, dropped, counters, run.file_errors

