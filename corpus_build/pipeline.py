"""The corpus build: per-WARC stages 1-7 in parallel, then global dedup, then the month store.

`process_warc(path, config)` is a pure function of one WARC file (read, extract, normalize, lang,
quality, timestamps, corpus window, leakage screen). Its result is written as a *part* under
`WS/corpus/parts/` (articles, dropped, counters JSON last, each atomically), so a finished file is
never processed twice and a killed build resumes. Then every part of the inputs is merged, dedup
(docs/design.md §2.8) runs over the whole corpus, and the month shards are written (only those whose content
changed), with the dropped records, a doc-id index, the funnel report and the manifest.

Executors are separate from the per-file function: the core executor (`forecast_env.executor`: a
spawned process pool for `engine="local"`, Ray actors for `engine="ray"`) runs the same `run_part`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from forecast_env import schema
from forecast_env.config import config_hash, load_config
from forecast_env.corpus_build.merge import (
    PartFiles,
    apply_dedup,
    keys_path,
    merge_parts,
    write_file_errors,
    write_store,
)
from forecast_env.corpus_build.warc import ReadDrop, WarcReader
from forecast_env.errors import CorpusError
from forecast_env.executor import map_unordered
from forecast_env.store import (
    Workspace,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_table,
    sha256_file,
    write_manifest,
)

#: Config keys that change what `process_warc` produces (a change invalidates every part).
PER_FILE_KEYS = ("corpus_start", "corpus_end", "read", "language", "quality", "timestamps", "leakage")
#: Config keys that do not change the corpus (excluded from the snapshot id).
EXECUTION_KEYS = ("execution",)
#: Sections only the index build and the searcher read: they do not change which articles the corpus
#: holds, so the corpus snapshot id leaves them out (the index has its own hash).
INDEX_KEYS = ("embed", "index", "retrieval")
#: Bump whenever the per-file stages change what they produce, so existing parts are redone.
PART_VERSION = 6  # 2: scripts kept out of unclosed paragraphs, heading anchor ids; 3: site suffix cut from titles;
# 4: visibility time (day = UTC day of v), market_quote flag; 5: "the odds on X" is not a quoted figure;
# 6: body extraction (corpus_build/body.py: div paragraphs, loose text, layout-class wrappers, comments), fastwarc

_WORKER: dict[str, Any] = {}


# ---------------------------------------------------------------------------------------------
# per-record helpers
# ---------------------------------------------------------------------------------------------


def make_doc_id(record_id: str | None, url: str | None, crawl_time: datetime | None) -> str:
    """First 16 hex of sha1(WARC-Record-ID), else of sha1(url + crawl time): stable across builds."""
    key = record_id or f"{url or ''}{crawl_time.isoformat() if crawl_time else ''}"
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]


def per_file_config_hash(cfg: dict[str, Any]) -> str:
    """Hash of the config keys that the per-WARC stages read."""
    return config_hash({k: cfg.get(k) for k in PER_FILE_KEYS})


def snapshot_config_hash(cfg: dict[str, Any]) -> str:
    """Hash of the config minus execution settings (workers and engine do not change a corpus) and the
    index and search settings (embedding, IVF, BM25 and fusion parameters do not either)."""
    return config_hash({k: v for k, v in cfg.items() if k not in EXECUTION_KEYS + INDEX_KEYS})


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
        from forecast_env.corpus_build.quality import build_filters

        lid = _WORKER.get("lid") or LanguageIdentifier()
        _WORKER.clear()
        _WORKER.update(key=key, lid=lid, filters=build_filters(cfg.get("quality") or {}))
    return _WORKER


def process_warc(path: str | Path, config: dict[str, Any] | None = None) -> tuple[pa.Table, pa.Table, dict, list[dict]]:
    """Run stages 1-7 over one WARC file: (articles, dropped, counters, file_errors)."""
    from forecast_env.corpus_build.extract import extract_page, normalize_text
    from forecast_env.corpus_build.leakage import find_market_quote, screen_leakage
    from forecast_env.corpus_build.quality import apply_filters
    from forecast_env.corpus_build.timestamps import assign_timestamps, check_visibility

    cfg = config if config is not None else load_config("corpus")
    tools = _tools(cfg)
    path = Path(path)
    name = path.name
    t0 = time.perf_counter()
    start, end = _as_date(cfg.get("corpus_start")), _as_date(cfg.get("corpus_end"))
    min_score = float(cfg["language"]["min_english_score"])
    ts_cfg = cfg.get("timestamps") or {}
    min_year, max_year = int(ts_cfg.get("min_year", 2010)), int(ts_cfg.get("max_year", 2030))
    visibility = check_visibility(str(ts_cfg.get("visibility", "conservative")))  # before any record
    leak_on = bool((cfg.get("leakage") or {}).get("enabled", True))

    kept: list[dict] = []
    dropped: list[dict] = []

    def drop(stage: str, reason: str, url: str | None, offset: int, doc_id: str | None = None,
             detail: str | None = None) -> None:
        dropped.append({"doc_id": doc_id, "url": url, "warc_file": name, "warc_offset": offset,
                        "stage": stage, "reason": reason, "detail": detail, "dup_of": None})

    reader = WarcReader(path, int(cfg["read"]["max_payload_bytes"]))
    pages = []
    for item in reader:
        if isinstance(item, ReadDrop):
            drop("read", item.reason, item.url, item.offset, None, item.detail)
            continue
        doc_id = make_doc_id(item.record_id, item.url, item.crawl_time)
        try:
            ext = extract_page(item.html, item.url)
            title = normalize_text(ext.title) if ext.title else None
            summary = normalize_text(ext.summary) if ext.summary else None
            body = normalize_text(ext.body) if ext.body else ""
        except Exception as exc:
            drop("extract", "parse_error", item.url, item.offset, doc_id, f"{type(exc).__name__}: {exc}"[:300])
            continue
        if not body.strip():
            drop("extract", "no_body", item.url, item.offset, doc_id)
            continue
        pages.append((item, doc_id, ext, title or None, summary or None, body))

    scores = tools["lid"].english_scores([p[5] for p in pages]) if pages else []
    for (item, doc_id, ext, title, summary, body), score in zip(pages, scores):
        if score < min_score:
            drop("lang", "not_english", item.url, item.offset, doc_id, f"{score:.3f}")
            continue
        try:
            res = apply_filters(body, tools["filters"])
            if not res.keep:
                drop("quality", res.reason or "unknown", item.url, item.offset, doc_id, res.detail)
                continue
            body = res.text if res.text is not None else body
            ts = assign_timestamps(ext, item.url, item.last_modified, item.crawl_time, min_year, max_year,
                                   visibility)
            if start is not None and ts.day < start:
                drop("time", "before_corpus_start", item.url, item.offset, doc_id, ts.day.isoformat())
                continue
            if end is not None and ts.day > end:
                drop("time", "after_corpus_end", item.url, item.offset, doc_id, ts.day.isoformat())
                continue
            flag, why = screen_leakage(body, title, ts.visible_at) if leak_on else (False, None)
            market_quote = find_market_quote(body, title, summary) is not None
        except Exception as exc:
            drop("extract", "parse_error", item.url, item.offset, doc_id, f"{type(exc).__name__}: {exc}"[:300])
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
    drops = pa.Table.from_pylist(dropped, schema=schema.DROPPED)
    file_errors = []
    if reader.error:
        file_errors.append({"warc_file": name, "error": reader.error, "records_read": reader.records_read})
    counters = {
        "warc_file": name,
        "records_in": reader.responses,
        "non_response_skipped": reader.skipped_non_response,
        "kept": articles.num_rows,
        "dropped": drops.num_rows,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return articles, drops, counters, file_errors


# ---------------------------------------------------------------------------------------------
# parts (resumable build state)
# ---------------------------------------------------------------------------------------------


def part_key(path: str | Path, cfg: dict[str, Any]) -> str:
    """Key of one input's part: its path, size and mtime plus the per-file config hash."""
    p = Path(path).resolve()
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


def part_done(paths: dict[str, Path]) -> bool:
    """A part is finished when its counters JSON (written last) and both tables exist."""
    return all(p.exists() for p in paths.values())


def run_part(path: str, parts_dir: str, key: str, config: dict[str, Any]) -> dict[str, Any]:
    """Process one WARC file and write its part atomically (the JSON marker last)."""
    p = Path(path)
    paths = part_paths(Path(parts_dir), p, key)
    articles, dropped, counters, file_errors = process_warc(p, config)
    atomic_write_table(paths["articles"], articles, schema.ARTICLES)
    atomic_write_table(paths["dropped"], dropped, schema.DROPPED)
    counters = {**counters, "part_key": key, "sha256": sha256_file(p), "size": p.stat().st_size,
                "file_errors": file_errors}
    atomic_write_json(paths["done"], counters)
    return counters


def _run_part_task(task: tuple[str, str, str, dict[str, Any]]) -> str:
    run_part(*task)
    return task[0]


# ---------------------------------------------------------------------------------------------
# executors
# ---------------------------------------------------------------------------------------------


def _process_files(tasks: list[tuple[str, str, str]], cfg: dict, engine: str, workers: int, progress: bool,
                   ray_address: str | None, on_file_done: Callable[[str], None] | None) -> None:
    """Run `run_part` over the pending files on the core executor (local pool or Ray), one bar."""
    from tqdm import tqdm

    bar = tqdm(total=len(tasks), desc="WARC files", unit="file", disable=not progress)
    try:
        for path in map_unordered(_run_part_task, [(p, d, k, cfg) for p, d, k in tasks], engine=engine,
                                  workers=workers, threads=None, ray_address=ray_address, error=CorpusError,
                                  broken_advice="Rerun the build: finished files are kept."):
            bar.update(1)
            if on_file_done:
                on_file_done(path)
    finally:
        bar.close()


# ---------------------------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------------------------


def _clean_temporaries(ws: Workspace) -> None:
    # leftovers of a build killed inside an atomic write
    for d in (ws.corpus_dir, ws.parts_dir, ws.articles_dir, ws.dropped_dir):
        if d.is_dir():
            for tmp in d.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)


def resolve_inputs(warc_paths: Iterable[str | Path]) -> list[Path]:
    """Existing WARC files, unique by resolved path, sorted by file name then path."""
    seen: dict[Path, Path] = {}
    for raw in warc_paths:
        p = Path(raw).expanduser()
        if not p.is_file():
            raise CorpusError(f"WARC file {p} does not exist or is not a file; check the --warc path/glob")
        seen.setdefault(p.resolve(), p.resolve())
    if not seen:
        raise CorpusError("no WARC files given; pass --warc 'path/*.warc.gz'")
    return sorted(seen, key=lambda p: (p.name, str(p)))


def build_corpus(
    warc_paths: Sequence[str | Path],
    workspace: str | Path,
    config: dict | None = None,
    workers: int | None = None,
    engine: str = "local",
    progress: bool = True,
    on_file_done: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build (or update) the corpus of `workspace` from WARC files; returns the build summary.

    Only files without a finished part are processed; dedup and the store always cover all inputs,
    so the result equals a from-scratch build. `on_file_done(path)` is called after each new part.
    """
    from forecast_env.corpus_build.report import build_report, render_markdown

    t_start = time.perf_counter()
    cfg = config if config is not None else load_config("corpus")
    exec_cfg = cfg.get("execution") or {}
    if engine not in ("local", "ray"):
        raise CorpusError(f"engine {engine!r} is not known; choose local or ray")
    workers = int(workers or exec_cfg.get("workers") or os.cpu_count() or 1)
    inputs = resolve_inputs(warc_paths)
    ws = Workspace.at(workspace, create=True)
    for d in (ws.parts_dir, ws.articles_dir, ws.dropped_dir):
        d.mkdir(parents=True, exist_ok=True)
    _clean_temporaries(ws)

    keys = {p: part_key(p, cfg) for p in inputs}
    all_parts = {p: part_paths(ws.parts_dir, p, keys[p]) for p in inputs}
    pending = [(str(p), str(ws.parts_dir), keys[p]) for p in inputs if not part_done(all_parts[p])]
    t_proc = time.perf_counter()
    if pending:
        _process_files(pending, cfg, engine, workers, progress, exec_cfg.get("ray_address"), on_file_done)
    t_merge = time.perf_counter()

    # merge the parts of every input
    counters = [json.loads(all_parts[p]["done"].read_text()) for p in inputs]
    file_errors = [e for c in counters for e in c.get("file_errors", [])]
    # out of core (corpus_build/merge.py): dedup over keys, then the store month by month
    merged = merge_parts(ws, [merge_part_files(all_parts[p], cfg) for p in inputs], cfg, engine=engine,
                         workers=workers, ray_address=exec_cfg.get("ray_address"), progress=progress)
    t_dedup = t_merge + merged.timings["keys_s"] + merged.timings["pairs_s"]
    written, dropped = merged.written, merged.dropped
    write_file_errors(ws, file_errors)
    report = build_report(counters, dropped, merged.articles, file_errors)
    atomic_write_json(ws.corpus_dir / "report.json", report)
    atomic_write_bytes(ws.corpus_dir / "report.md", render_markdown(report).encode("utf-8"))

    file_ids = sorted(f"{c['warc_file']}:{c['size']}:{c['sha256']}" for c in counters)
    snapshot_id = hashlib.sha256(("\n".join(file_ids) + "\n" + snapshot_config_hash(cfg)).encode()).hexdigest()[:16]
    t_end = time.perf_counter()
    timings = {"process_s": round(t_merge - t_proc, 3), "dedup_s": round(t_dedup - t_merge, 3),
               "store_s": round(t_end - t_dedup, 3), "total_s": round(t_end - t_start, 3)}
    counts = {"files": len(inputs), "files_processed": len(pending), "records_in": report["records_in"],
              "kept": report["kept"], "dropped": dropped.num_rows, "leak_flags": report["leak_flags"],
              "file_errors": len(file_errors)}
    manifest_files = sorted(ws.articles_dir.glob("*.parquet")) + sorted(ws.dropped_dir.glob("*.parquet")) + [
        p for p in (ws.corpus_dir / "file_errors.parquet", ws.corpus_dir / "report.json", ws.corpus_dir / "report.md")
        if p.exists()]
    write_manifest(ws.corpus_dir, "corpus", files=manifest_files, config=cfg, extra={
        "snapshot_id": snapshot_id, "inputs": file_ids, "counts": counts, "timings": timings,
        "config_hash_snapshot": snapshot_config_hash(cfg)})
    return {
        "snapshot_id": snapshot_id,
        "counts": counts,
        "report": report,
        "timings": timings,
        "written": written,
        "paths": {"workspace": str(ws.root), "articles": str(ws.articles_dir), "dropped": str(ws.dropped_dir),
                  "report": str(ws.corpus_dir / "report.md"), "manifest": str(ws.corpus_dir / "manifest.json")},
    }


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
