"""The corpus merge at scale: the out-of-core merge (corpus_build/merge/) against the in-memory one.

Synthetic parts stand in for the per-WARC stages' output: `gen` writes N articles as parts of
`--per-part` rows with realistic bodies (about 3,500 characters, lognormal, Zipf words in random
chunks, so unrelated bodies share no 5-grams by accident), planted duplicates (8% near-copies of an
earlier body, 3% an earlier URL with tracking parameters, 2% an earlier title within days) over
15 months, and two dropped rows per article. `run` merges one parts folder in a fresh process and
prints the phases' time and memory; `all` generates and runs every size, each merge in its own
process under a memory watchdog (`--limit-gb`), and checks that both merges wrote the same bytes
wherever both ran.

usage:
  python -m benchmarks.corpus.merge all --root /tmp/merge_bench --sizes 250000,1000000 \
      --memory-sizes 250000 --workers 2 [--limit-gb 8]
  python -m benchmarks.corpus.merge gen --n 1000000 --out DIR
  python -m benchmarks.corpus.merge run --parts DIR --ws WS --mode ooc|memory [--workers 2]
  python -m benchmarks.corpus.merge gen-keys --n 5000000 --out DIR    # keys sidecars only
  python -m benchmarks.corpus.merge pairs --keys DIR [--rows-per-task N]  # the dedup passes alone

`--record` (on `all`, `run` and `pairs`) writes the merge's rates that the run measures into
forecast_env/rates.json (`rates_from_merge`, `rates_from_in_memory`, `rates_from_pairs` say which and how);
`all` records from its largest out-of-core merge and its largest in-memory merge that fit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import child_env, module_command
from benchmarks.recording import Measurement, add_record_arguments, record_rates, start_recording
from forecast_env import schema
from forecast_env.config import load_config
from forecast_env.corpus_build.merge import (
    ROW_GROUP_ROWS,
    PartFiles,
    find_duplicate_pairs,
    keys_path,
    keys_schema,
    merge_parts,
)
from forecast_env.enums import ENGINES
from forecast_env.rates import read_rates
from forecast_env.store import Workspace
from tests.support.merge_oracle import merge_in_memory

DAYS = 456  # 2025-03-01 .. 2026-05-31: the paper's 15 months
DROPS_PER_ARTICLE = 2


# ---------------------------------------------------------------------------------------------
# synthetic parts
# ---------------------------------------------------------------------------------------------


class Bodies:
    """Article bodies made of random chunks of a Zipf word pool (fast, and distinct unless copied)."""

    def __init__(self, rng: np.random.Generator, pool_chars: int = 48_000_000) -> None:
        vocab = np.array([f"w{i}" for i in range(30_000)])
        ranks = np.arange(1, len(vocab) + 1)
        p = 1.0 / ranks ** 1.05
        words = rng.choice(vocab, size=pool_chars // 6, p=p / p.sum())
        self.pool = " ".join(words.tolist())
        self.rng = rng

    def make(self, n: int) -> list[str]:
        lengths = np.clip(self.rng.lognormal(np.log(3200), 0.6, n), 400, 30_000).astype(np.int64)
        out = []
        limit = len(self.pool) - 5000
        for length in lengths:
            k = max(1, int(length) // 450)
            starts = self.rng.integers(0, limit, k)
            out.append(" ".join(self.pool[s:s + 450] for s in starts))
        return out


def _const(value: str, n: int) -> pa.Array:
    return pa.array([value] * n, pa.string())


def _ts(values: np.ndarray) -> pa.Array:
    return pa.array(values.astype("datetime64[us]").astype(np.int64), pa.timestamp("us", tz="UTC"))


def generate(out: Path, n: int, per_part: int = 4000, seed: int = 0) -> dict:
    """Write n articles as parts (articles + dropped tables) under `out`; returns the counts planted."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    bodies = Bodies(rng)
    planted = {"near_copy": 0, "same_url": 0, "same_title": 0}
    keep = 20_000  # earlier articles a plant may copy from
    prev_body: list[str] = []
    prev_url: list[str] = []
    prev_title: list[str] = []
    prev_t = np.empty(0, dtype="datetime64[us]")
    n_parts = (n + per_part - 1) // per_part
    start = np.datetime64("2025-03-01T00:00:00", "us")
    t0 = time.perf_counter()
    i = 0
    for part in range(n_parts):
        m = min(per_part, n - i)
        name = f"CC-NEWS-{part:05d}.warc.gz"
        gids = np.arange(i, i + m)
        body = bodies.make(m)
        # a file's articles cluster around its crawl day, with a tail of older pages
        centre = part * DAYS / max(1, n_parts)
        day_off = np.clip(centre - rng.exponential(3.0, m), 0, DAYS - 1)
        t = start + (day_off * 86_400e6).astype(np.int64).astype("timedelta64[us]")
        sites = rng.integers(0, 5000, m)
        days = t.astype("datetime64[D]").astype(str)
        url = [f"https://www.site{s}.example.com/{d.replace('-', '/')}/story-{g}" for s, d, g in zip(sites, days, gids)]
        words = rng.integers(0, 50_000, (m, 11))
        lens = rng.integers(5, 12, m)
        title = [" ".join(f"t{w}" for w in row[:k]) for row, k in zip(words.tolist(), lens.tolist())]
        kinds = rng.random(m)
        if prev_body:
            src = rng.integers(0, len(prev_body), m)
            for j in np.flatnonzero(kinds < 0.13):
                k = int(src[j])
                if kinds[j] < 0.08:
                    body[j] = prev_body[k] + " Updated with one more line."
                    planted["near_copy"] += 1
                elif kinds[j] < 0.11:
                    url[j] = prev_url[k] + "?utm_source=feed&fbclid=x"
                    planted["same_url"] += 1
                else:
                    title[j] = prev_title[k]
                    t[j] = prev_t[k] + np.timedelta64(int(rng.uniform(1, 96) * 3600e6), "us")
                    planted["same_title"] += 1
        crawl = t + (rng.uniform(0, 72, m) * 3600e6).astype(np.int64).astype("timedelta64[us]")
        canonical = [u.split("?")[0] if k > 0.4 else None for u, k in zip(url, kinds)]
        cols = {
            "doc_id": pa.array([hashlib.sha1(f"rec{g}".encode()).hexdigest()[:16] for g in gids.tolist()]),
            "url": pa.array(url), "canonical_url": pa.array(canonical, pa.string()), "title": pa.array(title),
            "summary": pa.array([b[:160] for b in body]), "body": pa.array(body),
            "t_pub": _ts(t), "t_mod": pa.nulls(m, pa.timestamp("us", tz="UTC")), "t_crawl": _ts(crawl), "t": _ts(t),
            "t_source": _const("pub", m), "t_rule": _const("jsonld:datePublished", m), "t_pub_rule": _const("jsonld:datePublished", m),
            "t_mod_rule": pa.nulls(m, pa.string()), "visible_at": _ts(t), "visible_source": _const("pub", m),
            "visible_moves": pa.array([[]] * m, schema.ARTICLES.field("visible_moves").type),
            "day": pa.array(t.astype("datetime64[D]").astype(np.int32), pa.int32()).cast(pa.date32()),
            "lang_score": pa.array(np.full(m, 0.98)), "leak_flag": pa.array(kinds > 0.995),
            "leak_reason": pa.nulls(m, pa.string()), "market_quote": pa.array(np.zeros(m, dtype=bool)),
            "warc_file": _const(name, m), "warc_offset": pa.array(1000 * np.arange(m, dtype=np.int64) + 500),
        }
        table = pa.Table.from_arrays([cols[f.name].cast(f.type) for f in schema.ARTICLES], schema=schema.ARTICLES)
        prev_body = (prev_body + body)[-keep:]
        prev_url = (prev_url + url)[-keep:]
        prev_title = (prev_title + title)[-keep:]
        prev_t = np.concatenate([prev_t, t])[-keep:]
        nd = m * DROPS_PER_ARTICLE
        stage_names = np.array(["read", "extract", "lang", "quality", "time"])
        reasons = np.array(["http_status", "no_body", "not_english", "gopher_short_doc", "before_corpus_start"])
        which = rng.choice(5, size=nd, p=[0.1, 0.2, 0.2, 0.45, 0.05])
        dgid = np.arange(nd) + i * DROPS_PER_ARTICLE
        drops = pa.Table.from_arrays([
            pa.array([None if w == 0 else hashlib.sha1(f"drop{g}".encode()).hexdigest()[:16]
                      for w, g in zip(which.tolist(), dgid.tolist())], pa.string()),
            pa.array([f"https://site{g % 5000}.example.com/x/{g}" for g in dgid.tolist()]),
            _const(name, nd),
            pa.array(1000 * (np.arange(nd) // DROPS_PER_ARTICLE) + np.arange(nd) % DROPS_PER_ARTICLE),
            pa.array(stage_names[which]), pa.array(reasons[which]),
            pa.nulls(nd, pa.string()), pa.nulls(nd, pa.string()), pa.nulls(nd, pa.string()),
        ], schema=schema.DROPPED)
        base = out / f"CC-NEWS-{part:05d}-bench"
        pq.write_table(table, f"{base}.articles.parquet", compression="zstd")
        pq.write_table(drops, f"{base}.dropped.parquet", compression="zstd")
        i += m
        if part % 50 == 0 or part == n_parts - 1:
            print(f"  gen {i:,}/{n:,} articles ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    meta = {"n": n, "parts": n_parts, "per_part": per_part, "seed": seed, "planted": planted,
            "bytes": sum(p.stat().st_size for p in out.glob("*.parquet"))}
    (out / "bench.json").write_text(json.dumps(meta, indent=1))
    return meta


def bench_parts(parts_dir: Path, cfg: dict) -> list[PartFiles]:
    arts = sorted(parts_dir.glob("*.articles.parquet"))
    return [PartFiles(a, a.with_name(a.name.replace(".articles.", ".dropped.")), keys_path(a, cfg["dedup"]))
            for a in arts]


# ---------------------------------------------------------------------------------------------
# one merge, in this process
# ---------------------------------------------------------------------------------------------


def _rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


def _hwm_mb(reset: bool = False) -> float:
    """This process's peak resident memory since start or the last reset (VmHWM; unlike ru_maxrss it
    does not inherit the peak of the process that forked this one before exec)."""
    with open("/proc/self/status") as fh:
        kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    if reset:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    return kib / 1024


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the key workers)."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def run(parts_dir: Path, ws_dir: Path, mode: str, workers: int, engine: str, fresh_keys: bool) -> dict:
    """Merge one parts folder into a fresh workspace; time and peak memory per phase."""
    cfg = load_config("corpus")
    parts = bench_parts(parts_dir, cfg)
    if fresh_keys:
        for p in parts:
            p.keys.unlink(missing_ok=True)
    shutil.rmtree(ws_dir, ignore_errors=True)
    ws = Workspace.at(ws_dir, create=True)
    for d in (ws.articles_dir, ws.dropped_dir):
        d.mkdir(parents=True, exist_ok=True)
    phases: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def on_phase(name: str) -> None:
        phases[name] = round(_hwm_mb(reset=True))
        cpu[name] = round(_cpu_s() - cpu0, 1)

    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    if mode == "memory":
        merge_in_memory(ws, parts, cfg)
        timings: dict = {}
    else:
        res = merge_parts(ws, parts, cfg, engine=engine, workers=workers, progress=False, on_phase=on_phase)
        timings = res.timings
    wall = time.perf_counter() - t0
    return {"mode": mode, "engine": engine, "workers": workers, "articles": sum(pq.read_metadata(p.articles).num_rows
                                                                               for p in parts),
            "wall_s": round(wall, 1), "cpu_s": round(_cpu_s() - cpu0, 1), "cpu_s_cumulative_after_phase": cpu,
            "timings": timings, "driver_peak_mb_per_phase": phases,
            "driver_peak_mb": max([round(_hwm_mb()), *phases.values()]),
            "worker_peak_mb": round(_rss_mb(resource.RUSAGE_CHILDREN)),
            "store_bytes": sum(p.stat().st_size for p in (ws_dir / "corpus").rglob("*.parquet")),
            "keys_bytes": sum(p.keys.stat().st_size for p in parts if p.keys.exists()),
            "kept": sum(pq.read_metadata(p).num_rows for p in (ws_dir / "corpus/articles").glob("*.parquet")),
            "largest_month_rows": max((pq.read_metadata(p).num_rows
                                       for p in (ws_dir / "corpus/articles").glob("*.parquet")), default=0)}


# ---------------------------------------------------------------------------------------------
# keys only: the dedup passes at sizes whose bodies this machine cannot hash in time
# ---------------------------------------------------------------------------------------------


def generate_keys(out: Path, n: int, per_part: int = 4000, seed: int = 0) -> dict:
    """Write keys sidecars (what the keys pass writes) for n synthetic articles: random band bytes,
    with the same planted shares as `generate` (8% all bands of an earlier article, 3% its URL key,
    2% its title within days)."""
    cfg = load_config("corpus")["dedup"]
    bands, rows = int(cfg["bands"]), int(cfg["rows"])
    sch = keys_schema(bands, rows)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    start = np.datetime64("2025-03-01T00:00:00", "us")
    n_parts = (n + per_part - 1) // per_part
    keep = 20_000
    prev_bands = np.zeros((0, bands, 4 * rows), dtype=np.uint8)
    prev_url: list[str] = []
    prev_title: list[str] = []
    prev_t = np.empty(0, dtype="datetime64[us]")
    t0 = time.perf_counter()
    i = 0
    for part in range(n_parts):
        m = min(per_part, n - i)
        gids = np.arange(i, i + m)
        centre = part * DAYS / max(1, n_parts)
        day_off = np.clip(centre - rng.exponential(3.0, m), 0, DAYS - 1)
        t = start + (day_off * 86_400e6).astype(np.int64).astype("timedelta64[us]")
        sites = rng.integers(0, 5000, m)
        url = [f"site{s}.example.com/{g}" for s, g in zip(sites.tolist(), gids.tolist())]
        words = rng.integers(0, 50_000, (m, 11))
        lens = rng.integers(5, 12, m)
        title = [" ".join(f"t{w}" for w in row[:k]) for row, k in zip(words.tolist(), lens.tolist())]
        band = rng.integers(0, 256, (m, bands, 4 * rows), dtype=np.uint8)
        kinds = rng.random(m)
        if len(prev_url):
            src = rng.integers(0, len(prev_url), m)
            near, same_url = kinds < 0.08, (kinds >= 0.08) & (kinds < 0.11)
            band[near] = prev_bands[src[near]]
            for j in np.flatnonzero(same_url):
                url[j] = prev_url[int(src[j])]
            for j in np.flatnonzero((kinds >= 0.11) & (kinds < 0.13)):
                title[j] = prev_title[int(src[j])]
                t[j] = prev_t[int(src[j])] + np.timedelta64(int(rng.uniform(1, 96) * 3600e6), "us")
        crawl = t + (rng.uniform(0, 72, m) * 3600e6).astype(np.int64).astype("timedelta64[us]")
        cols = [
            pa.array([hashlib.sha1(f"rec{g}".encode()).hexdigest()[:16] for g in gids.tolist()]),
            _const(f"CC-NEWS-{part:05d}.warc.gz", m), pa.array(1000 * np.arange(m, dtype=np.int64) + 500),
            pa.array(t.astype("datetime64[D]").astype(np.int32), pa.int32()).cast(pa.date32()),
            _ts(t), _ts(crawl), pa.array(url), pa.array([u if k > 0.4 else None for u, k in zip(url, kinds)]),
            pa.array(title), pa.array(np.ones(m, dtype=bool)),
            *[pa.FixedSizeBinaryArray.from_buffers(pa.binary(4 * rows), m,
                                                   [None, pa.py_buffer(np.ascontiguousarray(band[:, b]).tobytes())])
              for b in range(bands)],
        ]
        pq.write_table(pa.Table.from_arrays(cols, schema=sch), out / f"CC-NEWS-{part:05d}-bench.keys.parquet",
                       compression="zstd")
        prev_bands = np.concatenate([prev_bands, band])[-keep:]
        prev_url = (prev_url + url)[-keep:]
        prev_title = (prev_title + title)[-keep:]
        prev_t = np.concatenate([prev_t, t])[-keep:]
        i += m
        if part % 100 == 0 or part == n_parts - 1:
            print(f"  gen keys {i:,}/{n:,} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    meta = {"n": n, "parts": n_parts, "bytes": sum(p.stat().st_size for p in out.glob("*.keys.parquet"))}
    (out / "keys.json").write_text(json.dumps(meta))
    return meta


def run_pairs(keys_dir: Path, rows_per_task: int) -> dict:
    """The dedup passes alone (order, then every pair task in this process) over keys sidecars."""
    cfg = load_config("corpus")["dedup"]
    keys = sorted(keys_dir.glob("*.keys.parquet"))
    base = _hwm_mb(reset=True)
    cpu0, t0 = _cpu_s(), time.perf_counter()
    work = keys_dir / "_work"
    peaks: dict[str, float] = {}
    marks: dict[str, float] = {}

    def on_phase(name: str) -> None:
        peaks[name] = round(_hwm_mb(reset=True))
        marks[name] = time.perf_counter()

    _, hits = find_duplicate_pairs(keys, cfg, work, rows_per_task=rows_per_task, on_phase=on_phase)
    on_phase("pairs")
    timings = {"order_s": round(marks["order"] - t0, 1), "pairs_s": round(marks["pairs"] - marks["order"], 1)}
    return {"mode": "pairs", "articles": sum(pq.read_metadata(k).num_rows for k in keys), "base_mb": round(base),
            "wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(_cpu_s() - cpu0, 1), "timings": timings,
            "driver_peak_mb_per_phase": peaks, "duplicates": hits.height, "rows_per_task": rows_per_task}

# ---------------------------------------------------------------------------------------------
# the cost model's rates (forecast_env/rates.json, keys merge.*; corpus_build/rates.py's model)
# ---------------------------------------------------------------------------------------------

MIB = 2**20


def rates_from_merge(res: dict, fresh_keys: bool, base_bytes: float, month_row: float) -> dict[str, Measurement]:
    """The rates one out-of-core `run` gives: CPU s per million articles per phase (`keys` only when the run
    computed every part's keys), the keys sidecars' and the store's bytes per article on disk, and the store
    phase's state per article: its peak less the process's base (`merge.base_bytes`) and one row group of
    the largest month at `merge.bytes.month_row`, as the model adds them up."""
    n = res["articles"]
    per_m = n / 1e6
    cpu = res["cpu_s_cumulative_after_phase"]
    run = f"the {n:,}-article run"
    rates = {}
    if fresh_keys:
        rates["merge.cpu.keys"] = Measurement(round(cpu["keys"] / per_m, 1), f"{run}: {cpu['keys']} CPU s for the MinHash "
                                              "signatures, URL and title keys of every part (parallel over parts)")
    rates["merge.cpu.pairs"] = Measurement(round((cpu["pairs"] - cpu["keys"]) / per_m, 1), f"{run}: "
                                           f"{cpu['pairs'] - cpu['keys']:.1f} CPU s for the visibility order and the "
                                           "three stages' joins")
    rates["merge.cpu.store"] = Measurement(round((cpu["store"] - cpu["pairs"]) / per_m, 1), f"{run}: "
                                           f"{cpu['store'] - cpu['pairs']:.1f} CPU s for the month shards and dropped "
                                           "tables (zstd)")
    rates["merge.bytes.keys_disk"] = Measurement(round(res["keys_bytes"] / n), f"{run}: the keys sidecars on disk")
    rates["merge.bytes.store_disk"] = Measurement(round(res["store_bytes"] / n), f"{run}: the store on disk (shards "
                                                  "and dropped tables, two dropped rows per article)")
    store_peak = res["driver_peak_mb_per_phase"]["store"]
    group = month_row * min(res["largest_month_rows"], ROW_GROUP_ROWS)
    state = (store_peak * MIB - base_bytes - group) / n
    if state > 0:
        rates["merge.bytes.store_state"] = Measurement(round(state), f"{run}: what the store phase holds besides the "
                                                       f"row group it writes ({store_peak:,} MiB peak, of it "
                                                       f"{group / MIB:.0f} MiB one row group of the largest month)")
    return rates


def rates_from_in_memory(res: dict, base_bytes: float) -> dict[str, Measurement]:
    """The in-memory merge's peak per article beyond the process's base (`merge.bytes.in_memory`; comparison only)."""
    n, peak = res["articles"], res["driver_peak_mb"]
    return {"merge.bytes.in_memory": Measurement(round((peak * MIB - base_bytes) / n),
                                                 f"the in-memory merge's peak ({peak:,} MiB at {n:,} articles), "
                                                 "for comparison only")}


def rates_from_pairs(res: dict) -> dict[str, Measurement]:
    """The rates the dedup passes alone give: the process's base (`merge.base_bytes`, before it reads a keys
    file) and the order's peak per article beyond it (`merge.bytes.order`)."""
    n, base, order = res["articles"], res["base_mb"], res["driver_peak_mb_per_phase"]["order"]
    return {"merge.base_bytes": Measurement(base * MIB, f"the merging process before it reads a part (interpreter, "
                                            f"polars, pyarrow): {base} MiB"),
            "merge.bytes.order": Measurement(round((order - base) * MIB / n), f"peak while the visibility order is "
                                             f"computed ({order:,} MiB at {n:,} articles), less the base")}


def rates_from_all(results: list[dict], base_bytes: float, month_row: float) -> dict[str, Measurement]:
    """The rates of an `all` run: its largest out-of-core merge that fit (keys computed fresh), and the
    in-memory merge's from its largest in-memory merge that fit."""
    fits = [r for r in results if r.get("fits")]
    ooc = [r for r in fits if r["mode"] == "ooc"]
    mem = [r for r in fits if r["mode"] == "memory"]
    rates: dict[str, Measurement] = {}
    if ooc:
        rates |= rates_from_merge(max(ooc, key=lambda r: r["articles"]), True, base_bytes, month_row)
    if mem:
        rates |= rates_from_in_memory(max(mem, key=lambda r: r["articles"]), base_bytes)
    return rates


def _model_rates() -> tuple[float, float]:
    """The recorded `merge.base_bytes` and `merge.bytes.month_row`, which the other memory rates are net of."""
    rates = read_rates()
    return rates["merge.base_bytes"].value, rates["merge.bytes.month_row"].value


# ---------------------------------------------------------------------------------------------
# every size, each merge in its own process under a watchdog
# ---------------------------------------------------------------------------------------------


def _tree_rss(pid: int) -> int:
    import psutil

    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    except psutil.Error:
        return 0


def run_watched(args: list[str], limit_gb: float) -> dict:
    """Run `benchmarks/corpus/merge.py run ...` in a child; kill it when its process tree passes the limit."""
    proc = subprocess.Popen(module_command("benchmarks.corpus.merge", "run", *args), stdout=subprocess.PIPE,
                            text=True, env=child_env())
    peak = [0]
    killed = [False]

    def watch() -> None:
        while proc.poll() is None:
            rss = _tree_rss(proc.pid)
            peak[0] = max(peak[0], rss)
            if rss > limit_gb * 2**30:
                killed[0] = True
                import psutil

                for p in psutil.Process(proc.pid).children(recursive=True):
                    p.kill()
                proc.kill()
                return
            time.sleep(0.2)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    out, _ = proc.communicate()
    t.join()
    if killed[0] or proc.returncode != 0:
        return {"fits": False, "killed_at_gb": round(peak[0] / 2**30, 2), "returncode": proc.returncode,
                "args": args}
    res = json.loads(out.strip().splitlines()[-1])
    res["tree_peak_mb_sampled"] = round(peak[0] / 2**20)
    res["fits"] = True
    return res


def _store_digest(ws: Path) -> dict[str, str]:
    corpus = ws / "corpus"
    return {p.relative_to(corpus).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(corpus.glob("articles/*.parquet")) + sorted(corpus.glob("dropped/*.parquet"))}


def run_all(root: Path, sizes: list[int], memory_sizes: list[int], workers: int, limit_gb: float) -> list[dict]:
    results = []
    for n in sizes:
        parts = root / f"parts_{n}"
        if not (parts / "bench.json").exists():
            t0 = time.perf_counter()
            meta = generate(parts, n)
            print(f"generated {n:,} articles in {time.perf_counter() - t0:.0f}s: {meta}", file=sys.stderr)
        ooc_ws = root / f"ws_ooc_{n}"
        res = run_watched(["--parts", str(parts), "--ws", str(ooc_ws), "--mode", "ooc", "--workers", str(workers),
                           "--fresh-keys"], limit_gb)
        res["n"] = n
        results.append(res)
        print(json.dumps(res), flush=True)
        if n in memory_sizes:
            mem_ws = root / f"ws_mem_{n}"
            mres = run_watched(["--parts", str(parts), "--ws", str(mem_ws), "--mode", "memory"], limit_gb)
            mres["n"] = n
            if mres["fits"] and res.get("fits"):
                mres["same_bytes_as_ooc"] = _store_digest(mem_ws) == _store_digest(ooc_ws)
            results.append(mres)
            print(json.dumps(mres), flush=True)
            shutil.rmtree(mem_ws, ignore_errors=True)
        shutil.rmtree(ooc_ws, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--n", type=int, required=True)
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--per-part", type=int, default=4000)
    r = sub.add_parser("run")
    r.add_argument("--parts", type=Path, required=True)
    r.add_argument("--ws", type=Path, required=True)
    r.add_argument("--mode", choices=["ooc", "memory"], default="ooc")
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--engine", choices=ENGINES, default="local")
    r.add_argument("--fresh-keys", action="store_true", help="recompute the keys sidecars (a from-scratch merge)")
    add_record_arguments(r)
    gk = sub.add_parser("gen-keys", help="keys sidecars only (the dedup passes at 5M without hashing bodies)")
    gk.add_argument("--n", type=int, required=True)
    gk.add_argument("--out", type=Path, required=True)
    rp = sub.add_parser("pairs", help="the dedup passes alone over a gen-keys folder")
    rp.add_argument("--keys", type=Path, required=True)
    rp.add_argument("--rows-per-task", type=int, default=4_000_000)
    add_record_arguments(rp)
    a = sub.add_parser("all")
    a.add_argument("--root", type=Path, required=True)
    a.add_argument("--sizes", default="250000,1000000")
    a.add_argument("--memory-sizes", default="250000")
    a.add_argument("--workers", type=int, default=2)
    a.add_argument("--limit-gb", type=float, default=8.0)
    add_record_arguments(a)
    args = ap.parse_args(argv)
    recording = (start_recording(args, "benchmarks.corpus.merge", sys.argv[1:] if argv is None else argv)
                 if args.cmd in ("pairs", "run", "all") else None)
    if args.cmd == "gen":
        print(json.dumps(generate(args.out, args.n, args.per_part)))
    elif args.cmd == "gen-keys":
        print(json.dumps(generate_keys(args.out, args.n)))
    elif args.cmd == "pairs":
        res = run_pairs(args.keys, args.rows_per_task)
        print(json.dumps(res))
        record_rates(recording, rates_from_pairs(res))
    elif args.cmd == "run":
        res = run(args.parts, args.ws, args.mode, args.workers, args.engine, args.fresh_keys)
        print(json.dumps(res))
        if recording is not None:
            rates = (rates_from_in_memory(res, _model_rates()[0]) if args.mode == "memory" else
                     rates_from_merge(res, args.fresh_keys, *_model_rates()))
            record_rates(recording, rates)
    else:
        sizes = [int(x) for x in args.sizes.split(",") if x]
        mem = [int(x) for x in args.memory_sizes.split(",") if x]
        results = run_all(args.root, sizes, mem, args.workers, args.limit_gb)
        print(json.dumps(results, indent=1))
        if recording is not None:
            record_rates(recording, rates_from_all(results, *_model_rates()))


if __name__ == "__main__":
    main()
