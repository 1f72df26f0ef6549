"""The quality stage alone, per profile, on real pages: how many held-out real English articles each
profile keeps and how many labelled non-article pages it drops, per set and in total, with the drop
reasons (the news profile's page rule among them).

Each page goes through the corpus builder's own stages 2-4 (`extract_page` with the default trafilatura
body, `normalize_text`, the fastText English test at 0.65); the pages that reach stage 5 (a body,
English) are judged by every profile's filters, with the page's signals (`Extracted.page`) as the build
passes them.

Labels. Every page of the article sets is an article (WCXB: its ``article`` pages). Non-articles come
from ``--nonarticles labels.json``: a JSON list of ``{"file", "label": "article" | "non-article",
"split": "tuning" | "held out", "set", "source", "path", "url", "kind", "licence"}`` (``file`` absolute
or relative to the JSON's folder; ``.gz`` read as gzip), each page labelled by reading it and split by a
fixed hash of (source, path) before any tuning (WCXB's dev pages, and test pages whose id or URL is a
dev page's, on the tuning side). Its ``label: article`` pages (pages a source called a listing that are
articles) count in a pool of their own. Without the file, WCXB's ``collection`` and ``listing`` pages
are the non-articles (the issue-25 tables). A folder of ``.html`` files is read as non-articles, held out.

The split (benchmarks/RESULTS.md, the quality profiles' rows): the news profile is tuned on ``aeb``, ``wcxb_dev`` and the tuning half
of the labelled set; every other set is held out. A held-out article whose URL is also a page of a tuning
set is counted apart ("held out, seen in tuning"), outside the held-out totals. Small and older sites
(``goose3``, ``newspaper``) get a total of their own.

``--strip-metadata``: every article page is judged a second time with its article metadata removed
(`quality.strip_article_metadata`: og:* / article:* meta, JSON-LD, microdata, ``<article>`` -> ``<div>``),
as a page of a small site without it would be; rows "SET stripped". ``--dump PATH`` writes one JSON line per
page reaching the quality stage (its signals, body words, label, split and the text rules' verdict): the
input of the page rule's tuning (tuning rows only). Usage::

    .venv/bin/python -m benchmarks.corpus.quality_profile_keep --set aeb=PATH --set wcxb_dev=PATH \\
        --set wcxb_test=PATH --set readability=PATH --set trafilatura_eval=PATH --set goose3=PATH \\
        --set newspaper=PATH --nonarticles labels.json [--strip-metadata] [--list "held out"] [--dump F]

`--record` writes the planner's `keep.<profile>` rates (the share of the held-out real articles reaching the
quality stage that each profile keeps, the totals' "held out | article" row) into forecast_env/rates.json;
give `--record-command 'cd DATA && ...'` for a run from the data folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections import Counter
from pathlib import Path

from benchmarks.recording import Measurement, add_record_arguments, record_rates, start_recording

NON_ARTICLE_KINDS = {"collection", "listing"}
INDEX_PAGES = {"cnn_main_site", "wired_main_site", "yahoo_main_site"}
EXTRA_SET = "labelled"
SMALL_SITES = {"goose3", "newspaper"}
SEEN = "held out, seen in tuning"
#: The profiles whose keep share the planner reads (`keep.<profile>` in forecast_env/rates.json).
RATE_PROFILES = ("paper", "news")


def label(set_name: str, page, labelled: bool) -> str | None:
    """article | non-article | None (not counted: a WCXB type that is neither, or a page the labels hold)."""
    if set_name.startswith("wcxb"):
        if page.kind == "article":
            return "article"
        return None if labelled else ("non-article" if page.kind in NON_ARTICLE_KINDS else None)
    if set_name == "newspaper" and page.key in INDEX_PAGES:
        return None if labelled else "non-article"
    return "article"


def load_labelled(path: Path) -> list[tuple[object, str, str]]:
    """The hand-labelled pages: (`Page` whose ``kind`` is the label, split, source set)."""
    from benchmarks.corpus import extract_quality as beq

    if path.is_dir():
        return [(beq.Page(p.name, "", beq._read_text(p), "", kind="non-article"), "held out", "folder")
                for p in sorted(path.glob("*.htm*"))]
    out = []
    for item in json.loads(path.read_text("utf-8")):
        lab = item.get("label", "non-article")
        if lab not in ("article", "non-article"):
            raise SystemExit(f"{path}: {item.get('file')}: label {lab!r} is not article or non-article")
        split = {"tuning": "tuned", "tuned": "tuned", "held out": "held out"}.get(item.get("split", "held out"))
        if split is None:
            raise SystemExit(f"{path}: {item.get('file')}: split {item.get('split')!r} is not tuning or held out")
        f = Path(item["file"])
        html = beq._read_text(f if f.is_absolute() else path.parent / f)
        out.append((beq.Page(item.get("path") or item["file"], item.get("url") or "", html, "", kind=lab), split,
                    item.get("set") or "labelled"))
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson 95% interval of k of n."""
    if not n:
        return 0.0, 0.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h


def rates_from(totals: dict[tuple[str, str], Counter]) -> dict[str, Measurement]:
    """The planner's `keep.<profile>` rates from the totals ({(split, label): counts}): held-out articles kept."""
    tot = totals.get(("held out", "article"))
    if not tot or not tot["reach"]:
        return {}
    return {f"keep.{p}": Measurement(tot[f"keep_{p}"] / tot["reach"],
                                     f"{tot[f'keep_{p}']} of the {tot['reach']} held-out real English articles "
                                     "reaching the quality stage (trafilatura bodies)")
            for p in RATE_PROFILES if f"keep_{p}" in tot}


def main(argv: list[str] | None = None) -> None:
    from benchmarks.corpus import extract_quality as beq
    from forecast_env.corpus_build.extract import extract_page, normalize_text
    from forecast_env.corpus_build.langid import LanguageIdentifier
    from forecast_env.corpus_build.quality import (
        PROFILE_NAMES,
        apply_filters,
        build_filters,
        strip_article_metadata,
    )

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--nonarticles", type=Path, default=None, metavar="JSON_OR_DIR",
                    help="the labelled non-article set (labels.json with its split) or a folder of .html pages")
    ap.add_argument("--tuned", default="aeb,wcxb_dev", help="the article sets the news profile was tuned on")
    ap.add_argument("--strip-metadata", action="store_true",
                    help="also judge every article page with its og / JSON-LD / microdata / <article> removed")
    ap.add_argument("--list", default="", metavar="SPLIT",
                    help="also list each page of this split ('held out' or 'tuned') a profile gets wrong")
    ap.add_argument("--dump", type=Path, default=None, help="write each judged page's signals as JSON lines")
    add_record_arguments(ap)
    args = ap.parse_args(argv)
    if not args.set and args.nonarticles is None:
        print("quality_profile_keep: no --set given; see the module docstring. Skipped.")
        return
    recording = start_recording(args, "benchmarks.corpus.quality_profile_keep", sys.argv[1:] if argv is None else argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    tuned = set(args.tuned.split(","))
    labelled = args.nonarticles is not None
    lid = LanguageIdentifier()
    filters = {p: build_filters({"profile": p}) for p in PROFILE_NAMES}
    text_only = build_filters({"profile": "news", "page": {"enabled": False}})
    specs = [(n, p) for n, _, p in (s.partition("=") for s in args.set)]
    specs.sort(key=lambda s: s[0] not in tuned)  # tuning sets first: their URLs mark the held-out repeats
    # units: (set name, split, label, page); the labelled pages carry their own split
    groups: list[tuple[str, list[tuple[str, str, object]]]] = []
    tuned_urls: set[str] = set()
    for name, path in specs:
        root = Path(path).expanduser()
        pages = [pg for pg in beq.detect_loader(root, name)(root) if label(name, pg, labelled)]
        base = "tuned" if name in tuned else "held out"
        if base == "tuned":
            tuned_urls.update(pg.url for pg in pages if pg.url)
        units = [(SEEN if base == "held out" and pg.url and pg.url in tuned_urls else base,
                  label(name, pg, labelled), pg) for pg in pages]
        groups.append((name, units))
    if labelled:
        by_set: dict[str, list] = {}
        for pg, split, src in load_labelled(args.nonarticles):
            by_set.setdefault(f"{EXTRA_SET}:{src}", []).append((split, pg.kind, pg))
        groups.extend(sorted(by_set.items()))
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    totals: dict[tuple[str, str], Counter] = {}
    reasons: dict[tuple[str, str, str], Counter] = {}
    wrong: list[str] = []
    print("| set | split | pages | reach quality | " + " | ".join(f"{p} keeps" for p in PROFILE_NAMES) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(PROFILE_NAMES))
    for name, units in groups:
        variants = [("", False)] + ([(" stripped", True)] if args.strip_metadata else [])
        for suffix, strip in variants:
            todo = [u for u in units if not strip or u[1] == "article"]
            if not todo:
                continue
            exts, bodies = [], []
            for _, _, pg in todo:
                try:
                    ext = extract_page(strip_article_metadata(pg.html) if strip else pg.html, pg.url)
                    exts.append(ext)
                    bodies.append(normalize_text(ext.body) if ext.body else "")
                except Exception:
                    exts.append(None)
                    bodies.append("")
            scores = lid.english_scores([b if b.strip() else "-" for b in bodies])
            rows: dict[tuple[str, str], Counter] = {}
            for i, (split, lab, pg) in enumerate(todo):
                row = rows.setdefault((split, lab), Counter())
                row["pages"] += 1
                row["no_body"] += not bodies[i].strip()
                if not bodies[i].strip() or scores[i] < 0.65:
                    continue
                row["reach"] += 1
                page = exts[i].page if exts[i] is not None else None
                verdicts = {p: apply_filters(bodies[i], filters[p], page) for p in PROFILE_NAMES}
                for p, res in verdicts.items():
                    row[f"keep_{p}"] += res.keep
                    if not res.keep:
                        reasons.setdefault((split + suffix, lab, p), Counter())[res.reason] += 1
                    if split == args.list and res.keep == (lab == "non-article"):
                        wrong.append(f"- {p} {'keeps' if res.keep else 'drops'} {lab} {name}{suffix}/{pg.key} "
                                     f"{pg.url}: {res.reason} {res.detail or ''}")
                if dump is not None and page is not None:
                    rec = {"set": name, "stripped": strip, "split": split, "label": lab, "key": pg.key, "url": pg.url,
                           "body_words": len(bodies[i].split()), "text_keep": apply_filters(bodies[i], text_only).keep,
                           "news_keep": verdicts.get("news").keep if "news" in verdicts else None,
                           "page": dataclasses.asdict(page)}
                    dump.write(json.dumps(rec) + "\n")
            for (split, lab), row in sorted(rows.items()):
                cells = " | ".join(f"{row[f'keep_{p}']} ({100 * row[f'keep_{p}'] / max(1, row['reach']):.1f}%)"
                                   for p in PROFILE_NAMES)
                print(f"| {name}{suffix} ({lab}) | {split} | {row['pages']} | {row['reach']} | {cells} |", flush=True)
                keys = [(split + suffix, lab)]
                if name in SMALL_SITES:
                    keys.append((f"{split}{suffix}, small/older sites", lab))
                for key in keys:
                    totals.setdefault(key, Counter()).update(row)
    if dump is not None:
        dump.close()
    print("\nTotals (articles: kept; non-articles: dropped; 95% Wilson interval)\n")
    print("| split | label | pages | reach quality | no body | " + " | ".join(PROFILE_NAMES) + " |")
    print("|---|---|---:|---:|---:|" + "---:|" * len(PROFILE_NAMES))
    for (split, lab), tot in sorted(totals.items()):
        cells = []
        for p in PROFILE_NAMES:
            k = tot[f"keep_{p}"]
            n = k if lab == "article" else tot["reach"] - k
            lo, hi = wilson(n, tot["reach"])
            cells.append(f"{n} ({100 * n / max(1, tot['reach']):.1f}% [{100 * lo:.1f}, {100 * hi:.1f}])")
        print(f"| {split} | {lab} | {tot['pages']} | {tot['reach']} | {tot['no_body']} | " + " | ".join(cells) + " |")
    print("\ndrop reasons (split, label, profile): counts")
    for key, c in sorted(reasons.items()):
        print(f"- {key[0]}, {key[1]}, {key[2]}: " + ", ".join(f"{r} {n}" for r, n in c.most_common()))
    if wrong:
        print(f"\npages of split {args.list!r} a profile gets wrong:")
        print("\n".join(wrong))
    record_rates(recording, rates_from(totals))


if __name__ == "__main__":
    main()
