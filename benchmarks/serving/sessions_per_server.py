"""Many sessions per server (issue 23 item 4): the verifiers rollout service and the OpenEnv server under
load, through the one harness of the tests (tests/support/harness.py), with big counts.

    .venv/bin/python -m benchmarks.serving.sessions_per_server --workspace WS [--server rollout,openenv]
        [--sessions 64] [--churn 10000]

WS is an events-built workspace (e.g. the `micro` world: synth, corpus build, index build, events build).
Per server:

1. memory per session: private resident memory (RssAnon) with `--sessions` sessions open (opened, not played; each its own
   environment) minus before (one session opened and closed first: the shared searcher is open);
2. isolation + load: `--sessions` jobs (units in turn, each its own seed) played alone one after another,
   then all at once, one client thread each: steps/s, p50 / p99 step latency of the concurrent play,
   and cross-talk (sessions whose replies or recorded part differ from their solo play: must be 0);
3. churn: `--churn` sessions opened, played one call and closed, 8 at a time: private memory sampled
   every 500 (growth = last sample minus the sample after the first 1,000, the warm-up), and the open
   sessions left (must be 0).

Everything is served on 127.0.0.1 in this process (the clients' memory is in the figures too).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
import warnings
from pathlib import Path
from typing import Any

CHURN_CONCURRENCY = 8


def units_of(ws: Path, server: str) -> list[Any]:
    from forecast_env.envs.episodes import load_episodes
    from tests.support.harness import Unit

    eps = load_episodes(ws, "eval", None)
    if server == "openenv":
        return [Unit(e.event_id) for e in eps]
    return [Unit(e.event_id, d.step) for e in eps for d in e.dates]


def bench(server: str, ws: Path, n_sessions: int, n_churn: int) -> dict[str, Any]:
    from forecast_env.adapters import harness

    units = units_of(ws, server)
    jobs = [(units[i % len(units)], i) for i in range(n_sessions)]
    out: dict[str, Any] = {"server": server, "sessions": n_sessions, "churn": n_churn, "units": len(units)}
    if server == "rollout":
        from forecast_env.adapters.rollout_service import EnvironmentService, RolloutRun

        svc = EnvironmentService(RolloutRun(str(ws), run_id=f"bench-sessions-{secrets.token_hex(3)}", split="eval"),
                                 max_sessions=max(n_sessions, CHURN_CONCURRENCY) + 1)
        driver: Any = harness.RolloutServiceDriver(svc)
        left = lambda: svc.open_sessions
        stop = svc.close
    else:
        from forecast_env.adapters.openenv import serve

        srv = serve(ws, split="eval", max_sessions=max(n_sessions, CHURN_CONCURRENCY) + 1,
                    run_id=f"bench-sessions-oe-{secrets.token_hex(3)}")
        driver = harness.OpenEnvDriver(srv)
        left = lambda: srv.run._open
        stop = srv.stop
    try:
        driver.finish(driver.open(units[0]))  # the shared searcher and the encoder opened
        before = harness.resident_mb()
        handles = [driver.open(units[i % len(units)]) for i in range(n_sessions)]
        during = harness.resident_mb()
        for h in handles:
            driver.finish(h)
        out["memory"] = {"before_mb": round(before, 1), "open_mb": round(during, 1),
                         "per_session_mb": round((during - before) / n_sessions, 3)}
        print(json.dumps({server: out["memory"]}), flush=True)
        t0 = time.perf_counter()
        result, problems = harness.check_isolation(driver, jobs, n_sessions, driver.label)
        out["load"] = {"steps": result.steps, "seconds": round(result.seconds, 2),
                       "steps_per_s": round(result.steps_per_s, 1), "p50_ms": round(result.latency_ms(0.5), 2),
                       "p99_ms": round(result.latency_ms(0.99), 2), "cross_talk": len(problems),
                       "problems": problems[:5], "with_solo_plays_s": round(time.perf_counter() - t0, 1)}
        print(json.dumps({server: out["load"]}), flush=True)
        t0 = time.perf_counter()
        samples = harness.churn(driver, units, n_churn, concurrency=CHURN_CONCURRENCY, sample_every=500,
                                progress=lambda k: print(f"  churn {k}/{n_churn}", file=sys.stderr, flush=True))
        warm = next((mb for k, mb in samples if k >= 1000), samples[-1][1])
        out["churn_result"] = {"seconds": round(time.perf_counter() - t0, 1),
                               "sessions_per_s": round(n_churn / (time.perf_counter() - t0), 1),
                               "rss_start_mb": round(samples[0][1], 1), "rss_after_1000_mb": round(warm, 1),
                               "rss_end_mb": round(samples[-1][1], 1),
                               "growth_after_warmup_mb": round(samples[-1][1] - warm, 1),
                               "open_sessions_left": left(), "samples": [(k, round(mb, 1)) for k, mb in samples]}
        print(json.dumps({server: {k: v for k, v in out["churn_result"].items() if k != "samples"}}), flush=True)
    finally:
        if hasattr(driver, "close"):
            driver.close()
        stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--server", default="rollout,openenv")
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--churn", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    res = [bench(s, args.workspace.resolve(), args.sessions, args.churn) for s in args.server.split(",")]
    text = json.dumps(res, indent=1)
    if args.out:
        args.out.write_text(text)
    print(json.dumps([{k: v for k, v in r.items() if k != "churn_result"} | {"churn": {
        k: v for k, v in r["churn_result"].items() if k != "samples"}} for r in res], indent=1))


if __name__ == "__main__":
    main()
