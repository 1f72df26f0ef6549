"""Options and helpers shared by the CLI command modules."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forecast_env.config import SECTIONS, load_config, route_overrides
from forecast_env.errors import RunError


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (a bad value is a usage error naming it, exit 2)."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_common(parser: argparse.ArgumentParser, sections: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Add --debug, and for a command that reads configuration, --config FILE and --set SECTION.KEY=VALUE.

    `sections`: the config sections the command reads (None: any of them; empty: none, so the command
    takes no --config/--set). A --set for a section the command does not read is an error.
    """
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    if sections is not None and not sections:
        return parser
    reads = tuple(sections or SECTIONS)
    example = {"corpus": "corpus.language.min_english_score=0.7", "events": "events.screen.judge=llm",
               "env": "env.memory=false", "benchmark": "benchmark.rollouts=3",
               "questions": "questions.seeds.per_date=8"}[reads[0]]
    parser.add_argument("--config", action="append", default=[], metavar="FILE",
                        help="YAML config file (one section's keys, or sections by name); repeatable")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help=f"override one config value, e.g. --set {example} (this command reads: "
                        f"{', '.join(reads)}; the section may be left out when the key is unambiguous); "
                        "repeatable")
    parser.set_defaults(config_sections=reads)
    return parser


def section_config(args: argparse.Namespace, section: str) -> dict[str, Any]:
    """One config section with the command's --config files and --set overrides (all overrides validated)."""
    routed = route_overrides(getattr(args, "overrides", []) or [], getattr(args, "config_sections", SECTIONS))
    return load_config(section, files=getattr(args, "config", []) or [], overrides=routed.get(section, []))


def run_dir_arg(args: argparse.Namespace) -> Path:
    """The run directory of `--run DIR`, or of `--workspace WS --run-id ID` (report, view): an error when missing."""
    if args.run:
        run_dir = Path(args.run)
    elif args.workspace and args.run_id:
        from forecast_env.store import Workspace

        run_dir = Workspace.at(args.workspace).runs_dir / args.run_id
    else:
        raise RunError("give --run WS/runs/ID, or --workspace WS with --run-id ID")
    if not run_dir.is_dir():
        raise RunError(f"{run_dir}: no such run directory; runs live under WS/runs/")
    return run_dir
