"""The run viewer's index of a run's parts: `run_dir/viewer_index.parquet`, so a question page reads only the part
files (or the byte ranges of them) that concern its question, never the whole run.

One row per thing a question page reads:

    kind   "part"   an episode part (runner, MCP harness, trainer sessions): the whole file concerns `event_id`
           "world"  a world part (one per agent x rollout): `event_id` is the world id; nothing to read by itself
           "call"   a world part's tool call attributed to question `event_id`: `start`/`end` are the byte range
                    of the call's element of `tool_calls`, `step_start`/`step_end` that of the step it produced
                    (`steps[pos + 1]`), `day`/`date` the world day it was made on
           "note"   a world part's notebook entry tagged with question `event_id` (`start`/`end`: its element;
                    `day`/`date`: the day it was created)
           "chat"   a world LLM agent's chat of one day (`start`/`end`: its messages; no `event_id`)
           "skip"   a part that could not be read (truncated, not JSON): `note` says so; the viewer skips it
           "warn"   what a readable world part lacks (`note`: e.g. tool results that cannot be paired with calls)
    agent, rollout, part (the path relative to the run directory), pos (the call's or entry's position)

World attribution follows the evidence diagnostics (eval/report/evidence.py): a reading segment is the run of one
day's calls after that day's previous successful `forecast` (or the day's start) up to a successful
`forecast(question_id)`, attributed to that question; a `notebook_add` whose `question_ids` name a question is
attributed to it too.

The index is built on the first view (`load_index`) and rebuilt when the parts changed since: its Parquet metadata
keeps a signature of the parts folder (the number of part folders and the newest modification time among the
folders; the run store writes parts by renaming into place, which touches the folder). It is written atomically and
is the one file the viewer writes; when the run directory is not writable the index is kept in memory and
`IndexResult.note` says so.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from forecast_env.store import atomic_write_table

#: The index file, inside the run directory.
INDEX_NAME = "viewer_index.parquet"
#: Bumped when the index's layout or its attribution rule changes (an older index is rebuilt).
INDEX_VERSION = 3

SCHEMA = pa.schema([
    ("kind", pa.string()),
    ("event_id", pa.string()),
    ("agent", pa.string()),
    ("rollout", pa.int32()),
    ("part", pa.string()),
    ("pos", pa.int32()),
    ("day", pa.int32()),
    ("date", pa.string()),
    ("start", pa.int64()),
    ("end", pa.int64()),
    ("step_start", pa.int64()),
    ("step_end", pa.int64()),
    ("note", pa.string()),
])

_WS = re.compile(r"[ \t\n\r]*")
_PART = re.compile(r"r(\d+)\.json")
_DECODER = json.JSONDecoder()


@dataclass
class IndexResult:
    """The index of one run: its rows, whether it was (re)built now, and a note (e.g. kept in memory only)."""

    table: pl.DataFrame
    built: bool
    notes: list[str]


def safe_name(name: str) -> str:
    """The folder name the run store gives a label or event id (`store._safe`)."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name)[:120] or "_"


def parts_signature(run_dir: Path) -> dict[str, int]:
    """What says whether the parts changed: the number of part folders and their newest mtime (ns)."""
    parts = run_dir / "parts"
    n, newest = 0, 0
    try:
        newest = parts.stat().st_mtime_ns
    except OSError:
        return {"folders": 0, "mtime_ns": 0}
    for agent in _dirs(parts):
        newest = max(newest, agent.stat().st_mtime_ns)
        for event in _dirs(agent):
            n += 1
            newest = max(newest, event.stat().st_mtime_ns)
    return {"folders": n, "mtime_ns": newest}


def _dirs(folder: Path | os.DirEntry[str]) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return sorted((e for e in it if e.is_dir(follow_symlinks=False)), key=lambda e: e.name)
    except OSError:
        return []


def _read_meta(path: Path) -> dict[str, Any] | None:
    try:
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta.get(b"viewer_index", b"null"))
    except (OSError, ValueError, pa.ArrowException):
        return None


def load_index(run_dir: str | Path, labels: Iterable[str] = (), event_ids: Iterable[str] = (),
               world: bool = False) -> IndexResult:
    """The run's index: read from `viewer_index.parquet` when it matches the parts, else built (and written when the
    run directory is writable). `labels` and `event_ids` (the run's agents and events) name the part folders
    without opening the parts; `world` says the parts are whole worlds (their calls are attributed per question)."""
    run_dir = Path(run_dir)
    path = run_dir / INDEX_NAME
    sig = {"version": INDEX_VERSION, **parts_signature(run_dir)}
    if path.exists() and _read_meta(path) == sig:
        try:
            return IndexResult(pl.read_parquet(path), built=False, notes=[])
        except (OSError, pl.exceptions.PolarsError):
            pass
    notes: list[str] = []
    rows = build_rows(run_dir, labels, event_ids, world)
    table = pa.Table.from_pylist(rows, schema=SCHEMA) if rows else SCHEMA.empty_table()
    table = table.replace_schema_metadata({"viewer_index": json.dumps(sig)})
    try:
        atomic_write_table(path, table)
    except OSError as exc:
        notes.append(f"{run_dir} is not writable ({exc.strerror or exc}): the viewer's index is kept in memory "
                     "and rebuilt at every start")
    return IndexResult(pl.from_arrow(table), built=True, notes=notes)  # type: ignore[arg-type]


def build_rows(run_dir: Path, labels: Iterable[str], event_ids: Iterable[str], world: bool) -> list[dict[str, Any]]:
    """Every index row of the run's parts (see the module docstring); an unreadable part gets a "skip" row."""
    agent_of = {safe_name(x): x for x in labels}
    event_of = {safe_name(x): x for x in event_ids}
    rows: list[dict[str, Any]] = []
    for agent_dir in _dirs(run_dir / "parts"):
        for event_dir in _dirs(agent_dir):
            for name in sorted(os.listdir(event_dir.path)):
                m = _PART.fullmatch(name)
                if m is None:
                    continue
                path = Path(event_dir.path) / name
                rel = path.relative_to(run_dir).as_posix()
                agent, event = agent_of.get(agent_dir.name), event_of.get(event_dir.name)
                if world:
                    rows += world_rows(path, rel, agent or agent_dir.name)
                    continue
                if agent is None or event is None:  # a folder name that is not one of the run's: ask the part
                    head = part_head(path)
                    if head is None:
                        rows.append({"kind": "skip", "agent": agent or agent_dir.name, "event_id": event,
                                     "rollout": int(m.group(1)), "part": rel,
                                     "note": f"{rel} is unreadable (truncated or not JSON); skipped"})
                        continue
                    agent, event = str(head.get("agent", agent_dir.name)), str(head.get("event_id", event_dir.name))
                rows.append({"kind": "part", "event_id": event, "agent": agent, "rollout": int(m.group(1)),
                             "part": rel})
    return rows


def part_head(path: Path) -> dict[str, Any] | None:
    """The agent, event id and rollout of a part, read from its first top-level keys (None when unreadable)."""
    try:
        raw = path.read_bytes()
        values, _ = scan_object(raw, want=("agent", "event_id", "rollout"), spans_of=())
        return values
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------------------------
# the byte ranges of a part's top-level arrays
# ---------------------------------------------------------------------------------------------


def _skip(s: str, i: int) -> int:
    m = _WS.match(s, i)
    return m.end() if m else i


def scan_object(raw: bytes, want: Iterable[str], spans_of: Iterable[str]) -> tuple[dict[str, Any],
                                                                                      dict[str, list[tuple[int, int]]]]:
    """The top-level values named in `want` (decoded) and, for the arrays named in `spans_of`, the byte range of each
    element, of the JSON object in `raw`. The text is scanned as Latin-1 (one character per byte, so offsets are byte
    offsets; JSON's structure is ASCII); values are decoded from their UTF-8 bytes. ValueError/IndexError when it is
    not a whole JSON object (a truncated part)."""
    want, spans_of = set(want), set(spans_of)
    s = raw.decode("latin-1")
    values: dict[str, Any] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    i = _skip(s, 0)
    if s[i] != "{":
        raise ValueError("not a JSON object")
    i = _skip(s, i + 1)
    while s[i] != "}":
        key_start = i
        _, i = _DECODER.raw_decode(s, i)
        key = json.loads(raw[key_start:i].decode("utf-8"))
        i = _skip(s, i)
        if s[i] != ":":
            raise ValueError(f"expected ':' at byte {i}")
        i = _skip(s, i + 1)
        if key in spans_of and s[i] == "[":
            elems: list[tuple[int, int]] = []
            i = _skip(s, i + 1)
            while s[i] != "]":
                _, end = _DECODER.raw_decode(s, i)
                elems.append((i, end))
                i = _skip(s, end)
                if s[i] == ",":
                    i = _skip(s, i + 1)
            i += 1
            spans[key] = elems
        else:
            start = i
            _, i = _DECODER.raw_decode(s, i)
            if key in want:
                values[key] = json.loads(raw[start:i].decode("utf-8"))
        i = _skip(s, i)
        if s[i] == ",":
            i = _skip(s, i + 1)
        elif s[i] != "}":
            raise ValueError(f"expected ',' or '}}' at byte {i}")
    return values, spans


def _args(call: Mapping[str, Any]) -> dict[str, Any]:
    try:
        args = json.loads(call.get("args_json") or "{}")
    except (TypeError, ValueError):
        return {}
    return args if isinstance(args, dict) else {}


def world_rows(path: Path, rel: str, folder_agent: str) -> list[dict[str, Any]]:
    """The index rows of one world part (see the module docstring)."""
    try:
        raw = path.read_bytes()
        values, spans = scan_object(raw, want=("agent", "event_id", "rollout", "days"),
                                    spans_of=("tool_calls", "steps", "notebook", "messages"))
        calls = [json.loads(raw[a:b].decode("utf-8")) for a, b in spans.get("tool_calls", [])]
    except (OSError, ValueError, IndexError):
        return [{"kind": "skip", "agent": folder_agent, "part": rel,
                 "note": f"{rel} is unreadable (truncated or not JSON); this world's calls are not shown"}]
    agent, rollout = str(values.get("agent")), int(values.get("rollout") or 0)
    base = {"agent": agent, "rollout": rollout, "part": rel}
    rows: list[dict[str, Any]] = [{"kind": "world", "event_id": str(values.get("event_id")), **base}]
    notes: list[str] = []
    dates = {int(d["day"]): str(d["date"])[:10] for d in values.get("days") or [] if "day" in d}
    steps = spans.get("steps", [])
    aligned = len(steps) == len(calls) + 1
    if not aligned:
        notes.append(f"{rel}: {len(steps)} steps for {len(calls)} tool calls; tool results are not shown")

    def call_row(pos: int, qid: str) -> dict[str, Any]:
        day = int(calls[pos].get("step") or 0)
        a, b = spans["tool_calls"][pos]
        sa, sb = steps[pos + 1] if aligned else (None, None)
        return {"kind": "call", "event_id": qid, **base, "pos": pos, "day": day, "date": dates.get(day),
                "start": a, "end": b, "step_start": sa, "step_end": sb}

    segment: list[int] = []
    day_now: Any = None
    seen: set[tuple[int, str]] = set()
    for pos, call in enumerate(calls):
        if call.get("step") != day_now:
            segment, day_now = [], call.get("step")
        segment.append(pos)
        args = _args(call)
        if call.get("tool") == "notebook_add" and call.get("error") is None:
            for qid in args.get("question_ids") or []:
                if isinstance(qid, str) and (pos, qid) not in seen:
                    seen.add((pos, qid))
                    rows.append(call_row(pos, qid))
        if call.get("tool") == "forecast" and call.get("error") is None and isinstance(args.get("question_id"), str):
            qid = args["question_id"]
            for p in segment:
                if (p, qid) not in seen:
                    seen.add((p, qid))
                    rows.append(call_row(p, qid))
            segment = []
    rows += _chat_rows(raw, spans.get("messages", []), calls, base, dates, rel, notes)
    rows += [{"kind": "warn", **base, "note": note} for note in notes]
    for pos, (a, b) in enumerate(spans.get("notebook", [])):
        try:
            entry = json.loads(raw[a:b].decode("utf-8"))
        except ValueError:
            continue
        for qid in entry.get("question_ids") or []:
            if isinstance(qid, str):
                day = entry.get("created_step")
                rows.append({"kind": "note", "event_id": qid, **base, "pos": pos, "day": day,
                             "date": dates.get(day) if isinstance(day, int) else None, "start": a, "end": b})
    return rows


def _chat_rows(raw: bytes, messages: list[tuple[int, int]], calls: list[dict[str, Any]], base: dict[str, Any],
               dates: dict[int, str], rel: str, notes: list[str]) -> list[dict[str, Any]]:
    """A world LLM agent's transcript, one chat per day it acted on (each opens with a system message): one "chat"
    row per day with the byte range from the chat's first message to its last (the elements between are the
    chat's, so `[` + range + `]` is the chat as a JSON array)."""
    if not messages:
        return []
    starts = []
    for pos, (a, b) in enumerate(messages):
        try:
            role = json.loads(raw[a:b].decode("utf-8")).get("role")
        except (ValueError, AttributeError):
            role = None
        if role == "system":
            starts.append(pos)
    days: list[int] = []
    for call in calls:
        day = call.get("step")
        if isinstance(day, int) and (not days or days[-1] != day):
            days.append(day)
    if not starts or starts[0] != 0 or len(starts) != len(days):
        notes.append(f"{rel}: the agent's transcript does not split into one chat per day ({len(starts)} chats, "
                     f"{len(days)} days); its messages are not shown")
        return []
    ends = [*starts[1:], len(messages)]
    return [{"kind": "chat", "event_id": None, **base, "pos": k, "day": day, "date": dates.get(day),
             "start": messages[first][0], "end": messages[last - 1][1]}
            for k, (day, first, last) in enumerate(zip(days, starts, ends))]


def read_ranges(path: Path, ranges: Iterable[tuple[int, int]]) -> list[bytes]:
    """The bytes of each (start, end) range of one file, read through one open file."""
    out = []
    with open(path, "rb") as fh:
        for a, b in ranges:
            fh.seek(a)
            out.append(fh.read(b - a))
    return out
