"""The servers' shared limits and request checks: what the MCP server (`mcp.py`), the verifiers rollout
service (`rollout_service.py`) and the trainers' sessions (`sessions.py`) refuse before a tool call
reaches the environment. Defined once, so every way of playing refuses the same requests alike."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from forecast_env.errors import ForecastEnvError

#: Largest accepted JSON size of one tool call's arguments (a 1 MB query is refused, not searched).
MAX_ARGUMENT_BYTES = 32_000
#: The free tool the servers add to the environment's: the current observation, no budget spent.
OBSERVE = "observe"


class ToolCallError(ForecastEnvError):
    """A tool call a server refuses before it reaches the environment (unknown tool, arguments that are not
    a JSON object or are too large, arguments to `observe`, the session is over)."""


def check_tool_call(tool: Any, arguments: Any, names: Collection[str]) -> dict[str, Any]:
    """The arguments of one request for `tool`, checked: a tool of `names`, a JSON object of at most
    `MAX_ARGUMENT_BYTES`, none for `observe`; ToolCallError says what is wrong. `names` are listed in the
    error in their order when they are a sequence, sorted otherwise."""
    if not isinstance(tool, str) or tool not in names:
        shown = names if isinstance(names, (list, tuple)) else sorted(names)
        raise ToolCallError(f"unknown tool {str(tool)[:80]!r}; tools: {', '.join(shown)}")
    if not isinstance(arguments, Mapping):
        raise ToolCallError(f"{tool}: arguments must be a JSON object")
    args = dict(arguments)
    size = len(json.dumps(args, default=str).encode())
    if size > MAX_ARGUMENT_BYTES:
        raise ToolCallError(f"{tool}: arguments are {size:,} bytes; the limit is {MAX_ARGUMENT_BYTES:,}")
    if tool == OBSERVE and args:
        raise ToolCallError("observe takes no arguments")
    return args
