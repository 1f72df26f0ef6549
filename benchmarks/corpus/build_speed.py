"""Corpus build throughput: records/s per core of the per-WARC stages, speedup of 2 workers over 1,
dedup time and peak memory, on a generated sample world.

usage: python -m benchmarks.corpus.build_speed [size] [--record]   size: a synth preset (tiny, small) when the
sample-world generator is available, else a number of generated pages (default 2000).

`--record` writes the planner's `corpus.worker_peak` (the largest corpus worker's peak resident memory)
into forecast_env/rates.json.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.recording import Measurement, add_record_arguments, record_rates, start_recording
from forecast_env.corpus_build.pipeline import build_corpus, process_warc


def _world(size: str, out: Path) -> list[Path]:
    try:
        from forecast_env.synth import synthesize

        if not size.isdigit():
            synthesize(out, preset=size, seed=0, progress=False)
            return sorted((out / "news").glob("*.warc.gz"))
    except ImportError:
        pass
    from tests.support.warc_data import Page, english_body, write_warc

    n = int(size) if size.isdigit() else 2000
    files = []
    per = max(1, n // 8)
    for f in range(8):
        pages = [Page(f"https://n{i % 7}.example.com/{f}/{i}", title=f"Story {f} {i} on the council plan today",
                      body=english_body(f * 100000 + i, 24), published=f"2025-04-{1 + i % 28:02d}T08:00:00Z")
                 for i in range(per)]
        files.append(write_warc(out / f"bench-{f:02d}.warc.gz", pages))
    return files


def rates_from(worker_peak_kib: int, size: str) -> dict[str, Measurement]:
    """The planner's `corpus.worker_peak` in bytes, from the largest worker's ru_maxrss (KiB on Linux)."""
    world = f"the {size} sample world" if not size.isdigit() else f"{int(size)} generated pages"
    return {"corpus.worker_peak": Measurement(worker_peak_kib * 1024, "peak resident memory of the largest corpus "
                                              f"worker ({worker_peak_kib / 1024:.0f} MiB)", measured_on=world)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("size", nargs="?", default="2000", help="a synth preset (tiny, small) or a number of pages")
    add_record_arguments(ap)
    args = ap.parse_args(argv)
    recording = start_recording(args, "benchmarks.corpus.build_speed", sys.argv[1:] if argv is None else argv)
    size = args.size
    tmp = Path(tempfile.mkdtemp(prefix="bench_corpus_"))
    try:
        files = _world(size, tmp / "world")
        print(f"world {size!r}: {len(files)} WARC files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB")
        t0, c0 = time.perf_counter(), time.process_time()
        records = 0
        for p in files:
            records += process_warc(p)[2]["records_in"]
        t_one, c_one = time.perf_counter() - t0, time.process_time() - c0
        print(f"per-WARC stages, in-process: {records} records in {t_one:.1f}s = {records / t_one:.0f} records/s/core"
              f" (CPU time {c_one:.1f}s = {records / c_one:.0f} records/s: the figure to read on a shared machine)")
        times = {}
        for workers in (1, 2):
            ws = tmp / f"ws{workers}"
            t0 = time.perf_counter()
            s = build_corpus(files, ws, workers=workers, progress=False)
            times[workers] = time.perf_counter() - t0
            print(f"build_corpus workers={workers}: {times[workers]:.1f}s total "
                  f"(per-file {s['timings']['process_s']:.1f}s, dedup {s['timings']['dedup_s']:.2f}s, "
                  f"store {s['timings']['store_s']:.2f}s), kept {s['counts']['kept']}")
        print(f"speedup 2 workers / 1: {times[1] / times[2]:.2f}x (2 cores shared; includes worker start-up)")
        t0 = time.perf_counter()
        s = build_corpus(files, tmp / "ws1", workers=1, progress=False)
        print(f"rebuild with nothing new (resume path): {time.perf_counter() - t0:.2f}s")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        kids_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"peak RSS: parent {rss:.0f} MB, largest worker {kids_kib / 1024:.0f} MB")
        record_rates(recording, rates_from(kids_kib, size))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
