"""Search throughput for many sessions (issue 23 item 5): one search at a time vs `Searcher.search_many`
vs concurrent clients through `BatchedSearcher`, same queries at different dates, identical hits required.

    .venv/bin/python -m benchmarks.retrieval.batched_search --root /work/scale/1m --queries 600

ROOT is a scale store built by benchmarks/retrieval/index_at_scale.py (`build --root /work/scale/1m --rows 1000000 --months 10`:
static vectors, float16 exact shards, IVF months). Queries are index_at_scale's (2-4 words of one story and
its section), each at its own random date in the corpus. For each mode:

- one at a time: `search(q, d)` in a loop; searches/s = queries / wall time, latency per search;
- batched: `search_many` over consecutive chunks of `--batch` (q, d) pairs; a query's latency is its
  batch's (it waits for the whole batch);
- clients: `--clients` threads each searching its share, through one plain shared Searcher and through
  a BatchedSearcher (what a server does with concurrent sessions);

and every batched and client answer is compared with the one-at-a-time answer: doc ids and float scores
bit for bit (`mismatches` must be 0). The one-at-a-time loop runs twice (the first pass warms the
memory-mapped pages) and the second is reported; the others run once, after it. The query-vector cache is off
(every search embeds its query).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np


def key(hits: list[Any]) -> list[tuple[str, str]]:
    return [(h.doc_id, float(h.score).hex()) for h in hits]


def pct(lat: list[float]) -> dict[str, float]:
    a = np.asarray(lat) * 1000
    return {"p50_ms": round(float(np.median(a)), 2), "p99_ms": round(float(np.percentile(a, 99)), 2)}


def cpu(c0: float, n: int) -> dict[str, float]:
    """CPU seconds of this process (all its threads) per search, and searches per CPU second: on a shared
    machine the wall-clock rates move with the other processes' load, these much less."""
    spent = time.process_time() - c0
    return {"cpu_ms_per_search": round(spent / n * 1000, 2), "searches_per_cpu_s": round(n / spent, 1) if spent else 0.0}


def measure(root: Path, n: int, batch: int, clients: int, modes: list[str]) -> dict[str, Any]:
    from benchmarks.retrieval import index_at_scale
    from forecast_env.config import load_config
    from forecast_env.retrieval import Searcher
    from forecast_env.retrieval.batcher import BatchedSearcher

    warnings.simplefilter("ignore")
    cfg = load_config("corpus")
    cfg["embed"]["query_cache_size"] = 0  # every search embeds its query, as a new query does
    searcher = Searcher.open(root / "ws", cfg)
    model = index_at_scale.TextModel.from_static_model()
    rng = np.random.default_rng([index_at_scale.SEED, 23])
    qs = model.queries(rng, n)
    first, last = searcher.first_day, searcher.last_day
    days = [first + timedelta(days=int(d)) for d in rng.integers(0, (last - first).days + 1, size=n)]
    out: dict[str, Any] = {"articles": int(searcher.offsets[-1]), "months": len(searcher.months),
                           "ivf_months": sum(m.get("kind") == "ivf" for m in searcher.months),
                           "float16": bool(searcher.manifest.get("embedding", {}).get("float16",
                                           cfg["embed"].get("float16"))),
                           "search_threads": searcher.threads, "cpus": len(os.sched_getaffinity(0)),
                           "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "queries": n, "batch": batch,
                           "clients": clients, "modes": {}}
    for mode in modes:
        ref: list[Any] = []
        for _ in range(2):  # the first pass warms the mapped pages and the query cache alike for all
            lat, ref = [], []
            t0, c0 = time.perf_counter(), time.process_time()
            for q, d in zip(qs, days):
                t = time.perf_counter()
                ref.append(key(searcher.search(q, d, k=10, mode=mode)))
                lat.append(time.perf_counter() - t)
            single = {"searches_per_s": round(n / (time.perf_counter() - t0), 1), **pct(lat), **cpu(c0, n)}
        for _ in range(1):
            lat, got = [], []
            t0, c0 = time.perf_counter(), time.process_time()
            for a in range(0, n, batch):
                t = time.perf_counter()
                got += [key(h) for h in searcher.search_many(qs[a:a + batch], days[a:a + batch], k=10, mode=mode)]
                lat += [time.perf_counter() - t] * len(qs[a:a + batch])
            batched = {"searches_per_s": round(n / (time.perf_counter() - t0), 1), **pct(lat), **cpu(c0, n),
                       "mismatches": sum(g != r for g, r in zip(got, ref, strict=True))}

        def threaded(s: Any, mode: str = mode, ref: list[Any] = ref) -> dict[str, Any]:
            lat = [0.0] * n
            got: list[Any] = [None] * n

            def client(c: int) -> None:
                for i in range(c, n, clients):
                    t = time.perf_counter()
                    got[i] = key(s.search(qs[i], days[i], k=10, mode=mode))
                    lat[i] = time.perf_counter() - t

            threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
            t0, c0 = time.perf_counter(), time.process_time()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return {"searches_per_s": round(n / (time.perf_counter() - t0), 1), **pct(lat), **cpu(c0, n),
                    "mismatches": sum(g != r for g, r in zip(got, ref, strict=True))}

        shared = threaded(searcher)
        batcher = BatchedSearcher(searcher, max_batch=batch)
        via_batcher = threaded(batcher)
        via_batcher["mean_batch"] = round(batcher.requests / max(1, batcher.batches), 1)
        batcher.stop()
        out["modes"][mode] = {"one_at_a_time": single, "search_many": batched, "clients_shared_searcher": shared,
                              "clients_batched_searcher": via_batcher,
                              "speedup_search_many": round(batched["searches_per_s"] / single["searches_per_s"], 2),
                              "speedup_clients_batched": round(via_batcher["searches_per_s"] / single["searches_per_s"], 2),
                              "cpu_speedup_search_many": round(single["cpu_ms_per_search"] / batched["cpu_ms_per_search"], 2),
                              "cpu_speedup_clients_batched": round(single["cpu_ms_per_search"]
                                                                   / via_batcher["cpu_ms_per_search"], 2)}
        print(json.dumps({mode: out["modes"][mode]}), flush=True)
    searcher.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("/work/scale/1m"))
    ap.add_argument("--queries", type=int, default=600)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--modes", default="hybrid,dense,bm25")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()
    if not (args.root / "ws" / "index" / "manifest.json").exists():
        sys.exit(f"{args.root}: no scale store; build one with `benchmarks/retrieval/index_at_scale.py build --root {args.root} "
                 "--rows 1000000 --months 10`")
    res = measure(args.root, args.queries, args.batch, args.clients, args.modes.split(","))
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
