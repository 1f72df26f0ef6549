"""The benchmark runner (docs/design.md §7): agents x events of a split x rollouts, in parallel, resumable.

Layout of a run, `WS/runs/<run_id>/`:

    run.json                 what replays it: configs, corpus snapshot id, index manifest hash, event
                             set (ids + hash), agent specs, seeds, package versions, summary
    parts/<agent>/<event>/r<k>.json   one finished episode (written atomically as it finishes)
    failures.jsonl           episodes that raised (not written as parts: a rerun retries them)
    forecasts.parquet        schema.FORECASTS (run_id, agent added)   } consolidated from the parts
    tool_calls.parquet       schema.TOOL_CALLS                         } at the end of every run
    notebook.parquet         schema.NOTEBOOK                           }
    trajectories.jsonl       per episode: steps (observation, action, reward) + the LLM messages
    events.parquet           the run's events (type, category, options, label, steps)
    market.parquet           the market's complete belief vectors on the forecast dates, scored
    manifest.json

A rerun with the same run id skips every episode whose part exists. Episodes run on a process pool
(each worker opens the environment once; the searcher memory-maps the index, so workers share the
page cache), on Ray with `engine="ray"`, and LLM agents run as asyncio tasks in this process with
`llm.concurrency` episodes in flight (their calls are slow, not CPU-bound).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from forecast_env import schema
from forecast_env.config import config_hash, load_config
from forecast_env.errors import ForecastEnvError, RunError
from forecast_env.executor import map_unordered
from forecast_env.store import (
    Workspace,
    atomic_write_json,
    atomic_write_table,
    atomic_write_text,
    package_versions,
    read_table,
    sha256_file,
    write_manifest,
)

log = logging.getLogger(__name__)

PART_VERSION = 1


@dataclass(frozen=True)
class AgentSpec:
    """An agent of a run: registry `name`, the `label` its rows carry, and keyword overrides."""

    name: str
    label: str
    kwargs: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str | Mapping[str, Any] | AgentSpec) -> AgentSpec:
        if isinstance(spec, AgentSpec):
            return spec
        if isinstance(spec, str):
            name = spec.strip()
            if not name:
                raise RunError("an agent name is empty; give names like uniform,base_rate,retrieval")
            return cls(name, name, {})
        if isinstance(spec, Mapping) and "name" in spec:
            rest = {k: v for k, v in spec.items() if k not in ("name", "label")}
            return cls(str(spec["name"]), str(spec.get("label") or spec["name"]), rest)
        raise RunError(f"agent spec {spec!r} is neither a name nor a mapping with 'name'")


@dataclass(frozen=True)
class Task:
    label: str
    event_id: str
    rollout: int


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name)[:120] or "_"


def part_path(run_dir: Path, task: Task) -> Path:
    """Where one finished episode is stored."""
    return run_dir / "parts" / _safe(task.label) / _safe(task.event_id) / f"r{task.rollout}.json"


def episode_seed(seed: int, task: Task) -> int:
    """A stable per-episode seed (independent of worker count and order)."""
    h = hashlib.sha256(f"{seed}|{task.label}|{task.event_id}|{task.rollout}".encode()).hexdigest()
    return int(h[:8], 16) % (2**31 - 1)


# ---------------------------------------------------------------------------------------------
# one episode (runs in a worker process, a Ray task or this process)
# ---------------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(ctx: dict[str, Any]) -> None:
    """Open the environment once per worker (and agents lazily, once per label)."""
    key = json.dumps({k: ctx.get(k) for k in ("workspace", "split", "env_config", "mode", "world")}, sort_keys=True,
                     default=str)
    if _WORKER.get("key") == key:
        _WORKER["ctx"] = ctx  # same environment; the run (id, dir, agents, seed) may differ
        return
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(name, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _WORKER.clear()
    _WORKER.update(key=key, ctx=ctx, env=_make_env(ctx, ctx.get("searcher")))


def _make_env(ctx: dict[str, Any], searcher: Any) -> Any:
    """The run's environment: `ForecastEnv`, or `ForecastWorldEnv` for a world-mode run."""
    if ctx.get("mode") == "world":
        from forecast_env.envs.world_env import ForecastWorldEnv

        return ForecastWorldEnv(ctx["workspace"], split=ctx["split"], start=ctx["world"]["start"],
                                end=ctx["world"]["end"], config=ctx["env_config"], searcher=searcher)
    from forecast_env.envs.forecast_env import ForecastEnv

    return ForecastEnv(ctx["workspace"], split=ctx["split"], config=ctx["env_config"], searcher=searcher)


def _agent(ctx: dict[str, Any], label: str) -> Any:
    """A fresh agent for one episode (docs/design.md §5: nothing an agent holds crosses episodes)."""
    from forecast_env.agents.base import make_agent

    name, kwargs = ctx["specs"][label]
    return make_agent(name, workspace=ctx["workspace"], config=ctx["bench_config"], split=ctx["split"],
                      world=ctx.get("mode") == "world", **kwargs)


def write_part(ctx: Mapping[str, Any], task: Task, log_: dict[str, Any], messages: Any, seed: int,
               seconds: float, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Store one finished (or, for a harness that left, partial) episode as the run's part file; `ctx` needs
    `run_id` and `run_dir`, `extra` adds keys (e.g. `session`, `complete`)."""
    part = {"version": PART_VERSION, "run_id": ctx["run_id"], "agent": task.label, "event_id": task.event_id,
            "rollout": task.rollout, "seed": seed, "seconds": seconds, "forecasts": log_["forecasts"],
            "tool_calls": log_["tool_calls"], "notebook": log_["notebook"], "steps": log_["steps"],
            "messages": messages, "mode": log_.get("mode", "episode")}
    if part["mode"] == "world":  # the per-day and per-question score rows
        part.update(days=log_["days"], questions=log_["questions"])
    part.update(extra or {})
    atomic_write_text(part_path(Path(ctx["run_dir"]), task), json.dumps(part, default=str))
    return {"task": asdict(task), "error": None, "n_forecasts": len(log_["forecasts"]), "seconds": seconds}


def _run_task(task_d: dict[str, Any]) -> dict[str, Any]:
    """Play one episode in this worker and store it; failures come back as a message."""
    from forecast_env.agents.base import run_episode

    ctx = _WORKER["ctx"]
    task = Task(**task_d)
    seed = episode_seed(ctx["seed"], task)
    started = time.perf_counter()
    try:
        env = _WORKER["env"]
        agent = _agent(ctx, task.label)
        env.unwrapped.rollout = task.rollout  # reset() keeps it (run_episode passes only the event id)
        try:
            run_episode(env, agent, seed=seed, event_id=None if ctx.get("mode") == "world" else task.event_id)
        finally:  # a fresh agent per episode: its connections end with it
            closer = getattr(agent, "close", None)
            if callable(closer):
                closer()
        messages = getattr(agent, "messages", None)
        return write_part(ctx, task, env.unwrapped.episode_log(), messages, seed, time.perf_counter() - started)
    except Exception as exc:
        log.warning("episode %s failed", task, exc_info=True)
        return {"task": asdict(task), "error": f"{type(exc).__name__}: {exc}"[:2000], "n_forecasts": 0,
                "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------------------------
# LLM agents: asyncio in this process
# ---------------------------------------------------------------------------------------------


async def _run_async(ctx: dict[str, Any], tasks: list[Task], concurrency: int, bar: Any) -> list[dict]:
    from forecast_env.agents.base import arun_episode
    from forecast_env.envs.tools import hidden_set
    from forecast_env.retrieval import Searcher

    searcher = None
    try:
        searcher = Searcher.open(ctx["workspace"], hide=hidden_set(ctx["env_config"]))  # the run's hide set
    except ForecastEnvError:
        searcher = None  # the env will say what is missing at the first search
    envs: asyncio.Queue = asyncio.Queue()
    for _ in range(max(1, min(concurrency, len(tasks)))):
        envs.put_nowait(_make_env(ctx, searcher))
    results: list[dict] = []

    async def one(task: Task) -> None:
        env = await envs.get()
        seed = episode_seed(ctx["seed"], task)
        started = time.perf_counter()
        try:
            agent = _agent(ctx, task.label)
            env.unwrapped.rollout = task.rollout
            try:
                await arun_episode(env, agent, seed=seed,
                                   event_id=None if ctx.get("mode") == "world" else task.event_id)
            finally:  # a fresh agent per episode: its HTTP clients end with it
                closer = getattr(agent, "aclose", None)
                if callable(closer):
                    await closer()
            res = write_part(ctx, task, env.unwrapped.episode_log(), getattr(agent, "messages", None), seed,
                              time.perf_counter() - started)
        except Exception as exc:
            log.warning("episode %s failed", task, exc_info=True)
            res = {"task": asdict(task), "error": f"{type(exc).__name__}: {exc}"[:2000], "n_forecasts": 0,
                   "seconds": time.perf_counter() - started}
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


def _manifest_field(path: Path, key: str) -> Any:
    try:
        return json.loads(path.read_text()).get(key)
    except (OSError, json.JSONDecodeError):
        return None


def run_record(ws: Workspace, run_id: str, split: str, event_ids: list[str], specs: list[AgentSpec],
               rollouts: int, seed: int, bench_cfg: Mapping[str, Any], env_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The replay record of a run (run.json without its summary)."""
    from forecast_env.envs.records import ablations
    from forecast_env.envs.tools import hidden_set

    index_manifest = ws.index_dir / "manifest.json"
    return {
        "run_id": run_id,
        "workspace": str(ws.root),
        "split": split,
        "rollouts": rollouts,
        "seed": seed,
        "agents": [asdict(s) for s in specs],
        "event_ids": event_ids,
        "event_set_hash": hashlib.sha256("\n".join(event_ids).encode()).hexdigest()[:16],
        "corpus_snapshot_id": _manifest_field(ws.corpus_dir / "manifest.json", "snapshot_id"),
        "index_manifest_sha256": sha256_file(index_manifest) if index_manifest.exists() else None,
        "events_config_hash": _manifest_field(ws.events_dir / "manifest.json", "config_hash"),
        "config": {"benchmark": dict(bench_cfg), "env": dict(env_cfg)},
        "config_hash": config_hash({"benchmark": dict(bench_cfg), "env": dict(env_cfg)}),
        # every agent of this runner starts each forecast date afresh (docs/design.md §5); runs whose
        # player keeps its own memory (a harness over MCP, a whole-episode rollout) say otherwise
        "session": "per_date",
        # what the agents could not see, and how the env config departs from the defaults (docs/design.md §5)
        "hidden_flags": list(hidden_set(env_cfg)),
        "ablations": ablations(env_cfg),
        "versions": package_versions(),
        "python": sys.version.split()[0],
    }


def _fingerprint(rec: Mapping[str, Any]) -> str:
    keys = ("split", "seed", "agents", "event_set_hash", "corpus_snapshot_id", "index_manifest_sha256")
    env = dict(rec["config"]["env"])
    bench = {k: v for k, v in rec["config"]["benchmark"].items() if k not in ("workers", "engine", "rollouts", "agents")}
    world = {"world": rec["world"]} if rec.get("mode") == "world" else {}  # episode runs keep their fingerprint
    return config_hash({**{k: rec.get(k) for k in keys}, "env": env, "bench": bench, **world})


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
    if engine not in ("local", "ray"):
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
    from forecast_env.agents.base import KNOWN_AGENTS, agent_class, is_async_agent

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
    if mode not in ("episode", "world"):
        raise RunError(f"mode {mode!r} is unknown; use episode or world")
    world = None
    if mode == "world":
        from forecast_env.envs.world import load_world

        w = load_world(ws.root, split, world_start, world_end, event_ids)
        ids = [q.question_id for q in w.questions]
        world = {"start": w.start.isoformat(), "end": w.end.isoformat(),
                 "world_id": w.world_id}
    else:
        ids = _event_set(ws.root, split, event_ids)
    rec = run_record(ws, run_id or "", split, ids, specs, rollouts, seed, bench, env_cfg)
    rec.update(mode=mode, world=world)
    fp = _fingerprint(rec)
    if run_id is None:
        run_id = datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + "-" + fp[:6]
    rec["run_id"] = run_id
    rec["fingerprint"] = fp
    run_dir = ws.runs_dir / run_id
    old = run_dir / "run.json"
    if old.exists():
        prev = json.loads(old.read_text())
        if prev.get("fingerprint") not in (None, fp):
            raise RunError(f"{run_dir} holds a run with other agents, events, seed or configs; resume it with the "
                           "same settings, or choose a new --run-id")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(old, {**rec, "status": "running"})

    units = [world["world_id"]] if world else ids  # a world run has one episode per agent x rollout
    tasks = [Task(s.label, e, r) for e in units for s in specs for r in range(rollouts)]
    todo = [t for t in tasks if not part_path(run_dir, t).exists()]
    ctx = {"workspace": str(ws.root), "split": split, "env_config": dict(env_cfg), "bench_config": dict(bench),
           "specs": {s.label: (s.name, dict(s.kwargs)) for s in specs}, "run_id": run_id, "run_dir": str(run_dir),
           "seed": seed, "asynchronous": sorted(asynchronous), "mode": mode, "world": world}
    n_workers = _resolve_workers(workers, bench)
    started = time.perf_counter()
    results = _execute(ctx, todo, n_workers, engine, int(bench["llm"]["concurrency"]), progress, len(tasks),
                       bench.get("ray_address"))
    seconds = time.perf_counter() - started
    failures = [r for r in results if r["error"]]
    if failures:
        with open(run_dir / "failures.jsonl", "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps({**r, "at": datetime.now(UTC).isoformat(timespec="seconds")}) + "\n" for r in failures)
    counts = consolidate(run_dir, ws.root, run_id, ids)
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    from forecast_env.eval.metrics import quick_summary

    summary = quick_summary(forecasts)
    rec.update(status="complete" if not failures and counts["episodes"] == len(tasks) else "incomplete",
               episodes_total=len(tasks), episodes_done=counts["episodes"], episodes_run_now=len(todo) - len(failures),
               episodes_failed=len(failures), seconds=round(seconds, 3), summary=summary.to_dicts(),
               engine=engine, workers=n_workers)
    atomic_write_json(old, rec)
    write_manifest(run_dir, "run", files=[run_dir / n for n in (
        "forecasts.parquet", "tool_calls.parquet", "notebook.parquet", "trajectories.jsonl", "events.parquet",
        "market.parquet")], extra={"run_id": run_id})
    if progress:
        print(format_summary(summary, rec), flush=True)
    return run_dir


def _execute(ctx: dict[str, Any], todo: list[Task], workers: int, engine: str, concurrency: int, progress: bool,
             total: int, ray_address: str | None = None) -> list[dict]:
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=total - len(todo), desc="episodes", unit="ep", file=sys.stderr)
    try:
        llm = [t for t in todo if t.label in ctx["asynchronous"]]
        rest = [t for t in todo if t.label not in ctx["asynchronous"]]
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


# ---------------------------------------------------------------------------------------------
# consolidation
# ---------------------------------------------------------------------------------------------


def _as_date(x: Any) -> date | None:
    if x is None or isinstance(x, date):
        return x
    return date.fromisoformat(str(x)[:10])


def iter_parts(run_dir: Path) -> Iterable[dict[str, Any]]:
    """Every stored episode of a run, in a stable order (agent, event, rollout)."""
    for path in sorted((run_dir / "parts").glob("*/*/r*.json"),
                       key=lambda p: (p.parent.parent.name, p.parent.name, int(p.stem[1:]))):
        try:
            yield json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise RunError(f"{path}: unreadable episode part ({exc}); delete it and rerun to replay the episode") \
                from exc


def consolidate(run_dir: str | Path, workspace: str | Path, run_id: str, event_ids: Sequence[str]) -> dict[str, int]:
    """Write forecasts/tool_calls/notebook Parquet, trajectories JSONL, events and market tables."""
    run_dir = Path(run_dir)
    wanted = set(event_ids)
    rows: dict[str, list[dict]] = {"forecasts": [], "tool_calls": [], "notebook": [], "world_days": [],
                                   "world_questions": []}
    n = 0
    traj_lines = []
    for part in iter_parts(run_dir):
        if part["event_id"] not in wanted and part.get("mode") != "world":
            continue
        n += 1
        extra = {"run_id": run_id, "agent": part["agent"]}
        for r in part["forecasts"]:
            rows["forecasts"].append({**r, **extra, "forecast_date": _as_date(r.get("forecast_date"))})
        for r in part["tool_calls"]:
            rows["tool_calls"].append({**r, **extra})
        for r in part["notebook"]:
            rows["notebook"].append({**r, **extra})
        world_extra = {**extra, "world_id": part["event_id"], "rollout": part["rollout"]}
        rows["world_days"] += [{**r, **world_extra, "date": _as_date(r["date"])} for r in part.get("days") or []]
        rows["world_questions"] += [{**r, **world_extra, **{k: _as_date(r.get(k)) for k in ("first_day", "last_day", "cut")}}
                                    for r in part.get("questions") or []]
        scores = [{k: r.get(k) for k in ("event_id", "step", "forecast_date", "brier", "accuracy", "log_vs_market",
                                         "fallback", "missing")} for r in part["forecasts"]]
        traj_lines.append(json.dumps({"run_id": run_id, "agent": part["agent"], "event_id": part["event_id"],
                                      "rollout": part["rollout"], "seed": part["seed"], "scores": scores,
                                      "steps": part["steps"], "messages": part.get("messages")}, default=str))
    for name, sch in (("forecasts", schema.FORECASTS), ("tool_calls", schema.TOOL_CALLS),
                      ("notebook", schema.NOTEBOOK)):
        table = pa.Table.from_pylist(rows[name]) if rows[name] else schema.empty_table(sch)
        atomic_write_table(run_dir / f"{name}.parquet", table, sch)
    for name, sch in (("world_days", schema.WORLD_DAYS), ("world_questions", schema.WORLD_QUESTIONS)):
        if rows[name]:  # world-mode runs only
            atomic_write_table(run_dir / f"{name}.parquet", pa.Table.from_pylist(rows[name]), sch)
    atomic_write_text(run_dir / "trajectories.jsonl", "\n".join(traj_lines) + ("\n" if traj_lines else ""))
    events, market = event_tables(workspace, sorted(wanted))
    atomic_write_table(run_dir / "events.parquet", events.to_arrow())
    atomic_write_table(run_dir / "market.parquet", market.to_arrow())
    return {"episodes": n, "forecasts": len(rows["forecasts"]), "tool_calls": len(rows["tool_calls"]),
            "notebook": len(rows["notebook"])}


MARKET_SCHEMA = {"event_id": pl.String, "step": pl.Int32, "steps_total": pl.Int32, "forecast_date": pl.Date,
                 "options": pl.List(pl.String), "probs": pl.List(pl.Float64), "label": pl.String,
                 "brier": pl.Float64, "accuracy": pl.Float64}


def event_tables(workspace: str | Path, event_ids: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The run's events (id, question, type, category, options, label, steps_total) and the market's
    scored complete belief vectors on each forecast date."""
    from forecast_env import scoring

    ws = Workspace.at(workspace)
    ev = pl.from_arrow(read_table(ws.events_table("events"), schema.EVENTS)).filter(pl.col("event_id").is_in(event_ids))
    sched = pl.from_arrow(read_table(ws.events_table("schedule"), schema.SCHEDULE)).filter(
        pl.col("event_id").is_in(event_ids))
    beliefs = pl.from_arrow(read_table(ws.events_table("beliefs"), schema.BELIEFS)).filter(
        pl.col("event_id").is_in(event_ids))
    events = (ev.select("event_id", "question", "type", "category", "options", "label", "split")
              .join(sched.group_by("event_id").agg(pl.col("steps_total").max()), on="event_id", how="left")
              .sort("event_id"))
    day_b = (beliefs.join(sched.select("event_id", "step", "steps_total", day="forecast_date"), on=["event_id", "day"])
             .filter(pl.col("complete").fill_null(False) & pl.col("belief").is_not_null()))
    labels = dict(zip(ev["event_id"].to_list(), ev["label"].to_list()))
    options = dict(zip(ev["event_id"].to_list(), ev["options"].to_list()))
    rows = []
    for (eid, step), sub in sorted(day_b.group_by(["event_id", "step"]), key=lambda kv: kv[0]):
        got = dict(zip(sub["option"].to_list(), sub["belief"].to_list()))
        opts = [o for o in options[eid] if o in got]
        if len(opts) != len(options[eid]):
            continue  # not every option priced: the vector is not complete
        probs = [float(got[o]) for o in opts]
        rows.append({"event_id": eid, "step": step, "steps_total": sub["steps_total"][0],
                     "forecast_date": sub["day"][0], "options": opts, "probs": probs, "label": labels[eid],
                     "brier": scoring.brier(dict(zip(opts, probs)), labels[eid], opts),
                     "accuracy": scoring.tie_accuracy(dict(zip(opts, probs)), labels[eid], opts)})
    market = pl.DataFrame(rows, schema=MARKET_SCHEMA)
    return events, market


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
