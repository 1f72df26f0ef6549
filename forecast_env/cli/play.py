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
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any, TextIO

from forecast_env.cli.common import add_common, section_config

HELP = __doc__.split("\n\n", 2)[2].rstrip() if __doc__ else ""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("play", help="forecast an episode yourself in the terminal (same tools as agents)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", required=True, help="workspace folder with index and events")
    p.add_argument("--event", default=None, help="event id (default: a random event of the split)")
    p.add_argument("--split", default=None, choices=("train", "eval", "all"), help="event split (default: eval)")
    p.add_argument("--seed", type=int, default=None, help="seed of the event choice")
    add_common(p, ["env"])
    p.set_defaults(func=run)


def parse_command(line: str) -> tuple[dict[str, Any] | None, str | None]:
    """A REPL line -> (action for the env, or None; a message for the person, or None)."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None, None
    cmd, _, rest = line.partition(" ")
    cmd, rest = cmd.lower(), rest.strip()
    if cmd in ("help", "?"):
        return None, HELP
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
        if not tokens:
            return None, "usage: forecast <option>=<p> ...  or  forecast <p1> <p2> ..."
        if all("=" not in t for t in tokens):
            try:
                return {"tool": "forecast", "args": {"probabilities": [float(t) for t in tokens]}}, None
            except ValueError:
                return None, "usage: forecast <option>=<p> ...  or  forecast <p1> <p2> ..."
        probs: dict[str, Any] = {}
        for t in tokens:
            label, sep, value = t.rpartition("=")
            if not sep or not label:
                return None, f"could not read {t!r}; write <option>=<probability>"
            try:
                probs[label] = float(value)
            except ValueError:
                return None, f"could not read the probability in {t!r}"
        return {"tool": "forecast", "args": {"probabilities": probs}}, None
    return None, f"unknown command {cmd!r}; type `help`"


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
        entry = res.get("added") or res.get("superseded")
        print(f"notebook entry {entry['entry_id']}: {entry['status']}", file=out)
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
            print("\nEpisode finished. Scores per date (Brier: lower is better; 0 = certain and right):",
                  file=out)
            for s in info.get("scores", []):
                lvm = "n/a" if s["log_vs_market"] is None else f"{s['log_vs_market']:+.3f}"
                fb = f"  (fallback: {s['fallback']})" if s["fallback"] else ""
                print(f"  {s['forecast_date']}  Brier {s['brier']:.3f}  accuracy {s['accuracy']:.2f}  "
                      f"log vs market {lvm}{fb}", file=out)
            print(f"Final reward: {reward:.4f}", file=out)
            print(f"Outcome: {env.unwrapped.current_event.label}", file=out)
            return True
        if info["step"] != step:
            step = info["step"]
            _header(info, out)
        else:
            print(f"({info['budget_left']} tool calls left today)", file=out)
    print("input ended before the episode finished.", file=out)
    return False


def run(args: argparse.Namespace) -> int:
    from forecast_env.envs.forecast_env import ForecastEnv

    cfg = section_config(args, "env")
    env = ForecastEnv(args.workspace, split=args.split, config=cfg,
                      event_ids=[args.event] if args.event else None)
    try:
        play(env, sys.stdin, sys.stdout, seed=args.seed, event_id=args.event)
    finally:
        env.close()
    sys.stdout.flush()
    return 0

