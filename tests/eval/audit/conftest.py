"""Fixtures the audit's test modules share: a writable copy of the `micro` workspace to plant leaks in (the
`siblings` world, built with the cross-question rule on and off, is the root conftest's, built once per run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture()
def ws_copy(micro_events: Path, tmp_path: Path) -> Path:
    """The `micro` workspace copied (without runs, audits and exports), for a test to plant a leak in."""
    dst = tmp_path / "ws"
    shutil.copytree(micro_events, dst, ignore=shutil.ignore_patterns("runs", "audit", "exports"))
    return dst
