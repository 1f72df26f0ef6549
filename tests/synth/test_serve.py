"""The served world (synth/serve.py) speaks HTTP as the real services do."""

from __future__ import annotations

import gzip

import httpx

from forecast_env.synth.serve import Fault, cc_path_of


def test_layout_listing_ranges_and_encoding(served_world):
    files = sorted(served_world.files)
    assert files and all(cc == cc_path_of(cc.rsplit("/", 1)[1]) for cc in files)
    with httpx.Client(headers={"Accept-Encoding": "identity"}) as c:
        folder = files[0].rsplit("/", 1)[0]
        listing = c.get(served_world.url + folder + "/warc.paths.gz")
        assert listing.status_code == 200 and gzip.decompress(listing.content).decode().split() == [files[0]]
        empty = c.get(served_world.url + "crawl-data/CC-NEWS/2025/04/warc.paths.gz")  # inside the span, no files
        assert empty.status_code == 200 and gzip.decompress(empty.content) == b""
        assert c.get(served_world.url + "crawl-data/CC-NEWS/2024/01/warc.paths.gz").status_code == 404
        data = served_world.files[files[0]].read_bytes()
        whole = c.get(served_world.url + files[0])
        assert whole.content == data and whole.headers["Accept-Ranges"] == "bytes" and whole.headers["ETag"]
        part = c.get(served_world.url + files[0], headers={"Range": "bytes=100-"})
        assert part.status_code == 206 and part.content == data[100:]
        assert part.headers["Content-Range"] == f"bytes 100-{len(data) - 1}/{len(data)}"
        past = c.get(served_world.url + files[0], headers={"Range": f"bytes={len(data)}-"})
        assert past.status_code == 416 and past.headers["Content-Range"] == f"bytes */{len(data)}"
        head = c.head(served_world.url + files[0])
        assert head.status_code == 200 and int(head.headers["Content-Length"]) == len(data)
    with httpx.Client() as c:  # httpx allows gzip by default: the body comes encoded, as from a CDN
        r = c.get(served_world.url + files[0])
        assert r.headers.get("Content-Encoding") == "gzip"


def test_faults_and_counters(served_world):
    cc = sorted(served_world.files)[0]
    name = cc.rsplit("/", 1)[1]
    served_world.plant(name, Fault("503", times=1, retry_after=3))
    served_world.plant(name, Fault("etag_change", times=1))
    with httpx.Client(headers={"Accept-Encoding": "identity"}) as c:
        first = c.get(served_world.url + cc)
        assert first.status_code == 503 and first.headers["Retry-After"] == "3"
        second = c.get(served_world.url + cc)
        assert second.status_code == 200
    assert served_world.stats()["statuses"] == [503, 200]
    assert served_world.etag_version[cc] == 1 and second.headers["ETag"].endswith('-1"')


def test_polymarket_paths_are_delegated(served_world):
    with httpx.Client() as c:
        r = c.get(served_world.url + "gamma/events", params={"limit": 2, "offset": 0})
    assert r.status_code == 200 and isinstance(r.json(), list)
    assert any(line.startswith("events.polymarket.gamma_url=") for line in served_world.client_settings())
