"""Issue 7 acceptance: does the `retrieval` agent beat `uniform` on Brier on the sample world?

    python benchmarks/bench_acceptance.py [--preset tiny] [--seeds 0,1,2] [--cache /tmp/acc] [--split eval]

Builds (or reuses) one workspace per world seed under CACHE/seed<s>/ (synthesize -> corpus ->
index -> events), runs uniform, base_rate and retrieval on the split's events of each, and prints
per seed and pooled over the seeds: each agent's mean Brier (events weigh equally), the paired
difference retrieval - uniform (and retrieval - base_rate) with its event-clustered 95% bootstrap
interval (4,000 draws, seed 0; pooled: events of all seeds resampled together), and n events.
The obvious alternatives are compared in the same run: the blind uniform and base-rate forecasts.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import polars as pl

AGENTS = ["uniform", "base_rate", "retrieval"]


def build_world(root: Path, preset: str, seed: int, workers: int = 1) -> Path:
    """The workspace of sample world (preset, seed) under `root`, built once and reused."""
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events import build_events

    from forecast_env.synth import synthesize

    world, ws = root / "world", root / "ws"
    if not (ws / "events" / "events.parquet").exists():
        if not (world / "truth.json").exists():
            synthesize(world, preset=preset, seed=seed, progress=False)
        build_corpus(sorted((world / "news").glob("*.warc.gz")), ws, workers=workers, progress=False)
        build_index(ws, progress=False)
        build_events(world / "polymarket", ws, progress=False)
    return ws


def run_agents(ws: Path, split: str, workers: int, run_id: str = "acceptance") -> pl.DataFrame:
    """A fresh run of AGENTS on `split` (an older run of that id is replaced: the code may have changed)."""
    from forecast_env.eval.runner import run_benchmark

    shutil.rmtree(ws / "runs" / run_id, ignore_errors=True)
    run_dir = run_benchmark(ws, AGENTS, split=split, run_id=run_id, workers=workers, progress=False)
    return pl.read_parquet(run_dir / "forecasts.parquet")


def figures(forecasts: pl.DataFrame) -> dict:
    """Mean Brier per agent and the paired differences, with event-clustered intervals."""
    from forecast_env.eval.bootstrap import clustered_mean
    from forecast_env.eval.metrics import paired_difference, scored

    out = {"n_events": forecasts["event_id"].n_unique()}
    f = scored(forecasts)
    for a in AGENTS:
        out[a] = clustered_mean(f.filter(pl.col("agent") == a), "brier").value
    out["ret_uni"] = paired_difference(forecasts, "retrieval", "uniform")
    out["ret_br"] = paired_difference(forecasts, "retrieval", "base_rate")
    return out


def pooled(frames: dict[int, pl.DataFrame]) -> pl.DataFrame:
    """Forecasts of several worlds with event ids made unique per seed ("s1/pm-123")."""
    return pl.concat([f.with_columns(event_id=pl.lit(f"s{s}/") + pl.col("event_id")) for s, f in frames.items()],
                     how="diagonal_relaxed")


def _ci(e) -> str:
    return f"{e.value:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--seeds", default="0,1,2", help="world seeds (size argument: fewer seeds, less time)")
    ap.add_argument("--cache", default="/tmp/acc", help="workspaces are built once under CACHE/seed<s>/")
    ap.add_argument("--split", default="eval")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    frames: dict[int, pl.DataFrame] = {}
    rows = []
    for s in [int(x) for x in args.seeds.split(",") if x.strip()]:
        t0 = time.perf_counter()
        ws = build_world(Path(args.cache) / f"seed{s}", args.preset, s, workers=args.workers)
        t1 = time.perf_counter()
        frames[s] = run_agents(ws, args.split, args.workers)
        t2 = time.perf_counter()
        rows.append((f"seed {s}", figures(frames[s]), t1 - t0, t2 - t1))
    if len(frames) > 1:
        rows.append(("pooled", figures(pooled(frames)), 0.0, 0.0))
    print(f"preset {args.preset}, split {args.split}; Brier (multiclass, events weigh equally); "
          "differences with event-clustered 95% bootstrap CIs (4,000 draws, seed 0)\n")
    print("| world | n events | uniform | base_rate | retrieval | retrieval - uniform [95% CI] "
          "| retrieval - base_rate [95% CI] | build s | run s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, fig, tb, tr in rows:
        print(f"| {name} | {fig['n_events']} | {fig['uniform']:.3f} | {fig['base_rate']:.3f} | {fig['retrieval']:.3f} "
              f"| {_ci(fig['ret_uni'])} | {_ci(fig['ret_br'])} | {tb:.0f} | {tr:.0f} |")


if __name__ == "__main__":
    main()
