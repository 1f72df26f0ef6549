"""Market-side filters (docs/design.md §4): span, activity (faithful days) and learning signal.

Each check returns keep, or drop with a named stage and reason (codes in `schema.EVENT_REASONS`),
plus the measured values, which are stored on the event row (rho, max_unfaithful_run, mid_share,
total_variation) or in the exclusion's `detail`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import numpy as np


@dataclass
class FilterOutcome:
    """Keep, or the first failing (stage, reason) with a human-readable detail; metrics always."""

    keep: bool
    stage: str | None = None
    reason: str | None = None
    detail: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # span_days, rho, max_unfaithful_run, ...


@dataclass
class EventSeries:
    """What the filters need of one event: its day grid and the realized leg's daily series."""

    event_type: str  # binary | multi
    start_day: date
    close_day: date
    trades: Mapping[date, tuple[int, float]]  # realized leg: day -> (n_trades, shares)
    belief: Mapping[date, float]  # realized option's belief m(Y) on days where it is observed
    same_day: str | None = None  # a same-day market (endDate at midnight of its start day): where


def day_grid(start: date, end: date) -> list[date]:
    """UTC calendar days from `start` to `end`, both included."""
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def longest_run(flags: np.ndarray) -> int:
    """Length of the longest run of True in a boolean array."""
    best = cur = 0
    for f in flags.tolist():
        cur = cur + 1 if f else 0
        best = max(best, cur)
    return best


@dataclass
class MarketFilters:
    """The three market-side filters with their thresholds (defaults: docs/design.md §4)."""

    min_span_days: int = 8
    binary_min_trades: int = 3
    binary_min_shares: float = 100.0
    multi_min_trades: int = 2
    multi_min_shares: float = 50.0
    min_faithful_share: float = 0.5
    max_unfaithful_run: int = 7
    mid_low: float = 0.05
    mid_high: float = 0.95
    min_mid_share: float = 0.5
    min_total_variation: float = 0.10

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> MarketFilters:
        f = cfg["filters"]
        return cls(
            min_span_days=int(f["min_span_days"]),
            binary_min_trades=int(f["binary"]["min_trades"]),
            binary_min_shares=float(f["binary"]["min_shares"]),
            multi_min_trades=int(f["multi"]["min_trades"]),
            multi_min_shares=float(f["multi"]["min_shares"]),
            min_faithful_share=float(f["min_faithful_share"]),
            max_unfaithful_run=int(f["max_unfaithful_run"]),
            mid_low=float(f["mid_low"]),
            mid_high=float(f["mid_high"]),
            min_mid_share=float(f["min_mid_share"]),
            min_total_variation=float(f["min_total_variation"]),
        )

    def check(self, ev: EventSeries) -> FilterOutcome:
        """Apply span, then activity, then signal; stop at the first failure."""
        span = (ev.close_day - ev.start_day).days + 1
        metrics: dict[str, float] = {"span_days": span}
        if ev.same_day is not None:
            return FilterOutcome(False, "span", "same_day", ev.same_day, metrics)
        if span < self.min_span_days:
            return FilterOutcome(False, "span", "too_short", f"span {span} days < {self.min_span_days}", metrics)

        grid = day_grid(ev.start_day, ev.close_day)
        if ev.event_type == "binary":
            min_t, min_s = self.binary_min_trades, self.binary_min_shares
        else:
            min_t, min_s = self.multi_min_trades, self.multi_min_shares
        n = np.array([ev.trades.get(d, (0, 0.0))[0] for d in grid], dtype=np.int64)
        s = np.array([ev.trades.get(d, (0, 0.0))[1] for d in grid], dtype=np.float64)
        faithful = (n > min_t) & (s > min_s)
        rho = float(faithful.mean())
        run = longest_run(~faithful)
        metrics.update(rho=rho, max_unfaithful_run=run)
        if rho < self.min_faithful_share:
            return FilterOutcome(False, "activity", "low_faithful_share",
                                 f"rho {rho:.3f} < {self.min_faithful_share}", metrics)
        if run > self.max_unfaithful_run:
            return FilterOutcome(False, "activity", "long_unfaithful_run",
                                 f"longest unfaithful run {run} days > {self.max_unfaithful_run}", metrics)

        # Learning signal over faithful days with an observed belief of the realized option.
        m = np.array([ev.belief.get(d, np.nan) for d in grid], dtype=np.float64)
        usable = faithful & ~np.isnan(m)
        if usable.any():
            mu = m[usable]
            mid_share = float(((mu >= self.mid_low) & (mu <= self.mid_high)).mean())
        else:
            mid_share = 0.0
        pairs = usable[1:] & usable[:-1]
        tv = float(np.abs(np.diff(m))[pairs].sum()) if pairs.any() else 0.0
        metrics.update(mid_share=mid_share, total_variation=tv, signal_days=int(usable.sum()))
        if mid_share < self.min_mid_share:
            return FilterOutcome(False, "signal", "nearly_certain",
                                 f"share of days with m(Y) in [{self.mid_low}, {self.mid_high}] "
                                 f"{mid_share:.3f} < {self.min_mid_share}", metrics)
        if tv < self.min_total_variation:
            return FilterOutcome(False, "signal", "flat_prices",
                                 f"total variation {tv:.4f} < {self.min_total_variation}", metrics)
        return FilterOutcome(True, metrics=metrics)
