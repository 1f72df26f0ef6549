"""Audit check 3: retrieval never returns the future (docs/design.md §8 check 3, rules of §2-§3).

Ground truth is the article store (`WS/corpus/articles`), not the index's own copies:
* `future_hits`: random (query, date) probes through `Searcher.search` (BM25 text queries, and
  hybrid ones when a query encoder loads) and `Searcher.search_vectors`; a hit whose store day is
  after the date, or whose doc id the store does not hold, is a violation; `open_article` of an
  article dated after the probe date must be refused (`future_opens`).
* `prefix_bm25` / `prefix_dense`: on sampled days D, BM25 (document count, frequencies, average
  length) and exact dense search are rebuilt here from the store's articles visible by D (dense from
  the vectors cached in the index shards) and must give the served top-k ids and scores.
* `dedup_backwards`: every duplicate suppression points to an article visible earlier (visibility
  time, then crawl time, then doc id), looked up among every article before dedup.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any, cast

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from forecast_env.eval.audit.inputs import FAIL, INCONCLUSIVE, PASS, AuditInputs, AuditSettings, CheckResult

#: Columns that order articles by visibility, first present wins (`t` in stores built before v(d)).
VISIBILITY_COLUMNS = ("visible_at", "t_visible", "v", "t")
#: Store columns whose true value hides an article from search when the Searcher hides flagged ones.
HIDE_COLUMNS = ("leak_flag", "market_quote")


def _store(ws_articles: Sequence[Path]) -> pl.DataFrame:
    cols = ["doc_id", "day", "title", "summary", "body", *HIDE_COLUMNS]
    frames = []
    for p in ws_articles:
        names = pq.read_schema(p).names
        df = pl.read_parquet(p, columns=[c for c in cols if c in names])
        for c in HIDE_COLUMNS:
            if c not in df.columns:
                df = df.with_columns(pl.lit(False).alias(c))
        frames.append(df.select(cols))
    if not frames:
        return pl.DataFrame(schema={"doc_id": pl.String, "day": pl.Date})
    return pl.concat(frames).sort(["day", "doc_id"])


class _Reference:
    """BM25 and exact dense search recomputed from the store's articles (independent of the index)."""

    def __init__(self, store: pl.DataFrame, hide: Sequence[str], k1: float, b: float, vectors: np.ndarray | None):
        from forecast_env.corpus_build.embed import article_texts
        from forecast_env.retrieval.tokenize import tokenize

        self.doc_ids = store["doc_id"].to_list()
        self.days = store["day"].to_numpy()
        hidden = np.zeros(store.height, bool)
        for c in hide:
            hidden |= store[c].fill_null(False).to_numpy().astype(bool)
        self.visible = ~hidden
        self.k1, self.b = k1, b
        self.tokens = [tokenize(t) for t in article_texts(store.select("title", "summary", "body").to_arrow())]
        self.doclen = np.array([len(t) for t in self.tokens], dtype=np.float64)
        self.tf = [Counter(t) for t in self.tokens]
        post: dict[str, list[int]] = {}
        for i, tf in enumerate(self.tf):
            for term in tf:
                post.setdefault(term, []).append(i)
        self.postings = {t: np.asarray(v, dtype=np.int64) for t, v in post.items()}
        self.vectors = vectors

    def eligible(self, d: date) -> np.ndarray:
        return (self.days <= np.datetime64(d)) & self.visible

    def bm25(self, tokens: list[str], d: date, k: int) -> tuple[list[str], np.ndarray]:
        elig = self.eligible(d)
        n = int(elig.sum())
        if n == 0 or not tokens:
            return [], np.zeros(0)
        avgdl = float(self.doclen[elig].sum()) / n
        scores: dict[int, float] = {}
        for term, w in Counter(tokens).items():
            rows = self.postings.get(term)
            if rows is None:
                continue
            rows = rows[elig[rows]]
            if not len(rows):
                continue
            df = len(rows)
            idf = math.log1p((n - df + 0.5) / (df + 0.5))
            for r in rows.tolist():
                tf = self.tf[r][term]
                s = w * idf * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * self.doclen[r] / avgdl))
                scores[r] = scores.get(r, 0.0) + s
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        return [self.doc_ids[r] for r, _ in ranked], np.array([s for _, s in ranked])

    def dense(self, q: np.ndarray, d: date, k: int) -> tuple[list[str], np.ndarray]:
        assert self.vectors is not None
        rows = np.flatnonzero(self.eligible(d))
        if not len(rows):
            return [], np.zeros(0)
        s = self.vectors[rows] @ q.astype(np.float32)
        order = np.lexsort((rows, -s))[:k]
        return [self.doc_ids[int(rows[i])] for i in order], s[order].astype(np.float64)


def cached_vectors(index_dir: Path, months: Sequence[dict[str, Any]]) -> np.ndarray | None:
    """Every article vector stored in the exact month shards, in global row order (None when a shard
    cannot be read back)."""
    import faiss

    from forecast_env.retrieval.layout import IndexLayout

    layout = IndexLayout(index_dir)
    parts = []
    for m in months:
        try:
            idx = faiss.read_index(str(layout.dense(m["month"])))
            parts.append(idx.reconstruct_n(0, idx.ntotal) if idx.ntotal else np.zeros((0, idx.d), np.float32))
        except Exception:
            return None
    return np.vstack(parts).astype(np.float32) if parts else None


def _same(ids_a: list[str], s_a: np.ndarray, ids_b: list[str], s_b: np.ndarray, tol: float) -> bool:
    if ids_a != ids_b:
        # equal scores may swap places only at a tie; compare as sets of (id, rounded score) then
        if len(ids_a) != len(ids_b) or not np.allclose(np.sort(s_a), np.sort(s_b), rtol=tol, atol=tol):
            return False
        return _tie_swap_only(ids_a, s_a, ids_b, s_b, tol)
    return bool(np.allclose(s_a, s_b, rtol=tol, atol=tol))


def _tie_swap_only(ids_a: list[str], s_a: np.ndarray, ids_b: list[str], s_b: np.ndarray, tol: float) -> bool:
    """Different orders that only permute equal scores (within `tol`) and only at the last tied score."""
    for i, (x, y) in enumerate(zip(ids_a, ids_b)):
        if x != y and not math.isclose(float(s_a[i]), float(s_b[i]), rel_tol=tol, abs_tol=tol):
            return False
    last = float(s_a[-1])
    diff = {x for x in ids_a if x not in ids_b} | {y for y in ids_b if y not in ids_a}
    return all(math.isclose(float(s_a[ids_a.index(x)] if x in ids_a else s_b[ids_b.index(x)]), last,
                            rel_tol=tol, abs_tol=tol) for x in diff)


def _searcher_hidden(s: Any) -> tuple[str, ...]:
    """The article flags the searcher hides (`Searcher.hidden`), as store column names."""
    flags = getattr(s, "hidden", None)
    if isinstance(flags, (tuple, list)):
        return tuple(str(f) for f in flags)
    return HIDE_COLUMNS if getattr(s, "hide", False) else ()


def _dedup_rows(ws_root: Path) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(dedup drops with doc_id/dup_of, every pre-dedup article's ordering key) from the corpus."""
    dropped_dir = ws_root / "corpus" / "dropped"
    drops = [pl.read_parquet(p, columns=["doc_id", "reason", "dup_of", "stage"]) for p in sorted(dropped_dir.glob("*.parquet"))]
    dd = pl.concat(drops).filter(pl.col("stage") == "dedup") if drops else pl.DataFrame()
    parts = sorted((ws_root / "corpus" / "parts").glob("*.articles.parquet"))
    if not parts:
        return dd, None
    frames = []
    for p in parts:
        names = pq.read_schema(p).names
        vis = next((c for c in VISIBILITY_COLUMNS if c in names), None)
        if vis is None:
            continue
        frames.append(pl.read_parquet(p, columns=["doc_id", "day", "t_crawl", vis]).rename({vis: "visible"}))
    keys = pl.concat(frames, how="vertical_relaxed").unique("doc_id", keep="first") if frames else None
    return dd, keys


def check_retrieval(inputs: AuditInputs, settings: AuditSettings, progress: bool = False) -> CheckResult:
    """Check 3 (see the module docstring)."""
    from forecast_env.errors import ArticleUnavailableError, ForecastEnvError

    ws = inputs.workspace
    s = inputs.searcher()
    hidden_flags = _searcher_hidden(s)
    store = _store(ws.article_shards())
    if store.height == 0:
        return CheckResult("retrieval", INCONCLUSIVE, "the article store is empty: nothing to probe")
    rng = np.random.default_rng(settings.seed)
    true_day = dict(zip(store["doc_id"].to_list(), store["day"].to_list()))
    first: date = cast(date, store["day"].min())
    last: date = cast(date, store["day"].max())
    span = (last - first).days
    counts: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []

    def violation(name: str, **ex: Any) -> None:
        counts[name] += 1
        if sum(1 for e in examples if e["violation"] == name) < 5:
            examples.append({"violation": name, **ex})

    # query texts: question texts of the audited events and titles of random articles
    questions = inputs.split_events["question"].to_list()
    titles = [t for t in store["title"].to_list() if t]
    vectors = cached_vectors(s.index_dir, s.months)
    if vectors is not None and len(vectors) != store.height:
        violation("index_rows", index_rows=len(vectors), store_rows=store.height)
        vectors = None

    # (a) random (query, date) probes
    n_hits = 0
    hybrid_ok = settings.encoder
    hybrid_error: str | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(settings.probes):
            d = first + timedelta(days=int(rng.integers(-5, span + 6)))
            pool = questions if (i % 2 == 0 and questions) else titles
            q = str(pool[int(rng.integers(0, len(pool)))]) if pool else "news"
            mode = "bm25"
            if i % 10 == 9 and hybrid_ok:
                mode = "hybrid"
            try:
                hits = s.search(q, d, k=settings.k, mode=mode)
            except ForecastEnvError:
                raise
            except Exception as exc:  # no query encoder here: BM25 and vector probes still run
                if mode != "hybrid":
                    raise
                hybrid_ok = False
                hybrid_error = f"{type(exc).__name__}: {str(exc)[:200]}"
                examples.append({"note": f"hybrid probes skipped: {hybrid_error}"})
                hits = s.search(q, d, k=settings.k, mode="bm25")
            if vectors is not None and i % 2 == 1:
                v = np.asarray(rng.standard_normal(vectors.shape[1]), dtype=np.float32)
                hits = hits + s.search_vectors(v / np.linalg.norm(v), d, k=settings.k)[0]
            for h in hits:
                n_hits += 1
                td = true_day.get(h.doc_id)
                if td is None:
                    violation("unknown_hit", query=q, as_of=d, doc_id=h.doc_id)
                elif td > d:
                    violation("future_hits", query=q, as_of=d, doc_id=h.doc_id, day=td, mode=mode)
        # open_article of a later article must be refused
        ids = store["doc_id"].to_list()
        n_opens = 0
        for _ in range(settings.probes // 4):
            j = int(rng.integers(0, len(ids)))
            if true_day[ids[j]] <= first:
                continue
            d = true_day[ids[j]] - timedelta(days=int(rng.integers(1, 30)))
            n_opens += 1
            try:
                s.open_article(ids[j], d)
            except ArticleUnavailableError:
                continue
            violation("future_opens", doc_id=ids[j], day=true_day[ids[j]], as_of=d)

    # (b) prefix invariance on sampled days
    ref = _Reference(store, hidden_flags, float(s.retrieval["bm25_k1"]), float(s.retrieval["bm25_b"]), vectors)
    days = sorted({first + timedelta(days=int(x)) for x in rng.integers(0, span + 1, size=settings.probe_days)})
    n_bm25 = n_dense = 0
    tol = settings.score_tolerance
    from forecast_env.retrieval.tokenize import tokenize

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for d in days:
            elig = np.flatnonzero(ref.eligible(d))
            for _ in range(settings.queries_per_day):
                if len(elig) and titles:
                    src = int(elig[int(rng.integers(0, len(elig)))])
                    toks = ref.tokens[src][: 4 + int(rng.integers(0, 6))]
                    q = " ".join(toks) if toks else "news"
                else:
                    q = "news"
                served = s.search(q, d, k=settings.k, mode="bm25")
                r_ids, r_s = ref.bm25(tokenize(q), d, settings.k)
                n_bm25 += 1
                if not _same([h.doc_id for h in served], np.array([h.score for h in served]), r_ids, r_s, tol):
                    violation("prefix_bm25", day=d, query=q, served=[h.doc_id for h in served][:5],
                              rebuilt=r_ids[:5])
                if vectors is not None:
                    if len(elig) and rng.random() < 0.5:
                        qv = vectors[int(elig[int(rng.integers(0, len(elig)))])]
                    else:
                        qv = np.asarray(rng.standard_normal(vectors.shape[1]), dtype=np.float32)
                        qv /= np.linalg.norm(qv)
                    served_v = s.search_vectors(qv, d, k=settings.k)[0]
                    rv_ids, rv_s = ref.dense(qv, d, settings.k)
                    n_dense += 1
                    if not _same([h.doc_id for h in served_v], np.array([h.score for h in served_v]),
                                 rv_ids, rv_s, max(tol, 1e-4)):
                        violation("prefix_dense", day=d, served=[h.doc_id for h in served_v][:5],
                                  rebuilt=rv_ids[:5])

    # (c) dedup suppressions point back in time
    dd, keys = _dedup_rows(ws.root)
    n_dedup = dd.height if dd.height else 0
    unresolved = 0
    if n_dedup and keys is not None:
        kd = {r[0]: r[1:] for r in keys.select("doc_id", "visible", "t_crawl", "day").iter_rows()}
        for doc, partner, reason in dd.select("doc_id", "dup_of", "reason").iter_rows():
            if doc == partner:  # the same WARC record read twice: not an ordering question
                continue
            a, b = kd.get(doc), kd.get(partner)
            if a is None or b is None:
                unresolved += 1
                continue
            ka = (a[0], a[1], doc)
            kb = (b[0], b[1], partner)
            if _key_lt(ka, kb) or b[2] > a[2]:
                violation("dedup_backwards", doc_id=doc, dup_of=partner, reason=reason,
                          doc_visible=a[0], dup_of_visible=b[0])
    figures: dict[str, Any] = {
        "articles": store.height, "first_day": first, "last_day": last, "hidden_flags": list(hidden_flags),
        "probes": settings.probes, "probe_hits": n_hits, "hybrid_probes": hybrid_ok, "open_probes": n_opens,
        "prefix_days": [str(d) for d in days], "prefix_bm25_queries": n_bm25, "prefix_dense_queries": n_dense,
        "dedup_suppressions": n_dedup, "dedup_unresolved": unresolved,
        "dense_vectors": "index shards" if vectors is not None else "unavailable",
    }
    for name in ("future_hits", "unknown_hit", "future_opens", "prefix_bm25", "prefix_dense", "dedup_backwards",
                 "index_rows"):
        figures[name] = counts.get(name, 0)
    failures = [f"{k}: {v}" for k, v in sorted(counts.items()) if v]
    if failures:
        return CheckResult("retrieval", FAIL, f"{sum(counts.values())} violation(s): {', '.join(failures)}",
                           figures, failures, examples)
    if vectors is None or (n_dedup and keys is None) or hybrid_error:
        if vectors is None:
            what = "the dense shards could not be read back"
        elif hybrid_error:
            what = f"hybrid search (encoder=true) failed: {hybrid_error}"
        else:
            what = "the pre-dedup parts are gone (corpus/parts), so dedup partners cannot be dated"
        return CheckResult("retrieval", INCONCLUSIVE, f"no violation found, but {what}", figures, [], examples)
    return CheckResult("retrieval", PASS,
                       f"{settings.probes} probes ({n_hits} hits) never past the date; BM25 ({n_bm25}) and dense "
                       f"({n_dense}) rebuilt from the visible articles on {len(days)} days agree; "
                       f"{n_dedup} dedup suppressions all point back in time", figures, [], examples)


def _key_lt(a: tuple, b: tuple) -> bool:
    """Whether ordering key `a` sorts strictly before `b` (None last, like the build)."""
    for x, y in zip(a, b):
        if x == y:
            continue
        if x is None:
            return False
        if y is None:
            return True
        return x < y
    return False
