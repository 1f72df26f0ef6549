"""Reading CC-NEWS WARC files: `response` records with decoded HTML, or a drop with a reason code.

Stage 1 of the corpus builder (docs/design.md §2.extraction). Non-response records (warcinfo, request, metadata) are
skipped silently; each response record becomes either a `WarcPage` (HTML decoded to text) or a
`ReadDrop` whose reason is one of `schema.CORPUS_REASONS["read"]`. A truncated or corrupt file keeps
what was read before the fault and reports the fault on the reader (`WarcReader.error`); with the default
backend a gzipped file is read on from the next whole member after a corrupt one (CC-NEWS has one record
per member), so one bad record costs that record, not the rest of the file.
"""

from __future__ import annotations

import codecs
import io
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator

from forecast_env.errors import ConfigError

#: Content types accepted as HTML.
HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xml+html")
#: Content types that say nothing reliable: the payload is sniffed instead.
GENERIC_TYPES = ("", "application/octet-stream", "text/plain", "unknown/unknown", "binary/octet-stream")
#: Leading bytes of common binary formats served under a wrong or missing content type.
BINARY_MAGIC = (
    b"%PDF", b"\xff\xd8\xff", b"\x89PNG", b"GIF87a", b"GIF89a", b"PK\x03\x04", b"RIFF", b"\x1f\x8b",
    b"OggS", b"ID3", b"\x00\x00\x01\x00", b"wOFF", b"wOF2",
)
#: Candidate encodings for undeclared or mis-declared pages (charset_normalizer detection).
LEGACY_CHARSETS = ["cp1252", "iso8859_15", "cp1250", "iso8859_2", "cp1251", "koi8_r", "iso8859_7", "cp1253",
                   "cp1254", "iso8859_9", "cp1256", "cp1255", "shift_jis", "euc_jp", "gb18030", "big5",
                   "euc_kr", "utf_16"]
_HTML_SNIFF = re.compile(rb"<\s*(!doctype\s+html|html|head|body|title|meta|div|p|article)[\s>/]", re.IGNORECASE)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.IGNORECASE)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9_\-:.]+)", re.IGNORECASE)


@dataclass(frozen=True)
class WarcPage:
    """One readable HTML response record."""

    url: str
    crawl_time: datetime  # WARC-Date, aware UTC
    record_id: str | None
    offset: int
    status: int
    content_type: str | None
    last_modified: str | None  # HTTP Last-Modified header, raw
    html: str
    charset: str
    truncated: bool  # payload cut at read.max_payload_bytes


@dataclass(frozen=True)
class ReadDrop:
    """A response record dropped at the read stage."""

    url: str | None
    crawl_time: datetime | None
    record_id: str | None
    offset: int
    reason: str  # one of schema.CORPUS_REASONS["read"]
    detail: str | None


def parse_warc_date(value: str | None) -> datetime | None:
    """Parse a WARC-Date (`2025-03-05T12:00:00Z`, fractional seconds allowed) to aware UTC."""
    if not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def _norm_charset(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name.strip().strip("\"'").lower()).name
    except LookupError:
        return None


def sniff_is_html(payload: bytes) -> bool:
    """True when the first bytes look like HTML and not like a known binary format."""
    head = payload[:4096]
    if head.lstrip().startswith(BINARY_MAGIC) or head.startswith(BINARY_MAGIC):
        return False
    return bool(_HTML_SNIFF.search(head))


def classify_content(content_type: str | None, payload: bytes) -> bool:
    """Whether a payload is HTML, from its declared type and, when missing/wrong, its bytes."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if payload[:8].startswith(BINARY_MAGIC):
        return False  # a PDF or image served as text/html
    if mime in HTML_TYPES:
        return True
    if mime in GENERIC_TYPES:
        return sniff_is_html(payload)
    return False


def decode_payload(payload: bytes, content_type: str | None) -> tuple[str, str] | None:
    """Decode HTML bytes: HTTP charset, else <meta charset> in the first 4 KB, else detection.

    A declared charset that fails to decode strictly falls through to detection; returns
    (text, charset) or None when nothing decodes.
    """
    candidates: list[str] = []
    if content_type:
        m = _HEADER_CHARSET.search(content_type)
        if m and (cs := _norm_charset(m.group(1))):
            candidates.append(cs)
    m2 = _META_CHARSET.search(payload[:4096])
    if m2 and (cs := _norm_charset(m2.group(1).decode("ascii", "ignore"))) and cs not in candidates:
        candidates.append(cs)
    if payload.startswith(codecs.BOM_UTF8):
        candidates.insert(0, "utf-8-sig")
    for cs in candidates:
        try:
            return payload.decode(cs), cs
        except (UnicodeDecodeError, LookupError):
            continue
    try:
        return payload.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        # the legacy encodings web pages actually use; open-ended detection picks exotic code pages
        best = from_bytes(payload[:200_000], cp_isolation=LEGACY_CHARSETS).best()
    except Exception:
        best = None
    if best is not None and best.encoding:
        try:
            return payload.decode(best.encoding), best.encoding
        except (UnicodeDecodeError, LookupError):
            pass
    return None


def gzip_fault(path: Path, chunk: int = 1 << 20) -> str | None:
    """None when every gzip member of the file is complete, else what is wrong (stream.GzipChecker)."""
    from forecast_env.corpus_build.stream import GzipChecker

    check = GzipChecker()
    try:
        with open(path, "rb") as fh:
            while block := fh.read(chunk):
                check.feed(block)
    except OSError as exc:
        return f"corrupt gzip data: {exc}"
    return check.result()


def _cut_short(record) -> bool:
    """True when the file ended before the record's declared length (truncated gzip member)."""
    return int(getattr(record.raw_stream, "limit", 0) or 0) > 0


#: WARC readers: fastwarc (resiliparse's C++ reader, about 4x faster) and warcio; both give the
#: same items, offsets and file faults (tests/corpus_build/test_warc.py reads every planted case with both).
BACKENDS = ("fastwarc", "warcio")


def _fast_types() -> Any:
    from fastwarc.warc import WarcRecordType

    return WarcRecordType


def _after_empty_members(fh: BinaryIO, start: int, skip_first: bool) -> int | None:
    """Where reading resumes after fastwarc stopped at `start`: the first gzip member holding data after
    one or more empty members (the member at `start` itself passed over when `skip_first`: its record was
    read); None when no empty member follows (the end, or a fault that `gzip_fault` reports)."""
    pos, empty = start, 0
    while True:
        fh.seek(pos)
        d = zlib.decompressobj(wbits=31)
        size = 0
        try:
            while not d.eof:
                chunk = fh.read(1 << 16)
                if not chunk:
                    return None
                size += len(d.decompress(chunk))
        except zlib.error:
            return None
        if size or skip_first:
            if not skip_first:
                return pos if empty else None
        else:
            empty += 1
        skip_first = False
        pos = fh.tell() - len(d.unused_data)


def _next_warc_member(fh: BinaryIO, after: int) -> int | None:
    """The offset of the first gzip member after `after` that decompresses whole and holds a WARC record
    (where reading resumes after a corrupt member); None when there is none."""
    pos = after + 1
    while True:
        fh.seek(pos)
        window = fh.read(1 << 16)
        if not window:
            return None
        hit = window.find(b"\x1f\x8b\x08")
        if hit < 0:
            pos += max(1, len(window) - 2)
            continue
        pos += hit
        fh.seek(pos)
        d = zlib.decompressobj(wbits=31)
        head = b""
        try:
            while not d.eof:
                chunk = fh.read(1 << 16)
                if not chunk:
                    break
                out = d.decompress(chunk)
                if len(head) < 8:
                    head += out[:8]
        except zlib.error:
            pass
        if d.eof and head.startswith(b"WARC/"):
            return pos
        pos += 1


class WarcReader:
    """Iterate the response records of one WARC file; after iteration, `error` holds a file fault."""

    def __init__(self, path: str | Path | BinaryIO | io.RawIOBase, max_payload_bytes: int = 5_000_000,
                 backend: str = "fastwarc", name: str | None = None) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"WARC reader backend {backend!r} is not known (reading {name or path}); "
                              f"choose one of {', '.join(BACKENDS)}")
        # a file object (a stream from corpus_build/stream.py) is read as it arrives; after the records it
        # is drained and its own gzip check (`.gzip`, the same GzipChecker as gzip_fault) gives the fault
        self.fileobj = None if isinstance(path, (str, Path)) else path
        self.path = (Path(path) if isinstance(path, (str, Path))
                     else Path(name or getattr(path, "name_", None) or "stream"))
        self.max_payload_bytes = int(max_payload_bytes)
        self.backend = backend
        self.error: str | None = None
        self.records_read = 0  # every WARC record read whole, of any type
        self.responses = 0
        self.skipped_non_response = 0
        self._pass_last: int | None = None  # offset of the last record the current fastwarc pass read

    def __iter__(self) -> Iterator[WarcPage | ReadDrop]:
        if self.fileobj is not None:
            yield from self._iter_stream(self.fileobj)
            return
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed below; the open itself may fail
        except OSError as exc:
            self.error = f"cannot open: {exc}"
            return
        with fh:
            yield from self._records(fh)
        if self.error is None and self.path.name.endswith(".gz"):
            # both readers end quietly when a file is cut after a record's content but inside its member
            self.error = gzip_fault(self.path)

    def _iter_stream(self, fh) -> Iterator[WarcPage | ReadDrop]:
        yield from self._records(fh)
        if getattr(fh, "failure", None) is not None:
            return  # a transfer failure: the caller records it (stream.failure), not a file fault
        fh.drain()  # size and sha256 cover the whole file, and the gzip check sees its end
        if self.error is None and self.path.name.endswith(".gz"):
            self.error = fh.gzip.result()

    def _records(self, fh) -> Iterator[WarcPage | ReadDrop]:
        """The pages of `fh` with the configured backend; a reader error ends them and is kept as the fault."""
        try:
            if self.backend == "fastwarc":
                yield from self._iter_fastwarc(fh)
            else:
                yield from self._iter_warcio(fh)
        except GeneratorExit:
            raise
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}".strip()[:500]

    def _iter_warcio(self, fh) -> Iterator[WarcPage | ReadDrop]:
        it = ArchiveIterator(fh, check_digests=False)
        for record in it:
            if not str(record.format).startswith("warc"):
                # warcio falls back to the ARC format on bytes that are not WARC
                self.error = f"not a WARC record at offset {it.offset}: corrupt or not a WARC file"
                return
            if record.rec_type != "response":
                offset = it.get_record_offset()  # reads the record to its end
                if _cut_short(record):
                    self.error = f"truncated record at offset {offset}"
                    return
                self.skipped_non_response += 1
                self.records_read += 1
                continue
            headers = record.rec_headers
            payload = record.content_stream().read(self.max_payload_bytes + 1)
            offset = int(it.get_record_offset())  # reads the record to its end: payload first
            http = record.http_headers
            status, content_type, last_modified = 0, None, None
            if http is not None:
                try:
                    status = int(http.get_statuscode() or 0)
                except (TypeError, ValueError):
                    status = 0
                content_type = http.get_header("Content-Type")
                last_modified = http.get_header("Last-Modified")
            item = self._item(headers.get_header("WARC-Target-URI"), headers.get_header("WARC-Date"),
                              headers.get_header("WARC-Record-ID"), offset, status, content_type,
                              last_modified, payload)
            if _cut_short(record):
                self.error = f"truncated record at offset {item.offset} ({item.url})"
                return
            self.records_read += 1
            self.responses += 1
            yield item

    def _iter_fastwarc(self, fh) -> Iterator[WarcPage | ReadDrop]:
        from fastwarc.warc import ArchiveIterator as FastIterator

        start: int | None = 0
        fault: str | None = None
        while start is not None:
            self._pass_last = None
            self.error = None
            yield from self._fastwarc_pass(FastIterator(fh, record_types=_fast_types().any_type, parse_http=False))
            if self.fileobj is not None or not self.path.name.endswith(".gz"):
                break
            at = start if self._pass_last is None else self._pass_last
            if self.error is None:
                # fastwarc ends quietly at an empty gzip member (valid gzip: `cat a.gz empty.gz b.gz`) and
                # would lose every record after it: read on from the next member that holds data
                start = _after_empty_members(fh, at, self._pass_last is not None)
                if start is None:  # a member fastwarc cannot read can end it quietly too (a bad header flag)
                    start = _next_warc_member(fh, at)
                    if start is not None:
                        fault = fault or f"corrupt gzip member after offset {at} (read on from offset {start})"
            else:
                # a corrupt member ends fastwarc's pass: the fault stays the file's, and the records of the
                # members after it (one record per member in CC-NEWS) are read too
                fault = fault or self.error
                start = _next_warc_member(fh, at)
            if start is not None:
                fh.seek(start)
        self.error = fault or self.error

    def _fastwarc_pass(self, records: Any) -> Iterator[WarcPage | ReadDrop]:
        """One fastwarc pass over the records; a fault ends it (kept in `error`)."""
        response = _fast_types().response
        try:
            for record in records:
                offset = int(record.stream_pos)
                self._pass_last = offset
                if record.record_type != response:
                    if record.reader.consume() < record.content_length:
                        self.error = f"truncated record at offset {offset}"
                        return
                    self.skipped_non_response += 1
                    self.records_read += 1
                    continue
                status, content_type, last_modified = 0, None, None
                try:
                    record.parse_http()
                    http = record.http_headers
                except Exception:  # not an HTTP response block: read it as a payload without headers
                    http = None
                if http is not None:
                    status = int(http.status_code or 0)
                    content_type = http.get("Content-Type")
                    last_modified = http.get("Last-Modified")
                payload = record.reader.read(self.max_payload_bytes + 1)
                got = len(payload) + record.reader.consume()
                headers = record.headers
                item = self._item(headers.get("WARC-Target-URI"), headers.get("WARC-Date"),
                                  headers.get("WARC-Record-ID"), offset, status, content_type,
                                  last_modified, payload)
                if got < record.content_length:
                    self.error = f"truncated record at offset {offset} ({item.url})"
                    return
                self.records_read += 1
                self.responses += 1
                yield item
        except OSError as exc:  # fastwarc's word for bytes that are not WARC or not gzip
            self.error = f"not a WARC record after offset {self.records_read} records: {exc}"

    def _item(self, url: str | None, warc_date: str | None, record_id: str | None, offset: int,
              status: int, content_type: str | None, last_modified: str | None,
              payload: bytes) -> WarcPage | ReadDrop:
        """A response record's page, or its drop with the reason."""
        crawl_time = parse_warc_date(warc_date)
        truncated = len(payload) > self.max_payload_bytes
        payload = payload[: self.max_payload_bytes]

        def drop(reason: str, detail: str | None = None) -> ReadDrop:
            return ReadDrop(url or None, crawl_time, record_id, offset, reason, detail)

        if not url:
            return drop("no_target_uri")
        if status != 200:
            return drop("http_status", str(status))
        if not payload.strip():
            return drop("empty_payload")
        if not classify_content(content_type, payload):
            return drop("non_html", content_type or "no content type")
        decoded = decode_payload(payload, content_type)
        if decoded is None:
            return drop("undecodable", content_type)
        html, charset = decoded
        if not html.strip():
            return drop("empty_payload")
        if crawl_time is None:
            crawl_time = datetime(1970, 1, 1, tzinfo=UTC)
        return WarcPage(url, crawl_time, record_id, offset, status, content_type, last_modified, html,
                        charset, truncated)


#: Kinds of file fault (the `kind` column of WS/corpus/file_errors.parquet); a streamed file that could
#: not be had has one of `stream.TRANSFER_KINDS` instead.
FAULT_KINDS = ("truncated", "corrupt_gzip", "not_warc", "unreadable", "read_error")


def fault_kind(error: str) -> str:
    """The kind of a file fault from the reader's message (one of `FAULT_KINDS`)."""
    text = (error or "").lower()
    if "truncated" in text:
        return "truncated"
    if "gzip" in text:
        return "corrupt_gzip"
    if "not a warc" in text:
        return "not_warc"
    if "cannot open" in text:
        return "unreadable"
    return "read_error"
