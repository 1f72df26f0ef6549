"""The events of the sample world: options, leg timings, latent probability paths, liquidity.

Each event has a latent outcome and a latent daily probability path that drifts toward it (a
random walk in logit space pulled toward the truth, sharper late), so both the market price and
the news carry information. Planted events are built to fail exactly one market-side filter of
docs/design.md §4 (`plant` names which).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from forecast_env.synth import grammar as g
from forecast_env.synth.presets import Preset
from forecast_env.synth.scenarios import SCENARIOS, Facts, Scenario

CORPUS_START = date(2025, 3, 1)
CORPUS_END = date(2026, 5, 31)
TRAIN = (date(2025, 6, 1), date(2026, 3, 1))
EVAL = (date(2026, 3, 1), date(2026, 6, 1))

#: planted kind -> (stage, reason) the events builder must record
PLANTS: dict[str, tuple[str, str]] = {
    "bad_json": ("parse", "bad_json"),
    "missing_field": ("parse", "missing_field"),
    "not_negrisk": ("layout", "multi_market_not_negrisk"),
    "unresolved": ("label", "unresolved"),
    "multiple_yes": ("label", "multiple_yes"),
    "too_short": ("span", "too_short"),
    "low_faithful": ("activity", "low_faithful_share"),
    "long_run": ("activity", "long_unfaithful_run"),
    "nearly_certain": ("signal", "nearly_certain"),
    "flat": ("signal", "flat_prices"),
    "crossing": ("split", "crossing_split"),
    "outside": ("split", "outside_splits"),
}


@dataclass
class Leg:
    option: str
    question: str
    market_id: str
    condition_id: str
    tokens: tuple[str, str]  # (YES / first outcome, NO / second outcome)
    start: datetime
    close: datetime  # closedTime
    end: datetime  # endDate (scheduled)
    late: bool = False
    yes_final: bool = False


@dataclass
class Event:
    gamma_id: str
    scenario: Scenario
    facts: Facts
    type: str  # binary | multi
    winner: int  # index into options
    legs: list[Leg]
    start: datetime
    close: datetime
    plant: str | None
    split: str
    days: list[date]
    probs: np.ndarray  # (n_days, K) latent daily probabilities; NaN before a leg starts
    faithful: np.ndarray  # (n_days,) bool: liquid day on the realized leg
    augmented: bool = False
    clarification: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def event_id(self) -> str:
        return "pm-" + self.gamma_id

    @property
    def options(self) -> list[str]:
        return self.facts.options

    @property
    def label(self) -> str:
        return self.options[self.winner]

    def day_index(self, d: date) -> int:
        return max(0, min(len(self.days) - 1, (d - self.days[0]).days))


def hex_id(n: int, *parts: object) -> str:
    out = ""
    i = 0
    while len(out) < n:
        out += format(g.stable_int(*parts, i), "016x")
        i += 1
    return out[:n]


def token_id(*parts: object) -> str:
    v = 0
    for i in range(5):
        v = (v << 64) | g.stable_int("tok", *parts, i)
    s = str(v % (9 * 10**76) + 10**76)
    return s


def _rand_time(rng: random.Random, d: date, lo_h: int = 1, hi_h: int = 22) -> datetime:
    secs = rng.randint(lo_h * 3600, hi_h * 3600)
    ms = rng.randint(0, 999) * 1000
    return datetime(d.year, d.month, d.day, tzinfo=UTC) + timedelta(seconds=secs, microseconds=ms)


def latent_path(nrng: np.random.Generator, n_days: int, k: int, winner: int,
                starts: list[int]) -> np.ndarray:
    """Daily probabilities (n_days, k): a logit random walk pulled toward the winner."""
    x = nrng.normal(0.0, 0.6, k)
    out = np.full((n_days, k), np.nan)
    for i in range(n_days):
        f = i / max(n_days - 1, 1)
        target = np.full(k, -0.8 * f**1.5)
        target[winner] = 2.6 * f**1.5
        x = x + 0.22 * (target - x) + nrng.normal(0.0, 0.22, k)
        live = np.array([i >= s for s in starts])
        z = np.exp(x - x[live].max()) * live
        out[i, live] = z[live] / z.sum()
    return out


def faithful_mask(nrng: np.random.Generator, n: int, plant: str | None,
                  realized_start: int) -> np.ndarray:
    if plant == "low_faithful":
        m = np.arange(n) % 5 < 2
    elif plant == "long_run":
        m = np.ones(n, dtype=bool)
        m[n // 3 : n // 3 + 11] = False
    else:
        m = nrng.random(n) < 0.92
        run = 0
        for i in range(n):  # cap unfaithful runs at 2 days
            run = 0 if m[i] else run + 1
            if run > 2:
                m[i] = True
                run = 0
    m[:realized_start] = False
    return m


def _plan(preset: Preset, rng: random.Random) -> list[tuple[str | None, str, dict]]:
    """(plant, window, options) for every event to build, in a fixed order."""
    plan: list[tuple[str | None, str, dict]] = []
    for i in range(preset.n_train):
        plan.append((None, "train", {}))
    for i in range(preset.n_eval):
        plan.append((None, "eval", {}))
    # guaranteed variants among the good events
    goods = [j for j, p in enumerate(plan)]
    specials: list[dict[str, Any]] = [{"aug": "late_loser"}, {"aug": "late_winner"}, {"scenario": "match"},
                {"null_negrisk": True}]
    for n, spec in enumerate(specials):
        if n < len(goods):
            j = goods[(n * 2 + 1) % len(goods)] if len(goods) > 4 else goods[n % len(goods)]
            plan[j] = (None, plan[j][1], {**plan[j][2], **spec})
    windows = ["train", "eval"]
    for c in range(preset.plant_copies):
        for n, kind in enumerate(PLANTS):
            w = {"crossing": "crossing", "outside": "outside"}.get(kind, windows[(n + c) % 2])
            plan.append((kind, w, {}))
    return plan


def build_events(preset: Preset, seed: int, phrasing: str = "a") -> list[Event]:
    """All events of the world, deterministic in (preset, seed); news about them uses phrasing bank `phrasing`."""
    rng = g.sub_rng(seed, "events", preset.name)
    plan = _plan(preset, rng)
    ids = rng.sample(range(10_000, 99_999), len(plan))
    market_ids = rng.sample(range(500_000, 999_999), len(plan) * 8)
    events = []
    multi_scen = [s for s in SCENARIOS if s.kind == "multi"]
    for n, (plant, window, opts) in enumerate(plan):
        erng = g.sub_rng(seed, "event", preset.name, n)
        nrng = np.random.default_rng(g.stable_int(seed, "event-np", preset.name, n))
        if opts.get("aug") or plant in ("multiple_yes", "not_negrisk"):
            sc = multi_scen[n % len(multi_scen)]
        elif opts.get("scenario"):
            sc = next(s for s in SCENARIOS if s.name == opts["scenario"])
        elif plant in ("bad_json", "missing_field", "unresolved", "nearly_certain", "flat", "too_short"):
            sc = [s for s in SCENARIOS if s.kind != "multi"][n % 6]
        else:
            sc = SCENARIOS[(n * 7 + seed) % len(SCENARIOS)]
        # timing
        if plant == "too_short":
            n_days = 5
        elif plant == "long_run":
            n_days = max(30, preset.max_days)
        else:
            n_days = erng.randint(14, preset.max_days)
        if window == "train":
            lo, hi = date(2025, 6, 3), date(2026, 2, 26)
        elif window == "eval":
            lo, hi = date(2026, 3, 3), date(2026, 5, 29)
        elif window == "crossing":
            lo, hi = date(2026, 2, 5), date(2026, 3, 25)
            n_days = min(max(n_days, 30), (hi - lo).days)
        else:  # outside: before the train window
            lo, hi = date(2025, 3, 20), date(2025, 5, 25)
            n_days = min(n_days, (hi - lo).days - 2)
        span = (hi - lo).days - n_days + 1
        start_day = lo + timedelta(days=erng.randint(0, max(span, 0)))
        if window == "crossing":
            start_day = date(2026, 2, 27) - timedelta(days=n_days // 2)
        close_day = start_day + timedelta(days=n_days - 1)
        start = _rand_time(erng, start_day, 1, 15)
        close = _rand_time(erng, close_day, 16, 22)

        k = 2 if sc.kind != "multi" else erng.randint(3, 6) if plant is None else 3
        facts = sc.make(erng, close, k)
        facts.phrasing = phrasing
        if plant == "not_negrisk":
            facts.title = f"{facts.slots.get('country', 'Veltria')}: which measures pass this session?"
        winner = erng.randrange(len(facts.options))
        starts = [0] * len(facts.options)
        late_idx = None
        if opts.get("aug") == "late_loser":
            late_idx = (winner + 1) % len(facts.options)
            starts[late_idx] = 6
        elif opts.get("aug") == "late_winner":
            late_idx = winner
            starts[late_idx] = 4
        probs = latent_path(nrng, n_days, len(facts.options), winner, starts)
        if plant == "nearly_certain":
            base = 0.975 + 0.012 * np.sin(np.arange(n_days) * 1.7) + nrng.normal(0, 0.004, n_days)
            probs = _two(np.clip(base, 0.955, 0.995), winner)
        elif plant == "flat":
            base = 0.40 + 0.001 * (np.arange(n_days) % 2)
            probs = _two(base, winner)
        faithful = faithful_mask(nrng, n_days, plant, starts[winner])
        etype = "binary" if sc.kind != "multi" else "multi"
        # legs
        legs: list[Leg] = []
        mids = market_ids[n * 8 : n * 8 + 8]
        if etype == "binary":
            legs.append(Leg(facts.options[0], facts.leg_questions[0], str(mids[0]),
                            "0x" + hex_id(64, seed, "cond", n, 0),
                            (token_id(seed, n, 0, 0), token_id(seed, n, 0, 1)),
                            start + timedelta(minutes=erng.randint(0, 50)), close,
                            datetime(close_day.year, close_day.month, close_day.day, 23, 0, tzinfo=UTC)))
        else:
            for j, opt in enumerate(facts.options):
                ls = start + timedelta(days=starts[j], minutes=erng.randint(0, 50))
                lc = close + timedelta(seconds=erng.randint(0, 600))
                if j != winner and plant is None and erng.random() < 0.15:
                    lc = close - timedelta(days=erng.randint(1, 3))  # leg closed early
                legs.append(Leg(opt, facts.leg_questions[j], str(mids[j]),
                                "0x" + hex_id(64, seed, "cond", n, j),
                                (token_id(seed, n, j, 0), token_id(seed, n, j, 1)),
                                ls, lc,
                                datetime(close_day.year, close_day.month, close_day.day, 23, 0,
                                         tzinfo=UTC),
                                late=(j == late_idx), yes_final=(j == winner)))
            if plant == "multiple_yes":
                legs[(winner + 1) % len(legs)].yes_final = True
        split = {"train": "train", "eval": "eval"}.get(window, "none")
        ev = Event(str(ids[n]), sc, facts, etype, winner, legs, start, close, plant, split,
                   [start_day + timedelta(days=i) for i in range(n_days)], probs, faithful,
                   augmented=late_idx is not None)
        ev.extra.update(opts)
        if erng.random() < 0.4 and n_days >= 10:
            cd = start_day + timedelta(days=erng.randint(n_days // 2, n_days - 2))
            ev.clarification = _clarification(erng, facts, cd)
        events.append(ev)
    return events


def _two(p_winner: np.ndarray, winner: int) -> np.ndarray:
    out = np.empty((len(p_winner), 2))
    out[:, winner] = p_winner
    out[:, 1 - winner] = 1 - p_winner
    return out


def _clarification(rng: random.Random, facts: Facts, d: date) -> str:
    subj = facts.slots["subj_short"]
    text = rng.choice([
        (f"If {subj} is postponed beyond {facts.slots['when']}, this market will remain open until "
         f"the rescheduled date, up to thirty days later."),
        (f"The resolution source for {subj} is the official announcement; unofficial projections "
         f"will not be used."),
        (f"A recount or appeal concerning {subj} will not delay resolution unless the official "
         f"result is formally suspended."),
    ])
    if rng.random() < 0.5:
        return f"\n\nUpdate ({d.isoformat()}): {text}"
    return f"\n\nClarification {d.isoformat()}: {text}"
