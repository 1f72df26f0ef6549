"""Same search answers on any machine (issue 31 item 1): the thread / kernel matrix, and what it costs.

    .venv/bin/python -m benchmarks.retrieval.determinism matrix --dir /tmp/det            # the full matrix
    .venv/bin/python -m benchmarks.retrieval.determinism matrix --dir /tmp/det --legacy   # today's scoring
    .venv/bin/python -m benchmarks.retrieval.determinism speed --dir /tmp/det             # queries/s, both designs

`make` writes a synthetic dense fixture under DIR: four month shards past FAISS's database-parallel size
(a flat float32 month of 12,000 rows, a float16 month of 11,000, an IVF sq8 month and an IVF pq4fs month
of 12,000 each, 384 dimensions), with exact duplicates and near-duplicates (copies moved by ~1e-7: the
near-ties that flip under another rounding) and 2 % hidden rows; plus a small article store indexed with
the static encoder (BM25, dense and hybrid through `Searcher`).

`probe` (run in a child process, one per setting, since FAISS reads `FAISS_SIMD_LEVEL` and OpenBLAS its
variables at load) runs seeded searches: one query per call and batched (`search_ranges`) over whole,
partial and hidden-row ranges, k = 10 and 50; `Searcher.search` in each mode; and query vectors from the
static, onnx and (with --torch) torch encoders. It writes every answer as (ids, exact score bits).

`matrix` runs `probe` under each setting (OMP_NUM_THREADS 1 / 2 / 8, FAISS_SIMD_LEVEL NONE / AVX2 /
AVX512, OPENBLAS_NUM_THREADS and OPENBLAS_CORETYPE, combinations) and diffs each against the first:
probes whose ids, order or score bits differ. Levels the CPU lacks are skipped with the reason.

`speed` times dense searches (one query per call, and batched) with today's scoring (`exact=False`)
and the deterministic one, in one process, on the same queries.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import child_env, module_command

DIM = 384
SIZES = {"flat": 12_000, "f16": 11_000, "ivf_sq8": 12_000, "ivf_pq4fs": 12_000}
SEED = 31


# ------------------------------------------------------------------ the fixture


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def month_vectors(n: int, seed: int, dim: int = DIM) -> np.ndarray:
    """Clustered unit vectors with exact and near duplicates (syndicated copies)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, dim))
    x = centres[rng.integers(0, 40, n)] + 0.9 * rng.standard_normal((n, dim))
    x = _unit(x)
    dup = rng.choice(n, n // 20, replace=False)
    src = rng.choice(n, n // 20)
    x[dup] = x[src]  # exact copies
    near = rng.choice(n, n // 20, replace=False)
    x[near] = _unit(x[rng.choice(n, n // 20)] + 1e-7 * rng.standard_normal((n // 20, dim)))
    return x


def months_of(d: Path) -> dict[str, int]:
    """The fixture's months and their rows (in order)."""
    return json.loads((d / "fixture.json").read_text())["sizes"]


def make_fixture(out: Path, dim: int = DIM, light: bool = False) -> Path:
    """The dense months (see the module docstring) and a small indexed article store, under `out`;
    `light`: no pq4fs month and no article store (the suite's reduced matrix)."""
    import faiss

    from forecast_env.retrieval.dense import make_index

    out.mkdir(parents=True, exist_ok=True)
    if (out / "fixture.json").exists():
        return out
    sizes = {n: r for n, r in SIZES.items() if not (light and n == "ivf_pq4fs")}
    vecs = {name: month_vectors(n, SEED + i, dim) for i, (name, n) in enumerate(sizes.items())}
    faiss.write_index(make_index(vecs["flat"]), str(out / "flat.faiss"))
    faiss.write_index(make_index(vecs["f16"], float16=True), str(out / "f16.faiss"))
    train = np.concatenate([vecs["flat"], vecs["f16"]])
    for name in [n for n in sizes if n.startswith("ivf")]:
        faiss.write_index(make_index(vecs[name]), str(out / f"{name}.faiss"))
        q = faiss.IndexFlatIP(dim)
        if name == "ivf_sq8":
            ivf = faiss.IndexIVFScalarQuantizer(q, dim, 64, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        else:
            ivf = faiss.IndexIVFPQFastScan(q, dim, 64, dim // 4, 4, faiss.METRIC_INNER_PRODUCT)
        ivf.cp.seed = 1234
        ivf.train(train)
        ivf.add_with_ids(vecs[name], np.arange(len(vecs[name]), dtype=np.int64))
        faiss.write_index(ivf, str(out / f"{name}.ivf"))
    rng = np.random.default_rng(SEED)
    queries = np.concatenate([
        _unit(rng.standard_normal((24, dim))),
        vecs["flat"][rng.choice(sizes["flat"], 8)],  # a stored vector (its copies tie with it)
        _unit(vecs["ivf_sq8"][rng.choice(sizes["ivf_sq8"], 8)] + 0.3 * rng.standard_normal((8, dim)))])
    np.save(out / "queries.npy", queries.astype(np.float32))
    np.save(out / "hidden.npy", rng.random(sum(sizes.values())) < 0.02)
    if not light:
        _make_store(out / "store")
    (out / "fixture.json").write_text(json.dumps({"sizes": sizes, "dim": dim, "seed": SEED, "light": light}))
    return out


def _store_config() -> dict[str, Any]:
    from forecast_env.config import load_config

    cfg = load_config("corpus")
    cfg["embed"].update(backend="static")
    cfg["index"].update(ann_min_rows=150, ann_nlist=16, ann_nprobe=4, ann_candidates=20)
    return cfg


def _make_store(root: Path) -> None:
    from forecast_env.corpus_build.index import build_index
    from tests.support.retrieval_data import make_rows, write_store

    ws = write_store(root, make_rows(700, days=115, seed=11))
    build_index(ws.root, _store_config(), progress=False)


def open_shards(d: Path, exact: bool = True, threads: int = 1) -> Any:
    """The fixture's months as one DenseShards."""
    from forecast_env.retrieval.dense import DenseShards

    sizes = months_of(d)
    offsets = np.concatenate([[0], np.cumsum(list(sizes.values()))])
    specs = {"ivf_sq8": {"path": d / "ivf_sq8.ivf", "nprobe": 8, "candidates": 100},
             "ivf_pq4fs": {"path": d / "ivf_pq4fs.ivf", "nprobe": 8, "candidates": 200}}
    ann = [specs.get(n) for n in sizes]
    return DenseShards([d / f"{n}.faiss" for n in sizes], offsets, np.load(d / "hidden.npy"), ann, threads,
                       exact=exact)


# ------------------------------------------------------------------ the probe (child process)

QUERY_TEXTS = ["oil price", "senate vote on the treaty", "hurricane", "central bank rate decision inflation",
               "moon rocket launch", "final match goal coach player", "china india brazil trade tariff summit",
               "stock shares profit merger deal", "storm flood fire", "court ruling election"]


def _pairs(res: list[tuple[np.ndarray, np.ndarray]]) -> list[list[Any]]:
    return [[np.asarray(r).tolist(), [float(x).hex() for x in np.asarray(s, dtype=np.float64)]] for r, s in res]


def probe(d: Path, exact: bool = True, torch: bool = False) -> dict[str, Any]:
    """Every answer of the seeded searches (see the module docstring): {probe: [ids, score bits]}."""
    import faiss

    from forecast_env.retrieval import Searcher
    from forecast_env.retrieval.dense import Embedder

    out: dict[str, Any] = {"_env": {"simd": faiss.SIMDConfig.get_level_name(), "omp": faiss.omp_get_max_threads()}}
    q = np.load(d / "queries.npy")
    sizes = months_of(d)
    light = json.loads((d / "fixture.json").read_text()).get("light", False)
    total = sum(sizes.values())
    rng = np.random.default_rng(7)
    ends = [total] * 10 + [int(x) for x in rng.integers(sizes["flat"] // 2, total, len(q) - 10)]
    starts = [0] * 20 + [int(e) // 3 for e in ends[20:]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shards = open_shards(d, exact=exact)
        for k in (10, 50):
            out[f"dense_one_k{k}"] = _pairs([shards.search(q[i:i + 1], starts[i], ends[i], k)[0] for i in range(len(q))])
            out[f"dense_batch_k{k}"] = _pairs(shards.search_ranges(q, starts, ends, k))
        shards.close()
        for backend in ("static",) + (() if light else ("onnx",)) + (("torch",) if torch else ()):
            emb = Embedder(backend=backend, query_cache_size=0)
            vecs = np.stack([emb.encode_queries([t])[0] for t in QUERY_TEXTS])
            out[f"encoder_{backend}"] = [[i, [float(x).hex() for x in v]] for i, v in enumerate(vecs)]
        if light:
            return out
        cfg = _store_config()
        with Searcher.open(d / "store", cfg) as s:
            if not exact:
                s.dense.exact = False
            last = s.last_day
            for mode in ("bm25", "dense", "hybrid"):
                res = []
                for j, t in enumerate(QUERY_TEXTS * 2):
                    hits = s.search(t, last.fromordinal(last.toordinal() - 5 * j), k=10, mode=mode)
                    res.append([[h.doc_id for h in hits], [float(h.score).hex() for h in hits]])
                out[f"searcher_{mode}"] = res
    return out


# ------------------------------------------------------------------ the matrix


def cpu_levels() -> dict[str, str | None]:
    """FAISS SIMD levels: None when this CPU runs it, else the reason it is skipped."""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    need = {"NONE": set(), "AVX2": {"avx2", "fma"}, "AVX512": {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}}
    return {lvl: None if req <= flags else f"the CPU lacks {', '.join(sorted(req - flags))}" for lvl, req in need.items()}


def settings(full: bool = True) -> list[dict[str, str]]:
    """The environment settings of the matrix (the first is the reference)."""
    base = {"OMP_NUM_THREADS": "1", "FAISS_SIMD_LEVEL": "AVX512", "OPENBLAS_NUM_THREADS": "1"}
    out = [base]
    for t in ("2", "8"):
        out.append(base | {"OMP_NUM_THREADS": t})
    for lvl in ("AVX2", "NONE"):
        out.append(base | {"FAISS_SIMD_LEVEL": lvl})
        out.append(base | {"FAISS_SIMD_LEVEL": lvl, "OMP_NUM_THREADS": "8"})
    if full:
        out.append(base | {"OPENBLAS_NUM_THREADS": "8", "OMP_NUM_THREADS": "2"})
        for core in ("Haswell", "SkylakeX", "Sandybridge", "Nehalem"):
            out.append(base | {"OPENBLAS_CORETYPE": core})
        out.append(base | {"OMP_NUM_THREADS": "2", "FAISS_SIMD_LEVEL": "NONE", "OPENBLAS_CORETYPE": "Nehalem",
                           "OPENBLAS_NUM_THREADS": "2"})
    return out


def run_probe(d: Path, env: dict[str, str], exact: bool = True, torch: bool = False) -> dict[str, Any]:
    """`probe` in a child process under `env` (added to this one's, without its thread variables)."""
    child = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "FAISS_SIMD_LEVEL",
                                                               "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE")}
    cmd = module_command("benchmarks.retrieval.determinism", "probe", "--dir", str(d))
    cmd += [] if exact else ["--legacy"]
    cmd += ["--torch"] if torch else []
    done = subprocess.run(cmd, env=child_env(child | env), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"probe under {env} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def diff(ref: dict[str, Any], got: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per probe family: answers compared, and those whose ids, order or score bits differ."""
    out = {}
    for name, answers in ref.items():
        if name.startswith("_"):
            continue
        other = got[name]
        ids = order = scores = 0
        worst = 0.0
        for (ri, rs), (gi, gs) in zip(answers, other, strict=True):
            if ri != gi:
                if sorted(map(str, ri)) == sorted(map(str, gi)):
                    order += 1
                else:
                    ids += 1
            if rs != gs:
                scores += 1
                if len(rs) == len(gs):
                    worst = max(worst, max((abs(float.fromhex(a) - float.fromhex(b)) for a, b in zip(rs, gs)),
                                           default=0.0))
        out[name] = {"answers": len(answers), "other_ids": ids, "other_order": order, "other_scores": scores,
                     "max_score_diff": worst}
    return out


def matrix(d: Path, full: bool = True, exact: bool = True, torch: bool = False) -> dict[str, Any]:
    """Run the probe under every setting; each one's differences from the first."""
    levels = cpu_levels()
    skipped = {lvl: why for lvl, why in levels.items() if why}
    runs = [s for s in settings(full) if not levels.get(s["FAISS_SIMD_LEVEL"])]
    if not runs:
        return {"skipped_levels": skipped, "runs": []}
    ref = run_probe(d, runs[0], exact, torch)
    report = {"skipped_levels": skipped, "reference": runs[0], "runs": []}
    for env in runs[1:]:
        got = run_probe(d, env, exact, torch)
        report["runs"].append({"env": env, "faiss": got["_env"], "diff": diff(ref, got)})
    return report


def differing(report: dict[str, Any]) -> int:
    """Answers (over every run and probe family) that differ from the reference in any way."""
    return sum(max(v["other_ids"] + v["other_order"], v["other_scores"])
               for r in report["runs"] for v in r["diff"].values())


# ------------------------------------------------------------------ speed


def speed(d: Path, reps: int = 3, threads: int = 1) -> dict[str, Any]:
    """Dense queries/s over the fixture's months, today's scoring and the deterministic one, same run."""
    q = np.load(d / "queries.npy")
    sizes = months_of(d)
    total = sum(sizes.values())
    out: dict[str, Any] = {}
    for label, exact in (("today", False), ("deterministic", True)):
        shards = open_shards(d, exact=exact, threads=threads)
        shards.search(q[:2], 0, total, 10)  # warm the pages
        for how in ("one", "batch"):
            best = float("inf")
            for _ in range(reps):
                t0 = time.perf_counter()
                if how == "one":
                    for i in range(len(q)):
                        shards.search(q[i:i + 1], 0, total, 10)
                else:
                    shards.search(q, 0, total, 10)
                best = min(best, time.perf_counter() - t0)
            out[f"{label}_{how}_qps"] = round(len(q) / best, 1)
        # per month kind: the flat month alone, the IVF months alone
        for name, lo, hi in (("flat", 0, sizes["flat"]),
                             ("ivf", sizes["flat"] + sizes["f16"], total)):
            best = float("inf")
            for _ in range(reps):
                t0 = time.perf_counter()
                for i in range(len(q)):
                    shards.search(q[i:i + 1], lo, hi, 10)
                best = min(best, time.perf_counter() - t0)
            out[f"{label}_{name}_one_qps"] = round(len(q) / best, 1)
        shards.close()
    out["queries"] = len(q)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=("make", "probe", "matrix", "speed"))
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--legacy", action="store_true", help="today's scoring (exact=False)")
    ap.add_argument("--torch", action="store_true", help="also the torch encoder")
    ap.add_argument("--reduced", action="store_true", help="threads and SIMD levels only")
    args = ap.parse_args(argv)
    if args.what == "probe":
        print(json.dumps(probe(args.dir, exact=not args.legacy, torch=args.torch)))
        return 0
    make_fixture(args.dir)
    if args.what == "matrix":
        t0 = time.perf_counter()
        report = matrix(args.dir, full=not args.reduced, exact=not args.legacy, torch=args.torch)
        report["differing_answers"] = differing(report)
        report["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(report, indent=1))
    elif args.what == "speed":
        print(json.dumps(speed(args.dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
