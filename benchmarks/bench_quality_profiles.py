"""The quality stage alone, per profile, on real pages: how many article pages each profile keeps and how
many labelled non-article pages it drops, per set, with the drop reasons (the news profile's page rule
among them).

Each page goes through the corpus builder's own stages 2-4 (`extract_page`, `normalize_text`, the
fastText English test at 0.65); the pages that reach stage 5 (a body, English) are judged by every
profile's filters, with the page's signals (`Extracted.page`) as the build passes them. Labels: WCXB's
``article`` pages are articles and its ``collection`` and ``listing`` pages (category / tag / index
pages, content listings) are non-articles; every page of the other sets is an article. ``--nonarticles``
adds a hand-labelled set: a folder of ``.html`` files (every one a non-article) or a JSON list of
``{"file", "label": "article" | "non-article", "url", "kind", "source"}`` (files relative to the JSON's
folder); it is always held out.

The split (benchmarks/RESULTS.md): the news profile was tuned on ``aeb`` and ``wcxb_dev``; every other
set is held out. A held-out page whose URL is also a page of a tuning set (WCXB's test split repeats
some of its dev split's URLs) is counted apart, as "held out, seen in tuning", and not in the held-out
totals. Usage::

    .venv/bin/python benchmarks/bench_quality_profiles.py --set aeb=PATH --set wcxb_dev=PATH \\
        --set wcxb_test=PATH --set readability=PATH --set trafilatura_eval=PATH --set goose3=PATH \\
        --set newspaper=PATH [--nonarticles DIR_OR_JSON] [--tuned aeb,wcxb_dev]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

NON_ARTICLE_KINDS = {"collection", "listing"}
INDEX_PAGES = {"cnn_main_site", "wired_main_site", "yahoo_main_site"}
EXTRA_SET = "nonarticles"


def label(set_name: str, page) -> str | None:
    """article | non-article | None (a WCXB page type that is neither: forum, product, docs, service)."""
    if set_name.startswith("wcxb"):
        return "article" if page.kind == "article" else ("non-article" if page.kind in NON_ARTICLE_KINDS else None)
    if set_name == "newspaper" and page.key in INDEX_PAGES:
        return "non-article"
    if set_name == EXTRA_SET:
        return page.kind
    return "article"


def load_labelled(path: Path) -> list:
    """The hand-labelled pages of ``--nonarticles`` (`Page`s whose ``kind`` is the label)."""
    import bench_extract_quality as beq

    if path.is_dir():
        items = [{"file": p.name, "label": "non-article"} for p in sorted(path.glob("*.htm*"))]
        base = path
    else:
        items = json.loads(path.read_text("utf-8"))
        base = path.parent
    pages = []
    for item in items:
        lab = item.get("label", "non-article")
        if lab not in ("article", "non-article"):
            raise SystemExit(f"{path}: {item.get('file')}: label {lab!r} is not article or non-article")
        html = (base / item["file"]).read_text("utf-8", "replace")
        pages.append(beq.Page(item["file"], item.get("url") or "", html, "", kind=lab))
    return pages


def main(argv: list[str] | None = None) -> None:
    import bench_extract_quality as beq

    from forecast_env.corpus_build.extract import extract_page, normalize_text
    from forecast_env.corpus_build.langid import LanguageIdentifier
    from forecast_env.corpus_build.quality import PROFILE_NAMES, apply_filters, build_filters

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--nonarticles", type=Path, default=None, metavar="DIR_OR_JSON",
                    help="a hand-labelled held-out set: a folder of non-article .html pages or a JSON list")
    ap.add_argument("--tuned", default="aeb,wcxb_dev", help="the sets the news profile was tuned on")
    ap.add_argument("--list", default="", metavar="SPLIT",
                    help="also list each page of this split ('held out' or 'tuned') a profile gets wrong")
    args = ap.parse_args(argv)
    if not args.set and args.nonarticles is None:
        print("bench_quality_profiles: no --set given; see the module docstring. Skipped.")
        return
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    tuned = set(args.tuned.split(","))
    lid = LanguageIdentifier()
    filters = {p: build_filters({"profile": p}) for p in PROFILE_NAMES}
    specs = [(n, p) for n, _, p in (s.partition("=") for s in args.set)]
    specs.sort(key=lambda s: s[0] not in tuned)  # tuning sets first: their URLs mark the held-out repeats
    if args.nonarticles is not None:
        specs.append((EXTRA_SET, str(args.nonarticles)))
    tuned_urls: set[str] = set()
    totals: dict[tuple[str, str], Counter] = {}
    reasons: dict[tuple[str, str, str], Counter] = {}
    wrong: list[str] = []
    print("| set | split | pages | reach quality | " + " | ".join(f"{p} keeps" for p in PROFILE_NAMES) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(PROFILE_NAMES))
    for name, path in specs:
        root = Path(path).expanduser()
        loaded = load_labelled(root) if name == EXTRA_SET else beq.detect_loader(root, name)(root)
        pages = [pg for pg in loaded if label(name, pg)]
        exts, bodies = [], []
        for pg in pages:
            try:
                ext = extract_page(pg.html, pg.url)
                exts.append(ext)
                bodies.append(normalize_text(ext.body) if ext.body else "")
            except Exception:
                exts.append(None)
                bodies.append("")
        scores = lid.english_scores([b if b.strip() else "-" for b in bodies])
        base_split = "tuned" if name in tuned else "held out"
        if name in tuned:
            tuned_urls.update(pg.url for pg in pages if pg.url)
        for lab in ("article", "non-article"):
            for split in (base_split, "held out, seen in tuning"):
                seen = split != base_split
                if seen and base_split == "tuned":
                    continue
                idx = [i for i, pg in enumerate(pages) if label(name, pg) == lab
                       and (base_split == "tuned" or (bool(pages[i].url) and pages[i].url in tuned_urls) == seen)]
                if not idx:
                    continue
                reach = [i for i in idx if bodies[i].strip() and scores[i] >= 0.65]
                keeps = {}
                for p in PROFILE_NAMES:
                    kept = 0
                    for i in reach:
                        res = apply_filters(bodies[i], filters[p], exts[i].page if exts[i] is not None else None)
                        kept += res.keep
                        if not res.keep:
                            reasons.setdefault((split, lab, p), Counter())[res.reason] += 1
                        if split == args.list and res.keep == (lab == "non-article"):
                            wrong.append(f"- {p} {'keeps' if res.keep else 'drops'} {lab} {name}/{pages[i].key} "
                                         f"{pages[i].url}: {res.reason} {res.detail or ''}")
                    keeps[p] = kept
                    totals.setdefault((split, lab), Counter())[f"keep_{p}"] += kept
                tot = totals.setdefault((split, lab), Counter())
                tot["reach"] += len(reach)
                tot["pages"] += len(idx)
                tot["no_body"] += sum(1 for i in idx if not bodies[i].strip())
                cells = " | ".join(f"{keeps[p]} ({100 * keeps[p] / max(1, len(reach)):.1f}%)" for p in PROFILE_NAMES)
                print(f"| {name} ({lab}) | {split} | {len(idx)} | {len(reach)} | {cells} |", flush=True)
    print("\n| split | pages | reach quality | no body | " + " | ".join(
        f"{p}: kept (articles) / dropped (non-articles)" for p in PROFILE_NAMES) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(PROFILE_NAMES))
    for (split, lab), tot in sorted(totals.items()):
        cells = []
        for p in PROFILE_NAMES:
            k = tot[f"keep_{p}"]
            n = k if lab == "article" else tot["reach"] - k
            cells.append(f"{n} ({100 * n / max(1, tot['reach']):.1f}%)")
        print(f"| {split} {lab} | {tot['pages']} | {tot['reach']} | {tot['no_body']} | " + " | ".join(cells) + " |")
    print("\ndrop reasons (split, label, profile): counts")
    for key, c in sorted(reasons.items()):
        print(f"- {key[0]}, {key[1]}, {key[2]}: " + ", ".join(f"{r} {n}" for r, n in c.most_common()))
    if wrong:
        print(f"\npages of split {args.list!r} a profile gets wrong:")
        print("\n".join(wrong))


if __name__ == "__main__":
    main()
