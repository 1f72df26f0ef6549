"""The quality stage alone, per profile, on real pages: how many article pages each profile keeps and how
many labelled non-article pages it drops, per set, with the drop reasons.

Each page goes through the corpus builder's own stages 2-4 (`extract_page`, `normalize_text`, the
fastText English test at 0.65); the pages that reach stage 5 (a body, English) are judged by every
profile's filters. Labels: WCXB's ``article`` pages are articles and its ``collection`` and
``listing`` pages (category / tag / index pages, content listings) are non-articles; the index pages of
newspaper4k's test data (``*_main_site``) are non-articles; every page of the other sets is an article.

The split (benchmarks/RESULTS.md): the news profile was tuned on ``aeb`` and ``wcxb_dev``; every other
set is held out. Usage::

    .venv/bin/python benchmarks/bench_quality_profiles.py --set aeb=PATH --set wcxb_dev=PATH \\
        --set wcxb_test=PATH --set readability=PATH --set trafilatura_eval=PATH --set goose3=PATH \\
        --set newspaper=PATH [--tuned aeb,wcxb_dev]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

NON_ARTICLE_KINDS = {"collection", "listing"}
INDEX_PAGES = {"cnn_main_site", "wired_main_site", "yahoo_main_site"}


def label(set_name: str, page) -> str | None:
    """article | non-article | None (a WCXB page type that is neither: forum, product, docs, service)."""
    if set_name.startswith("wcxb"):
        return "article" if page.kind == "article" else ("non-article" if page.kind in NON_ARTICLE_KINDS else None)
    if set_name == "newspaper" and page.key in INDEX_PAGES:
        return "non-article"
    return "article"


def main(argv: list[str] | None = None) -> None:
    import bench_extract_quality as beq

    from forecast_env.corpus_build.extract import extract_page, normalize_text
    from forecast_env.corpus_build.langid import LanguageIdentifier
    from forecast_env.corpus_build.quality import PROFILE_NAMES, apply_filters, build_filters

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--tuned", default="aeb,wcxb_dev", help="the sets the news profile was tuned on")
    args = ap.parse_args(argv)
    if not args.set:
        print("bench_quality_profiles: no --set given; see the module docstring. Skipped.")
        return
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    tuned = set(args.tuned.split(","))
    lid = LanguageIdentifier()
    filters = {p: build_filters({"profile": p}) for p in PROFILE_NAMES}
    totals: dict[tuple[str, str], Counter] = {}
    reasons: dict[tuple[str, str, str], Counter] = {}
    print("| set | split | pages | reach quality | " + " | ".join(f"{p} keeps" for p in PROFILE_NAMES) + " |")
    print("|---|---|---|---:|---:|" + "---:|" * (len(PROFILE_NAMES) - 1))
    for spec in args.set:
        name, _, path = spec.partition("=")
        root = Path(path).expanduser()
        pages = [pg for pg in beq.detect_loader(root, name)(root) if label(name, pg)]
        bodies = []
        for pg in pages:
            try:
                ext = extract_page(pg.html, pg.url)
                bodies.append(normalize_text(ext.body) if ext.body else "")
            except Exception:
                bodies.append("")
        scores = lid.english_scores([b if b.strip() else "-" for b in bodies])
        split = "tuned" if name in tuned else "held out"
        for lab in ("article", "non-article"):
            idx = [i for i, pg in enumerate(pages) if label(name, pg) == lab]
            if not idx:
                continue
            reach = [i for i in idx if bodies[i].strip() and scores[i] >= 0.65]
            keeps = {}
            for p in PROFILE_NAMES:
                kept = 0
                for i in reach:
                    res = apply_filters(bodies[i], filters[p])
                    kept += res.keep
                    if not res.keep:
                        reasons.setdefault((split, lab, p), Counter())[res.reason] += 1
                keeps[p] = kept
                tot = totals.setdefault((split, lab), Counter())
                tot[f"keep_{p}"] += kept
            tot = totals.setdefault((split, lab), Counter())
            tot["reach"] += len(reach)
            tot["pages"] += len(idx)
            tot["no_body"] += sum(1 for i in idx if not bodies[i].strip())
            cells = " | ".join(f"{keeps[p]} ({100 * keeps[p] / max(1, len(reach)):.1f}%)" for p in PROFILE_NAMES)
            print(f"| {name} ({lab}) | {split} | {len(idx)} | {len(reach)} | {cells} |", flush=True)
    print("\n| split | pages | reach quality | no body | " + " | ".join(
        f"{p}: kept (articles) / dropped (non-articles)" for p in PROFILE_NAMES) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(PROFILE_NAMES))
    for (split, lab), tot in sorted(totals.items()):
        cells = []
        for p in PROFILE_NAMES:
            k = tot[f"keep_{p}"]
            share = k / max(1, tot["reach"]) if lab == "article" else 1 - k / max(1, tot["reach"])
            cells.append(f"{share * 100:.1f}%")
        print(f"| {split} {lab} | {tot['pages']} | {tot['reach']} | {tot['no_body']} | " + " | ".join(cells) + " |")
    print("\ndrop reasons (split, label, profile): counts")
    for key, c in sorted(reasons.items()):
        print(f"- {key[0]}, {key[1]}, {key[2]}: " + ", ".join(f"{r} {n}" for r, n in c.most_common()))


if __name__ == "__main__":
    main()
