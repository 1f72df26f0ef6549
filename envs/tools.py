"""The agent's tools (docs/design.md §5): JSON-schema specs, action parsing and argument checking, the
two retrieval tools and what the searcher behind them hides (`hidden_set`); the environments' shared
`step()` and their searcher live in `base.py`.

An action is `{"tool": name, "args": {...}}`, its JSON string, or an OpenAI-style tool call
(`{"type": "function", "function": {"name": ..., "arguments": "<json>"}}`, `{"name": ...,
"arguments": ...}`, or a one-element list of either). Anything else raises `ActionError`, which the
environment turns into an error observation: nothing here raises anything else on agent input.

The forecast date is never an argument: the environment injects it into `run_search` /
`run_open_article`, and an argument the spec does not list is rejected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from forecast_env.enums import SEARCH_MODES
from forecast_env.errors import FutureArticleError, UnknownArticleError

if TYPE_CHECKING:
    from forecast_env.retrieval import Searcher
    from forecast_env.retrieval.searcher import Hit

TOOL_NAMES = ("search", "open_article", "notebook_add", "notebook_supersede", "forecast")
#: World mode's tools (docs/design.md §5 "World mode"): `forecast` names its question.
WORLD_TOOL_NAMES = ("search", "open_article", "notebook_add", "notebook_supersede", "get_question",
                    "list_questions", "forecast", "next_day")
#: Arguments per tool: (required, optional), in episode mode and in world mode.
ARGS = {
    "search": (("query",), ("k", "mode")),
    "open_article": (("doc_id",), ()),
    "notebook_add": (("claim", "date_observed", "doc_ids"), ()),
    "notebook_supersede": (("entry_id", "reason"), ()),
    "forecast": (("probabilities",), ()),
}
WORLD_ARGS = {
    **ARGS,
    "notebook_add": (("claim", "date_observed", "doc_ids"), ("question_ids",)),
    "get_question": (("question_id",), ()),
    "list_questions": (("page",), ()),
    "forecast": (("question_id", "probabilities"), ()),
    "next_day": ((), ()),
}
TELEMETRY_KEYS = ("prompt_tokens", "completion_tokens", "latency_ms", "cost_usd")


class ActionError(ValueError):
    """An invalid action; the message is shown to the agent in the `error` field."""


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def tool_specs(max_k: int = 50, default_k: int = 10, default_mode: str = "hybrid") -> list[dict[str, Any]]:
    """The tools in OpenAI function-calling format (each `parameters` is a JSON-schema object)."""
    return [
        _fn(
            "search",
            "Search the news corpus. Only articles published on or before the current forecast date are "
            "searched. Returns ranked hits (doc_id, day, title, url, summary).",
            {
                "query": {"type": "string", "minLength": 1, "description": "search terms"},
                "k": {"type": "integer", "minimum": 1, "maximum": max_k, "default": default_k,
                      "description": f"number of hits (at most {max_k})"},
                "mode": {"type": "string", "enum": list(SEARCH_MODES), "default": default_mode,
                         "description": "hybrid (dense + BM25, rank fusion), dense or bm25"},
            },
            ["query"],
        ),
        _fn(
            "open_article",
            "Read one article of the corpus by its doc_id (published on or before the forecast date).",
            {"doc_id": {"type": "string", "minLength": 1, "description": "a doc_id from search hits"}},
            ["doc_id"],
        ),
        _fn(
            "notebook_add",
            "Add a claim to your evidence notebook, with the date the evidence was observed "
            "(YYYY-MM-DD) and the supporting doc_ids.",
            {
                "claim": {"type": "string", "minLength": 1},
                "date_observed": {"type": "string", "description": "YYYY-MM-DD"},
                "doc_ids": {"type": "array", "items": {"type": "string"}},
            },
            ["claim", "date_observed", "doc_ids"],
        ),
        _fn(
            "notebook_supersede",
            "Mark a notebook entry as superseded (no longer holding), with the reason.",
            {
                "entry_id": {"type": "integer", "minimum": 1},
                "reason": {"type": "string", "minLength": 1},
            },
            ["entry_id", "reason"],
        ),
        _fn(
            "forecast",
            "Report your probability for every offered option (a mapping option -> probability, or a "
            "list aligned with the options). This ends the current forecast date.",
            {
                "probabilities": {
                    "anyOf": [
                        {"type": "object", "additionalProperties": {"type": "number"}},
                        {"type": "array", "items": {"type": "number"}},
                    ],
                    "description": "e.g. {\"Yes\": 0.7, \"No\": 0.3}",
                }
            },
            ["probabilities"],
        ),
    ]


def world_tool_specs(max_k: int = 50, default_k: int = 10, default_mode: str = "hybrid") -> list[dict[str, Any]]:
    """World mode's tools in OpenAI function-calling format."""
    base = {s["function"]["name"]: s for s in tool_specs(max_k, default_k, default_mode)}
    note = json.loads(json.dumps(base["notebook_add"]))
    note["function"]["description"] += " Tag the entry with the question ids it concerns (optional)."
    note["function"]["parameters"]["properties"]["question_ids"] = {"type": "array", "items": {"type": "string"}}
    qid = {"type": "string", "minLength": 1, "description": "a question_id from today's list"}
    return [
        base["search"], base["open_article"], note, base["notebook_supersede"],
        _fn("get_question", "The full question: text, options and its description as of today.",
            {"question_id": qid}, ["question_id"]),
        _fn("list_questions", "Show another page of today's question list (pages start at 1).",
            {"page": {"type": "integer", "minimum": 1}}, ["page"]),
        _fn("forecast", "Set your standing forecast for one listed question (a mapping option -> probability, "
            "or a list aligned with its options). It stands, and is scored, until you change it.",
            {"question_id": qid,
             "probabilities": base["forecast"]["function"]["parameters"]["properties"]["probabilities"]},
            ["question_id", "probabilities"]),
        _fn("next_day", "End today and move the clock to the next day.", {}, []),
    ]


@dataclass
class ParsedAction:
    """A parsed action: tool name, checked arguments, and the stripped telemetry."""

    tool: str
    args: dict[str, Any]
    telemetry: dict[str, float | None] = field(default_factory=dict)


def _loads(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ActionError(f"{what} is not valid JSON ({str(exc)[:120]}); send "
                          '{"tool": "<name>", "args": {...}}') from None


def _telemetry(raw: Any) -> dict[str, float | None]:
    out: dict[str, float | None] = {k: None for k in TELEMETRY_KEYS}
    if not isinstance(raw, Mapping):
        return out
    for key in TELEMETRY_KEYS:
        value = raw.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[key] = float(value)
    return out


def parse_action(action: Any, max_chars: int = 100_000, names: tuple[str, ...] = TOOL_NAMES) -> ParsedAction:
    """Parse any accepted action form into a `ParsedAction` (arguments not yet checked)."""
    if isinstance(action, (bytes, bytearray)):
        try:
            action = action.decode("utf-8")
        except UnicodeDecodeError:
            raise ActionError("the action is bytes that are not UTF-8 text") from None
    if isinstance(action, str):
        if len(action) > max_chars:
            raise ActionError(f"the action has {len(action)} characters; the limit is {max_chars}")
        action = _loads(action, "the action")
    if isinstance(action, (list, tuple)):
        if len(action) != 1:
            raise ActionError(f"a list of {len(action)} tool calls; send exactly one tool call per step")
        action = action[0]
    if not isinstance(action, Mapping):
        raise ActionError(f"the action is a {type(action).__name__}; send "
                          '{"tool": "<name>", "args": {...}} or an OpenAI-style tool call')
    telemetry = _telemetry(action.get("telemetry"))
    if "tool" in action:
        name, args = action.get("tool"), action.get("args", {})
    elif isinstance(action.get("function"), Mapping):
        fn = action["function"]
        name, args = fn.get("name"), fn.get("arguments", {})
    elif "name" in action:
        name, args = action.get("name"), action.get("arguments", action.get("args", {}))
    else:
        keys = ", ".join(sorted(str(k) for k in action)[:8])
        raise ActionError(f"the action has no tool name (keys: {keys}); send "
                          '{"tool": "<name>", "args": {...}}')
    if not isinstance(name, str) or name not in names:
        shown = name if isinstance(name, str) else type(name).__name__
        raise ActionError(f"unknown tool {str(shown)[:80]!r}; tools: {', '.join(names)}")
    if args is None:
        args = {}
    if isinstance(args, str):
        if len(args) > max_chars:
            raise ActionError(f"the arguments have {len(args)} characters; the limit is {max_chars}")
        args = _loads(args, f"the arguments of {name}") if args.strip() else {}
    if not isinstance(args, Mapping):
        raise ActionError(f"the arguments of {name} must be a JSON object, got {type(args).__name__}")
    if any(not isinstance(k, str) for k in args):
        raise ActionError(f"the arguments of {name} must have string names")
    return ParsedAction(name, dict(args), telemetry)


def _int(value: Any, name: str, tool: str) -> int:
    if isinstance(value, bool):
        raise ActionError(f"{tool}: `{name}` must be an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value.strip()) < 12:
        return int(value.strip())
    raise ActionError(f"{tool}: `{name}` must be an integer, got {type(value).__name__}")


def _str(value: Any, name: str, tool: str, nonempty: bool = True) -> str:
    if not isinstance(value, str):
        raise ActionError(f"{tool}: `{name}` must be a string, got {type(value).__name__}")
    if nonempty and not value.strip():
        raise ActionError(f"{tool}: `{name}` is empty")
    return value


def _str_list(value: Any, name: str, tool: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or any(not isinstance(d, str) for d in value):
        raise ActionError(f"{tool}: `{name}` must be a list of strings")
    if len(value) > 100:
        raise ActionError(f"{tool}: {len(value)} {name}; at most 100")
    return [d[:64] for d in value]


def check_args(parsed: ParsedAction, max_k: int, default_k: int, default_mode: str,
               world: bool = False) -> dict[str, Any]:
    """Check and complete the arguments of one tool call against its spec (episode or world mode)."""
    tool, args = parsed.tool, parsed.args
    required, optional = (WORLD_ARGS if world else ARGS)[tool]
    allowed = required + optional
    extra = [k for k in args if k not in allowed]
    if extra:
        hint = ""
        if any(k.lower() in ("as_of", "date", "forecast_date", "asof", "day", "before", "until") for k in extra):
            hint = " The forecast date is set by the environment and cannot be changed."
        raise ActionError(f"{tool}: unknown argument(s) {', '.join(repr(k[:40]) for k in extra[:5])}; "
                          f"allowed: {', '.join(allowed)}.{hint}")
    missing = [k for k in required if k not in args]
    if missing:
        raise ActionError(f"{tool}: missing argument(s) {', '.join(missing)}")
    if tool == "search":
        query = _str(args["query"], "query", tool)
        k = _int(args.get("k", default_k), "k", tool)
        if k < 1:
            raise ActionError(f"search: `k` must be at least 1, got {k}")
        mode = args.get("mode", default_mode)
        if mode is None:
            mode = default_mode
        if not isinstance(mode, str) or mode not in SEARCH_MODES:
            raise ActionError(f"search: `mode` must be one of {', '.join(SEARCH_MODES)}")
        return {"query": query[:1000], "k": min(k, max_k), "mode": mode}
    if tool == "open_article":
        return {"doc_id": _str(args["doc_id"], "doc_id", tool).strip()}
    if tool == "notebook_add":
        date_observed = _str(args["date_observed"], "date_observed", tool, nonempty=False)
        out: dict[str, Any] = {"claim": _str(args["claim"], "claim", tool),
                               "date_observed": date_observed[:64],
                               "doc_ids": _str_list(args["doc_ids"], "doc_ids", tool)}
        if world:
            out["question_ids"] = _str_list(args.get("question_ids") or [], "question_ids", tool)
        return out
    if tool == "get_question":
        return {"question_id": _str(args["question_id"], "question_id", tool).strip()[:200]}
    if tool == "list_questions":
        page = _int(args["page"], "page", tool)
        if page < 1:
            raise ActionError(f"list_questions: `page` must be at least 1, got {page}")
        return {"page": page}
    if tool == "next_day":
        return {}
    if tool == "notebook_supersede":
        return {"entry_id": _int(args["entry_id"], "entry_id", tool),
                "reason": _str(args["reason"], "reason", tool)}
    probs = args["probabilities"]
    if isinstance(probs, tuple):
        probs = list(probs)
    if not isinstance(probs, (Mapping, list)):
        raise ActionError("forecast: `probabilities` must be a mapping option -> probability or a list "
                          f"aligned with the options, got {type(probs).__name__}")
    if len(probs) > 1000:
        raise ActionError(f"forecast: `probabilities` has {len(probs)} entries")
    out = {"probabilities": dict(probs) if isinstance(probs, Mapping) else probs}
    if world:
        out["question_id"] = _str(args["question_id"], "question_id", tool).strip()[:200]
    return out


# ---------------------------------------------------------------------------------------------
# retrieval tools (the forecast date is injected by the environment)
# ---------------------------------------------------------------------------------------------


def hit_record(hit: Hit) -> dict[str, Any]:
    """One search hit as a dict with `day` a `date`."""
    return {
        "doc_id": hit.doc_id,
        "day": hit.day,
        "title": hit.title,
        "url": hit.url,
        "summary": hit.summary,
        "score": round(float(hit.score), 6),
        "rank": int(hit.rank),
    }


def run_search(searcher: Searcher, as_of: date, query: str, k: int, mode: str) -> dict[str, Any]:
    """Search as of the forecast date; hits dated after it (never expected) are dropped."""
    hits = searcher.search(query, as_of=as_of, k=k, mode=mode)
    records = [hit_record(h) for h in hits if h.day <= as_of]
    return {"query": query, "mode": mode, "k": k, "hits": records}


def unreadable(doc_id: str, as_of: date) -> ActionError:
    """The one refusal of `open_article`, whatever the reason (docs/design.md §5): an unknown id, an
    article published after the date and a hidden article answer alike, so that the answer says
    nothing about which ids exist."""
    return ActionError(f"open_article: no article {doc_id[:80]!r} can be read on {as_of.isoformat()}; "
                       "use a doc_id from this date's search hits")


def run_open_article(searcher: Searcher, as_of: date, doc_id: str, article_chars: int) -> dict[str, Any]:
    """Read one article as of the forecast date, body capped at `article_chars`.

    The searcher decides what can be read (its hide switch covers leak-flagged and market-quoting
    articles); every refusal reaches the agent as the same message.
    """
    try:
        art = searcher.open_article(doc_id, as_of)
    except (FutureArticleError, UnknownArticleError):
        raise unreadable(doc_id, as_of) from None
    if art.day > as_of:  # the searcher already refuses these; checked again on purpose
        raise unreadable(doc_id, as_of)
    body = art.body or ""
    return {
        "doc_id": art.doc_id,
        "day": art.day,
        "title": art.title,
        "url": art.url,
        "summary": art.summary,
        "body": body[:article_chars],
        "body_truncated": len(body) > article_chars,
    }


# ---------------------------------------------------------------------------------------------
# the searcher behind the retrieval tools, and what it hides (docs/design.md §3.hiding, §5)
# ---------------------------------------------------------------------------------------------

#: The env config key that hides each article flag; every flag of the Searcher's HIDE_FLAGS has one
#: (tested), and the default hides them all.
HIDE_KEYS = {"leak_flag": "hide_leak_flagged", "market_quote": "hide_market_quotes"}


def hidden_set(env_config: Mapping[str, Any]) -> tuple[str, ...]:
    """The article flags an env config hides from search and open_article, in `HIDE_KEYS` order.

    A record written before `hide_market_quotes` existed had one switch for both flags, so a missing
    `hide_market_quotes` follows `hide_leak_flagged`.
    """
    leak = bool(env_config.get("hide_leak_flagged", True))
    shown = {"leak_flag": leak, "market_quote": bool(env_config.get("hide_market_quotes", leak))}
    return tuple(flag for flag in HIDE_KEYS if shown[flag])
