"""Tool specs, action parsing, argument checking and the notebook (no index needed)."""

from __future__ import annotations

import json

import pytest

from forecast_env.envs.notebook import Notebook, NotebookError
from forecast_env.envs.tools import ActionError, check_args, parse_action, tool_specs


def parsed(action, **kw):
    return check_args(parse_action(action), kw.get("max_k", 50), kw.get("k", 10), kw.get("mode", "hybrid"))


def test_specs_are_openai_function_tools():
    specs = tool_specs(max_k=25)
    assert [s["function"]["name"] for s in specs] == ["search", "open_article", "notebook_add",
                                                      "notebook_supersede", "forecast"]
    for s in specs:
        params = s["function"]["parameters"]
        assert s["type"] == "function" and params["type"] == "object"
        assert params["additionalProperties"] is False
        assert not {"as_of", "date", "forecast_date"} & set(params["properties"])
    assert specs[0]["function"]["parameters"]["properties"]["k"]["maximum"] == 25
    json.dumps(specs)


@pytest.mark.parametrize("action", [
    {"tool": "search", "args": {"query": "vote"}},
    '{"tool": "search", "args": {"query": "vote"}}',
    b'{"tool": "search", "args": {"query": "vote"}}',
    {"type": "function", "function": {"name": "search", "arguments": '{"query": "vote"}'}},
    {"name": "search", "arguments": {"query": "vote"}},
    [{"name": "search", "arguments": '{"query": "vote"}'}],
    {"tool": "search", "args": '{"query": "vote"}', "telemetry": {"prompt_tokens": 3}},
])
def test_accepted_action_forms(action):
    assert parsed(action) == {"query": "vote", "k": 10, "mode": "hybrid"}


def test_telemetry_is_stripped_and_kept():
    p = parse_action({"tool": "open_article", "args": {"doc_id": "d"},
                      "telemetry": {"prompt_tokens": 10, "completion_tokens": 2.0, "latency_ms": "x",
                                    "cost_usd": float("nan")}})
    assert p.telemetry == {"prompt_tokens": 10.0, "completion_tokens": 2.0, "latency_ms": None, "cost_usd": None}
    assert "telemetry" not in p.args


@pytest.mark.parametrize("action, fragment", [
    ("not json", "not valid JSON"),
    ("[" * 100_000, "not valid JSON"),
    ("x" * 200_000, "limit"),
    (42, "the action is a int"),
    ([], "exactly one tool call"),
    ([{"tool": "search"}] * 2, "exactly one tool call"),
    ({"foo": 1}, "no tool name"),
    ({"tool": "delete_everything"}, "unknown tool"),
    ({"tool": ["search"]}, "unknown tool"),
    ({"tool": "search", "args": [1]}, "must be a JSON object"),
    ({"tool": "search", "args": "{bad"}, "not valid JSON"),
    ({"tool": "search", "args": {}}, "missing argument"),
    ({"tool": "search", "args": {"query": "  "}}, "empty"),
    ({"tool": "search", "args": {"query": 3}}, "must be a string"),
    ({"tool": "search", "args": {"query": "a", "k": True}}, "integer"),
    ({"tool": "search", "args": {"query": "a", "k": 0}}, "at least 1"),
    ({"tool": "search", "args": {"query": "a", "mode": "magic"}}, "mode"),
    ({"tool": "search", "args": {"query": "a", "as_of": "2030-01-01"}}, "cannot be changed"),
    ({"tool": "open_article", "args": {"doc_id": None}}, "must be a string"),
    ({"tool": "notebook_add", "args": {"claim": "c", "date_observed": "d", "doc_ids": [1]}}, "list of strings"),
    ({"tool": "notebook_supersede", "args": {"entry_id": "one", "reason": "r"}}, "integer"),
    ({"tool": "forecast", "args": {"probabilities": "0.5"}}, "mapping"),
    ({"tool": "forecast", "args": {"probabilities": [0.5], "date": "x"}}, "forecast date"),
])
def test_invalid_actions_raise_action_error(action, fragment):
    with pytest.raises(ActionError, match=fragment):
        parsed(action)


def test_argument_coercion_and_caps():
    assert parsed({"tool": "search", "args": {"query": "a", "k": 500}})["k"] == 50
    assert parsed({"tool": "search", "args": {"query": "a", "k": "7", "mode": "bm25"}}) == {
        "query": "a", "k": 7, "mode": "bm25"}
    assert parsed({"tool": "search", "args": {"query": "a", "k": 3.0}})["k"] == 3
    assert parsed({"tool": "notebook_add", "args": {"claim": "c", "date_observed": "bad date",
                                                    "doc_ids": "doc1"}})["doc_ids"] == ["doc1"]
    nan = parsed('{"tool": "forecast", "args": {"probabilities": {"Yes": NaN}}}')["probabilities"]
    assert set(nan) == {"Yes"}  # contents are scored (uniform fallback), not rejected here


def test_notebook_ledger():
    nb = Notebook(max_claim_chars=20)
    e1 = nb.add(" a claim ", "2026-03-01", ["d1"], step=1)
    e2 = nb.add("another", "not a date", [], step=2)
    assert (e1.entry_id, e2.entry_id, e1.claim) == (1, 2, "a claim")
    nb.supersede(1, "wrong")
    assert nb.to_list()[0]["status"] == "superseded" and nb.to_list()[0]["superseded_reason"] == "wrong"
    with pytest.raises(NotebookError, match="already superseded"):
        nb.supersede(1, "again")
    with pytest.raises(NotebookError, match="no entry 3"):
        nb.supersede(3, "x")
    with pytest.raises(NotebookError, match="limit"):
        nb.add("x" * 21, "d", [], step=1)
    with pytest.raises(NotebookError, match="empty"):
        nb.add("   ", "d", [], step=1)
    rows = nb.snapshot_rows(step=2)
    assert [r["entry_id"] for r in rows] == [1, 2] and all(r["step"] == 2 for r in rows)
    assert rows[1]["date_observed"] == "not a date" and rows[1]["created_step"] == 2
