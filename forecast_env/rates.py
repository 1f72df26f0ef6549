"""The measured rates that estimates rest on, read from one data file (`forecast_env/rates.json`).

Each rate has its value and unit, what it was measured on, the benchmark command that measures it,
the date and the machine state (`idle`, or `loaded` when other work shared the machine) of the
measurement, and the dated log (benchmarks/log/) that reports it. The build planner
(`forecast_env.recipe.plan`) and the merge's cost model (`corpus_build/rates.py`) read it; a benchmark
that re-measures a rate writes it with `write_rate` when run with `--record`
(`benchmarks/recording.py`), so no figure is copied into code by hand.

The machine state of a recorded run (`machine_state`): `idle` when the 1-minute load average read just
before the run was under 0.5 per CPU of the machine (under 1.0 on the project's 2-core box), else
`loaded`. It is read before the run because the run's own work raises it; a benchmark's `--state`
overrides it (a run that knows the machine was shared, or a load average that missed a burst).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from datetime import date as _date
from pathlib import Path
from typing import Any

#: The data file (packaged beside this module; benchmarks run from a checkout rewrite it in place).
RATES_FILE = Path(__file__).with_name("rates.json")
#: What a measurement's machine state may be: `idle`, or `loaded` (other work shared the machine, so
#: times are upper bounds; counts and bytes are not affected).
MACHINE_STATES = ("idle", "loaded")
#: A run is `idle` when the 1-minute load average before it was under this, per CPU of the machine.
IDLE_LOAD_PER_CPU = 0.5


@dataclass(frozen=True)
class Rate:
    """One measured rate and the benchmark run it comes from."""

    value: float
    unit: str
    measured_on: str  # what it was measured on ("real pages", "synthetic parts", ...), said in the plan
    command: str  # the benchmark command, as RESULTS.md prints it
    date: str  # YYYY-MM-DD of the measurement
    state: str  # one of MACHINE_STATES
    section: str = ""  # the dated log (benchmarks/log/) that reports the measurement
    note: str = ""  # how the value follows from the run, where it is not read off directly

    def script_path(self) -> str:
        """The benchmark script the command runs, relative to the repository root (`-m a.b` is `a/b.py`)."""
        words = self.command.split()
        for i, w in enumerate(words):
            if w == "-m" and i + 1 < len(words):
                return words[i + 1].replace(".", "/") + ".py"
            if w.endswith(".py"):
                return w.removeprefix("./")
        raise ValueError(f"rate command names no script: {self.command!r}")

    def script(self) -> str:
        """The benchmark script as the plan's basis lines name it: its path under `benchmarks/`."""
        return self.script_path().removeprefix("benchmarks/")


def read_rates(path: Path = RATES_FILE) -> dict[str, Rate]:
    """Every rate of the data file, by key, in the file's order."""
    data = json.loads(path.read_text())
    return {key: Rate(**fields) for key, fields in data["rates"].items()}


def rates_with_prefix(prefix: str, path: Path = RATES_FILE) -> dict[str, float]:
    """The values of the rates whose key starts with `prefix`, keyed by the rest of the key, in file order."""
    return {k[len(prefix):]: r.value for k, r in read_rates(path).items() if k.startswith(prefix)}


def machine_state(load: float | None = None, cpus: int | None = None) -> str:
    """`idle` or `loaded` by the module's rule, from a 1-minute load average (default: the machine's now)."""
    load = os.getloadavg()[0] if load is None else load
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    return "idle" if load < IDLE_LOAD_PER_CPU * cpus else "loaded"


def write_rate(key: str, value: float, command: str, *, state: str, unit: str | None = None,
               measured_on: str | None = None, section: str | None = None, note: str | None = None,
               date: str | None = None, path: Path = RATES_FILE) -> Rate:
    """Record a new measurement of `key` in the data file (a benchmark calls this); returns the rate written.

    `unit`, `measured_on` and `section` not given keep the recorded ones (`unit` and `measured_on` are
    required for a new key); `note` is the new value's own (none when not given: an old note would
    describe the old value); `date` defaults to today (UTC). The file keeps its order of rates and of
    each rate's fields and its formatting, so its diff shows only the lines of the new measurement.
    """
    from forecast_env.store import atomic_write_text

    if state not in MACHINE_STATES:
        raise ValueError(f"rate {key}: state {state!r}; choose one of {', '.join(MACHINE_STATES)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"rate {key}: value {value!r} must be a positive number")
    data = json.loads(path.read_text())
    old: dict[str, Any] = data["rates"].get(key, {})
    if not old and (unit is None or measured_on is None):
        raise ValueError(f"rate {key} is new: give its unit and what it was measured on")
    when = date or datetime.now(UTC).date().isoformat()
    _date.fromisoformat(when)  # a bad date fails here, not in the next reader
    rate = Rate(value=value, unit=unit or old["unit"], measured_on=measured_on or old["measured_on"],
                command=command, date=when, state=state,
                section=old.get("section", "") if section is None else section, note=note or "")
    rate.script_path()  # a command must name its script
    # updated in place: a rate keeps the position of its fields (a new one gets Rate's order)
    data["rates"][key] = {**old, **asdict(rate)}
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return rate
