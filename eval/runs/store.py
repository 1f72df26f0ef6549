"""The one owner of a run's folder `WS/runs/<run_id>/` (docs/design.md §7 "Runs"), as
`retrieval/layout.py` owns the index.

Every way of playing records through this module: the benchmark runner, the MCP server
(`adapters/mcp.py`), the verifiers rollout service (`adapters/rollout_service.py`) and any trainer.
None of them writes a file of the run's folder itself:

    rec = run_record(ws, "", split, event_ids, [AgentSpec("mine", "mine")], 1, 0, bench, env,
                     session="episode", extra={"engine": "trl"})
    run = open_run(ws, rec, run_id=None, if_exists="restart")  # create, or resume (same fingerprint)
    run.record_part(Task("mine", event_id, rollout), env.unwrapped.episode_log(), seed=0, seconds=1.2,
                    session="episode", messages=chat)           # one played episode, atomically
    run.consolidate()                                            # the run's tables from its parts
    run.finish(complete=True, episodes_done=n)                   # status (and any counts) into run.json

Layout of a run:

    run.json                 what replays it: configs, corpus snapshot id, index manifest hash, event
                             set (ids + hash), agent specs, seeds, package versions, session kind,
                             fingerprint, status; the summary when finished. Written by `Run` only.
    parts/<agent>/<event>/r<k>.json   one played episode (written atomically as it finishes)
    parts/<agent>/<event>/r<k>.claimed   a rollout number claimed by a process sharing the run
    failures.jsonl           episodes that raised (not written as parts: a rerun retries them)
    forecasts.parquet        schema.FORECASTS (run_id, agent added)   } consolidated from the parts
    tool_calls.parquet       schema.TOOL_CALLS                         }
    notebook.parquet         schema.NOTEBOOK                           }
    world_days.parquet, world_questions.parquet   world-mode runs only }
    trajectories.jsonl       per episode: steps (observation, action, reward) + the LLM messages
    events.parquet           the run's events (type, category, options, label, steps)
    market.parquet           the market's complete belief vectors on the forecast dates, scored
    manifest.json

Status (`run.json` `status`): a new run is `running`; `finish` makes it `complete` or `incomplete`
(an episode failed, a client left mid-episode, a rollout was abandoned); a run reopened with
`if_exists="restart"` (the runner's resume) is `running` again, one joined with `if_exists="join"`
(another process of the same rollout service) keeps its record.

Session kind (`SESSIONS`, docs/design.md §5 "One session per forecast date"), recorded per run and per
part: `per_date` (the player starts every forecast date from the observation alone: the runner's
agents, a per-date rollout), `episode` (a whole-event rollout that keeps its own chat), `harness`
(a harness over MCP that keeps its own memory). The memory ablation compares `per_date` runs only.

Fingerprint: the hash of what decides an episode's result (split, seed, agents, event set, corpus
snapshot, index manifest, env config, benchmark config less its execution knobs, the world's window,
and the way of playing when it is not the runner's). A run is resumed only by a record with the same
fingerprint; `open_run` refuses any other.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal, cast

import polars as pl
import pyarrow as pa

from forecast_env import schema
from forecast_env.config import config_hash
from forecast_env.enums import ENGINES
from forecast_env.errors import RunError
from forecast_env.store import (
    Workspace,
    atomic_write_json,
    atomic_write_table,
    atomic_write_text,
    package_versions,
    read_table,
    remove_temporaries,
    sha256_file,
    write_manifest,
)

#: The session kinds a run (and each of its parts) records (see the module docstring).
SESSIONS: tuple[str, ...] = ("per_date", "episode", "harness")
#: The values of `run.json` `status`.
STATUSES: tuple[str, ...] = ("running", "complete", "incomplete")
#: What `open_run` does with a run id that exists: resume and mark running, join as it is, or refuse.
IfExists = Literal["restart", "join", "refuse"]
#: The version of a part file's layout.
PART_VERSION = 1
#: The run's record, in its folder.
RECORD = "run.json"
#: The consolidated files the run's manifest lists.
RUN_TABLES: tuple[str, ...] = ("forecasts.parquet", "tool_calls.parquet", "notebook.parquet", "trajectories.jsonl",
                               "events.parquet", "market.parquet")
#: Engines of the runner itself: they change how episodes are spread, never what they do.
_RUNNER_ENGINES = ENGINES
_FINGERPRINT_KEYS = ("split", "seed", "agents", "event_set_hash", "corpus_snapshot_id", "index_manifest_sha256")
_EXECUTION_KNOBS = ("workers", "engine", "rollouts", "agents")


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
    """One episode of a run: the agent label, the event (a world run: the world id) and the rollout number."""

    label: str
    event_id: str
    rollout: int


@dataclass(frozen=True)
class WorldWindow:
    """The calendar of a world-mode run (`run.json` `world`)."""

    start: str
    end: str
    world_id: str

    def as_record(self) -> dict[str, str]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# the record
# ---------------------------------------------------------------------------------------------


def _manifest_field(path: Path, key: str) -> Any:
    try:
        return json.loads(path.read_text()).get(key)
    except (OSError, json.JSONDecodeError):
        return None


def run_record(ws: Workspace, run_id: str, split: str, event_ids: Sequence[str], specs: Sequence[AgentSpec],
               rollouts: int, seed: int, bench_cfg: Mapping[str, Any], env_cfg: Mapping[str, Any], *,
               session: str = "per_date", mode: str = "episode", world: WorldWindow | None = None,
               extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The replay record of a run (run.json without fingerprint, status and summary).

    `session` says what the player remembers across forecast dates (`SESSIONS`); `extra` adds keys such as
    `engine` (`mcp`, `verifiers`, a trainer's name) or `unit`, which then count in the fingerprint.
    """
    from forecast_env.envs.records import ablations
    from forecast_env.envs.tools import hidden_set

    if session not in SESSIONS:
        raise RunError(f"session {session!r} is unknown; use one of {', '.join(SESSIONS)}")
    ids = list(event_ids)
    index_manifest = ws.index_dir / "manifest.json"
    rec = {
        "run_id": run_id,
        "workspace": str(ws.root),
        "split": split,
        "rollouts": rollouts,
        "seed": seed,
        "agents": [asdict(s) for s in specs],
        "event_ids": ids,
        "event_set_hash": hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16],
        "corpus_snapshot_id": _manifest_field(ws.corpus_dir / "manifest.json", "snapshot_id"),
        "index_manifest_sha256": sha256_file(index_manifest) if index_manifest.exists() else None,
        "events_config_hash": _manifest_field(ws.events_dir / "manifest.json", "config_hash"),
        "config": {"benchmark": dict(bench_cfg), "env": dict(env_cfg)},
        "config_hash": config_hash({"benchmark": dict(bench_cfg), "env": dict(env_cfg)}),
        "session": session,
        "mode": mode,
        "world": world.as_record() if world is not None else None,
        # what the agents could not see, and how the env config departs from the defaults (docs/design.md §5)
        "hidden_flags": list(hidden_set(env_cfg)),
        "ablations": ablations(env_cfg),
        "versions": package_versions(),
        "python": sys.version.split()[0],
    }
    rec.update(extra or {})
    return rec


def fingerprint(rec: Mapping[str, Any]) -> str:
    """The hash of what decides a run's episodes (see the module docstring); a resume must match it."""
    env = dict(rec["config"]["env"])
    bench = {k: v for k, v in rec["config"]["benchmark"].items() if k not in _EXECUTION_KNOBS}
    world = {"world": rec["world"]} if rec.get("mode") == "world" else {}  # episode runs keep their fingerprint
    # the way of playing, when it is not the runner's (whose runs keep the fingerprint they always had)
    play = {k: rec[k] for k in ("session", "unit", "engine")
            if rec.get(k) is not None and rec[k] not in ("per_date", *_RUNNER_ENGINES)}
    return config_hash({**{k: rec.get(k) for k in _FINGERPRINT_KEYS}, "env": env, "bench": bench, **world, **play})


def new_run_id(tag: str) -> str:
    """A fresh run id: the UTC start time, then `tag` (run ids sort by start time)."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + f"-{tag}"


def open_run(workspace: str | Path | Workspace, record: Mapping[str, Any], *, run_id: str | None = None,
             if_exists: IfExists = "restart") -> Run:
    """Create the run of `record` (status `running`), or reopen it; returns its handle.

    `run_id` overrides `record["run_id"]`; with neither, the id is the start time and the fingerprint's first
    six characters. An existing run is reopened only when its fingerprint matches (RunError otherwise):
    `if_exists="restart"` rewrites its record as `running` (the runner resuming), `"join"` keeps it (another
    process records into the same run), `"refuse"` raises (a player that keeps its own memory cannot resume).
    """
    if if_exists not in ("restart", "join", "refuse"):
        raise RunError(f"if_exists={if_exists!r}: use restart, join or refuse")
    ws = workspace if isinstance(workspace, Workspace) else Workspace.at(workspace)
    rec = dict(record)
    fp = fingerprint(rec)
    rid = run_id or rec.get("run_id") or new_run_id(fp[:6])
    rec.update(run_id=rid, fingerprint=fp)
    run = Run(ws.root, rid)
    if run.exists():
        if if_exists == "refuse":
            raise RunError(f"{run.dir} exists; give a new run id (a run whose player keeps its own memory is "
                           "never resumed)")
        prev = run.read_record()
        if prev.get("fingerprint") not in (None, fp):
            raise RunError(f"{run.dir} holds a run with other agents, events, seed or configs (or another engine, "
                           "unit or session); "
                           "resume it with the same settings, or choose a new --run-id")
        if if_exists == "join":
            return run
    run.dir.mkdir(parents=True, exist_ok=True)
    remove_temporaries(run.dir)  # a killed run's writes in flight (no other process records into it)
    run._write_record({**rec, "status": "running"})
    return run


# ---------------------------------------------------------------------------------------------
# the run's folder
# ---------------------------------------------------------------------------------------------


def read_record(run_dir: str | Path, missing_ok: bool = False) -> dict[str, Any]:
    """The record (`run.json`) of the run in `run_dir`, which may lie outside a workspace (a copied run);
    `{}` when it has none and `missing_ok`; RunError when it is missing or unreadable otherwise."""
    path = Path(run_dir) / RECORD
    if missing_ok and not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RunError(f"{path}: no readable run record ({exc}); is {Path(run_dir)} a run directory "
                       "(WS/runs/<run_id>)?") from exc


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name)[:120] or "_"


def part_path(run_dir: Path, task: Task) -> Path:
    """Where one played episode of the run in `run_dir` is stored."""
    return Path(run_dir) / "parts" / _safe(task.label) / _safe(task.event_id) / f"r{task.rollout}.json"


def iter_parts(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every stored episode of the run in `run_dir`, in a stable order (agent, event, rollout)."""
    for path in sorted((Path(run_dir) / "parts").glob("*/*/r*.json"),
                       key=lambda p: (p.parent.parent.name, p.parent.name, int(p.stem[1:]))):
        try:
            yield json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise RunError(f"{path}: unreadable episode part ({exc}); delete it and rerun to replay the episode") \
                from exc


def _first_unclaimed(folder: Path) -> int:
    """The smallest k without `r<k>.claimed` in `folder`. Claims are never removed and each takes the
    smallest free number, so the claimed numbers are 0..n-1: galloping then bisecting finds n in
    O(log n) file checks instead of one per earlier rollout."""
    def claimed(k: int) -> bool:
        return (folder / f"r{k}.claimed").exists()

    if not claimed(0):
        return 0
    hi = 1
    while claimed(hi):
        hi *= 2
    lo = hi // 2  # claimed(lo), not claimed(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if claimed(mid):
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class Run:
    """A handle on `WS/runs/<run_id>/` (cheap and picklable: pool workers and Ray tasks write parts through
    it). `open_run` creates or reopens one; `Run(workspace, run_id)` names an existing one."""

    workspace: Path
    run_id: str

    def __post_init__(self) -> None:
        if not self.run_id or _safe(self.run_id) != self.run_id:
            raise RunError(f"run id {self.run_id!r}: use letters, digits and . _ = - only")
        object.__setattr__(self, "workspace", Path(self.workspace))

    @property
    def dir(self) -> Path:
        return Workspace.at(self.workspace).runs_dir / self.run_id

    @property
    def record_path(self) -> Path:
        return self.dir / RECORD

    def exists(self) -> bool:
        return self.record_path.exists()

    def read_record(self) -> dict[str, Any]:
        """The run's `run.json` (RunError when it is missing or unreadable)."""
        return read_record(self.dir)

    def _write_record(self, rec: Mapping[str, Any]) -> None:
        # the one place that writes run.json (JSON-normalized, so a reread compares equal)
        atomic_write_json(self.record_path, json.loads(json.dumps(dict(rec), default=str)))

    def finish(self, *, complete: bool, **fields: Any) -> dict[str, Any]:
        """Mark the run `complete` or `incomplete` and add `fields` (counts, seconds, summary) to its record."""
        rec = self.read_record()
        rec.update(fields, status="complete" if complete else "incomplete")
        self._write_record(rec)
        return rec

    # -- parts ------------------------------------------------------------------------------------

    def part_path(self, task: Task) -> Path:
        return part_path(self.dir, task)

    def has_part(self, task: Task) -> bool:
        return self.part_path(task).exists()

    def record_part(self, task: Task, log_: Mapping[str, Any], *, seed: int, seconds: float, session: str,
                    messages: Any = None, complete: bool = True,
                    extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Store one played episode (`log_` is the env's `episode_log()`); `complete=False` for an episode the
        player left. Returns the runner's result row (task, error, n_forecasts, seconds)."""
        if session not in SESSIONS:
            raise RunError(f"session {session!r} is unknown; use one of {', '.join(SESSIONS)}")
        part = {"version": PART_VERSION, "run_id": self.run_id, "agent": task.label, "event_id": task.event_id,
                "rollout": task.rollout, "seed": seed, "seconds": seconds, "forecasts": log_["forecasts"],
                "tool_calls": log_["tool_calls"], "notebook": log_["notebook"], "steps": log_["steps"],
                "messages": messages, "mode": log_.get("mode", "episode"), "session": session,
                "complete": complete}
        if part["mode"] == "world":  # the per-day and per-question score rows
            part.update(days=log_["days"], questions=log_["questions"])
        part.update(extra or {})
        atomic_write_text(self.part_path(task), json.dumps(part, default=str))
        return {"task": asdict(task), "error": None, "n_forecasts": len(log_["forecasts"]), "seconds": seconds}

    def parts(self) -> Iterator[dict[str, Any]]:
        """Every stored episode, in a stable order (agent, event, rollout)."""
        return iter_parts(self.dir)

    def claim_rollout(self, label: str, event_id: str) -> int:
        """The next free rollout number of (label, event), claimed with an exclusive file so that processes
        recording into one run never share one."""
        folder = self.part_path(Task(label, event_id, 0)).parent
        folder.mkdir(parents=True, exist_ok=True)
        k = _first_unclaimed(folder)
        while True:
            try:
                os.close(os.open(folder / f"r{k}.claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                return k
            except FileExistsError:
                k += 1

    def record_failures(self, results: Iterable[Mapping[str, Any]]) -> None:
        """Append episodes that raised to failures.jsonl (they have no part, so a rerun retries them)."""
        at = datetime.now(UTC).isoformat(timespec="seconds")
        lines = [json.dumps({**r, "at": at}) + "\n" for r in results]
        if lines:
            with open(self.dir / "failures.jsonl", "a", encoding="utf-8") as fh:
                fh.writelines(lines)

    # -- consolidation ----------------------------------------------------------------------------

    def consolidate(self, event_ids: Sequence[str] | None = None) -> dict[str, int]:
        """Write the run's tables and manifest from its parts (episode parts of `event_ids` only; default: the
        record's event set); returns the counts (episodes, forecasts, tool_calls, notebook)."""
        ids = list(event_ids) if event_ids is not None else list(self.read_record().get("event_ids") or [])
        counts = consolidate(self.dir, self.workspace, self.run_id, ids)
        write_manifest(self.dir, "run", files=[self.dir / n for n in RUN_TABLES], extra={"run_id": self.run_id})
        return counts

    def summary(self) -> pl.DataFrame:
        """Per agent Brier, accuracy, log vs market and counts, from the consolidated forecasts."""
        from forecast_env.eval.report.metrics import quick_summary

        return quick_summary(pl.read_parquet(self.dir / "forecasts.parquet"))


def _as_date(x: Any) -> date | None:
    if x is None or isinstance(x, date):
        return x
    return date.fromisoformat(str(x)[:10])


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


MARKET_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "event_id": pl.String, "step": pl.Int32, "steps_total": pl.Int32, "forecast_date": pl.Date,
    "options": pl.List(pl.String), "probs": pl.List(pl.Float64), "label": pl.String,
    "brier": pl.Float64, "accuracy": pl.Float64}


def event_tables(workspace: str | Path, event_ids: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The run's events (id, question, type, category, options, label, steps_total) and the market's
    scored complete belief vectors on each forecast date."""
    from forecast_env import scoring

    ws = Workspace.at(workspace)

    def frame(name: str, sch: pa.Schema) -> pl.DataFrame:
        # `pl.from_arrow` is typed DataFrame | Series; a Table always gives a DataFrame
        table = cast(pl.DataFrame, pl.from_arrow(read_table(ws.events_table(name), sch)))
        return table.filter(pl.col("event_id").is_in(event_ids))

    ev = frame("events", schema.EVENTS)
    sched = frame("schedule", schema.SCHEDULE)
    beliefs = frame("beliefs", schema.BELIEFS)
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


# ---------------------------------------------------------------------------------------------
# what a worker needs to play a run's episodes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunContext:
    """What a worker (a pool process, a Ray task, an asyncio task, a trainer's rollout) needs to play and
    record the episodes of one run. Picklable; replaces the runner's former `ctx` dict."""

    run: Run
    split: str
    env_config: dict[str, Any]
    bench_config: dict[str, Any]
    agents: tuple[AgentSpec, ...]
    seed: int
    session: str = "per_date"
    mode: str = "episode"
    world: WorldWindow | None = None

    @property
    def workspace(self) -> Path:
        return self.run.workspace

    def agent(self, label: str) -> AgentSpec:
        """The spec of the agent whose rows carry `label`."""
        for spec in self.agents:
            if spec.label == label:
                return spec
        raise RunError(f"run {self.run.run_id} has no agent labelled {label!r}")

    def env_key(self) -> str:
        """Which environment this context plays in: workers keep one open across runs with the same key."""
        return json.dumps({"workspace": str(self.workspace), "split": self.split, "env_config": self.env_config,
                           "mode": self.mode, "world": self.world.as_record() if self.world else None},
                          sort_keys=True, default=str)
