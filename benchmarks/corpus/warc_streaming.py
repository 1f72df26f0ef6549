"""Streaming WARC files from an HTTP server vs reading them from disk (corpus_build/stream.py).

Three figures, all against `synth/serve.py` running in its own process on 127.0.0.1:

1. throughput: the per-file stages (`pipeline.process_warc`) over the same news WARC read from disk
   and streamed, alternately, `--repeats` times; records/s of the client process (CPU time, which
   a loaded machine disturbs less than wall time) and wall records/s;
2. memory: one spawned worker runs `pipeline.run_part` (what a build's worker runs) over a file made
   here of `--big-mb` MB (news pages, each carrying a ~190 KB incompressible script, so a 1 GB file
   has a few thousand records), streamed, and over a file of `--small-mb` MB: the worker's peak RSS
   must not grow with the file;
3. resumes: the big file streamed whole with `--resets` connection resets planted at spread-out
   bytes: bytes the client received and bytes the server sent, over the file size.

With `--real DIR`, every WARC file under DIR (e.g. the public test files of warcio and
fastwarc) is also served and built streamed and from disk, and the two stores compared.

Usage: .venv/bin/python -m benchmarks.corpus.warc_streaming [--big-mb 1024] [--small-mb 64] [--resets 5]
       [--repeats 3] [--real DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import io
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

NEWS_NAME = "CC-NEWS-20250305000000-{:05d}.warc.gz"


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------


def _pages(world: Path) -> list[tuple[str, bytes, list[tuple[str, str]]]]:
    from warcio.archiveiterator import ArchiveIterator

    out = []
    for path in sorted((world / "news").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            try:
                for r in ArchiveIterator(fh):
                    if r.rec_type == "response" and r.http_headers.get_statuscode() == "200":
                        out.append((r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read(),
                                    r.http_headers.headers))
            except Exception:  # the world's planted truncated file
                pass
    return out


def make_warc(path: Path, pages: list, target_bytes: int, pad_bytes: int, seed: int = 0) -> int:
    """Write a WARC of news pages (URLs made unique) until it reaches `target_bytes`; returns records."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    rng = random.Random(seed)
    written, n = 0, 0
    with open(path, "wb") as out:
        while written < target_bytes:
            url, payload, headers = pages[n % len(pages)]
            url = f"{url}{'&' if '?' in url else '?'}copy={n}"
            if pad_bytes:
                blob = base64.b64encode(rng.randbytes(pad_bytes * 3 // 4)).decode()
                payload = payload.replace(b"</head>", f'<script>var blob="{blob}";</script></head>'.encode(), 1)
            buf = io.BytesIO()
            w = WARCWriter(buf, gzip=False, warc_version="1.0")
            http = StatusAndHeaders("200 OK", [(k, v) for k, v in headers if k.lower() != "content-length"],
                                    protocol="HTTP/1.1")
            rec = w.create_warc_record(url, "response", payload=io.BytesIO(payload), length=None, http_headers=http,
                                       warc_headers_dict={"WARC-Record-ID": f"<urn:uuid:bench-{seed}-{n}>",
                                                          "WARC-Date": "2025-03-05T12:00:00Z"})
            w.write_record(rec)
            member = gzip.compress(buf.getvalue(), compresslevel=6, mtime=0)
            out.write(member)
            written += len(member)
            n += 1
    return n


# ---------------------------------------------------------------------------------------------
# the server, in its own process
# ---------------------------------------------------------------------------------------------


def _serve(world: str, faults: list[dict], conn) -> None:
    from forecast_env.synth.serve import Fault, WorldServer

    with WorldServer(world) as server:
        for f in faults:
            name = f.pop("name", "*")
            server.plant(name, Fault(**f))
        conn.send(server.url)
        conn.recv()  # until told to stop
        conn.send(server.stats()["bytes_sent"])


class Served:
    def __init__(self, world: Path, faults: list[dict] | None = None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(str(world), faults or [], child), daemon=True)

    def __enter__(self) -> Served:
        self.proc.start()
        self.url = self.conn.recv()
        return self

    def stop(self) -> dict:
        self.conn.send("stop")
        sent = self.conn.recv()
        self.proc.join(10)
        return sent

    def __exit__(self, *exc: object) -> None:
        if self.proc.is_alive():
            self.proc.kill()


def _config(base_url: str) -> dict:
    from forecast_env.config import load_config

    return load_config("corpus", overrides={"source.base_url": base_url, "source.requests_per_second": 100.0})


def _source(url: str, name: str):
    from forecast_env.corpus_build.source import Source

    return Source(name=name, uri=url, cc_path=f"crawl-data/CC-NEWS/2025/03/{name}")


# ---------------------------------------------------------------------------------------------
# 1. throughput
# ---------------------------------------------------------------------------------------------


def throughput(world: Path, name: str, repeats: int) -> dict:
    from forecast_env.corpus_build.file_stages import _tools, process_warc

    path = world / "news" / name
    rows = {"disk": [], "stream": []}
    with Served(world) as srv:
        cfg = _config(srv.url)
        _tools(cfg)  # the language model loaded once, before any timing
        src = _source(f"{srv.url}crawl-data/CC-NEWS/2025/03/{name}", name)
        for _ in range(repeats):
            for mode in ("disk", "stream"):
                c0, w0 = time.process_time(), time.perf_counter()
                arts, drops, counters, _ = process_warc(path if mode == "disk" else src, cfg)
                rows[mode].append({"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0,
                                   "records": counters["records_in"], "kept": arts.num_rows})
        srv.stop()
    out = {"file_mb": round(path.stat().st_size / 1e6, 1)}
    for mode, runs in rows.items():
        recs = runs[0]["records"]
        out[mode] = {"records": recs, "kept": runs[0]["kept"],
                     "records_per_cpu_s": round(recs / min(r["cpu_s"] for r in runs), 1),
                     "records_per_wall_s": round(recs / min(r["wall_s"] for r in runs), 1)}
    out["stream_over_disk_cpu"] = round(out["stream"]["records_per_cpu_s"] / out["disk"]["records_per_cpu_s"], 3)
    out["stream_over_disk_wall"] = round(out["stream"]["records_per_wall_s"] / out["disk"]["records_per_wall_s"], 3)
    return out


# ---------------------------------------------------------------------------------------------
# 2. memory of one worker
# ---------------------------------------------------------------------------------------------


def _worker(source, parts: str, cfg: dict, conn) -> None:
    import resource

    from forecast_env.corpus_build.pipeline import run_part

    t0 = time.perf_counter()
    counters = run_part(source, parts, "bench", cfg)
    conn.send({"peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
               "records": counters.get("records_in"), "kept": counters.get("kept"), "size": counters.get("size"),
               "failed": counters.get("failed"), "wall_s": round(time.perf_counter() - t0, 1)})


def worker_memory(world: Path, name: str, tmp: Path) -> dict:
    ctx = multiprocessing.get_context("spawn")
    with Served(world) as srv:
        cfg = _config(srv.url)
        a, b = ctx.Pipe()
        parts = tmp / f"parts-{name}"
        parts.mkdir(exist_ok=True)
        p = ctx.Process(target=_worker, args=(_source(f"{srv.url}crawl-data/CC-NEWS/2025/03/{name}", name),
                                              str(parts), cfg, b))
        p.start()
        res = a.recv()
        p.join()
        srv.stop()
    shutil.rmtree(parts, ignore_errors=True)
    return res


# ---------------------------------------------------------------------------------------------
# 3. resumes
# ---------------------------------------------------------------------------------------------


def resumed_transfer(world: Path, name: str, resets: int) -> dict:
    from forecast_env.corpus_build.stream import HttpSettings, RemoteStream

    size = (world / "news" / name).stat().st_size
    # each reset cuts the response it meets at 1/(resets + 1 - i) of what is left: spread over the file
    faults = [{"name": name, "kind": "reset", "times": 1, "at": 1.0 / (resets + 1 - i)} for i in range(resets)]
    with Served(world, faults) as srv:
        settings = HttpSettings(base_url=srv.url, requests_per_second=100.0, backoff_base_s=0.01)
        t0 = time.perf_counter()
        with RemoteStream(f"{srv.url}crawl-data/CC-NEWS/2025/03/{name}", settings) as s:
            s.drain()
            ident = s.identity()
        wall = time.perf_counter() - t0
        sent = srv.stop().get(name, 0)
    expect = hashlib.sha256()
    with open(world / "news" / name, "rb") as fh:
        while block := fh.read(1 << 22):
            expect.update(block)
    return {"size_mb": round(size / 1e6, 1), "resets_planted": resets, "resumes": ident["resumes"],
            "requests": ident["requests"], "sha256_ok": ident["sha256"] == expect.hexdigest(),
            "received_over_size": round(ident["bytes_fetched"] / size, 5), "sent_over_size": round(sent / size, 5),
            "mb_per_s": round(size / 1e6 / wall, 1)}


# ---------------------------------------------------------------------------------------------
# real public samples
# ---------------------------------------------------------------------------------------------


def real_samples(real: Path, tmp: Path) -> dict:
    from tests.support.stream_data import build_streamed_and_local, store_digest

    files = sorted(p for p in real.rglob("*") if p.is_file() and ".warc" in p.name)
    built = build_streamed_and_local(files, tmp / "real")
    streamed = built.streamed
    return {"files": [p.name for p in files], "records_in": streamed["counts"]["records_in"],
            "kept": streamed["counts"]["kept"], "file_faults": len(streamed["report"]["file_errors"]),
            "same_store": store_digest(built.streamed_ws) == store_digest(built.local_ws),
            "same_snapshot": streamed["snapshot_id"] == built.local["snapshot_id"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--big-mb", type=int, default=1024)
    ap.add_argument("--small-mb", type=int, default=64)
    ap.add_argument("--news-mb", type=int, default=12, help="size of the throughput file (plain news pages)")
    ap.add_argument("--resets", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--real", default=None, help="a folder of real WARC files to stream too")
    ap.add_argument("--keep", default=None, help="work folder to keep (default: a temporary one)")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: throughput,memory,resets")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_stream_"))
    tmp.mkdir(parents=True, exist_ok=True)
    results: dict = {"argv": sys.argv[1:], "cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    try:
        from forecast_env.synth import synthesize

        world = tmp / "world"
        if not (world / "news").is_dir():
            synthesize(world, preset="micro", seed=0, progress=False)
        pages = _pages(world)
        bench = tmp / "bench_world"
        (bench / "news").mkdir(parents=True, exist_ok=True)
        names = {"news": NEWS_NAME.format(1), "small": NEWS_NAME.format(2), "big": NEWS_NAME.format(3)}
        t0 = time.perf_counter()
        plan = {"news": (args.news_mb, 0), "small": (args.small_mb, 192 * 1024), "big": (args.big_mb, 192 * 1024)}
        for key, (mb, pad) in plan.items():
            p = bench / "news" / names[key]
            if not p.exists():
                results.setdefault("records_made", {})[key] = make_warc(p, pages, mb * 1_000_000, pad, seed=len(key))
        results["make_s"] = round(time.perf_counter() - t0, 1)
        print(f"files made in {results['make_s']}s under {bench}", flush=True)
        if "throughput" not in skip:
            results["throughput"] = throughput(bench, names["news"], args.repeats)
            print(json.dumps(results["throughput"]), flush=True)
        if "memory" not in skip:
            results["memory"] = {k: worker_memory(bench, names[k], tmp) for k in ("small", "big")}
            print(json.dumps(results["memory"]), flush=True)
        if "resets" not in skip:
            results["resets"] = resumed_transfer(bench, names["big"], args.resets)
            print(json.dumps(results["resets"]), flush=True)
        if args.real:
            results["real"] = real_samples(Path(args.real), tmp)
            print(json.dumps(results["real"]), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
