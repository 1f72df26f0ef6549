"""Fixtures the audit's test modules share: a writable copy of the `micro` workspace to plant leaks in, and the
`siblings` world built with the cross-question rule on and off."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.siblings import build_siblings


@pytest.fixture()
def ws_copy(micro_events: Path, tmp_path: Path) -> Path:
    """The `micro` workspace copied (without runs, audits and exports), for a test to plant a leak in."""
    dst = tmp_path / "ws"
    shutil.copytree(micro_events, dst, ignore=shutil.ignore_patterns("runs", "audit", "exports"))
    return dst


@pytest.fixture(scope="session")
def siblings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The `siblings` world and its events built with the rule on and off (checks 1 and 6 read it; tests copy
    before they change it), built once per session."""
    return build_siblings(tmp_path_factory.mktemp("siblings-audit"))
