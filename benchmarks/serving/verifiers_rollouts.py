"""What a verifiers rollout of the forecasting environment costs: one at a time vs concurrent vs in process.

    python -m benchmarks.serving.verifiers_rollouts [--workspace WS] [--rollouts 8]

Every rollout is one (event, forecast date) of the eval split, played by the same scripted model (one
`search`, then `forecast`) from the suite's local chat-completions server, so the figures are the
machinery's cost, not a model's: verifiers' interception server, its bundled chat program and its
per-rollout MCP tool server, and the environment service behind them. Three ways over the same tasks:
verifiers with one rollout in flight at a time, verifiers with all of them in flight (one `serving()`),
and the same two actions stepped on a `ForecastEnv` in this process (the runner's floor). Without
`--workspace` a micro sample world is built first (about a minute).
"""

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path


def build_micro(root: Path) -> Path:
    """The micro sample world's workspace (corpus, index, events), as the test suite builds it."""
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events
    from forecast_env.synth import synthesize

    world, ws = root / "world", root / "ws"
    synthesize(world, preset="micro", seed=0, progress=False)
    build_corpus(sorted((world / "news").glob("*.warc.gz")), ws, workers=1, progress=False)
    build_index(ws, progress=False)
    build_events(world / "polymarket", ws, progress=False)
    return ws


def _script(task) -> list[dict]:
    from tests.support.chat_server import tool_call

    obs = json.loads(task.data.prompt.split("\n", 1)[1])
    n = len(obs["options"])
    return [tool_call("search", {"query": obs["question"], "k": 5}),
            tool_call("forecast", {"probabilities": dict.fromkeys(obs["options"], 1.0 / n)})]


def bench_verifiers(ws: Path, n: int, concurrent: bool, run_id: str) -> tuple[float, list[float]]:
    """Wall seconds for `n` rollouts and each rollout's seconds."""
    import verifiers.v1 as vf
    from verifiers.v1.clients import EvalClientConfig, ModelContext
    from verifiers.v1.env import RunSlot

    from forecast_env.adapters.verifiers import load_environment
    from tests.support.chat_server import ChatServer, text

    env = load_environment(ws, "eval", run_id=run_id)
    tasks = list(env.taskset)[:n]
    scripts = {t.data.prompt: _script(t) for t in tasks}

    def reply(body: dict) -> dict:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        script = scripts[user]
        return script[turn] if turn < len(script) else text("done")

    async def one(slot_task, ctx) -> float:
        t = time.perf_counter()
        episode = await env.run_slot(RunSlot(slot_task), ctx)
        if not episode.ok:
            raise RuntimeError(f"rollout failed: {episode.traces[0].errors if episode.traces else episode.errors}")
        return time.perf_counter() - t

    async def run() -> tuple[float, list[float]]:
        with ChatServer(default=reply) as srv:
            ctx = ModelContext(model="scripted", sampling=vf.SamplingConfig(),
                               client=EvalClientConfig(base_url=srv.base_url, api_key_var="BENCH_NO_KEY"))
            async with env.serving():
                started = time.perf_counter()
                if concurrent:
                    each = list(await asyncio.gather(*(one(t, ctx) for t in tasks)))
                else:
                    each = [await one(t, ctx) for t in tasks]
                return time.perf_counter() - started, each

    return asyncio.run(run())


def bench_env(ws: Path, n: int) -> tuple[float, list[float]]:
    """The same two actions per (event, date) on one `ForecastEnv` in this process."""
    from forecast_env.adapters.rollout_service import RolloutRun, task_rows
    from forecast_env.envs import ForecastEnv

    rows = list(task_rows(RolloutRun(workspace=str(ws), run_id="bench")))[:n]
    env = ForecastEnv(ws, split="eval")
    each = []
    started = time.perf_counter()
    for row in rows:
        t = time.perf_counter()
        obs = json.loads(env.reset(options={"event_id": row["event_id"], "step": row["step"]})[0])
        env.step({"tool": "search", "args": {"query": obs["question"], "k": 5}})
        env.step({"tool": "forecast", "args": {"probabilities": dict.fromkeys(obs["options"], 1.0)}})
        each.append(time.perf_counter() - t)
    env.close()
    return time.perf_counter() - started, each


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", help="a built workspace (default: build the micro sample world)")
    ap.add_argument("--rollouts", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-verifiers-") as tmp:
        ws = Path(args.workspace) if args.workspace else build_micro(Path(tmp))
        stamp = time.strftime("%H%M%S")
        rows = [("env.step in process", *bench_env(ws, args.rollouts)),
                ("verifiers, 1 in flight", *bench_verifiers(ws, args.rollouts, False, f"bench-vf-seq-{stamp}")),
                (f"verifiers, {args.rollouts} in flight",
                 *bench_verifiers(ws, args.rollouts, True, f"bench-vf-conc-{stamp}"))]
    print(f"{'path':<26} {'rollouts':>8} {'wall s':>8} {'p50 s':>8} {'max s':>8} {'rollouts/min':>13}")
    for name, wall, each in rows:
        print(f"{name:<26} {len(each):>8} {wall:>8.2f} {statistics.median(each):>8.2f} {max(each):>8.2f} "
              f"{60 * len(each) / wall:>13.1f}")


if __name__ == "__main__":
    main()
