"""BM25 as of a date: the pruned `BM25Index.score` (MaxScore) against the exhaustive reference,
same queries, same process, same run.

    nice -n 10 .venv/bin/python -m benchmarks.retrieval.bm25_pruning --workspace /work/scale/10m/ws [--queries 200] [--k 10]
    .venv/bin/python -m benchmarks.retrieval.bm25_pruning --workspace demo_ws

Queries: on benchmarks/retrieval/index_at_scale.py's store (a workspace whose parent folder holds its scale.json) the
queries of benchmarks/retrieval/index_at_scale.py `query` (TextModel.queries, same seed: 2-4 words of a story and its
section); on any other workspace the titles of random articles. Dates: the last day (every article
eligible) and uniform random days between the first and the last. Scoring is timed alone
(`BM25Index.score` on tokens; no embedding, no `Hit` objects): a first pass runs `score` on every
query and date once (page cache; the index's per-term hidden counts), then the timed pass runs
`score` and `_score_exhaustive` one after the other on each. Every pair of results must be identical:
the same rows in the same order and the same float64 scores bit for bit (the exit status is 1 if not).

Prints JSON: wall and CPU p50/p95 in ms for each (and the speedups), the pruned search's first pass,
how often the candidates from the rarest terms sufficed ("stopped early"; "plans": "j of n", the
candidates were the rows of the j rarest of the query's n matched terms, n of n: every matching row),
and the process's private memory (after the pruned first passes; then after the exhaustive ones).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20261130


def private_mb() -> float | None:
    """Anonymous (private heap) memory of this process in MB, from /proc/self/smaps_rollup (Linux)."""
    try:
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
            if line.startswith("Anonymous:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def scale_queries(n: int) -> list[str]:
    """benchmarks/retrieval/index_at_scale.py's query set (the same generator, vocabulary and seed as its `query` command)."""
    from benchmarks.retrieval.index_at_scale import SEED as SCALE_SEED
    from benchmarks.retrieval.index_at_scale import TextModel

    return TextModel.from_static_model().queries(np.random.default_rng([SCALE_SEED, 99]), n)


def title_queries(searcher: Any, n: int, rng: np.random.Generator) -> list[str]:
    """Titles of random indexed articles (each with at least one indexed token)."""
    from forecast_env.retrieval.searcher import open_text
    from forecast_env.retrieval.tokenize import tokenize

    offsets = searcher.offsets
    tables: dict[int, Any] = {}
    out: list[str] = []
    for _ in range(50 * n):
        if len(out) == n or offsets[-1] == 0:
            break
        row = int(rng.integers(0, offsets[-1]))
        m = int(np.searchsorted(offsets, row, side="right")) - 1
        if m not in tables:
            tables[m] = open_text(searcher.index_dir / "text" / f"{searcher.months[m]['month']}.arrow")
        title = tables[m].column("title")[row - int(offsets[m])].as_py() or ""
        if tokenize(title):
            out.append(title)
    return out


def pct(values: list[float]) -> dict[str, float]:
    a = np.asarray(values) * 1000
    return {"p50_ms": round(float(np.median(a)), 2), "p95_ms": round(float(np.percentile(a, 95)), 2)}


def first_pass(searcher: Any, token_lists: list[list[str]], ends: list[int], k: int) -> list[float]:
    """Run `score` once on each (tokens, end): seconds each."""
    out = []
    for toks, end in zip(token_lists, ends):
        t0 = time.perf_counter()
        searcher.bm25.score(toks, end, k)
        out.append(time.perf_counter() - t0)
    return out


def measure(searcher: Any, token_lists: list[list[str]], ends: list[int], k: int) -> dict[str, Any]:
    """Time `score` and `_score_exhaustive` on each (tokens, end); check that they agree."""
    bm25 = searcher.bm25
    wall: dict[str, list[float]] = {"pruned": [], "exhaustive": []}
    cpu: dict[str, list[float]] = {"pruned": [], "exhaustive": []}
    early = mismatches = 0
    plans: dict[str, int] = {}
    for toks, end in zip(token_lists, ends):
        t0, c0 = time.perf_counter(), time.process_time()
        rows, scores, (used, matched) = bm25._score_pruned(toks, end, k)
        t1, c1 = time.perf_counter(), time.process_time()
        ref_rows, ref_scores = bm25._score_exhaustive(toks, end, k)
        t2, c2 = time.perf_counter(), time.process_time()
        wall["pruned"].append(t1 - t0)
        wall["exhaustive"].append(t2 - t1)
        cpu["pruned"].append(c1 - c0)
        cpu["exhaustive"].append(c2 - c1)
        early += used < matched
        plan = f"{used} of {matched}"
        plans[plan] = plans.get(plan, 0) + 1
        same = (rows.dtype == ref_rows.dtype and np.array_equal(rows, ref_rows)
                and scores.dtype == ref_scores.dtype and scores.tobytes() == ref_scores.tobytes())
        mismatches += not same
    out: dict[str, Any] = {}
    for name in ("pruned", "exhaustive"):
        c = pct(cpu[name])
        out[name] = {**pct(wall[name]), "cpu_p50_ms": c["p50_ms"], "cpu_p95_ms": c["p95_ms"]}
    out["speedup_p50"] = round(out["exhaustive"]["p50_ms"] / max(out["pruned"]["p50_ms"], 1e-9), 2)
    out["speedup_p95"] = round(out["exhaustive"]["p95_ms"] / max(out["pruned"]["p95_ms"], 1e-9), 2)
    out["stopped_early"] = f"{early}/{len(token_lists)}"
    # "j of n": the candidates were the rows of the j rarest of the n query terms with postings
    out["plans"] = dict(sorted(plans.items(), key=lambda kv: -kv[1]))
    out["mismatches"] = mismatches
    return out


def run(workspace: Path, n_queries: int, k: int) -> dict[str, Any]:
    from forecast_env.retrieval import Searcher
    from forecast_env.retrieval.layout import day_number
    from forecast_env.retrieval.tokenize import tokenize

    warnings.simplefilter("ignore")
    base = private_mb()
    t0 = time.perf_counter()
    searcher = Searcher.open(workspace)
    opened_s = time.perf_counter() - t0
    opened = private_mb()
    rng = np.random.default_rng([SEED, 7])
    is_scale = (workspace.resolve().parent / "scale.json").is_file()
    queries = scale_queries(n_queries) if is_scale else title_queries(searcher, n_queries, rng)
    token_lists = [tokenize(q) for q in queries]
    first, last = searcher.first_day, searcher.last_day
    if first is None or last is None:
        raise SystemExit(f"{workspace}: the index holds no visible articles")
    span = (last - first).days
    dates = [first + timedelta(days=int(d)) for d in rng.integers(0, span + 1, size=len(queries))]
    days = np.asarray(searcher.days)
    last_end = int(np.searchsorted(days, day_number(last), side="right"))
    out: dict[str, Any] = {
        "workspace": str(workspace), "articles": int(searcher.offsets[-1]), "queries": len(queries),
        "query_source": "index_at_scale TextModel.queries" if is_scale else "article titles", "k": k,
        "hidden_rows": int((~searcher.visible).sum()), "open_s": round(opened_s, 2),
        "examples": queries[:3],
    }
    runs = {"last_day": [last_end] * len(queries),
            "random_dates": [int(np.searchsorted(days, day_number(d), side="right")) for d in dates]}
    generated = private_mb()  # the query generator's model is loaded by now
    # the first pass runs the pruned search alone, so that the memory after it is a searcher's
    first = {label: first_pass(searcher, token_lists, ends, k) for label, ends in runs.items()}
    searched = private_mb()
    for label, ends in runs.items():
        t0 = time.perf_counter()
        out[label] = measure(searcher, token_lists, ends, k)
        out[label]["pruned_first_pass"] = pct(first[label])
        print(f"{label}: {len(queries)} queries in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    out["private_memory_mb"] = {"before_open": base, "after_open": opened, "queries_made": generated,
                                "after_pruned_queries": searched,
                                "after_exhaustive_too": private_mb()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workspace", type=Path, required=True, help="an indexed workspace")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10, help="hits per query")
    args = ap.parse_args()
    res = run(args.workspace, args.queries, args.k)
    print(json.dumps(res, indent=2))
    bad = res["last_day"]["mismatches"] + res["random_dates"]["mismatches"]
    if bad:
        print(f"{bad} queries differ from the exhaustive reference", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
