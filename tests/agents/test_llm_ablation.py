"""The LLM no-tools ablation and the knowledge-cutoff warning of the report."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from forecast_env.eval.report.render import knowledge_cutoff_warning
from tests.agents.test_llm_agent import INFO, agent_for, obs
from tests.support.chat_server import ChatServer, text


def test_no_tools_ablation_sends_no_tools_and_asks_for_an_answer() -> None:
    with ChatServer([text('{"Yes": 0.7, "No": 0.3}')]) as srv:
        agent = agent_for(srv, tools=False)
        action = agent.act(obs(), INFO)
        request = srv.requests[0]
    assert action == {"tool": "forecast", "args": {"probabilities": pytest.approx({"Yes": 0.7, "No": 0.3})},
                      "telemetry": action["telemetry"]}
    assert "tools" not in request and "tool_choice" not in request
    assert "No tools are available" in request["messages"][1]["content"]
    with ChatServer([text('{"Yes": 0.7, "No": 0.3}')]) as srv:  # the default sends the env's tools
        agent_for(srv).act(obs(), INFO)
        assert srv.requests[0]["tools"] == INFO["tool_specs"]


def _meta(ws: Path, cutoff: str | None, agents: list) -> dict:
    return {"workspace": str(ws), "event_ids": ["a", "b", "c"], "agents": agents,
            "config": {"benchmark": {"llm": {"knowledge_cutoff": cutoff}}}}


def test_knowledge_cutoff_warning_counts_events_resolved_before_it(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    ts = [datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 20, tzinfo=UTC), datetime(2026, 5, 30, tzinfo=UTC)]
    pl.DataFrame({"event_id": ["a", "b", "c"], "t_end": ts,
                  # b closed early (its outcome was public before its scheduled end)
                  "t_close": [ts[0], datetime(2026, 4, 1, tzinfo=UTC), ts[2]]}).write_parquet(
        tmp_path / "events" / "events.parquet")
    llm = [{"name": "llm", "label": "llm"}]
    warning = knowledge_cutoff_warning(_meta(tmp_path, "2026-04-10", llm))
    assert warning is not None and "2 of 3 evaluated events" in warning
    assert knowledge_cutoff_warning(_meta(tmp_path, "2026-02-01", llm)) is None  # all after the cutoff
    assert knowledge_cutoff_warning(_meta(tmp_path, None, llm)) is None  # no cutoff recorded
    assert knowledge_cutoff_warning(_meta(tmp_path, "2026-04-10", [{"name": "uniform"}])) is None  # no LLM


def test_async_client_is_closed_on_its_loop() -> None:
    import asyncio

    from forecast_env.chat import ChatClient

    with ChatServer([text("hi")]) as srv:
        client = ChatClient(srv.base_url, backoff_seconds=0)

        async def main() -> bool:
            await client.acomplete({"model": "m", "messages": [{"role": "user", "content": "x"}]})
            inner = client._aclient
            assert inner is not None and not inner.is_closed
            await client.aclose()
            return inner.is_closed

        assert asyncio.run(main())
        assert client._aclient is None
