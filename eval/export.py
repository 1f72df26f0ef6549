"""Training-data export (docs/design.md §7): prompts per (event, forecast date) and recorded trajectories.

`export(WS, split, out)` writes, for ONE split only (a train export never holds an eval event:
checked row by row before anything is written):

    out/prompts/{hf/, prompts.parquet, prompts.jsonl}
        prompt (chat messages: system + user with question, description as of the date, options,
        date window), options, forecast_date, window_start, window_end, answer (label), info (JSON:
        event_id, step, steps_total, type, category, split)
    out/trajectories/{hf/, trajectories.parquet, trajectories.jsonl}      (with run_id)
        verifiers-style rollout rows: prompt, completion (messages), answer, reward (-mean Brier of
        the scored dates), info (JSON: event_id, agent, rollout, seed, per-date scores, tool calls)

`include_text=False` keeps doc ids and drops article text, for corpora whose text may not be
redistributed: titles, summaries, bodies, urls and snippets in tool results, and notebook claims
wherever they appear (the notebook in observations, `notebook_add` arguments in the recorded
actions and tool calls), since an agent may copy article text into a claim. Free-text assistant
messages of an LLM agent are kept: they are the model's own output, but may quote what it read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl

from forecast_env.config import load_config
from forecast_env.errors import RunError
from forecast_env.store import Workspace, atomic_write_text

FORMATS = ("hf", "parquet", "jsonl")
TEXT_KEYS = ("title", "summary", "body", "url", "text", "snippet", "claim")
_DOC_ID = re.compile(r'"doc_id"\s*:\s*"([^"]+)"')

USER_TEMPLATE = """Today is {date}. Forecast the following question using only information published on or before {date} \
(the news you may search covers {start} to {date}).

Question: {question}

Description (as known on {date}):
{description}

Options:
{options}

Report a probability for every option; the probabilities should sum to 1."""


def _system_prompt() -> str:
    """The LLM agent's packaged system prompt: the exported prompts must be the ones agents see."""
    from forecast_env.agents.llm import system_prompt

    try:
        return system_prompt()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"export: cannot read the LLM agent's system prompt (forecast_env/agents/prompts/system.md: "
                       f"{exc}); reinstall the package (pip install -e .) so the prompt ships with it") from exc


def prompt_messages(question: str, description: str, options: Sequence[str], day: date, start: date,
                    system: str) -> list[dict[str, str]]:
    """The chat prompt of one (event, forecast date)."""
    user = USER_TEMPLATE.format(date=day.isoformat(), start=start.isoformat(), question=question,
                                description=description.strip() or "(none)",
                                options="\n".join(f"- {o}" for o in options))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _corpus_start(workspace: Path) -> date:
    value = load_config("corpus")["corpus_start"]
    return value if isinstance(value, date) else date.fromisoformat(str(value))


def _split_events(ws: Workspace, split: str) -> pl.DataFrame:
    from forecast_env.envs.events import load_events

    if split not in ("train", "eval"):
        raise RunError(f"export split {split!r}: choose train or eval (one split per export)")
    return load_events(ws.root).events.filter(pl.col("split") == split)


def prompt_rows(workspace: str | Path, split: str) -> list[dict[str, Any]]:
    """One row per (event, forecast date) of `split`."""
    from forecast_env.envs.events import description_as_of, load_events

    ws = Workspace.at(workspace)
    events = _split_events(ws, split)
    sched = load_events(ws.root).schedule.filter(pl.col("event_id").is_in(events["event_id"].to_list()))
    start = _corpus_start(ws.root)
    system = _system_prompt()
    ev_by_id = {r["event_id"]: r for r in events.iter_rows(named=True)}
    rows = []
    for s in sched.sort(["event_id", "step"]).iter_rows(named=True):
        ev = ev_by_id[s["event_id"]]
        day = s["forecast_date"]
        options = list(s["options"] or ev["options"])
        rows.append({
            "prompt": prompt_messages(ev["question"] or "", description_as_of(ev["description"] or "", day), options,
                                      day, start, system),
            "options": options,
            "forecast_date": day.isoformat(),
            "window_start": start.isoformat(),
            "window_end": day.isoformat(),
            "answer": ev["label"],
            "info": json.dumps({"event_id": ev["event_id"], "step": s["step"], "steps_total": s["steps_total"],
                                "type": ev["type"], "category": ev["category"], "split": ev["split"]}),
        })
    return rows


# ---------------------------------------------------------------------------------------------
# trajectories
# ---------------------------------------------------------------------------------------------


def strip_text(obj: Any) -> Any:
    """`obj` with article text removed (doc ids, days, ranks and scores kept)."""
    if isinstance(obj, dict):
        return {k: ("[removed]" if k in TEXT_KEYS and isinstance(v, str) else strip_text(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [strip_text(v) for v in obj]
    return obj


def _strip_json_text(text: str) -> str:
    try:
        parsed = json.loads(text)
    except (json.JSONDecodeError, TypeError, ValueError):
        ids = list(dict.fromkeys(_DOC_ID.findall(text or "")))
        return json.dumps({"text_removed": True, "doc_ids": ids})
    return json.dumps(strip_text(parsed), ensure_ascii=False)


def _strip_args(args: Any) -> Any:
    """Tool-call arguments (a dict or its JSON text) without claims or other article text."""
    if isinstance(args, str):
        try:
            return json.dumps(strip_text(json.loads(args)), ensure_ascii=False)
        except (json.JSONDecodeError, TypeError, ValueError):
            return args
    return strip_text(args)


def strip_message(m: dict[str, Any]) -> dict[str, Any]:
    """One completion message without article text: tool results stripped to doc ids, claims removed
    from recorded actions (JSON content) and from tool-call arguments."""
    m = dict(m)
    content = m.get("content")
    if m.get("role") == "tool" and isinstance(content, str):
        m["content"] = _strip_json_text(content)
    elif m.get("role") == "assistant" and isinstance(content, str) and content.lstrip().startswith("{"):
        m["content"] = _strip_args(content)
    elif isinstance(content, (dict, list)):
        m["content"] = strip_text(content)
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": _strip_args(c["function"].get("arguments"))}}
                           if isinstance(c, dict) and isinstance(c.get("function"), dict) else strip_text(c)
                           for c in calls]
    return m


def _completion_from_steps(steps: list[dict]) -> list[dict[str, str]]:
    """Messages rebuilt from an env trajectory: each action as the assistant, each observation as the tool."""
    out = []
    for st in steps[1:]:
        action = st.get("action")
        out.append({"role": "assistant", "content": action if isinstance(action, str) else json.dumps(action)})
        out.append({"role": "tool", "content": st.get("observation") or ""})
    return out


def trajectory_rows(run_dir: Path, split_ids: set[str], prompts: dict[tuple[str, int], list], include_text: bool,
                    tool_calls: pl.DataFrame | None) -> list[dict[str, Any]]:
    """Verifiers-style rows (prompt, completion, answer, reward, info) of the run's episodes in the split."""
    path = run_dir / "trajectories.jsonl"
    if not path.exists():
        raise RunError(f"{run_dir}: no trajectories.jsonl; is this a finished run directory?")
    labels = {}
    if (run_dir / "events.parquet").exists():
        ev = pl.read_parquet(run_dir / "events.parquet")
        labels = dict(zip(ev["event_id"].to_list(), ev["label"].to_list()))
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        t = json.loads(line)
        if t["event_id"] not in split_ids:
            continue
        msgs = t.get("messages")
        if msgs:
            prompt, completion = msgs[:2], msgs[2:]
        else:
            prompt = prompts.get((t["event_id"], 1)) or []
            completion = _completion_from_steps(t.get("steps") or [])
        completion = [dict(m) if include_text else strip_message(m) for m in completion]
        for m in completion:  # one schema for every row: content a string, tool calls as JSON text
            if not isinstance(m.get("content"), str):
                m["content"] = json.dumps(m.get("content"), default=str) if m.get("content") is not None else ""
            if "tool_calls" in m and not isinstance(m["tool_calls"], str):
                m["tool_calls"] = json.dumps(m["tool_calls"], default=str)
        completion = [{"role": str(m.get("role")), "content": m["content"],
                       "tool_calls": m.get("tool_calls") or "", "tool_call_id": str(m.get("tool_call_id") or "")}
                      for m in completion]
        scored = [s for s in t.get("scores") or [] if not s.get("missing") and s.get("brier") is not None]
        reward = -sum(s["brier"] for s in scored) / len(scored) if scored else 0.0
        calls = []
        if tool_calls is not None and tool_calls.height:
            sub = tool_calls.filter((pl.col("agent") == t["agent"]) & (pl.col("event_id") == t["event_id"])
                                    & (pl.col("rollout") == t["rollout"]))
            calls = sub.select("step", "call_index", "tool", "args_json", "result_doc_ids", "error").to_dicts()
            if not include_text:
                calls = [{**c, "args_json": _strip_args(c["args_json"])} for c in calls]
        rows.append({
            "prompt": [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt],
            "completion": completion,
            "answer": labels.get(t["event_id"]),
            "reward": float(reward),
            "info": json.dumps({"event_id": t["event_id"], "agent": t["agent"], "rollout": t["rollout"],
                                "seed": t.get("seed"), "run_id": t.get("run_id"), "scores": t.get("scores"),
                                "tool_calls": calls}, default=str),
        })
    return rows


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------


def _write(rows: list[dict[str, Any]], out: Path, name: str, formats: Iterable[str],
           progress: bool = True) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    formats = list(formats)
    if "jsonl" in formats:
        p = out / f"{name}.jsonl"
        atomic_write_text(p, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        paths["jsonl"] = str(p)
    if "parquet" in formats or "hf" in formats:
        import datasets

        if not progress:
            datasets.disable_progress_bars()
        ds = datasets.Dataset.from_list(rows) if rows else datasets.Dataset.from_dict({})
        if "parquet" in formats:
            p = out / f"{name}.parquet"
            ds.to_parquet(str(p))
            paths["parquet"] = str(p)
        if "hf" in formats:
            p = out / "hf"
            ds.save_to_disk(str(p))
            paths["hf"] = str(p)
    return paths


def export(workspace: str | Path, split: str, out: str | Path, run_id: str | None = None,
           formats: Sequence[str] = FORMATS, include_text: bool = True, progress: bool = True) -> dict[str, Any]:
    """Export one split's prompts (and a run's trajectories) for SFT / RL; returns rows and paths."""
    formats = [f.strip() for f in formats if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise RunError(f"export formats {bad or formats}: choose from {', '.join(FORMATS)}")
    ws = Workspace.at(workspace)
    out = Path(out)
    split_ids = set(_split_events(ws, split)["event_id"].to_list())
    rows = prompt_rows(ws.root, split)
    _assert_split(rows, split_ids, split, "prompts")
    summary: dict[str, Any] = {"split": split, "rows": {"prompts": len(rows)}, "paths": {}}
    summary["paths"]["prompts"] = _write(rows, out / "prompts", "prompts", formats, progress)
    if run_id is not None:
        run_dir = ws.runs_dir / run_id
        if not run_dir.is_dir():
            raise RunError(f"{run_dir}: no such run; list runs under {ws.runs_dir}")
        prompts = {(json.loads(r["info"])["event_id"], json.loads(r["info"])["step"]): r["prompt"] for r in rows}
        tc = pl.read_parquet(run_dir / "tool_calls.parquet") if (run_dir / "tool_calls.parquet").exists() else None
        traj = trajectory_rows(run_dir, split_ids, prompts, include_text, tc)
        _assert_split(traj, split_ids, split, "trajectories")
        summary["rows"]["trajectories"] = len(traj)
        summary["paths"]["trajectories"] = _write(traj, out / "trajectories", "trajectories", formats, progress)
    if progress:
        print(f"exported {split}: " + ", ".join(f"{k} {v} rows" for k, v in summary["rows"].items()) + f" -> {out}")
    return summary


def _assert_split(rows: list[dict[str, Any]], split_ids: set[str], split: str, what: str) -> None:
    """No row of another split may ever be written (a train export never holds an eval event)."""
    leaked = sorted({json.loads(r["info"])["event_id"] for r in rows} - split_ids)
    if leaked:
        raise RunError(f"export {what}: events {', '.join(leaked[:5])} are not in split {split!r}; nothing written")
