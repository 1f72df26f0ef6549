"""The Gymnasium environment (docs/design.md §5) over a small hand-made, really indexed workspace."""

from __future__ import annotations

import json
import math
import random
from datetime import date
from pathlib import Path

import gymnasium
import pyarrow as pa
import pytest

from forecast_env import schema
from forecast_env.store import conform
from tests.support.env_data import FUTURE_WORD, PRICE_DIGITS, build_workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("env_ws"))


@pytest.fixture(scope="module")
def searcher(ws: Path):
    from forecast_env.retrieval import Searcher

    return Searcher.open(ws, hide=True)


def make(ws: Path, searcher, **kw):
    from forecast_env.envs import ForecastEnv

    return ForecastEnv(ws, searcher=searcher, **kw)


def forecast(probs) -> dict:
    return {"tool": "forecast", "args": {"probabilities": probs}}


def scripted_episode(env, seed=None, event_id=None, queries=("senate budget vote", "election results"), rollout=None):
    """A scripted agent: per date 2 searches, open the top hit, one note, then a forecast."""
    options = {k: v for k, v in (("event_id", event_id), ("rollout", rollout)) if v is not None} or None
    obs, info = env.reset(seed=seed, options=options)
    observations, infos = [obs], [info]
    done = False
    while not done:
        for q in queries:
            obs, r, done, trunc, info = env.step({"tool": "search", "args": {"query": q, "k": 5}})
            observations.append(obs)
            infos.append(info)
        hits = info["tool_result"]["hits"]
        if hits:
            obs, r, done, trunc, info = env.step({"tool": "open_article", "args": {"doc_id": hits[0]["doc_id"]}})
            observations.append(obs)
            infos.append(info)
        obs, r, done, trunc, info = env.step({"tool": "notebook_add", "args": {
            "claim": f"seen on {info['forecast_date']}", "date_observed": str(info["forecast_date"]),
            "doc_ids": [h["doc_id"] for h in hits[:2]]}})
        observations.append(obs)
        infos.append(info)
        k = len(info["options"])
        obs, r, done, _trunc, info = env.step(forecast([0.7] + [0.3 / (k - 1)] * (k - 1)))
        observations.append(obs)
        infos.append(info)
    return observations, infos, r


# ---------------------------------------------------------------------------------------------
# API, registration, spaces
# ---------------------------------------------------------------------------------------------


def test_check_env_passes(ws, searcher):
    from gymnasium.utils.env_checker import check_env

    env = make(ws, searcher)
    check_env(env.unwrapped, skip_render_check=True)


def test_gymnasium_make_by_string(ws):
    env = gymnasium.make("forecast_env.envs:ForecastEnv-v0", workspace=ws, split="eval")
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert {"question", "description", "options", "forecast_date", "step", "steps_total", "tool_result",
            "error", "notebook", "budget_left"} <= set(json.loads(obs))
    assert info["tool_specs"] == env.unwrapped.tool_specs
    obs, _reward, _term, _trunc, info = env.step(json.dumps(forecast({o: 1 for o in info["options"]})))
    assert info["error"] is None
    assert env.unwrapped.episode_log()["forecasts"][0]["fallback"] is None
    env.close()


def test_tool_specs_are_valid_json_schema(ws, searcher):
    jsonschema = pytest.importorskip("jsonschema")
    env = make(ws, searcher)
    names = []
    for spec in env.unwrapped.tool_specs:
        assert spec["type"] == "function"
        fn = spec["function"]
        names.append(fn["name"])
        jsonschema.Draft202012Validator.check_schema(fn["parameters"])
        assert fn["parameters"]["type"] == "object"
        assert set(fn["parameters"]["required"]) <= set(fn["parameters"]["properties"])
        json.dumps(spec)
    assert names == ["search", "open_article", "notebook_add", "notebook_supersede", "forecast"]
    validator = jsonschema.Draft202012Validator(env.unwrapped.tool_specs[-1]["function"]["parameters"])
    assert validator.is_valid({"probabilities": {"Yes": 0.2, "No": 0.8}})
    assert not validator.is_valid({"probabilities": {"Yes": 0.2}, "as_of": "2030-01-01"})


def test_unknown_split_and_event_are_clear_errors(ws, searcher):
    from forecast_env.errors import ConfigError, EventsError

    with pytest.raises(ConfigError):
        make(ws, searcher, split="test")
    with pytest.raises(EventsError, match="pm-999"):
        make(ws, searcher, event_ids=["pm-999"])
    env = make(ws, searcher)
    with pytest.raises(EventsError):
        env.reset(options={"event_id": "pm-3"})  # a train event, not in the eval split


def test_split_filter_and_seeded_permutation(ws, searcher):
    env = make(ws, searcher)
    assert env.event_ids == ["pm-1", "pm-2", "pm-4"]
    def visit(seed):
        order = [env.reset(seed=seed)[1]["event_id"]]
        order += [env.reset()[1]["event_id"] for _ in range(5)]
        return order
    a, b = visit(7), visit(7)
    assert a == b
    assert sorted(a[:3]) == ["pm-1", "pm-2", "pm-4"] and sorted(a[3:]) == ["pm-1", "pm-2", "pm-4"]
    assert make(ws, searcher, split="train").event_ids == ["pm-3"]
    assert make(ws, searcher, split="all").event_ids == ["pm-1", "pm-2", "pm-3", "pm-4"]


# ---------------------------------------------------------------------------------------------
# no future information, no outcome, no market price
# ---------------------------------------------------------------------------------------------


def test_no_future_article_outcome_or_price_in_whole_episodes(ws, searcher):
    env = make(ws, searcher)
    queries = ("senate passed the budget bill", f"{FUTURE_WORD} Carol White won")
    for eid in env.event_ids:
        label = env.unwrapped._by_id[eid].label
        observations, infos, _ = scripted_episode(env, event_id=eid, queries=queries)
        for obs, info in zip(observations, infos):
            d = info["forecast_date"]
            assert isinstance(d, date)
            tr = info["tool_result"] or {}
            for h in tr.get("hits", []):
                assert h["day"] <= d
            if "body" in tr:
                assert tr["day"] <= d
            parsed = json.loads(obs)
            if isinstance(parsed["tool_result"], dict):
                parsed["tool_result"].pop("query", None)  # the agent's own words, echoed
            assert FUTURE_WORD not in json.dumps(parsed)
            assert "Leaked:" not in obs  # the leak-flagged article stays hidden
            assert PRICE_DIGITS not in obs
            assert "label" not in parsed and "market_previous_day" not in parsed
            assert "outcome" not in obs.lower() and "resolved" not in obs.lower()
            # the label only ever appears as one of the offered options
            if label in obs:
                assert label in parsed["options"]
        log = env.unwrapped.episode_log()
        assert all(not r["missing"] for r in log["forecasts"])


def test_future_doc_id_and_date_arguments_are_refused(ws, searcher):
    env = make(ws, searcher)
    obs, info = env.reset(options={"event_id": "pm-1"})
    first_date = info["forecast_date"]
    # the last two articles of the store are dated after every forecast date
    rows = pa.ipc.open_file(str(ws / "index" / "text" / "2026-03.arrow")).read_all()
    late = [r["doc_id"] for r in rows.select(["doc_id", "day"]).to_pylist() if r["day"] > date(2026, 3, 20)]
    assert late
    for doc in late:
        obs, _, _, _, info = env.step({"tool": "open_article", "args": {"doc_id": doc}})
        assert info["error"] and "can be read" in info["error"]
        assert FUTURE_WORD not in obs
    for bad in ({"query": "budget", "as_of": "2026-03-30"}, {"query": "budget", "date": "2026-03-30"}):
        obs, _, _, _, info = env.step({"tool": "search", "args": bad})
        assert info["error"] and "forecast date" in info["error"]
        assert info["forecast_date"] == first_date
    obs, _, _, _, info = env.step({"tool": "forecast", "args": {"probabilities": [0.5, 0.5],
                                                                "forecast_date": "2026-03-15"}})
    assert info["error"] and info["step"] == 1
    obs, _, _, _, info = env.step({"tool": "search", "args": {"query": "budget passed 2026-03-28", "k": 50}})
    assert all(h["day"] <= first_date for h in info["tool_result"]["hits"])


def test_open_article_refusals_do_not_tell_which_ids_exist(ws, searcher):
    """An unknown id, a not-yet-visible id and a hidden (leak-flagged) id get the same answer."""
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-1"})  # first date 2026-03-05
    rows = pa.ipc.open_file(str(ws / "index" / "text" / "2026-03.arrow")).read_all().to_pylist()
    future = next(r["doc_id"] for r in rows if r["day"] > date(2026, 3, 20))
    hidden = next(r["doc_id"] for r in rows if r["leak_flag"] and r["day"] <= date(2026, 3, 5))
    messages = {}
    for what, doc in (("unknown", "doc9999"), ("future", future), ("hidden", hidden)):
        obs, _, _, _, info = env.step({"tool": "open_article", "args": {"doc_id": doc}})
        assert info["error_kind"] == "invalid_action" and info["tool_result"] is None
        messages[what] = info["error"].replace(repr(doc), "<id>")
        assert json.loads(obs)["error"] == info["error"]
    assert len(set(messages.values())) == 1, messages
    calls = env.unwrapped.episode_log()["tool_calls"]
    assert len({c["error"].replace(repr(json.loads(c["args_json"])["doc_id"]), "") for c in calls}) == 1


# ---------------------------------------------------------------------------------------------
# robustness
# ---------------------------------------------------------------------------------------------


def _garbage(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False, 0, -1, 1e308, float("nan"), float("inf"), -0.0, 2**70])
    if kind == 1:
        return "".join(chr(rng.randrange(0, 0x10FFFF)) for _ in range(rng.randrange(0, 30))
                       ).encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if kind == 2:
        return rng.choice(["search", "open_article", "notebook_add", "notebook_supersede", "forecast", "",
                           "Yes", "No", "\ud800", "{", "[]", "null", "NaN"])
    if kind == 3:
        return rng.random() * rng.choice([1, -1, 1e6])
    if kind == 4:
        return rng.randrange(-5, 30)
    if kind in (5, 6):
        return {str(_garbage(rng, depth + 1))[:20] if rng.random() < 0.5 else rng.choice(
            ["tool", "args", "name", "arguments", "function", "query", "k", "doc_id", "probabilities"]):
            _garbage(rng, depth + 1) for _ in range(rng.randrange(0, 4))}
    return [_garbage(rng, depth + 1) for _ in range(rng.randrange(0, 4))]


def _fuzz_action(rng: random.Random, options: list[str]):
    kind = rng.randrange(12)
    tool = rng.choice(["search", "open_article", "notebook_add", "notebook_supersede", "forecast", "nope", None])
    if kind == 0:
        return _garbage(rng)
    if kind == 1:
        return "".join(rng.choice('{}[]":,tool args 0123 searchforecast\\u') for _ in range(rng.randrange(0, 60)))
    if kind == 2:
        return "x" * rng.choice([10, 10_000, 200_000])
    if kind == 3:
        return "[" * rng.choice([10, 5000, 100_000]) + "]" * rng.randrange(3)
    if kind == 4:
        try:
            return json.dumps({"tool": tool, "args": _garbage(rng)})
        except (ValueError, TypeError):
            return "{"
    if kind == 5:
        return {"tool": tool, "args": {k: _garbage(rng) for k in rng.sample(
            ["query", "k", "mode", "doc_id", "claim", "date_observed", "doc_ids", "entry_id", "reason",
             "probabilities", "as_of"], rng.randrange(0, 4))}}
    if kind == 6:
        return {"type": "function", "function": {"name": tool, "arguments": rng.choice(
            ["{", "{}", '{"probabilities": [NaN, 1]}', json.dumps({"entry_id": rng.randrange(-2, 5), "reason": "x"}),
             json.dumps({"claim": "c", "date_observed": "2026-01-01", "doc_ids": ["d"]})])}}
    if kind == 7:
        return [{"name": tool, "arguments": _garbage(rng)}] * rng.randrange(0, 3)
    if kind == 8 and rng.random() < 0.15:  # a few real searches
        return {"tool": "search", "args": {"query": rng.choice(["senate", "rain", "  ", "x" * 5000]),
                                           "k": rng.choice([1, 5, 10**9, -3, "7", 2.5]),
                                           "mode": rng.choice(["bm25", "dense", "hybrid", "magic"])}}
    if kind == 9:
        probs = {o: _garbage(rng) for o in options} if rng.random() < 0.5 else [_garbage(rng) for _ in options]
        return {"tool": "forecast", "args": {"probabilities": probs}, "telemetry": _garbage(rng)}
    if kind == 10:
        return {"tool": "open_article", "args": {"doc_id": rng.choice(["doc0001", "doc9999", "", "doc0084"])}}
    return {"tool": "notebook_add", "args": {"claim": _garbage(rng), "date_observed": _garbage(rng),
                                             "doc_ids": _garbage(rng)}}


def test_fuzz_ten_thousand_actions_never_raise(ws, searcher):
    rng = random.Random(1234)
    env = make(ws, searcher)
    circular: dict = {"tool": "forecast"}
    circular["args"] = circular
    obs, info = env.reset(seed=0)
    space = env.observation_space
    errors = 0
    for i in range(10_000):
        action = circular if i == 5 else _fuzz_action(rng, info["options"])
        obs, reward, term, _trunc, info = env.step(action)
        assert space.contains(obs), obs[:200]
        json.loads(obs)
        assert math.isfinite(reward)
        errors += info["error"] is not None
        # every error is the agent's or a tool's refusal, never a failure inside the environment
        assert info["error_kind"] != "internal", info["error"]
        assert (info["error"] is None) == (info["error_kind"] is None)
        if term:
            assert env.unwrapped.episode_log()["forecasts"]
            obs, info = env.reset()
    assert errors > 5000  # most fuzzed actions are invalid and said so


# ---------------------------------------------------------------------------------------------
# memory, budgets, missing dates, rewards
# ---------------------------------------------------------------------------------------------


def _note(claim: str) -> dict:
    return {"tool": "notebook_add", "args": {"claim": claim, "date_observed": "2026-03-04", "doc_ids": ["doc0001"]}}


@pytest.mark.parametrize("memory", [True, False])
def test_memory_on_carries_notebook_memory_off_starts_empty(ws, searcher, memory):
    env = make(ws, searcher, memory=memory)
    env.reset(options={"event_id": "pm-1"})
    env.step(_note("first claim"))
    _, _, _, _, info = env.step({"tool": "notebook_supersede", "args": {"entry_id": 1, "reason": "outdated"}})
    assert info["notebook"][0]["status"] == "superseded"
    env.step(_note("second claim"))
    obs, _, _, _, info = env.step(forecast({"Yes": 0.5, "No": 0.5}))
    assert info["step"] == 2
    if memory:
        assert [e["claim"] for e in info["notebook"]] == ["first claim", "second claim"]
        assert "second claim" in obs
    else:
        assert info["notebook"] == [] and "second claim" not in obs
    env.step(_note("third"))
    env.step(forecast([1, 0]))
    env.step(forecast([1, 0]))
    rows = env.unwrapped.episode_log()["notebook"]
    by_step = {s: [r["claim"] for r in rows if r["step"] == s] for s in (1, 2, 3)}
    assert by_step[1] == ["first claim", "second claim"]
    assert by_step[2] == (["first claim", "second claim", "third"] if memory else ["third"])
    assert by_step[3] == (by_step[2] if memory else [])
    assert all(r["created_step"] in (1, 2) for r in rows)
    assert all(f["memory"] is memory for f in env.unwrapped.episode_log()["forecasts"])


def test_budget_exhaustion_records_uniform_fallback(ws, searcher):
    env = make(ws, searcher, max_calls_per_date=3)
    _obs, info = env.reset(options={"event_id": "pm-2"})
    assert info["budget_left"] == 3
    env.step("not json")
    _, _, _, _, info = env.step({"tool": "nope"})
    assert info["budget_left"] == 1
    _, _reward, _term, _, info = env.step({"tool": "search", "args": {"query": "Freedonia election"}})
    assert info["tool_result"]["hits"]  # the last call still runs
    assert "budget" in info["message"] and info["step"] == 2 and info["budget_left"] == 3
    row = env.unwrapped.episode_log()["forecasts"][0]
    assert row["fallback"] == "budget_exhausted" and row["n_calls"] == 3 and row["n_search"] == 1
    assert row["options"] == ["Alice Smith", "Bob Jones", "Carol White"]
    assert row["probs"] == pytest.approx([1 / 3] * 3) and row["brier"] == pytest.approx(2 / 3)
    calls = env.unwrapped.episode_log()["tool_calls"]
    assert [c["tool"] for c in calls] == ["invalid", "invalid", "search"]
    assert calls[0]["error"] and calls[2]["error"] is None and len(calls[2]["result_doc_ids"]) > 0


def test_skip_date_records_missing_and_is_not_scored(ws, searcher):
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-1"})
    obs, reward, term, trunc, info = env.skip_date("endpoint down after 3 retries")
    assert info["step"] == 2 and not term
    env.step(forecast({"Yes": 1.0}))
    _obs, reward, term, _trunc, info = env.step(forecast({"Yes": 0.0, "No": 1.0}))
    assert term
    rows = env.unwrapped.episode_log()["forecasts"]
    assert rows[0]["missing"] and rows[0]["brier"] is None and rows[0]["probs"] is None
    assert "endpoint down" in rows[0]["raw_report"]
    assert [s["step"] for s in info["scores"]] == [2, 3]
    assert reward == pytest.approx(-(0.0 + 2.0) / 2)


def test_episode_and_step_rewards(ws, searcher):
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-2"})
    rewards = [env.step(forecast({"Carol White": 1.0}))[1] for _ in range(3)]
    assert rewards[:2] == [0.0, 0.0] and rewards[2] == pytest.approx(0.0)
    env = make(ws, searcher, reward_mode="step")
    env.reset(options={"event_id": "pm-2"})
    r1 = env.step(forecast({"Alice Smith": 1.0}))[1]
    r2 = env.step(forecast([0.0, 0.0, 1.0]))[1]
    _obs, r3, term, _, info = env.step(forecast([1, 1, 1]))
    assert (r1, r2) == (pytest.approx(-2.0), pytest.approx(0.0))
    assert r3 == pytest.approx(-(2 / 3)) and term
    assert [s["brier"] for s in info["scores"]] == pytest.approx([2.0, 0.0, 2 / 3])
    for s in info["scores"]:
        assert set(s) == {"step", "forecast_date", "brier", "accuracy", "log_vs_market", "log_vs_market_close",
                          "fallback"}


def test_nan_forecast_is_scored_uniform_with_fallback(ws, searcher):
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-1"})
    _, _, _, _, info = env.step('{"tool": "forecast", "args": {"probabilities": {"Yes": NaN, "No": 1}}}')
    assert info["error"] is None and info["step"] == 2
    assert "unusable" in info["message"]
    row = env.unwrapped.episode_log()["forecasts"][0]
    assert row["probs"] == [0.5, 0.5] and "non-finite" in row["fallback"]
    _, _, _, _, info = env.step(forecast("0.5"))  # wrong type: an invalid action, the date stays
    assert info["error"] and info["step"] == 2


def test_log_score_uses_label_price_of_the_day(ws, searcher):
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-1"})
    env.step(forecast({"Yes": 0.8, "No": 0.2}))
    row = env.unwrapped.episode_log()["forecasts"][0]
    ep = env.unwrapped._by_id["pm-1"]
    price = ep.beliefs[date(2026, 3, 5)]["Yes"][0]
    assert row["market_prob"] == price
    assert row["log_vs_market"] == pytest.approx(math.log(0.8) - math.log(price))
    assert row["accuracy"] == 1.0 and row["brier"] == pytest.approx(0.08)
    # against the day's last price too (written as the day mean + 0.1 by _env_data)
    assert price == 0.4137 and row["market_prob_close"] == 0.5137
    assert row["log_vs_market_close"] == pytest.approx(math.log(0.8) - math.log(0.5137))
    for name in ("market_prob_close", "log_vs_market_close"):
        assert name in schema.FORECASTS.names


def test_show_market_ablation_is_visible_and_recorded(ws, searcher):
    env = make(ws, searcher, show_market=True)
    obs, _info = env.reset(options={"event_id": "pm-2"})
    prev = json.loads(obs)["market_previous_day"]
    assert set(prev) == {"Alice Smith", "Bob Jones", "Carol White"}
    ep = env.unwrapped._by_id["pm-2"]
    assert prev["Alice Smith"] == ep.beliefs[date(2026, 3, 5)]["Alice Smith"][1]
    assert prev["Bob Jones"] is None  # unpriced that day: never imputed
    env.step(forecast([0.5, 0.5, 0.0]))
    assert all(r["show_market"] for r in env.unwrapped.episode_log()["forecasts"])
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-2"})
    env.step(forecast([0.5, 0.5, 0.0]))
    assert not any(r["show_market"] for r in env.unwrapped.episode_log()["forecasts"])


def test_options_are_the_events_tables_on_every_date_and_description_follows_the_date(ws, searcher):
    env = make(ws, searcher)
    obs, info = env.reset(options={"event_id": "pm-2"})
    steps = [info]
    for _ in range(3):
        steps.append(env.step(forecast([0.2, 0.3, 0.5]))[4])
    steps.pop()  # the finished episode's observation
    # the events table's options in its order, on every date (the schedule lists fewer on date 1)
    assert [s["options"] for s in steps] == [["Alice Smith", "Bob Jones", "Carol White"]] * 3
    assert [r["options"] for r in env.unwrapped.episode_log()["forecasts"]] == [["Alice Smith", "Bob Jones",
                                                                                "Carol White"]] * 3
    obs, info = env.reset(options={"event_id": "pm-1"})
    assert "moved to March 19" not in obs  # appended after every forecast date


# ---------------------------------------------------------------------------------------------
# actions, observations, recording
# ---------------------------------------------------------------------------------------------


def test_openai_style_calls_and_telemetry(ws, searcher):
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-1"})
    env.step({"type": "function", "function": {"name": "search", "arguments": '{"query": "senate", "k": 2}'},
              "telemetry": {"prompt_tokens": 120, "completion_tokens": 30, "latency_ms": 850.0, "cost_usd": 0.01}})
    env.step([{"name": "notebook_add", "arguments": {"claim": "c", "date_observed": "x", "doc_ids": []}}])
    _, _, _, _, info = env.step({"name": "forecast", "arguments": json.dumps({"probabilities": [0.3, 0.7]})})
    assert info["step"] == 2
    calls = env.unwrapped.episode_log()["tool_calls"]
    assert [c["tool"] for c in calls] == ["search", "notebook_add", "forecast"]
    assert calls[0]["prompt_tokens"] == 120 and calls[0]["completion_tokens"] == 30
    assert calls[0]["latency_ms"] == 850.0 and len(calls[0]["result_doc_ids"]) == 2
    assert json.loads(calls[0]["args_json"]) == {"query": "senate", "k": 2, "mode": "hybrid"}
    assert calls[1]["prompt_tokens"] is None and calls[1]["latency_ms"] >= 0
    assert [c["call_index"] for c in calls] == [0, 1, 2]


def test_observation_is_capped_and_stays_json(ws, searcher):
    env = make(ws, searcher, max_observation_chars=1000, article_chars=5000)
    env.reset(options={"event_id": "pm-1"})
    for i in range(6):
        env.step(_note(f"claim number {i} " + "words " * 100))
    obs, _, _, _, info = env.step({"tool": "open_article", "args": {"doc_id": "doc0001"}})
    assert len(obs) <= 1000 and env.observation_space.contains(obs)
    parsed = json.loads(obs)
    assert "observation cut" in parsed["message"]
    assert len(info["tool_result"]["body"]) > len(parsed["tool_result"]["body"])
    obs, _, _, _, info = env.step({"tool": "search", "args": {"query": "senate budget", "k": 50}})
    assert len(obs) <= 1000 and "observation cut" in json.loads(obs)["message"]


def test_unicode_observations_are_in_the_space(ws, searcher):
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-1"})
    claim = "emoji \U0001F600 control \x07 c1 \x85 lone \ud800 greek αβγ"
    obs, _, _, _, _info = env.step({"tool": "notebook_add", "args": {"claim": claim, "date_observed": "d",
                                                                   "doc_ids": []}})
    assert env.observation_space.contains(obs)
    assert json.loads(obs)["notebook"][0]["claim"] == claim.strip()


def test_seeded_determinism(ws, searcher):
    a = make(ws, searcher)
    b = make(ws, searcher)
    for seed in (3, 4):
        oa, _, ra = scripted_episode(a, seed=seed)
        ob, _, rb = scripted_episode(b, seed=seed)
        assert oa == ob and ra == rb
        assert a.unwrapped.episode_log()["steps"] == b.unwrapped.episode_log()["steps"]


def test_episode_log_rows_fit_the_schemas(ws, searcher):
    env = make(ws, searcher)
    scripted_episode(env, event_id="pm-2", rollout=2)  # the rollout reaches the env through reset(options)
    log = env.unwrapped.episode_log()
    for key, sch in (("forecasts", schema.FORECASTS), ("tool_calls", schema.TOOL_CALLS),
                     ("notebook", schema.NOTEBOOK)):
        rows = [{"run_id": "r", "agent": "scripted", **r} for r in log[key]]
        table = pa.Table.from_pylist(rows)
        out = conform(table, sch)
        assert out.num_rows == len(rows) > 0
        assert set(sch.names) - {"run_id", "agent"} <= set(log[key][0])
        assert out.column("rollout").to_pylist() == [2] * len(rows)
    steps = log["steps"]
    assert steps[0]["action"] is None and steps[-1]["terminated"]
    assert len(steps) == 1 + len(log["tool_calls"])
    json.dumps(steps)
    assert log["forecasts"][0]["n_search"] == 2 and log["forecasts"][0]["n_open"] == 1
    # every date's calls, its forecast included, carry that date's step
    per_step: dict[int, list[str]] = {}
    for call in log["tool_calls"]:
        per_step.setdefault(call["step"], []).append(call["tool"])
    assert sorted(per_step) == [f["step"] for f in log["forecasts"]]
    assert all(tools[-1] == "forecast" and tools.count("forecast") == 1 for tools in per_step.values())
    assert all(len(per_step[f["step"]]) == f["n_calls"] for f in log["forecasts"])


def test_step_after_end_is_an_error_observation(ws, searcher):
    env = make(ws, searcher)
    env.reset(options={"event_id": "pm-4"})
    _, _, term, _, _ = env.step(forecast([0.2, 0.8]))
    assert term
    _obs, reward, term, _, info = env.step(forecast([0.2, 0.8]))
    assert term and reward == 0.0 and "reset" in info["error"]
    assert len(env.unwrapped.episode_log()["forecasts"]) == 1


# ---------------------------------------------------------------------------------------------
# vector environments
# ---------------------------------------------------------------------------------------------


def _env_fn(ws: Path, event_id: str):
    def fn():
        from forecast_env.envs import ForecastEnv

        return ForecastEnv(ws, event_ids=[event_id])
    return fn


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_vector_envs(ws, kind):
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    fns = [_env_fn(ws, "pm-4"), _env_fn(ws, "pm-1")]
    if kind == "async":
        with pytest.raises(ValueError, match="shared_memory"):
            AsyncVectorEnv(fns, context="spawn")  # text through shared memory would go stale
    venv = SyncVectorEnv(fns) if kind == "sync" else AsyncVectorEnv(fns, context="spawn", shared_memory=False)
    try:
        obs, infos = venv.reset(seed=0)
        assert len(obs) == 2
        parsed = [json.loads(o) for o in obs]
        assert [p["question"][:8] for p in parsed] == ["Will the", "Will the"]
        assert parsed[0]["forecast_date"] == "2026-03-09" and parsed[1]["forecast_date"] == "2026-03-05"
        actions = (json.dumps(forecast([0.1, 0.9])), json.dumps(forecast({"Yes": 0.9, "No": 0.1})))
        obs, rewards, term, _trunc, _infos = venv.step(actions)
        assert list(term) == [True, False]
        assert rewards[0] == pytest.approx(-(0.1**2 + 0.1**2)) and rewards[1] == 0.0
        assert json.loads(obs[1])["step"] == 2
        assert not any(json.loads(o)["error"] for o in obs)
    finally:
        venv.close()


# ---------------------------------------------------------------------------------------------
# end to end on the micro sample world
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_micro_world_episodes_see_no_future(micro_events):
    from forecast_env.envs import ForecastEnv

    env = ForecastEnv(micro_events, split="all")
    for eid in env.event_ids[:6]:
        observations, infos, reward = scripted_episode(env, event_id=eid)
        assert math.isfinite(reward)
        for obs, info in zip(observations, infos):
            assert env.observation_space.contains(obs)
            tr = info["tool_result"] or {}
            assert all(h["day"] <= info["forecast_date"] for h in tr.get("hits", []))
            if "body" in tr:
                assert tr["day"] <= info["forecast_date"]
            assert "label" not in json.loads(obs)
        log = env.unwrapped.episode_log()
        dates = env.unwrapped.current_event.dates  # the offered prefix: may end before steps_total (the cut)
        assert len(log["forecasts"]) == len(dates) <= dates[0].steps_total


def test_close_closes_the_searcher_it_opened_and_leaves_a_given_one_open(ws, searcher):
    from forecast_env.envs import ForecastEnv
    from forecast_env.errors import WorkspaceError

    env = ForecastEnv(ws)  # opens its own searcher at the first search
    env.reset(options={"event_id": "pm-1"})
    env.step({"tool": "search", "args": {"query": "senate", "k": 2}})
    own = env.unwrapped.searcher
    env.close()
    with pytest.raises(WorkspaceError, match="closed"):
        own.search("senate", as_of=date(2026, 3, 5))
    given = make(ws, searcher)
    given.reset(options={"event_id": "pm-1"})
    given.step({"tool": "search", "args": {"query": "senate", "k": 2}})
    given.close()
    assert searcher.search("senate", as_of=date(2026, 3, 5))  # the caller's searcher stays usable
