"""The quality stage's filters (corpus_build/quality_text.py): the shipped path against the plain one, same run.

Both profiles' filters run on every body, as a build does (the part records both verdicts). The
``plain`` path is the straightforward port: each filter tokenizes the text itself, the symbol and
letter tests run per token, and Gopher's n-gram passes are the Python loops of the reference
(tests/support/quality_reference.py: `top_ngram_chars`, `all_dup_ngram_chars`). The ``shipped`` path shares one
tokenization per text, caches the per-token tests, runs the n-gram passes in numpy (`_NgramIndex`),
counts Gopher's statistics and runs C4's line pass once per text for both profiles, and tests for an
abbreviation only at a sentence's end. The verdicts, reasons and details must be identical (checked here, and by
hypothesis in tests/corpus_build/test_quality.py).

Bodies: real pages of public evaluation sets, through `extract_page` (``--set NAME=PATH``, the folders
benchmarks/corpus/extract_quality.py reads), or by default the bodies of a generated `micro` sample world.

    .venv/bin/python -m benchmarks.corpus.quality_filter_speed [--set aeb=PATH --set wcxb_test=PATH] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


def real_bodies(specs: list[str], limit: int) -> list[str]:
    from benchmarks.corpus import extract_quality as beq
    from forecast_env.corpus_build.extract import extract_page, normalize_text

    out = []
    for spec in specs:
        name, _, path = spec.partition("=")
        root = Path(path).expanduser()
        pages = beq.detect_loader(root, name)(root)
        for pg in pages[:limit] if limit else pages:
            try:
                body = normalize_text(extract_page(pg.html, pg.url or "https://eval.example.org/").body or "")
            except Exception:
                continue
            if body.strip():
                out.append(body)
    return out


def world_bodies() -> list[str]:
    from forecast_env.corpus_build.extract import extract_page, normalize_text
    from forecast_env.corpus_build.warc import WarcReader
    from forecast_env.synth import synthesize

    out = []
    with tempfile.TemporaryDirectory(prefix="bench_qf_") as tmp:
        synthesize(Path(tmp), preset="micro", seed=0, progress=False)
        for warc in sorted((Path(tmp) / "news").glob("*.warc.gz")):
            for item in WarcReader(warc, 5_000_000):
                html = getattr(item, "html", None)
                if html:
                    body = normalize_text(extract_page(html, item.url).body or "")
                    if body.strip():
                        out.append(body)
    return out


@contextmanager
def plain_path():
    """The filters as a plain port: no shared tokens, no per-token caches, Python n-gram loops."""
    from forecast_env.corpus_build import quality_text as q
    from tests.support import quality_reference as ref

    saved = (q._tokens, q._is_symbol_word, q._has_alpha, q._ngram_index, q._gopher_stats, q._c4_lines,
             q._ABBREV_TAIL, q._token_count)

    class Plain:
        def __init__(self, words):
            self.words, self.lengths = list(words), [len(w) for w in words]

        def top_chars(self, n):
            return ref.top_ngram_chars(self.words, n)

        def dup_chars(self, n):
            return ref.all_dup_ngram_chars(self.words, self.lengths, n)

    q._tokens = lambda text: tuple(q._WORD_RE.findall(text))
    q._is_symbol_word = lambda w: all(q._is_symbol_char(c) for c in w)
    q._has_alpha = lambda w: any(c.isalpha() for c in w)
    q._ngram_index = lambda text: Plain(q._tokens(text))
    q._gopher_stats = ref.gopher_stats  # counted token by token, again by each profile
    q._c4_lines = q._c4_lines.__wrapped__  # C4's line pass run again by each profile
    q._ABBREV_TAIL = 10**9  # the abbreviation test searches the whole sentence
    q._token_count = lambda text: len(q._tokens(text))  # FineWeb tokenizes C4's text again
    try:
        yield
    finally:
        (q._tokens, q._is_symbol_word, q._has_alpha, q._ngram_index, q._gopher_stats, q._c4_lines,
         q._ABBREV_TAIL, q._token_count) = saved


def run(bodies: list[str]) -> tuple[float, list]:
    from forecast_env.corpus_build import quality_text as q
    from forecast_env.corpus_build.quality import PROFILE_NAMES, apply_filters, build_filters

    filters = {p: build_filters({"profile": p}) for p in PROFILE_NAMES}
    for fn in (q._tokens, q._is_symbol_word, q._has_alpha, q._ngram_index, q._gopher_stats, q._c4_lines):  # a cold start each run
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()
    t0 = time.process_time()
    verdicts = [[(r.keep, r.reason, r.detail) for r in (apply_filters(b, fs) for fs in filters.values())]
                for b in bodies]
    return time.process_time() - t0, verdicts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--limit", type=int, default=0, help="at most N pages per set")
    ap.add_argument("--repeat", type=int, default=2, help="alternate the two paths this many times")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    bodies = real_bodies(args.set, args.limit) if args.set else world_bodies()
    chars = sum(map(len, bodies))
    print(f"{len(bodies)} bodies, {chars / 1e6:.1f} M characters "
          f"({'real pages: ' + ', '.join(s.split('=')[0] for s in args.set) if args.set else 'micro sample world'})")
    times: dict[str, list[float]] = {"plain": [], "shipped": []}
    ref = None
    for _ in range(args.repeat):
        with plain_path():
            dt, plain = run(bodies)
        times["plain"].append(dt)
        dt, shipped = run(bodies)
        times["shipped"].append(dt)
        assert plain == shipped, "the shipped filters gave another verdict than the plain port"
        ref = ref or shipped
    print("| path | CPU s (best of runs) | bodies/s (both profiles) |\n|---|---:|---:|")
    for name, ts in times.items():
        print(f"| {name} | {min(ts):.2f} | {len(bodies) / min(ts):,.0f} |")
    print(f"speed-up {min(times['plain']) / min(times['shipped']):.2f}x; verdicts identical on all {len(bodies)}")


if __name__ == "__main__":
    main()
