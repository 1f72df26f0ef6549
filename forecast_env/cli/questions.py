"""`forecast-env questions generate|resolve|report|why`: forecasting questions generated from the news (docs/questions.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from forecast_env.cli.common import add_common, section_config
from forecast_env.errors import ConfigError


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", metavar="FILE", help="YAML with the model's settings (the keys of questions.llm: model, "
                   "base_url, api_key_env, structured, ...; or a file with a top-level llm: mapping)")
    p.add_argument("--model", help="the model name (questions.llm.model)")
    p.add_argument("--base-url", help="the OpenAI-compatible endpoint (questions.llm.base_url)")
    p.add_argument("--replay", choices=("auto", "only", "off"), help="auto: the recording first, then the endpoint; "
                   "only: the recording or an error (no endpoint); off: always the endpoint (questions.replay)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("questions", help="generate, resolve and vet forecasting questions from the corpus's news")
    q_sub = p.add_subparsers(dest="questions_command", metavar="SUBCOMMAND")

    g = q_sub.add_parser("generate", help="draft questions for question dates A..B and let the verifiers rate them")
    g.add_argument("--workspace", required=True, metavar="WS", help="workspace with a corpus and an index")
    g.add_argument("--dates", required=True, metavar="A..B", help="question dates, e.g. 2025-10-01..2026-02-28")
    g.add_argument("--route", action="append", choices=("prospective", "retrospective"),
                   help="only this route (repeatable; default: questions.routes)")
    _model_args(g)
    g.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_common(g, ["questions"])
    g.set_defaults(func=run_generate)

    r = q_sub.add_parser("resolve", help="resolvers vote, the vetting runs, the accepted questions become events")
    r.add_argument("--workspace", required=True, metavar="WS", help="workspace with drafts (questions generate)")
    _model_args(r)
    r.add_argument("--no-events", action="store_true", help="do not add the accepted questions to WS/events")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_common(r, ["questions", "events"])
    r.set_defaults(func=run_resolve)

    rep = q_sub.add_parser("report", help="the funnel, resolver agreement, distributions, tokens, drop examples")
    rep.add_argument("--workspace", required=True, metavar="WS", help="workspace")
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    add_common(rep, [])
    rep.set_defaults(func=run_report)

    w = q_sub.add_parser("why", help="where one question stopped and why (its verdicts, votes and evidence)")
    w.add_argument("qid", metavar="ID", help="a question id (or its event id g-ID)")
    w.add_argument("--workspace", required=True, metavar="WS", help="workspace")
    add_common(w, [])
    w.set_defaults(func=run_why)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _config(args: argparse.Namespace) -> dict[str, Any]:
    cfg = section_config(args, "questions")
    if args.llm:
        path = Path(args.llm)
        if not path.is_file():
            raise ConfigError(f"--llm {path}: no such file (a YAML mapping of questions.llm settings)")
        data = yaml.safe_load(path.read_text()) or {}
        data = data.get("llm", data) if isinstance(data, dict) else data
        if not isinstance(data, dict):
            raise ConfigError(f"--llm {path}: expected a mapping of questions.llm settings")
        unknown = sorted(set(data) - set(cfg["llm"]))
        if unknown:
            raise ConfigError(f"--llm {path}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(cfg['llm']))}")
        cfg["llm"].update(data)
    if args.model:
        cfg["llm"]["model"] = args.model
    if args.base_url:
        cfg["llm"]["base_url"] = args.base_url
    if args.replay:
        cfg["replay"] = args.replay
    return cfg


def run_generate(args: argparse.Namespace) -> int:
    from forecast_env.questions.generate import generate_questions

    s = generate_questions(args.workspace, args.dates, _config(args), routes=args.route, progress=not args.no_progress)
    if args.no_progress:
        print(json.dumps({k: s[k] for k in ("drafts", "status", "drops", "seconds", "output")}, sort_keys=True))
    return 0


def run_resolve(args: argparse.Namespace) -> int:
    from forecast_env.questions.resolve import resolve_questions

    cfg = _config(args)
    if args.no_events:
        cfg["import_events"] = False
    s = resolve_questions(args.workspace, cfg, events_config=section_config(args, "events"),
                          progress=not args.no_progress)
    if args.no_progress:
        print(json.dumps({k: s[k] for k in ("status", "drops", "seconds", "output")}, sort_keys=True))
    return 0


def run_report(args: argparse.Namespace) -> int:
    from forecast_env.questions.report import render, write_questions_report

    rep = write_questions_report(args.workspace)
    print(json.dumps(rep, indent=1, sort_keys=True) if args.json else render(rep))
    return 0


def run_why(args: argparse.Namespace) -> int:
    from forecast_env.questions.report import explain_question

    d = explain_question(args.workspace, args.qid)
    print(f"{d['qid']} ({d['route']}, asked {d['date']}, resolves {d['resolution_date']}): {d['stage']}")
    if d["drop"]:
        print(f"  dropped at {d['drop']['stage']}: {d['drop']['reason']} - {d['drop']['detail']}")
    print(f"  question: {d['question']}\n  options: {d['options']}\n  criteria: {d['criteria']}")
    for name, v in (d["verdicts"] or {}).items():
        print(f"  verifier {name}: {json.dumps(v, sort_keys=True)[:300]}")
    for v in d["votes"]:
        print(f"  {v['resolver']}: {v['answer']}" + (f" (does not count: {v['problem']})" if v["problem"] else ""))
        for e in v["evidence"]:
            print(f"    [{e['doc_id']} {e['day']}] {e['quote'][:160]!r}" + (f" <- {e['problem']}" if e["problem"] else ""))
    if d["resolved"]:
        print(f"  verdict: {d['resolved']} (first report {d['known_day']}); event {d['event_id']}")
    return 0
