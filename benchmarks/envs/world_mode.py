"""World mode on a sample world: how fast the clock walks, and does reading the news pay there too?

    python -m benchmarks.envs.world_mode [--preset gate] [--seed 1] [--cache DIR] [--split all] [--workspace WS]

Builds (or reuses, like benchmarks/envs/acceptance.py) the workspace of one sample world, or takes `--workspace`
(e.g. the `tiny` world that `make demo` builds), then measures in one run:

1. Speed: a scripted agent that sets a standing forecast (depending on the date and the question)
   on every listed question every day and calls `next_day`, walking the split's whole calendar in
   `ForecastWorldEnv`; against the obvious alternative, the same forecasts made through
   `ForecastEnv` episodes over the same events. Both give the same Brier table (checked).
2. Agents: uniform, base_rate (not on split `all`: it has no other split to fit on) and retrieval
   through `forecast-env run --mode world`; mean Brier on the scheduled dates (events weigh equally),
   time-weighted Brier, and retrieval - uniform with its event-clustered 95% bootstrap interval (4,000
   draws, seed 0); beside it, the same agents in episode mode on the same events (the alternative).

Exit status 1 (so `make bench` fails) when the two modes' tables differ or the interval of
retrieval - uniform does not lie below 0.

The default world is the one of the episode-mode gate in `make test` (docs/design.md §7): the `gate`
preset, seed 1 (phrasing bank b), both splits, 64 events over a 365-day calendar. The `tiny` eval
split (34 events) is too small to resolve the reader's gain: there even the episode-mode interval
reaches above 0 (benchmarks/log/2026-11-30-world-mode.md).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from datetime import date
from pathlib import Path

import polars as pl

from benchmarks.envs import acceptance  # one home for building the worlds and the figures

AGENTS = ["uniform", "base_rate", "retrieval"]


def scripted_probs(day: date, qid: str, options: list[str]) -> list[float]:
    """A deterministic forecast that depends on the date and the question."""
    raw = [1.0 + ((day.toordinal() * 7 + sum(map(ord, qid)) * (i + 3)) % 11) for i in range(len(options))]
    return [r / sum(raw) for r in raw]


def walk_world(ws: Path, split: str, searcher: object) -> tuple[list[dict], float, int, int]:
    """The scripted agent through the world: (scored rows, seconds, env steps, days)."""
    from forecast_env.envs.world_env import ForecastWorldEnv

    env = ForecastWorldEnv(ws, split=split, searcher=searcher)
    t0 = time.perf_counter()
    _, info = env.reset(seed=0)
    steps, done = 0, False
    while not done:
        for q in info["listed"]:
            options = list(env.world.questions[[x.question_id for x in env.world.questions].index(q)].episode.options)
            _, _, done, _, info = env.step({"tool": "forecast", "args": {
                "question_id": q, "probabilities": scripted_probs(info["date"], q, options)}})
            steps += 1
        _, _, done, _, info = env.step({"tool": "next_day", "args": {}})
        steps += 1
    return info["scores"], time.perf_counter() - t0, steps, len(env.days)


def walk_episodes(ws: Path, split: str, event_ids: list[str], searcher: object) -> tuple[list[dict], float, int]:
    """The same forecasts through one episode per event: (scored rows, seconds, env steps)."""
    from forecast_env.envs.forecast_env import ForecastEnv

    env = ForecastEnv(ws, split=split, searcher=searcher, event_ids=event_ids)
    t0 = time.perf_counter()
    rows, steps = [], 0
    for eid in event_ids:
        _, info = env.reset(options={"event_id": eid})
        done = False
        while not done:
            _, _, done, _, info = env.step({"tool": "forecast", "args": {
                "probabilities": scripted_probs(info["forecast_date"], eid, info["options"])}})
            steps += 1
        rows += [{**s, "event_id": eid} for s in info["scores"]]
    return rows, time.perf_counter() - t0, steps


def _table(rows: list[dict]) -> list[tuple]:
    return sorted((r["event_id"], r["forecast_date"], round(r["brier"], 12)) for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="gate")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", default=str(acceptance.DEFAULT_CACHE))
    ap.add_argument("--split", default="all", help="events scored: all (base_rate is then left out), eval or train")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workspace", default=None, help="an existing workspace (skips building the world)")
    args = ap.parse_args(argv)
    from forecast_env.eval.runs.runner import run_benchmark
    from forecast_env.retrieval import Searcher

    root = Path(args.cache) / acceptance.builder_hash()
    t0 = time.perf_counter()
    if args.workspace:
        ws = Path(args.workspace)
    else:
        ws = acceptance.build_world(root / f"{args.preset}-seed{args.seed}", args.preset, args.seed,
                                          args.workers)
    build_s = time.perf_counter() - t0
    searcher = Searcher.open(ws)
    world_rows, world_s, world_steps, days = walk_world(ws, args.split, searcher)
    ids = sorted({r["event_id"] for r in world_rows})
    ep_rows, ep_s, ep_steps = walk_episodes(ws, args.split, ids, searcher)
    same = _table(world_rows) == _table(ep_rows)
    print(f"split {args.split}, workspace {ws} (built/reused in {build_s:.0f} s)\n")
    print("| scripted agent | events | scored rows | days | env steps | seconds | steps/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(f"| world mode (every listed question, every day) | {len(ids)} | {len(world_rows)} | {days} | {world_steps} "
          f"| {world_s:.2f} | {world_steps / world_s:,.0f} |")
    print(f"| episode mode (the same events) | {len(ids)} | {len(ep_rows)} | - | {ep_steps} | {ep_s:.2f} "
          f"| {ep_steps / ep_s:,.0f} |")
    print(f"\nsame Brier table in both modes: {same}\n")

    agents = [a for a in AGENTS if not (a == "base_rate" and args.split == "all")]
    run_id = "bench-world"
    shutil.rmtree(ws / "runs" / run_id, ignore_errors=True)
    t0 = time.perf_counter()
    run_dir = run_benchmark(ws, agents, split=args.split, run_id=run_id, workers=args.workers, progress=False,
                            mode="world")
    run_s = time.perf_counter() - t0
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    questions = pl.read_parquet(run_dir / "world_questions.parquet")
    tw = questions.group_by("agent").agg(pl.col("time_weighted_brier").mean()).sort("agent")
    fig = acceptance.figures(forecasts)
    t0 = time.perf_counter()
    episode = acceptance.figures(acceptance.run_agents(ws, args.split, args.workers, agents=agents,
                                                                   run_id="bench-world-episodes"))
    episode_s = time.perf_counter() - t0
    print(f"agents in world mode ({run_s:.0f} s for {len(agents)} agents, {args.workers} workers) and in episode mode "
          f"({episode_s:.0f} s); Brier on the scheduled dates, events weigh equally; time-weighted Brier over the "
          "listed days before the cut\n")
    print("| agent | Brier (world) | time-weighted Brier | Brier (episode mode) |")
    print("|---|---:|---:|---:|")
    for a, t in zip(tw["agent"].to_list(), tw["time_weighted_brier"].to_list()):
        print(f"| {a} | {fig[a]:.3f} | {t:.3f} | {episode[a]:.3f} |")
    versus_br = f"; retrieval - base_rate {acceptance._ci(fig['ret_br'])}" if "ret_br" in fig else ""
    print(f"\nretrieval - uniform in world mode {acceptance._ci(fig['ret_uni'])}{versus_br}; in episode mode "
          f"{acceptance._ci(episode['ret_uni'])}; n events {fig['n_events']}")
    problems = [] if same else ["the world and episode Brier tables differ"]
    problems += acceptance.verdict([(f"world mode, seed {args.seed}", fig)])
    for p in problems:
        print(f"WORLD BENCHMARK FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
