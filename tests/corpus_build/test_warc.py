"""Stage 1: reading WARC response records, drop reasons, charsets, truncated files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from forecast_env.corpus_build.warc import ReadDrop, WarcPage, WarcReader, classify_content, decode_payload
from tests.support.warc_data import Page, english_body, write_warc

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _read(path: Path) -> tuple[list, WarcReader]:
    reader = WarcReader(path)
    return list(reader), reader


def test_reads_responses_and_skips_other_record_types(tmp_path: Path) -> None:
    pages = [Page(f"https://ex.com/a{i}", body=english_body(i), crawl="2025-04-02T10:00:00.5Z") for i in range(3)]
    items, reader = _read(write_warc(tmp_path / "a.warc.gz", pages))
    assert [type(i) for i in items] == [WarcPage] * 3
    assert reader.responses == 3 and reader.skipped_non_response == 4  # warcinfo + 3 requests
    assert reader.error is None
    offsets = [i.offset for i in items]
    assert offsets == sorted(offsets) and len(set(offsets)) == 3 and offsets[0] > 0
    first = items[0]
    assert first.url == "https://ex.com/a0" and first.status == 200
    assert first.crawl_time == datetime(2025, 4, 2, 10, 0, 0, 500000, tzinfo=UTC)
    assert first.record_id.startswith("<urn:uuid:") and "<article>" in first.html


def test_drop_reasons(tmp_path: Path) -> None:
    pages = [
        Page("https://ex.com/404", status=404, body="gone"),
        Page("https://ex.com/pdf", raw=b"%PDF-1.7\n binary", content_type="text/html"),
        Page("https://ex.com/img", raw=PNG, content_type="image/png"),
        Page("https://ex.com/untyped-png", raw=PNG, content_type=""),
        Page("https://ex.com/empty", raw=b"   ", content_type="text/html"),
        Page("https://ex.com/untyped-html", body=english_body(1), content_type=""),
        Page("https://ex.com/json", raw=b'{"a": 1}', content_type="application/json"),
    ]
    items, _ = _read(write_warc(tmp_path / "d.warc.gz", pages))
    got = {i.url: (i.reason if isinstance(i, ReadDrop) else "kept") for i in items}
    assert got == {
        "https://ex.com/404": "http_status", "https://ex.com/pdf": "non_html", "https://ex.com/img": "non_html",
        "https://ex.com/untyped-png": "non_html", "https://ex.com/empty": "empty_payload",
        "https://ex.com/untyped-html": "kept", "https://ex.com/json": "non_html",
    }


def test_charsets() -> None:
    latin = "<html><head><title>Café</title></head><body><p>Crème brûlée à la carte.</p></body></html>"
    text, cs = decode_payload(latin.encode("latin-1"), "text/html; charset=ISO-8859-1")
    assert "Crème brûlée" in text and cs in ("latin-1", "iso8859-1")
    meta = ("<html><head><meta charset='windows-1252'><title>x</title></head><body>"
            "<p>\u201cQuoted\u201d</p></body></html>")
    text, cs = decode_payload(meta.encode("cp1252"), "text/html")
    assert "\u201cQuoted\u201d" in text and cs == "cp1252"
    # a declared utf-8 that fails strictly falls back to detection instead of failing
    wrong = ("<html><body><p>" + "Der Bär läuft über die Straße. " * 20 + "</p></body></html>").encode("latin-1")
    out = decode_payload(wrong, "text/html; charset=utf-8")
    assert out is not None and "Straße" in out[0]
    assert decode_payload(b"plain ascii <p>ok</p>", None)[0].startswith("plain")


def test_classify_content_sniffs_missing_or_wrong_types() -> None:
    assert classify_content("text/html", b"<html><body>x</body></html>")
    assert not classify_content("text/html", b"\xff\xd8\xff\xe0 jpeg")
    assert classify_content(None, b"<!DOCTYPE html><html>")
    assert not classify_content("application/octet-stream", b"%PDF-1.4")
    assert not classify_content("image/jpeg", b"<html>")


def test_truncated_file_keeps_what_was_read(tmp_path: Path) -> None:
    pages = [Page(f"https://ex.com/t{i}", body=english_body(i)) for i in range(8)]
    path = write_warc(tmp_path / "t.warc.gz", pages)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.6)])
    items, reader = _read(path)
    assert 1 <= len(items) < 8
    assert reader.error is not None
    garbage = tmp_path / "g.warc.gz"
    garbage.write_bytes(b"\x1f\x8b\x08\x00this is not gzip at all")
    items, reader = _read(garbage)
    assert items == [] and reader.error is not None


def test_missing_file_is_a_file_error(tmp_path: Path) -> None:
    reader = WarcReader(tmp_path / "nope.warc.gz")
    assert list(reader) == [] and reader.error and "cannot open" in reader.error


@pytest.mark.parametrize("cap", [200, 10_000_000])
def test_payload_cap(tmp_path: Path, cap: int) -> None:
    path = write_warc(tmp_path / "c.warc.gz", [Page("https://ex.com/big", body=english_body(3, 40))])
    (item,) = list(WarcReader(path, max_payload_bytes=cap))
    assert isinstance(item, WarcPage)
    assert item.truncated == (cap == 200)
    assert len(item.html.encode()) <= cap
