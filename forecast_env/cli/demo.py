"""`forecast-env demo`: the main job end to end on the embedded default (the `tiny` sample world).

It runs the same commands the README tour shows, printing each one before it runs:
synth -> corpus build -> index build -> events build -> run -> report -> export.
"""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

from forecast_env.cli.common import add_common
from forecast_env.config import route_overrides
from forecast_env.errors import ForecastEnvError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the whole pipeline on a generated sample world (the embedded default)")
    p.add_argument("--workspace", default="demo_ws", help="where to put everything (default: demo_ws)")
    p.add_argument("--preset", default="tiny", choices=["micro", "tiny", "small"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--agents", default=None,
                   help="comma-separated agents (default: benchmark.agents: uniform, base_rate and three "
                        "retrieval reader configurations; add 'llm' when an endpoint is configured)")
    p.add_argument("--workers", type=int, default=None)
    add_common(p)
    p.epilog = ("Each --set goes to the steps that read its section (e.g. --set corpus.embed.batch_size=32, "
                "--set events.screen.judge=llm); all are checked before the first step runs.")
    p.set_defaults(func=run)


def _command(title: str, argv: list[str]) -> None:
    from forecast_env.cli.main import main

    print(f"\n== {title}\n$ forecast-env {shlex.join(argv)}", flush=True)
    t0 = time.perf_counter()
    code = main(argv)
    if code != 0:
        raise ForecastEnvError(f"demo step failed (exit {code}): forecast-env {shlex.join(argv)}")
    print(f"   ({time.perf_counter() - t0:.1f}s)", flush=True)


def run(args: argparse.Namespace) -> int:
    ws = Path(args.workspace).resolve()
    world = ws / "world"
    routed = route_overrides(args.overrides)  # every --set checked now, not when its step comes

    def shared(*sections: str) -> list[str]:
        sets = [item for s in sections for item in routed[s]]
        return [a for c in args.config for a in ("--config", c)] + [a for item in sets for a in ("--set", item)]

    workers = ["--workers", str(args.workers)] if args.workers else []
    # a fresh run each time: a rerun after a code or config change must not try to resume an old run
    run_id = f"demo-{args.preset}-seed{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    t_all = time.perf_counter()

    if (world / "truth.json").exists():
        print(f"== 1/7 sample world: reusing {world}")
    else:
        _command(f"1/7 sample world '{args.preset}': WARC files + Polymarket-format JSON",
                 ["synth", "--preset", args.preset, "--seed", str(args.seed), "--out", str(world)])
    _command("2/7 corpus: read, extract, filter, timestamp, deduplicate",
             ["corpus", "build", "--warc", str(world / "news" / "*.warc.gz"), "--workspace", str(ws), *workers,
              *shared("corpus")])
    _command("3/7 indices: month-sharded dense (FAISS) + as-of-date BM25",
             ["index", "build", "--workspace", str(ws), *shared("corpus")])
    _command("4/7 events: construction, market filters, corpus screen, splits, schedules",
             ["events", "build", "--polymarket", str(world / "polymarket"), "--workspace", str(ws), "--no-progress",
              *shared("events")])
    agents = ["--agents", args.agents] if args.agents else []  # default: the configured benchmark.agents
    _command(f"5/7 benchmark run on the eval split: {args.agents or 'benchmark.agents'}",
             ["run", "--workspace", str(ws), *agents, "--split", "eval", "--seed", str(args.seed),
              "--run-id", run_id, *workers, *shared("benchmark", "env")])
    run_dir = ws / "runs" / run_id
    _command("6/7 report (Markdown + self-contained HTML with plots)", ["report", "--run", str(run_dir)])
    _command("7/7 training-data export (train prompts; eval prompts + trajectories)",
             ["export", "--workspace", str(ws), "--split", "train", "--out", str(ws / "exports" / "train")])
    _command("   ... and the eval run's trajectories",
             ["export", "--workspace", str(ws), "--split", "eval", "--out", str(ws / "exports" / "eval"),
              "--run-id", run_id])
    _command("audit: six leak checks, verdict line last (docs/design.md §8)", ["audit", "--workspace", str(ws), "--polymarket", str(world / "polymarket"), "--no-progress"])

    print(f"\ndemo finished in {time.perf_counter() - t_all:.0f}s; everything is under {ws}")
    print(f"  corpus funnel: {ws / 'corpus' / 'report.md'}\n  events funnel: {ws / 'events' / 'report.md'}")
    print(f"  run report:    {run_dir / 'report.md'}\n                 {run_dir / 'report.html'}")
    if (run_dir / "viewer" / "index.html").exists():
        print(f"  run viewer:    {run_dir / 'viewer' / 'index.html'} (from disk), or: forecast-env view --run {run_dir}")
    return 0
