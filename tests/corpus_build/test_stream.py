"""Streaming remote WARC files (corpus_build/stream.py) against the served micro world (synth/serve.py).

Each fault the real server can show is planted, and the test checks what the client did about it
from the server's own request log: resumed from the byte it had (never from zero), did not retry a
404, waited at least Retry-After, restarted a file whose ETag changed, never accepted an encoded body.
Builds streamed under every fault equal the local build of the same files, bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import httpx
import pytest

from forecast_env.corpus_build.pipeline import build_corpus
from forecast_env.corpus_build.source import SourceSpec, resolve_sources
from forecast_env.corpus_build.stream import (
    GzipChecker,
    HttpSettings,
    Limiter,
    RemoteStream,
    TransferError,
    backoff_s,
    retry_after_s,
)
from forecast_env.corpus_build.warc import gzip_fault
from forecast_env.synth.serve import Fault
from tests.support.stream_data import FakeClock, served_config, store_digest


def _files(server) -> list[tuple[str, Path]]:
    return sorted(server.files.items())


def _read_all(url: str, settings: HttpSettings, clock: FakeClock | None = None, **kw) -> RemoteStream:
    clock = clock or FakeClock()
    s = RemoteStream(url, settings, sleep=clock.sleep, **kw)
    s.drain()
    s.close()
    return s


def _settings(**kw) -> HttpSettings:
    base = {"requests_per_second": 1000.0, "backoff_base_s": 0.5, "backoff_max_s": 8.0, "retries": 4,
            "chunk_bytes": 16384, "timeout_s": 10.0}
    return HttpSettings(**{**base, **kw})


def _ranges(server, name: str) -> list[str | None]:
    return [rng for method, path, rng, _ in server.log if path.endswith(name) and method == "GET"]


# ---------------------------------------------------------------------------------------------
# one stream
# ---------------------------------------------------------------------------------------------


def test_reset_mid_body_resumes_from_the_first_unconsumed_byte(served_world):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("reset", times=2, at=0.4))
    s = _read_all(served_world.url + cc, _settings())
    data = path.read_bytes()
    assert s.complete and s.sha.hexdigest() == hashlib.sha256(data).hexdigest() and s.pos == len(data)
    ranges = _ranges(served_world, path.name)
    assert ranges[0] is None and len(ranges) == 3
    starts = [int(r.split("=")[1].rstrip("-")) for r in ranges[1:]]
    # the resumes start where the reader was, never at zero (a restart from zero would fail here)
    assert all(st > 0 for st in starts) and starts == sorted(starts)
    assert s.stats["resumes"] == 2 and s.stats["restarts_from_zero"] == 0
    assert s.stats["bytes_fetched"] == len(data)  # nothing fetched twice


def test_short_body_is_retried_with_range(served_world):
    cc, path = _files(served_world)[1]
    served_world.plant(path.name, Fault("short", times=1, at=0.5))
    s = _read_all(served_world.url + cc, _settings())
    assert s.complete and s.sha.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    assert _ranges(served_world, path.name)[1].startswith("bytes=") and s.stats["resumes"] == 1


def test_404_is_not_retried(served_world):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("404", times=-1))
    clock = FakeClock()
    s = _read_all(served_world.url + cc, _settings(), clock)
    assert s.failure is not None and s.failure.kind == "http_404"
    assert len(_ranges(served_world, path.name)) == 1 and clock.sleeps == []
    with pytest.raises(TransferError):
        s.check()


def test_503_forever_gives_up_after_the_retries_with_growing_waits(served_world):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("503", times=-1, retry_after=None))
    clock = FakeClock()
    s = _read_all(served_world.url + cc, _settings(retries=4), clock)
    assert s.failure is not None and s.failure.kind == "retries_exhausted" and "503" in str(s.failure)
    assert len(_ranges(served_world, path.name)) == 5  # the first try and 4 retries
    backoffs = [w for w in clock.sleeps if w >= 0.2]  # not the limiter's polls
    assert len(backoffs) == 4
    # exponential with jitter in [0.5, 1.5): attempt n waits in [0.5, 1.5) x 0.5 x 2^n
    for n, w in enumerate(backoffs):
        assert 0.5 * 0.5 * 2 ** n <= w < 1.5 * 0.5 * 2 ** n


def test_retry_after_is_honoured_and_429_too(served_world):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("429", times=1, retry_after=7))
    served_world.plant(path.name, Fault("503", times=1, retry_after=5))
    clock = FakeClock()
    limiter = Limiter(4, 1000.0, 1.0, clock=clock.now)
    s = _read_all(served_world.url + cc, _settings(backoff_max_s=8.0), clock, limiter=limiter)
    assert s.complete
    assert sum(1 for w in clock.sleeps if w >= 7) >= 1 and sum(1 for w in clock.sleeps if w >= 5) >= 2
    stats = limiter.stats()
    assert stats["throttled"] == 2 and stats["lowest_rate"] == 250.0  # halved twice


def test_200_ignoring_range_restarts_from_zero_and_skips_what_was_read(served_world):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("reset", times=1, at=0.5))
    served_world.plant(path.name, Fault("ignore_range", times=1))
    s = _read_all(served_world.url + cc, _settings())
    data = path.read_bytes()
    assert s.complete and s.sha.hexdigest() == hashlib.sha256(data).hexdigest() and s.pos == len(data)
    assert s.stats["restarts_from_zero"] == 1 and s.stats["bytes_fetched"] > len(data)


def test_416_on_a_valid_range_is_retried(served_world):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("reset", times=1, at=0.5))
    served_world.plant(path.name, Fault("416", times=1))
    s = _read_all(served_world.url + cc, _settings())
    assert s.complete and s.sha.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    assert 416 in [st for *_, st in served_world.log]


def test_etag_change_between_attempts_voids_the_stream(served_world):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("reset", times=1, at=0.5))
    served_world.plant(path.name, Fault("etag_change", times=1, only_ranged=True))
    s = _read_all(served_world.url + cc, _settings())
    assert s.failure is not None and s.failure.kind == "file_changed"


def test_identity_encoding_is_asked_and_an_encoded_body_refused(served_world):
    cc, path = _files(served_world)[0]
    s = _read_all(served_world.url + cc, _settings())
    assert s.complete and s.sha.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    # a client that allows gzip gets an encoded body from this server, as from a CDN: refused, not stored
    with httpx.Client(headers={"Accept-Encoding": "gzip"}) as client:
        bad = _read_all(served_world.url + cc, _settings(), client=client)
    assert bad.failure is not None and bad.failure.kind == "encoded_body"


def test_timeout_on_a_slow_response_is_retried(served_world):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("slow", times=1, delay=0.6))
    s = _read_all(served_world.url + cc, _settings(timeout_s=0.2))
    assert s.complete and s.stats["retries"] >= 1


def test_keep_dir_writes_a_part_renamed_only_when_whole(served_world, tmp_path):
    cc, path = _files(served_world)[0]
    s = _read_all(served_world.url + cc, _settings(), keep_dir=tmp_path, name=path.name)
    assert (tmp_path / path.name).read_bytes() == path.read_bytes() and not list(tmp_path.glob("*.part"))
    served_world.plant(path.name, Fault("404", times=-1))
    cc2, path2 = _files(served_world)[1]
    served_world.plant(path2.name, Fault("reset", times=-1, at=0.5, only_ranged=False))
    s = _read_all(served_world.url + cc2, _settings(retries=1), keep_dir=tmp_path, name=path2.name)
    assert s.failure is not None and not (tmp_path / path2.name).exists() and (tmp_path / f"{path2.name}.part").exists()


def test_gzip_checker_matches_the_local_check(micro_world):
    for p in sorted((micro_world / "news").glob("*.warc.gz")):
        check = GzipChecker()
        data = p.read_bytes()
        for i in range(0, len(data), 7777):
            check.feed(data[i:i + 7777])
        assert check.result() == gzip_fault(p)
    assert any(gzip_fault(p) for p in (micro_world / "news").glob("*.warc.gz"))  # the planted truncated file


def test_retry_after_and_backoff_helpers():
    import random

    assert retry_after_s("12") == 12.0 and retry_after_s(None) is None and retry_after_s("soon") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    rng = random.Random(0)
    s = HttpSettings(backoff_base_s=1.0, backoff_max_s=60.0)
    assert backoff_s(0, s, 30.0, rng) >= 30.0
    assert all(backoff_s(10, s, None, rng) < 90.0 for _ in range(20))  # capped (x jitter)


# ---------------------------------------------------------------------------------------------
# politeness
# ---------------------------------------------------------------------------------------------


def test_limiter_halves_on_throttle_and_recovers_slowly():
    clock = FakeClock()
    lim = Limiter(2, 10.0, 0.5, clock=clock.now)
    lim.penalize()
    lim.penalize()
    assert lim.rate == 2.5
    for _ in range(5):
        lim.reward()
    assert lim.rate == 5.0  # +1/20 of the maximum per success: slower than it fell
    for _ in range(10):
        lim.penalize()
    assert lim.rate == 0.5  # the floor
    assert lim.try_acquire() > 0  # the bucket was emptied


def test_limiter_caps_connections_and_rate():
    clock = FakeClock()
    lim = Limiter(2, 4.0, 0.1, clock=clock.now)
    assert lim.try_acquire() == 0.0
    assert lim.try_acquire() > 0  # one token per 1/4 s
    clock.sleep(0.25)
    assert lim.try_acquire() == 0.0
    clock.sleep(0.25)
    assert lim.try_acquire() == 0.05  # both connections open
    lim.release()
    assert lim.try_acquire() == 0.0 and lim.stats()["peak_connections"] == 2


def test_one_limiter_caps_concurrent_requests_across_threads(served_world):
    """Six readers, two connections allowed: the server never sees more than two requests at once."""
    files = _files(served_world)
    served_world.plant("*", Fault("slow", times=-1, delay=0.05))
    lim = Limiter(2, 1000.0, 1.0)
    out: list[RemoteStream] = []

    def read(i: int) -> None:
        cc, _ = files[i % len(files)]
        out.append(_read_all(served_world.url + cc, _settings(), limiter=lim, clock=None))

    threads = [threading.Thread(target=read, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s.complete for s in out) and len(out) == 6
    assert served_world.stats()["peak_active"] <= 2 and lim.stats()["peak_connections"] <= 2


# ---------------------------------------------------------------------------------------------
# builds
# ---------------------------------------------------------------------------------------------


def _local_digest(micro_corpus: Path) -> tuple[dict, str]:
    manifest = json.loads((micro_corpus / "corpus" / "manifest.json").read_text())
    return store_digest(micro_corpus), manifest["snapshot_id"]


def test_streamed_build_equals_local_build_under_every_fault(served_world, micro_corpus, tmp_path):
    files = [p.name for _, p in _files(served_world)]
    plants = [Fault("reset", times=2, at=0.3), Fault("short", times=1, at=0.6), Fault("503", times=2, retry_after=0),
              Fault("429", times=1, retry_after=0), Fault("ignore_range", times=1), Fault("416", times=1),
              Fault("slow", times=1, delay=0.01), Fault("etag_change", times=1, only_ranged=True)]
    for i, f in enumerate(plants):
        served_world.plant(files[i % len(files)], f)
        if f.kind in ("ignore_range", "416", "etag_change"):  # faults of a resumed request need a drop first
            served_world.plant(files[i % len(files)], Fault("reset", times=1, at=0.5))
    cfg = served_config(served_world.url)
    sources = resolve_sources(SourceSpec(cc_news="2025-03..2026-05"), cfg, tmp_path / "ws")
    summary = build_corpus(sources, tmp_path / "ws", config=cfg, workers=1, progress=False)
    digest, snapshot = _local_digest(micro_corpus)
    assert summary["counts"]["files_failed"] == 0
    assert store_digest(tmp_path / "ws") == digest and summary["snapshot_id"] == snapshot
    st = summary["transfer"]["streamed"]
    assert st["files"] == len(files) and st["resumes"] >= 3 and st["retries"] >= 3
    statuses = [s for *_, s in served_world.log]
    assert {503, 429, 416, 206}.issubset(statuses)


def test_failed_file_is_reported_not_skipped_and_a_rerun_retries_it(served_world, micro_corpus, tmp_path):
    from forecast_env.cli.main import main

    name = _files(served_world)[0][1].name
    served_world.plant(name, Fault("503", times=-1, retry_after=0))
    ws = tmp_path / "ws"
    base = ["corpus", "build", "--cc-news", "2025-03..2026-05", "--workspace", str(ws), "--workers", "1",
            "--no-progress", "--set", f"corpus.source.base_url={served_world.url}",
            "--set", "corpus.source.backoff_base_s=0.001", "--set", "corpus.source.backoff_max_s=0.002",
            "--set", "corpus.source.retries=2", "--set", "corpus.source.requests_per_second=1000"]
    assert main(base) == 4  # files failed: neither 1 (internal) nor 2 (bad input)
    manifest = json.loads((ws / "corpus" / "manifest.json").read_text())
    assert manifest["counts"]["files_failed"] == 1 and manifest["failed"] == [f"failed:{name}"]
    report = json.loads((ws / "corpus" / "report.json").read_text())
    faults = {e["warc_file"]: e for e in report["file_errors"]}
    assert faults[name]["kind"] == "retries_exhausted" and "503" in faults[name]["error"]
    digest, snapshot = _local_digest(micro_corpus)
    assert manifest["snapshot_id"] != snapshot  # a corpus missing a file never carries the full corpus's id
    served_world.clear()
    assert main(base) == 0  # the rerun retries the failed file (and only it)
    gets = [p for m, p, *_ in served_world.log if m == "GET" and p.endswith(".warc.gz")]
    assert gets == [f"/crawl-data/CC-NEWS/2025/03/{name}"]
    assert store_digest(ws) == digest
    assert json.loads((ws / "corpus" / "manifest.json").read_text())["snapshot_id"] == snapshot


def test_allow_failed_exits_zero(served_world, tmp_path):
    from forecast_env.cli.main import main

    served_world.plant(_files(served_world)[0][1].name, Fault("404", times=-1))
    args = ["corpus", "build", "--cc-news", "2025-03", "--workspace", str(tmp_path / "ws"), "--workers", "1",
            "--no-progress", "--allow-failed", "--set", f"corpus.source.base_url={served_world.url}"]
    assert main(args) == 0
    report = json.loads((tmp_path / "ws" / "corpus" / "report.json").read_text())
    assert [e["kind"] for e in report["file_errors"]] == ["http_404"]


def test_file_changed_each_time_fails_after_the_restarts(served_world, tmp_path):
    cc, path = _files(served_world)[0]
    served_world.plant(path.name, Fault("reset", times=-1, at=0.5, only_ranged=False))
    served_world.plant(path.name, Fault("etag_change", times=-1, only_ranged=True))
    cfg = served_config(served_world.url)
    sources = resolve_sources(SourceSpec(cc_news="2025-03"), cfg, tmp_path / "ws")
    summary = build_corpus(sources, tmp_path / "ws", config=cfg, workers=1, progress=False)
    failed = summary["transfer"]["failed"]
    assert [f["kind"] for f in failed] == ["file_changed"] and failed[0]["restarts"] == 3


def test_pool_workers_share_one_limiter(served_world, micro_corpus, tmp_path):
    """Two spawned workers, one connection allowed per build: the server never sees two at once."""
    served_world.plant("*", Fault("slow", times=-1, delay=0.05))
    cfg = served_config(served_world.url, max_connections=1)
    sources = resolve_sources(SourceSpec(cc_news="2025-03..2026-05"), cfg, tmp_path / "ws")
    summary = build_corpus(sources, tmp_path / "ws", config=cfg, workers=2, progress=False)
    assert served_world.stats()["peak_active"] == 1
    assert summary["transfer"]["limiter"]["peak_connections"] == 1
    assert store_digest(tmp_path / "ws") == _local_digest(micro_corpus)[0]


def test_not_a_warc_and_a_gzip_ending_early_are_file_faults_as_on_disk(served_world, tmp_path):
    import gzip

    bad = tmp_path / "files"
    bad.mkdir()
    (bad / "CC-NEWS-20250305000000-00001.warc.gz").write_bytes(gzip.compress(b"<html>not a warc</html>" * 50, mtime=0))
    good = sorted(Path(served_world.world_dir, "news").glob("*.warc.gz"))[0].read_bytes()
    (bad / "CC-NEWS-20250306000000-00002.warc.gz").write_bytes(good[: len(good) * 2 // 3])  # cut in a member
    for p in bad.iterdir():
        served_world.add_file(p)
    cfg = served_config(served_world.url)
    streamed = build_corpus(resolve_sources(SourceSpec(cc_news="2025-03"), cfg, tmp_path / "ws_s"),
                            tmp_path / "ws_s", config=cfg, workers=1, progress=False)
    local = build_corpus(sorted(bad.iterdir()) + [sorted(Path(served_world.world_dir, "news").glob("*.warc.gz"))[0]],
                         tmp_path / "ws_l", config=cfg, workers=1, progress=False)
    assert streamed["counts"]["files_failed"] == 0
    kinds = {e["warc_file"]: e["kind"] for e in streamed["report"]["file_errors"]}
    assert kinds["CC-NEWS-20250305000000-00001.warc.gz"] == "not_warc"
    assert kinds["CC-NEWS-20250306000000-00002.warc.gz"] == "truncated"
    assert streamed["report"]["file_errors"] == local["report"]["file_errors"]
    assert store_digest(tmp_path / "ws_s") == store_digest(tmp_path / "ws_l")
    assert streamed["snapshot_id"] == local["snapshot_id"]


@pytest.mark.ray
def test_ray_tasks_stream_their_own_files_under_one_named_actor_limiter(served_world, micro_corpus, tmp_path):
    pytest.importorskip("ray")
    served_world.plant("*", Fault("reset", times=2, at=0.4))  # the first fault that applies answers a request
    served_world.plant("*", Fault("slow", times=-1, delay=0.05))
    from forecast_env.executor import ray_session

    cfg = served_config(served_world.url, max_connections=1)
    ws = tmp_path / "ws"
    # one local Ray for the whole build, started as the build would start it (2 CPUs) and shut down after: the
    # file stage and the merge then share it instead of each starting and stopping its own
    with ray_session(None, 2):
        summary = build_corpus(resolve_sources(SourceSpec(cc_news="2025-03..2026-05"), cfg, ws), ws, config=cfg,
                               workers=2, engine="ray", progress=False)
    assert served_world.stats()["peak_active"] == 1 and summary["transfer"]["limiter"]["peak_connections"] == 1
    assert summary["transfer"]["streamed"]["resumes"] == 2
    assert store_digest(ws) == _local_digest(micro_corpus)[0]


def test_progress_counts_records_and_bytes_within_a_file(served_world, tmp_path, monkeypatch):
    """While a file streams, its worker records how far it is (records read, bytes consumed) after every
    chunk, where the build's progress line reads it: the figures grow inside each file, stay below its
    size, and are gone once the file is done."""
    from forecast_env.corpus_build import file_stages, pipeline

    monkeypatch.setattr(file_stages, "CHUNK_RECORDS", 4)
    seen: list[tuple[str, tuple[int, int, int]]] = []
    real = pipeline._progress_writer

    def spy(path):
        report = real(path)

        def wrapped(records, nbytes):
            report(records, nbytes)
            seen.append((path.name, pipeline.in_flight(path.parent.parent)))
        return wrapped

    monkeypatch.setattr(pipeline, "_progress_writer", spy)
    cfg = served_config(served_world.url)
    sources = resolve_sources(SourceSpec(cc_news="2025-03..2026-05"), cfg, tmp_path / "ws")
    build_corpus(sources, tmp_path / "ws", config=cfg, workers=1, progress=True)
    sizes = {p.name: p.stat().st_size for _, p in _files(served_world)}
    by_file: dict[str, list[tuple[int, int, int]]] = {}
    for name, fig in seen:
        by_file.setdefault(name, []).append(fig)
    assert len(by_file) == len(sizes)
    for name, figs in by_file.items():
        warc = next(w for w in sizes if name.startswith(w.split(".warc")[0]))
        assert len(figs) >= 2 and all(files == 1 for files, _, _ in figs)  # one file in flight at a time
        records = [r for _, r, _ in figs]
        nbytes = [b for _, _, b in figs]
        assert records == sorted(records) and records[-1] > records[0]
        assert nbytes == sorted(nbytes) and 0 < nbytes[-1] < sizes[warc]
    assert pipeline.in_flight(tmp_path / "ws" / "corpus" / "parts") == (0, 0, 0)
