"""The `forecast-env` command line: one subcommand group per module of this package.

Each module in `forecast_env.cli` that defines `register(subparsers)` adds its commands; a command's
handler is stored as `func` on its parser and receives the parsed arguments. User errors
(`ForecastEnvError`) and bad arguments print one line and exit 2; a full disk prints one line and exits
`errors.DISK_FULL_EXIT`; `--debug` shows the traceback;
Ctrl-C and SIGTERM print one line and exit 130 and 143, leaving what the next run resumes from
(`forecast_env.cli.interrupts`); `main(argv)` returns the exit status instead of exiting (docs/design.md §1).
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

from forecast_env.cli.interrupts import catching_signals, interrupted_line  # noqa: E402
from forecast_env.errors import DISK_FULL_EXIT, DiskFullError, ForecastEnvError, disk_full_errno  # noqa: E402


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
        with catching_signals():
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
        if isinstance(getattr(exc, "cause", None), ForecastEnvError):  # a Ray task's error: the task's own one
            exc = exc.cause  # type: ignore[attr-defined]
        if not isinstance(exc, DiskFullError) and disk_full_errno(exc.__cause__ or exc.__context__) is not None:
            exc = _disk_full(exc, argv)
        print(f"error: {exc}", file=sys.stderr)
        return DISK_FULL_EXIT if isinstance(exc, DiskFullError) else 2
    except SystemExit as exc:  # argparse: --help (0) or a bad argument (2, after printing its usage line)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: one line, 130 or 143 (cli/interrupts.py)
        line, status = interrupted_line(exc, argv)
        print(line, file=sys.stderr)
        return status
    except BrokenPipeError:
        return 0
    except Exception as exc:  # an internal bug: one line unless --debug
        if debug:
            traceback.print_exc()
        if disk_full_errno(exc) is not None:  # a write outside the atomic helpers: still a full disk
            print(f"error: {_disk_full(exc, argv)}", file=sys.stderr)
            return DISK_FULL_EXIT
        if not debug:
            print(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                  file=sys.stderr)
        return 1


def _disk_full(exc: BaseException, argv: Sequence[str]) -> DiskFullError:
    """The full-disk error for `exc`, naming the file it names or else the command's workspace."""
    path = None
    probe: BaseException | None = exc
    while probe is not None and path is None:
        path = getattr(probe, "filename", None)
        probe = probe.__cause__ or probe.__context__
    if path is None:
        for flag in ("--workspace", "--out", "--cache"):
            if flag in argv[:-1]:
                path = argv[argv.index(flag) + 1]
                break
    return DiskFullError.at(path or os.getcwd(), exc)


if __name__ == "__main__":
    sys.exit(main())
