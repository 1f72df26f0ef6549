"""`build --recipe` on a served sample world: wall time and the share of every stage, then a second run.

usage: python -m benchmarks.orchestration.recipe_build [preset] [--workers N]   (default preset: small)

One server on 127.0.0.1:0 (`synth/serve.py`) serves the world's WARC files in the Common Crawl
layout (streamed by the corpus build) and its Polymarket cache as Gamma / CLOB / Data API
(`synth/serve_polymarket.py`): the downloader and the sources run exactly as against the real
services. The recipe has the world's months and splits. CPU seconds count this process and its
finished pool workers.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from forecast_env.recipe import load_recipe, render_outcome, run_recipe
from forecast_env.synth import serve_polymarket as sp
from forecast_env.synth import synthesize
from forecast_env.synth.serve import WorldServer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("preset", nargs="?", default="small")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", default=None, help="keep the world and workspace in this folder")
    ap.add_argument("--ws", default=None, help="workspace name under the folder (default ws)")
    args = ap.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_recipe_"))
    world, ws = root / "world", root / (args.ws or "ws")
    t0 = time.perf_counter()
    if not (world / "truth.json").exists():
        synthesize(world, preset=args.preset, seed=0, progress=False)
    truth = json.loads((world / "truth.json").read_text())
    with WorldServer(world) as server:
        months = [f"{f[-7:-3]}-{f[-2:]}" for f in server.months()]
        print(f"world {args.preset}: {len(server.files)} WARC files over {len(months)} months, "
              f"{len(truth['events'])} events ({time.perf_counter() - t0:.1f}s to generate)", flush=True)
        recipe_file = root / "recipe.yaml"
        recipe_file.write_text(yaml.safe_dump({
            "name": f"served-{args.preset}", "news": {"cc_news": f"{months[0]}..{months[-1]}", "workers": args.workers},
            "splits": {s: {"start": truth["splits"][s][0], "end": truth["splits"][s][1]} for s in ("train", "eval")},
        }))
        recipe = load_recipe(recipe_file, [*server.client_settings(), "events.polymarket.requests_per_second=0"])
        for attempt in ("first run (empty workspace)", "second run (nothing to do)"):
            t1 = time.perf_counter()
            outcome = run_recipe(recipe, ws, progress=False, say=lambda s: print(s, flush=True))
            wall = time.perf_counter() - t1
            print(f"\n{attempt}: {wall:.1f} s wall, exit status {outcome.exit_status}, "
                  f"{server.stats()['requests']} requests served so far", flush=True)
            print(render_outcome(outcome), flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\npeak RSS: this process {peak:.0f} MB, largest child {kids:.0f} MB; requests served: "
          f"{sum(sp.request_counts.get(world.resolve(), {}).values())}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
