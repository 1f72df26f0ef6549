"""Byte-reproducible CC-NEWS-style WARC files.

warcio writes the records (WARC/1.0, uncompressed, into memory); each record is then compressed as
its own gzip member with `mtime=0`, so the same records always give the same bytes. Record ids are
uuid5 values derived from the seed, never uuid4, and WARC-Date is the simulated crawl time.
"""

from __future__ import annotations

import gzip
import io
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

NAMESPACE = uuid.UUID("6f0c8f5e-3c0b-4f43-9d55-5a1c2e0b7d11")


@dataclass
class Record:
    url: str
    crawl: datetime
    payload: bytes
    status: str = "200 OK"
    headers: list[tuple[str, str]] = field(default_factory=list)
    record_id: str = ""


def record_id(seed: int, *parts: object) -> str:
    return f"<urn:uuid:{uuid.uuid5(NAMESPACE, ':'.join(str(p) for p in (seed, *parts)))}>"


def warc_date(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _member(write) -> bytes:
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=False, warc_version="1.0")
    write(writer)
    return gzip.compress(buf.getvalue(), compresslevel=6, mtime=0)


def write_warc(path: Path, records: list[Record], seed: int, truncate_last: bool = False) -> list[int]:
    """Write `records` after a warcinfo record; returns each response record's byte offset."""
    name = path.name
    first = records[0].crawl if records else datetime(2025, 3, 1, tzinfo=UTC)

    def info(w: WARCWriter) -> None:
        body = (f"software: forecast-env synth\r\nformat: WARC File Format 1.0\r\n"
                f"isPartOf: CC-NEWS-SYNTH\r\noperator: forecast-env sample world (seed {seed})\r\n"
                f"description: synthetic news crawl for tests and demos\r\n").encode()
        hdrs = StatusAndHeaders("", [("WARC-Type", "warcinfo"), ("WARC-Date", warc_date(first)),
                                     ("WARC-Filename", name),
                                     ("WARC-Record-ID", record_id(seed, "warcinfo", name)),
                                     ("Content-Type", "application/warc-fields")], protocol="WARC/1.0")
        w.write_record(w.create_warc_record("", "warcinfo", payload=io.BytesIO(body), length=len(body),
                                            warc_headers=hdrs))

    out = [_member(info)]
    offsets = []
    pos = len(out[0])
    for rec in records:
        def resp(w: WARCWriter, rec: Record = rec) -> None:
            http = StatusAndHeaders(rec.status, list(rec.headers), protocol="HTTP/1.1")
            r = w.create_warc_record(rec.url, "response", payload=io.BytesIO(rec.payload), length=None,
                                     http_headers=http,
                                     warc_headers_dict={"WARC-Record-ID": rec.record_id,
                                                        "WARC-Date": warc_date(rec.crawl)})
            w.write_record(r)

        m = _member(resp)
        offsets.append(pos)
        out.append(m)
        pos += len(m)
    if truncate_last and len(out) > 1:
        last = out[-1]
        out[-1] = last[: min(len(last) - 1, 40)]  # inside the WARC headers: the record is lost
    path.write_bytes(b"".join(out))
    return offsets
