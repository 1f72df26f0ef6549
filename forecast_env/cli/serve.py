"""`forecast-env serve --openenv`: serve many concurrent OpenEnv sessions of the environment in one process."""

from __future__ import annotations

import argparse
import logging
import sys

from forecast_env.cli.common import add_common, section_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the environment to many concurrent clients (--openenv: OpenEnv's "
                                     "WebSocket session protocol); every episode is recorded as a run part")
    p.add_argument("--openenv", action="store_true", required=True,
                   help="serve on openenv-core's server types (the only protocol `serve` speaks today)")
    p.add_argument("--workspace", required=True, help="workspace with corpus, index and events")
    p.add_argument("--split", default="eval", choices=["train", "eval", "all"])
    p.add_argument("--event", action="append", default=[], metavar="ID",
                   help="serve only this event (repeatable; default: every event of the split)")
    p.add_argument("--unit", default="event", choices=["event", "date"],
                   help="what one session plays: a whole event (default) or one (event, forecast date)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8770, help="port (default 8770)")
    p.add_argument("--max-sessions", type=int, default=64, help="concurrent sessions admitted (default 64)")
    p.add_argument("--idle-timeout", type=float, default=900.0, metavar="SECONDS",
                   help="close a session whose client sent nothing for this long (its episode recorded "
                        "incomplete, its slot freed; default 900; 0: never)")
    p.add_argument("--token", default=None, help="bearer token (default: a random one, printed at start)")
    p.add_argument("--label", default="openenv", help="the agent name the recorded run carries")
    p.add_argument("--run-id", default=None, help="name of the recorded run (default: time-stamped)")
    add_common(p, ["env"])
    p.set_defaults(func=serve_cmd)


def serve_cmd(args: argparse.Namespace) -> int:
    from forecast_env.errors import ForecastEnvError

    try:
        from forecast_env.adapters.openenv import serve_forever
    except ImportError as exc:
        raise ForecastEnvError(f"serve --openenv needs the openenv extra ({exc}); install it with "
                               "pip install -c constraints.txt -e '.[openenv]'") from exc
    if args.max_sessions < 1:
        raise ForecastEnvError(f"--max-sessions {args.max_sessions}: give at least 1")
    if not args.idle_timeout >= 0:
        raise ForecastEnvError(f"--idle-timeout {args.idle_timeout}: give seconds (0: never)")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    rec = serve_forever(args.workspace, host=args.host, port=args.port, split=args.split, token=args.token,
                        max_sessions=args.max_sessions, idle_timeout=args.idle_timeout or None, unit=args.unit,
                        label=args.label, run_id=args.run_id,
                        env=section_config(args, "env"), event_ids=args.event or None,
                        say=lambda s: print(s, file=sys.stderr, flush=True))
    print(f"run {rec['run_id']}: {rec.get('rollouts_recorded', 0)} episode(s) recorded, status {rec['status']}",
          file=sys.stderr, flush=True)
    return 0
