"""What the MCP shell costs per tool call: the SDK client over stdio vs the environment stepped in process.

    python -m benchmarks.serving.mcp_call_cost [--workspace WS] [--calls 200]   (default: the micro sample world)

Both sides run the same sequence on the same event: `observe` (MCP only: free), then `search` with a new
query each time (BM25 mode, so the figure is the protocol's cost rather than query embedding), and
`open_article` on the first hit. Prints p50/p95 per call and calls/s for each side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _queries(n: int) -> list[str]:
    words = ["vote", "election", "award", "court", "ruling", "market", "senate", "film", "league", "final",
             "council", "budget", "strike", "merger", "trial", "summit", "poll", "treaty", "storm", "launch"]
    return [f"{words[i % len(words)]} {words[(i * 7 + 3) % len(words)]} {i}" for i in range(n)]


def bench_env(ws: Path, event_id: str, queries: list[str]) -> list[float]:
    from forecast_env.envs import ForecastEnv

    env = ForecastEnv(ws, split="eval", max_calls_per_date=len(queries) * 3)
    env.reset(options={"event_id": event_id})
    times = []
    for q in queries:
        t = time.perf_counter()
        _, _, _, _, info = env.step({"tool": "search", "args": {"query": q, "mode": "bm25", "k": 5}})
        times.append(time.perf_counter() - t)
        hits = (info.get("tool_result") or {}).get("hits") or []
        if hits:
            t = time.perf_counter()
            env.step({"tool": "open_article", "args": {"doc_id": hits[0]["doc_id"]}})
            times.append(time.perf_counter() - t)
    return times


def bench_mcp(ws: Path, event_id: str, queries: list[str]) -> list[float]:
    from mcp import Client, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "forecast_env.cli.main", "mcp", "--workspace", str(ws), "--event", event_id,
        "--run-id", f"bench-mcp-{int(time.time())}", "--set", f"env.max_calls_per_date={len(queries) * 3}"],
        env=dict(os.environ))  # the same interpreter setup (PYTHONPATH, offline flags) as this process
    times: list[float] = []

    async def main() -> None:
        async with Client(stdio_client(params)) as client:
            await client.call_tool("observe", {})
            for q in queries:
                t = time.perf_counter()
                res = await client.call_tool("search", {"query": q, "mode": "bm25", "k": 5})
                times.append(time.perf_counter() - t)
                hits = (json.loads(res.content[0].text).get("tool_result") or {}).get("hits") or []
                if hits:
                    t = time.perf_counter()
                    await client.call_tool("open_article", {"doc_id": hits[0]["doc_id"]})
                    times.append(time.perf_counter() - t)

    asyncio.run(main())
    return times


def _row(name: str, times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    return f"{name:<28} {len(ms):>6} {statistics.median(ms):>9.2f} {p95:>9.2f} {len(ms) / sum(times):>9.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", help="a built workspace (default: build the micro sample world)")
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    if args.workspace is None:
        from benchmarks.serving.verifiers_rollouts import build_micro  # one home for the micro world's build

        tmp = tempfile.TemporaryDirectory(prefix="bench-mcp-")
        ws = build_micro(Path(tmp.name))
    else:
        ws = Path(args.workspace)
    from forecast_env.envs import ForecastEnv

    event_id = ForecastEnv(ws, split="eval").event_ids[0]
    queries = _queries(args.calls)
    env_times = bench_env(ws, event_id, queries)
    mcp_times = bench_mcp(ws, event_id, queries)
    print(f"{'path':<28} {'calls':>6} {'p50 ms':>9} {'p95 ms':>9} {'calls/s':>9}")
    print(_row("env.step in process", env_times))
    print(_row("MCP stdio (SDK client)", mcp_times))


if __name__ == "__main__":
    main()
