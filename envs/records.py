"""The rows an episode records (docs/design.md §5): forecasts, tool calls and raw actions in the shapes
of `schema.FORECASTS`, `schema.TOOL_CALLS` and the trajectory, shared by the episode and the world
environments."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from forecast_env import scoring
from forecast_env.envs.episodes import EventEpisode, ForecastDate
from forecast_env.envs.tools import HIDE_KEYS, hidden_set


def jsonable(action: Any, cap: int) -> Any:
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
        except Exception:  # an agent's object whose __repr__ raises: record its type only
            return f"<unrecordable {type(action).__name__}>"


def args_json(args: Any) -> str | None:
    """The arguments as sorted JSON (at most 100,000 characters); None when they cannot be written."""
    try:
        return json.dumps(args, default=repr, sort_keys=True)[:100_000]
    except (ValueError, TypeError, RecursionError, OverflowError):
        return None


def ablations(env_config: Mapping[str, Any]) -> list[str]:
    """What an env config changes from the benchmark's defaults in what the agent may see or keep, one
    label per ablation (empty for a default run); reports show them so that an ablation run is never
    read as, or pooled with, a default one (docs/design.md §5)."""
    out = []
    hidden = hidden_set(env_config)
    for flag, what in (("market_quote", "articles quoting prediction-market odds are shown"),
                       ("leak_flag", "articles the leakage screen flagged are shown")):
        if flag not in hidden:
            out.append(f"{what} (env.{HIDE_KEYS[flag]}=false)")
    if env_config.get("show_market"):
        out.append("the previous day's market belief is shown (env.show_market=true)")
    if env_config.get("memory") is False:
        out.append("no notebook across forecast dates (env.memory=false)")
    return out


def _int_or_none(x: float | None) -> int | None:
    return None if x is None else int(x)


def result_doc_ids(tool: str | None, result: Any) -> list[str]:
    """The doc ids a tool result showed the agent (search hits, or the opened article)."""
    if isinstance(result, dict):
        if "hits" in result:
            return [h["doc_id"] for h in result["hits"]]
        if tool == "open_article" and "doc_id" in result:
            return [result["doc_id"]]
    return []


def tool_call_row(*, event_id: str, rollout: int, step: int, call_index: int, tool: str | None, args: Any,
                  result: Any, error: str | None, elapsed_ms: float,
                  telemetry: Mapping[str, float | None]) -> dict[str, Any]:
    """One `schema.TOOL_CALLS` row (without run_id/agent); agent telemetry wins over measured latency."""
    latency = telemetry.get("latency_ms")
    return {
        "event_id": event_id, "rollout": rollout, "step": step, "call_index": call_index,
        "tool": tool if tool is not None else "invalid",
        "args_json": args_json(args) if args is not None else None,
        "result_doc_ids": result_doc_ids(tool, result),
        "error": error, "latency_ms": latency if latency is not None else elapsed_ms,
        "prompt_tokens": _int_or_none(telemetry.get("prompt_tokens")),
        "completion_tokens": _int_or_none(telemetry.get("completion_tokens")),
        "cost_usd": telemetry.get("cost_usd"),
    }


def forecast_row(ep: EventEpisode, d: ForecastDate, rollout: int, report: scoring.Report | None, raw: str | None,
                 log_eps: float, counts: Mapping[str, int]) -> dict[str, Any]:
    """One `schema.FORECASTS` row (without run_id/agent/memory/show_market) for `report` on date `d`;
    `report=None` records the date as missing (never scored).

    The log score vs. the market is taken twice: against the label's day-mean price
    (`market_prob`) and against its last price of the day (`market_prob_close`), docs/design.md §5.
    """
    quote = ep.quote(d.day, ep.label)
    row: dict[str, Any] = {
        "event_id": ep.event_id, "rollout": rollout, "step": d.step, "steps_total": d.steps_total,
        "forecast_date": d.day, "options": list(d.options), "label": ep.label, "market_prob": quote.price,
        "market_prob_close": quote.price_close, **counts, "missing": report is None, "raw_report": raw,
    }
    if report is None:
        row.update(probs=None, fallback=None, brier=None, accuracy=None, log_vs_market=None,
                   log_vs_market_close=None)
        return row
    sc = scoring.score_report(report, ep.label, d.options, quote.price, log_eps)
    row.update(probs=report.aligned(d.options), fallback=report.fallback, brier=sc.brier, accuracy=sc.accuracy,
               log_vs_market=sc.log_vs_market,
               log_vs_market_close=scoring.log_score_vs_market(report, ep.label, d.options,
                                                               quote.price_close, log_eps))
    return row
