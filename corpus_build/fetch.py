"""`corpus fetch`: download WARC files into a local mirror of the Common Crawl layout, resumably.

`fetch_files(sources, out_dir, config)` writes each file to `OUT/<cc path>` (or `OUT/<name>` for a
file without one) through `stream.RemoteStream`: bytes go to `NAME.part` (with `NAME.part.json`, the
ETag and length the server gave), a rerun continues a `.part` with a Range request from its end
(and starts over when the ETag changed), and a file is renamed into place only when whole. Each
file's size, sha256 and ETag are recorded in `OUT/manifest.json`; a file already there with its
recorded size is not fetched again. The months' listings are copied to
`OUT/crawl-data/CC-NEWS/YYYY/MM/warc.paths.gz`, so OUT can itself serve as `corpus.source.base_url`.
All workers share one politeness limiter; progress shows bytes/s and an ETA.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from forecast_env.corpus_build.source import Source, SourceSpec, listing_url, month_listing, parse_months
from forecast_env.corpus_build.stream import HttpSettings, Limiter, RemoteStream
from forecast_env.errors import CorpusError
from forecast_env.store import atomic_write_bytes, atomic_write_json, remove_temporaries

MANIFEST = "manifest.json"


def target_path(out_dir: Path, source: Source) -> Path:
    """Where a source lands in the mirror."""
    return out_dir / (source.cc_path or source.name)


def read_manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / MANIFEST
    if not path.is_file():
        return {"files": {}, "failed": {}}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}: corrupt manifest ({exc}); delete it to fetch again") from exc
    data.setdefault("files", {})
    data.setdefault("failed", {})
    return data


def write_listings(out_dir: Path, spec: SourceSpec, settings: HttpSettings, base_url: str) -> None:
    """Copy the months' listings (as read, whole) into the mirror's layout."""
    if not spec.cc_news:
        return
    for y, m in parse_months(spec.cc_news):
        paths = month_listing(y, m, base_url, settings, None)
        dest = Path(listing_url(str(out_dir), y, m))
        atomic_write_bytes(dest, gzip.compress("".join(f"{p}\n" for p in paths).encode(), mtime=0))


class _Stopped(Exception):
    """Raised inside a download when the fetch was interrupted (its stream keeps the part for a resume)."""


def fetch_files(sources: Sequence[Source], out_dir: str | Path, config: dict[str, Any] | None = None,
                workers: int = 2, progress: bool = True, sleep=None, client=None) -> dict[str, Any]:
    """Download `sources` (remote ones) into `out_dir`; returns {fetched, skipped, failed, bytes, seconds}."""
    from tqdm import tqdm

    out = Path(out_dir).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    settings = HttpSettings.from_config(config)
    limiter = Limiter(settings.max_connections, settings.requests_per_second, settings.min_requests_per_second)
    remove_temporaries(out)  # a killed fetch's listings and manifest writes in flight
    manifest = read_manifest(out)
    lock = threading.Lock()
    todo, skipped = [], 0
    for s in sources:
        if not s.remote:
            raise CorpusError(f"{s.uri} is a local file: corpus fetch downloads URLs and CC-NEWS months")
        dest = target_path(out, s)
        rec = manifest["files"].get(s.identity)
        if dest.is_file() and rec and rec.get("size") == dest.stat().st_size:
            skipped += 1
        else:
            todo.append(s)
    t0 = time.perf_counter()
    state: dict[str, Any] = {"bytes": 0, "known": 0, "sizes": []}
    bar = tqdm(total=None, unit="B", unit_scale=True, unit_divisor=1024, desc=f"fetch {len(todo)} files",
               disable=not progress)

    stop = threading.Event()  # set on Ctrl-C / SIGTERM: each download stops at its next chunk

    def on_bytes(n: int) -> None:
        if stop.is_set():  # the stream keeps its .part and what the server said, for a Range resume
            raise _Stopped(f"{n} bytes into a chunk")
        with lock:
            state["bytes"] += n
            bar.update(n)

    def one(s: Source) -> tuple[Source, dict[str, Any] | None, str | None]:
        dest = target_path(out, s)
        kwargs: dict[str, Any] = {"keep_dir": dest.parent, "name": s.name, "on_bytes": on_bytes, "resume": True,
                                  "limiter": limiter, "client": client}
        if sleep is not None:
            kwargs["sleep"] = sleep
        for _ in range(3):  # an ETag change voids the .part: start over
            with RemoteStream(s.uri, settings, **kwargs) as stream:
                stream.drain()
                ident = stream.identity()
                failure = stream.failure
            if failure is None:
                return s, ident, None
            if failure.kind != "file_changed":
                return s, None, f"{failure.kind}: {failure}"
        return s, None, "file_changed: the file kept changing between attempts"

    fetched, failed = 0, {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
            futures = [pool.submit(one, s) for s in todo]
            try:
                for fut in as_completed(futures):
                    s, ident, error = fut.result()
                    with lock:
                        if ident is not None:
                            fetched += 1
                            state["sizes"].append(ident["size"])
                            manifest["files"][s.identity] = {"path": str(target_path(out, s).relative_to(out)),
                                                             "size": ident["size"], "sha256": ident["sha256"],
                                                             "etag": ident["etag"], "url": s.uri}
                            manifest["failed"].pop(s.identity, None)
                        else:
                            failed[s.identity] = error
                            manifest["failed"][s.identity] = {"url": s.uri, "error": error}
                        atomic_write_json(out / MANIFEST, manifest)
                        done = fetched + len(failed)
                        left = len(todo) - done
                        mean = sum(state["sizes"]) / len(state["sizes"]) if state["sizes"] else 0
                        dt = max(time.perf_counter() - t0, 1e-9)
                        rate = state["bytes"] / dt
                        eta = (left * mean / rate) if rate and mean else None
                        bar.set_postfix_str(f"{done}/{len(todo)} files" + (f", ETA {eta / 60:.1f} min" if eta else "")
                                            + (f", {len(failed)} failed" if failed else ""))
            except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the downloads stop at their next chunk, resumable
                stop.set()
                for fut in futures:
                    fut.cancel()
                raise
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    return {"fetched": fetched, "skipped": skipped, "failed": failed, "bytes": state["bytes"],
            "seconds": round(seconds, 3), "manifest": str(out / MANIFEST), "limiter": limiter.stats()}


def verify_mirror(out_dir: str | Path) -> list[str]:
    """Files of the manifest whose size or sha256 no longer match (empty: the mirror is whole)."""
    import hashlib

    out = Path(out_dir)
    bad = []
    for ident, rec in read_manifest(out)["files"].items():
        p = out / rec["path"]
        if not p.is_file() or p.stat().st_size != rec["size"]:
            bad.append(ident)
            continue
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            while block := fh.read(1 << 22):
                h.update(block)
        if h.hexdigest() != rec["sha256"]:
            bad.append(ident)
    return bad


__all__ = ["MANIFEST", "fetch_files", "read_manifest", "target_path", "verify_mirror", "write_listings"]
