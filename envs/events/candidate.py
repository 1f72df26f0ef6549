"""The event candidate: what parsing (Gamma or a questions file) hands to the build (docs/design.md §4).

A `Candidate` carries one event's fields, its legs and its raw observation series; `Excluded` is
raised by any stage that rejects it (caught per event and recorded as one `excluded` row).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import date, datetime

import numpy as np

from forecast_env import schema


class Excluded(Exception):
    """An event fails a stage (raised inside construction, caught per event)."""

    def __init__(self, stage: str, reason: str, detail: str | None = None) -> None:
        if reason not in schema.EVENT_REASONS.get(stage, ()):
            raise ValueError(f"unknown exclusion {stage}/{reason}; add it to schema.EVENT_REASONS")
        super().__init__(f"{stage}/{reason}: {detail}")
        self.stage, self.reason, self.detail = stage, reason, detail


@dataclass
class Leg:
    """The market leg behind one option."""

    option: str
    option_index: int  # position in the offered order
    market_id: str | None
    condition_id: str | None
    token_id: str | None  # YES token of the leg (binary: the token of this outcome)
    leg_start: datetime  # startDate
    leg_close: datetime  # closedTime, else endDate: the actual close
    leg_end: datetime | None = None  # endDate, else closedTime: the scheduled end
    terminal: float | None = None  # terminal YES price of this option (from outcomePrices)
    first_trade: datetime | None = None
    market_index: int = 0  # position in Gamma's markets[] (binary: the outcome's position)
    neg_risk_other: bool = False  # the bundle's real "Other" option
    renamed: bool = False  # leg of a negRiskAugmented bundle: starts at its first trade

    @property
    def start_day(self) -> date:
        """The day this option started: its first trade in an augmented bundle (else startDate)."""
        if self.renamed and self.first_trade is not None:
            return self.first_trade.date()
        return self.leg_start.date()


@dataclass
class Candidate:
    """An event that passed parse/layout/label, with its raw observation series."""

    event_id: str
    source: str
    slug: str | None
    question: str
    description: str
    options: list[str]
    type: str
    category: str | None
    tags: list[str]
    t_start: datetime
    t_close: datetime  # actual close: max closedTime (else endDate)
    t_end: datetime  # scheduled end: max endDate; everything an agent can observe derives from it
    label: str
    volume: float | None
    legs: list[Leg]
    prices: list[tuple[int, int, float]] = field(default_factory=list)  # (option_index, t, p)
    trades: list[tuple[int, int, float]] = field(default_factory=list)  # (option_index, t, size)
    metrics: dict[str, object] = field(default_factory=dict)
    option_seed: int | None = None  # the seed of the option shuffle (None: Gamma/outcomes order kept)
    same_day: str | None = None  # a same-day market's endDate (where): excluded under the span rule
    dates: list[date] | None = None  # fixed forecast dates (ForecastBench rounds' freeze days) instead of the grid
    known: date | None = None  # the first visible report of the outcome, when known from the news (generated questions)

    @property
    def start_day(self) -> date:
        return self.t_start.date()

    @property
    def close_day(self) -> date:
        return self.t_close.date()

    @property
    def end_day(self) -> date:
        return self.t_end.date()

    @property
    def t_all(self) -> date:
        """The day on which the last leg started (every option is on offer from there)."""
        return max(leg.start_day for leg in self.legs)

    def leg_series(self) -> list[list[tuple[int, float]]]:
        """Each option's own YES-price observations up to its leg's close, in time order.

        Binary events carry only the first option's series `p`; the second option's is `1 - p`.
        """
        by_option: dict[int, list[tuple[int, float]]] = {k: [] for k in range(len(self.options))}
        for k, t, p in self.prices:
            by_option.setdefault(k, []).append((t, p))
        if self.type == "binary" and len(self.options) == 2 and not by_option[1]:
            by_option[1] = [(t, 1.0 - p) for t, p in by_option[0]]
        out = []
        for k, leg in enumerate(self.legs):
            close = leg.leg_close.timestamp()
            out.append(sorted((t, p) for t, p in by_option.get(k, []) if t <= close))
        return out


def option_seed(event_id: str) -> int:
    """The seed of an event's option shuffle: the first 63 bits of sha256(event id)."""
    return int.from_bytes(hashlib.sha256(event_id.encode("utf-8")).digest()[:8], "big") >> 1


def shuffle_options(cand: Candidate) -> Candidate:
    """The candidate with its options in a deterministic order seeded by its event id.

    Gamma's markets[] order is the platform's and may be edited after resolution; a binary event
    keeps its `outcomes` order. Legs, prices and trades are re-indexed to the new order.
    """
    if cand.type == "binary":
        return replace(cand, option_seed=None)
    seed = option_seed(cand.event_id)
    perm = np.random.default_rng(seed).permutation(len(cand.legs)).tolist()  # new position -> old
    new_of_old = {old: new for new, old in enumerate(perm)}
    legs = [replace(cand.legs[old], option_index=new) for new, old in enumerate(perm)]
    return replace(
        cand,
        options=[leg.option for leg in legs],
        legs=legs,
        prices=[(new_of_old[k], t, p) for k, t, p in cand.prices],
        trades=[(new_of_old[k], t, s) for k, t, s in cand.trades],
        option_seed=seed,
    )
