"""World mode (docs/design.md §5 "World mode"): every question of a split on one shared clock."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forecast_env import scoring
from forecast_env.envs import tools
from forecast_env.envs.base import BaseEnv
from forecast_env.envs.notebook import Notebook
from forecast_env.envs.observation import render_observation
from forecast_env.envs.records import args_json, forecast_row
from forecast_env.envs.text_space import UnicodeText
from forecast_env.envs.world import World, WorldQuestion, load_world
from forecast_env.errors import ForecastEnvError

if TYPE_CHECKING:
    from forecast_env.retrieval import Searcher

NOT_LISTED = "{tool}: no question {qid!r} is listed today; use a question_id from today's list"


class ForecastWorldEnv(BaseEnv):
    """
    ## Description

    One episode is one shared clock over the calendar of a split (its window in `events.splits`,
    narrowed by `start`/`end`). Each day the questions whose forecast grid covers the day are
    listed; the agent searches the news visible that day, reads, keeps one notebook for the whole
    world, and sets standing forecasts on the questions it chooses, then calls `next_day`. At the
    end of each day, every question scheduled that day (its episode-mode forecast dates) is scored
    with its standing forecast, so world and episode numbers are directly comparable.

    ## Action Space

    `UnicodeText(max_action_chars)`: one tool call in any of `ForecastEnv`'s forms. Tools (OpenAI
    specs on `env.unwrapped.tool_specs`):

    | tool                 | arguments                                     | effect                          |
    |----------------------|-----------------------------------------------|---------------------------------|
    | `search`             | `query`, `k`, `mode`                          | hits published <= today         |
    | `open_article`       | `doc_id`                                      | body capped at `article_chars`  |
    | `notebook_add`       | `claim`, `date_observed`, `doc_ids`, `question_ids` (optional) | a ledger entry |
    | `notebook_supersede` | `entry_id`, `reason`                          | marks an entry superseded       |
    | `get_question`       | `question_id`                                 | text, options, description today|
    | `list_questions`     | `page`                                        | shows that page of today's list |
    | `forecast`           | `question_id`, `probabilities`                | sets the standing forecast      |
    | `next_day`           |                                               | ends today                      |

    A question that is not listed today (unknown, not yet open, gone) gets one message whatever
    the reason and changes nothing. Other invalid actions are as in `ForecastEnv`.

    ## Observation Space

    `UnicodeText(max_observation_chars)`: JSON with `date` (ISO), `day` and `days_total`,
    `questions` (the current page of today's list: `question_id`, `question`, `options`; listed in
    order of first listed day, then id), `questions_page` (`page`, `pages`, `listed`), `standing`
    (the agent's standing forecast per question on the page), `tool_result`, `error`, `notebook`,
    `budget_left` and `message`. Cut to the cap like `ForecastEnv`'s. `info` carries the same
    content uncut plus `listed` (every listed id), `error_kind`, `tool_specs` (at reset) and, at
    the end, `scores`, `time_weighted_brier`, `question_scores` and `day_scores`. No outcome,
    market price or score ever appears in an observation; which days are scored is not shown.

    ## Rewards

    `reward_mode="episode"`: 0 until the last step, then minus the mean Brier over all scored
    (question, date) rows. `reward_mode="step"`: each day's end returns minus the mean Brier of the
    rows scored that day (0 when none), revealing scores to the trainer.

    ## Scoring

    At the end of day D, each listed question with a scheduled date D is scored like an episode
    forecast (`schema.FORECASTS` rows, step = that date's step) with its standing forecast; with no
    standing forecast the uniform one is recorded with `fallback="no_standing_forecast"`. A question
    cut by `d_known`/`closedTime` stays listed and unscored. Time-weighted Brier: each question's mean
    Brier of its end-of-day standing forecast (uniform when none) over its listed days before the
    cut, then the mean over questions.

    ## Starting State and Episode End

    `reset(seed, options={"rollout": r})` starts the first day with an empty notebook and no
    standing forecasts. The episode ends after the last day's `next_day`. Per day the budget is
    `world_base_calls + world_calls_per_question x listed` calls; spending it ends the day (recorded
    as `budget_exhausted` in the day's row). `memory=False` empties the notebook every day.
    `skip_date(reason)` ends the day for an infrastructure failure: the day's scheduled questions
    without a standing forecast are recorded as missing.

    ## Arguments

    `ForecastWorldEnv(workspace, split="eval", start=None, end=None, config=None, event_ids=None,
    searcher=None, **overrides)`: `config`/`overrides` are `env` config keys (those of
    `ForecastEnv` plus `world_base_calls`, `world_calls_per_question`, `world_page_size`).
    """

    # gymnasium.Env declares `metadata` an instance attribute, so no ClassVar here (mypy: no override)
    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012
    TOOL_NAMES = tools.WORLD_TOOL_NAMES
    WORLD_ARGS = True
    OVER_MESSAGE = "the world is over; call reset() to start again"

    def __init__(self, workspace: str | Path, split: str | None = None, start: str | date | None = None,
                 end: str | date | None = None, config: Mapping[str, Any] | None = None,
                 event_ids: Sequence[str] | None = None, searcher: Searcher | None = None, **overrides: Any) -> None:
        cfg = self._configure(workspace, split, config, overrides)
        if cfg["world_page_size"] < 1 or cfg["world_base_calls"] < 1 or cfg["world_calls_per_question"] < 0:
            raise ForecastEnvError("env.world_page_size and env.world_base_calls must be at least 1 and "
                                   "env.world_calls_per_question at least 0")
        if cfg["show_market"]:
            raise ForecastEnvError("env.show_market is an episode-mode ablation; world mode has no previous-day "
                                   "market view: set show_market=false")
        self.world: World = load_world(self.workspace, self.split, start, end, event_ids)
        self.days = self.world.days
        self._by_id = {q.question_id: q for q in self.world.questions}
        self._listed_by_day = [self.world.listed(d) for d in self.days]
        self._hold_searcher(searcher)
        self.memory = bool(cfg["memory"])
        self.tool_specs = tools.world_tool_specs(cfg["max_k"], cfg["search_k"], cfg["search_mode"])
        self.observation_space = UnicodeText(cfg["max_observation_chars"])
        self.action_space = UnicodeText(cfg["max_action_chars"])
        self.rollout = 0
        self._reset_state()

    @property
    def world_id(self) -> str:
        """The id a world run's rows carry where an event id would stand (tool calls, notebook)."""
        return self.world.world_id

    @property
    def today(self) -> date:
        return self.days[min(self._t, len(self.days) - 1)]

    @property
    def listed(self) -> list[WorldQuestion]:
        """Today's listed questions, in listing order."""
        return self._listed_by_day[min(self._t, len(self.days) - 1)]

    @property
    def budget(self) -> int:
        """Today's call budget."""
        return self.config["world_base_calls"] + self.config["world_calls_per_question"] * len(self.listed)

    # -- gymnasium API ------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        options = dict(options or {})
        if "rollout" in options:
            self.rollout = int(options["rollout"])
        self._reset_state()
        obs, info = self._observe(None, None, None, None)
        info["tool_specs"] = self.tool_specs
        self._steps.append({"observation": obs, "action": None, "reward": 0.0, "terminated": False})
        return obs, info

    # -- the hooks of BaseEnv's step() and skip_date() ------------------------------------------

    def _finished(self) -> bool:
        return self._done

    def _call_step(self) -> int:
        return self._t + 1  # the day's number

    def _row_id(self) -> str:
        return self.world_id

    def _spend_budget(self, tool: str | None, ok: bool, reward: float, message: str | None) -> tuple[float, str | None]:
        """Every call but a successful `next_day` counts against today's budget; spending it ends the day."""
        if ok and tool == "next_day":
            return reward, message
        self._calls_today[tool] = self._calls_today.get(tool, 0) + 1
        if self._calls < self.budget:
            return reward, message
        day = self.today
        reward = self._end_day(budget_exhausted=True)
        return reward, f"the call budget of {day.isoformat()} is spent: the day is over" + self._advance_notice()

    def _skip(self, reason: str) -> tuple[float, str | None]:
        """Today ends: its scheduled questions without a standing forecast are recorded as missing."""
        day = self.today
        reward = self._end_day(skipped=reason)
        return reward, f"{day.isoformat()} was skipped ({reason[:200]})" + self._advance_notice()

    def _final_info(self) -> dict[str, Any]:
        return self.scores()

    # -- the record ---------------------------------------------------------------------------

    def episode_log(self) -> dict[str, Any]:
        """The recorded world: forecasts (scored rows), tool calls, the notebook at the end, the
        trajectory, and the per-day and per-question score rows."""
        return {"event_id": self.world_id, "rollout": self.rollout, "mode": "world",
                "forecasts": list(self._forecasts), "tool_calls": list(self._tool_calls),
                "notebook": [{"event_id": self.world_id, "rollout": self.rollout, **r}
                             for r in self._notebook_snapshot], "steps": list(self._steps),
                "days": list(self._day_rows), "questions": self._question_rows()}

    def scores(self) -> dict[str, Any]:
        """`scores` (per scored row), `time_weighted_brier`, `question_scores` and `day_scores`."""
        rows = [{k: r[k] for k in ("event_id", "step", "forecast_date", "brier", "accuracy", "log_vs_market",
                                   "log_vs_market_close", "fallback")} for r in self._forecasts if not r["missing"]]
        questions = self._question_rows()
        tw = [q["time_weighted_brier"] for q in questions if q["time_weighted_brier"] is not None]
        return {"scores": rows, "time_weighted_brier": float(np.mean(tw)) if tw else None,
                "question_scores": questions, "day_scores": list(self._day_rows)}

    # -- internals ----------------------------------------------------------------------------

    def _reset_state(self) -> None:
        self._t = 0
        self._done = False
        self._calls = 0
        self._call_index = -1
        self._calls_today: dict[str | None, int] = {}
        self._page = 1
        self._notebook = Notebook(self.config["max_claim_chars"])
        self._standing: dict[str, tuple[scoring.Report, str | None, date]] = {}  # id -> (report, raw, set on)
        self._forecasts: list[dict[str, Any]] = []
        self._tool_calls: list[dict[str, Any]] = []
        self._steps: list[dict[str, Any]] = []
        self._day_rows: list[dict[str, Any]] = []
        self._daily_brier: dict[str, list[float]] = {}
        self._days_standing: dict[str, int] = {}
        self._notebook_snapshot: list[dict[str, Any]] = []

    def _question(self, qid: str, tool: str) -> WorldQuestion:
        q = self._by_id.get(qid)
        if q is None or not q.listed_on(self.today):
            raise tools.ActionError(NOT_LISTED.format(tool=tool, qid=qid[:80]))
        return q

    def _run_tool(self, tool: str, args: dict[str, Any]) -> tuple[Any, float, str | None]:
        today = self.today
        if tool == "search":
            return tools.run_search(self.searcher, today, args["query"], args["k"], args["mode"]), 0.0, None
        if tool == "open_article":
            return tools.run_open_article(self.searcher, today, args["doc_id"], self.config["article_chars"]), 0.0, None
        if tool == "notebook_add":
            for qid in args["question_ids"]:
                self._question(qid, "notebook_add")
            entry = self._notebook.add(args["claim"], args["date_observed"], args["doc_ids"], self._t + 1,
                                       question_ids=args["question_ids"])
            return {"added": entry.to_dict()}, 0.0, None
        if tool == "notebook_supersede":
            return {"superseded": self._notebook.supersede(args["entry_id"], args["reason"]).to_dict()}, 0.0, None
        if tool == "get_question":
            q = self._question(args["question_id"], tool)
            return {**q.compact(), "description": q.episode.description_on(today), "listed_from": q.first_day,
                    "listed_until": q.last_day, "standing": self._standing_probs(q)}, 0.0, None
        if tool == "list_questions":
            pages = self._pages()
            if args["page"] > pages:
                raise tools.ActionError(f"list_questions: page {args['page']} does not exist; today's list has "
                                        f"{pages} page(s)")
            self._page = args["page"]
            return {"page": self._page, "pages": pages}, 0.0, None
        if tool == "forecast":
            q = self._question(args["question_id"], tool)
            report = scoring.normalize_report(args["probabilities"], q.episode.options)
            self._standing[q.question_id] = (report, args_json(args["probabilities"]), today)
            receipt = {"question_id": q.question_id, "standing": dict(zip(q.episode.options,
                                                                         report.aligned(q.episode.options)))}
            message = None
            if report.fallback:
                receipt["fallback"] = report.fallback
                message = f"the report was unusable ({report.fallback}): the uniform forecast stands"
            return receipt, 0.0, message
        day = today
        reward = self._end_day()
        return {"day_ended": day}, reward, f"{day.isoformat()} is over" + self._advance_notice()

    def _end_day(self, budget_exhausted: bool = False, skipped: str | None = None) -> float:
        """Score today's scheduled questions, record the day, move the clock; the step-mode reward."""
        today, listed = self.today, self.listed
        counts = {"n_calls": self._calls, "n_search": self._calls_today.get("search", 0),
                  "n_open": self._calls_today.get("open_article", 0)}
        briers = []
        for q in listed:
            standing = self._standing.get(q.question_id)
            report = standing[0] if standing else scoring.uniform_report(q.episode.options, "no_standing_forecast")
            if q.cut is None or today < q.cut:
                b = scoring.brier(report, q.episode.label, q.episode.options)
                self._daily_brier.setdefault(q.question_id, []).append(b)
                self._days_standing[q.question_id] = self._days_standing.get(q.question_id, 0) + bool(standing)
            step = q.scheduled.get(today)
            if step is None:
                continue
            d = q.episode.dates[step - 1]
            if skipped is not None and standing is None:
                row = forecast_row(q.episode, d, self.rollout, None, json.dumps({"skipped": skipped}),
                                   self.config["log_eps"], counts)
            else:
                row = forecast_row(q.episode, d, self.rollout, report, standing[1] if standing else None,
                                   self.config["log_eps"], counts)
                briers.append(row["brier"])
            row.update(memory=self.memory, show_market=False, hidden_flags=list(self.hidden))
            self._forecasts.append(row)
        self._day_rows.append({
            "date": today, "day": self._t + 1, "listed": len(listed), "standing": sum(
                q.question_id in self._standing for q in listed), "scored": len(briers),
            "brier": float(np.mean(briers)) if briers else None, "n_calls": self._calls,
            "budget": self.budget, "budget_exhausted": budget_exhausted, "skipped": skipped})
        self._t += 1
        self._calls, self._calls_today, self._page = 0, {}, 1
        if self._t >= len(self.days):
            self._done = True
            self._notebook_snapshot = self._notebook.snapshot_rows(self._t)
        else:
            gone = [qid for qid in self._standing if not self._by_id[qid].listed_on(self.today)]
            for qid in gone:
                del self._standing[qid]
            if not self.memory:
                self._notebook = Notebook(self.config["max_claim_chars"])
        if self.config["reward_mode"] == "step" and briers:
            return -float(np.mean(briers))
        return 0.0

    def _advance_notice(self) -> str:
        if self._done:
            return "; the world is finished"
        return f"; today is {self.today.isoformat()} ({len(self.listed)} questions listed)"

    def _question_rows(self) -> list[dict[str, Any]]:
        out = []
        for q in self.world.questions:
            rows = [r for r in self._forecasts if r["event_id"] == q.question_id and not r["missing"]]
            daily = self._daily_brier.get(q.question_id, [])
            out.append({"event_id": q.question_id, "first_day": q.first_day, "last_day": q.last_day,
                        "cut": q.cut, "scored": len(rows),
                        "brier": float(np.mean([r["brier"] for r in rows])) if rows else None,
                        "eligible_days": len(daily), "days_with_standing": self._days_standing.get(q.question_id, 0),
                        "time_weighted_brier": float(np.mean(daily)) if daily else None})
        return out

    def _pages(self) -> int:
        return max(1, math.ceil(len(self.listed) / self.config["world_page_size"]))

    def _standing_probs(self, q: WorldQuestion) -> dict[str, float] | None:
        standing = self._standing.get(q.question_id)
        return dict(zip(q.episode.options, standing[0].aligned(q.episode.options))) if standing else None

    def _observe(self, result: Any, error: str | None, message: str | None,
                 kind: str | None) -> tuple[str, dict]:
        listed = [] if self._done else self.listed
        size = self.config["world_page_size"]
        page = min(self._page, self._pages())
        shown = listed[(page - 1) * size: page * size]
        content: dict[str, Any] = {
            "date": self.today, "day": min(self._t + 1, len(self.days)), "days_total": len(self.days),
            "questions": [q.compact() for q in shown],
            "questions_page": {"page": page, "pages": self._pages(), "listed": len(listed)},
            "standing": {q.question_id: p for q in shown if (p := self._standing_probs(q)) is not None},
            "tool_result": result, "error": error, "notebook": self._notebook.to_list(),
            "budget_left": 0 if self._done else self.budget - self._calls, "message": message,
        }
        obs = render_observation(content, self.config["max_observation_chars"])
        info = dict(content)
        info.update(listed=[q.question_id for q in listed], error_kind=kind, terminated=self._done,
                    world_id=self.world_id)
        return obs, info
