"""Train/eval splits by complete tradeable lifetime (docs/design.md §4 "Splits").

An event is in `train` iff `t_start >= train.start` and `t_close < train.end`; in `eval` iff
`t_start >= eval.start` and `t_close < eval.end`. Comparisons are on timestamps (boundaries are
midnight UTC), so an event closing exactly at 2026-03-01T00:00Z is not in train. An event in neither
split is excluded by the build (stage "split"): `crossing_split` when its lifetime crosses a split
boundary shared by two splits (train.end == eval.start: it starts before and closes at or after
it), otherwise `outside_splits` (e.g. before train.start, after eval.end, or across train.start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from forecast_env.errors import ConfigError


def _boundary(value: Any, key: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    try:
        d = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise ConfigError(f"events.splits.{key}: {value!r} is not an ISO date (e.g. 2025-06-01)") from exc
    return d if d.tzinfo else d.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Splits:
    """Named [start, end) windows; the order is the order of precedence (they should not overlap)."""

    windows: tuple[tuple[str, datetime, datetime], ...]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Splits:
        sp = cfg["splits"]
        wins = []
        for name in sp:
            start = _boundary(sp[name]["start"], f"{name}.start")
            end = _boundary(sp[name]["end"], f"{name}.end")
            if end <= start:
                raise ConfigError(f"events.splits.{name}: end {end:%Y-%m-%d} must be after start {start:%Y-%m-%d}")
            wins.append((name, start, end))
        return cls(tuple(wins))

    def assign(self, t_start: datetime, t_close: datetime) -> tuple[str, str | None]:
        """(split name, None) or ("none", reason) with reason crossing_split | outside_splits."""
        for name, start, end in self.windows:
            if t_start >= start and t_close < end:
                return name, None
        # Boundaries shared by two splits (train.end == eval.start): crossing one is "crossing_split".
        inner = {e for _, _, e in self.windows} & {s for _, s, _ in self.windows}
        if any(t_start < b <= t_close for b in inner):
            return "none", "crossing_split"
        return "none", "outside_splits"
