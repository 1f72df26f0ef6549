"""Score tables of a run (docs/design.md §7): per agent and for the market, by type, category, step third.

Every estimate weighs events equally: an event's value is the mean over its rollouts of each
rollout's mean over its scored dates (`bootstrap.event_means`), and the interval comes from the
event-clustered bootstrap. The market row uses the market's complete belief vectors on the same
forecast dates (its log-vs-market is 0 by definition and omitted). Log score vs market is reported
against the day's mean price (`log_vs_market`) and, where the forecasts table carries it, against
the day's last price (`log_vs_market_close`). Step thirds use the relative position (t-1)/(T_e-1)
of the scheduled step (T_e = 1 puts the only date at position 0; such an event can never cover all
three thirds, so it drops out) and keep, as in Forecast-Dojo Figure 2a, agent dates with a scalar
market probability and market dates with a complete vector, then only events represented in all
three thirds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import polars as pl

from forecast_env.eval.report.bootstrap import (
    DRAWS,
    LEVEL,
    SEED,
    Estimate,
    clustered_mean,
    event_means,
)

MARKET = "market"
BASE_RATE_REF = "base-rate reference"
METRICS = ("brier", "accuracy", "log_vs_market")
#: log score vs the market's mean price of the day, and vs its last price (when the run recorded it)
MARKET_COMPARISONS = ("log_vs_market", "log_vs_market_close")
THIRDS = ("early [0, 1/3)", "middle [1/3, 2/3)", "late [2/3, 1]")


@dataclass(frozen=True)
class Boot:
    """Bootstrap settings."""

    draws: int = DRAWS
    seed: int = SEED
    level: float = LEVEL


def scored(forecasts: pl.DataFrame) -> pl.DataFrame:
    """Rows that count: not missing."""
    return forecasts.filter(~pl.col("missing").fill_null(False) & pl.col("brier").is_not_null())


def _est(frame: pl.DataFrame, value: str, boot: Boot) -> Estimate:
    return clustered_mean(frame, value, boot.draws, boot.seed, boot.level)


def market_comparisons(forecasts: pl.DataFrame) -> tuple[str, ...]:
    """The log-vs-market columns this run recorded: present with a value somewhere (older runs lack
    `log_vs_market_close`, or carry it empty). `log_vs_market` is always listed."""
    return tuple(c for c in MARKET_COMPARISONS
                 if c == "log_vs_market" or (c in forecasts.columns and forecasts[c].null_count() < forecasts.height))


def agent_table(forecasts: pl.DataFrame, market: pl.DataFrame | None = None, boot: Boot = Boot()) -> list[dict]:
    """Per agent (and the market): Brier, accuracy, log vs market with CIs, forecast and missing counts."""
    rows = []
    for agent in sorted(forecasts["agent"].unique().to_list()):
        all_rows = forecasts.filter(pl.col("agent") == agent)
        f = scored(all_rows)
        row = {"agent": agent, "n_forecasts": f.height, "missing": all_rows.height - f.height,
               "fallbacks": f.filter(pl.col("fallback").is_not_null()).height,
               "n_events": f["event_id"].n_unique()}
        for m in ("brier", "accuracy", *MARKET_COMPARISONS):
            row[m] = _est(f, m, boot).to_dict() if m in market_comparisons(forecasts) + ("brier", "accuracy") else None
        rows.append(row)
    if market is not None and market.height:
        row = {"agent": MARKET, "n_forecasts": market.height, "missing": 0, "fallbacks": 0,
               "n_events": market["event_id"].n_unique()}
        for m in ("brier", "accuracy"):
            row[m] = _est(market, m, boot).to_dict()
        row.update({m: None for m in MARKET_COMPARISONS})
        rows.append(row)
    return rows


def group_table(forecasts: pl.DataFrame, market: pl.DataFrame | None, column: str, boot: Boot = Boot()) -> list[dict]:
    """Brier and accuracy per agent (and market) within each value of `column` (type, category)."""
    frames = [scored(forecasts)]
    if market is not None and market.height:
        frames.append(market.with_columns(agent=pl.lit(MARKET)))
    rows = []
    for frame in frames:
        if column not in frame.columns:
            continue
        f = frame.with_columns(pl.col(column).fill_null("(none)"))
        for (agent, group), sub in sorted(f.group_by(["agent", column]), key=lambda kv: (str(kv[0][1]), kv[0][0])):
            rows.append({"group": group, "agent": agent, "n_forecasts": sub.height,
                         "brier": _est(sub, "brier", boot).to_dict(), "accuracy": _est(sub, "accuracy", boot).to_dict()})
    rows.sort(key=lambda r: (str(r["group"]), r["agent"] == MARKET, r["agent"]))
    return rows


def with_third(frame: pl.DataFrame) -> pl.DataFrame:
    """Add `position` = (t-1)/(T_e-1) (0 when T_e = 1) and `third` in 0, 1, 2."""
    pos = pl.when(pl.col("steps_total") > 1).then(
        (pl.col("step") - 1).cast(pl.Float64) / (pl.col("steps_total") - 1).cast(pl.Float64)).otherwise(0.0)
    third = pl.when(pl.col("position") < 1 / 3).then(0).when(pl.col("position") < 2 / 3).then(1).otherwise(2)
    return frame.with_columns(position=pos).with_columns(third=third.cast(pl.Int64))


def step_thirds(forecasts: pl.DataFrame, market: pl.DataFrame | None = None, boot: Boot = Boot()) -> list[dict]:
    """Brier (and log vs market for agents) by step third on events covering all three thirds."""
    comps = market_comparisons(forecasts)
    frames = [(a, with_third(scored(forecasts).filter((pl.col("agent") == a) & pl.col("market_prob").is_not_null())))
              for a in sorted(forecasts["agent"].unique().to_list())]
    if market is not None and market.height:
        frames.append((MARKET, with_third(market)))
    rows = []
    for agent, f in frames:
        full = f.group_by("event_id").agg(pl.col("third").n_unique().alias("k")).filter(pl.col("k") == 3)
        f = f.join(full.select("event_id"), on="event_id", how="semi")
        for t in range(3):
            sub = f.filter(pl.col("third") == t)
            row = {"agent": agent, "third": THIRDS[t], "n_events": full.height,
                   "brier": _est(sub, "brier", boot).to_dict()}
            for m in MARKET_COMPARISONS:
                row[m] = _est(sub, m, boot).to_dict() if agent != MARKET and m in comps else None
            rows.append(row)
    return rows


def paired_difference(forecasts: pl.DataFrame, a: str, b: str, value: str = "brier", boot: Boot = Boot()) -> Estimate:
    """Mean over events of (a - b), each agent's event value taken on the (event, date) cells both
    scored (same averaging order as the tables), with its event-clustered interval."""
    f = scored(forecasts).filter(pl.col(value).is_not_null() & pl.col(value).is_not_nan())
    fa, fb = f.filter(pl.col("agent") == a), f.filter(pl.col("agent") == b)
    cells = fa.select("event_id", "step").unique().join(fb.select("event_id", "step").unique(),
                                                       on=["event_id", "step"])
    ea = event_means(fa.join(cells, on=["event_id", "step"], how="semi"), value)
    eb = event_means(fb.join(cells, on=["event_id", "step"], how="semi"), value)
    j = ea.join(eb, on="event_id", suffix="_b").select("event_id", diff=pl.col(value) - pl.col(f"{value}_b"))
    return _est(j, "diff", boot)


def paired_table(forecasts: pl.DataFrame, boot: Boot = Boot(), value: str = "brier") -> list[dict]:
    """All ordered-by-name pairs (A - B) with CIs; negative Brier difference favours A."""
    agents = sorted(forecasts["agent"].unique().to_list())
    rows = []
    for a, b in itertools.combinations(agents, 2):
        est = paired_difference(forecasts, a, b, value, boot)
        rows.append({"a": a, "b": b, "metric": value, **est.to_dict(), "significant": est.excludes(0.0)})
    return rows


def base_rate_probs(forecasts: pl.DataFrame) -> pl.DataFrame:
    """The empirical base-rate forecast per row: within each stratum (binary / K options), the
    event-weighted frequency of the label at each option position, as a constant forecast."""
    f = scored(forecasts).with_columns(k=pl.col("options").list.len())
    ev = f.unique("event_id", keep="first", maintain_order=True)
    rows = ev.select("event_id", "options", "label", "k").to_dicts()
    freq: dict[int, np.ndarray] = {}
    for r in rows:
        k = r["k"]
        freq.setdefault(k, np.zeros(k))
        if r["label"] in r["options"]:
            freq[k][r["options"].index(r["label"])] += 1
    rates = {k: (v / v.sum() if v.sum() else np.full(k, 1.0 / k)) for k, v in freq.items()}
    return f.with_columns(probs=pl.col("k").map_elements(lambda k: list(rates.get(k, np.full(k, 1.0 / k))),
                                                         return_dtype=pl.List(pl.Float64)))


def base_rate_reference(forecasts: pl.DataFrame, boot: Boot = Boot()) -> dict:
    """Brier of the base-rate reference on each agent's forecast dates, and Delta_BR = ref - agent."""
    from forecast_env import scoring

    ref = base_rate_probs(forecasts)
    if ref.height == 0:
        return {"brier": None, "agents": []}
    ref = ref.with_columns(ref_brier=pl.struct("options", "probs", "label").map_elements(
        lambda r: scoring.brier(dict(zip(r["options"], r["probs"])), r["label"], r["options"]),
        return_dtype=pl.Float64))
    agents: list[dict[str, Any]] = []
    out = {"brier": _est(ref.filter(pl.col("agent") == ref["agent"][0]), "ref_brier", boot).to_dict(), "agents": agents}
    for agent in sorted(ref["agent"].unique().to_list()):
        sub = ref.filter(pl.col("agent") == agent).with_columns(delta=pl.col("ref_brier") - pl.col("brier"))
        est = _est(sub, "delta", boot)
        agents.append({"agent": agent, "ref_brier": _est(sub, "ref_brier", boot).value, **est.to_dict(),
                              "beats_base_rate": bool(est.lo > 0)})
    return out


def quick_summary(forecasts: pl.DataFrame) -> pl.DataFrame:
    """Per agent point estimates without intervals (the runner's closing table)."""
    rows = []
    for agent in sorted(forecasts["agent"].unique().to_list()):
        all_rows = forecasts.filter(pl.col("agent") == agent)
        f = scored(all_rows)
        row: dict[str, Any] = {"agent": agent}
        for m in METRICS:
            em = event_means(f, m)
            row[m] = float(cast(float, em[m].mean())) if em.height else float("nan")
        row.update(n_forecasts=f.height, missing=all_rows.height - f.height)
        rows.append(row)
    return pl.DataFrame(rows, schema={"agent": pl.String, "brier": pl.Float64, "accuracy": pl.Float64,
                                      "log_vs_market": pl.Float64, "n_forecasts": pl.Int64, "missing": pl.Int64})


__all__ = [
    "MARKET",
    "MARKET_COMPARISONS",
    "Boot",
    "agent_table",
    "base_rate_reference",
    "group_table",
    "market_comparisons",
    "paired_difference",
    "paired_table",
    "quick_summary",
    "step_thirds",
]
