"""Embedding throughput (articles/s) of the default model on CPU: batches in corpus order vs one
length-sorted call, and the ONNX backend when `optimum[onnxruntime]` is importable.

    .venv/bin/python benchmarks/bench_embed.py --n 200
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def articles(n: int, seed: int = 0) -> list[str]:
    """News-like texts of very uneven length (60..900 words), as in a real month shard."""
    rng = np.random.default_rng(seed)
    words = ["the", "senate", "vote", "on", "the", "budget", "bill", "was", "delayed", "again", "as", "lawmakers", "argued", "over", "spending", "hurricane", "season", "forecasters", "warned", "coastal", "towns", "of", "flooding", "and", "storm", "surge", "while", "the", "central", "bank", "held", "rates", "steady", "citing", "inflation", "and", "a", "slowing", "labour", "market"]
    return [" ".join(rng.choice(words, int(rng.integers(60, 900)))) for _ in range(n)]


def rate(fn, texts) -> float:
    t0 = time.perf_counter()
    fn(texts)
    return len(texts) / (time.perf_counter() - t0)


def main() -> None:
    from forecast_env.retrieval.dense import Embedder

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-seq-length", type=int, default=256)
    args = ap.parse_args()
    texts = articles(args.n)
    emb = Embedder(batch_size=args.batch_size, max_seq_length=args.max_seq_length)
    emb.encode_documents(texts[:8])  # load + warm up
    print(f"cpu threads: {os.cpu_count()}, n={args.n}, max_seq_length={args.max_seq_length}")

    # a single call sorts by length across the whole input; per-batch calls sort only within a batch
    print(f"torch, length-sorted (default path): {rate(emb.encode_documents, texts):.1f} articles/s")
    small = Embedder(batch_size=8, max_seq_length=args.max_seq_length)
    small._model = emb.model

    def corpus_order(ts):
        for i in range(0, len(ts), 8):
            small.encode_documents(ts[i:i + 8])

    print(f"torch, batches of 8 in corpus order:  {rate(corpus_order, texts):.1f} articles/s")
    try:
        onnx = Embedder(batch_size=args.batch_size, max_seq_length=args.max_seq_length, backend="onnx")
        onnx.encode_documents(texts[:8])
        a = onnx.encode_documents(texts[:16])
        b = emb.encode_documents(texts[:16])
        print(f"onnx (max |diff| vs torch {np.abs(a - b).max():.1e}): {rate(onnx.encode_documents, texts):.1f} articles/s")
    except Exception as exc:
        print(f"onnx backend unavailable: {type(exc).__name__}: {str(exc)[:160]}")


if __name__ == "__main__":
    main()
