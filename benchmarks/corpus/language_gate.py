"""The language gate on real pages: how many pages it drops before their body is extracted, how many of
those the default body path would have found English (lost), and the CPU it saves, per set and split.

For every page: the shipped gate (`langid.LanguageGate` at the config's `language.gate_max_score`) on
the page's parse, and the default body path's body (`extract_page` without a gate) scored by the same
fastText model, as the language stage scores it. A page is *English* when that body scores >= the
config's `language.min_english_score`; a gated English page is *lost*. CPU: the gate's own time
against the body extraction it skips.

The split (benchmarks/RESULTS.md, the language gate's row): the gate's threshold was chosen on ``aeb`` and
``wcxb_dev``; every other set is held out. Usage::

    .venv/bin/python -m benchmarks.corpus.language_gate --set aeb=PATH --set wcxb_dev=PATH \\
        --set wcxb_test=PATH --set readability=PATH --set trafilatura_eval=PATH [--tuned aeb,wcxb_dev]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    from benchmarks.corpus import extract_quality as beq
    from forecast_env.config import load_config
    from forecast_env.corpus_build.extract import _parse, extract_page, normalize_text
    from forecast_env.corpus_build.langid import LanguageGate, LanguageIdentifier, page_sample

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--tuned", default="aeb,wcxb_dev", help="the sets the gate's threshold was chosen on")
    args = ap.parse_args(argv)
    if not args.set:
        print("language_gate: no --set given; see the module docstring. Skipped.")
        return
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    cfg = load_config("corpus")["language"]
    lid = LanguageIdentifier()
    gate = LanguageGate(lid, float(cfg["gate_max_score"]))
    min_score = float(cfg["min_english_score"])
    tuned = set(args.tuned.split(","))
    totals: dict[str, Counter] = {}
    lost_pages: list[str] = []
    passed: Counter = Counter()  # the not-English pages the gate lets through, by why
    print(f"gate: sample English score < {gate.max_score} (samples of >= {gate.min_chars} characters); "
          f"English: the default body scores >= {min_score}\n")
    print("| set | split | pages | English | not English | gated | gated, not English | lost (English) "
          "| gate ms/page | body ms/page (skipped on gated) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for spec in args.set:
        name, _, path = spec.partition("=")
        root = Path(path).expanduser()
        split = "tuned" if name in tuned else "held out"
        c = Counter()
        for pg in beq.detect_loader(root, name)(root):
            tree = _parse(pg.html)
            t0 = time.process_time()
            score = gate(tree) if tree is not None else None
            c["gate_s"] += time.process_time() - t0
            t0 = time.process_time()
            try:
                body = extract_page(pg.html, pg.url).body or ""
            except Exception:
                body = ""
            dt = time.process_time() - t0
            c["body_s"] += dt
            english = bool(body.strip()) and lid.english_score(normalize_text(body)) >= min_score
            c["pages"] += 1
            c["english"] += english
            if score is not None:
                c["gated"] += 1
                c["saved_s"] += dt
                if english:
                    c["lost"] += 1
                    lost_pages.append(f"{name}/{pg.key} (gate score {score:.3f})")
                else:
                    c["gated_non_english"] += 1
            elif not english:
                passed["no body" if not body.strip() else "a sample under the minimum length"
                       if tree is None or len(page_sample(tree)) < gate.min_chars else "a sample scoring above the gate"] += 1
        totals.setdefault(split, Counter()).update(c)
        ne = c["pages"] - c["english"]
        print(f"| {name} | {split} | {c['pages']} | {c['english']} | {ne} | {c['gated']} | "
              f"{c['gated_non_english']} ({100 * c['gated_non_english'] / max(1, ne):.1f}%) | {c['lost']} | "
              f"{1000 * c['gate_s'] / max(1, c['pages']):.2f} | {1000 * c['body_s'] / max(1, c['pages']):.1f} |",
              flush=True)
    print("\n| split | pages | English | not English gated | English lost | body CPU saved |")
    print("|---|---:|---:|---:|---:|---:|")
    for split, c in sorted(totals.items()):
        ne = c["pages"] - c["english"]
        print(f"| {split} | {c['pages']} | {c['english']} | {c['gated_non_english']} of {ne} "
              f"({100 * c['gated_non_english'] / max(1, ne):.1f}%) | {c['lost']} of {c['english']} "
              f"({100 * c['lost'] / max(1, c['english']):.2f}%) | {c['saved_s'] - c['gate_s']:.1f} s of "
              f"{c['body_s']:.1f} s ({100 * (c['saved_s'] - c['gate_s']) / max(1e-9, c['body_s']):.0f}%) |")
    print("\nlost pages: " + (", ".join(lost_pages) if lost_pages else "none"))
    print("not-English pages the gate lets through (all sets): "
          + (", ".join(f"{why} {n}" for why, n in passed.most_common()) or "none"))


if __name__ == "__main__":
    main()
