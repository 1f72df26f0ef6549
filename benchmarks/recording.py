"""Recording a run's measured rates into `forecast_env/rates.json` (a benchmark's `--record`).

A benchmark that measures a rate the planner reads maps its results to rates in a small function of its
own (`rates_from...`, tested in tests/benchmarks/ against the figures of its logs) and, run with
`--record`, writes each with `forecast_env.rates.write_rate`: the value, the command line of the run,
today's date and the machine state (`forecast_env.rates.machine_state`: the load average read before
the run, unless `--state` says). Without `--record` a run writes nothing, so a casual run never replaces
a committed figure.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from forecast_env.rates import IDLE_LOAD_PER_CPU, MACHINE_STATES, RATES_FILE, Rate, machine_state, write_rate

#: The flags of the recording itself, with whether each takes a value (left out of the recorded command).
RECORD_FLAGS = {"--record": False, "--record-command": True, "--record-section": True, "--state": True}


@dataclass(frozen=True)
class Measurement:
    """One rate a run measured: its value, how it follows from the run, and what it was measured on (None:
    what the data file says)."""

    value: float
    note: str
    measured_on: str | None = None


@dataclass(frozen=True)
class Recording:
    """How a run's rates are written: its command line, machine state, and the load the state was read from."""

    command: str
    state: str
    load: float
    cpus: int
    section: str | None = None  # the dated log that reports the run (None: keep the recorded one)


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    """The `--record` flags, on a benchmark's parser (or on each subcommand that measures a rate)."""
    group = parser.add_argument_group("recording the planner's rates (forecast_env/rates.json)")
    group.add_argument("--record", action="store_true",
                       help="write the rates this run measured into forecast_env/rates.json (off by default: a "
                            "casual run never replaces a committed figure)")
    group.add_argument("--record-command", default=None, metavar="COMMAND",
                       help="the command line recorded with them (default: this run's, as `.venv/bin/python -m "
                            "MODULE ARGS`; give the whole line when it ran under `cd DATA && ` or `taskset`)")
    group.add_argument("--state", choices=MACHINE_STATES, default=None,
                       help="the machine state recorded (default: idle when the 1-minute load average before the "
                            f"run was under {IDLE_LOAD_PER_CPU:g} per CPU, else loaded)")
    group.add_argument("--record-section", default=None, metavar="LOG",
                       help="the dated log that reports this run (benchmarks/log/...; default: keep the recorded one)")


def run_command(module: str, argv: Sequence[str], env: Sequence[str] = ()) -> str:
    """This run's command line as rates.json records it: `.venv/bin/python -m MODULE ARGS`, recording flags left out."""
    args: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in RECORD_FLAGS:
            skip = RECORD_FLAGS[name] and "=" not in arg
            continue
        args.append(arg)
    return shlex.join([*env, ".venv/bin/python", "-m", module, *args])


def start_recording(args: argparse.Namespace, module: str, argv: Sequence[str],
                    env: Sequence[str] = ()) -> Recording | None:
    """Before the run: its command and machine state when it records (`--record`), else None."""
    if not args.record:
        return None
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    command = args.record_command or run_command(module, argv, env)
    state = args.state or machine_state(load, cpus)
    try:  # refused now, not by write_rate after a long run
        Rate(1.0, "", "", command, "", state).script_path()
    except ValueError as exc:
        raise SystemExit(f"--record-command: {exc}; give the whole command line, with `python -m {module}`") from exc
    return Recording(command=command, state=state, load=load, cpus=cpus, section=args.record_section)


def record_rates(recording: Recording | None, rates: Mapping[str, Measurement],
                 path: Path | None = None) -> list[Rate]:
    """After the run: write each measured rate (nothing when the run does not record); returns the rates written."""
    if recording is None:
        return []
    path = RATES_FILE if path is None else path
    if not rates:
        print(f"--record: this run measured none of the rates of {path.name}; nothing written")
        return []
    written = []
    for key, m in rates.items():
        note = f"{m.note} (1-minute load {recording.load:.2f} on {recording.cpus} CPUs before the run)"
        rate = write_rate(key, m.value, recording.command, state=recording.state, measured_on=m.measured_on,
                          section=recording.section, note=note, path=path)
        written.append(rate)
        print(f"recorded {key} = {rate.value:g} {rate.unit} ({rate.date}, {rate.state}) in {path}")
    return written
