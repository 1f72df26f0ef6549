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
- ``trafilatura_eval``: adbar/trafilatura's ``tests/evaldata.json`` + ``tests/eval/`` (990 pages with
  must-contain / must-not-contain snippets; scored by them).
- ``wcxb_dev`` / ``wcxb_test``: the WCXB benchmark (Murrough-Foley/web-content-extraction-benchmark,
  CC-BY-4.0): ``{dev,test}/{html,ground-truth}``, full bodies, snippets and page types
  (``--kinds article`` keeps the articles, the default).
- ``goose3``: goose3's ``tests/data/content/*.{html,json}`` (the expected opening of each body, scored
  as one snippet).
- ``newspaper``: newspaper4k's ``tests/data/{html,txt}`` (full expected bodies).

Name each set as its loader (``--set wcxb_test=PATH``). Rows are given for all pages and for English
pages (fastText lid.176 >= 0.65 on the truth, else on snippets + visible text); with ``--baseline``
every other system is compared with it per page (paired bootstrap of F1 and recall, 95%).

Usage::

    .venv/bin/python -m benchmarks.corpus.extract_quality --set aeb=/path/to/article-extraction-benchmark \\
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
    """One evaluation page: its id, URL (may be empty), HTML and ground truth.

    ``truth`` is the full expected body ("" when the set gives snippets only); ``with_`` and ``without``
    are the set's must-contain / must-not-contain snippets (a snippet set is scored by them);
    ``kind`` is the set's page type where it labels one (WCXB), else "article"."""

    key: str
    url: str
    html: str
    truth: str
    with_: tuple[str, ...] = ()
    without: tuple[str, ...] = ()
    kind: str = "article"
    lang_text: str = ""


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


def load_trafilatura_eval(root: Path) -> list[Page]:
    """adbar/trafilatura's evaluation set: tests/evaldata.json (URL -> file, with, without) + tests/eval/."""
    base = root / "tests" if (root / "tests" / "evaldata.json").exists() else root
    data = json.loads((base / "evaldata.json").read_text("utf-8"))
    pages = []
    for url, item in sorted(data.items()):
        path = base / "eval" / item["file"]
        if not path.exists():
            path = base / "cache" / item["file"]
        if not path.exists():
            continue
        w, wo = tuple(item.get("with") or ()), tuple(item.get("without") or ())
        pages.append(Page(item["file"], url, _read_text(path), "", w, wo, lang_text=" ".join(w)))
    return pages


def _load_wcxb(root: Path, split: str) -> list[Page]:
    meta = json.loads((root / "metadata.json").read_text("utf-8"))["files"]
    pages = []
    for gt_path in sorted((root / split / "ground-truth").glob("*.json")):
        gt = json.loads(gt_path.read_text("utf-8"))
        html_path = root / split / "html" / f"{gt_path.stem}.html.gz"
        if not html_path.exists():
            continue
        truth = gt.get("ground_truth") or {}
        kind = (meta.get(gt_path.stem) or {}).get("page_type") or "unknown"
        pages.append(Page(gt_path.stem, gt.get("url") or "", _read_text(html_path), truth.get("main_content") or "",
                          tuple(truth.get("with") or ()), tuple(truth.get("without") or ()), kind))
    return pages


def load_wcxb_dev(root: Path) -> list[Page]:
    """WCXB (Murrough-Foley/web-content-extraction-benchmark, CC-BY-4.0), dev split, every page type."""
    return _load_wcxb(root, "dev")


def load_wcxb_test(root: Path) -> list[Page]:
    """WCXB held-out test split, every page type."""
    return _load_wcxb(root, "test")


def load_goose3(root: Path) -> list[Page]:
    """goose3's tests/data/content/<name>.{html,json}: the expected cleaned text is a prefix of the body
    (its test checks that the extracted text starts with it), so it is scored as one "with" snippet."""
    base = root / "tests" / "data" / "content" if (root / "tests" / "data" / "content").is_dir() else root
    pages = []
    for js in sorted(base.glob("*.json")):
        html = js.with_suffix(".html")
        if not html.exists():
            continue
        item = json.loads(js.read_text("utf-8"))
        prefix = ((item.get("expected") or {}).get("cleaned_text") or "").strip()
        if len(prefix) < 40:
            continue
        pages.append(Page(js.stem, item.get("url") or "", _read_text(html), "", (prefix,), (), lang_text=prefix))
    return pages


def load_newspaper(root: Path) -> list[Page]:
    """newspaper4k's tests/data/{html,txt}/<name>: the expected article text in full."""
    base = root / "tests" / "data" if (root / "tests" / "data" / "html").is_dir() else root
    pages = []
    for txt in sorted((base / "txt").glob("*.txt")):
        html = base / "html" / f"{txt.stem}.html"
        meta = base / "metadata" / f"{txt.stem}.json"
        if not html.exists():
            continue
        url = ""
        if meta.exists():
            m = json.loads(meta.read_text("utf-8"))
            url = m.get("url") or m.get("canonical_link") or ""
        pages.append(Page(txt.stem, url, _read_text(html), txt.read_text("utf-8")))
    return pages


LOADERS: dict[str, Callable[[Path], list[Page]]] = {
    "aeb": load_aeb, "readability": load_readability, "trafilatura_eval": load_trafilatura_eval,
    "wcxb_dev": load_wcxb_dev, "wcxb_test": load_wcxb_test, "goose3": load_goose3, "newspaper": load_newspaper,
}


def detect_loader(root: Path, name: str = "") -> Callable[[Path], list[Page]]:
    """The loader for a folder: by the set's name when it is a loader's name, else from what it holds."""
    if name in LOADERS:
        return LOADERS[name]
    if (root / "ground-truth.json").exists():
        return load_aeb
    if (root / "test" / "test-pages").is_dir() or any(root.glob("*/expected.html")):
        return load_readability
    if (root / "tests" / "evaldata.json").exists():
        return load_trafilatura_eval
    raise SystemExit(f"{root}: no known evaluation-set layout; name the set as one of {sorted(LOADERS)}")


# ------------------------------------------------------------------------------------------------
# Extractors: each maps (html, url) -> body text
# ------------------------------------------------------------------------------------------------


def _ours(html: str, url: str) -> str:
    from forecast_env.corpus_build.extract import extract_page

    return extract_page(html, url, body_mode="own").body or ""


def _ours_no_fallback(html: str, url: str) -> str:
    from forecast_env.corpus_build.extract import extract_page

    return extract_page(html, url, use_trafilatura_fallback=False, body_mode="own").body or ""


def _ours_traf_body(html: str, url: str) -> str:
    from forecast_env.corpus_build.extract import extract_page

    return extract_page(html, url, body_mode="trafilatura").body or ""


def _mode(body_mode: str) -> Callable[[str, str], str]:
    def run(html: str, url: str) -> str:
        from forecast_env.corpus_build.extract import extract_page

        return extract_page(html, url, body_mode=body_mode).body or ""
    return run


def _ours_longer(html: str, url: str) -> str:
    from forecast_env.corpus_build.extract import extract_page

    return extract_page(html, url, body_mode="longer").body or ""


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
    "ours": ("ours: extract_page(body_mode='own') (body + title/summary/canonical/timestamp candidates)", _ours),
    "ours_no_fallback": ("ours without the trafilatura fallback", _ours_no_fallback),
    "ours_traf_body": ("extract_page(body_mode='trafilatura'): our parse for metadata, trafilatura's body",
                       _ours_traf_body),
    "ours_longer": ("extract_page(body_mode='longer'): ours and trafilatura's, the longer (x1.25) wins", _ours_longer),
    "ours_lean": ("extract_page(body_mode='lean'): trafilatura's steps without the readability comparison",
                  _mode("lean")),
    "ours_lean_noesc": ("extract_page(body_mode='lean-no-escalation'): also without the recall escalation",
                        _mode("lean-no-escalation")),
    "ours_cascade": ("extract_page(body_mode='cascade'): ours when trusted and little prose left out, else lean",
                     _mode("cascade")),
    "trafilatura": ("trafilatura.extract (default, no metadata)", _traf),
    "trafilatura_meta": ("trafilatura.bare_extraction(with_metadata=True)", _traf_meta),
    "resiliparse": ("resiliparse extract_plain_text(main_content=True)", _resiliparse),
    "readability": ("readability-lxml Document.summary", _readability),
    "justext": ("jusText (English stoplist)", _justext),
}
DEFAULT_EXTRACTORS = "ours,ours_no_fallback,trafilatura,trafilatura_meta,resiliparse,readability,justext"


_WS = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _WS.sub(" ", text or "").strip().lower()


@dataclass
class PageScore:
    """One page's precision / recall / F1 (token bag vs the full truth, or snippets where the set has
    only snippets) and its snippet rates (share of "with" found, of "without" present; None: none given)."""

    p: float
    r: float
    f: float
    with_rate: float | None
    without_rate: float | None


def score_page(page: Page, out: str) -> PageScore:
    """Score one extracted body against the page's ground truth."""
    text = _norm(out)
    w = [s for s in page.with_ if _norm(s)]
    wo = [s for s in page.without if _norm(s)]
    found = sum(_norm(s) in text for s in w)
    present = sum(_norm(s) in text for s in wo)
    with_rate = found / len(w) if w else None
    without_rate = present / len(wo) if wo else None
    if page.truth:
        p, r, f = prf(tokens(page.truth), tokens(out))
    else:  # snippet set: trafilatura's evaluation counts (found "with" = TP, present "without" = FP)
        p = found / (found + present) if found + present else (0.0 if w else 1.0)
        r = found / len(w) if w else 1.0
        f = 2 * p * r / (p + r) if p + r else 0.0
    return PageScore(p, r, f, with_rate, without_rate)


@dataclass
class Score:
    """A system's per-page scores on a set and its pages/s (CPU time of the extraction calls)."""

    pages: list[PageScore]
    pages_per_s: float

    def mean(self, attr: str, idx: list[int] | None = None) -> float | None:
        vals = [getattr(self.pages[i], attr) for i in (range(len(self.pages)) if idx is None else idx)]
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None


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
    return Score([score_page(pg, out) for pg, out in zip(pages, outs)], len(pages) / max(elapsed, 1e-9))


def english_mask(pages: list[Page], min_score: float = 0.65) -> list[bool]:
    """English pages by the corpus builder's own language test (fastText lid.176, >= 0.65) on the truth
    body, else on the snippets plus the page's visible text (snippets alone are too short)."""
    from forecast_env.corpus_build.langid import LanguageIdentifier

    texts = []
    for pg in pages:
        text = pg.truth
        if len(text) < 200:
            try:
                tree = lxml.html.fromstring(pg.html)
                for bad in tree.iter("script", "style", "noscript"):
                    bad.text = ""
                visible = tree.text_content()
            except Exception:
                visible = ""
            text = (pg.lang_text + " " + _WS.sub(" ", visible))[:5000]
        texts.append(_WS.sub(" ", text)[:5000])
    return [s >= min_score for s in LanguageIdentifier().english_scores(texts)]


def paired_bootstrap(a: list[float], b: list[float], reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of a - b and its 95% percentile interval over pages resampled with replacement (paired)."""
    import numpy as np

    d = np.asarray(a, float) - np.asarray(b, float)
    if d.size == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(reps, d.size))].mean(axis=1)
    return float(d.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=PATH", help="an evaluation set folder")
    ap.add_argument("--extractors", default=DEFAULT_EXTRACTORS, help=f"comma list of {', '.join(EXTRACTORS)}")
    ap.add_argument("--baseline", default="trafilatura",
                    help="the system the first extractor is compared with (paired bootstrap); must be listed")
    ap.add_argument("--kinds", default="article", help="page types kept from sets that label them (WCXB); 'all'")
    ap.add_argument("--worst", type=int, default=0, help="list the N lowest-F1 pages of the first extractor")
    ap.add_argument("--limit", type=int, default=0, help="only the first N pages of each set")
    ap.add_argument("--json", type=Path, default=None, help="write every row and comparison here")
    args = ap.parse_args(argv)
    specs = args.set or [s for s in os.environ.get("EXTRACT_EVAL_SETS", "").split(",") if s.strip()]
    if not specs:
        print("extract_quality: no evaluation sets given (--set NAME=PATH or $EXTRACT_EVAL_SETS); "
              "see the module docstring for where to get them. Skipped.")
        return
    names = [x.strip() for x in args.extractors.split(",") if x.strip()]
    unknown = [x for x in names if x not in EXTRACTORS]
    if unknown:
        raise SystemExit(f"unknown extractor(s) {unknown}; choose from {list(EXTRACTORS)}")
    base = args.baseline if args.baseline in names else None
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    rows, comps, worst_lines = [], [], []
    print("| set | lang | extractor | pages | precision | recall | F1 | pages F1 < 0.5 | with | without | pages/s |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for spec in specs:
        name, _, path = spec.partition("=")
        root = Path(path or name).expanduser()
        pages = detect_loader(root, name)(root)
        if args.kinds != "all":
            keep = set(args.kinds.split(","))
            pages = [pg for pg in pages if pg.kind in keep]
        if args.limit:
            pages = pages[: args.limit]
        en = english_mask(pages)
        scores = {ex: evaluate(pages, EXTRACTORS[ex][1]) for ex in names}
        subsets = {"all": list(range(len(pages))), "en": [i for i, e in enumerate(en) if e]}
        for lang, idx in subsets.items():
            if not idx:
                continue
            for ex in names:
                s = scores[ex]
                fails = sum(s.pages[i].f < 0.5 for i in idx)
                row = {"set": name, "lang": lang, "extractor": ex, "pages": len(idx), "precision": s.mean("p", idx),
                       "recall": s.mean("r", idx), "f1": s.mean("f", idx), "fails": fails,
                       "with": s.mean("with_rate", idx), "without": s.mean("without_rate", idx),
                       "pages_per_s": s.pages_per_s}
                rows.append(row)
                print(f"| {name} | {lang} | {ex} | {len(idx)} | {_fmt(row['precision'])} | {_fmt(row['recall'])} | "
                      f"{_fmt(row['f1'])} | {fails} | {_fmt(row['with'])} | {_fmt(row['without'])} | "
                      f"{s.pages_per_s:.1f} |", flush=True)
            for ex in (n for n in names if base and n != base):
                a, b = scores[ex], scores[base]
                comp = {"set": name, "lang": lang, "system": ex, "baseline": base, "pages": len(idx)}
                for attr in ("f", "r"):
                    comp[attr] = paired_bootstrap([a.pages[i].__dict__[attr] for i in idx],
                                                  [b.pages[i].__dict__[attr] for i in idx])
                comp["fails"] = (sum(a.pages[i].f < 0.5 for i in idx), sum(b.pages[i].f < 0.5 for i in idx))
                comp["speed_ratio"] = a.pages_per_s / b.pages_per_s
                comps.append(comp)
        if args.worst:
            s = scores[names[0]]
            for i in sorted(range(len(pages)), key=lambda i: s.pages[i].f)[: args.worst]:
                worst_lines.append(f"{name} {pages[i].key} F1={s.pages[i].f:.3f}")
    if comps:
        print(f"\n| set | lang | system | pages | system - {base}: F1 (95% CI) | recall (95% CI) | pages F1 < 0.5 | "
              "speed ratio | goal met |")
        print("|---|---|---|---:|---|---|---:|---:|---|")
        for c in comps:
            ok = c["f"][1] >= -0.01 and c["r"][1] >= -0.01 and c["fails"][0] <= c["fails"][1]
            print(f"| {c['set']} | {c['lang']} | {c['system']} | {c['pages']} | {c['f'][0]:+.3f} [{c['f'][1]:+.3f}, {c['f'][2]:+.3f}] | "
                  f"{c['r'][0]:+.3f} [{c['r'][1]:+.3f}, {c['r'][2]:+.3f}] | {c['fails'][0]} vs {c['fails'][1]} | "
                  f"{c['speed_ratio']:.2f}x | {'yes' if ok else 'no'} |")
    if worst_lines:
        print(f"\nlowest F1 ({names[0]}):")
        print("\n".join(worst_lines))
    print("\nextractors: " + "; ".join(f"{n} = {EXTRACTORS[n][0]}" for n in names))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "comparisons": comps}, indent=1))


if __name__ == "__main__":
    main()
