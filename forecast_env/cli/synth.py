"""`forecast-env synth`: write a deterministic sample world (WARC files + Polymarket-format JSON)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from forecast_env.cli.common import add_common
from forecast_env.synth import PRESETS
from forecast_env.synth.phrasing import BANK_NAMES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synth",
        help="generate a sample world: CC-NEWS-style WARC files, Polymarket-format JSON, truth.json",
        description="Generate a deterministic fictional world that the real pipeline consumes exactly as it "
        "would consume real data (same seed -> byte-identical files).",
    )
    p.add_argument("--out", default=None, help="output folder")
    p.add_argument("--serve", default=None, metavar="DIR",
                   help="serve the world in DIR (written by --out) on 127.0.0.1 in the real layouts (CC-NEWS "
                   "listings and WARC files; Polymarket Gamma/CLOB/Data API) and print the --set lines that "
                   "point the clients at it; see forecast_env/synth/serve.py")
    p.add_argument("--port", type=int, default=0, help="with --serve: the port (default: one the OS picks)")
    p.add_argument("--preset", default="micro", choices=list(PRESETS),
                   help="size: micro (~hundreds of articles, tests), gate (34 events, ~550 articles: the "
                   "acceptance test), tiny (~3k, demo), small (~20k), bench (1M; writes the article store directly)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--phrasing", default=None, choices=BANK_NAMES,
                   help="the bank the news writes its evidence with (default: by the seed, even a, odd b)")
    add_common(p, ())
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from forecast_env.synth import synthesize

    if args.serve:
        return run_serve(args)
    if not args.out:
        print("error: give --out DIR (write a world) or --serve DIR (serve one)", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    summary = synthesize(Path(args.out), preset=args.preset, seed=args.seed, progress=not args.no_progress,
                         phrasing=args.phrasing)
    dt = time.perf_counter() - t0
    parts = ", ".join(f"{k}={v}" for k, v in summary.items() if isinstance(v, (int, float, str)))
    print(f"sample world '{args.preset}' (seed {args.seed}) written to {args.out} in {dt:.1f}s: {parts}")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Serve a written world until Ctrl-C (`synth --serve DIR`)."""
    from forecast_env.errors import ConfigError
    from forecast_env.synth.serve import serve_forever

    world = Path(args.serve)
    if not (world / "news").is_dir():
        raise ConfigError(f"{world} holds no sample world (no news/ folder); write one first: "
                          f"forecast-env synth --out {world}")
    serve_forever(world, port=args.port, out=lambda line: print(line, flush=True))
    return 0
