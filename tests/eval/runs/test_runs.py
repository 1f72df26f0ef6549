"""The run store (eval/runs/store.py): create, resume by fingerprint, refusals, parts, consolidation, status."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import polars as pl
import pytest

from forecast_env.agents.base import run_episode
from forecast_env.agents.registry import make_agent
from forecast_env.config import load_config
from forecast_env.envs.forecast_env import ForecastEnv
from forecast_env.errors import RunError
from forecast_env.eval.runs import store as runs
from forecast_env.eval.runs.store import AgentSpec, RunContext, Task
from forecast_env.store import Workspace
from tests.support.env_data import build_workspace

EVENTS = ["pm-1", "pm-2", "pm-4"]


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("runs_ws"), index=False)


def _record(ws: Path, seed: int = 0, session: str = "per_date", **extra) -> dict:
    return runs.run_record(Workspace.at(ws), "", "all", EVENTS, [AgentSpec("uniform", "u", {})], 1, seed,
                           load_config("benchmark"), load_config("env"), session=session, extra=extra or None)


def _played(ws: Path, event_id: str, rollout: int) -> dict:
    """The episode log of a real uniform agent over `event_id`, its rows numbered `rollout`."""
    env = ForecastEnv(ws, split="all")
    try:
        run_episode(env, make_agent("uniform"), seed=0, event_id=event_id, rollout=rollout)
        return env.unwrapped.episode_log()
    finally:
        env.close()


def test_create_writes_a_running_record(ws):
    run = runs.open_run(ws, _record(ws), run_id="new")
    rec = json.loads((ws / "runs" / "new" / "run.json").read_text())
    assert run.dir == Workspace.at(ws).runs_dir / "new" and run.record_path.exists()
    assert rec["status"] == "running" and rec["run_id"] == "new" and rec["session"] == "per_date"
    assert rec["fingerprint"] == runs.fingerprint(_record(ws)) and rec["event_ids"] == EVENTS
    assert rec["mode"] == "episode" and rec["world"] is None


def test_a_run_id_is_made_from_the_time_and_fingerprint(ws):
    run = runs.open_run(ws, _record(ws, seed=5))
    fp = runs.fingerprint(_record(ws, seed=5))
    assert run.run_id.endswith("-" + fp[:6]) and run.read_record()["run_id"] == run.run_id


def test_resume_needs_the_same_fingerprint(ws):
    run = runs.open_run(ws, _record(ws), run_id="resume")
    run.finish(complete=False, episodes_done=1)
    again = runs.open_run(ws, _record(ws), run_id="resume", if_exists="restart")
    assert again == run and again.read_record()["status"] == "running"
    with pytest.raises(RunError, match="holds a run with other"):
        runs.open_run(ws, _record(ws, seed=1), run_id="resume")
    with pytest.raises(RunError, match="holds a run with other"):
        runs.open_run(ws, _record(ws, session="episode"), run_id="resume", if_exists="join")
    with pytest.raises(RunError, match="never resumed"):
        runs.open_run(ws, _record(ws), run_id="resume", if_exists="refuse")


def test_join_keeps_the_record(ws):
    run = runs.open_run(ws, _record(ws, engine="verifiers", unit="date"), run_id="joined")
    run.finish(complete=True, summary=[{"agent": "u"}])
    runs.open_run(ws, _record(ws, engine="verifiers", unit="date"), run_id="joined", if_exists="join")
    rec = run.read_record()
    assert rec["status"] == "complete" and rec["summary"] == [{"agent": "u"}]


def test_fingerprint_ignores_execution_and_counts_the_way_of_playing(ws):
    base = _record(ws)
    knobs = {**base, "config": {**base["config"], "benchmark": {**base["config"]["benchmark"], "workers": 7,
                                                                 "engine": "ray"}}, "engine": "ray"}
    assert runs.fingerprint(knobs) == runs.fingerprint(base)
    assert runs.fingerprint(_record(ws, session="harness")) != runs.fingerprint(base)
    assert runs.fingerprint(_record(ws, unit="date")) != runs.fingerprint(base)
    assert runs.fingerprint(_record(ws, engine="verifiers")) != runs.fingerprint(base)
    assert runs.fingerprint(_record(ws, seed=3)) != runs.fingerprint(base)


def test_parts_consolidate_and_status(ws):
    run = runs.open_run(ws, _record(ws), run_id="parts")
    log1 = _played(ws, "pm-1", rollout=1)
    assert {r["rollout"] for r in log1["forecasts"]} == {1}  # the rollout reached the env through reset(options)
    res = run.record_part(Task("u", "pm-1", 1), log1, seed=3, seconds=0.5, session="per_date")
    assert res == {"task": {"label": "u", "event_id": "pm-1", "rollout": 1}, "error": None,
                   "n_forecasts": len(log1["forecasts"]), "seconds": 0.5}
    assert run.has_part(Task("u", "pm-1", 1)) and not run.has_part(Task("u", "pm-1", 0))
    log4 = _played(ws, "pm-4", rollout=0)
    run.record_part(Task("u", "pm-4", 0), log4, seed=0, seconds=0.1, session="per_date", complete=False,
                    messages=[{"role": "user"}], extra={"engine": "test"})
    parts = list(run.parts())
    assert [(p["event_id"], p["rollout"]) for p in parts] == [("pm-1", 1), ("pm-4", 0)]
    assert [p["complete"] for p in parts] == [True, False] and {p["session"] for p in parts} == {"per_date"}
    assert parts[1]["messages"] == [{"role": "user"}] and parts[1]["engine"] == "test"

    counts = run.consolidate()
    assert counts["episodes"] == 2 and counts["forecasts"] == len(log1["forecasts"]) + len(log4["forecasts"])
    f = pl.read_parquet(run.dir / "forecasts.parquet")
    assert set(f["run_id"]) == {"parts"} and set(f["agent"]) == {"u"} and f.height == counts["forecasts"]
    assert len((run.dir / "trajectories.jsonl").read_text().splitlines()) == 2
    assert (run.dir / "manifest.json").exists() and (run.dir / "events.parquet").exists()
    assert run.consolidate(["pm-1"])["episodes"] == 1  # parts of events outside the set are left out
    assert run.summary()["agent"].to_list() == ["u"]

    rec = run.finish(complete=all(p["complete"] for p in parts), episodes_done=2)
    assert rec["status"] == "incomplete" and run.read_record()["episodes_done"] == 2
    assert run.finish(complete=True)["status"] == "complete"


def test_an_unreadable_part_is_named(ws):
    run = runs.open_run(ws, _record(ws), run_id="broken")
    path = run.part_path(Task("u", "pm-2", 0))
    path.parent.mkdir(parents=True)
    path.write_text("{partial")
    with pytest.raises(RunError, match="unreadable episode part"):
        list(run.parts())


def test_claimed_rollouts_never_repeat(ws):
    run = runs.open_run(ws, _record(ws), run_id="claims")
    other = runs.Run(ws, "claims")  # a second process's handle on the same run
    assert [run.claim_rollout("u", "pm-1"), other.claim_rollout("u", "pm-1"), run.claim_rollout("u", "pm-1")] \
        == [0, 1, 2]
    assert run.claim_rollout("u", "pm-2") == 0


def test_the_next_claim_is_found_without_trying_every_earlier_number(ws, monkeypatch):
    run = runs.open_run(ws, _record(ws), run_id="many-claims")
    folder = run.part_path(Task("u", "pm-1", 0)).parent
    folder.mkdir(parents=True)
    for n in range(70):  # claims 0..n-1 exist: the next one is n, whatever n is
        assert runs._first_unclaimed(folder) == n
        (folder / f"r{n}.claimed").touch()
    checks = []
    real_exists, real_open = Path.exists, runs.os.open
    monkeypatch.setattr(Path, "exists", lambda self, *a, **k: checks.append(self) or real_exists(self, *a, **k))
    monkeypatch.setattr(runs.os, "open", lambda path, *a, **k: checks.append(path) or real_open(path, *a, **k))
    assert run.claim_rollout("u", "pm-1") == 70
    assert len(checks) <= 16  # a scan from r0 would try 71 files
    assert (folder / "r70.claimed").exists()


def test_failures_are_appended(ws):
    run = runs.open_run(ws, _record(ws), run_id="fails")
    run.record_failures([{"task": {"label": "u"}, "error": "boom"}])
    run.record_failures([])
    run.record_failures([{"task": {"label": "u"}, "error": "again"}])
    lines = [json.loads(x) for x in (run.dir / "failures.jsonl").read_text().splitlines()]
    assert [x["error"] for x in lines] == ["boom", "again"] and all(x["at"] for x in lines)


def test_refusals(ws):
    with pytest.raises(RunError, match="session 'memory' is unknown"):
        _record(ws, session="memory")
    run = runs.open_run(ws, _record(ws), run_id="refusals")
    with pytest.raises(RunError, match="session 'x' is unknown"):
        run.record_part(Task("u", "pm-1", 0), _played(ws, "pm-1", 0), seed=0, seconds=0, session="x")
    with pytest.raises(RunError, match="run id"):
        runs.Run(ws, "../elsewhere")
    with pytest.raises(RunError, match="if_exists"):
        runs.open_run(ws, _record(ws), run_id="refusals", if_exists="overwrite")  # type: ignore[arg-type]
    with pytest.raises(RunError, match="no readable run record"):
        runs.Run(ws, "never-made").finish(complete=True)


def test_run_context_crosses_processes(ws):
    run = runs.open_run(ws, _record(ws), run_id="ctx")
    ctx = RunContext(run=run, split="all", env_config=dict(load_config("env")), bench_config={},
                     agents=(AgentSpec("uniform", "u", {}),), seed=0)
    back = pickle.loads(pickle.dumps(ctx))
    assert back == ctx and back.run.dir == run.dir and back.agent("u").name == "uniform"
    other = RunContext(run=runs.Run(ws, "other"), split="all", env_config=dict(load_config("env")),
                       bench_config={"seed": 1}, agents=(), seed=9)
    assert other.env_key() == ctx.env_key()  # a worker keeps its environment across runs
    with pytest.raises(RunError, match="no agent labelled"):
        ctx.agent("nobody")
    with pytest.raises(AttributeError):
        ctx.seed = 1  # type: ignore[misc]


def test_read_record(ws, tmp_path):
    run = runs.open_run(ws, _record(ws), run_id="readable")
    assert runs.read_record(run.dir) == run.read_record() and run.read_record()["status"] == "running"
    assert runs.read_record(tmp_path, missing_ok=True) == {}
    with pytest.raises(RunError, match="no readable run record"):
        runs.read_record(tmp_path)
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(RunError, match="no readable run record"):
        runs.read_record(tmp_path, missing_ok=True)
