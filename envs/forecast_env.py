"""The forecasting environment (docs/design.md §5): one resolved event replayed over its forecast dates.

The shared `step()` and the searcher live in `base.py`, the text space in `text_space.py`,
observation rendering in `observation.py`, the episode records in `episodes.py`, tool parsing and
the retrieval tools in `tools.py`; this module adds the episode's tools and its budget.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forecast_env import scoring
from forecast_env.envs import tools
from forecast_env.envs.base import ERROR_KINDS, BaseEnv
from forecast_env.envs.episodes import EventEpisode, ForecastDate, Quote, load_episodes
from forecast_env.envs.notebook import Notebook
from forecast_env.envs.observation import render_observation
from forecast_env.envs.records import args_json, forecast_row
from forecast_env.envs.text_space import UnicodeText, dump_observation
from forecast_env.errors import EventsError, ForecastEnvError

if TYPE_CHECKING:
    from forecast_env.retrieval import Searcher

__all__ = ["ERROR_KINDS", "EventEpisode", "ForecastDate", "ForecastEnv", "Quote", "UnicodeText", "dump_observation",
           "load_episodes"]


class ForecastEnv(BaseEnv):
    """
    ## Description

    One episode replays one resolved event (a binary or multi-option Polymarket question, or an
    imported question) over its `T_Q` scheduled forecast dates (docs/design.md §4). On each date the
    agent may search the frozen news corpus as it stood on that date, read articles, keep an
    evidence notebook, and must report a probability for every offered option. The report is scored
    against the realized outcome (multiclass Brier, tie accuracy) and the market's belief that day
    (log score vs. market), then the episode moves to the next date.

    ## Action Space

    `UnicodeText(max_action_chars)`: a JSON string, or (not in the space, but accepted) the parsed
    object, of one tool call: `{"tool": name, "args": {...}}`, or an OpenAI-style tool call
    (`{"type": "function", "function": {"name": ..., "arguments": "<json>"}}`, `{"name": ...,
    "arguments": ...}`, or a one-element list of those). An optional `"telemetry"` mapping
    (`prompt_tokens`, `completion_tokens`, `latency_ms`, `cost_usd`) is stripped and recorded on the
    tool-call row. Tools (OpenAI function specs on `env.unwrapped.tool_specs`):

    | tool                 | arguments                                    | effect                         |
    |----------------------|----------------------------------------------|--------------------------------|
    | `search`             | `query`, `k`=search_k (<= max_k), `mode`     | hits published <= the date     |
    | `open_article`       | `doc_id`                                     | body capped at `article_chars` |
    | `notebook_add`       | `claim`, `date_observed`, `doc_ids`          | appends a ledger entry         |
    | `notebook_supersede` | `entry_id`, `reason`                         | marks an entry superseded      |
    | `forecast`           | `probabilities` (mapping or aligned list)    | scores, advances one date      |

    The forecast date is held by the environment and injected into every tool; an argument a
    tool does not declare (`as_of`, `date`, ...) makes the action invalid.

    **Invalid actions** (not JSON, unknown tool, missing/unknown/wrongly typed arguments, a doc id
    that is unknown, hidden or published after the date, an unknown notebook entry) return an
    observation whose `error` says what was wrong; they count against the call budget and never
    raise. **Forecast contents**: once `probabilities` is a mapping or a list, the forecast is
    accepted and its contents are scored by docs/design.md §6: an unusable report (NaN or infinite
    entries, non-numeric values, no positive mass, a list of the wrong length) is scored as the
    uniform forecast with the reason in the `fallback` column, exactly as the runner's scoring
    would; the observation says so. A `probabilities` of another type is an invalid action.

    ## Observation Space

    `UnicodeText(max_observation_chars)`: a JSON object with the keys `question`, `description`
    (with text appended after the date cut), `options` (offered on the date), `forecast_date`
    (ISO), `step` (1-based), `steps_total`, `tool_result` (hits, article, notebook entry or
    forecast receipt, else null), `error` (null or a message), `notebook` (the ledger entries),
    `budget_left` (tool calls left on this date) and `message` (notices such as a truncation or an
    exhausted budget). When the text would exceed `max_observation_chars`, the tool result is cut
    first (article body, then hits), then the oldest notebook entries, then the description, and
    `message` says what was cut. `info` carries the same content uncut and structured (dates as
    `datetime.date`, hits as dicts with `day`), plus `event_id`, `tool_specs` (at reset),
    `error_kind` (None, `invalid_action`, `tool_failed`, or `internal` for an error inside the
    environment itself, which is a bug) and `scores` (at the end). The outcome and market prices never appear; the ablation
    `show_market=True` adds `market_previous_day` (the previous day's belief per offered option, null
    where unpriced) and is recorded on every forecast row.

    ## Rewards

    `reward_mode="episode"` (default): 0 on every step except the last, whose reward is the negative
    mean Brier over the episode's scored dates (fallbacks included, missing dates excluded; 0 if
    none was scored); `info["scores"]` then lists per date `step`, `forecast_date`, `brier`,
    `accuracy`, `log_vs_market`, `log_vs_market_close`, `fallback`. The log score vs. market is
    taken against the label's day-mean price and against its last price of the day. `reward_mode="step"`: each forecast (or budget
    fallback) returns `-brier` at once; this reveals scores to the trainer during the episode.

    ## Starting State

    `reset(seed, options={"event_id": ..., "rollout": ...})` starts the named event, or the next
    event of a seeded permutation of the split's events (a new seed draws a new permutation;
    resets without a seed continue it). `options["step"]` starts at that scheduled step instead of
    the first (one (event, forecast date) alone, the training export's unit); the episode then
    records only the dates from there on. The first date has a full budget and, memory on or off, an
    empty notebook. One session per forecast date: what an agent may carry from one date to the
    next is the notebook (memory on) and nothing else; the agents of this package restart their
    own state at every date, and a runner builds a fresh agent per episode.

    ## Episode End

    Terminates after the last date's forecast (or fallback, or `skip_date`). Never truncated.
    `skip_date(reason)` (for the runner, when the agent's infrastructure failed) records the date as
    *missing* (never scored) and advances. `episode_log()` returns the recorded forecasts, tool
    calls, notebook snapshots (end of each date) and the trajectory (`steps[0]` is the reset
    observation with action None).

    ## Arguments

    `ForecastEnv(workspace, split="eval", config=None, event_ids=None, searcher=None, **overrides)`:
    `config` and `overrides` are keys of the `env` config section (`configs/env.yaml`:
    memory, max_calls_per_date, max_observation_chars, search_k, max_k, search_mode, article_chars,
    reward_mode, show_market, hide_leak_flagged, hide_market_quotes, log_eps, max_action_chars,
    max_claim_chars). `hide_leak_flagged` and `hide_market_quotes` (both true by default) hide
    leak-flagged and market-quoting articles from search and open_article; `hide_market_quotes=False`
    is an ablation, recorded on every forecast row (`hidden_flags`) like `show_market`.
    `searcher` is an open `forecast_env.retrieval.Searcher` hiding exactly that set (the caller
    closes it); by default the environment opens one at the first search, and `close()` closes it. Budget: `max_calls_per_date` calls per date, forecast included;
    when they are spent without a forecast, the uniform forecast is recorded with
    `fallback="budget_exhausted"` and the next date begins.

    ## Vector environments

    Works under `gymnasium.vector.SyncVectorEnv` and `AsyncVectorEnv(..., shared_memory=False)`
    (batched observations are tuples of strings). Gymnasium copies Text shared memory once at
    creation, so `shared_memory=True` would return stale text: this space refuses it with a
    message saying to pass `shared_memory=False`. Each worker opens its own `Searcher` (memory-mapped
    index, shared page cache) at its first search.
    """

    # gymnasium.Env declares `metadata` an instance attribute, so no ClassVar here (mypy: no override)
    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        workspace: str | Path,
        split: str | None = None,
        config: Mapping[str, Any] | None = None,
        event_ids: Sequence[str] | None = None,
        searcher: Searcher | None = None,
        **overrides: Any,
    ) -> None:
        cfg = self._configure(workspace, split, config, overrides)
        if cfg["max_calls_per_date"] < 1:
            raise ForecastEnvError("env.max_calls_per_date must be at least 1")
        self.episodes = load_episodes(self.workspace, self.split, event_ids)
        self._by_id = {e.event_id: e for e in self.episodes}
        self._hold_searcher(searcher)
        self.memory = bool(cfg["memory"])
        self.show_market = bool(cfg["show_market"])
        self.tool_specs = tools.tool_specs(cfg["max_k"], cfg["search_k"], cfg["search_mode"])
        self.observation_space = UnicodeText(cfg["max_observation_chars"])
        self.action_space = UnicodeText(cfg["max_action_chars"])
        self.rollout = 0
        self._order: np.ndarray | None = None
        self._cursor = 0
        self._ep: EventEpisode | None = None
        self._reset_state()

    # -- public helpers -----------------------------------------------------------------------

    @property
    def event_ids(self) -> list[str]:
        return [e.event_id for e in self.episodes]

    @property
    def current_event(self) -> EventEpisode | None:
        return self._ep

    def episode_log(self) -> dict[str, Any]:
        """The recorded episode: forecasts, tool_calls, notebook snapshots and the trajectory."""
        return {"event_id": self._ep.event_id if self._ep else None, "rollout": self.rollout,
                "forecasts": list(self._forecasts), "tool_calls": list(self._tool_calls),
                "notebook": list(self._notebook_rows), "steps": list(self._steps)}

    # -- gymnasium API ------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        options = dict(options or {})
        if "rollout" in options:
            self.rollout = int(options["rollout"])
        event_id = options.get("event_id")
        if event_id is not None:
            if event_id not in self._by_id:
                raise EventsError(f"reset: event {event_id!r} is not in split {self.split!r} of {self.workspace}")
            self._ep = self._by_id[event_id]
        else:
            if seed is not None or self._order is None or self._cursor >= len(self._order):
                self._order = self.np_random.permutation(len(self.episodes))
                self._cursor = 0
            self._ep = self.episodes[int(self._order[self._cursor])]
            self._cursor += 1
        self._reset_state()
        if options.get("step") is not None:
            steps = [d.step for d in self._ep.dates]
            if options["step"] not in steps:
                raise EventsError(f"reset: event {self._ep.event_id!r} has no forecast date with step "
                                  f"{options['step']!r}; its steps are {steps[0]}..{steps[-1]}")
            self._t = steps.index(options["step"])
        obs, info = self._observe(None, None, None, None)
        info["tool_specs"] = self.tool_specs
        self._steps.append({"observation": obs, "action": None, "reward": 0.0, "terminated": False})
        return obs, info

    # -- the hooks of BaseEnv's step() and skip_date() ------------------------------------------

    def _finished(self) -> bool:
        return self._ep is None or self._done

    def _call_step(self) -> int:
        return self._date.step

    def _row_id(self) -> str:
        assert self._ep is not None
        return self._ep.event_id

    def _spend_budget(self, tool: str | None, ok: bool, reward: float, message: str | None) -> tuple[float, str | None]:
        """A date whose calls are spent without a forecast gets the uniform forecast, and the next date begins."""
        if (ok and tool == "forecast") or self._calls < self.config["max_calls_per_date"]:
            return reward, message
        day = self._date.day
        reward = self._record_forecast(None, budget_exhausted=True)
        message = (f"call budget of {self.config['max_calls_per_date']} for {day.isoformat()} is spent "
                   "without a forecast: the uniform forecast was recorded")
        return reward, message + self._advance()

    def _skip(self, reason: str) -> tuple[float, str | None]:
        """The current date is recorded as missing and the next one begins."""
        day = self._date.day
        self._record_forecast(None, missing=True, raw=json.dumps({"skipped": reason}))
        return 0.0, f"{day.isoformat()} was skipped ({reason[:200]}): recorded as missing" + self._advance()

    def _final_info(self) -> dict[str, Any]:
        return {"scores": self._scores()}

    # -- internals ----------------------------------------------------------------------------

    def _reset_state(self) -> None:
        self._t = 0
        self._calls = 0
        self._call_index = -1
        self._n_search = 0
        self._n_open = 0
        self._done = False
        self._notebook = Notebook(self.config["max_claim_chars"])
        self._forecasts: list[dict[str, Any]] = []
        self._tool_calls: list[dict[str, Any]] = []
        self._notebook_rows: list[dict[str, Any]] = []
        self._steps: list[dict[str, Any]] = []

    @property
    def _date(self) -> ForecastDate:
        assert self._ep is not None
        return self._ep.dates[min(self._t, len(self._ep.dates) - 1)]

    def _run_tool(self, tool: str, args: dict[str, Any]) -> tuple[Any, float, str | None]:
        d = self._date
        if tool == "search":
            out = tools.run_search(self.searcher, d.day, args["query"], args["k"], args["mode"])
            self._n_search += 1
            return out, 0.0, None
        if tool == "open_article":
            out = tools.run_open_article(self.searcher, d.day, args["doc_id"], self.config["article_chars"])
            self._n_open += 1
            return out, 0.0, None
        if tool == "notebook_add":
            entry = self._notebook.add(args["claim"], args["date_observed"], args["doc_ids"], d.step)
            return {"added": entry.to_dict()}, 0.0, None
        if tool == "notebook_supersede":
            entry = self._notebook.supersede(args["entry_id"], args["reason"])
            return {"superseded": entry.to_dict()}, 0.0, None
        probs = args["probabilities"]
        reward = self._record_forecast(probs)
        row = self._forecasts[-1]
        receipt = {"recorded": True, "forecast_date": d.day, "step": d.step,
                   "probabilities": dict(zip(d.options, row["probs"]))}
        message = None
        if row["fallback"]:
            receipt["fallback"] = row["fallback"]
            message = f"the report was unusable ({row['fallback']}): the uniform forecast was recorded"
        advance = self._advance()
        message = (message + advance) if message else (advance.lstrip("; ") or None)
        return receipt, reward, message

    def _record_forecast(self, probs: Any, budget_exhausted: bool = False, missing: bool = False,
                         raw: str | None = None) -> float:
        """Score and record the current date's report; returns the step-mode reward."""
        ep, d = self._ep, self._date
        assert ep is not None
        counts = {"n_calls": self._calls, "n_search": self._n_search, "n_open": self._n_open}
        if missing:
            row = forecast_row(ep, d, self.rollout, None, raw, self.config["log_eps"], counts)
        else:
            if budget_exhausted:
                report, raw = scoring.uniform_report(d.options, "budget_exhausted"), None
            else:
                report, raw = scoring.normalize_report(probs, d.options), args_json(probs)
            row = forecast_row(ep, d, self.rollout, report, raw, self.config["log_eps"], counts)
        row.update(memory=self.memory, show_market=self.show_market, hidden_flags=list(self.hidden))
        self._forecasts.append(row)
        return -row["brier"] if self.config["reward_mode"] == "step" and row["brier"] is not None else 0.0

    def _advance(self) -> str:
        """Close the current date (notebook snapshot) and move to the next; returns a notice suffix."""
        ep = self._ep
        assert ep is not None
        for r in self._notebook.snapshot_rows(self._date.step):
            self._notebook_rows.append({"event_id": ep.event_id, "rollout": self.rollout, **r})
        self._t += 1
        self._calls = 0
        self._n_search = 0
        self._n_open = 0
        if self._t >= len(ep.dates):
            self._done = True
            return "; the episode is finished"
        if not self.memory:
            self._notebook = Notebook(self.config["max_claim_chars"])
        return f"; now forecasting for {self._date.day.isoformat()} (step {self._date.step})"

    def _scores(self) -> list[dict[str, Any]]:
        return [{k: r[k] for k in ("step", "forecast_date", "brier", "accuracy", "log_vs_market",
                                   "log_vs_market_close", "fallback")}
                for r in self._forecasts if not r["missing"]]

    def _market_previous_day(self) -> dict[str, float | None]:
        ep, d = self._ep, self._date
        assert ep is not None
        prev = d.day - timedelta(days=1)
        return {o: ep.quote(prev, o).belief for o in d.options}

    def _observe(self, result: Any, error: str | None, message: str | None, kind: str | None) -> tuple[str, dict]:
        ep, d = self._ep, self._date
        assert ep is not None
        content: dict[str, Any] = {
            "question": ep.question,
            "description": d.description,
            "options": list(d.options),
            "forecast_date": d.day,
            "step": d.step,
            "steps_total": d.steps_total,
            "tool_result": result,
            "error": error,
            "notebook": self._notebook.to_list(),
            "budget_left": 0 if self._done else self.config["max_calls_per_date"] - self._calls,
            "message": message,
        }
        if self.show_market:
            content["market_previous_day"] = self._market_previous_day()
        obs = render_observation(content, self.config["max_observation_chars"])
        info = dict(content)
        info["event_id"] = ep.event_id
        info["terminated"] = self._done
        info["error_kind"] = kind
        return obs, info

