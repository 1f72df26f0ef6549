"""`forecast-env release | score`: freeze a split as a benchmark release; score a run against one."""

from __future__ import annotations

import argparse

from forecast_env.cli.common import add_common, section_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("release", help="freeze a split (events, corpus snapshot, index hash, configs; no schedule "
                                       "dates) into OUT/release.json")
    p.add_argument("--workspace", required=True)
    p.add_argument("--split", default="eval", choices=["train", "eval"])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--name", default=None, help="a name for the release (default: workspace-split)")
    add_common(p, ["env"])
    p.set_defaults(func=release_cmd)

    p = sub.add_parser("score", help="check that a run was made against a release, then write its report")
    p.add_argument("--release", required=True, help="release folder (or its release.json)")
    p.add_argument("--run", required=True, help="run directory WS/runs/ID (runner, MCP or verifiers)")
    p.add_argument("--out", default=None, help="report folder (default: the run directory)")
    add_common(p, ["benchmark"])
    p.set_defaults(func=score_cmd)


def release_cmd(args: argparse.Namespace) -> int:
    import json

    from forecast_env.eval.runs.release import write_release

    path = write_release(args.workspace, args.split, args.out, env_config=section_config(args, "env"),
                         name=args.name)
    data = json.loads(path.read_text())
    print(f"release {data['release_id']} ({data['name']}): {len(data['event_ids'])} events of split {data['split']}")
    print(f"written: {path}")
    print(f"next: play it (forecast-env run / mcp), then forecast-env score --release {path.parent} --run RUN_DIR")
    return 0


def score_cmd(args: argparse.Namespace) -> int:
    from forecast_env.eval.runs.release import score_run

    paths = score_run(args.release, args.run, out=args.out, config=section_config(args, "benchmark"))
    print(f"the run matches the release; report: {paths['markdown']}")
    return 0
