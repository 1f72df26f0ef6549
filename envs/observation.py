"""Observation text (docs/design.md §5): the JSON an agent reads, cut to the observation cap.

Both environments build an observation as a dict and render it here. When the JSON would exceed
the cap, parts are shortened in a fixed order, each only when the previous can give no more: the
tool result (article body, then hit summaries and hits, then any other result), the oldest
notebook entries, the world's question list (from its end), the description, and last the
question, options and messages. `message` then says what was cut; `info` keeps the full content.
Notebook entries that could not fit even alone (the oldest beyond the cap) are dropped before the
first rendering, so a world's long notebook costs no more than the cap to render.
"""

from __future__ import annotations

from typing import Any

from forecast_env.envs.text_space import dump_observation


def _note(cuts: list[str], what: str) -> None:
    if what not in cuts:
        cuts.append(what)


def _with_cut(message: str | None, cuts: list[str], cap: int) -> str:
    note = f"observation cut to {cap} characters ({', '.join(cuts)} shortened; info has the full text)"
    return f"{message[:300]}; {note}" if message else note


def _shorten_tool_result(tr: Any, over: int, cuts: list[str]) -> tuple[bool, Any]:
    """One shortening step of the tool result; (False, tr) when it cannot shrink further."""
    if isinstance(tr, dict) and isinstance(tr.get("body"), str) and tr["body"]:
        tr = dict(tr)
        tr["body"] = tr["body"][: max(0, len(tr["body"]) - over - 200)]
        tr["body_truncated"] = True
        _note(cuts, "article body")
        return True, tr
    if isinstance(tr, dict) and tr.get("hits"):
        tr = dict(tr)
        hits = [dict(h) for h in tr["hits"]]
        long_ = [h for h in hits if len(h.get("summary") or "") > 200]
        if long_:
            for h in long_:
                h["summary"] = (h["summary"] or "")[:200] + "..."
        else:
            hits = hits[:-1]
        tr["hits"] = hits
        _note(cuts, "search hits")
        return True, tr
    if tr is not None and not (isinstance(tr, dict) and ("hits" in tr or "body" in tr)):
        s = tr if isinstance(tr, str) else dump_observation(tr)
        _note(cuts, "tool result")
        return True, (s[: max(0, len(s) - over - 200)] if len(s) > over + 200 else None)
    return False, tr


def _drop_oldest(entries: list[Any], over: int) -> list[Any]:
    """`entries` without as many of the oldest as it takes to save `over` characters (at least one)."""
    saved, k = 0, 0
    while k < len(entries) and (k == 0 or saved < over):
        saved += len(dump_observation(entries[k])) + 2
        k += 1
    return entries[k:]


def render_observation(content: dict[str, Any], cap: int) -> str:
    """The observation text of `content`, at most `cap` characters (`cap` >= 1000)."""
    c = dict(content)
    cuts: list[str] = []
    notebook = c.get("notebook") or []
    if len(notebook) > 8:  # entries that cannot fit whatever else is cut go first, without writing them
        kept, size = 0, 0
        for entry in reversed(notebook):
            size += len(dump_observation(entry)) + 2
            if size > cap:
                break
            kept += 1
        if kept < len(notebook):
            c["notebook"] = notebook[len(notebook) - kept:]
            _note(cuts, "oldest notebook entries")
            c["message"] = _with_cut(content.get("message"), cuts, cap)
    text = dump_observation(c)
    if len(text) <= cap:
        return text
    for _ in range(400):
        over = len(text) - cap
        if over <= 0:
            break
        shrunk, tr = _shorten_tool_result(c.get("tool_result"), over, cuts)
        if shrunk:
            c["tool_result"] = tr
        elif c.get("notebook"):
            c["notebook"] = _drop_oldest(c["notebook"], over)
            _note(cuts, "oldest notebook entries")
        elif len(c.get("questions") or []) > 1:
            c["questions"] = c["questions"][:-1]
            _note(cuts, "question list (use the `page` of the list)")
        elif len(c.get("description") or "") > 200:
            desc = c["description"]
            c["description"] = desc[: max(200, len(desc) - over - 200)] + "..."
            _note(cuts, "description")
        else:
            if "question" in c:
                c["question"] = (c.get("question") or "")[:500]
            if "options" in c:
                c["options"] = [str(o)[:100] for o in c["options"]][:50]
            if "description" in c:
                c["description"] = (c.get("description") or "")[:200]
            if "questions" in c:
                c["questions"] = [{k: (str(v)[:300] if isinstance(v, str) else v) for k, v in q.items()}
                                  for q in (c.get("questions") or [])[:1]]
            c["error"] = (c.get("error") or "")[:300] or None
            c["message"] = (c.get("message") or "")[:300] or None
            _note(cuts, "question and options")
        c["message"] = _with_cut(content.get("message"), cuts, cap)
        text = dump_observation(c)
    if len(text) > cap:  # cannot happen with cap >= 1000; kept so the space is never violated
        text = dump_observation({"error": "observation too long"})
    return text
