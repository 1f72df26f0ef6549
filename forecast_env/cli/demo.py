"""`forecast-env demo`: the main job end to end on the embedded default (the `tiny` sample world).

sample world -> corpus -> index -> events -> baseline agents -> report -> export, each step printed
with what it did and where its output went.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from forecast_env.cli.common import add_common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the whole pipeline on a generated sample world (the embedded default)")
    p.add_argument("--workspace", default="demo_ws", help="where to put everything (default: demo_ws)")
    p.add_argument("--preset", default="tiny", choices=["micro", "tiny", "small"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--agents", default="uniform,base_rate,retrieval",
                   help="comma-separated agents (add 'llm' when an endpoint is configured)")
    p.add_argument("--workers", type=int, default=None)
    add_common(p)
    p.set_defaults(func=run)


def _step(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def run(args: argparse.Namespace) -> int:
    from forecast_env.agents.base import make_agent  # noqa: F401  (fail early if agents are broken)
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events import build_events
    from forecast_env.eval.export import export
    from forecast_env.eval.report import build_report
    from forecast_env.eval.runner import run_benchmark
    from forecast_env.synth import synthesize

    from forecast_env.cli.common import section_config

    ws = Path(args.workspace).resolve()
    world = ws / "world"
    t_all = time.perf_counter()

    t0 = _step(f"1/7 sample world '{args.preset}' (seed {args.seed}) -> {world}")
    if (world / "truth.json").exists():
        print("   already generated; reusing")
    else:
        s = synthesize(world, preset=args.preset, seed=args.seed, progress=True)
        print("   " + ", ".join(f"{k}={v}" for k, v in s.items() if isinstance(v, (int, float, str))))
    print(f"   {time.perf_counter() - t0:.1f}s")

    t0 = _step(f"2/7 corpus build from {world / 'news'} -> {ws / 'corpus'}")
    warcs = sorted((world / "news").glob("*.warc.gz"))
    s = build_corpus(warcs, ws, config=section_config(args, "corpus"), workers=args.workers, progress=True)
    print(f"   {s.get('summary_line', '') or {k: v for k, v in s.items() if isinstance(v, (int, float, str))}}")
    print(f"   funnel: {ws / 'corpus' / 'report.md'}   ({time.perf_counter() - t0:.1f}s)")

    t0 = _step(f"3/7 index build (dense + as-of-date BM25) -> {ws / 'index'}")
    s = build_index(ws, config=section_config(args, "corpus"), progress=True)
    print(f"   {({k: v for k, v in s.items() if isinstance(v, (int, float, str))})}  ({time.perf_counter() - t0:.1f}s)")

    t0 = _step(f"4/7 events from {world / 'polymarket'} -> {ws / 'events'}")
    s = build_events(world / "polymarket", ws, config=section_config(args, "events"), progress=True)
    print(f"   {({k: v for k, v in s.items() if isinstance(v, (int, float, str))})}")
    print(f"   funnel: {ws / 'events' / 'report.md'}   ({time.perf_counter() - t0:.1f}s)")

    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    t0 = _step(f"5/7 benchmark run: agents {', '.join(agents)} on the eval split")
    run_dir = run_benchmark(ws, agents, split="eval", rollouts=1, seed=args.seed, workers=args.workers,
                            config=section_config(args, "benchmark"), progress=True)
    print(f"   run: {run_dir}  ({time.perf_counter() - t0:.1f}s)")

    t0 = _step("6/7 report")
    paths = build_report(run_dir)
    md = Path(paths["markdown"]).read_text()
    print(md.split("\n## ", 2)[1] if "\n## " in md else md[:3000])
    print(f"   report: {paths['markdown']}\n   html:   {paths['html']}  ({time.perf_counter() - t0:.1f}s)")

    t0 = _step("7/7 export training data (train split prompts + eval trajectories)")
    out = ws / "exports"
    e1 = export(ws, "train", out / "train", progress=False)
    e2 = export(ws, "eval", out / "eval", run_id=run_dir.name, progress=False)
    print(f"   {e1}\n   {e2}  ({time.perf_counter() - t0:.1f}s)")

    print(f"\ndemo finished in {time.perf_counter() - t_all:.0f}s; everything is under {ws}")
    return 0
