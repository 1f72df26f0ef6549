"""A session fixture's folder built once per test run: under pytest-xdist the workers share it behind a file lock."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def run_root(factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The folder of the whole run: under xdist the controller's basetemp (each worker's is a child of it)."""
    base = factory.getbasetemp()
    return base if worker_id == "master" else base.parent


def shared_folder(factory: pytest.TempPathFactory, worker_id: str, name: str, build: Callable[[Path], object]) -> Path:
    """`name`'s folder, filled by `build(folder)` once per run: a fresh `mktemp(name)` without xdist (`worker_id`
    "master"); under xdist the first worker builds it in the run's folder while the others wait, then reuse it."""
    if worker_id == "master":
        folder = factory.mktemp(name)
        build(folder)
        return folder
    root = run_root(factory, worker_id)
    folder, done = root / name, root / f"{name}.done"  # the marker lies beside it: tests list the folder's files
    with FileLock(root / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed on another worker is redone whole
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
