"""A sample world served on 127.0.0.1 in the real services' layouts, with planted faults.

`WorldServer(world_dir)` answers, on a port the OS picks:

- `/crawl-data/CC-NEWS/YYYY/MM/warc.paths.gz`: the month's listing (gzip, one path a line, in file
  name order, as Common Crawl publishes it) and `/crawl-data/CC-NEWS/YYYY/MM/NAME.warc.gz`: the
  world's WARC files (`WORLD/news/`; the month is read from the `CC-NEWS-YYYYMMDDhhmmss-NNNNN` name),
  plus any file added with `add_file` (real public WARC samples, a benchmark's big file);
- HTTP as the real server speaks it: `Content-Length`, an `ETag`, `Accept-Ranges: bytes`, GET and
  HEAD, `Range: bytes=A-` / `A-B` answered 206 with `Content-Range`, a start past the end 416 with
  `Content-Range: bytes */SIZE`, and the body gzip-encoded (`Content-Encoding: gzip`) whenever the
  client's `Accept-Encoding` allows gzip and does not ask for identity alone, as a CDN may do, so a
  client that does not ask for identity is caught;
- `/gamma/`, `/clob/`, `/data-api/`: delegated to `forecast_env.synth.serve_polymarket.handle`
  (imported when first needed).

Faults (`plant(name, Fault(kind, times=...))`, `name` a file name or `*`) apply to the next `times`
requests for that file: `503` / `429` (with `Retry-After`), `404`, `reset` (the connection is reset
after `at` body bytes), `short` (closed cleanly after `at` bytes: fewer than Content-Length),
`slow` (waits `delay` seconds before answering), `ignore_range` (200 and the whole file to a Range
request), `416` (to a Range request), `etag_change` (the file's ETag changes from then on). The first
planted fault that applies answers a request (plant in the order they should win); ETag changes apply
as side effects, with the request then answered by the next fault that applies. The server logs every
request on arrival (`log`: method, path, Range, status) and counts bytes sent and the most requests
open at once (`stats`).

`forecast-env synth --serve DIR` runs it and prints the `--set` lines that point the clients at it.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FAULT_KINDS = ("503", "429", "404", "reset", "short", "slow", "ignore_range", "416", "etag_change")
_NAME = re.compile(r"CC-NEWS-(\d{4})(\d{2})\d{2}\d{6}-\d+\.warc(\.gz)?$")
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
_SEND = 1 << 16


@dataclass
class Fault:
    """One planted fault (see the module docstring); `at` is a byte count or a fraction of the body."""

    kind: str
    times: int = 1  # requests it applies to (-1: every one)
    at: float = 0.5
    retry_after: float | None = 0
    delay: float = 0.0
    only_ranged: bool = False  # reset/short: only on a request that already resumes

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"fault kind {self.kind!r} is not known; choose one of {', '.join(FAULT_KINDS)}")


def cc_path_of(name: str) -> str | None:
    """`crawl-data/CC-NEWS/YYYY/MM/NAME` for a CC-NEWS file name, else None."""
    m = _NAME.match(name)
    return f"crawl-data/CC-NEWS/{m.group(1)}/{m.group(2)}/{name}" if m else None


class WorldServer:
    """Serve a world folder (module docstring); use as a context manager or start()/stop()."""

    def __init__(self, world_dir: str | Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.world_dir = Path(world_dir).resolve()
        self.files: dict[str, Path] = {}  # cc path -> file
        news = self.world_dir / "news"
        for p in sorted(news.glob("*.warc*")) if news.is_dir() else []:
            cc = cc_path_of(p.name)
            if cc:
                self.files[cc] = p
        self.faults: dict[str, list[Fault]] = {}
        self.etag_version: dict[str, int] = {}
        self.log: list[list] = []  # [method, path, Range, status] per request, in arrival order
        self._lock = threading.Lock()
        self.active = 0
        self.peak_active = 0
        self.bytes_sent: dict[str, int] = {}
        self._etags: dict[Path, str] = {}
        self._host, self._port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- set-up ----------------------------------------------------------------------------------
    def add_file(self, path: str | Path, cc_path: str | None = None) -> str:
        """Serve another file (e.g. a real WARC sample) at `cc_path` (default: by its CC-NEWS name)."""
        p = Path(path).resolve()
        cc = cc_path or cc_path_of(p.name)
        if cc is None:
            raise ValueError(f"{p.name} is not named like a CC-NEWS file; pass cc_path='crawl-data/CC-NEWS/YYYY/MM/...'")
        self.files[cc] = p
        return cc

    def plant(self, name: str, fault: Fault) -> None:
        """Plant `fault` for requests of the file named `name` (`*`: any WARC file)."""
        with self._lock:
            self.faults.setdefault(name, []).append(fault)

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.log.clear()
            self.bytes_sent.clear()
            self.peak_active = 0

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start the server first"
        return f"http://{self._host}:{self._httpd.server_address[1]}/"

    def client_settings(self) -> list[str]:
        """The `--set` lines that point the corpus builder (and the Polymarket client) at this server."""
        lines = [f"corpus.source.base_url={self.url}"]
        mod = _polymarket()
        if mod is not None and hasattr(mod, "client_settings"):
            lines += list(mod.client_settings(self.url))
        return lines

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": len(self.log), "peak_active": self.peak_active, "bytes_sent": dict(self.bytes_sent),
                    "statuses": [s for *_, s in self.log]}

    def months(self) -> dict[str, list[str]]:
        """Listing folder -> its paths, for every month from the first file's to the last's (a month of
        the span without files has an empty listing, as a real month without files would)."""
        out: dict[str, list[str]] = {}
        for cc in sorted(self.files):
            out.setdefault(cc.rsplit("/", 1)[0], []).append(cc)
        if out:
            first, last = min(out), max(out)
            y, m = int(first[-7:-3]), int(first[-2:])
            while (folder := f"crawl-data/CC-NEWS/{y:04d}/{m:02d}") < last:
                out.setdefault(folder, [])
                y, m = (y + 1, 1) if m == 12 else (y, m + 1)
        return dict(sorted(out.items()))

    # -- running ---------------------------------------------------------------------------------
    def start(self) -> WorldServer:
        server = self

        class Handler(_Handler):
            world = server

        self._httpd = _QuietServer((self._host, self._port), Handler)
        self._httpd.daemon_threads = True
        # stop() waits for the loop to look at its flag: every 0.05 s, not socketserver's 0.5 s per server
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="world-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> WorldServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------------------------
    def take_fault(self, cc: str, ranged: bool) -> Fault | None:
        """The fault that answers this request (the first that applies), after applying every ETag
        change that applies (a side effect: the request is then answered with the new ETag)."""
        name = cc.rsplit("/", 1)[-1]
        chosen = None
        with self._lock:
            for key in (name, "*"):
                for f in self.faults.get(key, []):
                    if f.times == 0 or (f.only_ranged and not ranged):
                        continue
                    if f.kind in ("ignore_range", "416") and not ranged:
                        continue
                    if f.kind != "etag_change" and chosen is not None:
                        continue
                    if f.times > 0:
                        f.times -= 1
                    if f.kind == "etag_change":
                        self.etag_version[cc] = self.etag_version.get(cc, 0) + 1
                    else:
                        chosen = f
        return chosen

    def etag(self, cc: str, path: Path) -> str:
        if path not in self._etags:
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                while block := fh.read(1 << 22):
                    h.update(block)
            self._etags[path] = h.hexdigest()[:20]
        v = self.etag_version.get(cc, 0)
        return f'"{self._etags[path]}{"-" + str(v) if v else ""}"'


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], OSError):  # a client that went away is not an error here
            super().handle_error(request, client_address)


def _polymarket():
    try:
        return importlib.import_module("forecast_env.synth.serve_polymarket")
    except ImportError:
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: on a kept-alive connection the body, written after the headers, otherwise waits for the
    # client's delayed ACK (about 40 ms a response on Linux; a slow planted fault sleeps on purpose instead)
    disable_nagle_algorithm = True
    world: WorldServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        w = self.world
        # logged on arrival, its status set before the headers go out: a client that has its answer
        # finds the request in the log
        self._entry: list[Any] = [self.command, self.path, self.headers.get("Range"), None]
        with w._lock:
            w.active += 1
            w.peak_active = max(w.peak_active, w.active)
            w.log.append(self._entry)
        try:
            self._route(head)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with w._lock:
                w.active -= 1

    def send_response(self, code: int, message: str | None = None) -> None:
        self._entry[3] = code
        super().send_response(code, message)

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None, head: bool = False) -> int:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
        return status

    def _route(self, head: bool) -> int:
        parts = urlsplit(self.path)
        path = parts.path
        if path.startswith(("/gamma/", "/clob/", "/data-api/")):
            mod = _polymarket()
            if mod is None:
                return self._reply(404, b"Polymarket endpoints are not available", head=head)
            answer = mod.handle(self.command, path, parse_qs(parts.query), self.world.world_dir)
            if answer is None:
                return self._reply(404, b"not found", head=head)
            status, headers, body = answer
            return self._reply(status, body, {k: v for k, v in headers.items() if k.lower() != "content-length"},
                               head=head)
        rel = path.lstrip("/")
        months = self.world.months()
        if rel.endswith("/warc.paths.gz"):
            folder = rel[: -len("/warc.paths.gz")]
            if folder not in months:
                return self._reply(404, b"NoSuchKey", {"Content-Type": "text/plain"}, head=head)
            body = gzip.compress("".join(f"{cc}\n" for cc in months[folder]).encode(), mtime=0)
            return self._reply(200, body, {"Content-Type": "application/octet-stream"}, head=head)
        if rel not in self.world.files:
            return self._reply(404, b"NoSuchKey", {"Content-Type": "text/plain"}, head=head)
        return self._file(rel, self.world.files[rel], head)

    def _file(self, cc: str, path: Path, head: bool) -> int:
        w = self.world
        name = cc.rsplit("/", 1)[-1]
        size = path.stat().st_size
        rng = self.headers.get("Range")
        m = _RANGE.match(rng.strip()) if rng else None
        fault = w.take_fault(cc, ranged=m is not None)
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.delay)
            fault = None
        if fault is not None and fault.kind in ("503", "429"):
            hdrs = {"Retry-After": str(int(fault.retry_after))} if fault.retry_after is not None else {}
            body = b"Slow Down" if fault.kind == "503" else b"Too Many Requests"
            return self._reply(int(fault.kind), body, hdrs, head=head)
        if fault is not None and fault.kind == "404":
            return self._reply(404, b"NoSuchKey", head=head)
        etag = w.etag(cc, path)
        if fault is not None and fault.kind == "416":
            return self._reply(416, b"", {"Content-Range": f"bytes */{size}", "ETag": etag}, head=head)
        start, end = 0, size - 1
        status = 200
        if m and not (fault is not None and fault.kind == "ignore_range"):
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            if start >= size or end < start:
                return self._reply(416, b"", {"Content-Range": f"bytes */{size}", "ETag": etag}, head=head)
            status = 206
        if fault is not None and fault.kind == "ignore_range":
            fault = None
        accept = (self.headers.get("Accept-Encoding") or "").lower()
        encode = "gzip" in accept and accept.strip() != "identity"
        headers = {"Content-Type": "application/octet-stream", "ETag": etag, "Accept-Ranges": "bytes",
                   "Last-Modified": "Mon, 03 Mar 2025 00:00:00 GMT"}
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        if encode:  # a CDN compressing for a client that allowed it: the bytes are not the file's
            with open(path, "rb") as fh:
                fh.seek(start)
                body = gzip.compress(fh.read(end - start + 1), mtime=0)
            headers["Content-Encoding"] = "gzip"
            return self._reply(status, body, headers, head=head)
        length = end - start + 1
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if head:
            return status
        cut = length
        if fault is not None and fault.kind in ("reset", "short"):
            cut = int(fault.at) if fault.at >= 1 else int(length * fault.at)
            cut = max(0, min(cut, length - 1))
        sent = 0
        with open(path, "rb") as fh:
            fh.seek(start)
            while sent < cut:
                block = fh.read(min(_SEND, cut - sent))
                if not block:
                    break
                self.wfile.write(block)
                sent += len(block)
        with w._lock:
            w.bytes_sent[name] = w.bytes_sent.get(name, 0) + sent
        if fault is not None and cut < length:  # cut short only by a fault
            self.wfile.flush()
            if fault.kind == "reset":  # RST instead of FIN
                with contextlib.suppress(OSError):
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        return status


def serve_forever(world_dir: str | Path, port: int = 0, out=print) -> None:
    """Run a WorldServer until interrupted, printing where it listens and the client settings."""
    with WorldServer(world_dir, port=port) as server:
        months = server.months()
        out(f"serving {server.world_dir} at {server.url} ({sum(map(len, months.values()))} WARC files in "
            f"{len(months)} months: {', '.join(m.split('/', 2)[-1] for m in months)})")
        out("point the clients at it with:")
        for line in server.client_settings():
            out(f"  --set {line}")
        out("press Ctrl-C to stop")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


__all__ = ["FAULT_KINDS", "Fault", "WorldServer", "cc_path_of", "serve_forever"]
