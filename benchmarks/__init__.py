"""The benchmarks, one package per area (corpus, retrieval, envs, serving, eval, orchestration); the
current figures and the command behind each are in benchmarks/RESULTS.md, the history in benchmarks/log/.

Every script runs as a module from the repository root (`.venv/bin/python -m benchmarks.corpus.merge ...`)
and imports its siblings as `benchmarks.<area>.<name>` and the suite's helpers as `tests.support.<name>`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

#: the repository root (the folder that holds `benchmarks/` and `tests/`)
REPO = Path(__file__).resolve().parent.parent


def module_command(module: str, *args: str) -> list[str]:
    """The argv that runs a benchmark module in a child interpreter (this one), as `python -m`."""
    return [sys.executable, "-m", module, *args]


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with the repository root first on PYTHONPATH."""
    # a child started with `-m` finds `benchmarks` and `tests` from any working directory
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), out.get("PYTHONPATH", "")) if p)
    return out
