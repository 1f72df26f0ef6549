"""The task log: one JSON line per node task (its kind, node, wall time, peak memory and bucket traffic).

`FORECAST_ENV_TASK_LOG` names the file; every node task (a part, a merge task, an index month: the
`task.NodeTask`s) appends its line there, so a cluster run says what each node did and how much memory
and object-store traffic each task took (docs/scaling.md). Unset: nothing is recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from forecast_env.workspace.remote import traffic

#: Environment variable: a file that every node task (part, merge task, index month) appends one JSON line
#: to: its kind, wall time, peak resident memory and the bytes it fetched from and published to the bucket
#: (`task_log`); `{scratch}` in it is this node's scratch folder. Unset: nothing is recorded.
TASK_LOG = "FORECAST_ENV_TASK_LOG"


def _peak_rss_mb(reset: bool = False) -> float | None:
    """This process's peak resident memory in MB (Linux VmHWM; None elsewhere); `reset` starts a new peak."""
    try:
        with open("/proc/self/status") as fh:
            kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
        if reset:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # 5: reset the peak resident set size (proc(5))
        return round(kib / 1024, 1)
    except (OSError, StopIteration, ValueError):
        return None


@contextlib.contextmanager
def task_log(kind: str, name: str) -> Iterator[None]:
    """Record one node task in the file `$FORECAST_ENV_TASK_LOG` names (one JSON line: kind, name, node,
    wall seconds, peak resident MB of the task's process during the task, bytes fetched and published);
    nothing when the variable is unset. A task that raises is recorded with its error class."""
    path = os.environ.get(TASK_LOG)
    if not path:
        yield
        return
    _peak_rss_mb(reset=True)
    before, t0 = traffic(), time.perf_counter()
    error = None
    try:
        yield
    except BaseException as exc:
        error = type(exc).__name__
        raise
    finally:
        after = traffic()
        line = {"kind": kind, "name": name, "node": os.environ.get("FORECAST_ENV_SCRATCH") or os.uname().nodename,
                "pid": os.getpid(), "wall_s": round(time.perf_counter() - t0, 4), "peak_rss_mb": _peak_rss_mb(),
                **{k: after[k] - before[k] for k in after}, "error": error}
        scratch = os.environ.get("FORECAST_ENV_SCRATCH") or ""
        with contextlib.suppress(OSError):
            target = Path(path.replace("{scratch}", scratch))
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "a") as fh:
                fh.write(json.dumps(line, sort_keys=True) + "\n")
