"""`forecast-env play`: forecast one episode yourself in the terminal, with the agent's tools.

A small REPL over standard input (so a script or a test can drive it):

    search <query>                      search the corpus as of the forecast date
    open <doc_id>                       read an article
    note <claim> | <date> | <doc ids>   add a notebook entry (doc ids separated by spaces or commas)
    supersede <entry id> <reason>       mark a notebook entry superseded
    forecast <option>=<p> ...           report (quote options with spaces: "Bob Jones"=0.2),
                                        or `forecast 0.7 0.3` aligned with the options
    notebook                            show the notebook
    help                                this text
    quit                                stop

World mode (`--world`: every question of the split on one clock) changes and adds:

    forecast <question id> <option>=<p> ...   set a question's standing forecast (or aligned numbers)
    note <claim> | <date> | <doc ids> | <question ids>   the last part is optional
    show <question id>                  the full question with its description as of today
    page <n>                            another page of today's question list
    next                                end the day
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any, TextIO

from forecast_env.cli.common import add_common, section_config

HELP = __doc__.split("\n\n", 2)[2].rstrip() if __doc__ else ""
USAGE_FORECAST = "usage: forecast <option>=<p> ...  or  forecast <p1> <p2> ..."


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("play", help="forecast an episode yourself in the terminal (same tools as agents)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", required=True, help="workspace folder with index and events")
    p.add_argument("--event", default=None, help="event id (default: a random event of the split)")
    p.add_argument("--split", default=None, choices=("train", "eval", "all"), help="event split (default: eval)")
    p.add_argument("--seed", type=int, default=None, help="seed of the event choice")
    p.add_argument("--world", action="store_true", help="world mode: every question of the split on one clock")
    p.add_argument("--start", default=None, help="world mode: first day (default: the split's first)")
    p.add_argument("--end", default=None, help="world mode: last day (default: the split's last)")
    add_common(p, ["env"])
    p.set_defaults(func=run)


def parse_command(line: str, world: bool = False) -> tuple[dict[str, Any] | None, str | None]:
    """A REPL line -> (action for the env, or None; a message for the person, or None)."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None, None
    cmd, _, rest = line.partition(" ")
    cmd, rest = cmd.lower(), rest.strip()
    if cmd in ("help", "?"):
        return None, HELP
    if world:
        action, note = _world_command(cmd, rest)
        if action is not None or note is not None:
            return action, note
    if cmd == "search":
        if not rest:
            return None, "usage: search <query>"
        return {"tool": "search", "args": {"query": rest}}, None
    if cmd == "open":
        if not rest:
            return None, "usage: open <doc_id>"
        return {"tool": "open_article", "args": {"doc_id": rest.split()[0]}}, None
    if cmd == "note":
        parts = [p.strip() for p in rest.split("|")]
        if len(parts) != 3 or not parts[0]:
            return None, "usage: note <claim> | <date observed, YYYY-MM-DD> | <doc ids>"
        doc_ids = [d for d in parts[2].replace(",", " ").split() if d]
        return {"tool": "notebook_add", "args": {"claim": parts[0], "date_observed": parts[1], "doc_ids": doc_ids}}, None
    if cmd == "supersede":
        entry, _, reason = rest.partition(" ")
        if not entry.isdigit() or not reason.strip():
            return None, "usage: supersede <entry id> <reason>"
        return {"tool": "notebook_supersede", "args": {"entry_id": int(entry), "reason": reason.strip()}}, None
    if cmd == "forecast":
        try:
            tokens = shlex.split(rest)
        except ValueError as exc:
            return None, f"could not read the forecast ({exc}); usage: forecast Yes=0.7 No=0.3"
        probs, note = _probabilities(tokens)
        return ({"tool": "forecast", "args": {"probabilities": probs}}, None) if probs is not None else (None, note)
    return None, f"unknown command {cmd!r}; type `help`"


def _probabilities(tokens: list[str]) -> tuple[dict[str, float] | list[float] | None, str | None]:
    """`Yes=0.7 No=0.3` or `0.7 0.3` -> (probabilities, None), or (None, what was wrong)."""
    if not tokens:
        return None, USAGE_FORECAST
    if all("=" not in t for t in tokens):
        try:
            return [float(t) for t in tokens], None
        except ValueError:
            return None, USAGE_FORECAST
    probs: dict[str, float] = {}
    for t in tokens:
        label, sep, value = t.rpartition("=")
        if not sep or not label:
            return None, f"could not read {t!r}; write <option>=<probability>"
        try:
            probs[label] = float(value)
        except ValueError:
            return None, f"could not read the probability in {t!r}"
    return probs, None


def _world_command(cmd: str, rest: str) -> tuple[dict[str, Any] | None, str | None]:
    """World mode's own commands; (None, None) for the commands it shares with episode mode."""
    if cmd == "next":
        return {"tool": "next_day", "args": {}}, None
    if cmd == "show":
        return ({"tool": "get_question", "args": {"question_id": rest.split()[0]}}, None) if rest else \
            (None, "usage: show <question id>")
    if cmd == "page":
        return ({"tool": "list_questions", "args": {"page": int(rest)}}, None) if rest.isdigit() else \
            (None, "usage: page <n>")
    if cmd == "forecast":
        try:
            tokens = shlex.split(rest)
        except ValueError as exc:
            return None, f"could not read the forecast ({exc}); usage: forecast <question id> Yes=0.7 No=0.3"
        if len(tokens) < 2:
            return None, "usage: forecast <question id> <option>=<p> ...  or  forecast <question id> <p1> <p2> ..."
        probs, note = _probabilities(tokens[1:])
        if probs is None:
            return None, note
        return {"tool": "forecast", "args": {"question_id": tokens[0], "probabilities": probs}}, None
    if cmd == "note" and rest.count("|") == 3:
        claim, day, docs, qids = (p.strip() for p in rest.split("|"))
        if not claim:
            return None, "usage: note <claim> | <date observed, YYYY-MM-DD> | <doc ids> | <question ids>"
        return {"tool": "notebook_add", "args": {
            "claim": claim, "date_observed": day, "doc_ids": [d for d in docs.replace(",", " ").split() if d],
            "question_ids": [q for q in qids.replace(",", " ").split() if q]}}, None
    return None, None


def _header(info: dict[str, Any], out: TextIO) -> None:
    print(f"\n=== {info['forecast_date']}  (date {info['step']} of {info['steps_total']}) ===", file=out)
    print(f"Question: {info['question']}", file=out)
    if info.get("description"):
        print(f"Description: {info['description']}", file=out)
    print(f"Options: {', '.join(info['options'])}", file=out)
    if "market_previous_day" in info:
        print(f"Market (previous day): {info['market_previous_day']}", file=out)
    print(f"Tool calls left today: {info['budget_left']}", file=out)


def _show_result(tool: str, info: dict[str, Any], out: TextIO) -> None:
    if info.get("error"):
        print(f"error: {info['error']}", file=out)
    res = info.get("tool_result")
    if isinstance(res, dict) and "hits" in res:
        if not res["hits"]:
            print("no hits", file=out)
        for h in res["hits"]:
            print(f"[{h['rank']}] {h['doc_id']}  {h['day']}  {h['title']}", file=out)
            if h.get("summary"):
                print(f"     {h['summary'][:200]}", file=out)
    elif isinstance(res, dict) and "body" in res:
        print(f"{res['title']} ({res['day']}, {res['url']})\n\n{res['body']}", file=out)
        if res.get("body_truncated"):
            print("[article cut]", file=out)
    elif isinstance(res, dict) and ("added" in res or "superseded" in res):
        entry = res.get("added") or res.get("superseded") or {}
        print(f"notebook entry {entry.get('entry_id')}: {entry.get('status')}", file=out)
    elif isinstance(res, dict) and res.get("recorded"):
        print(f"forecast recorded for {res['forecast_date']}: {res['probabilities']}", file=out)
    if info.get("message"):
        print(info["message"], file=out)


def _show_notebook(info: dict[str, Any], out: TextIO) -> None:
    if not info["notebook"]:
        print("notebook is empty", file=out)
    for e in info["notebook"]:
        mark = "" if e["status"] == "active" else f" [superseded: {e['superseded_reason']}]"
        print(f"{e['entry_id']}. {e['claim']} ({e['date_observed']}; {', '.join(e['doc_ids'])}){mark}", file=out)


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def show_scores(info: dict[str, Any], reward: float, out: TextIO, outcome: str | None = None) -> None:
    """The scores at the end: per date of an episode (then its `outcome`), or per question of a world
    (`info["question_scores"]`), then the final reward."""
    if "question_scores" in info:
        print("\nThe world is over. Scores per question (Brier on its scheduled dates; time-weighted over "
              "its listed days):", file=out)
        rows = [f"{q['event_id']}  Brier {_num(q['brier'], '.3f')}  time-weighted "
                f"{_num(q['time_weighted_brier'], '.3f')}" for q in info["question_scores"]]
        final = f"Final reward: {reward:.4f}; time-weighted Brier {_num(info['time_weighted_brier'], '.4f')}"
    else:
        print("\nEpisode finished. Scores per date (Brier: lower is better; 0 = certain and right):", file=out)
        rows = [f"{s['forecast_date']}  Brier {s['brier']:.3f}  accuracy {s['accuracy']:.2f}  log vs market "
                f"{_num(s['log_vs_market'], '+.3f')}" + (f"  (fallback: {s['fallback']})" if s["fallback"] else "")
                for s in info.get("scores", [])]
        final = f"Final reward: {reward:.4f}"
    for row in rows:
        print(f"  {row}", file=out)
    print(final, file=out)
    if outcome is not None:
        print(f"Outcome: {outcome}", file=out)


def play(env: Any, stdin: TextIO, out: TextIO, seed: int | None = None, event_id: str | None = None) -> bool:
    """Run the REPL until the episode ends or input ends; True when the episode finished."""
    _, info = env.reset(seed=seed, options={"event_id": event_id} if event_id else None)
    print("forecast-env play: type `help` for the commands.", file=out)
    _header(info, out)
    step = info["step"]
    for raw in stdin:
        action, note = parse_command(raw)
        if note:
            print(note, file=out)
        if raw.strip().lower() in ("quit", "exit"):
            break
        if raw.strip().lower() == "notebook":
            _show_notebook(info, out)
            continue
        if action is None:
            continue
        _, reward, terminated, _, info = env.step(action)
        _show_result(action["tool"], info, out)
        if terminated:
            show_scores(info, reward, out, outcome=env.unwrapped.current_event.label)
            return True
        if info["step"] != step:
            step = info["step"]
            _header(info, out)
        else:
            print(f"({info['budget_left']} tool calls left today)", file=out)
    print("input ended before the episode finished.", file=out)
    return False


def _world_header(info: dict[str, Any], out: TextIO) -> None:
    page = info["questions_page"]
    print(f"\n=== {info['date']}  (day {info['day']} of {info['days_total']}; {page['listed']} questions listed, "
          f"page {page['page']} of {page['pages']}) ===", file=out)
    for q in info["questions"]:
        standing = info["standing"].get(q["question_id"])
        mark = f"  standing: {standing}" if standing else ""
        print(f"[{q['question_id']}] {q['question']}  options: {', '.join(q['options'])}{mark}", file=out)
    print(f"Tool calls left today: {info['budget_left']}", file=out)


def _world_result(info: dict[str, Any], out: TextIO) -> None:
    res = info.get("tool_result")
    if isinstance(res, dict) and "description" in res:
        print(f"[{res['question_id']}] {res['question']}\nOptions: {', '.join(res['options'])}\n"
              f"Listed {res['listed_from']} .. {res['listed_until']}\n{res['description']}", file=out)
    elif isinstance(res, dict) and "standing" in res and "question_id" in res:
        print(f"standing forecast for {res['question_id']}: {res['standing']}", file=out)
        if info.get("message"):
            print(info["message"], file=out)
    else:
        _show_result("", info, out)


def play_world(env: Any, stdin: TextIO, out: TextIO, seed: int | None = None) -> bool:
    """Run the world REPL until the world ends or input ends; True when the world finished."""
    _, info = env.reset(seed=seed)
    print("forecast-env play --world: type `help` for the commands.", file=out)
    _world_header(info, out)
    for raw in stdin:
        action, note = parse_command(raw, world=True)
        if note:
            print(note, file=out)
        if raw.strip().lower() in ("quit", "exit"):
            break
        if raw.strip().lower() == "notebook":
            _show_notebook(info, out)
            continue
        if action is None:
            continue
        day = info["date"]
        _, reward, terminated, _, info = env.step(action)
        if terminated:
            show_scores(info, reward, out)
            return True
        if info["date"] != day or (action["tool"] == "list_questions" and not info["error"]):
            if info.get("message"):
                print(info["message"], file=out)
            _world_header(info, out)
        else:
            _world_result(info, out)
            print(f"({info['budget_left']} tool calls left today)", file=out)
    print("input ended before the world finished.", file=out)
    return False


def run(args: argparse.Namespace) -> int:
    cfg = section_config(args, "env")
    if args.world:
        from forecast_env.envs.world_env import ForecastWorldEnv

        env: Any = ForecastWorldEnv(args.workspace, split=args.split, start=args.start, end=args.end, config=cfg)
    else:
        from forecast_env.envs.forecast_env import ForecastEnv

        env = ForecastEnv(args.workspace, split=args.split, config=cfg, event_ids=[args.event] if args.event else None)
    try:
        if args.world:
            play_world(env, sys.stdin, sys.stdout, seed=args.seed)
        else:
            play(env, sys.stdin, sys.stdout, seed=args.seed, event_id=args.event)
    finally:
        env.close()
    sys.stdout.flush()
    return 0

