"""The model as a research agent: search and open_article as of one day, through the environment's own tools.

The proposing model (as of D) and the resolvers (after D, up to R + grace) may send tool calls for a few
rounds; each call runs through `envs/tools.py`'s `run_search` / `run_open_article` with the date the
caller fixes, so nothing outside the window can reach the model. What the research found is then
written into the final request as text (every endpoint takes plain user messages; not every chat
template takes tool messages), and the model answers that request with JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from forecast_env.envs.tools import ActionError, run_open_article, run_search, tool_specs
from forecast_env.questions.model import RecordedModel
from forecast_env.retrieval import Searcher


@dataclass
class Window:
    """What the agent may read: articles visible after `after` (None: from the start) and on or before `until`."""

    until: date
    after: date | None = None

    def allows(self, day: date) -> bool:
        return day <= self.until and (self.after is None or day > self.after)


@dataclass
class Research:
    """What a research session saw: readable notes for the final request, and the article ids it met."""

    notes: list[str] = field(default_factory=list)
    seen: dict[str, date] = field(default_factory=dict)  # doc id -> visibility day
    tool_calls: int = 0


def _search(searcher: Searcher, window: Window, query: str, k: int) -> dict[str, Any]:
    if window.after is None:
        return run_search(searcher, window.until, query, k, "hybrid")
    # after D: search as of the window's end and keep the hits after D (a wider k first, then the top k)
    res = run_search(searcher, window.until, query, max(k * 4, 20), "hybrid")
    res["hits"] = [h for h in res["hits"] if window.allows(date.fromisoformat(str(h["day"])[:10]))][:k]
    res["k"] = k
    return res


def run_tool(searcher: Searcher, window: Window, name: str, args: dict[str, Any], k: int, chars: int,
             research: Research) -> str:
    """One tool call's result as text (errors too: the model reads them)."""
    research.tool_calls += 1
    try:
        if name == "search":
            query = str(args.get("query") or "").strip()
            if not query:
                raise ActionError("search: give a non-empty query")
            res = _search(searcher, window, query, k)
            lines = [f"search {query!r}:"]
            for h in res["hits"]:
                day = date.fromisoformat(str(h["day"])[:10])
                research.seen[str(h["doc_id"])] = day
                lines.append(f"- [{h['doc_id']}] {day.isoformat()} {h['title']}: {str(h.get('summary') or '')[:200]}")
            if not res["hits"]:
                lines.append("- no articles")
            return "\n".join(lines)
        if name == "open_article":
            doc_id = str(args.get("doc_id") or "")
            art = run_open_article(searcher, window.until, doc_id, chars)
            day = art["day"] if isinstance(art["day"], date) else date.fromisoformat(str(art["day"])[:10])
            if not window.allows(day):
                raise ActionError(f"open_article: no article {doc_id[:80]!r} can be read in this window")
            research.seen[doc_id] = day
            return f"article [{doc_id}] {day.isoformat()} {art['title']}\n{art['body']}"
        raise ActionError(f"unknown tool {name!r}; use search or open_article")
    except ActionError as exc:
        return f"error: {exc}"


def research_tools(k: int) -> list[dict[str, Any]]:
    """The environment's search and open_article specs (the date is never an argument)."""
    return [t for t in tool_specs(max_k=k, default_k=k) if t["function"]["name"] in ("search", "open_article")]


def research(model: RecordedModel, searcher: Searcher, window: Window, prompt: str, turns: int, k: int, chars: int,
             purpose: str, max_tokens: int | None = None, **kw: Any) -> Research:
    """Up to `turns` rounds of tool calls on `prompt`; the results become `Research.notes`."""
    out = Research()
    if turns <= 0:
        return out
    tools = research_tools(k)
    convo: list[dict[str, Any]] = [{"role": "user", "content": prompt + "\n\nUse the tools now to research, or "
                                    "reply DONE if you need nothing more."}]
    for _ in range(turns):
        msg = model.chat(model.payload(convo, tools=tools, max_tokens=max_tokens, **kw), purpose)
        calls = msg.get("tool_calls") or []
        if not calls:
            break
        convo.append({"role": "assistant", "content": msg.get("content"), "tool_calls": calls})
        for call in calls[:4]:
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
                if not isinstance(args, dict):
                    raise ValueError
            except (ValueError, TypeError):
                result = "error: the arguments are not a JSON object"
            else:
                result = run_tool(searcher, window, str(fn.get("name") or ""), args, k, chars, out)
            out.notes.append(result)
            convo.append({"role": "tool", "tool_call_id": call.get("id") or "", "content": result})
    return out
