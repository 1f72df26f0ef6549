"""The SkyRL-gym environment, made and played through skyrl-gym's own API (`skyrl_gym.make`, `init`, `step`).

Whole episodes over many turns: the "model" here is a script of texts with tool calls in `<tool_call>` tags,
as a policy's generations would carry them; rewards and the recorded run are checked against the
environment's scoring computed from the events table.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from forecast_env import scoring
from forecast_env.envs.events.build import load_events
from tests.support.leaks import SCORE_KEYS, nested_keys

skyrl_gym = pytest.importorskip("skyrl_gym", reason="the skyrl extra is not installed "
                                                    "(pip install -c constraints.txt -e '.[skyrl]')")

from forecast_env.adapters.skyrl import ENV_ID, close_runs  # noqa: E402  (registers the environment)


def _call(name: str, arguments: dict) -> str:
    return f"Let me think.\n<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _label(ws: Path, event_id: str) -> str:
    ev = load_events(ws).events.filter(pl.col("event_id") == event_id)
    return ev["label"][0]


def test_whole_episode_over_many_turns(micro_events: Path, tmp_path: Path) -> None:
    from skyrl_gym.envs.base_text_env import BaseTextEnv
    from skyrl_gym.envs.registration import registry

    from forecast_env.cli.main import main
    from forecast_env.envs.episodes import load_episodes

    assert ENV_ID in registry
    episodes = [e for e in load_episodes(micro_events, "train") if len(e.dates) > 1]
    ep = episodes[0]
    cfg = {"workspace": str(micro_events), "split": "train", "run_id": "skyrl-episodes"}
    env = skyrl_gym.make(ENV_ID, env_config=cfg, extras={"event_id": ep.event_id})
    assert isinstance(env, BaseTextEnv)
    chat, meta = env.init([])
    assert meta["event_id"] == ep.event_id and chat[-1]["role"] == "user" and "<tool_call>" in chat[-1]["content"]

    sent, turns, out = [], 0, None
    for d in ep.dates:
        out = env.step(_call("search", {"query": ep.question[:60], "k": 2}))
        turns += 1
        assert not out["done"] and out["reward"] == 0.0
        obs = json.loads(out["observations"][0]["content"])
        assert out["observations"][0]["role"] == "user" and obs["forecast_date"] == d.day.isoformat()
        assert obs["error"] is None and not SCORE_KEYS & nested_keys(obs)
        out = env.step("I am not sure what to do")  # no tool call: the environment's invalid action
        turns += 1
        assert json.loads(out["observations"][0]["content"])["error"]
        report = {o: 1.0 + i for i, o in enumerate(d.options)}
        sent.append((report, list(d.options)))
        out = env.step(_call("forecast", {"probabilities": report}))
        turns += 1
    assert out is not None and out["done"] and out["observations"] == []
    label = _label(micro_events, ep.event_id)
    briers = [scoring.brier(scoring.normalize_report(r, o).probs, label, o) for r, o in sent]
    assert out["reward"] == pytest.approx(-sum(briers) / len(briers), abs=1e-12)
    assert env.get_metrics()["turns"] == turns == 3 * len(ep.dates)
    env.close()

    # out of turns: the dates left get the uniform fallback; an episode closed early is recorded incomplete
    short = skyrl_gym.make(ENV_ID, env_config=cfg, extras={"event_id": ep.event_id, "max_turns": 2})
    short.init([{"role": "user", "content": "Forecast the question."}])
    assert not short.step(_call("search", {"query": "x"}))["done"]
    last = short.step(_call("search", {"query": "y"}))
    assert last["done"] and last["metadata"]["out_of_turns"]
    uniform = [scoring.brier({o: 1 / len(d.options) for o in d.options}, label, list(d.options)) for d in ep.dates]
    assert last["reward"] == pytest.approx(-sum(uniform) / len(uniform), abs=1e-12)
    left = skyrl_gym.make(ENV_ID, env_config=cfg, extras={"extra_info": {"event_id": ep.event_id}})
    left.init([])
    left.close()

    (rec,) = close_runs()
    assert rec["engine"] == "skyrl" and rec["unit"] == "event" and rec["session"] == "episode"
    assert rec["rollouts_recorded"] == 3 and rec["status"] == "incomplete"
    run_dir = micro_events / "runs" / "skyrl-episodes"
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet").sort(["rollout", "step"])
    assert forecasts.filter(pl.col("rollout") == 0)["brier"].to_list() == pytest.approx(briers, abs=1e-12)
    assert forecasts.filter(pl.col("rollout") == 2)["missing"].all()
    assert main(["report", "--run", str(run_dir), "--out", str(tmp_path / "report"), "--no-compare"]) == 0
