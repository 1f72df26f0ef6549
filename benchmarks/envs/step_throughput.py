"""Environment throughput: tool steps per second with a scripted agent (docs/design.md §5).

Per forecast date the agent makes 2 hybrid searches (query embedding included), opens the top hit
and forecasts: 4 tool steps. Compared in the same run with the same calls made directly on the
`Searcher` (the obvious alternative: no environment), so the environment's own overhead per step
is the difference; and with 2 processes sharing one index (memory-mapped shards).

    .venv/bin/python -m benchmarks.envs.step_throughput                      # a generated workspace
    .venv/bin/python -m benchmarks.envs.step_throughput --workspace WS       # any built workspace (e.g. `small`)
    .venv/bin/python -m benchmarks.envs.step_throughput --articles 5000 --seconds 20
    .venv/bin/python -m benchmarks.envs.step_throughput --backend static --unique-queries --modes hybrid

`--backend` picks the embedding backend of the generated workspace's index and of the query encoder
(onnx-int8-static, the default; onnx-int8; onnx; static; torch).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BACKENDS = {"torch": {"backend": "torch"}, "onnx": {"backend": "onnx", "quantize": None},
            "onnx-int8": {"backend": "onnx", "quantize": "int8"},
            "onnx-int8-static": {"backend": "onnx", "quantize": "int8-static"}, "static": {"backend": "static"}}
BACKEND = "onnx-int8-static"


def corpus_config() -> dict:
    """The corpus config with the chosen embedding backend."""
    from forecast_env.config import load_config

    cfg = load_config("corpus")
    cfg["embed"].update(BACKENDS[BACKEND])
    return cfg


def open_env(ws: str):
    """The environment over `ws`, its searcher embedding queries with the chosen backend."""
    from forecast_env.envs import ForecastEnv
    from forecast_env.retrieval import Searcher

    return ForecastEnv(ws, split="all", searcher=Searcher.open(ws, corpus_config()))


WORDS = ["senate", "budget", "vote", "election", "candidate", "poll", "storm", "harbor", "factory", "chip", "export", "tariff", "court", "ruling", "merger", "bank", "rate", "inflation", "strike", "union", "minister", "treaty", "summit", "border", "oil", "price", "drought", "crop", "league", "final", "match", "coach", "transfer", "vaccine", "trial", "approval", "launch", "rocket", "orbit", "satellite"]
QUERIES = ["senate budget vote", "election poll candidate", "storm harbor closure", "chip export tariff",
           "central bank rate decision", "court ruling merger", "oil price summit", "rocket launch orbit"]


def build_workspace(root: Path, n_articles: int, n_events: int = 40, seed: int = 0) -> Path:
    """A generated workspace: articles over 90 days, an index, and binary events with 3 dates each."""
    import pyarrow as pa

    from forecast_env import schema
    from forecast_env.corpus_build.index import build_index
    from forecast_env.store import Workspace, atomic_write_table

    rng = random.Random(seed)
    ws = Workspace.at(root, create=True)
    start = date(2026, 3, 1)
    rows = []
    for i in range(n_articles):
        day = start + timedelta(days=rng.randrange(90))
        t = datetime(day.year, day.month, day.day, 9, tzinfo=UTC)
        words = [rng.choice(WORDS) for _ in range(120)]
        rows.append({"doc_id": f"d{i:07d}", "url": f"https://example.org/{i}", "title": " ".join(words[:8]),
                     "summary": " ".join(words[8:30]), "body": ". ".join(" ".join(words[j:j + 12])
                                                                       for j in range(30, 120, 12)),
                     "t": t, "t_pub": t, "t_crawl": t, "t_source": "pub", "day": day, "leak_flag": False})
    rows.sort(key=lambda r: (r["day"], r["doc_id"]))
    by_month: dict[str, list] = {}
    for r in rows:
        by_month.setdefault(r["day"].strftime("%Y-%m"), []).append(r)
    for month, mrows in by_month.items():
        atomic_write_table(ws.articles_dir / f"{month}.parquet", pa.Table.from_pylist(mrows), schema.ARTICLES)
    build_index(ws.root, corpus_config(), progress=False)
    events, sched, beliefs = [], [], []
    for e in range(n_events):
        eid = f"pm-{e}"
        first = start + timedelta(days=20 + rng.randrange(40))
        events.append({"event_id": eid, "question": f"Will the {rng.choice(QUERIES)} happen?", "description": "x",
                       "options": ["Yes", "No"], "type": "binary", "label": rng.choice(["Yes", "No"]),
                       "split": "eval"})
        for s in range(3):
            d = first + timedelta(days=7 * s)
            sched.append({"event_id": eid, "step": s + 1, "steps_total": 3, "forecast_date": d,
                          "options": ["Yes", "No"], "score": 0.0})
            p = rng.random()
            for opt, price in (("Yes", p), ("No", 1 - p)):
                beliefs.append({"event_id": eid, "day": d, "option": opt, "price": price, "belief": price,
                                "complete": True, "n_obs": 1})
    for name, table_rows, sch in (("events", events, schema.EVENTS), ("schedule", sched, schema.SCHEDULE),
                                  ("beliefs", beliefs, schema.BELIEFS)):
        atomic_write_table(ws.events_table(name), pa.Table.from_pylist(table_rows), sch)
    for name, sch in (("legs", schema.LEGS), ("trades_daily", schema.TRADES_DAILY), ("screen", schema.SCREEN),
                      ("excluded", schema.EXCLUDED)):
        atomic_write_table(ws.events_table(name), schema.empty_table(sch))
    return ws.root


def _query(rng: random.Random, unique: bool, counter: list[int]) -> str:
    """A query from the fixed list; with `unique`, made distinct so the query-vector cache never hits."""
    counter[0] += 1
    q = rng.choice(QUERIES)
    return f"{q} variant {counter[0]}" if unique else q


def run_env(ws: str, seconds: float, seed: int = 0, mode: str = "hybrid", unique: bool = False) -> tuple[int, float]:
    """Scripted agent through the environment for about `seconds`: (tool steps, elapsed)."""
    env = open_env(ws)
    rng = random.Random(seed)
    env.reset(seed=seed)
    env.step({"tool": "search", "args": {"query": "warm up"}})  # loads the query encoder
    env.reset(seed=seed)
    steps, t0, counter = 0, time.perf_counter(), [0]
    while time.perf_counter() - t0 < seconds:
        done = False
        while not done:
            hits = []
            for _ in range(2):
                _, _, done, _, info = env.step({"tool": "search", "args": {"query": _query(rng, unique, counter),
                                                                           "mode": mode}})
                hits = info["tool_result"]["hits"] or hits
            env.step({"tool": "open_article", "args": {"doc_id": hits[0]["doc_id"] if hits else "none"}})
            _, _, done, _, info = env.step({"tool": "forecast", "args": {"probabilities": {"Yes": 0.6, "No": 0.4}}})
            steps += 4
        env.reset()
    return steps, time.perf_counter() - t0


def run_direct(ws: str, seconds: float, seed: int = 0, mode: str = "hybrid",
               unique: bool = False) -> tuple[int, float]:
    """The same calls straight on the Searcher (plus scoring), without the environment."""
    from forecast_env.envs.forecast_env import load_episodes
    from forecast_env.retrieval import Searcher
    from forecast_env.scoring import score_report

    s = Searcher.open(ws, corpus_config())
    eps = load_episodes(ws, "all")
    rng = random.Random(seed)
    s.search("warm up", eps[0].dates[0].day, 10, "hybrid")
    steps, t0, i, counter = 0, time.perf_counter(), 0, [0]
    while time.perf_counter() - t0 < seconds:
        ep = eps[i % len(eps)]
        i += 1
        for d in ep.dates:
            hits = []
            for _ in range(2):
                hits = s.search(_query(rng, unique, counter), d.day, 10, mode) or hits
            if hits:
                s.open_article(hits[0].doc_id, d.day)
            score_report({"Yes": 0.6, "No": 0.4}, ep.label, d.options, 0.5)
            steps += 4
    return steps, time.perf_counter() - t0


def run_overhead(ws: str, seconds: float) -> tuple[int, float]:
    """Steps that touch no index (notebook_add, forecast): the environment's own cost per step."""
    env = open_env(ws)
    env.reset(seed=0)
    note = {"tool": "notebook_add", "args": {"claim": "a claim", "date_observed": "2026-04-01", "doc_ids": ["d1"]}}
    fc = {"tool": "forecast", "args": {"probabilities": {"Yes": 0.6, "No": 0.4}}}
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        done = False
        while not done:
            env.step(note)
            _, _, done, _, _ = env.step(fc)
            steps += 2
        env.reset()
    return steps, time.perf_counter() - t0


def _worker(args: tuple[str, float, int, str, bool, str]) -> tuple[int, float]:
    import os

    global BACKEND
    os.environ["OMP_NUM_THREADS"] = "1"  # two processes share two cores: one compute thread each
    BACKEND = args[-1]
    return run_env(*args[:-1])


def main() -> None:
    global BACKEND
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workspace", default=None, help="a built workspace (default: generate one)")
    ap.add_argument("--articles", type=int, default=3000, help="articles of the generated workspace")
    ap.add_argument("--seconds", type=float, default=10.0, help="measuring time per configuration")
    ap.add_argument("--modes", default="hybrid,bm25", help="search modes to measure, comma-separated")
    ap.add_argument("--unique-queries", action="store_true",
                    help="make every query distinct (no query-vector cache hits: the worst case for hybrid)")
    ap.add_argument("--backend", default=BACKEND, choices=sorted(BACKENDS), help="embedding backend")
    args = ap.parse_args()
    BACKEND = args.backend
    print(f"embedding backend: {BACKEND}")
    if args.workspace:
        ws = args.workspace
    else:
        t = time.perf_counter()
        ws = str(build_workspace(Path(tempfile.mkdtemp(prefix="bench_env_")), args.articles))
        print(f"generated workspace with {args.articles} articles in {time.perf_counter() - t:.1f} s: {ws}")
    steps, el = run_overhead(ws, args.seconds)
    print(f"ForecastEnv without retrieval (notebook_add + forecast steps): {steps / el:9.1f} steps/s "
          f"({1000 * el / steps:.3f} ms/step)")
    for mode in args.modes.split(","):
        steps, el = run_direct(ws, args.seconds, mode=mode, unique=args.unique_queries)
        direct = steps / el
        print(f"[{mode}] direct Searcher calls (no env):     {direct:8.1f} tool steps/s")
        steps, el = run_env(ws, args.seconds, mode=mode, unique=args.unique_queries)
        single = steps / el
        print(f"[{mode}] ForecastEnv, 1 process:             {single:8.1f} tool steps/s  "
              f"(difference {1000 * (1 / single - 1 / direct):+.3f} ms/step)")
        with mp.get_context("spawn").Pool(2) as pool:
            res = pool.map(_worker, [(ws, args.seconds, 1, mode, args.unique_queries, BACKEND),
                                       (ws, args.seconds, 2, mode, args.unique_queries, BACKEND)])
        total = sum(s / e for s, e in res)
        print(f"[{mode}] ForecastEnv, 2 processes (1 index): {total:8.1f} tool steps/s in total "
              f"({', '.join(f'{s / e:.1f}' for s, e in res)} per process)")


if __name__ == "__main__":
    main()
