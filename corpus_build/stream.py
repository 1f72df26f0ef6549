"""Reading a remote WARC file as a resumable byte stream, politely (docs/data.md).

`RemoteStream` is a read-only file object over one HTTP(S) file: the WARC readers of
`corpus_build/warc.py` pull records from it while it downloads, so the file never has to be on
disk. The stream:

- asks for `Accept-Encoding: identity` and checks the server did not encode the body anyway;
- after a dropped connection, a timeout or a short body resumes with `Range: bytes=POS-` from the
  first byte not yet handed to the reader (never from zero), checks the 206's `Content-Range`
  (start and total); a 200 that ignores the Range is read again from zero, the bytes already
  consumed skipped; a 416 at the end of the file is the end; an ETag that changes between attempts
  raises `FileChanged` (the caller restarts the file from zero, whatever it had read is void);
- retries 503, 429, other 5xx and transport errors with exponential backoff and jitter, honouring
  `Retry-After` (the `sleep` is injectable so tests never wait); 404 and other 4xx fail at once;
- hashes (sha256) and gzip-checks (`GzipChecker`, the same code as a local file's check) every byte
  as it is consumed, and can keep a copy (`keep_dir`), written to `NAME.part` and renamed when whole.

A transfer that cannot complete ends the stream early and keeps a `TransferError` with a `kind` (one
of `TRANSFER_KINDS`) on `stream.failure` (`check()` raises it): never raised inside the reader, so the
caller records the file as failed however the reader reacted to the early end.

Politeness: every request takes a token from a `Limiter` (a request rate and a cap on open
connections, shared by every worker of a build: in-process, through a `multiprocessing` manager for
the local pool, or as a named Ray actor, see `start_limiter`), which halves the rate after a 503 or
429 and raises it again slowly (additive increase) as requests succeed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any

from forecast_env.crashpoints import crash_point
from forecast_env.errors import ConfigError, CorpusError

#: Why a file could not be had (the `kind` of a transfer failure; docs/data.md "File faults").
TRANSFER_KINDS = ("http_404", "http_4xx", "retries_exhausted", "bad_range", "encoded_body", "file_changed",
                  "not_found_locally")
#: Statuses that are retried (with backoff); every other 4xx fails the file at once.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
#: How many times a file whose ETag changed mid-transfer is restarted from zero before it fails.
MAX_FILE_RESTARTS = 2
#: Exit status of `corpus build` / `corpus fetch` when some files could not be had (not 1: internal
#: error, not 2: bad input); `--allow-failed` makes it 0. A rerun retries those files.
FILES_FAILED_EXIT = 4


class TransferError(CorpusError):
    """A remote file could not be read whole after the retries; `kind` is one of `TRANSFER_KINDS`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class FileChanged(TransferError):
    """The server's ETag (or size) changed between attempts: the bytes read so far are void."""

    def __init__(self, message: str) -> None:
        super().__init__("file_changed", message)


@dataclass(frozen=True)
class HttpSettings:
    """The `corpus.source` config section: where files come from and how politely they are read."""

    base_url: str = "https://data.commoncrawl.org/"
    user_agent: str = "forecast-env/0.1 (CC-NEWS corpus builder)"
    max_connections: int = 4
    requests_per_second: float = 2.0
    min_requests_per_second: float = 0.05
    retries: int = 8
    backoff_base_s: float = 1.0
    backoff_max_s: float = 120.0
    timeout_s: float = 60.0
    chunk_bytes: int = 1 << 20

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> HttpSettings:
        """Settings from a corpus config (its `source` section; defaults where a key is absent)."""
        src = dict((cfg or {}).get("source") or {})
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in src.items() if k in known}
        s = cls(**kwargs)
        if s.max_connections < 1:
            raise ConfigError(f"corpus.source.max_connections must be >= 1, got {s.max_connections}")
        if not s.requests_per_second > 0 or not s.min_requests_per_second > 0:
            raise ConfigError("corpus.source.requests_per_second and min_requests_per_second must be > 0")
        if s.retries < 0 or s.chunk_bytes < 1024:
            raise ConfigError("corpus.source.retries must be >= 0 and chunk_bytes >= 1024")
        return s


# ---------------------------------------------------------------------------------------------
# politeness: one limiter per build
# ---------------------------------------------------------------------------------------------


class Limiter:
    """A token bucket (requests per second) plus a cap on open connections, with AIMD backoff.

    Thread-safe; `try_acquire` never blocks (it returns how long to wait), so the same object serves
    threads directly, processes through a manager proxy and Ray workers as an actor.
    """

    def __init__(self, max_connections: int, rate: float, min_rate: float = 0.05,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_connections = int(max_connections)
        self.max_rate = float(rate)
        self.min_rate = min(float(min_rate), self.max_rate)
        self.rate = self.max_rate
        self.clock = clock
        self.tokens = 1.0
        self.stamp = clock()
        self.active = 0
        self.peak_active = 0
        self.requests = 0
        self.throttled = 0
        self.lowest_rate = self.rate
        self._lock = threading.Lock()

    def try_acquire(self) -> float:
        """0.0 when a connection slot and a request token are taken now, else seconds to wait."""
        with self._lock:
            now = self.clock()
            self.tokens = min(max(1.0, self.rate), self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.active >= self.max_connections:
                return 0.05
            if self.tokens < 1.0:
                return (1.0 - self.tokens) / self.rate
            self.tokens -= 1.0
            self.active += 1
            self.requests += 1
            self.peak_active = max(self.peak_active, self.active)
            return 0.0

    def release(self) -> None:
        """Give back a connection slot."""
        with self._lock:
            self.active = max(0, self.active - 1)

    def penalize(self) -> None:
        """A 503/429: halve the rate (not below the floor) and empty the bucket."""
        with self._lock:
            self.throttled += 1
            self.rate = max(self.min_rate, self.rate / 2.0)
            self.tokens = 0.0
            self.lowest_rate = min(self.lowest_rate, self.rate)

    def reward(self) -> None:
        """A successful request: raise the rate by a twentieth of the maximum (slow recovery)."""
        with self._lock:
            self.rate = min(self.max_rate, self.rate + self.max_rate / 20.0)

    def stats(self) -> dict[str, Any]:
        """What the funnel reports: requests, peak connections, throttling, rates."""
        with self._lock:
            return {"requests": self.requests, "peak_connections": self.peak_active,
                    "max_connections": self.max_connections, "throttled": self.throttled,
                    "max_rate": self.max_rate, "lowest_rate": round(self.lowest_rate, 4),
                    "rate_now": round(self.rate, 4)}


class RayLimiter:
    """A handle on a named Ray actor holding a `Limiter` (the same methods, called remotely)."""

    def __init__(self, name: str, namespace: str | None = None) -> None:
        self.name = name
        self.namespace = namespace
        self._actor = None

    def _get(self):
        if self._actor is None:
            import ray

            self._actor = ray.get_actor(self.name, namespace=self.namespace)
        return self._actor

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "_actor": None}

    def try_acquire(self) -> float:
        import ray

        return float(ray.get(self._get().try_acquire.remote()))

    def release(self) -> None:
        self._get().release.remote()

    def penalize(self) -> None:
        self._get().penalize.remote()

    def reward(self) -> None:
        self._get().reward.remote()

    def stats(self) -> dict[str, Any]:
        import ray

        return ray.get(self._get().stats.remote())


class _LimiterManager(BaseManager):
    """Serves one `Limiter` to the local pool's processes (its proxies pickle into their tasks)."""


_LimiterManager.register("Limiter", Limiter)


@contextlib.contextmanager
def start_limiter(settings: HttpSettings, engine: str = "local", workers: int = 1) -> Iterator[Any]:
    """The build's one limiter: in-process for one worker, a manager proxy for the local pool, a named
    Ray actor for `engine="ray"` (Ray must be initialized by the caller). Yields the handle."""
    if engine == "ray":
        import uuid

        import ray

        name = f"forecast-env-limiter-{uuid.uuid4().hex[:12]}"
        # Ray's stubs type a remote class's handle without its methods' `.remote`: the handle is untyped here
        remote_limiter: Any = ray.remote(num_cpus=0)(Limiter)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # on the driver's node (a cluster's head), so a worker node lost mid-build does not take the limiter
        # with it; restarted (with fresh counts) if its own process dies
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        actor = remote_limiter.options(name=name, scheduling_strategy=here, max_restarts=-1,
                                       max_task_retries=-1).remote(
            settings.max_connections, settings.requests_per_second, settings.min_requests_per_second)
        handle = RayLimiter(name, ray.get_runtime_context().namespace)
        ray.get(actor.stats.remote())  # started before any worker looks it up
        try:
            yield handle
        finally:
            ray.kill(actor)
    elif workers <= 1:
        yield Limiter(settings.max_connections, settings.requests_per_second, settings.min_requests_per_second)
    else:
        import multiprocessing

        mgr = _LimiterManager(ctx=multiprocessing.get_context("spawn"))
        mgr.start()
        try:
            proxy = mgr.Limiter  # type: ignore[attr-defined]  # made at run time by register() above
            yield proxy(settings.max_connections, settings.requests_per_second, settings.min_requests_per_second)
        finally:
            mgr.shutdown()


# ---------------------------------------------------------------------------------------------
# gzip check while streaming
# ---------------------------------------------------------------------------------------------


class GzipChecker:
    """Feed a file's bytes in order; `result()` is None when every gzip member is whole, else the fault.

    The one implementation of the check (`warc.gzip_fault` reads a local file through it), so a
    streamed file and the same file on disk report the same fault in the same words.
    """

    def __init__(self) -> None:
        self._dec = zlib.decompressobj(31)
        self._in_member = False
        self._error: str | None = None

    def feed(self, block: bytes) -> None:
        if self._error is not None or not block:
            return
        try:
            data = block
            while data:
                self._dec.decompress(data, 1 << 22)
                while self._dec.unconsumed_tail and not self._dec.eof:
                    self._dec.decompress(self._dec.unconsumed_tail, 1 << 22)
                self._in_member = True
                if self._dec.eof:
                    data = self._dec.unused_data
                    self._dec = zlib.decompressobj(31)
                    self._in_member = False
                else:
                    data = b""
        except zlib.error as exc:
            self._error = f"corrupt gzip data: {exc}"

    def result(self) -> str | None:
        if self._error is not None:
            return self._error
        return "truncated gzip member at the end of the file" if self._in_member else None


class CheckedReader(io.RawIOBase):
    """A read-only wrapper that sha256-hashes and gzip-checks a file object's bytes as they are read
    (an s3 object or any other file object without a `RemoteStream`'s own checks)."""

    def __init__(self, raw: Any, chunk_bytes: int = 1 << 20) -> None:
        super().__init__()
        self.raw = raw
        self.chunk_bytes = chunk_bytes
        self.pos = 0
        self.sha = hashlib.sha256()
        self.gzip = GzipChecker()
        self.failure: TransferError | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.raw.read(len(b))
        if not data:
            return 0
        b[: len(data)] = data
        self.pos += len(data)
        self.sha.update(data)
        self.gzip.feed(data)
        return len(data)

    def drain(self) -> None:
        while self.read(self.chunk_bytes):
            pass

    def identity(self) -> dict[str, Any]:
        return {"size": self.pos, "sha256": self.sha.hexdigest(), "gzip_fault": self.gzip.result()}


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------


def make_client(settings: HttpSettings):
    """An httpx client with the build's User-Agent, identity encoding and timeouts."""
    import httpx

    return httpx.Client(headers={"User-Agent": settings.user_agent, "Accept-Encoding": "identity"},
                        timeout=httpx.Timeout(settings.timeout_s), follow_redirects=True)


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds a Retry-After header asks for (delta seconds or an HTTP date), None when absent/bad."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def backoff_s(attempt: int, settings: HttpSettings, retry_after: float | None, rng: random.Random) -> float:
    """Exponential backoff with full jitter in [0.5, 1.5) x base x 2^attempt, at least Retry-After."""
    wait = min(settings.backoff_max_s, settings.backoff_base_s * (2 ** attempt)) * (0.5 + rng.random())
    if retry_after is not None:
        wait = max(wait, min(retry_after, settings.backoff_max_s * 4))
    return wait


def _transport_errors() -> tuple[type[BaseException], ...]:
    import httpx

    return (httpx.TransportError, httpx.StreamError, OSError)


class _Polite:
    """Take a limiter slot per request and release it when the response is closed."""

    def __init__(self, limiter: Any, sleep: Callable[[float], None]) -> None:
        self.limiter = limiter
        self.sleep = sleep

    def acquire(self) -> None:
        if self.limiter is None:
            return
        while (wait := float(self.limiter.try_acquire())) > 0:
            self.sleep(wait)

    def release(self) -> None:
        if self.limiter is not None:
            self.limiter.release()


def fetch_bytes(url: str, settings: HttpSettings, *, limiter: Any = None, client=None,
                sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> bytes:
    """GET a small file whole (a listing), with the same retries and politeness as a stream."""
    with RemoteStream(url, settings, limiter=limiter, client=client, sleep=sleep, rng=rng) as s:
        data = s.read()
        s.check()
        return data


class RemoteStream(io.RawIOBase):
    """A resumable, hashed, gzip-checked, read-only stream over one HTTP(S) file (module docstring)."""

    def __init__(self, url: str, settings: HttpSettings, *, limiter: Any = None, client=None,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 keep_dir: str | Path | None = None, name: str | None = None,
                 on_bytes: Callable[[int], None] | None = None, resume: bool = False) -> None:
        super().__init__()
        self.url = url
        self.settings = settings
        self.name_ = name or url.rstrip("/").rsplit("/", 1)[-1]
        self._own_client = client is None
        self._client = client if client is not None else make_client(settings)
        self._polite = _Polite(limiter, sleep)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._limiter = limiter
        self._on_bytes = on_bytes
        self.pos = 0  # bytes handed to the reader
        self.length: int | None = None
        self.etag: str | None = None
        self.sha = hashlib.sha256()
        self.gzip = GzipChecker()
        self.failure: TransferError | None = None
        self.stats: dict[str, Any] = {"requests": 0, "resumes": 0, "restarts_from_zero": 0, "retries": 0,
                                      "bytes_fetched": 0, "statuses": {}}
        self._resp = None
        self._it: Iterator[bytes] | None = None
        self._buf = b""
        self._keep_dir = Path(keep_dir) if keep_dir else None
        self._keep = None
        if self._keep_dir is not None:
            self._keep_dir.mkdir(parents=True, exist_ok=True)
            part = self._keep_dir / f"{self.name_}.part"
            meta = part.with_name(part.name + ".json")
            if resume and part.is_file() and meta.is_file():
                # a partial copy from an earlier run: its bytes count as read, the next request asks for the rest
                info = json.loads(meta.read_text())
                self.etag, self.length = info.get("etag"), info.get("length")
                with open(part, "rb") as fh:
                    while block := fh.read(1 << 22):
                        self.pos += len(block)
                        self.sha.update(block)
                        self.gzip.feed(block)
                self.stats["resumed_from_part"] = self.pos
                self._keep = open(part, "ab")  # noqa: SIM115 - closed in close()
            else:
                self._keep = open(part, "wb")  # noqa: SIM115 - closed in close()
            self._meta = meta

    # -- io protocol ---------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Only where the stream already is (readers ask for their position by seeking in place)."""
        target = {io.SEEK_SET: offset, io.SEEK_CUR: self.pos + offset}.get(whence)
        if target != self.pos:
            raise io.UnsupportedOperation(f"a remote stream cannot seek (to {offset}, whence {whence})")
        return self.pos

    def readinto(self, b) -> int:
        n = len(b)
        if n == 0:
            return 0
        while not self._buf:
            if self.failure is not None or (self.length is not None and self.pos >= self.length):
                return 0
            try:
                self._fill()
            except TransferError as exc:
                # reported as the end of the stream, never raised into the reader (fastwarc turns a Python
                # exception in read() into a panic); the caller checks `failure` (or calls `check`)
                self.failure = exc
                return 0
        chunk = self._buf[:n]
        self._buf = self._buf[len(chunk):]
        b[: len(chunk)] = chunk
        self._consume(chunk)
        return len(chunk)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            out = bytearray()
            while block := super().read(self.settings.chunk_bytes):
                out += block
            return bytes(out)
        return super().read(size)

    def drain(self) -> None:
        """Read (hash, check, keep) what the reader left unread, so size and sha256 cover the whole file."""
        while self.read(self.settings.chunk_bytes):
            pass

    def check(self) -> None:
        """Raise the transfer failure, if any (a failed stream reads as ended)."""
        if self.failure is not None:
            raise self.failure

    def close(self) -> None:
        if self.closed:
            return
        self._close_response()
        if self._own_client:
            self._client.close()
        if self._keep is not None and self._keep_dir is not None:  # a kept copy has its folder
            self._keep.close()
            part = self._keep_dir / f"{self.name_}.part"
            if self.failure is None and self.length is not None and self.pos == self.length:
                os.replace(part, self._keep_dir / self.name_)
                crash_point("fetch.renamed")
                self._meta.unlink(missing_ok=True)
            elif isinstance(self.failure, FileChanged):  # its bytes are void
                part.unlink(missing_ok=True)
                self._meta.unlink(missing_ok=True)
            else:  # kept for a later resume, with what the server said the file is
                self._meta.write_text(json.dumps({"etag": self.etag, "length": self.length, "url": self.url}))
        super().close()

    # -- results ---------------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        return self.failure is None and self.length is not None and self.pos >= self.length

    def identity(self) -> dict[str, Any]:
        """What the server said the file is, and what was read: length, ETag, sha256, gzip check."""
        return {"url": self.url, "size": self.pos, "content_length": self.length, "etag": self.etag,
                "sha256": self.sha.hexdigest(), "gzip_fault": self.gzip.result(), **self.stats}

    # -- internals -------------------------------------------------------------------------------
    def _consume(self, chunk: bytes) -> None:
        self.pos += len(chunk)
        self.sha.update(chunk)
        self.gzip.feed(chunk)
        if self._keep is not None:
            self._keep.write(chunk)
            crash_point("fetch.chunk")
        if self._on_bytes is not None:
            self._on_bytes(len(chunk))

    def _close_response(self) -> None:
        if self._resp is not None:
            with contextlib.suppress(Exception):
                self._resp.close()
            self._resp = None
            self._it = None
            self._polite.release()

    def _fill(self) -> None:
        """Put the next bytes in `_buf`, (re)connecting as needed; raises TransferError when out of tries."""
        attempt = 0
        last = "no response"
        errors = _transport_errors()
        while True:
            if self._it is None:
                outcome = self._connect()
                if outcome == "eof":
                    return
                if isinstance(outcome, tuple):  # (reason, retry-after)
                    last, retry_after = outcome
                    attempt = self._backoff(attempt, last, retry_after)
                    continue
                assert self._it is not None  # _connect returned None: it opened the body's iterator
            try:
                block = next(self._it, b"")
            except errors as exc:
                block, last = b"", f"connection dropped at byte {self.pos}: {type(exc).__name__}: {exc}"[:300]
            else:
                if not block and self.length is None:  # no Content-Length: the body's end is the file's
                    self.length = self.pos
                if not block:
                    last = f"short body: the response ended at byte {self.pos} of {self.length}"
            if block:
                self.stats["bytes_fetched"] += len(block)
                if self._skip:
                    cut = min(self._skip, len(block))
                    self._skip -= cut
                    block = block[cut:]
                    if not block:
                        continue
                self._buf = block
                return
            self._close_response()
            if self.length is not None and self.pos >= self.length:
                return
            attempt = self._backoff(attempt, last, None)

    def _backoff(self, attempt: int, last: str, retry_after: float | None) -> int:
        if attempt >= self.settings.retries:
            raise TransferError("retries_exhausted",
                                f"{self.url}: gave up after {attempt + 1} attempts at byte {self.pos}: {last}")
        self.stats["retries"] += 1
        self._sleep(backoff_s(attempt, self.settings, retry_after, self._rng))
        return attempt + 1

    def _connect(self) -> str | tuple[str, float | None] | None:
        """Open a response at `pos`: None when streaming, 'eof' at the end, (reason, retry_after) to retry."""
        import httpx

        headers = {}
        if self.pos > 0:
            headers["Range"] = f"bytes={self.pos}-"
        self._polite.acquire()
        self.stats["requests"] += 1
        try:
            req = self._client.build_request("GET", self.url, headers=headers)
            resp = self._client.send(req, stream=True)
        except (httpx.TransportError, OSError) as exc:
            self._polite.release()
            return (f"request failed: {type(exc).__name__}: {exc}"[:300], None)
        code = resp.status_code
        st = self.stats["statuses"]
        st[str(code)] = st.get(str(code), 0) + 1

        def fail_now(kind: str, message: str) -> None:
            resp.close()
            self._polite.release()
            raise TransferError(kind, message)

        if code in RETRY_STATUSES or code >= 500:
            if code in (429, 503) and self._limiter is not None:
                self._limiter.penalize()
            wait = retry_after_s(resp.headers.get("Retry-After"))
            resp.close()
            self._polite.release()
            return (f"HTTP {code}", wait)
        if code == 416:
            resp.close()
            self._polite.release()
            total = _content_range_total(resp.headers.get("Content-Range"))
            if self.length is not None and self.pos >= self.length:
                return "eof"
            if self.length is not None and total is not None and total != self.length:
                raise FileChanged(f"{self.url}: the file is now {total} bytes, was {self.length} (416 at byte "
                                  f"{self.pos}); its bytes read so far are void")
            # the same file, a range inside it refused: a confused server or cache, retried like a 5xx
            return (f"HTTP 416 at byte {self.pos} of {self.length}", None)
        if code == 404:
            fail_now("http_404", f"{self.url}: 404 Not Found (not retried; check the path or the listing)")
        if code >= 400 or code < 200 or code >= 300:
            fail_now("http_4xx", f"{self.url}: HTTP {code} (not retried)")
        enc = resp.headers.get("Content-Encoding", "identity").strip().lower()
        if enc not in ("", "identity"):
            fail_now("encoded_body", f"{self.url}: the server sent Content-Encoding {enc!r} although identity was "
                     "asked; the bytes would not be the file's")
        etag = resp.headers.get("ETag")
        if self.etag is not None and etag is not None and etag != self.etag:
            resp.close()
            self._polite.release()
            raise FileChanged(f"{self.url}: ETag changed from {self.etag} to {etag} between attempts")
        self._skip = 0
        if code == 206:
            start, end, total = _parse_content_range(resp.headers.get("Content-Range"))
            if start != self.pos or (self.length is not None and total is not None and total != self.length):
                fail_now("bad_range", f"{self.url}: asked for bytes {self.pos}- of {self.length}, got Content-Range "
                         f"{resp.headers.get('Content-Range')!r}")
            if self.length is None:
                self.length = total
            self.stats["resumes"] += 1
        else:  # 200: the whole file, from zero
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            if self.length is not None and total is not None and total != self.length:
                resp.close()
                self._polite.release()
                raise FileChanged(f"{self.url}: Content-Length changed from {self.length} to {total}")
            if self.length is None:
                self.length = total
            if self.pos > 0:  # the server ignored Range: skip what the reader already has
                self._skip = self.pos
                self.stats["restarts_from_zero"] += 1
        if self.etag is None:
            self.etag = etag
        if self._limiter is not None:
            self._limiter.reward()
        self._resp = resp
        self._it = resp.iter_raw()  # as the bytes arrive: a drop loses only what was not yet received
        return None

    _skip = 0


def _parse_content_range(value: str | None) -> tuple[int | None, int | None, int | None]:
    m = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", value or "")
    if not m:
        return None, None, None
    total = None if m.group(3) == "*" else int(m.group(3))
    return int(m.group(1)), int(m.group(2)), total


def _content_range_total(value: str | None) -> int | None:
    m = re.fullmatch(r"\s*bytes\s+\*/(\d+)\s*", value or "")
    return int(m.group(1)) if m else None


@dataclass
class TransferStats:
    """Totals over the files of a build (the funnel's transfer section)."""

    files: int = 0
    bytes: int = 0
    bytes_fetched: int = 0
    requests: int = 0
    resumes: int = 0
    restarts_from_zero: int = 0
    retries: int = 0
    statuses: dict[str, int] = field(default_factory=dict)

    def add(self, ident: dict[str, Any]) -> None:
        self.files += 1
        self.bytes += int(ident.get("size") or 0)
        for k in ("bytes_fetched", "requests", "resumes", "restarts_from_zero", "retries"):
            setattr(self, k, getattr(self, k) + int(ident.get(k) or 0))
        for code, n in (ident.get("statuses") or {}).items():
            self.statuses[code] = self.statuses.get(code, 0) + int(n)


__all__ = [
    "FILES_FAILED_EXIT",
    "MAX_FILE_RESTARTS",
    "TRANSFER_KINDS",
    "CheckedReader",
    "FileChanged",
    "GzipChecker",
    "HttpSettings",
    "Limiter",
    "RayLimiter",
    "RemoteStream",
    "TransferError",
    "TransferStats",
    "backoff_s",
    "fetch_bytes",
    "make_client",
    "retry_after_s",
    "start_limiter",
]
