"""The whole build on a local multi-node Ray cluster over a real S3 server: 1 node against 3 nodes.

The chain of tests/system/cluster/test_cluster_build.py at a size where work shows: a generated sample world
(`--preset`, default `small`: 42 WARC files) served over HTTP in the Common Crawl layout, `corpus build
--cc-news` (per-WARC parts on the nodes, then the merge's keys / pair / store tasks on the nodes),
`index build` (months on the nodes) and `events build`, with the workspace on moto's S3 server (started
here). Each worker node runs under bubblewrap with only its own scratch writable and none of the
driver's folders visible (tests/system/cluster/_cluster.py). For each cluster shape (`--shapes`, `NxC`: N
worker nodes of C CPUs each) it reports wall time per stage, the bytes moved to and from the bucket
per kept article (every node task's own count from `FORECAST_ENV_TASK_LOG`, plus the driver's), and per
task kind the peak resident memory of the task's process during the task. A one-process local build
of the same chain (`--workers`) is timed in the same run and every cluster build must equal it byte
for byte (store, index, events, snapshot ids).

usage:
  python -m benchmarks.orchestration.cluster_nodes [--preset small] [--world DIR] [--shapes 1x2,3x1] [--workers 2]
      [--embed model|static] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _months(world: Path) -> str:
    import re

    got = sorted({f"{m.group(1)}-{m.group(2)}" for p in (world / "news").glob("*.warc.gz")
                  if (m := re.match(r"CC-NEWS-(\d{4})(\d{2})", p.name))})
    if not got:
        raise SystemExit(f"{world}/news holds no CC-NEWS-YYYYMM... WARC files")
    return f"{got[0]}..{got[-1]}"


def _chain(ws: str, served: str, world: Path, engine: list[str], embed: list[str]) -> dict[str, float]:
    """corpus build (streamed from the served world), index build, events build; wall seconds per stage."""
    from forecast_env.cli.main import main

    sets = ["--set", f"corpus.source.base_url={served}", "--set", "corpus.source.requests_per_second=1000"]
    times = {}
    t = time.perf_counter()
    assert main(["corpus", "build", "--cc-news", _months(world), "--workspace", ws, "--no-progress",
                 *engine, *sets]) == 0
    times["corpus_s"] = time.perf_counter() - t
    t = time.perf_counter()
    assert main(["index", "build", "--workspace", ws, "--no-progress", *engine, *embed]) == 0
    times["index_s"] = time.perf_counter() - t
    t = time.perf_counter()
    assert main(["events", "build", "--polymarket", str(world / "polymarket"), "--workspace", ws,
                 "--no-progress"]) == 0
    times["events_s"] = time.perf_counter() - t
    times["total_s"] = sum(times.values())
    return {k: round(v, 1) for k, v in times.items()}


def _digests(ws: Path) -> dict[str, str]:
    import hashlib

    out = {}
    for p in sorted(ws.rglob("*")):
        rel = p.relative_to(ws).as_posix()
        if (not p.is_file() or not rel.startswith(("corpus/articles/", "corpus/dropped/", "index/", "events/"))
                or p.name in ("manifest.json", "report.json", "report.md")  # build times, paths
                or any(s.startswith(".") for s in rel.split("/"))):
            continue
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    for artifact in ("corpus", "index"):
        out[f"{artifact}/snapshot_id"] = json.loads((ws / artifact / "manifest.json").read_text())["snapshot_id"]
    return out


def _task_table(records: list[dict]) -> dict[str, dict]:
    by: dict[str, list[dict]] = {}
    for r in records:
        by.setdefault(r["kind"], []).append(r)
    out = {}
    for kind, rs in sorted(by.items()):
        peaks = [r["peak_rss_mb"] for r in rs if r["peak_rss_mb"]]
        out[kind] = {"tasks": len(rs), "wall_s_sum": round(sum(r["wall_s"] for r in rs), 1),
                     "peak_rss_mb_max": max(peaks) if peaks else None,
                     "peak_rss_mb_median": round(statistics.median(peaks), 1) if peaks else None,
                     "fetched_mb": round(sum(r["fetched_bytes"] for r in rs) / 1e6, 2),
                     "published_mb": round(sum(r["published_bytes"] for r in rs) / 1e6, 2),
                     "nodes": len({r["node"] for r in rs}), "errors": sum(r["error"] is not None for r in rs)}
    return out


def run_shape(shape: str, world: Path, served: str, embed: list[str], tmp: Path, ref: dict[str, str]) -> dict:
    from forecast_env.retrieval.model_cache import cache_root
    from forecast_env.workspace.remote import pull_workspace, traffic
    from tests.system.cluster._cluster import DRIVER_ENV, LocalRayCluster

    n, cpus = (int(x) for x in shape.lower().split("x"))
    os.environ.update(DRIVER_ENV)
    root = Path(tempfile.mkdtemp(prefix="rayb-", dir="/tmp"))  # short: socket paths stop at 107 bytes
    cluster = LocalRayCluster(root, workers=n, cpus=cpus, hidden=(tmp,), shared=(cache_root(),))
    t = time.perf_counter()
    cluster.start()
    up_s = time.perf_counter() - t
    url = f"s3://bench/{shape}"
    before = traffic()
    try:
        times = _chain(url, served, world, ["--engine", "ray", "--ray-address", cluster.address], embed)
    finally:
        import ray

        ray.shutdown()
        cluster.stop()
    driver = {k: v - before[k] for k, v in traffic().items()}
    records = [json.loads(line) for node in cluster.workers if (node.scratch / "tasks.jsonl").exists()
               for line in (node.scratch / "tasks.jsonl").read_text().splitlines()]
    pulled = pull_workspace(url, tmp / f"pulled-{shape}")
    got = _digests(pulled)
    differ = sorted(k for k in set(got) | set(ref) if got.get(k) != ref.get(k))
    same = not differ
    kept = json.loads((pulled / "corpus" / "manifest.json").read_text())["counts"]["kept"]
    node_bytes = sum(r["fetched_bytes"] + r["published_bytes"] for r in records)
    driver_bytes = driver["fetched_bytes"] + driver["published_bytes"]
    scratch_mb = {node.name: round(sum(p.stat().st_size for p in node.scratch.rglob("*") if p.is_file()) / 1e6, 1)
                  for node in cluster.workers}
    shutil.rmtree(root, ignore_errors=True)
    return {"shape": shape, "nodes": n, "cpus_per_node": cpus, "cluster_up_s": round(up_s, 1), **times,
            "same_bytes_as_local": same, "differ": differ[:20], "kept_articles": kept,
            "bytes_per_article": {"nodes": round(node_bytes / kept), "driver": round(driver_bytes / kept),
                                  "total": round((node_bytes + driver_bytes) / kept)},
            "driver_traffic": driver, "node_scratch_mb": scratch_mb, "tasks": _task_table(records)}


def main() -> int:
    from benchmarks.orchestration.s3_workspace import Server
    from forecast_env.synth import synthesize
    from forecast_env.synth.serve import WorldServer
    from forecast_env.workspace.tasklog import TASK_LOG

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--world", type=Path, default=None, help="an already generated world (else one is generated)")
    ap.add_argument("--shapes", default="1x2,3x1", help="cluster shapes NxC: N worker nodes of C CPUs each")
    ap.add_argument("--workers", type=int, default=2, help="processes of the local reference build")
    ap.add_argument("--embed", choices=("model", "static"), default="model",
                    help="the index's embedder: the default model (what users run) or the static test one")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    from tests.system.cluster._cluster import bwrap_works

    if not bwrap_works():
        raise SystemExit("bubblewrap (bwrap) cannot make a mount namespace here: the nodes' private disks need it")
    tmp = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    world = args.world
    if world is None:
        world = tmp / "world"
        t = time.perf_counter()
        synthesize(world, preset=args.preset, seed=0, progress=False)
        print(f"generated {args.preset} in {time.perf_counter() - t:.1f} s", flush=True)
    embed = ["--set", "embed.backend=static"] if args.embed == "static" else []
    os.environ[TASK_LOG] = "{scratch}/tasks.jsonl"  # reaches the nodes through Ray's runtime_env
    os.environ["FORECAST_ENV_SCRATCH"] = str(tmp / "driver-scratch")  # a fresh driver: it fetches everything
    results: dict = {"preset": args.preset, "embed": args.embed, "machine_cores": os.cpu_count()}
    with Server(), WorldServer(world) as served:
        ws = tmp / "local"
        results["local"] = _chain(str(ws), served.url, world, ["--workers", str(args.workers)], embed)
        results["local"]["workers"] = args.workers
        ref = _digests(ws)
        print("local", json.dumps(results["local"]), flush=True)
        results["clusters"] = []
        for shape in args.shapes.split(","):
            res = run_shape(shape.strip(), world, served.url, embed, tmp, ref)
            print(json.dumps(res, indent=1), flush=True)
            results["clusters"].append(res)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    bad = [r["shape"] for r in results["clusters"] if not r["same_bytes_as_local"]]
    if bad:
        print(f"NOT the local build's bytes: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
