"""Named crash points: where the crash harness (tests/system/crash/) kills a long command with SIGKILL.

The stages call `crash_point("label")` at the moments a kill is most likely to leave something
half done: inside an atomic write (its temporary file half written, or renamed but the folder not
synced), between a part's files, at each spill and store step of the merge, at each downloaded
chunk, in the middle of an episode, in a month of the index build and between the events tables.
Two environment variables, read once at import, drive them; with neither set a call returns at once:

- `FORECAST_ENV_CRASH_AT="label:n"` kills this process with SIGKILL at the n-th crossing (from 1)
  of `label` (`*` counts every label), so a harness can enumerate the points and hit each one;
- `FORECAST_ENV_CRASH_COUNT=FILE` appends one line per crossing, `pid label`, to FILE (the
  counting run that lists the points a command crosses);
- `FORECAST_ENV_CRASH_SIGNAL=TERM` (or `INT`) sends that signal instead of SIGKILL, so a test can
  stop a command with SIGTERM or Ctrl-C's SIGINT at an exact point.

Spawned worker processes inherit both (each counts its own crossings); the harness runs with one worker.
"""

from __future__ import annotations

import os
import signal

#: The environment variable naming the crossing to die at (`label:n`).
CRASH_AT_VAR = "FORECAST_ENV_CRASH_AT"
#: The environment variable naming the file that counting mode appends crossings to.
CRASH_COUNT_VAR = "FORECAST_ENV_CRASH_COUNT"
#: The environment variable naming the signal to send at the crossing (KILL, the default; TERM; INT).
CRASH_SIGNAL_VAR = "FORECAST_ENV_CRASH_SIGNAL"
#: Labels that crash inside an atomic write: the temporary file is cut to half before the kill, as a
#: kill during the write itself leaves it.
HALF_WRITTEN = ("write.temp",)


def _parse(spec: str | None) -> tuple[str, int] | None:
    if not spec:
        return None
    label, _, n = spec.rpartition(":")
    try:
        return (label or "*"), max(1, int(n))
    except ValueError:
        return None


_TARGET = _parse(os.environ.get(CRASH_AT_VAR))
_COUNT_FILE = os.environ.get(CRASH_COUNT_VAR) or None
_ACTIVE = _TARGET is not None or _COUNT_FILE is not None
_SIGNAL = getattr(signal, f"SIG{(os.environ.get(CRASH_SIGNAL_VAR) or 'KILL').upper()}", signal.SIGKILL)
_SEEN: dict[str, int] = {}


def crash_point(label: str, path: str | os.PathLike[str] | None = None) -> None:
    """Count one crossing of `label`; die here (SIGKILL) when it is the crossing named by `CRASH_AT_VAR`.

    `path`: the temporary file being written, cut to half its size before a `HALF_WRITTEN` kill."""
    if not _ACTIVE:
        return
    if _COUNT_FILE is not None:
        with open(_COUNT_FILE, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {label}\n")
    if _TARGET is None:
        return
    want, n = _TARGET
    if want not in ("*", label):
        return
    _SEEN[want] = _SEEN.get(want, 0) + 1
    if _SEEN[want] != n:
        return
    if _SIGNAL != signal.SIGKILL:
        os.kill(os.getpid(), _SIGNAL)  # handled by the process (cli/interrupts.py) at the next bytecode
        return
    if path is not None and label in HALF_WRITTEN:
        try:
            size = os.path.getsize(path)
            os.truncate(path, size // 2)
        except OSError:
            pass
    os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["CRASH_AT_VAR", "CRASH_COUNT_VAR", "CRASH_SIGNAL_VAR", "crash_point"]
