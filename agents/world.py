"""Playing world mode with an episode agent (docs/design.md §5 "World mode").

`WorldPlayer` wraps an agent that can research one question (`question_plan`) and plays
`ForecastWorldEnv` with it, one fresh session per day: each day it walks the day's list (page by
page), gives each question a share of the day's call budget, runs the agent's plan for it on an
episode-like view (`question`, `options`, `forecast_date` = today, `budget_left` = the share,
`notebook` = the entries tagged with that question), turns the plan's forecast into
`forecast(question_id, ...)`, tags its notebook entries with the question id, and ends the day
with `next_day`. An agent whose `world_refresh` is False forecasts a question once (its forecast
stands); otherwise every listed question is researched again every day.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, Protocol

from forecast_env.agents.base import parse_observation

Plan = Generator[dict, dict, None]


class QuestionAgent(Protocol):
    """An agent that can research one question on an episode-like view."""

    name: str
    world_refresh: bool

    def question_plan(self, view: dict[str, Any]) -> Plan: ...

    def reset(self, *, seed: int | None = None) -> None: ...


class WorldPlayer:
    """Plays `ForecastWorldEnv` with a `QuestionAgent` (see the module docstring)."""

    def __init__(self, agent: QuestionAgent, max_calls_per_question: int = 8) -> None:
        self.agent = agent
        self.name = agent.name
        self.max_calls_per_question = int(max_calls_per_question)
        self.reset()

    def reset(self, *, seed: int | None = None) -> None:
        self.agent.reset(seed=seed)
        self._plan: Generator[dict, dict, None] | None = None
        self._day: Any = None

    async def aact(self, observation: str, info: dict) -> dict:
        return self.act(observation, info)

    def act(self, observation: str, info: dict) -> dict:
        obs = parse_observation(observation, info)
        if self._plan is not None and obs.get("date") == self._day:
            try:
                return self._plan.send(obs)
            except StopIteration:
                pass
        self._day = obs.get("date")  # a new day: a fresh session
        self._plan = self._day_plan(obs)
        return next(self._plan)

    def _day_plan(self, obs: dict[str, Any]) -> Generator[dict, dict, None]:
        done: set[str] = set()
        page_info = obs.get("questions_page") or {}
        listed, pages, page = int(page_info.get("listed", 0)), int(page_info.get("pages", 1)), 1
        while True:
            for q in list(obs.get("questions") or []):
                qid = str(q.get("question_id"))
                if qid in done:
                    continue
                done.add(qid)
                if not self.agent.world_refresh and qid in (obs.get("standing") or {}):
                    continue
                budget = obs.get("budget_left")
                # keep one call for next_day and one per page still to show
                share = (int(budget) - 1 - (pages - page)) // max(1, listed - len(done) + 1) if isinstance(
                    budget, int) else self.max_calls_per_question
                share = min(share, self.max_calls_per_question)
                if share < 1:
                    continue
                obs = yield from self._research(q, obs, share)
            if page >= pages:
                break
            page += 1
            obs = yield {"tool": "list_questions", "args": {"page": page}}
        yield {"tool": "next_day", "args": {}}

    def _research(self, q: Mapping[str, Any], obs: dict[str, Any], share: int) -> Generator[dict, dict, dict]:
        """Run the agent's plan for one question within `share` calls; returns the last observation."""
        qid = str(q["question_id"])
        notebook = [e for e in obs.get("notebook") or [] if qid in (e.get("question_ids") or [])]
        view = {"question_id": qid, "question": q.get("question"), "options": list(q.get("options") or []),
                "forecast_date": obs.get("date"), "step": None, "budget_left": share, "notebook": notebook,
                "tool_result": None, "error": None}
        plan = self.agent.question_plan(view)
        action = next(plan)
        used = 0
        while True:
            used += 1
            tool = action.get("tool")
            if tool == "forecast":
                args = {"question_id": qid, "probabilities": action["args"]["probabilities"]}
                return (yield {**action, "args": args})
            if tool == "notebook_add":
                action = {**action, "args": {**action["args"], "question_ids": [qid]}}
            obs = yield action
            try:
                action = plan.send({**view, "tool_result": obs.get("tool_result"), "error": obs.get("error"),
                                    "budget_left": share - used})
            except StopIteration:
                return obs
