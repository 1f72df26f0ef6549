"""Benchmark of event construction's hot path: daily beliefs (polars, vectorized) vs a pure-Python
per-event loop (the obvious alternative), plus the whole market-side build on a generated cache.

    .venv/bin/python -m benchmarks.envs.events_build --events 2000 --days 40 --points 24
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from forecast_env.envs.events.beliefs import daily_beliefs
from forecast_env.envs.events.build import build_events
from forecast_env.envs.events.schedule import known_day


def python_beliefs(rows, options):
    """The loop version: dict of (event, option, day) -> mean, then normalization per (event, day)."""
    acc = defaultdict(lambda: [0.0, 0])
    for eid, k, t, p in rows:
        if not (0.0 <= p <= 1.0):
            continue
        day = datetime.fromtimestamp(t, UTC).date()
        a = acc[(eid, k, day)]
        a[0] += p
        a[1] += 1
    by_day = defaultdict(dict)
    for (eid, k, day), (s, n) in acc.items():
        by_day[(eid, day)][k] = s / n
    out = []
    for (eid, day), prices in by_day.items():
        total = sum(prices.values())
        for k in options[eid]:
            p = prices.get(k)
            out.append((eid, day, k, p, p / total if p is not None and total > 0 else None,
                        len(prices) == len(options[eid])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--days", type=int, default=40)
    ap.add_argument("--points", type=int, default=24, help="price points per leg per day")
    ap.add_argument("--legs", type=int, default=4)
    ap.add_argument("--build-events", type=int, default=300, help="events in the end-to-end build")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    t0 = int(datetime(2025, 7, 1, tzinfo=UTC).timestamp())
    n_per = args.days * args.points
    eids, idx, ts, ps = [], [], [], []
    options = {}
    for e in range(args.events):
        eid = f"e{e}"
        options[eid] = list(range(args.legs))
        for k in range(args.legs):
            eids += [eid] * n_per
            idx += [k] * n_per
            ts += list(t0 + np.sort(rng.integers(0, args.days * 86400, n_per)))
            p = rng.random(n_per)
            if k == 0:  # a resolved market: the first leg's last quarter stays >= 0.97 (a long final run)
                p[-(n_per // 4):] = 0.97 + 0.03 * rng.random(n_per // 4)
            ps += list(p)
    obs = pl.DataFrame({"event_id": eids, "option_index": idx, "t": ts, "p": ps})
    opts = pl.DataFrame([(f"e{e}", k, f"o{k}", False) for e in range(args.events) for k in range(args.legs)],
                        schema={"event_id": pl.Utf8, "option_index": pl.Int32, "option": pl.Utf8, "binary": pl.Boolean},
                        orient="row")
    print(f"observations: {obs.height:,} ({args.events} events x {args.legs} legs x {args.days} days x {args.points})")
    s = time.perf_counter()
    res = daily_beliefs(obs, opts)
    t_pl = time.perf_counter() - s
    rows = list(zip(eids, idx, ts, ps))
    s = time.perf_counter()
    ref = python_beliefs(rows, options)
    t_py = time.perf_counter() - s
    assert res.beliefs.height == len(ref), (res.beliefs.height, len(ref))
    print(f"daily_beliefs polars: {t_pl:.2f}s ({obs.height / t_pl / 1e6:.1f}M obs/s); "
          f"python loop: {t_py:.2f}s; speed-up x{t_py / t_pl:.1f}; rows {len(ref):,}")

    # d_known (docs/design.md §4): the build's pure per-leg function vs a polars group-by (the alternative)
    th = 0.97
    legs_obs = {}
    for (eid, k), grp in obs.sort("t").group_by(["event_id", "option_index"], maintain_order=True):
        legs_obs.setdefault(eid, []).append(list(zip(grp["t"].to_list(), grp["p"].to_list())))
    s = time.perf_counter()
    py_known = {eid: known_day(series, th) for eid, series in legs_obs.items()}
    t_known_py = time.perf_counter() - s
    s = time.perf_counter()
    runs = (
        obs.sort("t").with_columns((pl.col("p") < th).cum_sum().over("event_id", "option_index").alias("n_below"),
                                   (pl.col("p") < th).sum().over("event_id", "option_index").alias("total_below"))
        .filter((pl.col("n_below") == pl.col("total_below")) & (pl.col("p") >= th))  # the final run >= th
        .group_by("event_id").agg(pl.col("t").min())
    )
    pl_known = dict(zip(runs["event_id"].to_list(), runs["t"].to_list()))
    t_known_pl = time.perf_counter() - s
    assert {e: d for e, d in py_known.items() if d is not None} == {
        e: datetime.fromtimestamp(t, UTC).date() for e, t in pl_known.items()}
    print(f"d_known over {obs.height:,} observations: per-leg Python (the build's) {t_known_py:.2f}s; "
          f"polars window {t_known_pl:.2f}s")

    from tests.support.hand_cache import MARKET_ONLY, HandCache, wiggle

    h = HandCache()
    start = datetime(2025, 7, 1, 8, tzinfo=UTC)
    for e in range(args.build_events):
        if e % 2:
            h.event(str(e), [h.market(start, start + timedelta(days=29), wiggle(30), ("1", "0"), points_per_day=2)])
        else:
            legs = [h.market(start, start + timedelta(days=29), [0.5] * 30 if k == 0 else wiggle(30, 0.1, 0.3),
                             ("1", "0") if k == 0 else ("0", "1"), title=f"O{k}", neg_risk=True, trades_per_day=(5, 60))
                    for k in range(3)]
            h.event(str(e), legs, neg_risk=True)
    with tempfile.TemporaryDirectory() as tmp:
        h.write(Path(tmp) / "pm")
        s = time.perf_counter()
        summary = build_events(Path(tmp) / "pm", Path(tmp) / "ws", config=MARKET_ONLY, progress=False)
        t_build = time.perf_counter() - s
    print(f"build_events (market side, {args.build_events} events, 30 days): {t_build:.2f}s "
          f"({args.build_events / t_build:.0f} events/s); kept {summary['kept']}")
    print(json.dumps({"obs": obs.height, "beliefs_polars_s": round(t_pl, 3), "beliefs_python_s": round(t_py, 3),
                      "d_known_python_s": round(t_known_py, 3), "d_known_polars_s": round(t_known_pl, 3),
                      "build_events": args.build_events, "build_s": round(t_build, 3)}))


if __name__ == "__main__":
    main()
