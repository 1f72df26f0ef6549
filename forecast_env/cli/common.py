"""Options and helpers shared by the CLI command modules."""

from __future__ import annotations

import argparse
from typing import Any

from forecast_env.config import load_config


def add_common(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add --debug, --config FILE (repeatable) and --set key=value (repeatable)."""
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--config", action="append", default=[], metavar="FILE",
                        help="YAML config file (one section's keys, or sections by name); repeatable")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config value, e.g. --set language.min_english_score=0.7")
    return parser


def section_config(args: argparse.Namespace, section: str) -> dict[str, Any]:
    """Load one config section with the command's --config files and --set overrides."""
    return load_config(section, files=getattr(args, "config", []) or [],
                       overrides=getattr(args, "overrides", []) or [])
