"""The per-WARC stages (read .. leakage) on real pages, in records/s per core (CPU time of one process).

The pages of public evaluation sets (the folders `benchmarks/corpus/extract_quality.py` reads) are written into one
WARC file (response records, HTTP 200, crawl time 2025-04-01, the page's URL), then `process_warc`
runs over it under each variant, in the same process and run:

- ``default``: the shipped config (trafilatura's body, the language gate, every profile's verdicts);
- ``no-gate``: the shipped config without the language gate (`language.gate_max_score=null`): every
  page's body is extracted before the language stage;
- ``news`` / ``paper``: our own body (``body_mode=own``) with that quality profile (`quality.profile`); each also records the other
  profile's verdicts for the funnel, as a build does;
- ``news-plain-filters``: the news profile with the filters as a plain port (each filter tokenizes
  on its own, Python n-gram loops: the quality stage before its speed-up; benchmarks/corpus/quality_filter_speed.py);
- ``news-one-profile``: the other profile's verdicts not computed (the cost before profiles);
- ``body=MODE``: the shipped config with `extract.body_mode=MODE` (e.g. ``body=lean``, ``body=cascade``);
- ``body_mode=trafilatura|longer``: the body from trafilatura on every page, or the longer of ours and
  trafilatura's (``extract_page(body_mode=)``), with the news profile.

Usage::

    .venv/bin/python -m benchmarks.corpus.warc_stage_speed --set aeb=PATH --set wcxb_test=PATH [--limit N]
        [--variants news,paper,news-one-profile,trafilatura,longer] [--keep-warc realmix/CC-NEWS-20250401120000-00001.warc.gz]

`--record` writes the planner's extract rates of the variants the run included into forecast_env/rates.json
(`RATE_OF_VARIANT`: `default` is `extract.trafilatura`, `news` `extract.own`, `longer` `extract.longer`,
`body=MODE` `extract.MODE`); give `--record-command 'cd DATA && taskset -c 1 ...'` for a pinned run.

The sets stay out of the repository (their licences); see benchmarks/corpus/extract_quality.py for where to get them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.recording import Measurement, add_record_arguments, record_rates, start_recording

VARIANTS = ("default", "no-gate", "news", "news-plain-filters", "paper", "news-one-profile", "trafilatura", "longer")
#: The planner's extract rate (forecast_env/rates.json) each variant measures, in records/s/core.
RATE_OF_VARIANT = {
    "default": "extract.trafilatura", "news": "extract.own", "longer": "extract.longer",
    "body=lean": "extract.lean", "body=cascade": "extract.cascade", "body=lean-no-escalation": "extract.lean-no-escalation",
}


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


def rates_from(best: dict[str, tuple[int, int, float]], repeat: int) -> dict[str, Measurement]:
    """The extract rates of the variants run ({variant: (records, kept, best CPU s)}), as the table prints them."""
    return {RATE_OF_VARIANT[v]: Measurement(round(recs / dt, 1), f"CPU time of one process, best of {repeat}, on {recs} "
                                            f"real pages in one WARC; variant `{v}`")
            for v, (recs, _kept, dt) in best.items() if v in RATE_OF_VARIANT}


def run_variant(warc: Path, variant: str) -> tuple[int, int, float]:
    """(records in, kept, CPU seconds) of process_warc over the file under one variant."""
    from forecast_env.config import load_config
    from forecast_env.corpus_build import file_stages

    profile = "paper" if variant in ("paper", "default", "no-gate") else "news"
    body_mode = variant if variant in ("trafilatura", "longer") else "own"
    if variant.startswith("body="):  # the shipped config with another body path
        body_mode = variant[len("body="):]
    # the body path through the build's own config key (a patched extract_page would be overridden by
    # the body_mode the stage passes)
    overrides = ["corpus_start=2000-01-01"]
    if variant == "no-gate":
        overrides += ["language.gate_max_score=null"]
    elif variant.startswith("body="):
        overrides += [f"extract.body_mode={body_mode}"]
    elif variant != "default":
        overrides += [f"quality.profile={profile}", f"extract.body_mode={body_mode}"]
    cfg = load_config("corpus", overrides=overrides)
    from benchmarks.corpus.quality_filter_speed import plain_path

    try:
        file_stages._WORKER.clear()
        tools = file_stages._tools(cfg)
        if variant == "news-one-profile":
            tools["filters"] = {"news": tools["filters"]["news"]}
        with plain_path() if variant == "news-plain-filters" else contextlib.nullcontext():
            t0 = time.process_time()
            articles, _dropped, counters, _errors = file_stages.process_warc(warc, cfg)
            dt = time.process_time() - t0
    finally:
        file_stages._WORKER.clear()
    return int(counters["records_in"]), articles.num_rows, dt


#: The steps `--profile` times: (label, module, attribute). Exclusive CPU time each (a step's time
#: less the timed steps inside it), so the rows add up to the stage's total with the "other" row.
PROFILE_STEPS = (
    ("ours: parse (lxml, once per page)", "forecast_env.corpus_build.extract", "_parse"),
    ("ours: language gate (sample + fastText)", "forecast_env.corpus_build.langid", "LanguageGate.__call__"),
    ("ours: page signals", "forecast_env.corpus_build.extract", "page_signals"),
    ("ours: own body (blocks)", "forecast_env.corpus_build.body", "measure_body"),
    ("ours: normalize_text", "forecast_env.corpus_build.extract", "normalize_text"),
    ("ours: language id (fastText, bodies)", "forecast_env.corpus_build.langid", "LanguageIdentifier.english_scores"),
    ("ours: quality filters (both profiles)", "forecast_env.corpus_build.quality", "profile_verdicts"),
    ("ours: timestamps", "forecast_env.corpus_build.timestamps", "assign_timestamps"),
    ("ours: leakage screen", "forecast_env.corpus_build.leakage", "screen_leakage"),
    ("ours: market quote", "forecast_env.corpus_build.leakage", "find_market_quote"),
    ("trafilatura: parse (load_html)", "trafilatura.core", "load_html"),
    ("trafilatura: raw-tree prunes", "trafilatura.core", "prune_unwanted_nodes"),
    ("trafilatura: forum test", "trafilatura.core", "_forum_thread_page"),
    ("trafilatura: tree cleaning + tag conversion", "trafilatura.core", "_prepare_tree"),
    ("trafilatura: main extractor", "trafilatura.core", "extract_content"),
    ("trafilatura: fallback readability", "trafilatura.external", "try_readability"),
    ("trafilatura: fallback justext", "trafilatura.external", "justext_rescue"),
    ("trafilatura: justext in the recall escalation", "trafilatura.core", "justext_rescue"),
    ("trafilatura: compare (rest)", "trafilatura.core", "compare_extraction"),
    ("trafilatura: baseline rescue", "trafilatura.core", "baseline"),
    ("trafilatura: page text for escalation (html2txt)", "trafilatura.core", "html2txt"),
    ("trafilatura: recall retry (rest)", "trafilatura.core", "_recall_retry"),
    ("trafilatura: text output (xmltotxt)", "trafilatura.core", "xmltotxt"),
    ("trafilatura: bare_extraction (rest: options, metadata if on)", "trafilatura.core", "bare_extraction"),
)


@contextlib.contextmanager
def step_timer():
    """Wrap PROFILE_STEPS with CPU-time counters; yields {label: [exclusive s, calls]}."""
    import functools
    import importlib

    acc: dict[str, list] = {}
    stack: list[list[float]] = []  # per open call: [start, time of timed calls inside it]
    undo = []
    for label, mod_name, attr in PROFILE_STEPS:
        mod = importlib.import_module(mod_name)
        owner, name = mod, attr
        if "." in attr:
            cls, name = attr.split(".")
            owner = getattr(mod, cls)
        fn = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        if isinstance(fn, (classmethod, staticmethod)):
            continue
        acc[label] = [0.0, 0]

        def wrap(fn=fn, label=label):
            @functools.wraps(fn)
            def timed(*a, **k):
                frame = [time.process_time(), 0.0]
                stack.append(frame)
                try:
                    return fn(*a, **k)
                finally:
                    stack.pop()
                    dt = time.process_time() - frame[0]
                    acc[label][0] += dt - frame[1]
                    acc[label][1] += 1
                    if stack:
                        stack[-1][1] += dt
            return timed

        setattr(owner, name, wrap())
        undo.append((owner, name, fn))
    try:
        yield acc
    finally:
        for owner, name, fn in reversed(undo):
            setattr(owner, name, fn)


def profile_variant(warc: Path, variant: str) -> None:
    """Print where one variant's CPU time goes, per step (exclusive), as a markdown table."""
    run_variant(warc, variant)  # warm-up
    with step_timer() as acc:
        recs, kept, total = run_variant(warc, variant)
    print(f"\nprofile of `{variant}`: {recs} records, {kept} kept, {total:.2f} CPU s ({recs / total:.1f} records/s/core)")
    print("| step | calls | CPU s | ms/record | share |\n|---|---:|---:|---:|---:|")
    rows = sorted(acc.items(), key=lambda kv: -kv[1][0])
    for label, (s, n) in rows:
        if n:
            print(f"| {label} | {n} | {s:.2f} | {1000 * s / recs:.2f} | {s / total:.1%} |")
    rest = total - sum(s for s, _ in acc.values())
    print(f"| other (WARC reading, doc ids, extract_page's metadata walk, drop rows) | | {rest:.2f} | "
          f"{1000 * rest / recs:.2f} | {rest / total:.1%} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    from benchmarks.corpus import extract_quality as beq

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--limit", type=int, default=0, help="at most N pages per set")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--repeat", type=int, default=2, help="run the variants in turn this many times")
    ap.add_argument("--profile", action="store_true", help="also time each step of every variant (CPU, exclusive)")
    ap.add_argument("--keep-warc", type=Path, default=None,
                    help="also copy the WARC of the pages here (e.g. to build a corpus of real articles for "
                         "benchmarks/retrieval/embedding_backends.py --workspace)")
    add_record_arguments(ap)
    args = ap.parse_args(argv)
    if not args.set:
        print("warc_stage_speed: no --set given; see the module docstring. Skipped.")
        return
    recording = start_recording(args, "benchmarks.corpus.warc_stage_speed", sys.argv[1:] if argv is None else argv)
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
        if args.keep_warc:
            import shutil

            args.keep_warc.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(warc, args.keep_warc)
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
        record_rates(recording, rates_from(best, args.repeat))
        if args.profile:
            for variant in variants:
                profile_variant(warc, variant)


if __name__ == "__main__":
    main()
