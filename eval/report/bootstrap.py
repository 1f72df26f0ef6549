"""Event-clustered percentile bootstrap (docs/design.md §7): events are the resampling unit.

Every estimate is a mean of *event means* (dates averaged within each rollout, then rollouts within
the event: `event_means`), so events weigh equally and duplicating rollouts cannot narrow an interval. Draws are vectorized:
the event indices of all draws are one `(draws, n_events)` integer matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

DRAWS = 4000
SEED = 0
LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its percentile interval and the number of events behind it."""

    value: float
    lo: float
    hi: float
    n_events: int

    def to_dict(self) -> dict[str, float | int]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "n_events": self.n_events}

    def excludes(self, x: float = 0.0) -> bool:
        """Whether the interval lies strictly on one side of `x`."""
        return bool(self.lo > x or self.hi < x)


NAN_ESTIMATE = Estimate(float("nan"), float("nan"), float("nan"), 0)


def draw_indices(n: int, draws: int = DRAWS, seed: int = SEED) -> np.ndarray:
    """The `(draws, n)` matrix of resampled event positions."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(draws, n))


def bootstrap_means(values: np.ndarray, draws: int = DRAWS, seed: int = SEED, level: float = LEVEL) -> Estimate:
    """Mean of `values` (one per event) with its percentile interval over resampled events."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    n = v.size
    if n == 0:
        return NAN_ESTIMATE
    point = float(v.mean())
    if n == 1 or draws <= 0:
        return Estimate(point, point, point, n)
    means = v[draw_indices(n, draws, seed)].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return Estimate(point, float(min(lo, point)), float(max(hi, point)), n)


def event_means(frame: pl.DataFrame, value: str, event: str = "event_id",
                levels: tuple[str, ...] = ("rollout",)) -> pl.DataFrame:
    """Per-event means of `value`, the innermost level averaged first (docs/design.md §7).

    With the default `levels=("rollout",)`: each rollout's mean over its scored dates (its episode
    score), then the mean over the event's rollouts, so a rollout with missing dates still weighs
    as one rollout. `levels=("agent", "rollout")` averages dates within a rollout, rollouts within
    an agent, then agents within the event. Levels absent from `frame` are skipped (one rollout).
    """
    f = frame.filter(pl.col(value).is_not_null() & pl.col(value).is_not_nan())
    if f.height == 0:
        return pl.DataFrame({event: [], value: []}, schema={event: pl.String, value: pl.Float64})
    keys = [event, *(lv for lv in levels if lv in f.columns)]
    means = f.group_by(keys).agg(pl.col(value).cast(pl.Float64).mean())
    while len(keys) > 1:
        keys = keys[:-1]
        means = means.group_by(keys).agg(pl.col(value).mean())
    return means.sort(event)


def clustered_mean(frame: pl.DataFrame, value: str, draws: int = DRAWS, seed: int = SEED, level: float = LEVEL,
                   event: str = "event_id", levels: tuple[str, ...] = ("rollout",)) -> Estimate:
    """Event-weighted mean of `value` with its event-clustered bootstrap interval."""
    em = event_means(frame, value, event, levels)
    return bootstrap_means(em[value].to_numpy(), draws, seed, level)
