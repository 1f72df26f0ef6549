"""Baseline agents (uniform, base_rate, retrieval), the registry, and the episode drivers."""

from __future__ import annotations

import asyncio
import json
from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forecast_env import schema
from forecast_env.agents.base import (
    Agent,
    AsyncAgent,
    arun_episode,
    parse_observation,
    run_episode,
)
from forecast_env.agents.base_rate import BaseRateAgent, fit_base_rates
from forecast_env.agents.lexicon import cue_lexicon
from forecast_env.agents.registry import make_agent
from forecast_env.agents.retrieval import RetrievalAgent, cue_balance, score_options
from forecast_env.agents.uniform import UniformAgent
from forecast_env.errors import ForecastEnvError, WorkspaceError
from forecast_env.store import Workspace

YN = ["Yes", "No"]


def obs(options=None, step=1, tool_result=None, budget_left=20, forecast_date="2026-03-20",
        question="Will the Clean Water Bill pass in Velonia?", notebook=()) -> str:
    return json.dumps({"question": question, "description": "d", "options": options or YN,
                       "forecast_date": forecast_date, "step": step, "steps_total": 2, "tool_result": tool_result,
                       "error": None, "notebook": list(notebook), "budget_left": budget_left})


# ---------------------------------------------------------------------------------------------
# registry, protocol, uniform
# ---------------------------------------------------------------------------------------------


def test_registry_and_protocols(tmp_path):
    with pytest.raises(ForecastEnvError, match="unknown agent 'oracle'.*uniform, base_rate, retrieval, llm"):
        make_agent("oracle")
    with pytest.raises(ForecastEnvError, match="needs a workspace"):
        make_agent("base_rate")
    with pytest.raises(WorkspaceError, match="no events table"):
        make_agent("base_rate", workspace=tmp_path)
    u = make_agent("uniform")
    r = make_agent("retrieval", config={"retrieval": {"max_calls_per_date": 6}})
    assert r.cfg["max_calls_per_date"] == 6
    for a in (u, r):
        assert isinstance(a, Agent) and isinstance(a, AsyncAgent)


def test_uniform_agent():
    a = UniformAgent()
    a.reset(seed=1)
    act = a.act(obs(options=["A", "B", "C", "D"]), {})
    assert act == {"tool": "forecast", "args": {"probabilities": {"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}}}


def test_parse_observation_prefers_structured_info():
    o = parse_observation('{"question": "q", "options": ["x"]', {"options": ["A", "B"], "step": 2})
    assert o["options"] == ["A", "B"] and o["step"] == 2


# ---------------------------------------------------------------------------------------------
# base rate
# ---------------------------------------------------------------------------------------------


def write_events(ws, rows):
    full = []
    for i, r in enumerate(rows):
        row = {name: None for name in schema.EVENTS.names}
        row.update(event_id=f"q-{i}", source="questions", question=f"Q{i}?", type="binary" if len(r["options"]) == 2
                   else "multi", **r)
        full.append(row)
    path = Workspace.at(ws).events_table("events")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(full, schema=schema.EVENTS), path)


TRAIN = (
    [{"options": ["Yes", "No"], "label": "Yes", "split": "train"}] * 3
    + [{"options": ["No", "Yes"], "label": "No", "split": "train"}] * 5
    + [{"options": ["A", "B", "C"], "label": "A", "split": "train"}] * 4
    + [{"options": ["X", "Y", "Z"], "label": "Z", "split": "train"}] * 1
    + [{"options": ["Reds", "Blues"], "label": "Blues", "split": "train"}] * 2
)


def test_base_rates_by_name_and_position(tmp_path):
    eval_rows = [{"options": ["Yes", "No"], "label": "Yes", "split": "eval"}] * 50
    write_events(tmp_path, TRAIN + eval_rows + [{"options": ["P", "Q"], "label": "P", "split": "none"}] * 9)
    agent = make_agent("base_rate", workspace=tmp_path)
    yn = agent.act(obs(options=["No", "Yes"]), {})["args"]["probabilities"]
    assert yn["Yes"] == pytest.approx((3 + 1) / (8 + 2)) and yn["No"] == pytest.approx(6 / 10)
    tri = agent.act(obs(options=["D", "E", "F"]), {})["args"]["probabilities"]
    assert tri == pytest.approx({"D": 5 / 8, "E": 1 / 8, "F": 2 / 8})
    named = agent.act(obs(options=["Cats", "Dogs"]), {})["args"]["probabilities"]
    assert named == pytest.approx({"Cats": 1 / 4, "Dogs": 3 / 4})  # "none" split rows never counted
    five = agent.act(obs(options=list("abcde")), {})["args"]["probabilities"]
    assert five == pytest.approx({c: 0.2 for c in "abcde"})  # no train event with K=5: uniform


def test_base_rate_never_reads_eval_labels(tmp_path):
    ws1, ws2 = tmp_path / "a", tmp_path / "b"
    write_events(ws1, TRAIN + [{"options": ["Yes", "No"], "label": "Yes", "split": "eval"}] * 20
                 + [{"options": ["A", "B", "C"], "label": "C", "split": "eval"}] * 20)
    write_events(ws2, TRAIN + [{"options": ["Yes", "No"], "label": "No", "split": "eval"}] * 20
                 + [{"options": ["A", "B", "C"], "label": "B", "split": "eval"}] * 20)
    for options in (YN, ["A", "B", "C"], ["u", "v"]):
        a = BaseRateAgent.from_workspace(ws1).act(obs(options=options), {})
        b = BaseRateAgent.from_workspace(ws2).act(obs(options=options), {})
        assert a == b
    # and the train labels do matter (the test above could not pass vacuously)
    other = fit_base_rates([{"options": ["Yes", "No"], "label": "Yes"}] * 10)
    assert other.probabilities(YN) != BaseRateAgent.from_workspace(ws1).rates.probabilities(YN)


def test_base_rate_is_never_fitted_on_the_split_it_is_scored_on(tmp_path):
    """Scored on train it fits on eval (train labels cannot matter); scored on all it is refused."""
    ws1, ws2 = tmp_path / "a", tmp_path / "b"
    evals = [{"options": ["Yes", "No"], "label": "No", "split": "eval"}] * 7
    flipped = [{**r, "label": "Yes" if r["label"] == "No" else "No"} for r in TRAIN[:8]] + TRAIN[8:]
    write_events(ws1, TRAIN + evals)
    write_events(ws2, flipped + evals)
    on_train = [make_agent("base_rate", workspace=ws, split="train") for ws in (ws1, ws2)]
    assert {a.fitted_on for a in on_train} == {"eval"}
    p = [a.act(obs(), {})["args"]["probabilities"] for a in on_train]
    assert p[0] == p[1] and p[0]["Yes"] == pytest.approx(1 / 9)  # (0 + 1) / (7 + 2), eval labels only
    on_eval = [make_agent("base_rate", workspace=ws, split="eval") for ws in (ws1, ws2)]
    assert on_eval[0].rates.probabilities(YN) != on_eval[1].rates.probabilities(YN)  # train labels do count
    with pytest.raises(ForecastEnvError, match="all"):
        make_agent("base_rate", workspace=ws1, split="all")


# ---------------------------------------------------------------------------------------------
# retrieval
# ---------------------------------------------------------------------------------------------


def test_cue_balance():
    lex = cue_lexicon()
    assert cue_balance("The coalition said it had secured enough votes and is expected to win.") > 0
    assert cue_balance("The committee delayed the vote; the bill looks weak and its prospects doubtful.") < 0
    assert cue_balance("The bill is not successful.") == pytest.approx(-lex["successful"])  # negation flips
    # the balance is the sum of the lexicon's polarity weights, word by word
    assert cue_balance("A good plan, a bad plan and a terrible one.") == pytest.approx(
        lex["good"] + lex["bad"] + lex["terrible"])


def test_score_options_yes_no_and_multi():
    as_of = date(2026, 3, 20)
    pos = {"d1": {"day": "2026-03-19", "title": "Clean Water Bill heads toward vote in Velonia",
                  "summary": "", "body": "Whips said the bill looks strong and its passage successful. Support is good."}}
    neg = {"d1": {"day": "2026-03-19", "title": "Clean Water Bill stalls in Velonia",
                  "summary": "", "body": "The review went badly and the outlook is poor. Its prospects look doubtful."}}
    q = "Will the Clean Water Bill pass in Velonia?"
    p_pos = score_options(pos, q, YN, as_of)
    p_neg = score_options(neg, q, YN, as_of)
    assert p_pos["Yes"] > 0.5 > p_neg["Yes"]
    assert sum(p_pos.values()) == pytest.approx(1.0)
    # Yes/No tone is read against the background: unrelated news of the same tone says nothing, and
    # news about the question less cheerful than the unrelated news leans No
    cheer = {f"bg{i}": {"day": "2026-03-19", "title": "Clean water plans in Ostara", "summary": "",
                        "body": "Whips said the bill looks strong and its passage successful. Support is good."}
             for i in range(3)}
    assert score_options({**pos, **cheer}, q, YN, as_of)["Yes"] == pytest.approx(0.5, abs=1e-12)
    plain = {"d1": {"day": "2026-03-19", "title": "Clean Water Bill heads toward vote in Velonia", "summary": "",
                    "body": "The vote is scheduled for Friday. Members will meet in the morning."}}
    # ("Clean" in its title is the only cue: alone it leans Yes, among more cheerful news it leans No)
    assert score_options({**plain, **cheer}, q, YN, as_of)["Yes"] < 0.5 < score_options(plain, q, YN, as_of)["Yes"]
    # strong one-sided evidence moves the forecast further at a lower Yes/No temperature
    assert score_options(pos, q, YN, as_of, yes_no_temperature=1.0)["Yes"] > p_pos["Yes"]
    # unrelated news carries no weight
    off = {"d9": {"day": "2026-03-19", "title": "Storm expected across the coast", "summary": "",
                  "body": "Temperatures are expected to rise strongly."}}
    assert score_options(off, q, YN, as_of) == {"Yes": 0.5, "No": 0.5}
    # multi: the subject of a sentence takes its cues
    opts = ["Harbor City Wolves", "Ashby Comets", "Glenrock Foxes"]
    docs = {
        "a": {"day": "2026-03-18", "title": "Harbor City Wolves extend winning run", "summary": "",
              "body": "Harbor City Wolves are favored by pundits. Ashby Comets will be without their captain "
                      "after an injury. Glenrock Foxes struggled again."},
    }
    p = score_options(docs, "Who will win the league?", opts, as_of)
    assert p["Harbor City Wolves"] > p["Glenrock Foxes"] and p["Harbor City Wolves"] > p["Ashby Comets"]
    assert max(p.values()) < 1.0 - 0.35 * (1 - 1 / 3) + 1e-9  # shrunk toward uniform
    # recency: old evidence counts less than new
    old_new = {
        "old": {"day": "2026-01-01", "title": "", "summary": "", "body": "Ashby Comets are favored and leading."},
        "new": {"day": "2026-03-19", "title": "", "summary": "", "body": "Glenrock Foxes are favored and leading."},
    }
    p2 = score_options(old_new, "Who will win?", opts, as_of)
    assert p2["Glenrock Foxes"] > p2["Ashby Comets"]


def test_retrieval_agent_plan_from_hand_written_observations():
    agent = RetrievalAgent()
    agent.reset(seed=0)
    opts = ["Harbor City Wolves", "Ashby Comets"]
    question = "Who will win the Coastal Football League final?"
    actions = [agent.act(obs(options=opts, question=question), {})]
    hits = {"hits": [
        {"doc_id": "n1", "day": "2026-03-18", "title": "Harbor City Wolves favored in final", "url": "u",
         "summary": "Harbor City Wolves are leading the form guide.", "score": 1.0, "rank": 1},
        {"doc_id": "n2", "day": "2026-03-10", "title": "Ashby Comets injury worries", "url": "u",
         "summary": "Ashby Comets will be without their captain.", "score": 0.9, "rank": 2},
    ]}
    budget = 20
    while actions[-1]["tool"] != "forecast":
        budget -= 1
        last = actions[-1]
        if last["tool"] == "search":
            result = hits
        elif last["tool"] == "open_article":
            d = last["args"]["doc_id"]
            h = next(h for h in hits["hits"] if h["doc_id"] == d)
            result = {"doc_id": d, "day": h["day"], "title": h["title"], "url": "u", "summary": h["summary"],
                      "body": h["summary"] + " Pundits tipped them to win."}
        else:
            result = {"added": {"entry_id": 1}}
        actions.append(agent.act(obs(options=opts, question=question, tool_result=result, budget_left=budget), {}))
    tools = [a["tool"] for a in actions]
    assert tools[0] == "search" and tools.count("search") == 3  # question + one per option
    assert tools.count("open_article") == 2 and tools.count("notebook_add") == 1
    assert len(actions) <= 8
    note = next(a for a in actions if a["tool"] == "notebook_add")["args"]
    assert note["date_observed"] == "2026-03-18" and set(note["doc_ids"]) == {"n1", "n2"}
    probs = actions[-1]["args"]["probabilities"]
    assert probs["Harbor City Wolves"] > probs["Ashby Comets"]
    # next date: a new plan starts with a search again, and already-read articles are not reopened
    nxt = agent.act(obs(options=opts, question=question, step=2, forecast_date="2026-03-27",
                        tool_result={"recorded": True}), {})
    assert nxt["tool"] == "search"


def _play_date(agent, step, day, hits, notebook=()):
    """Drive the retrieval agent through one date whose searches return `hits`; returns its actions."""
    kw = {"step": step, "forecast_date": day, "notebook": notebook,
          "question": "Will the Clean Water Bill pass in Velonia?"}
    actions = [agent.act(obs(tool_result={"recorded": True} if step > 1 else None, **kw), {})]
    budget = 20
    while actions[-1]["tool"] != "forecast":
        budget -= 1
        last = actions[-1]
        if last["tool"] == "search":
            result = {"hits": hits}
        elif last["tool"] == "open_article":
            h = next(h for h in hits if h["doc_id"] == last["args"]["doc_id"])
            result = {**h, "body": h["summary"]}
        else:
            result = {"added": {"entry_id": 1, "claim": last["args"]["claim"]}}
        actions.append(agent.act(obs(tool_result=result, budget_left=budget, **kw), {}))
    return actions


@pytest.mark.parametrize("memory", [True, False])
def test_retrieval_agent_starts_every_date_fresh(memory):
    """Date 2 finds nothing: without memory the forecast is uniform (date 1's reading is gone);
    with memory the notebook entry the agent wrote on date 1 is the only thing that carries over."""
    hits = [{"doc_id": f"n{i}", "day": "2026-03-18", "title": f"Clean Water Bill secured enough votes {i}",
             "url": "u", "summary": "The Clean Water Bill in Velonia is likely to pass; backers secured the votes.",
             "score": 1.0, "rank": i + 1} for i in range(3)]
    agent = RetrievalAgent(yes_no_temperature=1.0)  # these few cues move the default reader little
    agent.reset(seed=0)
    first = _play_date(agent, 1, "2026-03-20", hits)
    assert first[-1]["args"]["probabilities"]["Yes"] > 0.6
    note = next(a for a in first if a["tool"] == "notebook_add")["args"]
    notebook = [{"entry_id": 1, "status": "active", "created_step": 1, **note}] if memory else []
    second = _play_date(agent, 2, "2026-03-27", [], notebook)
    p_yes = second[-1]["args"]["probabilities"]["Yes"]
    if memory:
        assert 0.5 < p_yes < first[-1]["args"]["probabilities"]["Yes"]  # titles only, a week older
    else:
        assert p_yes == pytest.approx(0.5)
    # nothing read on date 1 is opened again without being found on date 2
    assert not [a for a in second if a["tool"] == "open_article"]


def test_retrieval_agent_respects_small_budget():
    agent = RetrievalAgent()
    a = agent.act(obs(budget_left=2), {})
    assert a["tool"] == "forecast"  # nothing fits except the forecast (and a spare call)
    agent.reset()
    seen = []
    budget = 4
    a = agent.act(obs(budget_left=budget), {})
    while a["tool"] != "forecast":
        seen.append(a["tool"])
        budget -= 1
        a = agent.act(obs(budget_left=budget, tool_result={"hits": []}), {})
    assert len(seen) + 1 <= 4


# ---------------------------------------------------------------------------------------------
# end to end with the real environment on the micro sample world
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hand_ws(tmp_path_factory):
    """The environment tests' hand-made workspace (real index, hand-written articles and events)."""
    from tests.support.env_data import build_workspace

    return build_workspace(tmp_path_factory.mktemp("agents_hand_ws"))


def _check_retrieval_log(log):
    per_date = [0]
    for c in log["tool_calls"]:  # calls in order; a forecast closes its date
        per_date[-1] += 1
        assert c["error"] is None, c
        if c["tool"] == "forecast":
            per_date.append(0)
    assert per_date[-1] == 0 and len(per_date) - 1 == len(log["forecasts"])
    assert max(per_date) <= 8
    assert {c["tool"] for c in log["tool_calls"]} >= {"search", "open_article", "notebook_add", "forecast"}
    dates = {f["step"]: f["forecast_date"] for f in log["forecasts"]}
    assert log["notebook"]
    for row in log["notebook"]:
        observed = date.fromisoformat(row["date_observed"])
        assert observed <= dates[row["created_step"]]


def test_agents_play_hand_made_env(hand_ws):
    from forecast_env.envs import ForecastEnv

    env = ForecastEnv(hand_ws, split="eval")
    for name in ("uniform", "base_rate", "retrieval"):
        agent = make_agent(name, workspace=hand_ws)
        for eid in env.unwrapped.event_ids:
            out = run_episode(env, agent, seed=0, event_id=eid)
            log = env.unwrapped.episode_log()
            assert len(out["scores"]) == len(log["forecasts"]) >= 1
            assert all(s["fallback"] is None for s in out["scores"])
            if name == "uniform":
                assert [c["tool"] for c in log["tool_calls"]] == ["forecast"] * len(out["scores"])
            if name == "retrieval":
                _check_retrieval_log(log)


@pytest.mark.slow
def test_agents_play_real_env(micro_events):
    """Every baseline plays the micro world's eval events; whether reading beats the blind forecast is
    the acceptance gate's question (tests/eval/test_acceptance.py: 4 events are too few to tell)."""
    from forecast_env.envs import ForecastEnv

    env = ForecastEnv(micro_events, split="eval")
    event_ids = list(env.unwrapped.event_ids)
    assert event_ids
    results = {}
    for name in ("uniform", "base_rate", "retrieval"):
        agent = make_agent(name, workspace=micro_events)
        results[name] = []
        for eid in event_ids:
            out = run_episode(env, agent, seed=0, event_id=eid)
            assert out["scores"] and all(s["fallback"] is None for s in out["scores"])
            log = env.unwrapped.episode_log()
            if name == "retrieval":
                _check_retrieval_log(log)
            results[name].append(out)
    assert all(len(results[n]) == len(event_ids) for n in results)


def test_arun_episode_via_gymnasium_make(hand_ws):
    import gymnasium

    env = gymnasium.make("forecast_env.envs:ForecastEnv-v0", workspace=hand_ws, split="eval")
    eid = env.unwrapped.event_ids[0]
    out = asyncio.run(arun_episode(env, RetrievalAgent(), seed=0, event_id=eid))
    assert out["scores"] and out["n_actions"] >= len(out["scores"])
