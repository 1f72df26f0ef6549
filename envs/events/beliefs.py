"""Daily market beliefs and daily trade activity per event leg (docs/design.md §4 "Daily market belief").

Inputs are long tables of raw observations (one row per CLOB price point or per trade); outputs are
the `BELIEFS` and `TRADES_DAILY` tables. Everything is vectorized with polars.

- `price` = the UTC-day mean of the leg's YES-price observations (binary: p for the first option,
  1 - p for the second) = the scalar market probability used by the log score vs market.
- `price_close` = the leg's last YES-price observation of the UTC day (binary: likewise 1 - p):
  the market's belief at the end of a day whose news the agent has read (`market.belief: close`).
- `belief` = price / sum of prices over the options priced that day (binary: (p, 1 - p)); options
  not priced that day have a null belief (never imputed); `complete` = every option priced that day.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

#: Columns of the raw price-observation table fed to `daily_beliefs`.
PRICE_OBS_SCHEMA = {"event_id": pl.Utf8, "option_index": pl.Int32, "t": pl.Int64, "p": pl.Float64}
#: Columns of the raw trade table fed to `daily_trades`.
TRADE_OBS_SCHEMA = {"event_id": pl.Utf8, "option_index": pl.Int32, "t": pl.Int64, "size": pl.Float64}
#: Columns of the option table (one row per event option, in the event's order).
OPTIONS_SCHEMA = {"event_id": pl.Utf8, "option_index": pl.Int32, "option": pl.Utf8, "binary": pl.Boolean}


@dataclass
class BeliefResult:
    """Daily beliefs plus the count of observations dropped as out of [0, 1] or non-finite."""

    beliefs: pl.DataFrame
    dropped_prices: int


def _utc_day(col: str) -> pl.Expr:
    return pl.from_epoch(pl.col(col), time_unit="s").dt.replace_time_zone("UTC").dt.date().alias("day")


def daily_beliefs(obs: pl.DataFrame, options: pl.DataFrame) -> BeliefResult:
    """UTC-day mean YES price per leg and the normalized belief vector per (event, day).

    `obs` holds (event_id, option_index, t [unix s], p); for binary events only option 0's series is
    needed (option 1 is derived as 1 - p). `options` lists every option of every event.
    """
    obs = obs.select(list(PRICE_OBS_SCHEMA)).cast(PRICE_OBS_SCHEMA)  # type: ignore[arg-type]
    valid = pl.col("p").is_finite() & (pl.col("p") >= 0.0) & (pl.col("p") <= 1.0)
    n_before = obs.height
    obs = obs.filter(valid.fill_null(False))
    dropped = n_before - obs.height
    options = options.cast(OPTIONS_SCHEMA)  # type: ignore[arg-type]
    binary_ids = options.filter(pl.col("binary")).select("event_id").unique()

    daily = (
        obs.with_columns(_utc_day("t"))
        .group_by("event_id", "option_index", "day")
        .agg(pl.col("p").mean().alias("price"), pl.col("p").sort_by(["t", "p"]).last().alias("price_close"),
             pl.len().cast(pl.Int32).alias("n_obs"))
    )
    # Binary events: the first option's series defines both options (p, 1 - p).
    bin_first = daily.join(binary_ids, on="event_id", how="semi").filter(pl.col("option_index") == 0)
    bin_second = bin_first.with_columns(
        pl.lit(1, dtype=pl.Int32).alias("option_index"), (1.0 - pl.col("price")).alias("price"),
        (1.0 - pl.col("price_close")).alias("price_close"),
    )
    multi = daily.join(binary_ids, on="event_id", how="anti")
    priced = pl.concat([multi, bin_first, bin_second.select(multi.columns)], how="vertical")

    # Full (event, day, option) grid over the days on which at least one option is priced.
    days = priced.select("event_id", "day").unique()
    grid = days.join(options.select("event_id", "option_index", "option"), on="event_id", how="inner")
    out = grid.join(priced, on=["event_id", "option_index", "day"], how="left")
    n_opts = options.group_by("event_id").agg(pl.len().alias("_k"))
    out = (
        out.join(n_opts, on="event_id", how="left")
        .with_columns(
            pl.col("price").sum().over("event_id", "day").alias("_sum"),
            pl.col("price").is_not_null().sum().over("event_id", "day").alias("_n_priced"),
        )
        .with_columns(
            pl.when(pl.col("price").is_not_null() & (pl.col("_sum") > 0))
            .then(pl.col("price") / pl.col("_sum"))
            .otherwise(None)
            .alias("belief"),
            (pl.col("_n_priced") == pl.col("_k")).alias("complete"),
            pl.col("n_obs").fill_null(0),
        )
        .select("event_id", "day", "option", "option_index", "price", "price_close", "belief", "complete", "n_obs")
        .sort("event_id", "day", "option_index")
    )
    return BeliefResult(beliefs=out, dropped_prices=dropped)


def daily_trades(trades: pl.DataFrame, options: pl.DataFrame) -> pl.DataFrame:
    """Trade count and share volume per (event, option leg, UTC day)."""
    trades = trades.select(list(TRADE_OBS_SCHEMA)).cast(TRADE_OBS_SCHEMA)  # type: ignore[arg-type]
    options = options.cast(OPTIONS_SCHEMA)  # type: ignore[arg-type]
    out = (
        trades.with_columns(_utc_day("t"))
        .group_by("event_id", "option_index", "day")
        .agg(pl.len().cast(pl.Int32).alias("n_trades"), pl.col("size").sum().alias("shares"))
        .join(options.select("event_id", "option_index", "option"), on=["event_id", "option_index"], how="inner")
        .select("event_id", "option", "option_index", "day", "n_trades", "shares")
        .sort("event_id", "option_index", "day")
    )
    return out
