"""Approximate (IVF) month shards against the exact scan, in one run: build time, size on disk,
recall@10, query latency and the searcher's private memory.

    .venv/bin/python -m benchmarks.retrieval.ivf_vs_exact --rows 1000000 --months 5 --dim 256

The dense side only (BM25 and text copies are measured by benchmarks/retrieval/search_speed.py): month shards of
clustered unit vectors (4,096 topic centres plus noise, generated in chunks, stored as float16
shards with `--float16`), the first month exact, the later ones approximate as `index.ann_min_rows`
decides (here: the first month's size), each IVF trained on the earlier months only. Queries are
perturbed stored vectors, searched over the whole corpus and as of the middle of the last month.
Search runs in a child process, so its memory is that of a searcher only (mapped shards are page
cache, not private memory).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import child_env, module_command

CENTRES = 4096


def private_mb() -> float:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def vectors(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    v = centres[rng.integers(0, len(centres), n)] + 0.35 * rng.standard_normal((n, centres.shape[1])).astype(
        np.float32) / np.sqrt(centres.shape[1])
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def build(root: Path, rows: int, months: int, dim: int, float16: bool) -> dict:
    import faiss

    from forecast_env.retrieval.ann import ann_plan, build_ivf
    from forecast_env.retrieval.dense import make_index
    from forecast_env.store import atomic_path

    rng = np.random.default_rng(0)
    centres = rng.standard_normal((CENTRES, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    per = rows // months
    t0 = time.perf_counter()
    for m in range(months):
        index = make_index(np.zeros((0, dim), np.float32), float16)
        for start in range(0, per, 200_000):  # generated and added in chunks
            index.add(vectors(rng, centres, min(200_000, per - start)))
        with atomic_path(root / f"m{m}.faiss") as tmp:
            faiss.write_index(index, str(tmp))
    t_flat = time.perf_counter() - t0
    cfg = {"ann_min_rows": per, "ann_nprobe": 32, "ann_candidates": 100}
    plan = ann_plan([per] * months, cfg)
    t1 = time.perf_counter()
    specs = []
    for m, params in enumerate(plan):
        if params is None:
            specs.append(None)
            continue
        info = build_ivf(root / f"m{m}.ivf", [root / f"m{i}.faiss" for i in range(m + 1)], params)
        specs.append({"path": str(root / f"m{m}.ivf"), **info})
    t_ivf = time.perf_counter() - t1
    (root / "specs.json").write_text(json.dumps({"per": per, "months": months, "specs": specs}))
    size = lambda pat: sum(p.stat().st_size for p in root.glob(pat)) / 2**20
    return {"rows": per * months, "flat_build_s": round(t_flat, 1), "ivf_build_s": round(t_ivf, 1),
            "flat_mb": round(size("*.faiss"), 1), "ivf_mb": round(size("*.ivf"), 1),
            "ivf_months": sum(s is not None for s in specs), "nlist": [s["nlist"] for s in specs if s]}


def search(root: Path, n_queries: int) -> dict:
    from forecast_env.retrieval.dense import DenseShards

    meta = json.loads((root / "specs.json").read_text())
    per, months = meta["per"], meta["months"]
    offsets = np.arange(months + 1, dtype=np.int64) * per
    before = private_mb()
    paths = [root / f"m{m}.faiss" for m in range(months)]
    exact = DenseShards(paths, offsets)
    approx = DenseShards(paths, offsets, ann=meta["specs"])
    rng = np.random.default_rng(1)
    picks = rng.integers(0, per * months, n_queries)
    qs = []
    for r in picks:
        m, local = divmod(int(r), per)
        v = exact.indexes[m].reconstruct(local) + 0.3 * rng.standard_normal(exact.dim).astype(np.float32) / np.sqrt(
            exact.dim)
        qs.append(v / np.linalg.norm(v))
    qs = np.array(qs, dtype=np.float32)
    out: dict = {}
    for label, hi in (("all", int(offsets[-1])), ("mid_last_month", int(offsets[-2] + per // 2))):
        for name, shards in (("exact", exact), ("ivf", approx)):
            shards.search(qs[:2], 0, hi, 10)
            lat, res = [], []
            for q in qs:
                t0 = time.perf_counter()
                res.append(shards.search(q[None], 0, hi, 10)[0][0])
                lat.append(time.perf_counter() - t0)
            out[f"{label}_{name}_p50_ms"] = round(float(np.median(lat) * 1000), 2)
            out[f"{label}_{name}_p95_ms"] = round(float(np.percentile(lat, 95) * 1000), 2)
            out[f"_{label}_{name}"] = res
        rec = [len(set(a.tolist()) & set(b.tolist())) / 10 for a, b in zip(out.pop(f"_{label}_ivf"),
                                                                            out.pop(f"_{label}_exact"))]
        out[f"{label}_recall_at_10"] = round(float(np.mean(rec)), 4)
    out["searcher_private_mb"] = round(private_mb() - before, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--months", type=int, default=5)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--float16", action="store_true")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--child", nargs=2, metavar=("ACTION", "ROOT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        action, root = args.child
        out = (build(Path(root), args.rows, args.months, args.dim, args.float16) if action == "build"
               else search(Path(root), args.queries))
        print(json.dumps(out))
        return
    with tempfile.TemporaryDirectory(prefix="bench_ann_") as tmp:
        for action in ("build", "search"):
            cmd = module_command("benchmarks.retrieval.ivf_vs_exact", "--child", action, tmp, "--rows", str(args.rows),
                                 "--months", str(args.months), "--dim", str(args.dim), "--queries", str(args.queries))
            out = subprocess.run(cmd + (["--float16"] if args.float16 else []), capture_output=True, text=True,
                                 check=False, env=child_env())
            if out.returncode:
                print(out.stderr, file=sys.stderr)
                sys.exit(1)
            print(f"{action}: {out.stdout.strip()}", flush=True)


if __name__ == "__main__":
    main()
