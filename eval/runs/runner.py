"""The benchmark runner (docs/design.md §7): agents x events of a split x rollouts, in parallel, resumable.

A run's folder `WS/runs/<run_id>/` (its layout, run.json, parts, consolidation) is owned by
`forecast_env.eval.runs.store`; the runner creates the run there, plays the episodes not stored yet and
records each through it.

A rerun with the same run id skips every episode whose part exists. Episodes run on a process pool
(each worker opens the environment once; the searcher memory-maps the index, so workers share the
page cache), on Ray with `engine="ray"`, and LLM agents run as asyncio tasks in this process with
`llm.concurrency` episodes in flight (their calls are slow, not CPU-bound). Both paths play an
episode through the one loop `_play_task`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import sys
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl

from forecast_env.config import load_config
from forecast_env.enums import ENGINES, PLAY_MODES
from forecast_env.errors import DiskFullError, ForecastEnvError, RunError, disk_full_errno
from forecast_env.eval.runs.store import AgentSpec, RunContext, Task, WorldWindow, open_run, run_record
from forecast_env.executor import map_unordered
from forecast_env.store import Workspace

log = logging.getLogger(__name__)

def episode_seed(seed: int, task: Task) -> int:
    """A stable per-episode seed (independent of worker count and order)."""
    h = hashlib.sha256(f"{seed}|{task.label}|{task.event_id}|{task.rollout}".encode()).hexdigest()
    return int(h[:8], 16) % (2**31 - 1)


# ---------------------------------------------------------------------------------------------
# one episode (runs in a worker process, a Ray task or an asyncio task of this process)
# ---------------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(ctx: RunContext) -> None:
    """Open the environment once per worker (and agents lazily, once per label)."""
    key = ctx.env_key()
    if _WORKER.get("key") == key:
        _WORKER["ctx"] = ctx  # same environment; the run (id, agents, seed) may differ
        return
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(name, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _WORKER.clear()
    _WORKER.update(key=key, ctx=ctx, env=_make_env(ctx, None))


def _make_env(ctx: RunContext, searcher: Any) -> Any:
    """The run's environment: `ForecastEnv`, or `ForecastWorldEnv` for a world-mode run."""
    if ctx.mode == "world" and ctx.world is not None:
        from forecast_env.envs.world_env import ForecastWorldEnv

        return ForecastWorldEnv(ctx.workspace, split=ctx.split, start=ctx.world.start, end=ctx.world.end,
                                config=ctx.env_config, searcher=searcher)
    from forecast_env.envs.forecast_env import ForecastEnv

    return ForecastEnv(ctx.workspace, split=ctx.split, config=ctx.env_config, searcher=searcher)


def _agent(ctx: RunContext, label: str) -> Any:
    """A fresh agent for one episode (docs/design.md §5: nothing an agent holds crosses episodes)."""
    from forecast_env.agents.registry import make_agent

    spec = ctx.agent(label)
    return make_agent(spec.name, workspace=ctx.workspace, config=ctx.bench_config, split=ctx.split,
                      world=ctx.mode == "world", **dict(spec.kwargs))


async def _play_task(ctx: RunContext, env: Any, task: Task, asynchronous: bool) -> dict[str, Any]:
    """Play one episode with a fresh agent and record it as a part of the run; a failure comes back as a
    message. The one episode loop of both paths: a sync agent's episode never awaits (`_run_sync`)."""
    from forecast_env.agents.base import arun_episode, run_episode

    seed = episode_seed(ctx.seed, task)
    started = time.perf_counter()
    event_id = None if ctx.mode == "world" else task.event_id
    try:
        agent = _agent(ctx, task.label)
        try:
            if asynchronous:
                await arun_episode(env, agent, seed=seed, event_id=event_id, rollout=task.rollout)
            else:
                run_episode(env, agent, seed=seed, event_id=event_id, rollout=task.rollout)
        finally:  # a fresh agent per episode: its connections end with it
            closer = getattr(agent, "aclose" if asynchronous else "close", None)
            if callable(closer):
                closed = closer()
                if asynchronous:
                    await closed
        return ctx.run.record_part(task, env.unwrapped.episode_log(), seed=seed, seconds=time.perf_counter() - started,
                                   session=ctx.session, messages=getattr(agent, "messages", None))
    except DiskFullError:
        raise  # not the episode's failure: the run stops, and its rerun resumes once there is space
    except Exception as exc:
        if disk_full_errno(exc) is not None:
            raise DiskFullError.at(ctx.run.dir, exc) from exc
        log.warning("episode %s failed", task, exc_info=True)
        return {"task": asdict(task), "error": f"{type(exc).__name__}: {exc}"[:2000], "n_forecasts": 0,
                "seconds": time.perf_counter() - started}


def _run_sync(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """Drive a coroutine that never awaits (a sync agent's episode) to its result, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RunError("a synchronous episode awaited; run its agent as an async agent (aact)")


def _run_task(task_d: dict[str, Any]) -> dict[str, Any]:
    """Play one episode in this worker (its environment opened by `_init_worker`) and store it."""
    return _run_sync(_play_task(_WORKER["ctx"], _WORKER["env"], Task(**task_d), asynchronous=False))


# ---------------------------------------------------------------------------------------------
# LLM agents: asyncio in this process
# ---------------------------------------------------------------------------------------------


async def _run_async(ctx: RunContext, tasks: list[Task], concurrency: int, bar: Any) -> list[dict]:
    from forecast_env.envs.tools import hidden_set
    from forecast_env.retrieval import Searcher

    searcher = None
    try:
        searcher = Searcher.open(ctx.workspace, hide=hidden_set(ctx.env_config))  # the run's hide set
    except ForecastEnvError:
        searcher = None  # the env will say what is missing at the first search
    envs: asyncio.Queue = asyncio.Queue()
    for _ in range(max(1, min(concurrency, len(tasks)))):
        envs.put_nowait(_make_env(ctx, searcher))
    results: list[dict] = []

    async def one(task: Task) -> None:
        env = await envs.get()
        try:
            res = await _play_task(ctx, env, task, asynchronous=True)
        finally:
            envs.put_nowait(env)
        results.append(res)
        if bar is not None:
            bar.update(1)

    await asyncio.gather(*(one(t) for t in tasks))
    return results


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


def _event_set(workspace: Path, split: str, event_ids: Sequence[str] | None) -> list[str]:
    from forecast_env.envs.forecast_env import load_episodes

    return [e.event_id for e in load_episodes(workspace, split, event_ids)]

def _resolve_workers(workers: int | None, cfg: Mapping[str, Any]) -> int:
    w = workers if workers is not None else cfg.get("workers")
    if w is None:
        w = os.cpu_count() or 1
    if int(w) < 1:
        raise RunError(f"workers = {w}: give at least 1 (or leave it unset for the number of cores)")
    return int(w)


def run_benchmark(
    workspace: str | Path,
    agents: Sequence[str | Mapping[str, Any] | AgentSpec] | str | None = None,
    split: str | None = None,
    rollouts: int | None = None,
    seed: int | None = None,
    workers: int | None = None,
    engine: str | None = None,
    run_id: str | None = None,
    config: Mapping[str, Any] | None = None,
    progress: bool = True,
    event_ids: Sequence[str] | None = None,
    env_config: Mapping[str, Any] | None = None,
    mode: str = "episode",
    world_start: str | None = None,
    world_end: str | None = None,
) -> Path:
    """Run agents x events of `split` x rollouts; returns the run directory `WS/runs/<run_id>/`.

    `mode="world"` plays each agent x rollout through one `ForecastWorldEnv` over the split's calendar
    (`world_start`/`world_end` narrow it); its rows are scored like episode rows (docs/design.md §5).

    Arguments left as None take the benchmark config (`config`, else the packaged defaults).
    Resumable: a rerun with the same `run_id` plays only the episodes not stored yet.
    """
    bench = load_config("benchmark", overrides=dict(config or {}))
    env_cfg = load_config("env", overrides=dict(env_config or {}))
    split = split or bench["split"]
    rollouts = int(rollouts if rollouts is not None else bench["rollouts"])
    seed = int(seed if seed is not None else bench["seed"])
    engine = engine or bench["engine"]
    if engine not in ENGINES:
        raise RunError(f"engine {engine!r} is unknown; use local or ray")
    if rollouts < 1:
        raise RunError(f"rollouts = {rollouts}: give at least 1")
    if isinstance(agents, str):
        agents = [a for a in agents.split(",") if a.strip()]
    specs = [AgentSpec.parse(a) for a in (agents if agents is not None else bench["agents"])]
    if not specs:
        raise RunError("no agents given; e.g. agents=['uniform', 'base_rate', 'retrieval']")
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise RunError(f"agent labels repeat ({', '.join(labels)}); give each spec its own 'label'")
    from forecast_env.agents.registry import KNOWN_AGENTS, agent_class, is_async_agent

    for s in specs:
        if s.name not in KNOWN_AGENTS:
            try:
                agent_class(s.name)  # your own agent (package.module:Class or an entry point): checked now
            except ForecastEnvError as exc:
                raise RunError(str(exc)) from exc
    asynchronous = {s.label for s in specs if is_async_agent(s.name)}
    if split == "all" and any(s.name == "base_rate" for s in specs):
        from forecast_env.agents.base_rate import fit_split

        fit_split(split)  # refuses before any episode runs: no other split to fit the rates on

    ws = Workspace.at(workspace)
    if mode not in PLAY_MODES:
        raise RunError(f"mode {mode!r} is unknown; use episode or world")
    world = None
    if mode == "world":
        from forecast_env.envs.world import load_world

        w = load_world(ws.root, split, world_start, world_end, event_ids)
        ids = [q.question_id for q in w.questions]
        world = WorldWindow(w.start.isoformat(), w.end.isoformat(), w.world_id)
    else:
        ids = _event_set(ws.root, split, event_ids)
    # every agent of this runner starts each forecast date afresh (docs/design.md §5)
    rec = run_record(ws, run_id or "", split, ids, specs, rollouts, seed, bench, env_cfg, session="per_date",
                     mode=mode, world=world)
    run = open_run(ws, rec, run_id=run_id, if_exists="restart")

    units = [world.world_id] if world else ids  # a world run has one episode per agent x rollout
    tasks = [Task(s.label, e, r) for e in units for s in specs for r in range(rollouts)]
    todo = [t for t in tasks if not run.has_part(t)]
    ctx = RunContext(run=run, split=split, env_config=dict(env_cfg), bench_config=dict(bench), agents=tuple(specs),
                     seed=seed, session="per_date", mode=mode, world=world)
    n_workers = _resolve_workers(workers, bench)
    started = time.perf_counter()
    results = _execute(ctx, todo, asynchronous, n_workers, engine, int(bench["llm"]["concurrency"]), progress,
                       len(tasks), bench.get("ray_address"))
    seconds = time.perf_counter() - started
    failures = [r for r in results if r["error"]]
    run.record_failures(failures)
    counts = run.consolidate(ids)
    summary = run.summary()
    rec = run.finish(complete=not failures and counts["episodes"] == len(tasks), episodes_total=len(tasks),
                     episodes_done=counts["episodes"], episodes_run_now=len(todo) - len(failures),
                     episodes_failed=len(failures), seconds=round(seconds, 3), summary=summary.to_dicts(),
                     engine=engine, workers=n_workers)
    if progress:
        print(format_summary(summary, rec), flush=True)
    return run.dir


def _execute(ctx: RunContext, todo: list[Task], asynchronous: set[str], workers: int, engine: str, concurrency: int,
             progress: bool, total: int, ray_address: str | None = None) -> list[dict]:
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=total - len(todo), desc="episodes", unit="ep", file=sys.stderr)
    try:
        llm = [t for t in todo if t.label in asynchronous]
        rest = [t for t in todo if t.label not in asynchronous]
        results: list[dict] = []
        if rest:
            # the core executor: in this process, a spawned pool or Ray actors; one compute thread per
            # worker (the pool fills the cores); `_init_worker` opens the environment once per worker
            advice = ("Finished episodes are saved: rerun with the same run id to resume. A script calling "
                      "run_benchmark with workers > 1 needs the __main__ guard (or use workers=1).")
            for result in map_unordered(_run_task, [asdict(t) for t in rest], engine=engine, workers=workers,
                                        setup=_init_worker, setup_args=(ctx,), threads=1, ray_address=ray_address,
                                        error=RunError, broken_advice=advice):
                results.append(result)
                if bar is not None:
                    bar.update(1)
        if llm:
            results += asyncio.run(_run_async(ctx, llm, concurrency, bar))
        return results
    finally:
        if bar is not None:
            bar.close()


def format_summary(summary: pl.DataFrame, rec: Mapping[str, Any]) -> str:
    """The closing table: per agent Brier, accuracy, log vs market, forecasts, missing."""
    head = f"{'agent':<22} {'brier':>8} {'accuracy':>9} {'log_vs_mkt':>11} {'forecasts':>10} {'missing':>8}"
    lines = [(f"run {rec['run_id']}: {rec.get('episodes_done')}/{rec.get('episodes_total')} episodes "
             f"({rec.get('episodes_run_now', 0)} run now, {rec.get('episodes_failed', 0)} failed) "
             f"in {rec.get('seconds', 0):.1f}s"), head, "-" * len(head)]
    for r in summary.iter_rows(named=True):
        def f(x: float | None, w: int) -> str:
            return f"{x:>{w}.4f}" if x is not None and not math.isnan(x) else f"{'-':>{w}}"

        lines.append(f"{r['agent']:<22} {f(r['brier'], 8)} {f(r['accuracy'], 9)} {f(r['log_vs_market'], 11)} "
                     f"{r['n_forecasts']:>10} {r['missing']:>8}")
    return "\n".join(lines)
