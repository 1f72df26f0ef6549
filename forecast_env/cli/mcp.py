"""`forecast-env mcp`: serve the environment's tools to one MCP client (an agent harness)."""

from __future__ import annotations

import argparse
import logging
import sys

from forecast_env.cli.common import add_common, section_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve the environment over the Model Context Protocol (stdio or HTTP) to one "
                                   "client; the episode is recorded like a runner episode")
    p.add_argument("--workspace", required=True, help="workspace with corpus, index and events")
    p.add_argument("--split", default="eval", choices=["train", "eval", "all"])
    p.add_argument("--event", action="append", default=[], metavar="ID",
                   help="serve only this event (repeatable; default: every event of the split, one after another)")
    p.add_argument("--world", action="store_true", help="world mode: every open question on one shared clock")
    p.add_argument("--start", default=None, help="world mode: first day (default: the split's start)")
    p.add_argument("--end", default=None, help="world mode: last day (default: the split's end)")
    p.add_argument("--transport", default="stdio", choices=["stdio", "http", "unix"],
                   help="stdio (the client starts the server), http (token-gated), or unix (one client on "
                        "--socket: for sandboxed harnesses, with adapters/mcp_relay.py inside the sandbox)")
    p.add_argument("--socket", default=None, help="unix: the socket path to listen on")
    p.add_argument("--host", default="127.0.0.1", help="http: interface to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8765, help="http: port")
    p.add_argument("--token", default=None, help="http: bearer token (default: a random one, printed at start)")
    p.add_argument("--label", default="harness", help="the agent name the recorded run carries")
    p.add_argument("--run-id", default=None, help="name of the recorded run (default: time-stamped)")
    add_common(p, ["env"])
    p.set_defaults(func=mcp_cmd)


def mcp_cmd(args: argparse.Namespace) -> int:
    from forecast_env.adapters.mcp import HarnessSession, serve_http, serve_stdio, serve_unix
    from forecast_env.errors import ForecastEnvError

    if args.transport == "unix" and not args.socket:
        raise ForecastEnvError("--transport unix needs --socket PATH")

    # stdout is the protocol channel under stdio: every log line goes to stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    env_cfg = section_config(args, "env")
    world_options = {k: v for k, v in (("start", args.start), ("end", args.end)) if v}
    session = HarnessSession(args.workspace, split=args.split, event_ids=args.event or None, label=args.label,
                             run_id=args.run_id, env_config=env_cfg, world=args.world,
                             world_options=world_options)
    print(f"forecast-env mcp: {len(session.event_ids)} episode(s) of split {args.split}; recording to "
          f"{session.run_dir}", file=sys.stderr, flush=True)
    if args.transport == "stdio":
        serve_stdio(session)
    elif args.transport == "unix":
        serve_unix(session, args.socket)
    else:
        serve_http(session, host=args.host, port=args.port, token=args.token)
    return 0
