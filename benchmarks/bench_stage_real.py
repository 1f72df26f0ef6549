"""The per-WARC stages (read .. leakage) on real pages, in records/s per core (CPU time of one process).

The pages of public evaluation sets (the folders `bench_extract_quality.py` reads) are written into one
WARC file (response records, HTTP 200, crawl time 2025-04-01, the page's URL), then `process_warc`
runs over it under each variant, in the same process and run:

- ``default``: the shipped config (trafilatura's body, the language gate, every profile's verdicts);
- ``no-gate``: the shipped config without the language gate (`language.gate_max_score=null`): every
  page's body is extracted before the language stage;
- ``news`` / ``paper``: our own body (``body_mode=own``) with that quality profile (`quality.profile`); each also records the other
  profile's verdicts for the funnel, as a build does;
- ``news-plain-filters``: the news profile with the filters as a plain port (each filter tokenizes
  on its own, Python n-gram loops: the quality stage before its speed-up; bench_quality_filters.py);
- ``news-one-profile``: the other profile's verdicts not computed (the cost before profiles);
- ``body_mode=trafilatura|longer``: the body from trafilatura on every page, or the longer of ours and
  trafilatura's (``extract_page(body_mode=)``), with the news profile.

Usage::

    .venv/bin/python benchmarks/bench_stage_real.py --set aeb=PATH --set wcxb_test=PATH [--limit N]
        [--variants news,paper,news-one-profile,trafilatura,longer]

The sets stay out of the repository (their licences); see bench_extract_quality.py for where to get them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = ("default", "no-gate", "news", "news-plain-filters", "paper", "news-one-profile", "trafilatura", "longer")


def write_pages_warc(path: Path, pages) -> int:
    """Every page as one response record; returns the number written."""
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    n = 0
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="WARC/1.1")
        for i, pg in enumerate(pages):
            url = pg.url or f"https://eval.example.org/{i}"
            data = pg.html.encode("utf-8")
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                               ("Content-Length", str(len(data)))], protocol="HTTP/1.1")
            rec = writer.create_warc_record(url, "response", payload=io.BytesIO(data), http_headers=http,
                                            warc_headers_dict={"WARC-Date": "2025-04-01T12:00:00Z",
                                                               "WARC-Record-ID": f"<urn:uuid:eval-{i:08d}>"})
            writer.write_record(rec)
            n += 1
    return n


def run_variant(warc: Path, variant: str) -> tuple[int, int, float]:
    """(records in, kept, CPU seconds) of process_warc over the file under one variant."""
    from forecast_env.config import load_config
    from forecast_env.corpus_build import pipeline

    profile = "paper" if variant in ("paper", "default", "no-gate") else "news"
    body_mode = variant if variant in ("trafilatura", "longer") else "own"
    # the body path through the build's own config key (a patched extract_page would be overridden by
    # the body_mode the stage passes)
    overrides = ["corpus_start=2000-01-01"]
    if variant == "no-gate":
        overrides += ["language.gate_max_score=null"]
    elif variant != "default":
        overrides += [f"quality.profile={profile}", f"extract.body_mode={body_mode}"]
    cfg = load_config("corpus", overrides=overrides)
    from bench_quality_filters import plain_path

    try:
        pipeline._WORKER.clear()
        tools = pipeline._tools(cfg)
        if variant == "news-one-profile":
            tools["filters"] = {"news": tools["filters"]["news"]}
        with plain_path() if variant == "news-plain-filters" else contextlib.nullcontext():
            t0 = time.process_time()
            articles, _dropped, counters, _errors = pipeline.process_warc(warc, cfg)
            dt = time.process_time() - t0
    finally:
        pipeline._WORKER.clear()
    return int(counters["records_in"]), articles.num_rows, dt


def main(argv: list[str] | None = None) -> None:
    import bench_extract_quality as beq

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--limit", type=int, default=0, help="at most N pages per set")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--repeat", type=int, default=2, help="run the variants in turn this many times")
    args = ap.parse_args(argv)
    if not args.set:
        print("bench_stage_real: no --set given; see the module docstring. Skipped.")
        return
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    pages = []
    for spec in args.set:
        name, _, path = spec.partition("=")
        root = Path(path).expanduser()
        got = beq.detect_loader(root, name)(root)
        pages += got[: args.limit] if args.limit else got
    with tempfile.TemporaryDirectory(prefix="bench_stage_real_") as tmp:
        warc = Path(tmp) / "CC-NEWS-20250401120000-00001.warc.gz"
        n = write_pages_warc(warc, pages)
        print(f"{n} real pages in one WARC file ({warc.stat().st_size / 1e6:.1f} MB)")
        run_variant(warc, "news")  # warm-up: imports, the language model
        variants = args.variants.split(",")
        best: dict[str, tuple[int, int, float]] = {}
        for _ in range(args.repeat):  # the variants in turn, each run `repeat` times: the fastest counts
            for variant in variants:
                recs, kept, dt = run_variant(warc, variant)
                if variant not in best or dt < best[variant][2]:
                    best[variant] = (recs, kept, dt)
        print(f"| variant | records | kept | CPU s (best of {args.repeat}) | records/s/core |\n|---|---:|---:|---:|---:|")
        for variant in variants:
            recs, kept, dt = best[variant]
            print(f"| {variant} | {recs} | {kept} | {dt:.2f} | {recs / dt:.1f} |", flush=True)


if __name__ == "__main__":
    main()
