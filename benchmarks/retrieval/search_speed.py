"""Retrieval benchmark: as-of BM25 vs rank_bm25 / bm25s, date-restricted dense vs a raw FAISS scan,
hybrid latency, index build time, private memory at two corpus sizes.

    .venv/bin/python -m benchmarks.retrieval.search_speed --sizes 100000 1000000

Synthetic corpus: docs of ~75 words drawn from a Zipfian vocabulary of 50k words over 120 days, random
unit vectors (d=384) for the dense side (the dense index depends on the model only through vectors).
Each size is built in one subprocess and searched in another, so memory is that of a searcher only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks import child_env, module_command

DIM = 384
VOCAB_SIZE = 50_000
DAYS = 120
START = date(2025, 3, 1)


def words(n: int) -> np.ndarray:
    return np.array([f"w{i}" for i in range(n)])


def zipf_probs(n: int) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** 1.07
    return p / p.sum()


def write_corpus(root: Path, n: int, seed: int = 0) -> None:
    from forecast_env import schema
    from forecast_env.store import Workspace, atomic_write_table

    rng = np.random.default_rng(seed)
    vocab = words(VOCAB_SIZE)
    days = np.sort(rng.integers(0, DAYS, n))
    toks = vocab[rng.choice(VOCAB_SIZE, size=(n, 75), p=zipf_probs(VOCAB_SIZE))]
    bodies = [" ".join(r) for r in toks]
    ids = [f"{i:016x}" for i in range(n)]
    ws = Workspace.at(root, create=True)
    day_dates = [START + timedelta(days=int(d)) for d in days]
    months = np.array([d.strftime("%Y-%m") for d in day_dates])
    leak = rng.random(n) < 0.01
    for m in np.unique(months):
        idx = np.flatnonzero(months == m)
        t = pa.table({"doc_id": [ids[i] for i in idx], "title": [bodies[i][:40] for i in idx],
                      "summary": [""] * len(idx), "body": [bodies[i] for i in idx],
                      "url": [f"u{i}" for i in idx], "day": [day_dates[i] for i in idx],
                      "leak_flag": leak[idx]})
        atomic_write_table(ws.articles_dir / f"{m}.parquet", t, schema.ARTICLES)


class RandomVectors:
    """Unit vectors from a hash of the text (documents and queries): fast, deterministic."""

    name = "bench-random-vectors"

    def encode_documents(self, texts, progress=False):
        rng = np.random.default_rng(len(texts))
        v = rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def encode_queries(self, texts):
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.array(out)


def private_memory() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        key, _, val = line.partition(":")
        if key in ("Rss", "Private_Clean", "Private_Dirty", "Anonymous", "Shared_Clean"):
            out[key] = int(val.split()[0]) / 1024
    return out


def queries(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = words(VOCAB_SIZE)
    # mid-frequency terms (ranks 20..5000), as real queries use
    return [" ".join(vocab[rng.integers(20, 5000, 4)]) for _ in range(n)]


def pct(xs: list[float]) -> str:
    a = np.array(xs) * 1000
    return f"p50 {np.percentile(a, 50):.2f} ms, p95 {np.percentile(a, 95):.2f} ms"


def timed(fn, items) -> list[float]:
    out = []
    for it in items:
        t0 = time.perf_counter()
        fn(it)
        out.append(time.perf_counter() - t0)
    return out


def run_build(root: Path, n: int) -> dict:
    from forecast_env.corpus_build.index import build_index

    t0 = time.perf_counter()
    write_corpus(root, n)
    t1 = time.perf_counter()
    summary = build_index(root, progress=False, embedder=RandomVectors())
    return {"write_store_s": round(t1 - t0, 1), "build_index_s": round(time.perf_counter() - t1, 1),
            "postings": summary["bm25_postings"], "terms": summary["bm25_terms"]}


def run_search(root: Path, n: int, compare: bool) -> dict:
    import faiss

    from forecast_env.retrieval import Searcher
    from forecast_env.retrieval.tokenize import tokenize

    res: dict = {"n": n, "memory_mb_before_open": round(private_memory()["Anonymous"], 1)}
    t0 = time.perf_counter()
    s = Searcher.open(root, embedder=RandomVectors())
    res["open_s"] = round(time.perf_counter() - t0, 3)
    qs = queries(200)
    last, mid = s.last_day, s.first_day + (s.last_day - s.first_day) / 2
    s.search(qs[0], last, mode="bm25")
    res["bm25_full"] = pct(timed(lambda q: s.search(q, last, k=10, mode="bm25"), qs))
    res["bm25_mid"] = pct(timed(lambda q: s.search(q, mid, k=10, mode="bm25"), qs))
    res["bm25_core_full"] = pct(timed(lambda q: s.bm25.score(tokenize(q), len(s.days), 10), qs))
    res["hybrid_full"] = pct(timed(lambda q: s.search(q, last, k=10, mode="hybrid"), qs[:100]))
    vis_rows = np.flatnonzero(s.visible)
    doc_ids = [s._row_fields(int(r), ("doc_id",))["doc_id"] for r in np.random.default_rng(0).choice(vis_rows, 200)]
    res["open_article"] = pct(timed(lambda d: s.open_article(d, last), doc_ids))
    res["memory_mb"] = {k: round(v, 1) for k, v in private_memory().items()}
    # dense: date-restricted (half the corpus) vs a raw in-RAM faiss scan of the same eligible rows
    hi = s._prefix_end(mid)
    qv = RandomVectors().encode_queries(qs[:50])
    eligible = np.flatnonzero(s.visible[:hi])
    raw = faiss.IndexFlatIP(DIM)
    for m, ix in enumerate(s.dense.indexes):  # copy the eligible rows out of the shards
        off = s.dense.offsets[m]
        sel = eligible[(eligible >= off) & (eligible < s.dense.offsets[m + 1])] - off
        if len(sel):
            xb = faiss.rev_swig_ptr(ix.get_xb(), ix.ntotal * DIM).reshape(ix.ntotal, DIM)
            raw.add(np.ascontiguousarray(xb[sel]))
    for _ in range(2):
        s.dense.search(qv[:1], 0, hi, 10)
        raw.search(qv[:1], 10)
    res["dense_restricted"] = pct(timed(lambda q: s.dense.search(q[None], 0, hi, 10), qv))
    res["dense_raw_faiss_same_rows"] = pct(timed(lambda q: raw.search(q[None], 10), qv))
    raw.reset()  # free the copy before the comparisons
    if compare:
        import bm25s
        from rank_bm25 import BM25Okapi

        texts = []
        for m in range(len(s.months)):
            t = s._text(m)
            texts += t.column("body").to_pylist()
        corpus = [tokenize(t) for t in texts]
        t0 = time.perf_counter()
        retriever = bm25s.BM25(k1=1.2, b=0.75)
        retriever.index(corpus, show_progress=False)
        res["bm25s_index_s"] = round(time.perf_counter() - t0, 1)
        res["bm25s"] = pct(timed(lambda q: retriever.retrieve([tokenize(q)], k=10, show_progress=False,
                                                             n_threads=1), qs))
        if n <= 200_000:
            ok = BM25Okapi(corpus, k1=1.2, b=0.75)
            res["rank_bm25_get_scores"] = pct(timed(lambda q: np.argpartition(-ok.get_scores(tokenize(q)), 10)[:10],
                                                    qs[:20]))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--compare-up-to", type=int, default=1_000_000, help="run bm25s/rank_bm25 up to this size")
    ap.add_argument("--child", nargs=3, metavar=("ACTION", "ROOT", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        action, root, n = args.child
        n = int(n)
        out = run_build(Path(root), n) if action == "build" else run_search(Path(root), n, action == "search+compare")
        print(json.dumps(out))
        return
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="bench_retrieval_") as tmp:
            for action in ("build", "search+compare" if n <= args.compare_up_to else "search"):
                out = subprocess.run(module_command("benchmarks.retrieval.search_speed", "--child", action, tmp, str(n)),
                                     capture_output=True, text=True, check=False, env=child_env())
                if out.returncode:
                    print(out.stderr, file=sys.stderr)
                    sys.exit(1)
                print(f"n={n} {action}: {out.stdout.strip()}", flush=True)


if __name__ == "__main__":
    main()
