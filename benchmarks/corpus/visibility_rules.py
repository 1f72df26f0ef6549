"""Visibility time and the content screens on a sample world (docs/design.md §2.timestamps, §2.market quotes).

On every page of a sample world (extracted once): how many articles each `timestamps.visibility`
rule puts on another day than the paper's rule (`publication`), and by how much; the time of
`assign_timestamps` under each rule; `forecast_env.timeparse.parse_time` against the obvious
alternative, `dateutil.parser.parse` on every value (its agreement and speed); and the cost of the
market-quote screen next to the leakage screen.

Usage: .venv/bin/python -m benchmarks.corpus.visibility_rules [--preset tiny] [--seed 0] [--world DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path


def best_of(fn, reps: int = 3) -> float:
    """CPU seconds of the fastest of `reps` runs of fn() (process time: steady on a shared machine)."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def load_pages(world: Path) -> list[tuple]:
    """(Extracted, url, Last-Modified, crawl time) of every HTML response in the world's WARC files."""
    from warcio.archiveiterator import ArchiveIterator

    from forecast_env.corpus_build.extract import extract_page
    from forecast_env.corpus_build.warc import decode_payload

    pages = []
    for path in sorted((world / "news").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            try:
                for rec in ArchiveIterator(fh):
                    if rec.rec_type != "response" or rec.http_headers is None:
                        continue
                    if rec.http_headers.get_statuscode() != "200":
                        continue
                    ctype = rec.http_headers.get_header("Content-Type") or ""
                    if "html" not in ctype:
                        continue
                    decoded = decode_payload(rec.content_stream().read(), ctype)
                    if not decoded:
                        continue
                    url = rec.rec_headers.get_header("WARC-Target-URI")
                    crawl = datetime.fromisoformat(rec.rec_headers.get_header("WARC-Date")).astimezone(UTC)
                    ext = extract_page(decoded[0], url)
                    if ext.body:
                        pages.append((ext, url, rec.http_headers.get_header("Last-Modified"), crawl))
            except Exception as exc:  # the world's deliberately truncated file ends here
                print(f"  {path.name}: stopped reading ({type(exc).__name__})")
    return pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--world", type=Path, default=None, help="an existing sample world (else one is generated)")
    args = ap.parse_args()

    from dateutil import parser as du_parser

    from forecast_env.corpus_build.leakage import find_market_quote, screen_leakage
    from forecast_env.corpus_build.timestamps import VISIBILITY_RULES, assign_timestamps
    from forecast_env.synth import synthesize
    from forecast_env.timeparse import parse_time

    world = args.world
    if world is None:
        world = Path(tempfile.mkdtemp(prefix="bench_vis_")) / "world"
        synthesize(world, preset=args.preset, seed=args.seed, progress=False)
    pages = load_pages(world)
    print(f"world: {world}  pages with a body: {len(pages)}  (1 core, CPU time)")

    # visibility rules against the paper's
    results = {}
    for rule in VISIBILITY_RULES:
        secs = best_of(lambda rule=rule: [assign_timestamps(e, u, lm, c, visibility=rule) for e, u, lm, c in pages])
        results[rule] = ([assign_timestamps(e, u, lm, c, visibility=rule) for e, u, lm, c in pages], secs)
    paper = [ts.day for ts in results["publication"][0]]
    print("\n| rule | us/page | articles on another day than `publication` | net shift (days: articles) |")
    print("|---|---:|---:|---|")
    for rule in VISIBILITY_RULES:
        stamps, secs = results[rule]
        shifts = Counter((ts.day - d).days for ts, d in zip(stamps, paper))
        moved = sum(n for s, n in shifts.items() if s != 0)
        dist = ", ".join(f"{s:+d}: {n}" for s, n in sorted(shifts.items()) if s != 0) or "-"
        print(f"| {rule} | {1e6 * secs / len(pages):.0f} | {moved} ({100 * moved / len(pages):.1f}%) | {dist} |")
    per_rule = Counter()
    for ts in results["conservative"][0]:
        for r, d in ts.moves:
            per_rule[(r, d > 0)] += 1
    print("\nconservative, moves per rule (articles): "
          + ", ".join(f"{r} {'later' if up else 'earlier'} {n}" for (r, up), n in sorted(per_rule.items())))

    # one parser vs dateutil on every value the cascades meet
    values = [raw for e, u, lm, c in pages for _, raw in (*e.pub_candidates, *e.mod_candidates)]
    values += [lm for _, _, lm, _ in pages if lm]
    tz = {"UTC": 0, "GMT": 0}

    def du(v: str):
        try:
            dt = du_parser.parse(v, tzinfos=tz)
        except (ValueError, OverflowError, du_parser.ParserError):
            return None
        return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)

    ours_s = best_of(lambda: [parse_time(v) for v in values])
    du_s = best_of(lambda: [du(v) for v in values])
    ours = [parse_time(v) for v in values]
    theirs = [du(v) for v in values]
    both = [(a.instant, b) for a, b in zip(ours, theirs) if a is not None and b is not None]
    differ = sum(a != b for a, b in both)
    print(f"\ntimestamp values: {len(values)}")
    print("| parser | us/value | read | same instant as the other (naive = UTC) |")
    print("|---|---:|---:|---:|")
    print(f"| forecast_env.timeparse.parse_time | {1e6 * ours_s / len(values):.1f} | "
          f"{sum(o is not None for o in ours)} | {len(both) - differ} of {len(both)} |")
    print(f"| dateutil.parser.parse | {1e6 * du_s / len(values):.1f} | "
          f"{sum(t is not None for t in theirs)} | {len(both) - differ} of {len(both)} |")

    # the content screens
    docs = [(e.body, e.title, e.summary, ts.visible_at) for (e, *_), ts in zip(pages, results["conservative"][0])]
    leak_s = best_of(lambda: [screen_leakage(b, t, v) for b, t, _, v in docs])
    quote_s = best_of(lambda: [find_market_quote(b, t, s) for b, t, s, _ in docs])
    n_quotes = sum(find_market_quote(b, t, s) is not None for b, t, s, _ in docs)
    print("\n| screen | us/article | flagged |")
    print("|---|---:|---:|")
    print(f"| screen_leakage | {1e6 * leak_s / len(docs):.0f} | {sum(screen_leakage(b, t, v)[0] for b, t, _, v in docs)} |")
    print(f"| find_market_quote | {1e6 * quote_s / len(docs):.0f} | {n_quotes} |")


if __name__ == "__main__":
    main()
