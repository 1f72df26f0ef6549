"""Episode and world runs side by side (docs/design.md §7 "World runs in the report").

A world run scores every event on its scheduled dates with the standing forecast at the end of the
day, so its rows are directly comparable with an episode run's rows of the same agents and events.
`find_companion` looks in the workspace's `runs/` folder for a run of the other mode that can be
compared (same corpus snapshot, index, events build and agent settings; at least one agent label
and one event in common); `compare_modes` computes, on the agents and events both runs share:

- per agent and mode, each run's OWN rows (never the other run's): Brier, tie accuracy, log score vs
  market (day mean; day close when both runs recorded it), and for the world run the time-weighted
  Brier from its per-question rows, each with its event-clustered bootstrap interval (events
  weighted equally, the averaging order of `bootstrap.event_means`);
- per agent, the paired difference world - episode on the (event, date) cells both runs scored,
  each mode's event value by the same averaging order, with its event-clustered interval.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from forecast_env.enums import PLAY_MODES
from forecast_env.errors import RunError
from forecast_env.eval.report import metrics
from forecast_env.eval.report.bootstrap import clustered_mean
from forecast_env.eval.runs.store import read_record

MODES = PLAY_MODES
#: environment settings that change what an agent can see or how it is scored; both runs must agree on
#: them (the call budgets differ by design: per date in episode mode, per day and question in world mode)
ENV_KEYS = ("memory", "search_mode", "search_k", "max_k", "article_chars", "hide_leak_flagged", "hide_market_quotes",
            "log_eps",
            "show_market", "max_observation_chars")
#: benchmark sections that configure the agents themselves
AGENT_SECTIONS = ("llm", "retrieval")
RECORD_KEYS = ("corpus_snapshot_id", "index_manifest_sha256", "events_config_hash")
VALUES = ("brier", "accuracy", "log_vs_market", "log_vs_market_close")


def run_mode(meta: Mapping[str, Any]) -> str:
    """`episode` or `world` (runs recorded before world mode existed are episode runs)."""
    return str(meta.get("mode") or "episode")


def _specs(meta: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """label -> (name, kwargs as JSON) of a run's agents."""
    out = {}
    for a in meta.get("agents") or []:
        if isinstance(a, Mapping):
            label = str(a.get("label") or a.get("name"))
            out[label] = (str(a.get("name")), json.dumps(a.get("kwargs") or {}, sort_keys=True, default=str))
        else:
            out[str(a)] = (str(a), "{}")
    return out


def incompatibility(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """Why two run records cannot be put side by side (None when they can)."""
    if run_mode(a) == run_mode(b):
        return f"both runs are {run_mode(a)} runs"
    for key in RECORD_KEYS:
        if a.get(key) != b.get(key):
            return f"{key} differs ({a.get(key)} vs {b.get(key)}): the runs saw different data"
    env_a, env_b = ((m.get("config") or {}).get("env") or {} for m in (a, b))
    for key in ENV_KEYS:
        if env_a.get(key) != env_b.get(key):
            return f"env.{key} differs ({env_a.get(key)} vs {env_b.get(key)})"
    bench_a, bench_b = ((m.get("config") or {}).get("benchmark") or {} for m in (a, b))
    for key in AGENT_SECTIONS:
        if bench_a.get(key) != bench_b.get(key):
            return f"benchmark.{key} differs: the agents were configured differently"
    sa, sb = _specs(a), _specs(b)
    if not any(sa[label] == sb[label] for label in set(sa) & set(sb)):
        return "no agent label with the same agent and settings in both runs"
    if not set(a.get("event_ids") or []) & set(b.get("event_ids") or []):
        return "no event in common"
    return None


def _read_meta(run_dir: Path) -> dict[str, Any] | None:
    try:
        return read_record(run_dir)
    except RunError:
        return None


def find_companion(run_dir: str | Path, meta: Mapping[str, Any]) -> Path | None:
    """The run of the other mode in the same `runs/` folder that compares best with this one: most
    agents in common, then most events in common, then the largest run id (run ids start with their
    UTC start time); None when there is none."""
    run_dir = Path(run_dir).resolve()
    best: tuple[int, int, str] | None = None
    found = None
    for other in sorted(run_dir.parent.iterdir()) if run_dir.parent.is_dir() else []:
        if other.resolve() == run_dir or not (other / "forecasts.parquet").exists():
            continue
        om = _read_meta(other)
        if om is None or incompatibility(meta, om) is not None:
            continue
        sa, sb = _specs(meta), _specs(om)
        key = (sum(sa[k] == sb[k] for k in set(sa) & set(sb)),
               len(set(meta.get("event_ids") or []) & set(om.get("event_ids") or [])), other.name)
        if best is None or key > best:
            best, found = key, other
    return found


def check_companion(meta: Mapping[str, Any], other_dir: str | Path) -> dict[str, Any]:
    """The record of a run given explicitly for the comparison; RunError saying why it cannot be compared."""
    other_dir = Path(other_dir)
    om = _read_meta(other_dir)
    if om is None or not (other_dir / "forecasts.parquet").exists():
        raise RunError(f"{other_dir}: not a finished run directory (run.json and forecasts.parquet); give the "
                       "directory of the other mode's run, WS/runs/<run_id>")
    why = incompatibility(meta, om)
    if why is not None:
        raise RunError(f"cannot put run {meta.get('run_id')} beside {other_dir.name}: {why}; compare runs of "
                       "the two modes made with the same workspace, agents and settings")
    return om


def _rows(run: Mapping[str, Any], agent: str, events: list[str]) -> pl.DataFrame:
    f = metrics.scored(run["forecasts"]).filter((pl.col("agent") == agent) & pl.col("event_id").is_in(events))
    cols = [c for c in ("event_id", "rollout", "step", *VALUES) if c in f.columns]
    return f.select(cols)


def compare_modes(episode: Mapping[str, Any], world: Mapping[str, Any], boot: metrics.Boot) -> dict[str, Any]:
    """Every number of the side-by-side section (see the module docstring), as plain data."""
    em, wm = episode["meta"], world["meta"]
    se, sw = _specs(em), _specs(wm)
    agents = sorted(label for label in set(se) & set(sw) if se[label] == sw[label]
                    and label in set(episode["forecasts"]["agent"].to_list())
                    and label in set(world["forecasts"]["agent"].to_list()))
    events = sorted(set(metrics.scored(episode["forecasts"])["event_id"].to_list())
                    & set(metrics.scored(world["forecasts"])["event_id"].to_list()))
    values = [v for v in VALUES if all(v in metrics.market_comparisons(r["forecasts"]) or v in ("brier", "accuracy")
                                       for r in (episode, world))]
    wq = world.get("world_questions")
    rows, paired = [], []
    for agent in agents:
        frames = {"episode": _rows(episode, agent, events), "world": _rows(world, agent, events)}
        for mode in MODES:
            f = frames[mode]
            row: dict[str, Any] = {"agent": agent, "mode": mode, "run_id": (em if mode == "episode" else wm)
                                   .get("run_id"), "n_forecasts": f.height, "n_events": f["event_id"].n_unique()}
            for v in values:
                row[v] = clustered_mean(f, v, boot.draws, boot.seed, boot.level).to_dict()
            row["time_weighted_brier"] = None
            if mode == "world" and wq is not None and wq.height:
                q = wq.filter((pl.col("agent") == agent) & pl.col("event_id").is_in(events))
                row["time_weighted_brier"] = clustered_mean(q, "time_weighted_brier", boot.draws, boot.seed,
                                                            boot.level).to_dict()
            rows.append(row)
        both = pl.concat([frames["episode"].with_columns(agent=pl.lit("episode")).select("agent", "event_id",
                                                                                        "rollout", "step", *values),
                          frames["world"].with_columns(agent=pl.lit("world")).select("agent", "event_id", "rollout",
                                                                                    "step", *values)])
        both = both.with_columns(missing=pl.lit(False))
        cells = (frames["episode"].select("event_id", "step").unique()
                 .join(frames["world"].select("event_id", "step").unique(), on=["event_id", "step"]).height)
        row = {"agent": agent, "cells": cells}
        for v in values:
            est = metrics.paired_difference(both, "world", "episode", v, boot)
            row[v] = {**est.to_dict(), "significant": est.excludes(0.0)}
        paired.append(row)
    return {"episode_run": em.get("run_id"), "world_run": wm.get("run_id"), "agents": agents,
            "events": len(events), "values": values, "rows": rows, "paired": paired}


__all__ = ["check_companion", "compare_modes", "find_companion", "incompatibility", "run_mode"]
