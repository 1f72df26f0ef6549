"""`forecast-env view`: browse a run (its questions, forecasts, market and what the agents did) in a browser."""

from __future__ import annotations

import argparse
from pathlib import Path

from forecast_env.cli.common import add_common, run_dir_arg
from forecast_env.errors import RunError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="browse a run in a browser: a local server on 127.0.0.1, or static files (--out)")
    p.add_argument("--run", default=None, help="run directory WS/runs/ID")
    p.add_argument("--workspace", default=None, help="with --run-id: the workspace holding the run")
    p.add_argument("--run-id", default=None)
    p.add_argument("--compare", default=None, help="a second run to show beside it: its directory, or its id (in the "
                                                   "same runs/ folder)")
    p.add_argument("--out", default=None, help="write static files to this folder (open its index.html from disk) "
                                               "instead of serving")
    p.add_argument("--events", default=None, help="comma-separated event ids: only these questions")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-open", action="store_true", help="do not open a browser")
    add_common(p, ())
    p.set_defaults(func=view_cmd)


def view_cmd(args: argparse.Namespace) -> int:
    from forecast_env.eval.viewer import view

    run_dir = run_dir_arg(args)
    compare: Path | None = None
    if args.compare:
        compare = Path(args.compare)
        if not compare.is_dir():
            if args.workspace:
                from forecast_env.store import Workspace

                compare = Workspace.at(args.workspace).runs_dir / args.compare
            else:
                compare = run_dir.parent / args.compare
    events = [e.strip() for e in args.events.split(",") if e.strip()] if args.events else None
    if args.port < 0 or args.port > 65535:
        raise RunError(f"--port {args.port}: give 0 (a free port) or 1..65535")
    index = view(run_dir, compare=compare, out=args.out, events=events, port=args.port, open_browser=not args.no_open)
    if index is not None:
        print(f"viewer: {index}")
    return 0
