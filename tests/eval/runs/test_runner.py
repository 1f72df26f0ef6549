"""Runner: records, resumability (rerun and after a kill), parallel == sequential, failures, e2e."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from forecast_env.errors import RunError
from forecast_env.eval.runs.runner import run_benchmark
from forecast_env.eval.runs.store import Task, part_path
from tests.support.env_data import build_workspace

AGENTS = ["uniform", "base_rate", "retrieval"]
KEY = ["agent", "event_id", "rollout", "step"]


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("runner_ws"))


@pytest.fixture(scope="module")
def seq_run(ws) -> Path:
    return run_benchmark(ws, AGENTS, run_id="seq", workers=1, rollouts=2, progress=False)


def _forecasts(run_dir: Path) -> pl.DataFrame:
    return pl.read_parquet(run_dir / "forecasts.parquet").drop("run_id").sort(KEY)


def test_records_everything(seq_run):
    rec = json.loads((seq_run / "run.json").read_text())
    assert rec["status"] == "complete" and rec["episodes_total"] == 3 * 3 * 2
    assert rec["event_ids"] == ["pm-1", "pm-2", "pm-4"] and rec["event_set_hash"]
    assert rec["index_manifest_sha256"] and rec["config"]["env"]["memory"] is True
    assert {"numpy", "polars"} <= set(rec["versions"])
    f = _forecasts(seq_run)
    assert f.height == 3 * 2 * (3 + 3 + 1)  # agents x rollouts x dates
    assert set(f["agent"]) == set(AGENTS) and f["brier"].null_count() == 0
    tc = pl.read_parquet(seq_run / "tool_calls.parquet")
    assert tc.filter(pl.col("agent") == "retrieval").filter(pl.col("tool") == "search").height > 0
    nb = pl.read_parquet(seq_run / "notebook.parquet")
    assert nb.filter(pl.col("agent") == "retrieval").height > 0
    lines = (seq_run / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 18 and json.loads(lines[0])["steps"][0]["action"] is None
    assert pl.read_parquet(seq_run / "market.parquet").height > 0
    assert (seq_run / "manifest.json").exists()


def test_rerun_does_no_episode(ws, seq_run):
    before = _forecasts(seq_run)
    run_benchmark(ws, AGENTS, run_id="seq", workers=1, rollouts=2, progress=False)
    rec = json.loads((seq_run / "run.json").read_text())
    assert rec["episodes_run_now"] == 0 and rec["episodes_done"] == 18
    assert _forecasts(seq_run).equals(before)


def test_killed_run_completes_on_rerun(ws, seq_run, tmp_path):
    killed = ws / "runs" / "killed"
    shutil.copytree(seq_run, killed)
    # the state a kill leaves: some episodes never written, a temp file of an interrupted write,
    # no consolidated tables
    for t in (Task("retrieval", "pm-2", 1), Task("uniform", "pm-1", 0), Task("base_rate", "pm-4", 1)):
        part_path(killed, t).unlink()
    (part_path(killed, Task("uniform", "pm-1", 0)).parent / ".r0.json.123.tmp").write_text("{partial")
    for name in ("forecasts.parquet", "tool_calls.parquet", "notebook.parquet", "trajectories.jsonl"):
        (killed / name).unlink()
    run_benchmark(ws, AGENTS, run_id="killed", workers=1, rollouts=2, progress=False)
    rec = json.loads((killed / "run.json").read_text())
    assert rec["episodes_run_now"] == 3 and rec["status"] == "complete"
    assert _forecasts(killed).equals(_forecasts(seq_run))


def test_parallel_equals_sequential(ws, seq_run):
    # per-episode seeds do not depend on workers or order: rollout 0 of the 2-rollout run is this run
    par = run_benchmark(ws, AGENTS, run_id="par", workers=2, rollouts=1, progress=False)
    a = _forecasts(par)
    b = _forecasts(seq_run).filter(pl.col("rollout") == 0)
    # floats to 1e-12: the scorer sums over a set of labels, whose order varies with the hash seed
    assert_frame_equal(a, b, check_exact=False, rel_tol=0, abs_tol=1e-12)
    ta = pl.read_parquet(par / "tool_calls.parquet").drop("run_id", "latency_ms").sort(KEY[:-1] + ["call_index"])
    tb = (pl.read_parquet(seq_run / "tool_calls.parquet").drop("run_id", "latency_ms")
          .filter(pl.col("rollout") == 0).sort(KEY[:-1] + ["call_index"]))
    assert ta.equals(tb)


def test_failed_episodes_are_recorded_and_retried(ws):
    run_dir = run_benchmark(ws, ["uniform", {"name": "llm", "label": "llm-unset"}], run_id="fail", workers=1,
                            progress=False)
    rec = json.loads((run_dir / "run.json").read_text())
    assert rec["status"] == "incomplete" and rec["episodes_failed"] == 3
    fails = [json.loads(x) for x in (run_dir / "failures.jsonl").read_text().splitlines()]
    assert all("llm.model" in f["error"] for f in fails)
    assert set(_forecasts(run_dir)["agent"]) == {"uniform"}


def test_changed_settings_refuse_to_resume(ws, seq_run):
    with pytest.raises(RunError, match="new --run-id"):
        run_benchmark(ws, ["uniform"], run_id="seq", workers=1, progress=False)
    with pytest.raises(RunError, match="unknown agent"):
        run_benchmark(ws, ["oracle"], workers=1, progress=False)


def test_cli_run_and_report(ws, seq_run, capsys):
    from forecast_env.cli.main import main

    assert main(["run", "--workspace", str(ws), "--agents", "uniform", "--run-id", "cli", "--workers", "1",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "run directory:" in out and "uniform" in out
    assert main(["report", "--workspace", str(ws), "--run-id", "cli"]) == 0
    assert "report.html" in capsys.readouterr().out
    assert main(["report", "--run", str(ws / "runs" / "nope")]) == 2


def test_end_to_end_micro(micro_events, tmp_path):
    from forecast_env.eval.report.render import build_report

    run_dir = run_benchmark(micro_events, AGENTS, run_id="e2e", workers=1, progress=False)
    f = _forecasts(run_dir)
    assert set(f["agent"]) == set(AGENTS) and f.height > 0
    paths = build_report(run_dir, out=tmp_path / "report")
    assert Path(paths["html"]).stat().st_size > 1000


def test_llm_agent_runs_through_a_local_endpoint(ws):
    """The runner drives the llm agent over real HTTP (asyncio path): scored forecasts, token telemetry
    and the chat transcript are recorded; a dead endpoint leaves every date missing, never uniform."""
    from tests.support.chat_server import ChatServer, Status, forecasting_policy

    spec = {"name": "llm", "label": "llm", "model": "scripted", "backoff_seconds": 0.0, "max_retries": 1}
    with ChatServer(default=forecasting_policy(searches=1)) as srv:
        run_dir = run_benchmark(ws, [{**spec, "base_url": srv.base_url}], run_id="llm-up", workers=1,
                                progress=False)
    f = pl.read_parquet(run_dir / "forecasts.parquet")
    assert f.height > 0 and not f["missing"].any() and f["brier"].is_not_null().all()
    assert f["fallback"].is_null().all()  # the model's own reports were scored
    calls = pl.read_parquet(run_dir / "tool_calls.parquet")
    assert {"search", "forecast"} <= set(calls["tool"]) and calls["prompt_tokens"].sum() > 0
    traj = [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert traj and all(t.get("messages") for t in traj)

    with ChatServer(default=Status(503)) as dead:
        run_dir = run_benchmark(ws, [{**spec, "base_url": dead.base_url}], run_id="llm-down", workers=1,
                                progress=False)
    f = pl.read_parquet(run_dir / "forecasts.parquet")
    assert f.height > 0 and f["missing"].all() and f["brier"].is_null().all()


@pytest.mark.ray
def test_ray_engine_equals_sequential(ws, seq_run):
    """The same episodes on a local Ray give the same forecasts as the in-process loop."""
    pytest.importorskip("ray")
    import ray

    try:
        run_dir = run_benchmark(ws, ["uniform", "base_rate"], run_id="ray", engine="ray", workers=2, rollouts=1,
                                progress=False)
    finally:
        ray.shutdown()
    a = _forecasts(run_dir)
    b = _forecasts(seq_run).filter((pl.col("rollout") == 0) & pl.col("agent").is_in(["uniform", "base_rate"]))
    assert_frame_equal(a, b, check_exact=False, rel_tol=0, abs_tol=1e-12)
