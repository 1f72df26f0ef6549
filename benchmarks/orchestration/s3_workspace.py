"""A workspace on object storage (forecast_env/workspace/remote.py) over a real S3 server (moto's server mode, started
here as a subprocess on a free localhost port and stopped after).

`search`: push a built local workspace, then compare search latency on the local folder with the two ways
of serving the URL: `pull` (the whole corpus/index/events, then memory-mapped local files) and reading
the index's files from the bucket for each search (what any cache pays on a miss; a search as of the last
day touches every month, so a per-month cache misses on every month the first time).

`merge`: the corpus merge over the bucket with synthetic parts (benchmarks/corpus/merge.py's generator):
publish the parts (what the per-WARC stage publishes), then on a fresh scratch folder pull them, merge
(out of core, per-task memory bounded) and publish the store; time and peak memory of every step, the
bytes moved, the S3 server's own peak.

With `--on-nodes` the merge's keys, pair and store tasks run on Ray workers whose scratch is a third
folder (`forecast_env.workspace.task.NodeTask`: each fetches its inputs from the bucket and publishes its
outputs), and each task's own peak memory and bytes moved come from `FORECAST_ENV_TASK_LOG`.

usage:
  python -m benchmarks.orchestration.s3_workspace search --ws demo_ws [--queries 200]
  python -m benchmarks.orchestration.s3_workspace merge --parts /tmp/merge_bench/parts_1000000 --n 1000000 \
      --scratch /tmp/s3bench [--workers 2] [--engine local|ray] [--on-nodes]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_now_mb() -> float:
    with open("/proc/self/status") as fh:
        return round(next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024, 1)


def _hwm_mb(pid: int | str = "self", reset: bool = False) -> float:
    with open(f"/proc/{pid}/status") as fh:
        kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    if reset:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
    return round(kib / 1024, 1)


class Server:
    """moto's S3 server in a subprocess (its memory apart from ours)."""

    def __enter__(self) -> Server:
        import boto3

        port = _free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.endpoint = f"http://127.0.0.1:{port}"
        os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint})
        for _ in range(200):
            try:
                boto3.client("s3").create_bucket(Bucket="bench")
                break
            except Exception:
                time.sleep(0.05)
        return self

    def peak_mb(self) -> float:
        return _hwm_mb(self.proc.pid)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def bench_search(ws: Path, n_queries: int) -> dict:
    from forecast_env.retrieval.searcher import Searcher
    from forecast_env.workspace.remote import RemoteWorkspace, pull_workspace, push_workspace

    queries = ["election results", "central bank interest rates", "ceasefire talks", "box office weekend",
               "championship final", "earnings guidance", "court ruling appeal", "storm landfall"]
    scratch = Path(os.environ.setdefault("FORECAST_ENV_SCRATCH", "/tmp/s3bench_search_scratch"))
    shutil.rmtree(scratch, ignore_errors=True)
    out: dict = {}

    def lat(searcher: Searcher) -> dict:
        day = searcher.last_day
        searcher.search(queries[0], as_of=day, k=10)  # warm the query encoder
        times = []
        for i in range(n_queries):
            t = time.perf_counter()
            searcher.search(queries[i % len(queries)], as_of=day, k=10)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        return {"p50_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(0.95 * len(times)) - 1], 2)}

    with Server() as srv:
        url = "s3://bench/ws"
        t = time.perf_counter()
        push_workspace(ws, url)
        out["push_s"] = round(time.perf_counter() - t, 2)
        out["local"] = lat(Searcher.open(ws))
        t = time.perf_counter()
        local = pull_workspace(url)
        out["pull_s"] = round(time.perf_counter() - t, 2)
        out["pulled_bytes"] = _dir_bytes(local)
        out["index_bytes"] = _dir_bytes(local / "index")
        t = time.perf_counter()
        s = Searcher.open(url)  # everything equal already: only the markers are read and files hashed
        out["open_url_after_pull_s"] = round(time.perf_counter() - t, 2)
        out["pulled"] = lat(s)
        # a search that reads its index files from the bucket (a cache miss on every month it touches)
        remote = RemoteWorkspace.at(url)
        idx = sorted(remote.files("index/"))
        times = []
        for _ in range(5):
            t = time.perf_counter()
            remote.fs.cat([remote.key(r) for r in idx])
            times.append(time.perf_counter() - t)
        out["uncached_index_read_ms"] = round(statistics.median(times) * 1000, 1)
        out["index_files"] = len(idx)
        out["s3_server_peak_mb"] = srv.peak_mb()
    return out


def bench_merge(parts: Path, n: int, scratch: Path, workers: int, engine: str, on_nodes: bool = False) -> dict:
    from benchmarks.corpus import merge as merge_bench
    from forecast_env.config import load_config
    from forecast_env.corpus_build.merge import merge_parts
    from forecast_env.store import Workspace
    from forecast_env.workspace.remote import RemoteWorkspace, traffic
    from forecast_env.workspace.task import StagedWorkspace
    from forecast_env.workspace.tasklog import TASK_LOG

    cfg = load_config("corpus")
    out: dict = {"articles": n, "workers": workers, "engine": "ray" if on_nodes else engine, "on_nodes": on_nodes}
    if not any(parts.glob("*.articles.parquet")):
        t = time.perf_counter()
        merge_bench.generate(parts, n)
        out["gen_s"] = round(time.perf_counter() - t, 1)
    shutil.rmtree(scratch, ignore_errors=True)
    node_a = scratch / "node-a"  # where the per-WARC stage wrote the parts
    (node_a / "corpus").mkdir(parents=True)
    (node_a / "corpus" / "parts").symlink_to(parts.resolve())
    rels = sorted(f"corpus/parts/{p.name}" for p in parts.iterdir() if p.is_file() and not p.name.startswith(".")
                  and ".keys-" not in p.name)
    out["parts_bytes"] = sum((parts / Path(r).name).stat().st_size for r in rels)
    with Server() as srv:
        url = "s3://bench/ws"
        remote = RemoteWorkspace.at(url)
        _hwm_mb(reset=True)
        base = _rss_now_mb()
        t = time.perf_counter()
        remote.publish(node_a, relpaths=rels)
        out["publish_parts"] = {"s": round(time.perf_counter() - t, 1), "rss_before_mb": base,
                                "peak_mb": _hwm_mb(reset=True)}
        base = _rss_now_mb()
        node_b = scratch / "node-b"  # a node that never saw the parts
        t = time.perf_counter()
        RemoteWorkspace.at(url).pull(node_b, "corpus/parts/")
        out["pull_parts"] = {"s": round(time.perf_counter() - t, 1), "rss_before_mb": base,
                             "peak_mb": _hwm_mb(reset=True)}
        out["merge_rss_before_mb"] = _rss_now_mb()
        ws = Workspace.at(node_b, create=True)
        for d in (ws.articles_dir, ws.dropped_dir):
            d.mkdir(parents=True, exist_ok=True)
        remote_merge = None
        if on_nodes:
            # the merge's tasks on Ray workers whose scratch is another folder (a node without the driver's
            # copy): each task fetches its inputs from the bucket and publishes its outputs there
            node_c = scratch / "node-c"
            os.environ["FORECAST_ENV_SCRATCH"] = str(node_c)  # the local Ray workers inherit it
            os.environ[TASK_LOG] = str(node_c / "tasks.jsonl")
            remote_merge = StagedWorkspace(url, str(ws.root))
            # keys sidecars are what the nodes compute: none published or local yet
            for k in ws.parts_dir.glob("*.keys-*"):
                k.unlink()
        phases: dict[str, float] = {}
        t = time.perf_counter()
        res = merge_parts(ws, merge_bench.bench_parts(ws.parts_dir, cfg), cfg,
                          engine="ray" if on_nodes else engine, workers=workers, progress=False,
                          on_phase=lambda name: phases.__setitem__(name, _hwm_mb(reset=True)), remote=remote_merge)
        out["merge"] = {"s": round(time.perf_counter() - t, 1), "driver_peak_mb_per_phase": phases,
                        "worker_peak_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
                        "timings": res.timings, "driver_traffic": traffic()}
        if on_nodes:
            out["merge"]["tasks"] = _task_kinds(scratch / "node-c" / "tasks.jsonl", n)
        _hwm_mb(reset=True)
        base = _rss_now_mb()
        t = time.perf_counter()
        units = remote.publish(node_b, prefix="corpus/")
        out["publish_store"] = {"s": round(time.perf_counter() - t, 1), "rss_before_mb": base,
                                "peak_mb": _hwm_mb(reset=True),
                                "units": len(units)}
        out["store_bytes"] = _dir_bytes(ws.articles_dir) + _dir_bytes(ws.dropped_dir)
        out["keys_bytes"] = sum(p.stat().st_size for p in ws.parts_dir.glob("*.keys-*"))
        out["bytes_moved_per_article"] = round((2 * out["parts_bytes"] + out["store_bytes"] + out["keys_bytes"]) / n)
        out["s3_server_peak_mb"] = srv.peak_mb()
    return out


def _task_kinds(log: Path, n: int) -> dict:
    """Per task kind of a task log: count, wall, peak RSS (max, median), bytes fetched and published."""
    by: dict[str, list[dict]] = {}
    for line in log.read_text().splitlines():
        r = json.loads(line)
        by.setdefault(r["kind"], []).append(r)
    out = {}
    for kind, rs in sorted(by.items()):
        peaks = sorted(r["peak_rss_mb"] for r in rs if r["peak_rss_mb"])
        out[kind] = {"tasks": len(rs), "wall_s_sum": round(sum(r["wall_s"] for r in rs), 1),
                     "peak_rss_mb_max": peaks[-1] if peaks else None,
                     "peak_rss_mb_median": statistics.median(peaks) if peaks else None,
                     "fetched_mb": round(sum(r["fetched_bytes"] for r in rs) / 1e6, 1),
                     "published_mb": round(sum(r["published_bytes"] for r in rs) / 1e6, 1),
                     "bytes_per_article": round(sum(r["fetched_bytes"] + r["published_bytes"] for r in rs) / n)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("search")
    s.add_argument("--ws", type=Path, required=True)
    s.add_argument("--queries", type=int, default=200)
    m = sub.add_parser("merge")
    m.add_argument("--parts", type=Path, required=True)
    m.add_argument("--n", type=int, required=True)
    m.add_argument("--scratch", type=Path, required=True)
    m.add_argument("--workers", type=int, default=2)
    m.add_argument("--engine", default="local")
    m.add_argument("--on-nodes", action="store_true",
                   help="the merge's tasks on Ray workers that fetch from and publish to the bucket (NodeTask)")
    args = ap.parse_args()
    if args.cmd == "search":
        res = bench_search(args.ws, args.queries)
    else:
        res = bench_merge(args.parts, args.n, args.scratch, args.workers, args.engine, args.on_nodes)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
