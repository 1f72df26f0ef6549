"""The LLM agent over a real local HTTP chat-completions server, and the forecast parser."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast_env.agents.base import run_episode
from forecast_env.agents.llm import LLMAgent, system_prompt
from forecast_env.agents.parse import match_label, parse_arguments, parse_forecast
from forecast_env.agents.registry import make_agent
from forecast_env.errors import ConfigError, EndpointError
from tests.support.chat_server import (
    ChatServer,
    Status,
    forecasting_policy,
    last_user_or_tool,
    text,
    tool_call,
    tool_calls,
)

YN = ["Yes", "No"]
MULTI = ["Real Madrid", "Real Betis", "Barcelona"]


def obs(step: int = 1, options: list[str] | None = None, tool_result=None, budget_left: int = 20,
        forecast_date: str = "2026-03-10", error: str | None = None) -> str:
    return json.dumps({
        "question": "Will the Clean Water Bill pass in Velonia?",
        "description": "Resolves Yes if the bill passes the final vote.",
        "options": options or YN,
        "forecast_date": forecast_date,
        "step": step,
        "steps_total": 3,
        "tool_result": tool_result,
        "error": error,
        "notebook": [],
        "budget_left": budget_left,
    })


SPECS = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
         for n in ("search", "open_article", "notebook_add", "notebook_supersede", "forecast")]
INFO = {"tool_specs": SPECS}


def agent_for(server: ChatServer, **kw) -> LLMAgent:
    kw.setdefault("backoff_seconds", 0.0)
    return LLMAgent(base_url=server.base_url, model="test-model", temperature=0.3, **kw)


# ---------------------------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text_, options, expected",
    [
        ('{"Yes": 0.7, "No": 0.3}', YN, {"Yes": 0.7, "No": 0.3}),
        ('```json\n{"Yes": 0.65, "No": 0.35,}\n```', YN, {"Yes": 0.65, "No": 0.35}),
        ("Final answer:\n```\n{'yes': 0.2, 'no': 0.8}\n```", YN, {"Yes": 0.2, "No": 0.8}),
        ("Yes: 70%", YN, {"Yes": 0.7, "No": 0.3}),
        ("Yes: 70%\nNo: 30%", YN, {"Yes": 0.7, "No": 0.3}),
        ("**Yes** - 55%, **No** - 45%", YN, {"Yes": 0.55, "No": 0.45}),
        ("The probability of Yes is 0.62.", YN, {"Yes": 0.62, "No": 0.38}),
        ("I estimate yes = 40 percent", YN, {"Yes": 0.4, "No": 0.6}),
        ("[0.25, 0.75]", YN, {"Yes": 0.25, "No": 0.75}),
        ('{"probabilities": {"YES": "70%", "no": "30%"}}', YN, {"Yes": 0.7, "No": 0.3}),
        ('{"forecast": {"probabilities": [0.1, 0.9]}}', YN, {"Yes": 0.1, "No": 0.9}),
        ("Real Madrid - 0.5, real betis - 0.2, BARCELONA - 0.3", MULTI,
         {"Real Madrid": 0.5, "Real Betis": 0.2, "Barcelona": 0.3}),
        ("real  madrid: 50%\nreal betis: 20%\nbarcelona: 30%", MULTI,
         {"Real Madrid": 0.5, "Real Betis": 0.2, "Barcelona": 0.3}),
        (('[{"option": "Barcelona", "probability": 0.6}, {"option": "Real Madrid", "probability": 0.3},'
         ' {"option": "Real Betis", "probability": 0.1}]'), MULTI,
         {"Barcelona": 0.6, "Real Madrid": 0.3, "Real Betis": 0.1}),
        ("{'barcelona': 0.5, 'real madrid': 0.25, 'real betis': 0.25, }", MULTI,
         {"Barcelona": 0.5, "Real Madrid": 0.25, "Real Betis": 0.25}),
        ('{"Barcelona FC": 1.0}', MULTI, {"Barcelona": 1.0}),
    ],
)
def test_parse_forecast_messy_formats(text_, options, expected):
    got = parse_forecast(text_, options)
    assert got is not None
    assert set(got) == set(expected)
    for k, v in expected.items():
        assert got[k] == pytest.approx(v)


@pytest.mark.parametrize("text_", ["", "I am not sure.", "It depends on many factors", "{}", "[]", "[1, 2, 3]"])
def test_parse_forecast_unparseable(text_):
    assert parse_forecast(text_, YN) is None


def test_match_label_ambiguity():
    assert match_label("real", MULTI) is None  # prefix of two labels
    assert match_label("  REAL   madrid ", MULTI) == "Real Madrid"
    assert match_label("Barc", MULTI) == "Barcelona"
    assert match_label("Sevilla", MULTI) is None


def test_parse_arguments_lenient():
    assert parse_arguments('{"query": "x", "k": 5,}') == {"query": "x", "k": 5}
    assert parse_arguments("{'query': 'x'}") == {"query": "x"}
    assert parse_arguments("") == {}
    assert parse_arguments("{query: ") is None


labels = st.lists(st.text(alphabet=st.characters(whitelist_categories=("Lu", "Ll", "Nd", "Zs")), min_size=1,
                          max_size=15).map(str.strip).filter(bool),
                  min_size=2, max_size=6, unique_by=lambda s: " ".join(s.casefold().split()))


def test_parse_forecast_keeps_labels_that_spell_json_keywords():
    """A Python-style reply's quoted labels are not rewritten as JSON keywords (found by the round trip below:
    'null' became 'None', and the forecast fell through to prose)."""
    assert parse_forecast("{'0': 0.0, 'null': 0.0}", ["0", "null"]) == {"0": 0.0, "null": 0.0}
    assert parse_forecast("{'true': 0.7, 'false': 0.2, 'x': 0.1,}", ["true", "false", "x"]) == {"true": 0.7, "false": 0.2,
                                                                                               "x": 0.1}


@settings(max_examples=120, deadline=None)
@given(labels, st.data(), st.sampled_from(["plain", "fence", "trailing", "single"]))
def test_parse_forecast_json_round_trip(options, data, style):
    probs = data.draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=len(options), max_size=len(options)))
    mapping = dict(zip(options, probs))
    blob = json.dumps(mapping, ensure_ascii=style == "plain")
    if style == "fence":
        blob = f"Here is my forecast:\n```json\n{blob}\n```"
    elif style == "trailing":
        blob = blob[:-1] + ",}"
    elif style == "single" and all("'" not in o and '"' not in o for o in options):
        blob = blob.replace('"', "'")
    got = parse_forecast(blob, options)
    assert got is not None
    assert set(got) == set(options)
    for o in options:
        assert got[o] == pytest.approx(mapping[o])


# ---------------------------------------------------------------------------------------------
# the agent over HTTP
# ---------------------------------------------------------------------------------------------


def test_model_required():
    with pytest.raises(ConfigError, match="llm.model"):
        LLMAgent()


def test_make_agent_builds_llm_from_benchmark_config():
    agent = make_agent("llm", config={"llm": {"model": "m1", "base_url": "http://127.0.0.1:9/v1"}})
    assert isinstance(agent, LLMAgent) and agent.model == "m1"


def test_tool_calls_become_actions_and_results_return_as_tool_messages():
    script = [
        tool_calls([("search", {"query": "Clean Water Bill vote", "k": 5}),
                    ("open_article", {"doc_id": "d1"})]),
        tool_call("notebook_add", {"claim": "Whips say they have the votes", "date_observed": "2026-03-09",
                                   "doc_ids": ["d1"]}),
        tool_call("forecast", {"probabilities": {"Yes": 0.7, "No": 0.3}}),
    ]
    with ChatServer(script) as srv:
        agent = agent_for(srv)
        agent.reset(seed=7)
        a1 = agent.act(obs(), INFO)
        assert a1["tool"] == "search" and a1["args"] == {"query": "Clean Water Bill vote", "k": 5}
        a2 = agent.act(obs(tool_result={"hits": [{"doc_id": "d1", "day": "2026-03-09", "title": "t"}]},
                           budget_left=19), {})
        assert a2["tool"] == "open_article" and len(srv.requests) == 1  # queued, no new request
        a3 = agent.act(obs(tool_result={"doc_id": "d1", "body": "ARTICLE BODY TEXT"}, budget_left=18), {})
        assert a3["tool"] == "notebook_add" and a3["args"]["date_observed"] == "2026-03-09"
        a4 = agent.act(obs(tool_result={"added": {"entry_id": 1}}, budget_left=17), {})
        assert a4 == {"tool": "forecast", "args": {"probabilities": {"Yes": 0.7, "No": 0.3}},
                      "telemetry": a4["telemetry"]}

        first, second = srv.requests[0], srv.requests[1]
        assert first["model"] == "test-model" and first["temperature"] == 0.3 and first["seed"] == 7
        assert [t["function"]["name"] for t in first["tools"]] == [s["function"]["name"] for s in SPECS]
        assert first["messages"][0] == {"role": "system", "content": system_prompt()}
        assert "Will the Clean Water Bill pass in Velonia?" in first["messages"][1]["content"]
        # both queued calls are answered, in order, with their tool_call_ids
        call_ids = [c["id"] for c in second["messages"][2]["tool_calls"]]
        tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_msgs] == call_ids
        assert "ARTICLE BODY TEXT" in tool_msgs[1]["content"]
        for req in srv.requests:
            blob = json.dumps(req["messages"])
            assert '\\"label\\"' not in blob and "market" not in blob.lower()
    # telemetry: the first action carries the first response's usage, the queued one zero
    assert a1["telemetry"]["prompt_tokens"] == 100 and a1["telemetry"]["completion_tokens"] == 20
    assert a2["telemetry"]["prompt_tokens"] == 0
    assert a1["telemetry"]["latency_ms"] > 0
    assert [m["role"] for m in agent.messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool",
                                                   "assistant"]


def test_text_forecast_in_messy_format_is_parsed():
    with ChatServer([text("After weighing it all: **Yes** - 64%, **No** - 36%")]) as srv:
        agent = agent_for(srv)
        action = agent.act(obs(), INFO)
    assert action["tool"] == "forecast"
    assert action["args"]["probabilities"] == pytest.approx({"Yes": 0.64, "No": 0.36})


def test_unparseable_answer_gets_one_correction_then_empty_forecast():
    with ChatServer([text("Hard to say."), text("Still thinking about it.")]) as srv:
        agent = agent_for(srv)
        action = agent.act(obs(), INFO)
        assert action["args"]["probabilities"] == {}
        assert len(srv.requests) == 2
        last = srv.requests[1]["messages"][-1]
        assert last["role"] == "user" and "forecast" in last["content"] and '"Yes"' in last["content"]
    assert action["telemetry"]["prompt_tokens"] == 200  # both requests counted on the action


def test_correction_then_success():
    with ChatServer([text("Hmm."), text('{"Yes": 0.1, "No": 0.9}')]) as srv:
        action = agent_for(srv).act(obs(), INFO)
    assert action["args"]["probabilities"] == {"Yes": 0.1, "No": 0.9}


def test_malformed_tool_arguments():
    script = [tool_calls([("search", "{query: oops"), ("forecast", "{'Yes': 0.8, 'No': 0.2,}")])]
    with ChatServer(script) as srv:
        agent = agent_for(srv)
        a1 = agent.act(obs(), INFO)
        # unreadable arguments go to the env unchanged: its error observation teaches the model
        assert a1["type"] == "function" and a1["function"] == {"name": "search", "arguments": "{query: oops"}
        a2 = agent.act(obs(error="arguments are not valid JSON", budget_left=19), {})
    assert a2["tool"] == "forecast" and a2["args"]["probabilities"] == {"Yes": 0.8, "No": 0.2}


def test_forecast_arguments_without_wrapper_and_with_loose_labels():
    with ChatServer([tool_call("forecast", {"real madrid": 0.5, "BARCELONA": 0.5})]) as srv:
        action = agent_for(srv).act(obs(options=MULTI), INFO)
    assert action["args"]["probabilities"] == {"Real Madrid": 0.5, "Barcelona": 0.5}


def test_retries_on_500_and_429_then_success():
    script = [Status(500), Status(429, headers={"Retry-After": "0"}), Status(200, "not json"),
              tool_call("forecast", {"probabilities": [0.4, 0.6]}, prompt_tokens=11, completion_tokens=3)]
    with ChatServer(script) as srv:
        agent = agent_for(srv, max_retries=3)
        action = agent.act(obs(), INFO)
        assert len(srv.requests) == 4
    assert action["args"]["probabilities"] == [0.4, 0.6]
    assert action["telemetry"]["prompt_tokens"] == 11 and action["telemetry"]["completion_tokens"] == 3


def test_permanent_failure_raises_endpoint_error_then_recovers_on_next_date():
    with ChatServer([], default=Status(503)) as srv:
        agent = agent_for(srv, max_retries=2)
        with pytest.raises(EndpointError, match="after 3 attempts.*HTTP 503"):
            agent.act(obs(), INFO)
        assert len(srv.requests) == 3
        srv.default = tool_call("forecast", {"probabilities": {"Yes": 0.5, "No": 0.5}})
        action = agent.act(obs(step=2, forecast_date="2026-03-17"), {})
        assert action["tool"] == "forecast"
        # the next date is a fresh session: the failed date's chat is not sent again
        msgs = srv.requests[-1]["messages"]
        assert [m["role"] for m in msgs] == ["system", "user"] and "2026-03-17" in msgs[1]["content"]
        assert len(agent.sessions) == 2


def test_client_error_is_not_retried():
    with ChatServer([], default=Status(401, {"error": {"message": "bad key"}})) as srv:
        with pytest.raises(EndpointError, match="HTTP 401.*not retried"):
            agent_for(srv).act(obs(), INFO)
        assert len(srv.requests) == 1


def test_connection_refused_is_endpoint_error():
    srv = ChatServer()
    url = srv.base_url
    srv.httpd.server_close()  # nothing listens there any more
    agent = LLMAgent(base_url=url, model="m", max_retries=1, backoff_seconds=0.0)
    with pytest.raises(EndpointError, match="ConnectError"):
        agent.act(obs(), INFO)


def test_cost_api_key_and_truncation(monkeypatch):
    monkeypatch.setenv("FE_TEST_KEY", "sk-test-123")
    with ChatServer([tool_call("search", {"query": "x"}), tool_call("forecast", {"probabilities": [1, 0]})]) as srv:
        agent = agent_for(srv, api_key_env="FE_TEST_KEY", max_tool_result_chars=500,
                          prices_per_million={"test-model": {"prompt": 2.0, "completion": 10.0}})
        a1 = agent.act(obs(), INFO)
        agent.act(obs(tool_result={"hits": [{"doc_id": "d", "summary": "z" * 5000}]}, budget_left=19), {})
        assert srv.headers[0].get("Authorization") == "Bearer sk-test-123"
        tool_msg = next(m for m in srv.requests[1]["messages"] if m["role"] == "tool")
        assert len(tool_msg["content"]) < 600 and "truncated" in tool_msg["content"]
    assert a1["telemetry"]["cost_usd"] == pytest.approx((100 * 2.0 + 20 * 10.0) / 1e6)


def test_new_date_drops_queued_calls_and_answers_them():
    # the model forecasts and then asks for more; the calls after the forecast must not run on the next date
    script = [tool_calls([("forecast", {"probabilities": {"Yes": 0.6, "No": 0.4}}), ("search", {"query": "late"})]),
              tool_call("forecast", {"probabilities": {"Yes": 0.55, "No": 0.45}})]
    with ChatServer(script) as srv:
        agent = agent_for(srv)
        agent.act(obs(), INFO)
        a2 = agent.act(obs(step=2, forecast_date="2026-03-17", tool_result={"recorded": True}), {})
        assert a2["tool"] == "forecast" and len(srv.requests) == 2
        # the first date's session answers both of its calls; the second date starts afresh
        tool_msgs = [m for m in agent.sessions[0] if m["role"] == "tool"]
        assert len(tool_msgs) == 2 and tool_msgs[1]["content"].startswith("not executed")
        assert [m["role"] for m in srv.requests[1]["messages"]] == ["system", "user"]


def test_last_call_of_budget_nudges_forecast():
    script = [tool_calls([("search", {"query": "a"}), ("search", {"query": "b"})]),
              tool_call("forecast", {"probabilities": {"Yes": 0.5, "No": 0.5}})]
    with ChatServer(script) as srv:
        agent = agent_for(srv)
        agent.act(obs(budget_left=2), INFO)
        a2 = agent.act(obs(budget_left=1, tool_result={"hits": []}), {})
        assert a2["tool"] == "forecast"
        msgs = srv.requests[1]["messages"]
        assert "call forecast now" in msgs[-1]["content"] or "call forecast now" in msgs[-2]["content"]


def test_async_agent_round_trip():
    script = [tool_call("search", {"query": "q"}), text('```json\n{"Yes": 0.3, "No": 0.7}\n```')]
    with ChatServer(script) as srv:
        agent = agent_for(srv)

        async def go():
            a1 = await agent.aact(obs(), INFO)
            a2 = await agent.aact(obs(tool_result={"hits": []}, budget_left=19), {})
            return a1, a2

        a1, a2 = asyncio.run(go())
    assert a1["tool"] == "search"
    assert a2["args"]["probabilities"] == {"Yes": 0.3, "No": 0.7}


def test_async_permanent_failure():
    with ChatServer([], default=Status(502)) as srv:
        agent = agent_for(srv, max_retries=1)
        with pytest.raises(EndpointError):
            asyncio.run(agent.aact(obs(), INFO))
        assert len(srv.requests) == 2


def test_every_forecast_date_is_a_fresh_session():
    """Nothing of date 1's chat reaches the model on date 2 (memory on or off); only the
    observation, whose notebook is what carries over."""
    script = [tool_call("search", {"query": "SECRET-QUERY-OF-DATE-1"}),
              tool_call("forecast", {"probabilities": {"Yes": 0.9, "No": 0.1}}),
              tool_call("forecast", {"probabilities": {"Yes": 0.4, "No": 0.6}})]
    with ChatServer(script) as srv:
        agent = agent_for(srv)
        agent.reset(seed=1)
        agent.act(obs(), INFO)
        agent.act(obs(tool_result={"hits": [{"doc_id": "HIT-OF-DATE-1", "day": "2026-03-09"}]}, budget_left=19), {})
        a3 = agent.act(obs(step=2, forecast_date="2026-03-17", tool_result={"recorded": True}), {})
        assert a3["args"]["probabilities"] == {"Yes": 0.4, "No": 0.6}
        date2 = srv.requests[2]["messages"]
        assert [m["role"] for m in date2] == ["system", "user"]
        assert date2[0]["content"] == system_prompt() and "2026-03-17" in date2[1]["content"]
        blob = json.dumps(date2)
        assert "SECRET-QUERY-OF-DATE-1" not in blob and "HIT-OF-DATE-1" not in blob and "0.9" not in blob
    # the record keeps both sessions, each whole
    assert [[m["role"] for m in s] for s in agent.sessions] == [
        ["system", "user", "assistant", "tool", "assistant", "tool"], ["system", "user", "assistant"]]
    assert agent.messages == agent.sessions[0] + agent.sessions[1]


# ---------------------------------------------------------------------------------------------
# end to end with the real environment
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hand_ws(tmp_path_factory):
    """The environment tests' hand-made workspace (real index, hand-written articles and events)."""
    from tests.support.env_data import build_workspace

    return build_workspace(tmp_path_factory.mktemp("llm_hand_ws"))


def test_llm_agent_plays_real_env(hand_ws):
    from forecast_env.envs import ForecastEnv

    env = ForecastEnv(hand_ws, split="eval")
    event_id = env.unwrapped.event_ids[0]
    with ChatServer([], default=forecasting_policy(searches=1)) as srv:
        agent = agent_for(srv)
        out = run_episode(env, agent, seed=0, event_id=event_id)
        steps_total = len(out["scores"])
        assert steps_total >= 1 and not out["skipped"]
        assert all(s["fallback"] is None for s in out["scores"])
        assert out["n_actions"] == 2 * steps_total  # one search + one forecast per date
        log = env.unwrapped.episode_log()
        calls = log["tool_calls"]
        assert [c["tool"] for c in calls] == ["search", "forecast"] * steps_total
        assert all(c["prompt_tokens"] == 100 for c in calls)
        first = srv.requests[0]
        assert first["tools"] == json.loads(json.dumps(env.unwrapped.tool_specs))
        assert first["messages"][1]["content"].count(env.unwrapped.current_event.question) >= 1
        for req in srv.requests:
            blob = json.dumps(req["messages"])
            assert "market_previous_day" not in blob and '\\"label\\"' not in blob

        # a dead endpoint: every date is missing, never uniform
        srv.default = Status(500)
        agent2 = agent_for(srv, max_retries=0)
        out2 = run_episode(env, agent2, seed=0, event_id=event_id)
        assert out2["scores"] == [] and len(out2["skipped"]) == steps_total
        forecasts = env.unwrapped.episode_log()["forecasts"]
        assert len(forecasts) == steps_total and all(f["missing"] for f in forecasts)


def world_policy(body: dict) -> dict:
    """A scripted model for world mode: on a day's first turn it forecasts every listed question with a
    loose label ("yes" for "Yes"), then ends the day."""
    first = body["messages"][-1]["role"] == "user"
    obs = last_user_or_tool(body)
    if first and obs.get("questions"):
        return tool_calls([("forecast", {"question_id": q["question_id"],
                                         "probabilities": {o.lower(): 1 / len(q["options"]) for o in q["options"]}})
                           for q in obs["questions"]])
    return tool_call("next_day", {})


def test_llm_agent_plays_world_mode_one_session_per_day(hand_ws):
    from forecast_env.envs import ForecastWorldEnv

    env = ForecastWorldEnv(hand_ws, split="eval", end="2026-03-12")
    with ChatServer([], default=world_policy) as srv:
        agent = agent_for(srv)
        out = run_episode(env, agent, seed=0)
        log = env.unwrapped.episode_log()
        assert not [c for c in log["tool_calls"] if c["error"]]
        assert [c["tool"] for c in log["tool_calls"]].count("next_day") == len(env.unwrapped.days)
        assert log["forecasts"] and all(f["fallback"] is None for f in log["forecasts"])
        assert out["final_info"]["time_weighted_brier"] is not None
        # one fresh chat per day: every request holds only that day's messages
        assert len(agent.sessions) == len(env.unwrapped.days)
        for req in srv.requests:
            msgs = req["messages"]
            assert msgs[0]["role"] == "system" and [m["role"] for m in msgs].count("system") == 1
            days = {m["content"].split('"date": "')[1][:10] for m in msgs if '"date": "' in (m.get("content") or "")}
            assert len(days) == 1
