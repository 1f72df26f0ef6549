"""What no tool result may carry, shared by the MCP and verifiers tests: keys of a score, reward or label."""

from __future__ import annotations

from typing import Any

#: Keys that would carry a score, reward or label: never in a tool result.
SCORE_KEYS = {"brier", "accuracy", "log_vs_market", "log_vs_market_close", "reward", "scores", "label",
              "market_prob", "market_prob_close"}


def nested_keys(obj: Any) -> set[str]:
    """Every dict key anywhere inside `obj` (dicts and lists, at any depth)."""
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in nested_keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in nested_keys(v)}
    return set()
