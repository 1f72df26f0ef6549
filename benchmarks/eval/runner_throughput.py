"""Runner throughput: episodes/s of the three baselines with 1 vs 2 workers (process pool).

    python -m benchmarks.eval.runner_throughput --workspace WS [--agents uniform,base_rate,retrieval] [--events N]

WS is a built workspace (e.g. the `tiny` world of `make demo`, or build one with --preset).
The obvious alternative compared in the same run: the sequential loop in one process (workers=1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path


def build(preset: str, root: Path) -> Path:
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events
    from forecast_env.synth import synthesize

    world, ws = root / "world", root / "ws"
    if not (ws / "events" / "events.parquet").exists():
        synthesize(world, preset=preset, seed=0, progress=False)
        build_corpus(sorted((world / "news").glob("*.warc.gz")), ws, workers=1, progress=False)
        build_index(ws, progress=False)
        build_events(world / "polymarket", ws, progress=False)
    return ws


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default=None)
    ap.add_argument("--preset", default="tiny", help="build this sample world when --workspace is not given")
    ap.add_argument("--root", default="/tmp/bench_runner")
    ap.add_argument("--agents", default="uniform,base_rate,retrieval")
    ap.add_argument("--events", type=int, default=12, help="eval events per run (size argument)")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    from forecast_env.envs.forecast_env import load_episodes
    from forecast_env.eval.runs.runner import run_benchmark
    from forecast_env.eval.runs.store import read_record

    ws = Path(args.workspace) if args.workspace else build(args.preset, Path(args.root))
    ids = [e.event_id for e in load_episodes(ws, "eval")][: args.events]
    results = []
    for agent in args.agents.split(","):
        for w in [int(x) for x in args.workers.split(",")]:
            run_id = f"bench-{agent}-w{w}"
            shutil.rmtree(ws / "runs" / run_id, ignore_errors=True)
            t0 = time.perf_counter()
            run_dir = run_benchmark(ws, [agent], run_id=run_id, workers=w, event_ids=ids, progress=False)
            wall = time.perf_counter() - t0
            rec = read_record(run_dir)
            n = rec["episodes_done"]
            results.append({"agent": agent, "workers": w, "episodes": n, "wall_s": round(wall, 2),
                            "episodes_per_s": round(n / wall, 3), "brier": rec["summary"][0]["brier"]})
            print(json.dumps(results[-1]), flush=True)
    print("\n| agent | workers | episodes | wall s | episodes/s |\n|---|---|---|---|---|")
    for r in results:
        print(f"| {r['agent']} | {r['workers']} | {r['episodes']} | {r['wall_s']} | {r['episodes_per_s']} |")


if __name__ == "__main__":
    main()
