"""The forecasting environment (SPEC section 5): one resolved event replayed over its forecast dates."""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from forecast_env.envs import tools
from forecast_env.envs.notebook import Notebook, NotebookError
from gymnasium import spaces
from gymnasium.error import CustomSpaceError
from gymnasium.spaces.space import Space
from gymnasium.vector.utils import create_shared_memory

from forecast_env import scoring
from forecast_env.config import load_config
from forecast_env.errors import EventsError, ForecastEnvError
from forecast_env.store import Workspace

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# the observation / action space: any printable text
# ---------------------------------------------------------------------------------------------

#: Characters outside the space's charset (C0/C1 controls, lone surrogates, astral planes); in an
#: observation they only occur inside JSON strings and are written as JSON \u escapes instead.
_OUTSIDE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\U00010000-\U0010ffff]")
_CHARSET_CACHE: dict[str, Any] = {}


def _charset() -> dict[str, Any]:
    if not _CHARSET_CACHE:
        chars = tuple(chr(c) for c in range(0x20, 0x10000) if not (0x7F <= c <= 0x9F or 0xD800 <= c <= 0xDFFF))
        _CHARSET_CACHE.update(
            list=chars,
            set=frozenset(chars),
            index={ch: np.int32(i) for i, ch in enumerate(chars)},
            str="".join(sorted(chars)),
        )
    return _CHARSET_CACHE


class UnicodeText(spaces.Text):
    """`spaces.Text` over every printable character of the Basic Multilingual Plane.

    `contains` is a single regex scan; the charset tables are built once per process and shared by
    every instance (copies included), so many environments and vector batches stay cheap. Being a
    real `Text` space, it flattens and travels through AsyncVectorEnv shared memory.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None):
        cs = _charset()
        self.min_length = int(min_length)
        self.max_length = int(max_length)
        self._char_set = cs["set"]
        self._char_list = cs["list"]
        self._char_index = cs["index"]
        self._char_str = cs["str"]
        Space.__init__(self, dtype=str, seed=seed)

    def contains(self, x: Any) -> bool:
        return (isinstance(x, str) and self.min_length <= len(x) <= self.max_length
                and _OUTSIDE.search(x) is None)

    def __deepcopy__(self, memo: dict) -> UnicodeText:
        new = UnicodeText(self.max_length, min_length=self.min_length)
        new._np_random = deepcopy(self._np_random, memo)
        return new

    def __reduce__(self):  # pickles as its parameters, not its 63k-character tables
        return (_rebuild_text, (self.max_length, self.min_length, self._np_random))

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


@create_shared_memory.register(UnicodeText)
def _no_shared_memory(space: UnicodeText, n: int = 1, ctx: Any = None) -> Any:
    # Gymnasium reads Text shared memory into a tuple once, at creation: later steps would return
    # stale observations. Refuse, so that AsyncVectorEnv says to pass shared_memory=False.
    raise CustomSpaceError("ForecastEnv observations are text: use AsyncVectorEnv(..., shared_memory=False)")


def _rebuild_text(max_length: int, min_length: int, rng: np.random.Generator | None) -> UnicodeText:
    space = UnicodeText(max_length, min_length=min_length)
    space._np_random = rng
    return space


def _escape_outside(m: re.Match) -> str:
    c = ord(m.group())
    if c > 0xFFFF:
        c -= 0x10000
        return f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}"
    return f"\\u{c:04x}"


def dump_observation(obj: Any) -> str:
    """JSON text of `obj` whose characters all lie in `UnicodeText`'s charset."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    return _OUTSIDE.sub(_escape_outside, text)


# ---------------------------------------------------------------------------------------------
# event data, precomputed once per environment
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForecastDate:
    step: int
    steps_total: int
    day: date
    options: tuple[str, ...]
    description: str  # as of `day`


@dataclass(frozen=True)
class EventEpisode:
    """What one episode needs: question, dates, label, and the beliefs of the days it looks up."""

    event_id: str
    question: str
    options: tuple[str, ...]
    type: str
    category: str | None
    label: str
    dates: tuple[ForecastDate, ...]
    beliefs: dict[date, dict[str, tuple[float | None, float | None]]]  # day -> option -> (price, belief)


def _cut_description(description: str, day: date) -> str:
    try:
        from forecast_env.envs.events import description_as_of
    except ImportError:
        return description
    return description_as_of(description, day)


def _load_tables(ws: Workspace) -> tuple[Any, Any, Any]:
    """The events, schedule and beliefs tables (polars) of a workspace."""
    import polars as pl

    try:
        from forecast_env.envs.events import load_events
    except ImportError:
        load_events = None
    if load_events is not None:
        data = load_events(ws.root)
        return data.events, data.schedule, data.beliefs
    tables = []
    for name in ("events", "schedule", "beliefs"):
        path = ws.require(ws.events_table(name), f"events table {name!r}", "forecast-env events build")
        tables.append(pl.read_parquet(path))
    return tables[0], tables[1], tables[2]


def load_episodes(workspace: str | Path, split: str, event_ids: Sequence[str] | None = None) -> list[EventEpisode]:
    """The episodes of one split (`train`, `eval` or `all`), sorted by event id."""
    import polars as pl

    ws = Workspace.at(workspace)
    events, schedule, beliefs = _load_tables(ws)
    if split != "all":
        events = events.filter(pl.col("split") == split)
    if event_ids is not None:
        wanted = list(dict.fromkeys(event_ids))
        known = set(events["event_id"].to_list())
        unknown = [e for e in wanted if e not in known]
        if unknown:
            raise EventsError(f"{ws.root}: event id(s) {', '.join(unknown[:5])} are not in split {split!r}; "
                              "list them with `forecast-env events list` or pass split='all'")
        events = events.filter(pl.col("event_id").is_in(wanted))
    ids = set(events["event_id"].to_list())
    schedule = schedule.filter(pl.col("event_id").is_in(ids)).sort(["event_id", "step"])
    by_event_sched = {k[0]: df for k, df in schedule.group_by(["event_id"])} if schedule.height else {}
    needed: set[tuple[str, date]] = set()
    for row in schedule.select("event_id", "forecast_date").iter_rows():
        needed.add((row[0], row[1]))
        needed.add((row[0], row[1] - timedelta(days=1)))
    belief_map: dict[str, dict[date, dict[str, tuple[float | None, float | None]]]] = {}
    if beliefs.height and needed:
        keys = pl.DataFrame({"event_id": [e for e, _ in needed], "day": [d for _, d in needed]},
                            schema={"event_id": pl.String, "day": pl.Date})
        sub = beliefs.join(keys, on=["event_id", "day"], how="inner")
        for ev, day, opt, price, belief in sub.select("event_id", "day", "option", "price", "belief").iter_rows():
            belief_map.setdefault(ev, {}).setdefault(day, {})[opt] = (_num(price), _num(belief))
    out = []
    for row in events.sort("event_id").iter_rows(named=True):
        ev = row["event_id"]
        sched = by_event_sched.get(ev)
        if sched is None or sched.height == 0:
            continue
        desc = row.get("description") or ""
        dates = tuple(
            ForecastDate(int(s["step"]), int(s["steps_total"]), s["forecast_date"],
                         tuple(s["options"] or row["options"]), _cut_description(desc, s["forecast_date"]))
            for s in sched.iter_rows(named=True)
        )
        out.append(EventEpisode(ev, row.get("question") or "", tuple(row["options"] or ()), row.get("type") or "",
                                row.get("category"), row["label"], dates, belief_map.get(ev, {})))
    if not out:
        raise EventsError(f"{ws.root}: no events with a forecast schedule in split {split!r}; build events with "
                          "`forecast-env events build` or choose another split (train, eval, all)")
    return out


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _jsonable(action: Any, cap: int) -> Any:
    """The raw action as something JSON can write (strings capped at `cap` characters)."""
    if isinstance(action, str):
        return action if len(action) <= cap else action[:cap] + f"...[{len(action) - cap} more characters]"
    try:
        text = json.dumps(action, default=repr)
        if len(text) > cap:
            return text[:cap] + f"...[{len(text) - cap} more characters]"
        return json.loads(text)
    except (ValueError, TypeError, RecursionError, OverflowError):
        try:
            return repr(action)[:cap]
        except Exception:
            return f"<unrecordable {type(action).__name__}>"


def _args_json(args: Any) -> str | None:
    try:
        return json.dumps(args, default=repr, sort_keys=True)[:100_000]
    except (ValueError, TypeError, RecursionError, OverflowError):
        return None


# ---------------------------------------------------------------------------------------------
# the environment
# ---------------------------------------------------------------------------------------------


class ForecastEnv(gym.Env):
    """
    ## Description

    One episode replays one resolved event (a binary or multi-option Polymarket question, or an
    imported question) over its `T_Q` scheduled forecast dates (SPEC section 4). On each date the
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
    accepted and its contents are scored by SPEC section 6: an unusable report (NaN or infinite
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
    `datetime.date`, hits as dicts with `day`), plus `event_id`, `tool_specs` (at reset) and
    `scores` (at the end). The outcome and market prices never appear; the ablation
    `show_market=True` adds `market_previous_day` (the previous day's belief per offered option, null
    where unpriced) and is recorded on every forecast row.

    ## Rewards

    `reward_mode="episode"` (default): 0 on every step except the last, whose reward is the negative
    mean Brier over the episode's scored dates (fallbacks included, missing dates excluded; 0 if
    none was scored); `info["scores"]` then lists per date `step`, `forecast_date`, `brier`,
    `accuracy`, `log_vs_market`, `fallback`. `reward_mode="step"`: each forecast (or budget
    fallback) returns `-brier` at once; this reveals scores to the trainer during the episode.

    ## Starting State

    `reset(seed, options={"event_id": ..., "rollout": ...})` starts the named event, or the next
    event of a seeded permutation of the split's events (a new seed draws a new permutation;
    resets without a seed continue it). The first date has a full budget and, memory on or off, an
    empty notebook.

    ## Episode End

    Terminates after the last date's forecast (or fallback, or `skip_date`). Never truncated.
    `skip_date(reason)` (for the runner, when the agent's infrastructure failed) records the date as
    *missing* (never scored) and advances. `episode_log()` returns the recorded forecasts, tool
    calls, notebook snapshots (end of each date) and the trajectory (`steps[0]` is the reset
    observation with action None).

    ## Arguments

    `ForecastEnv(workspace, split="eval", config=None, event_ids=None, searcher=None, **overrides)`:
    `config` and `overrides` are keys of the `env` config section (`forecast_env/defaults/env.yaml`:
    memory, max_calls_per_date, max_observation_chars, search_k, max_k, search_mode, article_chars,
    reward_mode, show_market, hide_leak_flagged, log_eps, max_action_chars, max_claim_chars).
    `searcher` is an open `forecast_env.retrieval.Searcher`; by default one is opened on the
    workspace at the first search. Budget: `max_calls_per_date` calls per date, forecast included;
    when they are spent without a forecast, the uniform forecast is recorded with
    `fallback="budget_exhausted"` and the next date begins.

    ## Vector environments

    Works under `gymnasium.vector.SyncVectorEnv` and `AsyncVectorEnv(..., shared_memory=False)`
    (batched observations are tuples of strings). Gymnasium copies Text shared memory once at
    creation, so `shared_memory=True` would return stale text: this space refuses it with a
    message saying to pass `shared_memory=False`. Each worker opens its own `Searcher` (memory-mapped
    index, shared page cache) at its first search.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        workspace: str | Path,
        split: str | None = None,
        config: Mapping[str, Any] | None = None,
        event_ids: Sequence[str] | None = None,
        searcher: Any = None,
        **overrides: Any,
    ) -> None:
        merged = dict(config or {})
        merged.update(overrides)
        if split is not None:
            merged["split"] = split
        self.config = load_config("env", overrides=merged)
        cfg = self.config
        if cfg["max_observation_chars"] < 1000:
            raise ForecastEnvError(f"env.max_observation_chars = {cfg['max_observation_chars']} is too small; "
                                   "use at least 1000")
        if cfg["max_calls_per_date"] < 1:
            raise ForecastEnvError("env.max_calls_per_date must be at least 1")
        self.workspace = Path(workspace)
        self.split = cfg["split"]
        self.episodes = load_episodes(self.workspace, self.split, event_ids)
        self._by_id = {e.event_id: e for e in self.episodes}
        self._searcher = searcher
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
    def searcher(self) -> Any:
        """The retrieval backend (opened on first use)."""
        if self._searcher is None:
            from forecast_env.retrieval import Searcher

            self._searcher = Searcher.open(self.workspace)
        return self._searcher

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
        obs, info = self._observe(None, None, None)
        info["tool_specs"] = self.tool_specs
        self._steps.append({"observation": obs, "action": None, "reward": 0.0, "terminated": False})
        return obs, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        if self._ep is None or self._done:
            obs, info = self._observe(None, "the episode is over; call reset() to start the next one", None)
            return obs, 0.0, self._done, False, info
        started = time.perf_counter()
        self._calls += 1
        self._call_index += 1
        step_of_call = self._date.step  # a forecast advances the date: its row belongs to this one
        result, error, tool, args, telemetry, forecasted = None, None, None, None, {}, False
        reward = 0.0
        message = None
        try:
            parsed = tools.parse_action(action, self.config["max_action_chars"])
            tool, telemetry = parsed.tool, parsed.telemetry
            args = parsed.args
            args = tools.check_args(parsed, self.config["max_k"], self.config["search_k"],
                                    self.config["search_mode"])
            result, reward, message = self._run_tool(tool, args)
            forecasted = tool == "forecast"
        except (tools.ActionError, NotebookError) as exc:
            error = str(exc)
        except ForecastEnvError as exc:
            error = f"{tool or 'action'} failed: {exc}"
        except Exception as exc:
            log.warning("tool %s raised on agent input", tool, exc_info=True)
            error = f"{tool or 'action'} failed: internal error {type(exc).__name__}: {str(exc)[:200]}"
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        self._record_call(tool, args, result, error, elapsed_ms, telemetry, step=step_of_call)
        if not forecasted and self._calls >= self.config["max_calls_per_date"]:
            day = self._date.day
            reward = self._record_forecast(None, budget_exhausted=True)
            message = (f"call budget of {self.config['max_calls_per_date']} for {day.isoformat()} is spent "
                       "without a forecast: the uniform forecast was recorded")
            message += self._advance()
        obs, info = self._observe(result, error, message)
        if self._done:
            reward = self._final_reward(reward)
            info["scores"] = self._scores()
        self._steps.append({"observation": obs, "action": _jsonable(action, self.config["max_action_chars"]),
                            "reward": reward, "terminated": self._done})
        return obs, reward, self._done, False, info

    def skip_date(self, reason: str) -> tuple[str, float, bool, bool, dict]:
        """Record the current date as *missing* (infrastructure failure; never scored) and advance."""
        if self._ep is None or self._done:
            obs, info = self._observe(None, "the episode is over; call reset() to start the next one", None)
            return obs, 0.0, self._done, False, info
        reason = str(reason)[:1000]
        day = self._date.day
        self._call_index += 1
        self._record_call("skip_date", {"reason": reason}, None, reason, 0.0, {})
        self._record_forecast(None, missing=True, raw=json.dumps({"skipped": reason}))
        message = f"{day.isoformat()} was skipped ({reason[:200]}): recorded as missing" + self._advance()
        obs, info = self._observe(None, None, message)
        reward = 0.0
        if self._done:
            reward = self._final_reward(0.0)
            info["scores"] = self._scores()
        self._steps.append({"observation": obs, "action": {"skip_date": reason}, "reward": reward,
                            "terminated": self._done})
        return obs, reward, self._done, False, info

    def close(self) -> None:
        closer = getattr(self._searcher, "close", None)
        if callable(closer):
            closer()
        super().close()

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
            out = tools.run_open_article(self.searcher, d.day, args["doc_id"], self.config["article_chars"],
                                         self.config["hide_leak_flagged"])
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
        price = ep.beliefs.get(d.day, {}).get(ep.label, (None, None))[0]
        row: dict[str, Any] = {
            "event_id": ep.event_id, "rollout": self.rollout, "step": d.step, "steps_total": d.steps_total,
            "forecast_date": d.day, "options": list(d.options), "label": ep.label, "market_prob": price,
            "n_calls": self._calls, "n_search": self._n_search, "n_open": self._n_open,
            "memory": self.memory, "show_market": self.show_market, "missing": missing,
        }
        reward = 0.0
        if missing:
            row.update(probs=None, raw_report=raw, fallback=None, brier=None, accuracy=None, log_vs_market=None)
        else:
            if budget_exhausted:
                report = scoring.uniform_report(d.options, "budget_exhausted")
                raw = None
            else:
                report = scoring.normalize_report(probs, d.options)
                raw = _args_json(probs)
            sc = scoring.score_report(report, ep.label, d.options, price, self.config["log_eps"])
            row.update(probs=report.aligned(d.options), raw_report=raw, fallback=report.fallback,
                       brier=sc.brier, accuracy=sc.accuracy, log_vs_market=sc.log_vs_market)
            if self.config["reward_mode"] == "step":
                reward = -sc.brier
        self._forecasts.append(row)
        return reward

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

    def _final_reward(self, step_reward: float) -> float:
        if self.config["reward_mode"] == "step":
            return step_reward
        briers = [r["brier"] for r in self._forecasts if not r["missing"]]
        return -float(np.mean(briers)) if briers else 0.0

    def _scores(self) -> list[dict[str, Any]]:
        return [{k: r[k] for k in ("step", "forecast_date", "brier", "accuracy", "log_vs_market", "fallback")}
                for r in self._forecasts if not r["missing"]]

    def _record_call(self, tool: str | None, args: Any, result: Any, error: str | None, elapsed_ms: float,
                     telemetry: Mapping[str, float | None], step: int | None = None) -> None:
        ep = self._ep
        assert ep is not None
        doc_ids: list[str] = []
        if isinstance(result, dict):
            if "hits" in result:
                doc_ids = [h["doc_id"] for h in result["hits"]]
            elif tool == "open_article" and "doc_id" in result:
                doc_ids = [result["doc_id"]]
        latency = telemetry.get("latency_ms")
        self._tool_calls.append({
            "event_id": ep.event_id, "rollout": self.rollout, "step": self._date.step if step is None else step,
            "call_index": self._call_index, "tool": tool if tool is not None else "invalid",
            "args_json": _args_json(args) if args is not None else None, "result_doc_ids": doc_ids,
            "error": error, "latency_ms": latency if latency is not None else elapsed_ms,
            "prompt_tokens": _int_or_none(telemetry.get("prompt_tokens")),
            "completion_tokens": _int_or_none(telemetry.get("completion_tokens")),
            "cost_usd": telemetry.get("cost_usd"),
        })

    def _market_previous_day(self) -> dict[str, float | None]:
        ep, d = self._ep, self._date
        assert ep is not None
        prev = ep.beliefs.get(d.day - timedelta(days=1), {})
        return {o: prev.get(o, (None, None))[1] for o in d.options}

    def _observe(self, result: Any, error: str | None, message: str | None) -> tuple[str, dict]:
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
        obs = self._render(content)
        info = dict(content)
        info["event_id"] = ep.event_id
        info["terminated"] = self._done
        return obs, info

    def _render(self, content: dict[str, Any]) -> str:
        """The observation text, cut to `max_observation_chars` (tool result, notebook, description)."""
        cap = self.config["max_observation_chars"]
        text = dump_observation(content)
        if len(text) <= cap:
            return text
        c = dict(content)
        cuts: list[str] = []
        for _ in range(200):
            over = len(text) - cap
            if over <= 0:
                break
            tr = c.get("tool_result")
            nb = c.get("notebook") or []
            if isinstance(tr, dict) and isinstance(tr.get("body"), str) and tr["body"]:
                tr = dict(tr)
                tr["body"] = tr["body"][: max(0, len(tr["body"]) - over - 200)]
                tr["body_truncated"] = True
                c["tool_result"] = tr
                _note(cuts, "article body")
            elif isinstance(tr, dict) and tr.get("hits"):
                tr = dict(tr)
                hits = [dict(h) for h in tr["hits"]]
                long_ = [h for h in hits if len(h.get("summary") or "") > 200]
                if long_:
                    for h in long_:
                        h["summary"] = (h["summary"] or "")[:200] + "..."
                else:
                    hits = hits[:-1]
                tr["hits"] = hits
                c["tool_result"] = tr
                _note(cuts, "search hits")
            elif tr is not None and not (isinstance(tr, dict) and ("hits" in tr or "body" in tr)):
                s = tr if isinstance(tr, str) else dump_observation(tr)
                c["tool_result"] = s[: max(0, len(s) - over - 200)] if len(s) > over + 200 else None
                _note(cuts, "tool result")
            elif nb:
                c["notebook"] = nb[1:]
                _note(cuts, "oldest notebook entries")
            elif len(c.get("description") or "") > 200:
                desc = c["description"]
                c["description"] = desc[: max(200, len(desc) - over - 200)] + "..."
                _note(cuts, "description")
            else:
                c["question"] = (c.get("question") or "")[:500]
                c["options"] = [str(o)[:100] for o in c["options"]][:50]
                c["error"] = (c["error"] or "")[:300] or None
                c["message"] = (c["message"] or "")[:300] or None
                c["description"] = (c.get("description") or "")[:200]
                _note(cuts, "question and options")
            c["message"] = _with_cut(content.get("message"), cuts, cap)
            text = dump_observation(c)
        if len(text) > cap:  # cannot happen with cap >= 1000; kept so the space is never violated
            text = dump_observation({"error": "observation too long", "step": content["step"]})
        return text


def _note(cuts: list[str], what: str) -> None:
    if what not in cuts:
        cuts.append(what)


def _with_cut(message: str | None, cuts: list[str], cap: int) -> str:
    note = f"observation cut to {cap} characters ({', '.join(cuts)} shortened; info has the full text)"
    return f"{message[:300]}; {note}" if message else note


def _int_or_none(x: float | None) -> int | None:
    return None if x is None else int(x)
