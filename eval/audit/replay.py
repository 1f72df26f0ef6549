"""Audit check 5: replay determinism, and the scripted reader the text check plays with
(docs/design.md §8 check 5).

`ScriptedReader` is a deterministic agent driven by its seed: at every forecast date (a fresh
session, as the environment requires) it searches the question with BM25, searches the question plus
a seeded choice of option (BM25 too, or the environment's default mode with `encoder=True`), opens a seeded choice of the hits,
writes one notebook entry and reports seeded probabilities. Two runs over the same events with the
same seed, each in a fresh environment with fresh agents, must give identical episode logs
(forecasts, tool calls, notebook snapshots, observations), timings and latencies excluded; and so
must a third run in a child process on "another machine": another OpenMP / OpenBLAS thread count and
another FAISS SIMD level (`other_machine`; FAISS reads the level at load, hence the process).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import date
from typing import Any

from forecast_env.eval.audit.inputs import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    AuditInputs,
    AuditSettings,
    CheckResult,
    as_day,
)
from forecast_env.store import drop_keys

#: Keys whose values are wall-clock measurements, dropped before two logs are compared.
TIMING_KEYS = frozenset({"latency_ms", "seconds", "elapsed_ms", "elapsed", "duration", "duration_ms", "time_ms",
                         "wall_s", "started", "finished", "created"})


class ScriptedReader:
    """A deterministic reader (see the module docstring); `record=True` keeps what it was shown per
    (event, date) in `seen` for the text check."""

    name = "audit_reader"

    def __init__(self, open_per_date: int = 3, record: bool = False, k: int = 10,
                 second_mode: str | None = "bm25") -> None:
        self.open_per_date = int(open_per_date)
        self.second_mode = second_mode  # None: the environment's default search mode
        self.record = record
        self.k = int(k)
        self.seen: dict[tuple[str, date], list[dict[str, Any]]] = {}
        self.texts_seen = 0
        self.opened = 0
        self.reset(seed=0)

    def reset(self, *, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._key: tuple[str, Any] | None = None

    def _start_date(self, obs: dict[str, Any]) -> None:
        self._queue: list[dict[str, Any]] = []
        self._phase = 0
        self._hits: list[dict[str, Any]] = []
        self._opened: list[dict[str, Any]] = []
        self._obs = obs

    def act(self, observation: str, info: dict) -> dict:
        from forecast_env.agents.base import parse_observation

        obs = parse_observation(observation, info)
        key = (str(info.get("event_id")), obs.get("forecast_date"))
        first = key != self._key
        if first:  # a new forecast date: a fresh session
            self._key = key
            self._start_date(obs)
        if self.record:
            day = as_day(obs.get("forecast_date"))
            if day is not None:
                self.seen.setdefault((key[0], day), []).append({**{k: obs.get(k) for k in
                                                                   ("question", "description", "options", "tool_result")},
                                                                "_first": first})
                self.texts_seen += 1
        tr = obs.get("tool_result")
        if isinstance(tr, dict) and isinstance(tr.get("hits"), list):
            self._hits += [h for h in tr["hits"] if isinstance(h, dict) and h.get("doc_id")]
        elif isinstance(tr, dict) and "body" in tr:
            self._opened.append(tr)
        return self._next(obs)

    def _next(self, obs: dict[str, Any]) -> dict:
        options = [str(o) for o in obs.get("options") or []]
        question = str(obs.get("question") or "news")
        self._phase += 1
        if self._phase == 1:
            return {"tool": "search", "args": {"query": question, "k": self.k, "mode": "bm25"}}
        if self._phase == 2:
            extra = self._rng.choice(options) if options else ""
            args: dict[str, Any] = {"query": f"{question} {extra}".strip(), "k": self.k}
            if self.second_mode:
                args["mode"] = self.second_mode
            return {"tool": "search", "args": args}
        if self._phase == 3:
            seen_ids = list(dict.fromkeys(h["doc_id"] for h in self._hits))
            pool = seen_ids[:5]
            self._queue = [{"tool": "open_article", "args": {"doc_id": d}}
                           for d in self._rng.sample(pool, min(self.open_per_date, len(pool)))]
            self.opened += len(self._queue)
        if self._queue:
            return self._queue.pop(0)
        if self._opened and self._phase < 100:
            self._phase = 100
            art = self._opened[0]
            return {"tool": "notebook_add", "args": {"claim": f"read: {str(art.get('title') or '')[:200]}",
                                                     "date_observed": str(obs.get("forecast_date")),
                                                     "doc_ids": [art.get("doc_id")]}}
        weights = [self._rng.random() + 0.1 for _ in options]
        total = sum(weights) or 1.0
        return {"tool": "forecast", "args": {"probabilities": {o: round(w / total, 6) for o, w in zip(options, weights)}}}

    async def aact(self, observation: str, info: dict) -> dict:
        return self.act(observation, info)


def episode_seed(seed: int, event_id: str) -> int:
    """A stable per-event seed."""
    return int(hashlib.sha256(f"{seed}|{event_id}".encode()).hexdigest()[:8], 16)


def play_events(inputs: AuditInputs, event_ids: Sequence[str], agent_factory: Callable[[int], Any], seed: int,
                progress: bool = False, desc: str = "audit replay") -> list[dict[str, Any]]:
    """Play `event_ids` in a fresh environment, one `agent_factory(i)` agent per episode; the logs."""
    from forecast_env.agents.base import run_episode
    from forecast_env.envs.forecast_env import ForecastEnv

    env = ForecastEnv(inputs.workspace.root, split=inputs.split, event_ids=list(event_ids),
                      searcher=inputs.searcher())
    items: Any = list(enumerate(event_ids))
    if progress:
        from tqdm import tqdm

        items = tqdm(items, desc=desc, unit="event")
    logs = []
    for i, eid in items:
        agent = agent_factory(i)
        run_episode(env, agent, seed=episode_seed(seed, eid), event_id=eid, rollout=0)
        logs.append(json.loads(json.dumps(env.episode_log(), default=str)))  # env is unwrapped (no wrapper)
    return logs  # not closed: the searcher is shared with the other checks


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first place where `a` and `b` differ (None when equal)."""
    if type(a) is not type(b):
        return f"{path or '/'}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}/{k}: present in one run only"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {str(a)[:120]!r} vs {str(b)[:120]!r}"


#: The variables that make "another machine" for the replay's third run.
MACHINE_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "FAISS_SIMD_LEVEL")


def other_machine() -> dict[str, str]:
    """Another thread count and another FAISS SIMD level than this process's (NONE, or AVX2 when this
    process already runs NONE; every x86-64 CPU that FAISS's AVX2 build runs on has AVX2)."""
    import faiss

    level = faiss.SIMDConfig.get_level_name()
    threads = faiss.omp_get_max_threads()
    other = "NONE" if level != "NONE" else "AVX2"
    n = "1" if threads > 1 else "3"
    return {"OMP_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n, "FAISS_SIMD_LEVEL": other}


def replay_elsewhere(inputs: AuditInputs, event_ids: Sequence[str], settings: AuditSettings,
                     env: dict[str, str]) -> list[dict[str, Any]]:
    """The default reader's logs of `event_ids`, played in a child process under `env` (RuntimeError
    with the child's last words when it fails)."""
    cmd = [sys.executable, "-m", "forecast_env.eval.audit.replay", "--workspace", str(inputs.workspace.root),
           "--split", inputs.split, "--seed", str(settings.seed), "--open-per-date", str(settings.open_per_date),
           "--events", json.dumps(list(event_ids))] + (["--encoder"] if settings.encoder else [])
    base = {k: v for k, v in os.environ.items() if k not in MACHINE_VARS}
    done = subprocess.run(cmd, env=base | env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError((done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"])
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_replay(inputs: AuditInputs, settings: AuditSettings,
                 agent_factory: Callable[[int], Any] | None = None) -> CheckResult:
    """Check 5 (see the module docstring). The third run, on another thread count and SIMD level,
    needs the default reader (a child process cannot rebuild another `agent_factory`)."""
    factory = agent_factory or _default_factory(settings)
    ids = sorted(inputs.split_events["event_id"].to_list())
    step = max(1, len(ids) // max(1, settings.replay_events))
    chosen = ids[::step][: settings.replay_events]
    if not chosen:
        return CheckResult("replay", INCONCLUSIVE, "no event to replay")
    runs = [drop_keys(play_events(inputs, chosen, factory, settings.seed), TIMING_KEYS) for _ in range(2)]
    env = other_machine() if agent_factory is None else None
    elsewhere: list[dict[str, Any]] | None = None
    if env is not None:
        try:
            elsewhere = drop_keys(replay_elsewhere(inputs, chosen, settings, env), TIMING_KEYS)
        except (RuntimeError, OSError, json.JSONDecodeError) as exc:
            return CheckResult("replay", FAIL, f"the replay under {env} did not complete: {exc}",
                               {"events": len(chosen), "other_machine": env}, ["other_machine: failed"])
    diffs = []
    for i, (eid, a, b) in enumerate(zip(chosen, runs[0], runs[1])):
        d = first_difference(a, b)
        if not d and elsewhere is not None:
            d = first_difference(a, elsewhere[i] if i < len(elsewhere) else None)
            d = f"under {env}: {d}" if d else None
        if d:
            diffs.append({"event_id": eid, "first_difference": d})
    n_calls = sum(len(log.get("tool_calls") or []) for log in runs[0])
    n_fc = sum(len(log.get("forecasts") or []) for log in runs[0])
    figures = {"events": len(chosen), "event_ids": chosen, "tool_calls_per_run": n_calls,
               "forecasts_per_run": n_fc, "differing_events": len(diffs),
               "excluded_keys": sorted(TIMING_KEYS), "other_machine": env}
    where = f" and in a process under {env}" if env else ""
    if diffs:
        return CheckResult("replay", FAIL, f"{len(diffs)} of {len(chosen)} episodes differ between runs with "
                                           f"the same seed (first: {diffs[0]['first_difference']})",
                           figures, [f"differing_events: {len(diffs)}"], diffs[:10])
    return CheckResult("replay", PASS, f"{len(chosen)} episodes ({n_calls} tool calls, {n_fc} forecasts) replay "
                                       f"identically with the same seed{where}", figures)


def _default_factory(settings: AuditSettings) -> Callable[[int], Any]:
    return lambda i: ScriptedReader(open_per_date=settings.open_per_date,
                                    second_mode=None if settings.encoder else "bm25")


def main(argv: list[str] | None = None) -> int:
    """The child of `replay_elsewhere`: play events with the default reader, print the logs as JSON."""
    import warnings

    from forecast_env.eval.audit.inputs import load_inputs

    ap = argparse.ArgumentParser(description="audit check 5's replay in another process")
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--split", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--open-per-date", type=int, required=True)
    ap.add_argument("--events", required=True, help="a JSON list of event ids")
    ap.add_argument("--encoder", action="store_true")
    a = ap.parse_args(argv)
    st = AuditSettings(seed=a.seed, open_per_date=a.open_per_date, encoder=a.encoder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs = play_events(load_inputs(a.workspace, a.split), json.loads(a.events), _default_factory(st), a.seed)
    print(json.dumps(logs, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
