"""`forecast-env run | report | export`: benchmark runs, their reports, training-data export."""

from __future__ import annotations

import argparse
from pathlib import Path

from forecast_env.cli.common import add_common, run_dir_arg, section_config
from forecast_env.enums import ENGINES, PLAY_MODES
from forecast_env.errors import RunError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run agents over a split's events (parallel, resumable); prints the run dir")
    p.add_argument("--workspace", required=True, help="workspace with corpus, index and events")
    p.add_argument("--agents", default=None, help="comma-separated agents (default: benchmark.agents), "
                                                  "e.g. uniform,base_rate,retrieval,llm")
    p.add_argument("--split", default=None, choices=["train", "eval", "all"])
    p.add_argument("--rollouts", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--workers", type=int, default=None, help="parallel episodes (default: number of cores)")
    p.add_argument("--engine", default=None, choices=ENGINES)
    p.add_argument("--ray-address", default=None, help="engine ray: address of an existing cluster (default: local Ray)")
    p.add_argument("--run-id", default=None, help="name of the run; rerun with the same id to resume")
    p.add_argument("--events", default=None, help="comma-separated event ids (default: every event of the split)")
    p.add_argument("--mode", default="episode", choices=PLAY_MODES,
                   help="episode: one event per episode; world: every question of the split on one shared clock")
    p.add_argument("--start", default=None, help="world mode: first day of the calendar (default: the split's)")
    p.add_argument("--end", default=None, help="world mode: last day of the calendar (default: the split's)")
    p.add_argument("--no-progress", action="store_true")
    add_common(p, ["benchmark", "env"])
    p.set_defaults(func=run_cmd)

    p = sub.add_parser("report", help="build report.md / report.html / report.json of a run")
    p.add_argument("--run", default=None, help="run directory WS/runs/ID")
    p.add_argument("--workspace", default=None)
    p.add_argument("--run-id", default=None)
    p.add_argument("--out", default=None, help="output folder (default: the run directory)")
    p.add_argument("--compare", default=None, help="the other mode's run (directory, or id with --workspace) to "
                                                   "show side by side (default: found in the same runs/ folder)")
    p.add_argument("--no-compare", action="store_true", help="show no run of the other mode beside this one")
    p.add_argument("--forecastbench-fixed-effects", default=None, metavar="FILE",
                   help="ForecastBench's question fixed effects (CSV, Parquet or its question_fixed_effects JSON) "
                        "for the ForecastBench section (default: estimated from the run's forecasters)")
    add_common(p, ["benchmark"])
    p.set_defaults(func=report_cmd)

    p = sub.add_parser("export", help="export one split's prompts (and a run's trajectories) as training data")
    p.add_argument("--workspace", required=True)
    p.add_argument("--split", required=True, choices=["train", "eval"])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--run-id", default=None, help="also export this run's trajectories (episodes of the split)")
    p.add_argument("--no-text", action="store_true", help="doc ids only: drop article text from tool results")
    p.add_argument("--format", default="hf,parquet,jsonl", help="comma-separated: hf, parquet, jsonl")
    p.add_argument("--no-progress", action="store_true")
    add_common(p, ())
    p.set_defaults(func=export_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    from forecast_env.eval.runs.runner import run_benchmark

    bench = section_config(args, "benchmark")
    if args.ray_address:
        bench["ray_address"] = args.ray_address
    env_cfg = section_config(args, "env")
    agents = [a.strip() for a in args.agents.split(",") if a.strip()] if args.agents else None
    events = [e.strip() for e in args.events.split(",") if e.strip()] if args.events else None
    if args.mode != "world" and (args.start or args.end):
        raise RunError("--start/--end narrow a world's calendar: add --mode world")
    run_dir = run_benchmark(args.workspace, agents, split=args.split, rollouts=args.rollouts, seed=args.seed,
                            workers=args.workers, engine=args.engine, run_id=args.run_id, config=bench,
                            progress=not args.no_progress, event_ids=events, env_config=env_cfg, mode=args.mode,
                            world_start=args.start, world_end=args.end)
    if args.no_progress:  # the runner prints its summary table only with progress on
        import polars as pl

        from forecast_env.eval.runs.runner import format_summary
        from forecast_env.eval.runs.store import read_record

        rec = read_record(run_dir)
        print(format_summary(pl.DataFrame(rec["summary"]), rec))
    print(f"run directory: {run_dir}")
    print(f"next: forecast-env report --run {run_dir}")
    return 0


def report_cmd(args: argparse.Namespace) -> int:
    from forecast_env.eval.report.render import build_report

    run_dir = run_dir_arg(args)
    compare: Path | bool | None = False if args.no_compare else None
    if args.compare:
        given = Path(args.compare)
        if not given.is_dir() and args.workspace:
            from forecast_env.store import Workspace

            given = Workspace.at(args.workspace).runs_dir / args.compare
        compare = given
    paths = build_report(run_dir, out=args.out, config=section_config(args, "benchmark"), compare=compare,
                         forecastbench_fixed_effects=args.forecastbench_fixed_effects)
    print(Path(paths["markdown"]).read_text())
    print(f"markdown: {paths['markdown']}\nhtml:     {paths['html']}\njson:     {paths['json']}")
    return 0


def export_cmd(args: argparse.Namespace) -> int:
    from forecast_env.eval.runs.export import export

    summary = export(args.workspace, args.split, args.out, run_id=args.run_id,
                     formats=[f for f in args.format.split(",") if f.strip()], include_text=not args.no_text,
                     progress=not args.no_progress)
    for name, paths in summary["paths"].items():
        for fmt, path in paths.items():
            print(f"{name:13s} {fmt:8s} {path}")
    return 0
