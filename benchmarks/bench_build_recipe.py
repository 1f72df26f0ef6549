"""`build --recipe` on a served sample world: wall time and the share of every stage, then a second run.

usage: python benchmarks/bench_build_recipe.py [preset] [--workers N]   (default preset: small)

The world's Polymarket cache is served over HTTP on 127.0.0.1:0 by `synth/serve_polymarket.handle`
(the downloader runs exactly as against the real APIs); its WARC files are laid out as a Common
Crawl mirror (`crawl-data/CC-NEWS/YYYY/MM/` + `warc.paths.gz`) read through `corpus.source.base_url`.
The recipe is `small`'s shape with the world's months and splits.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import shutil
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

from forecast_env.eval.recipe import load_recipe, render_outcome, run_recipe
from forecast_env.synth import serve_polymarket as sp
from forecast_env.synth import synthesize


def mirror(world: Path, root: Path) -> list[str]:
    months: dict[str, list[str]] = {}
    for f in sorted((world / "news").glob("*.warc.gz")):
        stamp = f.name.split("-")[2]
        cc = f"crawl-data/CC-NEWS/{stamp[:4]}/{stamp[4:6]}/{f.name}"
        (root / cc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, root / cc)
        months.setdefault(f"{stamp[:4]}-{stamp[4:6]}", []).append(cc)
    for month, paths in months.items():
        y, m = month.split("-")
        (root / f"crawl-data/CC-NEWS/{y}/{m}/warc.paths.gz").write_bytes(
            gzip.compress("".join(p + "\n" for p in paths).encode(), mtime=0))
    return sorted(months)


def serve(world: Path) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            status, headers, body = sp.handle("GET", url.path, parse_qs(url.query), world) or (404, {}, b"")
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("preset", nargs="?", default="small")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", default=None, help="keep the world and workspace in this folder")
    args = ap.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_recipe_"))
    world, cc, ws = root / "world", root / "cc", root / "ws"
    t0 = time.perf_counter()
    if not (world / "truth.json").exists():
        synthesize(world, preset=args.preset, seed=0, progress=False)
    months = mirror(world, cc)
    truth = json.loads((world / "truth.json").read_text())
    print(f"world {args.preset}: {len(list((world / 'news').glob('*.warc.gz')))} WARC files over {len(months)} "
          f"months, {len(truth['events'])} events ({time.perf_counter() - t0:.1f}s to generate and lay out)")
    recipe_file = root / "recipe.yaml"
    recipe_file.write_text(yaml.safe_dump({
        "name": f"served-{args.preset}", "news": {"cc_news": ",".join(months), "workers": args.workers},
        "splits": {s: {"start": truth["splits"][s][0], "end": truth["splits"][s][1]} for s in ("train", "eval")},
    }))
    server, base = serve(world)
    try:
        sets = [*sp.client_settings(base), "events.polymarket.requests_per_second=0", f"corpus.source.base_url={cc}"]
        recipe = load_recipe(recipe_file, sets)
        for attempt in ("first run (empty workspace)", "second run (nothing to do)"):
            t1 = time.perf_counter()
            outcome = run_recipe(recipe, ws, progress=False, say=lambda s: None)
            wall = time.perf_counter() - t1
            print(f"\n{attempt}: {wall:.1f} s wall, exit status {outcome.exit_status}")
            print(render_outcome(outcome))
    finally:
        server.shutdown()
        server.server_close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\npeak RSS: this process {peak:.0f} MB, largest child {kids:.0f} MB; requests served: "
          f"{sum(sp.request_counts.get(world.resolve(), {}).values())}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
