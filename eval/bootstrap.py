"""Event-clustered percentile bootstrap (SPEC section 7): events are the resampling unit.

Every estimate is a mean of *event means* (rollouts and dates are averaged inside an event first),
so events weigh equally and duplicating rollouts cannot narrow an interval. Draws are vectorized:
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


def bootstrap_ratio(num: np.ndarray, den: np.ndarray, draws: int = DRAWS, seed: int = SEED,
                    level: float = LEVEL) -> Estimate:
    """sum(num)/sum(den) over events (e.g. a slope), with its percentile interval over events."""
    a, b = np.asarray(num, np.float64), np.asarray(den, np.float64)
    n = a.size
    if n == 0 or b.sum() == 0:
        return NAN_ESTIMATE
    point = float(a.sum() / b.sum())
    if n == 1 or draws <= 0:
        return Estimate(point, point, point, n)
    idx = draw_indices(n, draws, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = a[idx].sum(axis=1) / b[idx].sum(axis=1)
    ratios = ratios[np.isfinite(ratios)]
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(ratios, [alpha, 1.0 - alpha]) if ratios.size else (point, point)
    return Estimate(point, float(lo), float(hi), n)


def event_means(frame: pl.DataFrame, value: str, event: str = "event_id",
                within: tuple[str, ...] = ("step",)) -> pl.DataFrame:
    """Per-event means of `value`: averaged over rollouts per `within` key first, then over those keys."""
    f = frame.filter(pl.col(value).is_not_null() & pl.col(value).is_not_nan())
    if f.height == 0:
        return pl.DataFrame({event: [], value: []}, schema={event: pl.String, value: pl.Float64})
    keys = [event, *within]
    inner = f.group_by(keys).agg(pl.col(value).mean())
    return inner.group_by(event).agg(pl.col(value).mean()).sort(event)


def clustered_mean(frame: pl.DataFrame, value: str, draws: int = DRAWS, seed: int = SEED, level: float = LEVEL,
                   event: str = "event_id", within: tuple[str, ...] = ("step",)) -> Estimate:
    """Event-weighted mean of `value` with its event-clustered bootstrap interval."""
    em = event_means(frame, value, event, within)
    return bootstrap_means(em[value].to_numpy(), draws, seed, level)
