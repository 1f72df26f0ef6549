"""Stage 1 with both WARC readers: fastwarc (the default) reads every planted case as warcio does."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from forecast_env.corpus_build.warc import BACKENDS, WarcReader
from tests.support.warc_data import Page, english_body, write_warc


def _read_all(path: Path, backend: str, cap: int = 5_000_000) -> tuple[list, WarcReader]:
    reader = WarcReader(path, max_payload_bytes=cap, backend=backend)
    return list(reader), reader


def assert_same(path: Path, cap: int = 5_000_000) -> tuple[list, WarcReader]:
    """Both backends yield equal items (every field, offsets included) and fault verdict, and equal
    record counts on sound files (in a cut gzip member they may disagree on the last header seen)."""
    (a, ra), (b, rb) = (_read_all(path, be, cap) for be in BACKENDS)
    assert a == b
    assert (ra.error is None) == (rb.error is None), (ra.error, rb.error)
    if ra.error is None:
        assert (ra.records_read, ra.responses, ra.skipped_non_response) == (
            rb.records_read, rb.responses, rb.skipped_non_response)
    return a, ra


def _odd_warc(path: Path) -> Path:
    """Records real crawls contain: a metadata record, a redirect, a response without a target URI,
    a response block that is not HTTP, lower-case HTTP header names, a blank payload, an unreadable
    WARC-Date, WARC/1.0 and WARC/1.1 records in one file."""
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="WARC/1.0")
        w.write_record(w.create_warcinfo_record(path.name, {"software": "tests"}))

        def response(url, body: bytes, status="200 OK", headers=None, **kw):
            http = StatusAndHeaders(status, headers or [("Content-Type", "text/html")], protocol="HTTP/1.1")
            return w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http, **kw)

        html = f"<html><body><article><p>{english_body(1)}</p></article></body></html>".encode()
        w.write_record(response("https://ex.com/ok", html))
        w.write_record(w.create_warc_record("https://ex.com/ok", "metadata", payload=io.BytesIO(b"fetchTimeMs: 12\r\n"),
                                            warc_content_type="application/warc-fields"))
        w.write_record(response("https://ex.com/moved", b"", status="301 Moved Permanently",
                                headers=[("Location", "https://ex.com/ok")]))
        w.write_record(response(None, html))
        block = b"<html><body><p>A response block that is not an HTTP message.</p></body></html>"
        fh.write(gzip.compress(  # written by hand: warcio's writer refuses such a block
            b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: https://ex.com/raw\r\n"
            b"WARC-Date: 2025-04-02T10:00:00Z\r\nWARC-Record-ID: <urn:uuid:raw-1>\r\n"
            b"Content-Type: text/html\r\nContent-Length: " + str(len(block)).encode()
            + b"\r\n\r\n" + block + b"\r\n\r\n"))
        w.write_record(response("https://ex.com/lm", html, headers=[
            ("content-type", "text/html;charset=ISO-8859-1"), ("Last-Modified", "Tue, 01 Apr 2025 08:00:00 GMT")]))
        w.write_record(response("https://ex.com/empty", b"   \n"))
        w.write_record(response("https://ex.com/nodate", html, warc_headers_dict={"WARC-Date": "not a date"}))
        w.warc_version = "WARC/1.1"
        w.write_record(response("https://ex.com/v11", html))
    return path


def test_backends_agree_on_ordinary_records_and_drops(tmp_path: Path) -> None:
    pages = [Page(f"https://ex.com/a{i}", body=english_body(i)) for i in range(5)] + [
        Page("https://ex.com/404", status=404, body="gone"),
        Page("https://ex.com/pdf", raw=b"%PDF-1.7\n binary", content_type="text/html"),
        Page("https://ex.com/untyped", body=english_body(9), content_type=""),
        Page("https://ex.com/latin", raw="<html><body><p>Crème brûlée</p></body></html>".encode("latin-1"),
             content_type="text/html; charset=ISO-8859-1"),
    ]
    items, reader = assert_same(write_warc(tmp_path / "a.warc.gz", pages))
    assert len(items) == 9 and reader.error is None


def test_odd_records_fastwarc_reads_on_where_warcio_gives_up(tmp_path: Path) -> None:
    """A response without WARC-Target-URI (or with a block that is not HTTP) makes warcio's iterator
    raise, so the warcio reader loses the rest of the file; fastwarc drops just that record, with a
    reason, and reads on. Up to that record both read the same."""
    path = _odd_warc(tmp_path / "odd.warc.gz")
    fast, rf = _read_all(path, "fastwarc")
    slow, rs = _read_all(path, "warcio")
    reasons = {i.url: getattr(i, "reason", "kept") for i in fast}
    assert reasons == {
        "https://ex.com/ok": "kept", "https://ex.com/moved": "http_status", None: "no_target_uri",
        "https://ex.com/raw": "http_status", "https://ex.com/lm": "kept", "https://ex.com/empty": "empty_payload",
        "https://ex.com/nodate": "kept", "https://ex.com/v11": "kept",
    }
    assert rf.error is None and rf.skipped_non_response == 2
    lm = next(i for i in fast if i.url == "https://ex.com/lm")
    assert lm.last_modified == "Tue, 01 Apr 2025 08:00:00 GMT" and lm.charset in ("latin-1", "iso8859-1")
    assert fast[: len(slow)] == slow and len(slow) == 2 and rs.error is not None


@pytest.mark.parametrize("cap", [300, 5_000_000])
def test_backends_agree_on_payload_cap(tmp_path: Path, cap: int) -> None:
    path = write_warc(tmp_path / "c.warc.gz", [Page("https://ex.com/big", body=english_body(3, 40))])
    (item,), _ = assert_same(path, cap)
    assert item.truncated == (cap == 300)


@pytest.mark.parametrize("frac", [0.05, 0.3, 0.6, 0.95, 0.999])
def test_backends_agree_on_truncated_files(tmp_path: Path, frac: float) -> None:
    pages = [Page(f"https://ex.com/t{i}", body=english_body(i)) for i in range(8)]
    path = write_warc(tmp_path / "t.warc.gz", pages)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * frac)])
    items, reader = assert_same(path)
    assert len(items) <= 8 and reader.error is not None


@pytest.mark.parametrize("content", [
    b"\x1f\x8b\x08\x00this is not gzip at all",
    b"hello, this is not a WARC file\r\n\r\nat all",
    b"",
    gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 999\r\n\r\nshort", mtime=0),  # one test id on every worker
])
def test_backends_agree_on_files_that_are_not_warc(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.warc.gz"
    path.write_bytes(content)
    items, reader = assert_same(path)
    assert items == []
    assert (reader.error is None) == (content == b"")


def test_backends_agree_on_an_uncompressed_file(tmp_path: Path) -> None:
    gz = write_warc(tmp_path / "u.warc.gz", [Page(f"https://ex.com/u{i}", body=english_body(i)) for i in range(3)])
    plain = tmp_path / "u.warc"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    items, reader = assert_same(plain)
    assert len(items) == 3 and reader.error is None


def test_backends_agree_on_the_sample_world(micro_world: Path) -> None:
    files = sorted((micro_world / "news").glob("*.warc.gz"))
    assert files
    faults = 0
    for path in files:
        _, reader = assert_same(path)
        faults += reader.error is not None
    assert faults >= 1  # the world plants a truncated file


def test_unknown_backend_is_refused(tmp_path: Path) -> None:
    from forecast_env.errors import ConfigError

    with pytest.raises(ConfigError, match="fastwarc"):
        WarcReader(tmp_path / "x.warc.gz", backend="nope")
