"""Article-body quality on real pages with ground truth: ours vs trafilatura, resiliparse, readability.

For each evaluation set, every extractor gets each page's HTML (str) and returns a body; the score is
the bag of lowercase word tokens (multiset) against the set's ground-truth body: precision, recall and
F1 per page, averaged over pages, the share of pages under F1 0.5, and pages/s (one process, CPU time
of the extraction calls only, which include parsing).

The sets are public but not ours to redistribute, so they stay out of the repository; pass their
folders. Formats read (detected by what the folder holds):

- ``aeb``: scrapinghub/article-extraction-benchmark (``ground-truth.json`` + ``html/<id>.html.gz``,
  181 news/blog pages with hand-checked article bodies). Get it with
  ``git clone https://github.com/scrapinghub/article-extraction-benchmark``.
- ``readability``: mozilla/readability's ``test/test-pages/<name>/{source,expected}.html``; only real
  pages (source >= 10 KB) count, the truth is the text of ``expected.html`` (hand-curated
  Readability.js output). Get it with ``git clone https://github.com/mozilla/readability``.

Usage::

    .venv/bin/python benchmarks/bench_extract_quality.py --set aeb=/path/to/article-extraction-benchmark \\
        --set readability=/path/to/readability [--extractors ours,trafilatura_meta,...] [--worst 10]

Without ``--set`` (as in ``make bench``) the folders come from ``$EXTRACT_EVAL_SETS``
(``name=path,name=path``); with neither it says so and exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import lxml.html

# CJK characters count one token each (their text has no spaces); other scripts: runs of letters/digits.
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]|[^\W_\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


@dataclass
class Page:
    """One evaluation page: its id, URL (may be empty), HTML and ground-truth body."""

    key: str
    url: str
    html: str
    truth: str


def tokens(text: str) -> Counter:
    """Bag of lowercase word tokens."""
    return Counter(_TOKEN.findall((text or "").lower()))


def prf(truth: Counter, pred: Counter) -> tuple[float, float, float]:
    """Precision, recall, F1 of a predicted token bag against the true one (empty vs empty = 1)."""
    if not truth and not pred:
        return 1.0, 1.0, 1.0
    tp = sum((truth & pred).values())
    p = tp / sum(pred.values()) if pred else 0.0
    r = tp / sum(truth.values()) if truth else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", "replace")


def load_aeb(root: Path) -> list[Page]:
    """scrapinghub/article-extraction-benchmark: ground-truth.json + html/<id>.html.gz."""
    truth = json.loads((root / "ground-truth.json").read_text("utf-8"))
    pages = []
    for key, item in sorted(truth.items()):
        path = root / "html" / f"{key}.html.gz"
        if path.exists():
            pages.append(Page(key, item.get("url") or "", _read_text(path), item.get("articleBody") or ""))
    return pages


def load_readability(root: Path, min_bytes: int = 10_000) -> list[Page]:
    """mozilla/readability test pages that are real pages (source >= min_bytes)."""
    base = root / "test" / "test-pages" if (root / "test" / "test-pages").is_dir() else root
    pages = []
    for d in sorted(p for p in base.iterdir() if (p / "source.html").exists() and (p / "expected.html").exists()):
        if (d / "source.html").stat().st_size < min_bytes:
            continue
        expected = lxml.html.fromstring(_read_text(d / "expected.html"))  # str: bytes would read as latin-1
        for el in expected.iter("p", "div", "li", "h1", "h2", "h3", "h4", "br", "tr", "pre", "blockquote"):
            el.tail = "\n" + (el.tail or "")
        meta_path = d / "expected-metadata.json"
        url = ""
        if meta_path.exists():
            url = json.loads(meta_path.read_text("utf-8")).get("url") or ""
        pages.append(Page(d.name, url or f"http://fakehost/{d.name}/", _read_text(d / "source.html"),
                          expected.text_content()))
    return pages


LOADERS: dict[str, Callable[[Path], list[Page]]] = {"aeb": load_aeb, "readability": load_readability}


def detect_loader(root: Path) -> Callable[[Path], list[Page]]:
    """The loader for a folder, from what it holds."""
    if (root / "ground-truth.json").exists():
        return load_aeb
    if (root / "test" / "test-pages").is_dir() or any(root.glob("*/expected.html")):
        return load_readability
    raise SystemExit(f"{root}: neither ground-truth.json (aeb) nor test/test-pages (readability) found")


# ------------------------------------------------------------------------------------------------
# Extractors: each maps (html, url) -> body text
# ------------------------------------------------------------------------------------------------


def _ours(html: str, url: str) -> str:
    from forecast_env.corpus_build.extract import extract_page

    return extract_page(html, url).body or ""


def _ours_no_fallback(html: str, url: str) -> str:
    from forecast_env.corpus_build.extract import extract_page

    return extract_page(html, url, use_trafilatura_fallback=False).body or ""


def _traf(html: str, url: str) -> str:
    import trafilatura

    return trafilatura.extract(html, url=url or None) or ""


def _traf_meta(html: str, url: str) -> str:
    import trafilatura

    doc = trafilatura.bare_extraction(html, url=url or None, with_metadata=True)
    return (getattr(doc, "text", None) or "") if doc is not None else ""


def _resiliparse(html: str, url: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, preserve_formatting=True)


def _readability(html: str, url: str) -> str:
    from readability import Document

    summary = Document(html, url=url or None).summary(html_partial=True)
    tree = lxml.html.fromstring(summary) if summary.strip() else None
    return tree.text_content() if tree is not None else ""


def _justext(html: str, url: str) -> str:
    import justext

    paras = justext.justext(html.encode("utf-8"), justext.get_stoplist("English"))
    return "\n".join(p.text for p in paras if not p.is_boilerplate)


EXTRACTORS: dict[str, tuple[str, Callable[[str, str], str]]] = {
    "ours": ("ours: extract_page (body + title/summary/canonical/timestamp candidates)", _ours),
    "ours_no_fallback": ("ours without the trafilatura fallback", _ours_no_fallback),
    "trafilatura": ("trafilatura.extract (default, no metadata)", _traf),
    "trafilatura_meta": ("trafilatura.bare_extraction(with_metadata=True)", _traf_meta),
    "resiliparse": ("resiliparse extract_plain_text(main_content=True)", _resiliparse),
    "readability": ("readability-lxml Document.summary", _readability),
    "justext": ("jusText (English stoplist)", _justext),
}
DEFAULT_EXTRACTORS = "ours,ours_no_fallback,trafilatura,trafilatura_meta,resiliparse,readability,justext"


@dataclass
class Score:
    """Mean precision/recall/F1 over a set's pages, the share under F1 0.5, pages/s, per-page F1."""

    precision: float
    recall: float
    f1: float
    fail_share: float
    pages_per_s: float
    per_page: dict[str, float]


def evaluate(pages: list[Page], fn: Callable[[str, str], str]) -> Score:
    """Run one extractor over pages and score it (time counts the extraction calls only)."""
    fn(pages[0].html, pages[0].url)  # warm-up: imports, model/stoplist loads
    outs: list[str] = []
    t0 = time.process_time()  # CPU time: fair between extractors on a shared machine
    for page in pages:
        try:
            outs.append(fn(page.html, page.url) or "")
        except Exception:  # an extractor crash on a page scores as an empty body
            outs.append("")
    elapsed = time.process_time() - t0
    ps, rs, fs = [], [], []
    per_page = {}
    for page, out in zip(pages, outs):
        p, r, f = prf(tokens(page.truth), tokens(out))
        ps.append(p), rs.append(r), fs.append(f)
        per_page[page.key] = f
    n = len(pages)
    return Score(sum(ps) / n, sum(rs) / n, sum(fs) / n, sum(f < 0.5 for f in fs) / n, n / elapsed, per_page)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH", help="an evaluation set folder")
    ap.add_argument("--extractors", default=DEFAULT_EXTRACTORS, help=f"comma list of {', '.join(EXTRACTORS)}")
    ap.add_argument("--worst", type=int, default=0, help="list the N lowest-F1 pages of the first extractor")
    ap.add_argument("--limit", type=int, default=0, help="only the first N pages of each set")
    args = ap.parse_args(argv)
    specs = args.set or [s for s in os.environ.get("EXTRACT_EVAL_SETS", "").split(",") if s.strip()]
    if not specs:
        print("bench_extract_quality: no evaluation sets given (--set NAME=PATH or $EXTRACT_EVAL_SETS); "
              "see the module docstring for where to get them. Skipped.")
        return
    names = [x.strip() for x in args.extractors.split(",") if x.strip()]
    unknown = [x for x in names if x not in EXTRACTORS]
    if unknown:
        raise SystemExit(f"unknown extractor(s) {unknown}; choose from {list(EXTRACTORS)}")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    print("| set | extractor | pages | precision | recall | F1 | pages F1 < 0.5 | pages/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    worst_lines = []
    for spec in specs:
        name, _, path = spec.partition("=")
        root = Path(path or name).expanduser()
        pages = detect_loader(root)(root)
        if args.limit:
            pages = pages[: args.limit]
        for i, ex in enumerate(names):
            s = evaluate(pages, EXTRACTORS[ex][1])
            print(f"| {name} | {ex} | {len(pages)} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} | "
                  f"{100 * s.fail_share:.1f}% | {s.pages_per_s:.1f} |", flush=True)
            if i == 0 and args.worst:
                for key, f in sorted(s.per_page.items(), key=lambda kv: kv[1])[: args.worst]:
                    worst_lines.append(f"{name} {key} F1={f:.3f}")
    if worst_lines:
        print(f"\nlowest F1 ({names[0]}):")
        print("\n".join(worst_lines))
    print("\nextractors: " + "; ".join(f"{n} = {EXTRACTORS[n][0]}" for n in names))


if __name__ == "__main__":
    main()
