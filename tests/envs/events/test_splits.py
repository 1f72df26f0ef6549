"""Splits by complete lifetime, with timestamp boundaries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from forecast_env.config import load_config
from forecast_env.envs.events.splits import Splits
from forecast_env.errors import ConfigError


def T(*a):
    return datetime(*a, tzinfo=UTC)


@pytest.fixture
def splits():
    return Splits.from_config(load_config("events"))


def test_boundaries(splits):
    assert splits.assign(T(2025, 6, 1), T(2026, 2, 28, 23, 59)) == ("train", None)
    assert splits.assign(T(2025, 6, 1), T(2026, 3, 1)) == ("none", "crossing_split")  # close exactly at the end
    assert splits.assign(T(2026, 3, 1), T(2026, 5, 31, 23)) == ("eval", None)
    assert splits.assign(T(2026, 2, 20), T(2026, 3, 10)) == ("none", "crossing_split")
    assert splits.assign(T(2025, 5, 31, 23, 59), T(2025, 7, 1)) == ("none", "outside_splits")
    assert splits.assign(T(2025, 4, 1), T(2025, 5, 1)) == ("none", "outside_splits")
    assert splits.assign(T(2026, 5, 1), T(2026, 6, 1)) == ("none", "outside_splits")


def test_bad_boundaries():
    cfg = load_config("events", overrides={"splits.train.end": "2025-01-01"})
    with pytest.raises(ConfigError, match="must be after start"):
        Splits.from_config(cfg)
