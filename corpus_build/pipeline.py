"""The corpus build: per-WARC stages 1-7 in parallel, then global dedup, then the month store.

`process_warc(path, config)` is a pure function of one WARC file (read, extract, normalize, lang,
quality, timestamps, corpus window, leakage screen). Its result is written as a *part* under
`WS/corpus/parts/` (articles, dropped, counters JSON last, each atomically), so a finished file is
never processed twice and a killed build resumes. Then every part of the inputs is merged, dedup
(docs/design.md §2.dedup) runs over the whole corpus, and the month shards are written (only those whose content
changed), with the dropped records, a doc-id index, the funnel report and the manifest.

Executors are separate from the per-file function: the core executor (`forecast_env.executor`: a
spawned process pool for `engine="local"`, Ray actors for `engine="ray"`) runs the same `run_part`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from forecast_env import schema
from forecast_env.config import config_hash, load_config
from forecast_env.corpus_build.merge import (
    PartFiles,
    RemoteMerge,
    apply_dedup,
    keys_path,
    merge_parts,
    profile_view,
    write_file_errors,
    write_store,
)
from forecast_env.corpus_build.source import Source
from forecast_env.corpus_build.warc import ReadDrop, WarcReader, fault_kind
from forecast_env.crashpoints import crash_point
from forecast_env.enums import ENGINES
from forecast_env.errors import CorpusError
from forecast_env.executor import map_unordered
from forecast_env.store import (
    Workspace,
    atomic_write_bytes,
    atomic_write_json,
    sha256_file,
    write_manifest,
)

#: Config keys that change what `process_warc` produces (a change invalidates every part).
PER_FILE_KEYS = ("corpus_start", "corpus_end", "read", "extract", "language", "quality", "timestamps", "leakage")
#: Config keys that change a part but not the corpus (excluded from the snapshot id): diagnostics only.
DIAGNOSTIC_KEYS = ("keep_dropped_text",)  # set by `build_corpus(keep_dropped_text=True)`
#: Characters of a dropped record's text kept with `--keep-dropped-text` (the `text_head` column).
DROPPED_TEXT_CHARS = schema.DROPPED_TEXT_CHARS
#: Config keys that do not change the corpus (excluded from the snapshot id).
EXECUTION_KEYS = ("execution", "source")  # source: where files are served from and how politely
#: Sections only the index build and the searcher read: they do not change which articles the corpus
#: holds, so the corpus snapshot id leaves them out (the index has its own hash).
INDEX_KEYS = ("embed", "index", "retrieval")
#: Bump whenever the per-file stages change what they produce, so existing parts are redone.
PART_VERSION = 10  # 2: scripts kept out of unclosed paragraphs, heading anchor ids; 3: site suffix cut from titles;
# 4: visibility time (day = UTC day of v), market_quote flag; 5: "the odds on X" is not a quoted figure;
# 6: body extraction (corpus_build/body.py: div paragraphs, loose text, layout-class wrappers, comments), fastwarc;
# 7: quality profiles (news | paper), FineWeb line rules on non-empty lines, Gopher distinct stop words;
# 8: extract.body_mode, dropped rows carry text_head; 9: trafilatura body by default, layout tables
# read by our blocks; 10: every profile's verdicts in the part (schema.PART_DROPPED)

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
            "extract": _resolved_extract(cfg)}
    blob.update({k: True for k in DIAGNOSTIC_KEYS if cfg.get(k)})
    return config_hash(blob)


def body_mode_of(cfg: dict[str, Any]) -> str:
    """The configured `extract.body_mode` (default `body.DEFAULT_BODY_MODE`), checked against `body.BODY_MODES`."""
    from forecast_env.corpus_build.body import BODY_MODES, DEFAULT_BODY_MODE

    mode = str((cfg.get("extract") or {}).get("body_mode") or DEFAULT_BODY_MODE)
    if mode not in BODY_MODES:
        raise CorpusError(f"config extract.body_mode = {mode!r} is not known; choose one of {', '.join(BODY_MODES)}")
    return mode


def _resolved_extract(cfg: dict[str, Any]) -> dict[str, Any]:
    """The extract settings the build uses (a missing section = the defaults), so hashes do not differ
    between a config that spells the default out and one that leaves it off."""
    return {"body_mode": body_mode_of(cfg)}


def _resolved_quality(cfg: dict[str, Any]) -> dict[str, Any]:
    """The quality thresholds the build uses (profile table + explicit overrides), not the raw section."""
    from forecast_env.corpus_build.quality import resolve_quality

    return resolve_quality(cfg.get("quality"))


def _all_profiles_quality(cfg: dict[str, Any]) -> dict[str, Any]:
    """Every profile's resolved thresholds (explicit overrides apply to each), checked: the profiles
    must clean lines alike, as a part holds one body per record for all of them."""
    from forecast_env.corpus_build.quality import PROFILE_NAMES, check_shared_cleanup, resolve_quality

    qcfg = cfg.get("quality")
    resolved = {name: resolve_quality(qcfg, name)["filters"] for name in PROFILE_NAMES}
    check_shared_cleanup(resolved)
    return resolved


def snapshot_config_hash(cfg: dict[str, Any]) -> str:
    """Hash of the config minus execution settings (workers and engine do not change a corpus) and the
    index and search settings (embedding, IVF, BM25 and fusion parameters do not either)."""
    kept = {k: v for k, v in cfg.items() if k not in EXECUTION_KEYS + INDEX_KEYS + DIAGNOSTIC_KEYS}
    if "quality" in kept:
        kept["quality"] = _resolved_quality(cfg)
    kept.pop("extract", None)  # the own body path leaves the id as before the key existed
    if body_mode_of(cfg) != "own":
        kept["extract"] = _resolved_extract(cfg)
    return config_hash(kept)


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
#: Seconds between two refreshes of the build's progress line (records and bytes of files in flight).
PROGRESS_POLL_S = 1.0


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


# ---------------------------------------------------------------------------------------------
# parts (resumable build state)
# ---------------------------------------------------------------------------------------------


def part_key(path: str | Path | Source, cfg: dict[str, Any]) -> str:
    """Key of one input's part: its path, size and mtime plus the per-file config hash.

    A remote source is keyed by its identity (the Common Crawl path, else the URL), never by the
    server or mirror it comes from, so changing `corpus.source.base_url` redoes nothing."""
    if isinstance(path, Source) and path.remote:
        blob = f"{PART_VERSION}|remote|{path.identity}|{per_file_config_hash(cfg)}"
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
    p = Path(path.uri if isinstance(path, Source) else path).resolve()
    st = p.stat()
    blob = f"{PART_VERSION}|{p}|{st.st_size}|{st.st_mtime_ns}|{per_file_config_hash(cfg)}"
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".warc.gz", ".warc", ".gz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def part_paths(parts_dir: Path, path: Path, key: str) -> dict[str, Path]:
    base = parts_dir / f"{_stem(path)}-{key}"
    return {"articles": Path(f"{base}.articles.parquet"), "dropped": Path(f"{base}.dropped.parquet"),
            "done": Path(f"{base}.json")}


def failed_path(paths: dict[str, Path]) -> Path:
    """Where a part's transfer failure is recorded (a rerun retries the file and removes it)."""
    return paths["done"].with_name(paths["done"].name[: -len(".json")] + ".failed.json")


def _name_path(item: Path | Source) -> Path:
    return Path(item.name) if isinstance(item, Source) else Path(item)


def part_done(paths: dict[str, Path]) -> bool:
    """A part is finished when its counters JSON (written last) and both tables exist."""
    return all(p.exists() for p in paths.values())


def run_part(path: str | Source, parts_dir: str, key: str, config: dict[str, Any], limiter: Any = None,
             keep_dir: str | None = None, sleep: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Process one WARC file or source and write its part atomically (the JSON marker last).

    Rows are written chunk by chunk (`FileRun`), so memory stays flat. A remote file whose ETag changes
    mid-transfer is restarted from zero (at most `stream.MAX_FILE_RESTARTS` times); a transfer that
    fails is recorded in `<part>.failed.json` (no part: a rerun retries it) and returned with
    `failed` set, so the build goes on with the other files.
    """
    import pyarrow.parquet as pq

    from forecast_env.corpus_build.stream import MAX_FILE_RESTARTS, FileChanged, TransferError
    from forecast_env.store import atomic_path

    src: Path | Source = path if isinstance(path, Source) and path.remote else Path(
        path.uri if isinstance(path, Source) else path)
    paths = part_paths(Path(parts_dir), _name_path(src), key)
    failed = failed_path(paths)
    restarts = 0
    progress = _progress_file(Path(parts_dir), paths["done"].name)
    try:
        while True:
            run = FileRun(src, config, limiter=limiter, keep_dir=keep_dir, sleep=sleep,
                          on_chunk=_progress_writer(progress))
            try:
                with atomic_path(paths["articles"]) as ta, atomic_path(paths["dropped"]) as td:
                    wa = pq.ParquetWriter(ta, schema.ARTICLES, compression="zstd")
                    wd = pq.ParquetWriter(td, schema.PART_DROPPED, compression="zstd")
                    try:
                        for arts, drops in run.chunks():
                            wa.write_table(arts.cast(schema.ARTICLES))
                            wd.write_table(drops.cast(schema.PART_DROPPED))
                            crash_point("part.chunk")
                    finally:
                        try:
                            wa.close()
                        finally:  # a full disk can fail the first close: the second file is closed still
                            wd.close()
                break
            except FileChanged as exc:
                restarts += 1
                if restarts <= MAX_FILE_RESTARTS:
                    continue
                return _record_failure(failed, src, exc.kind, str(exc), restarts)
            except TransferError as exc:
                return _record_failure(failed, src, exc.kind, str(exc), restarts)
    finally:  # done, failed or killed: this file is no longer in flight
        progress.unlink(missing_ok=True)
    counters = dict(run.counters)
    if run.identity is not None:  # streamed: size and sha256 computed while reading
        ident = run.identity
        counters.update(sha256=ident["sha256"], size=ident["size"],
                        source={k: v for k, v in ident.items() if k not in ("sha256", "size", "gzip_fault")},
                        restarts_from_zero_etag=restarts)
    else:
        assert isinstance(src, Path)  # a remote file's identity comes from its stream
        counters.update(sha256=sha256_file(src), size=src.stat().st_size)
    counters = {**counters, "part_key": key, "file_errors": run.file_errors}
    crash_point("part.tables")  # both tables in place, the marker not yet
    atomic_write_json(paths["done"], counters)
    failed.unlink(missing_ok=True)
    return counters


def _progress_file(parts_dir: Path, done_name: str) -> Path:
    return parts_dir / ".progress" / done_name


def _progress_writer(path: Path) -> Callable[[int, int], None]:
    """A FileRun `on_chunk` callback that records how far this worker is into its file (records read,
    bytes consumed) at `path` in `parts/.progress/`, where the build's progress bar reads it (any
    executor: the parts folder is shared). A rename, not a durable write: no fsync on this path."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")

    def report(records: int, nbytes: int) -> None:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"records": records, "bytes": nbytes}))
            os.replace(tmp, path)

    return report


def in_flight(parts_dir: Path) -> tuple[int, int, int]:
    """(files in flight, records read, bytes consumed) of the files being processed now, from the
    workers' progress files (`_progress_writer`)."""
    files = records = nbytes = 0
    for p in (parts_dir / ".progress").glob("*.json"):
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        files += 1
        records += int(rec.get("records") or 0)
        nbytes += int(rec.get("bytes") or 0)
    return files, records, nbytes


def _record_failure(failed: Path, src: Path | Source, kind: str, reason: str, restarts: int) -> dict[str, Any]:
    record = {"warc_file": src.name, "uri": src.uri if isinstance(src, Source) else str(src), "kind": kind,
              "error": reason[:500], "restarts": restarts, "failed": True}
    atomic_write_json(failed, record)
    return record


def _run_part_task(task: tuple) -> tuple[str, dict[str, Any]]:
    counters = run_part(*task)
    item = task[0]
    return (item.uri if isinstance(item, Source) else str(item)), counters


#: (workspace URL, the driver's staged folder) while `build_corpus` builds an object-store workspace
_REMOTE_WS: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("remote_ws", default=None)


@dataclasses.dataclass(frozen=True)
class PartOnNode:
    """The per-WARC task on a Ray node that shares no disk with the driver (workspace on object
    storage): write the part in this node's own scratch for the URL (`wsio.scratch_for`), publish it
    (data first, its marker last: a node killed before the marker leaves nothing anyone reads), and
    return the counters; the driver fetches the published part. Idempotent: a retry elsewhere writes
    and publishes the same bytes."""

    url: str

    def __call__(self, task: tuple) -> tuple[str, dict[str, Any]]:
        """Run one `_run_part_task` item with its parts folder moved to this node's scratch."""
        from forecast_env.workspace import remote as wsio

        node_root = wsio.scratch_for(self.url)
        parts_dir = node_root / "corpus" / "parts"
        parts_dir.mkdir(parents=True, exist_ok=True)
        src, _driver_parts, key, *rest = task
        with wsio.task_log("part", _name_path(src).name):
            uri, counters = _run_part_task((src, str(parts_dir), key, *rest))
            if not counters.get("failed"):
                files = part_paths(parts_dir, _name_path(src), key)
                wsio.RemoteWorkspace.at(self.url).publish(
                    node_root, relpaths=[str(f.relative_to(node_root)) for f in files.values()])
        return uri, counters


def _fetch_part(url: str, driver_root: str, task: tuple, counters: dict[str, Any]) -> None:
    """Bring a part a node published (or its failure record) into the driver's staged folder."""
    from forecast_env.workspace import remote as wsio

    src, parts_dir, key = task[0], Path(task[1]), task[2]
    files = part_paths(parts_dir, _name_path(src), key)
    if counters.get("failed"):
        atomic_write_json(failed_path(files), counters)
        return
    # reads only the part's own marker (listing every marker per part would cost parts^2 reads)
    wsio.RemoteWorkspace.at(url).fetch([str(f.relative_to(driver_root)) for f in files.values()], driver_root)


# ---------------------------------------------------------------------------------------------
# executors
# ---------------------------------------------------------------------------------------------


def _process_files(tasks: list[tuple[str | Source, str, str]], cfg: dict, engine: str, workers: int, progress: bool,
                   ray_address: str | None, on_file_done: Callable[[str], None] | None,
                   keep_warc: str | Path | None = None) -> dict[str, Any] | None:
    """Run `run_part` over the pending files on the core executor (local pool or Ray), one bar.

    Remote files share one politeness limiter (`stream.start_limiter`); the bar counts files, records
    and bytes. Returns the limiter's statistics (None when every file was local)."""
    from tqdm import tqdm

    from forecast_env.corpus_build.stream import HttpSettings, start_limiter
    from forecast_env.executor import ray_session

    remote = any(isinstance(t[0], Source) and t[0].remote for t in tasks)
    parts_dir = Path(tasks[0][1]) if tasks else Path(".")
    for stale in (parts_dir / ".progress").glob("*.json") if tasks else ():  # left by a killed build
        stale.unlink(missing_ok=True)
    keep = str(Path(keep_warc).expanduser().resolve()) if keep_warc else None
    bar = tqdm(total=len(tasks), desc="WARC files", unit="file", disable=not progress)
    t0, records, nbytes, failed = time.perf_counter(), 0, 0, 0
    stats = None
    with contextlib.ExitStack() as stack:
        limiter = None
        remote_ws = _REMOTE_WS.get() if engine == "ray" else None
        if engine == "ray" and tasks:
            stack.enter_context(ray_session(ray_address, workers, CorpusError))
            if remote_ws is None:  # parts go to object storage from each node's scratch: no shared disk needed
                check_shared_storage(tasks[0][1])
        if remote:
            settings = HttpSettings.from_config(cfg)
            limiter = stack.enter_context(start_limiter(settings, engine, min(workers, len(tasks))))
        try:
            lock = threading.Lock()
            stop = threading.Event()

            def show() -> None:  # finished files' totals plus how far the files in flight are
                _, rec_now, bytes_now = in_flight(parts_dir) if progress else (0, 0, 0)
                r, b = records + rec_now, nbytes + bytes_now
                dt = max(time.perf_counter() - t0, 1e-9)
                with lock:
                    bar.set_postfix_str(f"{r:,} records, {b / 1e6:,.1f} MB ({b / 1e6 / dt:,.1f} MB/s)"
                                        + (f", {failed} failed" if failed else ""))

            def poll() -> None:
                while not stop.wait(PROGRESS_POLL_S):
                    show()

            poller = threading.Thread(target=poll, daemon=True, name="build-progress")
            if progress:
                poller.start()
            try:
                task_fn: Callable[[tuple], tuple[str, dict[str, Any]]] = (
                    PartOnNode(remote_ws[0]) if remote_ws else _run_part_task)
                by_uri = {(p.uri if isinstance(p, Source) else str(p)): (p, d, k) for p, d, k in tasks}
                for path, counters in map_unordered(task_fn,
                                                    [(p, d, k, cfg, limiter, keep) for p, d, k in tasks],
                                                    engine=engine, workers=workers, threads=None,
                                                    ray_address=ray_address, error=CorpusError,
                                                    broken_advice="Rerun the build: finished files are kept."):
                    if remote_ws:
                        _fetch_part(remote_ws[0], remote_ws[1], by_uri[path], counters)
                    with lock:
                        bar.update(1)
                        failed += bool(counters.get("failed"))
                        records += int(counters.get("records_in") or 0)
                        nbytes += int(counters.get("size") or 0)
                    show()
                    if on_file_done:
                        on_file_done(path)
            finally:
                stop.set()
                if poller.is_alive():
                    poller.join()
        finally:
            bar.close()
            if limiter is not None:
                with contextlib.suppress(Exception):
                    stats = dict(limiter.stats())
    return stats


def check_shared_storage(parts_dir: Path | str) -> None:
    """On a Ray cluster, check every alive node sees the local folder `parts_dir` (each task writes its
    part there). Nodes are keyed by node id: several nodes on one host share an address. A workspace
    on object storage (`s3://...`, any fsspec URL) is reached by every node alike: nothing to check."""
    import uuid

    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if "://" in str(parts_dir):
        return
    parts_dir = Path(parts_dir)
    parts_dir.mkdir(parents=True, exist_ok=True)
    probe = parts_dir / f".probe-{uuid.uuid4().hex[:8]}"
    probe.write_text("probe")
    try:
        @ray.remote(num_cpus=0, max_retries=0)
        def _sees(path: str) -> bool:
            return os.path.exists(path)

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        refs = {n["NodeID"]: (n.get("NodeManagerAddress", "?"), _sees.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(str(probe)))
            for n in nodes}
        blind = [f"{node_id[:12]} at {addr}" for node_id, (addr, ref) in refs.items() if not ray.get(ref)]
    finally:
        probe.unlink(missing_ok=True)
    if blind:
        raise CorpusError(f"the workspace folder {parts_dir.parent.parent} is a local path that {len(blind)} of "
                          f"{len(refs)} Ray nodes cannot see (nodes {', '.join(blind)}); put the workspace on "
                          "object storage (--workspace s3://bucket/prefix: no shared disk needed, each node "
                          "keeps only its own scratch), or on a filesystem every node mounts (NFS), or build "
                          "with --engine local")


# ---------------------------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------------------------


def _clean_temporaries(ws: Workspace) -> None:
    # leftovers of a build killed inside an atomic write
    for d in (ws.corpus_dir, ws.parts_dir, ws.articles_dir, ws.dropped_dir):
        if d.is_dir():
            for tmp in d.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)


def resolve_inputs(warc_paths: Iterable[str | Path | Source]) -> list[Path | Source]:
    """Existing WARC files, unique by resolved path, and remote sources, unique by identity; sorted by
    file name then path or URL."""
    seen: dict[str, Path | Source] = {}
    for raw in warc_paths:
        if isinstance(raw, Source) and raw.remote:
            seen.setdefault(f"remote:{raw.identity}", raw)
            continue
        p = Path(raw.uri if isinstance(raw, Source) else raw).expanduser()
        if not p.is_file():
            raise CorpusError(f"WARC file {p} does not exist or is not a file; check the --warc path/glob")
        seen.setdefault(str(p.resolve()), p.resolve())
    if not seen:
        raise CorpusError("no WARC files given; pass --warc 'path/*.warc.gz' or --cc-news 2025-03..2025-05")
    return sorted(seen.values(), key=lambda p: (p.name, p.uri if isinstance(p, Source) else str(p)))


def build_corpus(
    warc_paths: Sequence[str | Path | Source],
    workspace: str | Path,
    config: dict | None = None,
    workers: int | None = None,
    engine: str = "local",
    progress: bool = True,
    on_file_done: Callable[[str], None] | None = None,
    keep_warc: str | Path | None = None,
    keep_dropped_text: bool = False,
) -> dict[str, Any]:
    """Build (or update) the corpus of `workspace` from WARC files; returns the build summary.

    Inputs are local paths or `source.Source`s (`source.resolve_sources`); remote ones are streamed
    (a copy kept under `keep_warc` when given). Only files without a finished part are processed;
    dedup and the store always cover all inputs, so the result equals a from-scratch build.
    `on_file_done(path)` is called after each new part. A file whose transfer failed is left out,
    listed in `summary["transfer"]["failed"]` and counted in `counts["files_failed"]`; a rerun
    retries it. `keep_dropped_text` stores the first `DROPPED_TEXT_CHARS` characters of each dropped
    record's text in the dropped tables (`text_head`, for `corpus why`): a different part, the same
    snapshot id.
    """
    from forecast_env.corpus_build.report import build_report, dropped_total, render_markdown
    from forecast_env.workspace import remote as wsio

    if wsio.is_remote(workspace):  # an object-store workspace: build in node-local scratch, publish from there
        with wsio.staged(workspace, pull=("corpus/",), publish=("corpus/",)) as local:
            publish_part = wsio.publisher(workspace, local)

            def done(path: str) -> None:
                publish_part(path)
                if on_file_done:
                    on_file_done(path)

            token = _REMOTE_WS.set((str(workspace).rstrip("/"), str(local)))
            try:
                summary = build_corpus(warc_paths, local, config=config, workers=workers, engine=engine,
                                       progress=progress, on_file_done=done, keep_warc=keep_warc,
                                       keep_dropped_text=keep_dropped_text)
            finally:
                _REMOTE_WS.reset(token)
        summary["paths"] = {**summary["paths"], "workspace": str(workspace), "scratch": str(local)}
        return summary

    t_start = time.perf_counter()
    cfg = config if config is not None else load_config("corpus")
    if keep_dropped_text:
        cfg = {**cfg, "keep_dropped_text": True}
    exec_cfg = cfg.get("execution") or {}
    if engine not in ENGINES:
        raise CorpusError(f"engine {engine!r} is not known; choose local or ray")
    workers = int(workers or exec_cfg.get("workers") or os.cpu_count() or 1)
    inputs = resolve_inputs(warc_paths)
    ws = Workspace.at(workspace, create=True)
    for d in (ws.parts_dir, ws.articles_dir, ws.dropped_dir):
        d.mkdir(parents=True, exist_ok=True)
    _clean_temporaries(ws)

    keys = {p: part_key(p, cfg) for p in inputs}
    all_parts = {p: part_paths(ws.parts_dir, _name_path(p), keys[p]) for p in inputs}
    pending = [(p if isinstance(p, Source) else str(p), str(ws.parts_dir), keys[p]) for p in inputs
               if not part_done(all_parts[p])]
    t_proc = time.perf_counter()
    limiter_stats = None
    if pending:
        limiter_stats = _process_files(pending, cfg, engine, workers, progress, exec_cfg.get("ray_address"),
                                       on_file_done, keep_warc)
        _clean_temporaries(ws)  # every task is done: a temporary left now is a lost worker's (a dead node's)
    t_merge = time.perf_counter()
    # a file whose transfer failed has no part: it is left out of this build and listed (a rerun retries it)
    transfer = transfer_summary(inputs, all_parts, limiter_stats)
    requested = inputs
    inputs = [p for p in inputs if part_done(all_parts[p])]

    # merge the parts of every input
    counters = [json.loads(all_parts[p]["done"].read_text()) for p in inputs]
    file_errors = [{**e, "kind": e.get("kind") or fault_kind(e["error"])} for c in counters
                   for e in c.get("file_errors", [])]
    file_errors += [{"warc_file": f["warc_file"], "error": f["error"], "records_read": 0, "kind": f["kind"]}
                    for f in transfer["failed"]]
    # out of core (corpus_build/merge.py): dedup over keys, then the store month by month
    # an object-store workspace on Ray: each merge task runs on a node, reading the bucket, publishing there
    remote_ws = _REMOTE_WS.get()
    remote_merge = RemoteMerge(*remote_ws) if remote_ws else None
    merged = merge_parts(ws, [merge_part_files(all_parts[p], cfg) for p in inputs], cfg, engine=engine,
                         remote=remote_merge,
                         workers=workers, ray_address=exec_cfg.get("ray_address"), progress=progress)
    t_dedup = t_merge + merged.timings["keys_s"] + merged.timings["pairs_s"]
    written, dropped = merged.written, merged.dropped
    write_file_errors(ws, file_errors)
    report = build_report(counters, dropped, merged.articles, file_errors, merged.quality_profiles)
    report["transfer"] = transfer
    atomic_write_json(ws.corpus_dir / "report.json", report)
    atomic_write_bytes(ws.corpus_dir / "report.md", render_markdown(report).encode("utf-8"))

    file_ids = sorted(f"{c['warc_file']}:{c['size']}:{c['sha256']}" for c in counters)
    # a build missing files it was asked for never carries the complete corpus's id
    failed_ids = sorted(f"failed:{f['warc_file']}" for f in transfer["failed"])
    snapshot_id = hashlib.sha256(("\n".join(file_ids + failed_ids) + "\n"
                                  + snapshot_config_hash(cfg)).encode()).hexdigest()[:16]
    t_end = time.perf_counter()
    timings = {"process_s": round(t_merge - t_proc, 3), "dedup_s": round(t_dedup - t_merge, 3),
               "store_s": round(t_end - t_dedup, 3), "total_s": round(t_end - t_start, 3)}
    counts = {"files": len(requested), "files_processed": len(pending), "files_failed": len(transfer["failed"]),
              "records_in": report["records_in"],
              "kept": report["kept"], "dropped": dropped_total(dropped), "leak_flags": report["leak_flags"],
              "file_errors": len(file_errors)}
    manifest_files = sorted(ws.articles_dir.glob("*.parquet")) + sorted(ws.dropped_dir.glob("*.parquet")) + [
        p for p in (ws.corpus_dir / "file_errors.parquet", ws.corpus_dir / "report.json", ws.corpus_dir / "report.md")
        if p.exists()]
    # each input file's part (its dropped table holds every profile's verdicts: `corpus why` reads them)
    parts_of: dict[str, list[str]] = {}
    for p, c in zip(inputs, counters):
        parts_of.setdefault(c["warc_file"], []).append(os.path.relpath(all_parts[p]["dropped"], ws.corpus_dir))
    write_manifest(ws.corpus_dir, "corpus", files=manifest_files, config=cfg, extra={
        "snapshot_id": snapshot_id, "inputs": file_ids, "failed": failed_ids, "counts": counts, "timings": timings,
        "config_hash_snapshot": snapshot_config_hash(cfg), "parts": dict(sorted(parts_of.items()))})
    return {
        "snapshot_id": snapshot_id,
        "counts": counts,
        "report": report,
        "timings": timings,
        "transfer": transfer,
        "written": written,
        "paths": {"workspace": str(ws.root), "articles": str(ws.articles_dir), "dropped": str(ws.dropped_dir),
                  "report": str(ws.corpus_dir / "report.md"), "manifest": str(ws.corpus_dir / "manifest.json")},
    }


def transfer_summary(inputs: Sequence[Path | Source], all_parts: dict, limiter_stats: dict | None) -> dict[str, Any]:
    """The funnel's transfer section: streamed files, bytes, resumes, failures and the limiter's figures."""
    from forecast_env.corpus_build.stream import TransferStats

    totals = TransferStats()
    failed = []
    for p in inputs:
        if not (isinstance(p, Source) and p.remote):
            continue
        paths = all_parts[p]
        if part_done(paths):
            c = json.loads(paths["done"].read_text())
            totals.add({"size": c.get("size"), **(c.get("source") or {})})
        elif failed_path(paths).is_file():
            failed.append(json.loads(failed_path(paths).read_text()))
        else:  # no part and no failure record (a worker died): never silently left out
            failed.append({"warc_file": p.name, "uri": p.uri, "kind": "not_processed",
                           "error": "no part and no failure record; rerun the build", "failed": True})
    return {"streamed": dataclasses.asdict(totals), "failed": sorted(failed, key=lambda f: f["warc_file"]),
            "limiter": limiter_stats}


def merge_part_files(paths: dict[str, Path], cfg: dict[str, Any]) -> PartFiles:
    """The merge's view of one part: its tables and its dedup keys sidecar."""
    return PartFiles(articles=paths["articles"], dropped=paths["dropped"],
                     keys=keys_path(paths["articles"], cfg.get("dedup") or {}))


__all__ = [
    "apply_dedup",
    "build_corpus",
    "make_doc_id",
    "part_key",
    "process_warc",
    "write_store",
]
