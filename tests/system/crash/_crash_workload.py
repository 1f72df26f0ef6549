"""Tasks for the worker-pool interrupt test (importable by spawned workers)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def task(item: tuple[str, float]) -> str:
    """Sleep `seconds` (the work), then leave `<folder>/done-<pid>`; returns the folder."""
    folder, seconds = item
    time.sleep(seconds)
    Path(folder, f"done-{os.getpid()}").write_text("finished")
    return folder
