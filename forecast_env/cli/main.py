"""The `forecast-env` command line: one subcommand group per module of this package.

Each module in `forecast_env.cli` that defines `register(subparsers)` adds its commands; a command's
handler is stored as `func` on its parser and receives the parsed arguments. User errors
(`ForecastEnvError`) and bad arguments print one line and exit 2; `--debug` shows the traceback;
`main(argv)` returns the exit status instead of exiting (docs/design.md §1).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback
from collections.abc import Sequence

# No model or dataset may be fetched from a hub at run time.
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from forecast_env.errors import ForecastEnvError  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every registered command group."""
    parser = argparse.ArgumentParser(
        prog="forecast-env",
        description="Offline, replayable environment for LLM forecasting agents "
        "(CC-NEWS corpus + resolved Polymarket events).",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import forecast_env.cli as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name in ("main", "common"):
            continue
        module = importlib.import_module(f"forecast_env.cli.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return 0 if not argv else 2
        result = args.func(args)
        return int(result or 0)
    except ForecastEnvError as exc:
        if debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse: --help (0) or a bad argument (2, after printing its usage line)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # an internal bug: one line unless --debug
        if debug:
            traceback.print_exc()
        else:
            print(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                  file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
