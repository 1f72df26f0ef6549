"""The verifiers environment, played by verifiers' own rollout loop against the local chat-completions server.

Each rollout goes through verifiers 0.4's machinery as an eval or a trainer drives it (`Env.serving()`,
`Env.run_slot`): its interception server relays the model's requests to the suite's scripted endpoint, its
bundled chat program runs the tool calls, its MCP tool server (one per serving) serves the environment's tools.
The checks compare what verifiers reports (reward, trace) and what the workspace records (the run) with the
environment's own scoring, computed here independently from the events table.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from forecast_env import scoring
from forecast_env.adapters.rollout_service import RolloutRun, close_services, service_for, task_rows
from forecast_env.cli.main import main
from forecast_env.errors import ForecastEnvError
from tests.support.chat_server import ChatServer, Status, text, tool_call, tool_calls
from tests.support.leaks import SCORE_KEYS, nested_keys

try:
    import verifiers.v1 as vf
except ImportError:  # the extra is not installed: the environment service's own test still runs
    vf = None

needs_verifiers = pytest.mark.skipif(vf is None, reason="the verifiers extra is not installed "
                                                        "(pip install -c constraints.txt -e '.[verifiers]')")


def _label(ws: Path, event_id: str) -> str:
    from forecast_env.envs.events.build import load_events

    ev = load_events(ws).events.filter(pl.col("event_id") == event_id)
    return ev["label"][0]


def _observation(task: Any) -> dict:
    """The observation a task's prompt opens with (the line after the opening sentence)."""
    return json.loads(task.data.prompt.split("\n", 1)[1])


def _score(ws: Path, event_id: str, probs: dict[str, float], options: list[str]) -> float:
    """The date's Brier, computed here from the events table (docs/design.md §6)."""
    report = scoring.normalize_report(probs, options)
    return scoring.brier(report.probs, _label(ws, event_id), options)


def load_environment(*args: Any, **kwargs: Any) -> Any:
    from forecast_env.adapters.verifiers import load_environment

    return load_environment(*args, **kwargs)


def _play(env: Any, scripts: dict[str, list[Any]]) -> tuple[list[Any], list[dict]]:
    """Run one rollout per task id in `scripts` through verifiers (concurrently, one serving), each model reply
    taken from that task's script by turn; returns the episodes (in `scripts` order) and every request."""
    from verifiers.v1.clients import EvalClientConfig, ModelContext
    from verifiers.v1.env import RunSlot

    tasks = {t.data.id: t for t in env.taskset}

    def reply(body: dict) -> dict:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        for task_id, script in scripts.items():
            if tasks[task_id].data.prompt == user:
                return script[turn] if turn < len(script) else text("done")
        raise AssertionError(f"a request for no scripted task: {user[:200]}")

    async def run() -> tuple[list[Any], list[dict]]:
        with ChatServer(default=reply) as srv:
            ctx = ModelContext(model="scripted", client=EvalClientConfig(base_url=srv.base_url,
                                                                         api_key_var="FORECAST_ENV_TEST_NO_KEY"),
                               sampling=vf.SamplingConfig())
            async with env.serving():
                episodes = await asyncio.gather(*(env.run_slot(RunSlot(tasks[t]), ctx) for t in scripts))
            return list(episodes), list(srv.requests)

    return asyncio.run(run())


def _tool_results(requests: list[dict]) -> list[dict]:
    """Every tool result the model was sent, parsed (JSON objects)."""
    seen, out = set(), []
    for body in requests:
        for m in body["messages"]:
            if m["role"] == "tool" and m.get("tool_call_id") not in seen:
                seen.add(m.get("tool_call_id"))
                content = m["content"]
                out.append(json.loads(content) if content.lstrip().startswith("{") else {"text": content})
    return out


@pytest.mark.slow
@needs_verifiers
def test_per_date_rollout_rewards_the_dates_score_and_is_recorded(micro_events: Path, tmp_path: Path) -> None:
    env = load_environment(micro_events, "eval", run_id="vf-per-date")
    tasks = list(env.taskset)
    assert all(t.data.step is not None for t in tasks)
    task = next(t for t in tasks if t.data.step == 2)  # a date after the first: the date is the task's own
    obs = _observation(task)
    day, options = obs["forecast_date"], obs["options"]
    probs = {o: (0.6 if i == 0 else 0.4 / (len(options) - 1)) for i, o in enumerate(options)}
    script = [tool_call("search", {"query": obs["question"], "k": 5, "as_of": "2099-12-31", "date": "2099-12-31"}),
              tool_call("forecast", {"probabilities": probs})]
    (episode,), requests = _play(env, {task.data.id: script})

    trace = episode.traces[0]
    assert episode.ok and trace.ok, trace.errors
    assert trace.stop_condition == "forecast_recorded"  # the rollout ends when the date's forecast is recorded
    expected = _score(micro_events, task.data.event_id, probs, options)
    assert trace.reward == pytest.approx(-expected, abs=1e-12)
    assert trace.metrics["brier"] == pytest.approx(expected, abs=1e-12)

    # the model was offered the environment's tools, and an argument naming a date moved nothing
    assert {t["function"]["name"] for t in requests[0]["tools"]} == {
        "observe", "search", "open_article", "notebook_add", "notebook_supersede", "forecast"}
    results = _tool_results(requests)
    search = results[0]
    assert search["forecast_date"] == day and search["step"] == 2
    hits = search["tool_result"]["hits"]
    assert hits and all(h["day"] <= day for h in hits)
    assert not any(nested_keys(r) & SCORE_KEYS for r in results)

    # recorded like a runner episode: this date only, scored as the environment scores it
    run_dir = micro_events / "runs" / "vf-per-date"
    rec = json.loads((run_dir / "run.json").read_text())
    assert (rec["engine"], rec["session"], rec["unit"], rec["status"]) == ("verifiers", "per_date", "date", "complete")
    rows = pl.read_parquet(run_dir / "forecasts.parquet")
    assert rows.height == 1 and rows["step"][0] == 2 and str(rows["forecast_date"][0]) == day
    assert rows["brier"][0] == pytest.approx(expected, abs=1e-12)
    calls = pl.read_parquet(run_dir / "tool_calls.parquet")
    assert calls["tool"].to_list() == ["search", "forecast"] and set(calls["step"].to_list()) == {2}
    traj = [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    assert traj[0]["messages"][0]["role"] == "system" and traj[0]["messages"][1]["content"] == task.data.prompt

    # `forecast-env report` and `forecast-env score --release` take the run
    assert main(["report", "--run", str(run_dir), "--out", str(tmp_path / "report"), "--no-compare"]) == 0
    release = tmp_path / "release"
    assert main(["release", "--workspace", str(micro_events), "--split", "eval", "--out", str(release)]) == 0
    assert main(["score", "--release", str(release), "--run", str(run_dir), "--out", str(tmp_path / "scored")]) == 0
    assert json.loads((tmp_path / "scored" / "release_check.json").read_text())["session"] == "per_date"


@pytest.mark.slow
@needs_verifiers
def test_episode_rollout_carries_the_notebook_across_dates(micro_events: Path) -> None:
    env = load_environment(micro_events, "eval", episode=True, run_id="vf-episode")
    task = next(iter(env.taskset))
    assert task.data.step is None
    obs = _observation(task)
    options, total = obs["options"], obs["steps_total"]
    assert total >= 2
    reports = [{o: (0.2 + 0.5 * (i == t % len(options))) for i, o in enumerate(options)} for t in range(total)]
    script = [tool_call("notebook_add", {"claim": "The first date's note.", "date_observed": obs["forecast_date"],
                                         "doc_ids": []})]
    script += [tool_call("forecast", {"probabilities": p}) for p in reports]
    (episode,), requests = _play(env, {task.data.id: script})

    trace = episode.traces[0]
    assert episode.ok and trace.ok, trace.errors
    briers = [_score(micro_events, task.data.event_id, p, options) for p in reports]
    assert trace.reward == pytest.approx(-sum(briers) / total, abs=1e-12)
    assert [s["step"] for s in trace.state.scores] == list(range(1, total + 1))

    # each forecast is answered with the next date's observation, the first date's note in its notebook
    results = _tool_results(requests)
    second = results[1]  # after notebook_add, the first forecast's reply: date 2
    assert second["step"] == 2 and [e["claim"] for e in second["notebook"]] == ["The first date's note."]
    assert not any(nested_keys(r) & SCORE_KEYS for r in results)

    run_dir = micro_events / "runs" / "vf-episode"
    rec = json.loads((run_dir / "run.json").read_text())
    assert (rec["session"], rec["unit"]) == ("episode", "event")
    rows = pl.read_parquet(run_dir / "forecasts.parquet").sort("step")
    assert rows["step"].to_list() == list(range(1, total + 1)) and rows["rollout"].n_unique() == 1
    assert rows["brier"].to_list() == pytest.approx(briers, abs=1e-12)
    assert set(pl.read_parquet(run_dir / "notebook.parquet")["step"].to_list()) == set(range(1, total + 1))


@pytest.mark.slow
@needs_verifiers
def test_bad_input_gets_tool_errors_a_silent_model_the_fallback_a_failure_missing(micro_events: Path) -> None:
    env = load_environment(micro_events, "eval", run_id="vf-bad-input")
    tasks = [t for t in env.taskset if t.data.step == 1][:2] + [next(t for t in env.taskset if t.data.step == 2)]
    hostile, silent, broken = tasks
    obs = _observation(hostile)
    options = obs["options"]
    probs = dict.fromkeys(options, 1.0)
    scripts = {
        hostile.data.id: [
            tool_call("fly_to_2099", {}),
            tool_call("search", {"query": 42, "k": "many"}),
            tool_call("open_article", {"doc_id": "../../events/events.parquet"}),
            tool_calls([("forecast", {"probabilities": "certain"}), ("forecast", "{not json")]),
            tool_call("forecast", {"probabilities": probs}),
        ],
        silent.data.id: [text("I would rather not say.")],
        broken.data.id: [Status(503, {"error": {"message": "the endpoint is down"}})],  # every retry too
    }
    (ep_hostile, ep_silent, ep_broken), requests = _play(env, scripts)

    trace = ep_hostile.traces[0]
    assert ep_hostile.ok and trace.ok, trace.errors
    last = max((r for r in requests if r["messages"][1]["content"] == hostile.data.prompt),
               key=lambda r: len(r["messages"]))
    replies = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert "unknown tool 'fly_to_2099'" in replies[0]
    for reply in replies[1:5]:  # wrong types, a path as doc id, a string report, unparseable arguments
        assert "error" in reply.lower(), reply
    assert json.loads(replies[1])["error"] and json.loads(replies[2])["error"]
    assert trace.reward == pytest.approx(-_score(micro_events, hostile.data.event_id, probs, options), abs=1e-12)

    # a model that never forecasts: the empty report, which the environment scores as the uniform forecast
    quiet = ep_silent.traces[0]
    assert ep_silent.ok and quiet.ok, quiet.errors
    k = len(_observation(silent)["options"])
    assert quiet.reward == pytest.approx(-(1 - 1 / k), abs=1e-12)
    assert quiet.state.scores[0]["fallback"] == "no positive mass"

    # the endpoint down: the rollout fails, its date is recorded as missing (never scored), the run incomplete
    assert not ep_broken.ok and ep_broken.traces[0].errors
    run_dir = micro_events / "runs" / "vf-bad-input"
    rows = pl.read_parquet(run_dir / "forecasts.parquet").sort(["step", "event_id"])
    assert rows.height == 3 and rows["missing"].to_list().count(True) == 1
    lost = rows.filter(pl.col("missing"))
    assert (lost["event_id"][0], lost["step"][0]) == (broken.data.event_id, 2) and lost["brier"][0] is None
    assert json.loads((run_dir / "run.json").read_text())["status"] == "incomplete"


@needs_verifiers
def test_loading_errors_name_the_fix(micro_events: Path) -> None:
    from forecast_env.adapters.verifiers import ForecastVerifiersEnv

    with pytest.raises(ForecastEnvError, match="events build"):
        load_environment(micro_events / "no-such-workspace", "eval")
    bare = vf.load_environment(vf.resolve_env_config({"taskset": {"id": "forecast-env-verifiers"}}))
    assert isinstance(bare, ForecastVerifiersEnv)  # verifiers' own loader finds the plugin by its id
    with pytest.raises(ForecastEnvError, match="env.taskset.task.workspace and env.taskset.task.run_id"):
        next(iter(bare.taskset))


def test_service_refuses_calls_after_the_rollout_and_unknown_sessions(micro_events: Path) -> None:
    run = RolloutRun(workspace=str(micro_events), run_id="vf-service")
    row = next(task_rows(run))
    service = service_for(run)
    try:
        sid = service.open(row["event_id"], row["step"])
        options = json.loads(row["prompt"].split("\n", 1)[1])["options"]
        big = service.call(sid, "search", {"query": "x" * 1_000_000})
        assert big["is_error"] and "limit" in json.loads(big["text"])["error"]
        done = service.call(sid, "forecast", {"probabilities": dict.fromkeys(options, 1.0)})
        assert done["finished"] and "rollout is over" in json.loads(done["text"])["message"]
        after = service.call(sid, "search", {"query": "anything"})
        assert after["is_error"] and after["finished"] and "rollout is over" in after["text"]
        result = service.finish(sid, None)
        assert len(result["scores"]) == 1
        gone = service.call(sid, "observe", {})
        assert gone["is_error"] and "unknown session" in gone["text"]
        assert service.call("not-a-session", "observe", {})["is_error"]
    finally:
        close_services(run)
    rec = json.loads((micro_events / "runs" / "vf-service" / "run.json").read_text())
    assert rec["status"] == "complete" and rec["episodes_done"] == 1
