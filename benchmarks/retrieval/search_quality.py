"""Retrieval quality per embedding backend on a sample world: recall@10 and nDCG@10 of dense, BM25 and
hybrid search, using the world's truth (which articles were written about which event).

    .venv/bin/python -m benchmarks.retrieval.search_quality --world tiny_world --workspace tiny_ws \\
        --backends torch,onnx,onnx-int8,static [--vectors DIR]

For each kept event, the query is the event's question (its title), asked as of two days: the middle
of the event's window and its close day. Relevant: the articles in the store that truth.json says
were written about that event and are visible by the date (the date restriction applies to both).
recall@10 is capped (`|relevant in top 10| / min(10, |relevant|)`, BEIR's R_cap@10), nDCG@10 uses
binary gains. Each backend gets its own index over the same article store (BM25 does not depend on
the backend). `--vectors DIR` takes each backend's document and query vectors from `DIR/<backend>.npz`
(written by `benchmarks/retrieval/embedding_backends.py --dump` over the same store, e.g. on a faster machine) instead of
embedding here.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import warnings
from datetime import date
from pathlib import Path

import numpy as np

from forecast_env.enums import SEARCH_MODES

SPECS = {"torch": {"backend": "torch"}, "onnx": {"backend": "onnx", "quantize": None},
         "onnx-int8": {"backend": "onnx", "quantize": "int8"},
         "onnx-int8-static": {"backend": "onnx", "quantize": "int8-static"}, "static": {"backend": "static"}}


class LookupEmbedder:
    """Vectors computed elsewhere, looked up by text (documents) or query string."""

    def __init__(self, name: str, texts: list[str], docs: np.ndarray, queries: list[str], qvecs: np.ndarray):
        self.name = f"precomputed-{name}"
        self.docs = {t: docs[i] for i, t in enumerate(texts)}
        self.qs = {q: qvecs[i] for i, q in enumerate(queries)}
        self.dim = docs.shape[1]

    def encode_documents(self, texts, progress=False) -> np.ndarray:
        return np.stack([self.docs[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def encode_queries(self, texts) -> np.ndarray:
        return np.stack([self.qs[t] for t in texts])


def store_texts(ws: Path) -> list[str]:
    import pyarrow.parquet as pq

    from forecast_env.corpus_build.embed import article_texts

    texts: list[str] = []
    for shard in sorted((ws / "corpus" / "articles").glob("*.parquet")):
        texts += article_texts(pq.read_table(shard))
    return texts


def judgments(ws: Path, truth: dict) -> list[tuple[str, date, set[str]]]:
    """(query, as_of, relevant doc ids visible by as_of) per kept event and date."""
    import polars as pl

    store = pl.read_parquet(sorted((ws / "corpus" / "articles").glob("*.parquet")), columns=["doc_id", "url", "day"])
    event_of = {url: a.get("event_id") for url, a in truth["articles"].items()}
    store = store.with_columns(pl.col("url").replace_strict(event_of, default=None).alias("event_id"))
    out = []
    for eid, ev in sorted(truth["events"].items()):
        if ev.get("expect") != "keep":
            continue
        arts = store.filter(pl.col("event_id") == eid)
        start, close = date.fromisoformat(ev["start_day"]), date.fromisoformat(ev["close_day"])
        for as_of in (start + (close - start) / 2, close):
            rel = set(arts.filter(pl.col("day") <= as_of)["doc_id"].to_list())
            if rel:
                out.append((ev["title"], as_of, rel))
    return out


def metrics(hits: list[str], rel: set[str], k: int = 10) -> tuple[float, float]:
    found = [1.0 if h in rel else 0.0 for h in hits[:k]]
    recall = sum(found) / min(k, len(rel))
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(found))
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(rel))))
    return recall, dcg / ideal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=Path, required=True, help="the sample world folder (truth.json)")
    ap.add_argument("--workspace", type=Path, required=True, help="a workspace with the world's corpus built")
    ap.add_argument("--backends", default="onnx-int8,static")
    ap.add_argument("--vectors", type=Path, default=None)
    ap.add_argument("--queries-file", type=Path, default=None, help="the query list used with --dump")
    args = ap.parse_args()
    from forecast_env.config import load_config
    from forecast_env.corpus_build.index import build_index
    from forecast_env.retrieval import Searcher

    truth = json.loads((args.world / "truth.json").read_text())
    judged = judgments(args.workspace, truth)
    print(f"{len(judged)} (query, date) pairs over {len({q for q, _, _ in judged})} events; "
          f"{np.mean([len(r) for _, _, r in judged]):.1f} relevant articles each on average")
    texts = store_texts(args.workspace) if args.vectors else []
    rows = []
    for name in args.backends.split(","):
        with tempfile.TemporaryDirectory(prefix=f"quality_{name}_") as tmp:
            ws = Path(tmp)
            (ws / "corpus").symlink_to((args.workspace / "corpus").resolve())
            cfg = load_config("corpus")
            cfg["embed"].update(SPECS[name])
            embedder = None
            if args.vectors:
                data = np.load(args.vectors / f"{name}.npz")
                queries = json.loads(args.queries_file.read_text())
                embedder = LookupEmbedder(name, texts, data["docs"], queries, data["queries"])
            build_index(ws, cfg, progress=False, embedder=embedder)
            s = Searcher.open(ws, cfg, embedder=embedder)
            for mode in SEARCH_MODES:
                rec, ndcg = [], []
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for query, as_of, rel in judged:
                        hits = [h.doc_id for h in s.search(query, as_of, k=10, mode=mode)]
                        r, n = metrics(hits, rel)
                        rec.append(r)
                        ndcg.append(n)
                rows.append((name, mode, float(np.mean(rec)), float(np.mean(ndcg))))
                print(f"{name:10} {mode:7} recall@10 {np.mean(rec):.3f}  nDCG@10 {np.mean(ndcg):.3f}", flush=True)
            s.close()
    print("\n| backend | mode | recall@10 | nDCG@10 |\n|---|---|---:|---:|")
    for name, mode, r, n in rows:
        print(f"| {name} | {mode} | {r:.3f} | {n:.3f} |")


if __name__ == "__main__":
    main()
