"""The rows an episode records (docs/design.md §5): tool calls and raw actions in the shapes of
`schema.TOOL_CALLS` and the trajectory, shared by the episode and the world environments."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


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
