"""Stage 1 (reading WARC files) with fastwarc vs warcio, on a generated sample world's WARC files.

Two figures per reader: the raw record loop (iterate, read every response payload) and our whole
stage 1 (`WarcReader`: HTTP headers, content sniffing, charset decoding, drop reasons), in records/s
of one process (CPU time). Both readers must give the same items (tests/corpus_build/test_warc_backends.py).

Usage: .venv/bin/python -m benchmarks.corpus.warc_readers [preset-or-folder]   (default: the `small` world,
generated into a temporary folder; a folder is read as-is: every *.warc.gz under it)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path


def _files(arg: str, tmp: Path) -> list[Path]:
    if Path(arg).is_dir():
        return sorted(Path(arg).rglob("*.warc.gz"))
    from forecast_env.synth import synthesize

    synthesize(tmp, preset=arg, seed=0, progress=False)
    return sorted((tmp / "news").glob("*.warc.gz"))


def raw_warcio(files: list[Path]) -> int:
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    for path in files:
        with open(path, "rb") as fh:
            try:
                for rec in ArchiveIterator(fh, check_digests=False):
                    if rec.rec_type == "response":
                        rec.content_stream().read()
                        n += 1
            except Exception:  # the planted truncated file
                pass
    return n


def raw_fastwarc(files: list[Path]) -> int:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    n = 0
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, record_types=WarcRecordType.response, parse_http=True):
                rec.reader.read()
                n += 1
    return n


def stage1(files: list[Path], backend: str) -> int:
    from forecast_env.corpus_build.warc import WarcReader

    return sum(sum(1 for _ in WarcReader(path, backend=backend)) for path in files)


def timed(fn, *args) -> tuple[int, float]:
    t0 = time.process_time()
    n = fn(*args)
    return n, time.process_time() - t0


def main(arg: str = "small") -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench_warc_"))
    try:
        files = _files(arg, tmp)
        mb = sum(p.stat().st_size for p in files) / 1e6
        print(f"{len(files)} WARC files, {mb:.1f} MB ({arg})")
        rows = [("raw loop, warcio", raw_warcio, ()), ("raw loop, fastwarc", raw_fastwarc, ()),
                ("stage 1 WarcReader, warcio", stage1, ("warcio",)),
                ("stage 1 WarcReader, fastwarc (default)", stage1, ("fastwarc",))]
        for name, fn, extra in rows:
            fn(files[:1], *extra)  # warm-up: imports
            n, dt = timed(fn, files, *extra)
            print(f"{name:42s} {n:7d} records  {dt:6.2f} s CPU  {n / dt:9.0f} records/s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
