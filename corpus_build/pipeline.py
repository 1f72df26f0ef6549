"""The corpus build: per-WARC stages 1-7 in parallel, then global dedup, then the month store.

`process_warc(path, config)` (corpus_build/file_stages.py) is a pure function of one WARC file (read,
extract, normalize, lang, quality, timestamps, corpus window, leakage screen). Its result is written
as a *part* under `WS/corpus/parts/` (articles, dropped, counters JSON last, each atomically), so a
finished file is never processed twice and a killed build resumes. Then every part of the inputs is
merged, dedup (docs/design.md §2.dedup) runs over the whole corpus, and the month shards are written
(only those whose content changed), with the dropped records, a doc-id index, the funnel report and
the manifest.

Executors are separate from the per-file function: the core executor (`forecast_env.executor`: a
spawned process pool for `engine="local"`, Ray actors for `engine="ray"`) runs the same `run_part`,
one `PartTask` at a time through `forecast_env.workspace.task.NodeTask` (on a node's own scratch when
the workspace is on object storage).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from forecast_env import schema
from forecast_env.config import config_hash, load_config
from forecast_env.corpus_build.file_stages import (
    DIAGNOSTIC_KEYS,
    FileRun,
    body_mode_of,
    make_doc_id,
    per_file_config_hash,
    process_warc,
    resolved_extract,
)
from forecast_env.corpus_build.merge import PartFiles, keys_path, merge_parts, write_file_errors
from forecast_env.corpus_build.source import Source
from forecast_env.corpus_build.warc import fault_kind
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
from forecast_env.workspace.remote import is_remote, publisher, staged
from forecast_env.workspace.task import NodeTask, StagedWorkspace, WorkItem

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

#: Seconds between two refreshes of the build's progress line (records and bytes of files in flight).
PROGRESS_POLL_S = 1.0
#: Where a workspace's parts live, relative to its root.
PARTS = Workspace(Path()).parts_dir.as_posix()


def _resolved_quality(cfg: dict[str, Any]) -> dict[str, Any]:
    """The quality thresholds the build uses (profile table + explicit overrides), not the raw section."""
    from forecast_env.corpus_build.quality import resolve_quality

    return resolve_quality(cfg.get("quality"))


def snapshot_config_hash(cfg: dict[str, Any]) -> str:
    """Hash of the config minus execution settings (workers and engine do not change a corpus) and the
    index and search settings (embedding, IVF, BM25 and fusion parameters do not either)."""
    kept = {k: v for k, v in cfg.items() if k not in EXECUTION_KEYS + INDEX_KEYS + DIAGNOSTIC_KEYS}
    if "quality" in kept:
        kept["quality"] = _resolved_quality(cfg)
    kept.pop("extract", None)  # the own body path leaves the id as before the key existed
    if body_mode_of(cfg) != "own":
        kept["extract"] = resolved_extract(cfg)
    return config_hash(kept)


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


def _name_path(item: str | Path | Source) -> Path:
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

@dataclass(frozen=True)
class PartTask(WorkItem):
    """One input's per-WARC stages, written as its part under `corpus/parts/` of `root` (`run_part`)."""

    kind: ClassVar[str] = "part"
    source: str | Source          # a local WARC file (every worker reads it at this path) or a remote source
    key: str                      # the part's key (`part_key`)
    config: dict[str, Any]
    limiter: Any = None           # the politeness limiter remote sources share (`stream.start_limiter`)
    keep_dir: str | None = None   # where a streamed file's copy is kept (`--keep-warc`)

    @property
    def uri(self) -> str:
        """The input's URI (a source's) or path: what the build keys its results by."""
        return self.source.uri if isinstance(self.source, Source) else str(self.source)

    @property
    def name(self) -> str:
        """The input's file name."""
        return _name_path(self.source).name

    def files(self, parts_dir: str | Path = PARTS) -> dict[str, Path]:
        """The part's files (`part_paths`) under `parts_dir` (default: relative to the workspace)."""
        return part_paths(Path(parts_dir), _name_path(self.source), self.key)

    def outputs(self, result: Any) -> tuple[str, ...]:
        """The part's tables and counters JSON (last); nothing for a file whose transfer failed."""
        if result[1].get("failed"):
            return ()
        return tuple(p.as_posix() for p in self.files().values())


def run_part_task(task: PartTask) -> tuple[str, dict[str, Any]]:
    """Run `run_part` for one task: (the input's URI, its counters)."""
    parts_dir = task.path(PARTS)
    parts_dir.mkdir(parents=True, exist_ok=True)
    counters = run_part(task.source, str(parts_dir), task.key, task.config, task.limiter, task.keep_dir)
    return task.uri, counters


# ---------------------------------------------------------------------------------------------
# executors
# ---------------------------------------------------------------------------------------------


def _process_files(tasks: list[PartTask], cfg: dict, engine: str, workers: int, progress: bool,
                   ray_address: str | None, on_file_done: Callable[[str], None] | None,
                   keep_warc: str | Path | None = None, nodes: StagedWorkspace | None = None) -> dict[str, Any] | None:
    """Run `run_part` over the pending files on the core executor (local pool or Ray), one bar.

    Remote files share one politeness limiter (`stream.start_limiter`); the bar counts files, records
    and bytes. `nodes`: the workspace is on object storage and the Ray tasks run on nodes without the
    driver's disk (each part is published from the node and fetched here). Returns the limiter's
    statistics (None when every file was local)."""
    from tqdm import tqdm

    from forecast_env.corpus_build.stream import HttpSettings, start_limiter
    from forecast_env.executor import ray_session

    remote = any(isinstance(t.source, Source) and t.source.remote for t in tasks)
    parts_dir = tasks[0].path(PARTS) if tasks else Path(".")
    for stale in (parts_dir / ".progress").glob("*.json") if tasks else ():  # left by a killed build
        stale.unlink(missing_ok=True)
    keep = str(Path(keep_warc).expanduser().resolve()) if keep_warc else None
    bar = tqdm(total=len(tasks), desc="WARC files", unit="file", disable=not progress)
    t0, records, nbytes, failed = time.perf_counter(), 0, 0, 0
    stats = None
    with contextlib.ExitStack() as stack:
        limiter = None
        nodes = nodes if engine == "ray" else None
        if engine == "ray" and tasks:
            stack.enter_context(ray_session(ray_address, workers, CorpusError))
            if nodes is None:  # parts go to object storage from each node's scratch: no shared disk needed
                check_shared_storage(parts_dir)
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
                task_fn = nodes.task(run_part_task) if nodes is not None else NodeTask(run_part_task)
                items = [dataclasses.replace(t, limiter=limiter, keep_dir=keep) for t in tasks]
                by_uri = {t.uri: t for t in items}
                for path, counters in map_unordered(task_fn, items,
                                                    engine=engine, workers=workers, threads=None,
                                                    ray_address=ray_address, error=CorpusError,
                                                    broken_advice="Rerun the build: finished files are kept."):
                    if nodes is not None:
                        _fetch_part(nodes, by_uri[path], counters)
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


def _fetch_part(nodes: StagedWorkspace, task: PartTask, counters: dict[str, Any]) -> None:
    """Bring a part a node published (or its failure record) into the driver's staged folder."""
    if counters.get("failed"):
        atomic_write_json(failed_path(task.files(task.path(PARTS))), counters)
        return
    # reads only the part's own marker (listing every marker per part would cost parts^2 reads)
    nodes.fetch_outputs(task, (task.uri, counters))


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
    retries it. `keep_dropped_text` stores the first `file_stages.DROPPED_TEXT_CHARS` characters of each
    dropped record's text in the dropped tables (`text_head`, for `corpus why`): a different part, the
    same snapshot id.
    """
    if not is_remote(workspace):
        return _build_corpus(warc_paths, workspace, None, config, workers, engine, progress, on_file_done, keep_warc,
                             keep_dropped_text)
    # an object-store workspace: build in node-local scratch, publish from there
    with staged(workspace, pull=("corpus/",), publish=("corpus/",)) as local:
        publish_part = publisher(workspace, local)

        def done(path: str) -> None:
            publish_part(path)
            if on_file_done:
                on_file_done(path)

        nodes = StagedWorkspace(url=str(workspace).rstrip("/"), root=str(Path(local).resolve()))
        summary = _build_corpus(warc_paths, local, nodes, config, workers, engine, progress, done, keep_warc,
                                keep_dropped_text)
    summary["paths"] = {**summary["paths"], "workspace": str(workspace), "scratch": str(local)}
    return summary


def _build_corpus(warc_paths: Sequence[str | Path | Source], workspace: str | Path, nodes: StagedWorkspace | None,
                  config: dict | None, workers: int | None, engine: str, progress: bool,
                  on_file_done: Callable[[str], None] | None, keep_warc: str | Path | None,
                  keep_dropped_text: bool) -> dict[str, Any]:
    """`build_corpus` in a local folder (`nodes`: the object-store workspace it is the staged copy of,
    whose tasks run on Ray nodes that share no disk with this one)."""
    from forecast_env.corpus_build.report import build_report, dropped_total, render_markdown

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
    pending = [PartTask(root=str(ws.root), source=p if isinstance(p, Source) else str(p), key=keys[p], config=cfg)
               for p in inputs if not part_done(all_parts[p])]
    t_proc = time.perf_counter()
    limiter_stats = None
    if pending:
        limiter_stats = _process_files(pending, cfg, engine, workers, progress, exec_cfg.get("ray_address"),
                                       on_file_done, keep_warc, nodes)
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
    # out of core (corpus_build/merge/): dedup over keys, then the store month by month
    # an object-store workspace on Ray: each merge task runs on a node, reading the bucket, publishing there
    merged = merge_parts(ws, [merge_part_files(all_parts[p], cfg) for p in inputs], cfg, engine=engine,
                         remote=nodes,
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
    "FileRun",
    "PartTask",
    "body_mode_of",
    "build_corpus",
    "make_doc_id",
    "part_key",
    "per_file_config_hash",
    "process_warc",
    "run_part",
    "snapshot_config_hash",
]
