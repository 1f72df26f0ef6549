"""Training-data export (docs/design.md §7): prompts per (event, forecast date) and recorded trajectories.

`export(WS, split, out)` writes, for ONE split only (a train export never holds an eval event:
checked row by row before anything is written):

    out/prompts/{hf/, prompts.parquet, prompts.jsonl}
        prompt (chat messages: system + user with question, description as of the date, options,
        date window), options, forecast_date, window_start, window_end, answer (label), info (JSON:
        event_id, step, steps_total, type, category, split)
    out/trajectories/{hf/, trajectories.parquet, trajectories.jsonl}      (with run_id)
        verifiers-style rows, ONE PER SESSION (docs/design.md §7 "Export unit"): an (event, forecast
        date) of an episode run, a day of a world run. prompt = the session's opening messages
        (system, and the date's observation), completion = the rest of that session only (never a
        later date's messages), answer (the label; world: {question_id: label} of the day's scored
        questions), reward (-Brier of the date; world: -mean Brier of the day's scored rows, None
        when none), info (JSON: event_id, event_ids, agent, rollout, seed, session, step,
        forecast_date, source, the session's scores and tool calls)

`include_text=False` keeps doc ids and drops article text, for corpora whose text may not be
redistributed: titles, summaries, bodies, urls and snippets in tool results, and notebook claims
wherever they appear (the notebook in observations, `notebook_add` arguments in the recorded
actions and tool calls), since an agent may copy article text into a claim. Free-text assistant
messages of an LLM agent are kept: they are the model's own output, but may quote what it read.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl

from forecast_env.config import load_config
from forecast_env.errors import RunError
from forecast_env.eval.runs.store import read_record
from forecast_env.store import Workspace, atomic_write_text

FORMATS = ("hf", "parquet", "jsonl")
TEXT_KEYS = ("title", "summary", "body", "url", "text", "snippet", "claim")
log = logging.getLogger(__name__)
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
    from forecast_env.envs.events.build import load_events

    if split not in ("train", "eval"):
        raise RunError(f"export split {split!r}: choose train or eval (one split per export)")
    return load_events(ws.root).events.filter(pl.col("split") == split)


def prompt_rows(workspace: str | Path, split: str) -> list[dict[str, Any]]:
    """One row per (event, forecast date) of `split`."""
    from forecast_env.envs.events.build import description_as_of, load_events

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


def _strip_embedded_observation(text: str) -> str:
    """A user message that carries an observation after a line of its own (an LLM session's opening,
    with the notebook's claims): the observation's article text removed, the words around it kept."""
    i = text.find("{")
    if i < 0:
        return text
    try:
        parsed, end = json.JSONDecoder().raw_decode(text[i:])
    except (json.JSONDecodeError, ValueError):
        ids = list(dict.fromkeys(_DOC_ID.findall(text)))
        return text[:i] + json.dumps({"text_removed": True, "doc_ids": ids})
    return text[:i] + json.dumps(strip_text(parsed), ensure_ascii=False) + text[i + end:]


def strip_message(m: dict[str, Any]) -> dict[str, Any]:
    """One message without article text: tool results stripped to doc ids, observations in user messages
    stripped likewise, claims removed from recorded actions (JSON content) and from tool-call arguments."""
    m = dict(m)
    content = m.get("content")
    if m.get("role") == "tool" and isinstance(content, str):
        m["content"] = _strip_json_text(content)
    elif m.get("role") == "user" and isinstance(content, str):
        m["content"] = _strip_embedded_observation(content)
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


@dataclass
class Session:
    """One session of a recorded episode: a forecast date (episode mode) or a day (world mode)."""

    number: int  # 1-based, in the episode's order
    day: str  # ISO date the session was played on
    step: int | None  # the date's step (episode) or the day's index (world)
    opening: str  # the observation the session opened with
    turns: list[tuple[Any, str]] = field(default_factory=list)  # (action, observation after it)
    skipped: bool = False  # ended by an infrastructure failure (`skip_date`): nothing to learn from


def _fields(observation: str) -> dict[str, Any]:
    try:
        parsed = json.loads(observation)
    except (json.JSONDecodeError, TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def split_sessions(steps: Sequence[Mapping[str, Any]], world: bool, where: str = "") -> list[Session]:
    """The sessions of an env trajectory (`steps[0]` is the reset): a session is the run of observations
    with one date that the agent acted on. The observation after a session's last action belongs to the
    next date (or ends the episode), so it is not part of the session."""
    sessions: list[Session] = []
    for i in range(len(steps) - 1):
        obs = str(steps[i].get("observation") or "")
        o = _fields(obs)
        day, step = str(o.get("date" if world else "forecast_date") or "")[:10], o.get("day" if world else "step")
        if not day:
            raise RunError(f"{where}: step {i} of the trajectory has an observation without its date; the run's "
                           "trajectories.jsonl is damaged: rerun the run (a new --run-id) to record it again")
        if not sessions or (day, step) != (sessions[-1].day, sessions[-1].step):
            sessions.append(Session(len(sessions) + 1, day, step, obs))
        action = steps[i + 1].get("action")
        if isinstance(action, Mapping) and set(action) == {"skip_date"}:
            sessions[-1].skipped = True
            continue
        sessions[-1].turns.append((action, str(steps[i + 1].get("observation") or "")))
    return sessions


def _steps_completion(session: Session) -> list[dict[str, Any]]:
    """A session rebuilt from the env's record: each action as the assistant, each observation it got as
    the tool, up to the session's last action (whose observation is the next date's)."""
    out: list[dict[str, Any]] = []
    for j, (action, obs) in enumerate(session.turns):
        out.append({"role": "assistant", "content": action if isinstance(action, str) else json.dumps(action)})
        if j < len(session.turns) - 1:
            out.append({"role": "tool", "content": obs})
    return out


def split_chats(messages: Sequence[Any]) -> list[list[dict[str, Any]]]:
    """An agent's transcript cut into sessions, each opening with its system message; [] when the
    transcript is not of that shape (it then cannot be matched to the dates)."""
    chats: list[list[dict[str, Any]]] = []
    for m in messages:
        if not isinstance(m, Mapping):
            return []
        if m.get("role") == "system":
            chats.append([dict(m)])
        elif chats:
            chats[-1].append(dict(m))
        else:
            return []
    return chats


def chat_sample(chat: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(prompt, completion) of one session's chat: the prompt is what opens it (system and the date's
    observation), the completion runs from the first to the last assistant message. What follows the last
    assistant message was added when the next date had begun (the answer to the call that ended the date
    carries the next date's observation), so it belongs to no session."""
    roles = [m.get("role") for m in chat]
    if "assistant" not in roles:
        return chat, []
    first = roles.index("assistant")
    last = len(roles) - 1 - roles[::-1].index("assistant")
    return chat[:first], chat[first:last + 1]


def _flat(messages: list[dict[str, Any]], include_text: bool) -> list[dict[str, str]]:
    """One schema for every message: content a string, tool calls as JSON text."""
    out = []
    for m in messages:
        m = dict(m) if include_text else strip_message(m)
        content = m.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, default=str) if content is not None else ""
        calls = m.get("tool_calls") or ""
        out.append({"role": str(m.get("role")), "content": content,
                    "tool_calls": calls if isinstance(calls, str) else json.dumps(calls, default=str),
                    "tool_call_id": str(m.get("tool_call_id") or "")})
    return out


@dataclass
class TrajectoryExport:
    """The samples of a run's trajectories and what was left out (counted, with the reason)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped_sessions: int = 0  # ended by an infrastructure failure, or nothing was done
    other_split_days: int = 0  # world days listing a question of another split
    days_without_questions: int = 0  # world days on which no question was listed
    rebuilt_from_steps: int = 0  # episodes whose agent transcript did not split into one chat per session


def _listed(world_questions: pl.DataFrame | None, agent: str, rollout: int, day: str) -> list[str]:
    if world_questions is None or world_questions.height == 0:
        return []
    d = date.fromisoformat(day)
    q = world_questions.filter((pl.col("agent") == agent) & (pl.col("rollout") == rollout)
                               & (pl.col("first_day") <= d) & (pl.col("last_day") >= d))
    return sorted(q["event_id"].to_list())


def trajectory_rows(run_dir: Path, split_ids: set[str], include_text: bool, tool_calls: pl.DataFrame | None,
                    system: str) -> TrajectoryExport:
    """One sample per session of the run's episodes in the split (docs/design.md §7 "Export unit"): per
    (event, forecast date) in episode mode, per day in world mode. prompt = the session's opening messages,
    completion = the rest of that session only; reward = minus the Brier of the session's scored rows."""
    path = run_dir / "trajectories.jsonl"
    if not path.exists():
        raise RunError(f"{run_dir}: no trajectories.jsonl; is this a finished run directory?")
    meta = read_record(run_dir, missing_ok=True)
    world = meta.get("mode") == "world"
    labels = {}
    if (run_dir / "events.parquet").exists():
        ev = pl.read_parquet(run_dir / "events.parquet")
        labels = dict(zip(ev["event_id"].to_list(), ev["label"].to_list()))
    wq_path = run_dir / "world_questions.parquet"
    world_questions = pl.read_parquet(wq_path) if world and wq_path.exists() else None
    out = TrajectoryExport()
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        t = json.loads(line)
        if not world and t["event_id"] not in split_ids:
            continue
        sessions = split_sessions(t.get("steps") or [], world, f"{path}:{n}")
        chats = split_chats(t.get("messages") or [])
        use_chats = bool(chats) and len(chats) == len(sessions)
        if t.get("messages") and not use_chats:
            out.rebuilt_from_steps += 1
        for k, session in enumerate(sessions):
            if use_chats:
                prompt, completion = chat_sample(chats[k])
            else:
                prompt = [{"role": "system", "content": system}, {"role": "user", "content": session.opening}]
                completion = _steps_completion(session)
            if session.skipped or not completion:
                out.skipped_sessions += 1
                continue
            if world:
                listed = _listed(world_questions, t["agent"], t["rollout"], session.day)
                if not listed:  # nothing to forecast that day: the agent could only move the clock on
                    out.days_without_questions += 1
                    continue
                if not set(listed) <= split_ids:
                    out.other_split_days += 1
                    continue
                scores = [s for s in t.get("scores") or [] if str(s.get("forecast_date"))[:10] == session.day]
            else:
                listed = [t["event_id"]]
                scores = [s for s in t.get("scores") or [] if s.get("step") == session.step]
            scored = [s for s in scores if not s.get("missing") and s.get("brier") is not None]
            if not world and not scored:  # the date's report never arrived: nothing to learn from
                out.skipped_sessions += 1
                continue
            calls = []
            if tool_calls is not None and tool_calls.height:
                sub = tool_calls.filter((pl.col("agent") == t["agent"]) & (pl.col("event_id") == t["event_id"])
                                        & (pl.col("rollout") == t["rollout"]) & (pl.col("step") == session.step))
                calls = sub.select("step", "call_index", "tool", "args_json", "result_doc_ids", "error").to_dicts()
                if not include_text:
                    calls = [{**c, "args_json": _strip_args(c["args_json"])} for c in calls]
            info = {"event_id": t["event_id"], "event_ids": listed, "agent": t["agent"], "rollout": t["rollout"],
                    "seed": t.get("seed"), "run_id": t.get("run_id"), "mode": "world" if world else "episode",
                    "session": session.number, "step": session.step, "forecast_date": session.day,
                    "source": "agent transcript" if use_chats else "environment steps", "scores": scores,
                    "tool_calls": calls}
            answer = (json.dumps({s["event_id"]: labels.get(s["event_id"]) for s in scored}) if world
                      else labels.get(t["event_id"]))
            out.rows.append({
                "prompt": [{"role": m["role"], "content": m["content"]} for m in _flat(prompt, include_text)],
                "completion": _flat(completion, include_text),
                "answer": answer,
                "reward": -sum(s["brier"] for s in scored) / len(scored) if scored else None,
                "info": json.dumps(info, default=str),
            })
    return out


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
        tc = pl.read_parquet(run_dir / "tool_calls.parquet") if (run_dir / "tool_calls.parquet").exists() else None
        traj = trajectory_rows(run_dir, split_ids, include_text, tc, _system_prompt())
        _assert_split(traj.rows, split_ids, split, "trajectories")
        summary["rows"]["trajectories"] = len(traj.rows)
        summary["left_out"] = {"skipped_sessions": traj.skipped_sessions, "other_split_days": traj.other_split_days,
                               "days_without_questions": traj.days_without_questions,
                               "rebuilt_from_steps": traj.rebuilt_from_steps}
        if traj.rebuilt_from_steps:
            log.warning("export: %d episode transcripts did not split into one chat per session; their samples "
                        "were rebuilt from the environment's steps", traj.rebuilt_from_steps)
        summary["paths"]["trajectories"] = _write(traj.rows, out / "trajectories", "trajectories", formats, progress)
    if progress:
        left = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in (summary.get("left_out") or {}).items() if v)
        print(f"exported {split}: " + ", ".join(f"{k} {v} rows" for k, v in summary["rows"].items())
              + (f" (left out: {left})" if left else "") + f" -> {out}")
    return summary


def _assert_split(rows: list[dict[str, Any]], split_ids: set[str], split: str, what: str) -> None:
    """No row of another split may ever be written (a train export never holds an eval event)."""
    leaked = sorted({e for r in rows for e in (json.loads(r["info"]).get("event_ids")
                                               or [json.loads(r["info"])["event_id"]])} - split_ids)
    if leaked:
        raise RunError(f"export {what}: events {', '.join(leaked[:5])} are not in split {split!r}; nothing written")
