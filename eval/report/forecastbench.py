"""The ForecastBench leaderboard's scoring, for forecasters that answer every item (issue 40, first step).

Follows `src/leaderboard/main.py` of github.com/forecastingresearch/forecastbench (MIT):

- Rounds pooled (`driver`, `filter_forecast_files_by_forecast_due_date`,
  `filter_forecast_files_by_min_resolved_questions`): due date <= the run day - 50 days, and in the round's
  file (combination questions still in) >= 50 resolved market rows and >= 225 resolved dataset rows
  (`MIN_NUM_DATASET_QUESTIONS`). See `pool_rounds`.
- Items (`get_df_info`, `get_masks`): combination questions dropped; only resolved rows kept, market and
  dataset alike (the "dataset" mask is dataset source AND resolved); a market item is
  (due date, source, id), a dataset item (due date, source, id, horizon), horizon = resolution date - due date.
- Brier = (forecast - resolved_to)^2 (`brier_score`); the dataset and market scores are means over items
  (`score_models`); overall = (dataset + market) / 2, N overall = N dataset + N market.
- The leaderboard score is the two-way fixed-effects adjusted Brier (`two_way_fixed_effects`: Brier minus
  the question's fixed effect, estimated without the naive forecasters), then each of the dataset, market
  and overall columns is shifted so that "Always 0.5" scores exactly 0.25
  (`rescale_difficulty_adjusted_brier`), then Brier Index = (1 - sqrt(score)) * 100
  (`apply_brier_index_transform`).

For a forecaster that answers every item the fixed effects cancel: its adjusted score is
mean(Brier) - mean(fe) and "Always 0.5"'s is 0.25 - mean(fe) over the same items, so after the shift its
score is its plain mean Brier, and the Brier Index is (1 - sqrt(mean Brier)) * 100. That is what
`naive_rows` computes, with no regression.
"""

from __future__ import annotations

import csv
import math
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from forecast_env.envs.events.forecastbench import Round

MIN_DAYS = 50
MIN_MARKET_RESOLVED = 50
MIN_DATASET_RESOLVED = 225
NAIVE = {"Always 0": 0.0, "Always 1": 1.0, "Always 0.5": 0.5}

ITEM_SCHEMA = {
    "kind": pl.String,
    "due_date": pl.Date,
    "source": pl.String,
    "id": pl.String,
    "resolution_date": pl.Date,
    "horizon": pl.Int64,
    "resolved_to": pl.Float64,
}


def pool_rounds(
    rounds: list[Round],
    as_of: date,
    min_days: int = MIN_DAYS,
    min_market: int = MIN_MARKET_RESOLVED,
    min_dataset: int = MIN_DATASET_RESOLVED,
) -> list[Round]:
    """The rounds the leaderboard run on `as_of` pools (counts include combination questions, as the code's)."""
    cutoff = (as_of - timedelta(days=min_days)).isoformat()
    kept = []
    for rnd in rounds:
        if rnd.due_date > cutoff:
            continue
        n_market = sum(1 for r in rnd.resolutions.values() if r.kind == "market" and r.resolved)
        n_dataset = sum(1 for r in rnd.resolutions.values() if r.kind == "dataset" and r.resolved)
        if n_market >= min_market and n_dataset >= min_dataset:
            kept.append(rnd)
    return kept


def items(rounds: list[Round]) -> pl.DataFrame:
    """One row per scored item: combination questions, unknown sources and unresolved rows dropped."""
    rows: list[dict[str, Any]] = []
    for rnd in rounds:
        due = date.fromisoformat(rnd.due_date)
        for r in rnd.resolutions.values():
            if r.combo or r.kind is None or not r.resolved or r.resolved_to is None:
                continue
            res = date.fromisoformat(r.resolution_date)
            rows.append(
                {
                    "kind": r.kind,
                    "due_date": due,
                    "source": r.source,
                    "id": r.id,
                    "resolution_date": res,
                    "horizon": (res - due).days,
                    "resolved_to": r.resolved_to,
                }
            )
    return pl.DataFrame(rows, schema=ITEM_SCHEMA).sort(
        ["due_date", "kind", "source", "id", "resolution_date"]
    )


def brier_index(score: float) -> float:
    """(1 - sqrt(score)) * 100: 100 perfect, 50 always 0.5, 0 maximally wrong."""
    return (1.0 - math.sqrt(score)) * 100.0


def naive_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The rows "Always 0", "Always 1", "Always 0.5" as the leaderboard scores them on `frame` (from `items`)."""
    out = []
    for model, p in NAIVE.items():
        row: dict[str, Any] = {"model": model}
        for kind in ("dataset", "market"):
            part = frame.filter(pl.col("kind") == kind)
            n = part.height
            mean = part.select(((pl.lit(p) - pl.col("resolved_to")) ** 2).mean()).item() if n else None
            row[f"brier_{kind}"] = mean
            row[f"n_{kind}"] = n
            row[f"index_{kind}"] = brier_index(mean) if mean is not None else None
        if row["brier_dataset"] is None or row["brier_market"] is None:
            row["brier_overall"] = row["index_overall"] = None
        else:
            row["brier_overall"] = (row["brier_dataset"] + row["brier_market"]) / 2
            row["index_overall"] = brier_index(row["brier_overall"])
        row["n_overall"] = row["n_dataset"] + row["n_market"]
        out.append(row)
    return out


def published_naive_rows(csv_path: str | Path) -> list[dict[str, Any]]:
    """The naive rows of a published leaderboard CSV (`leaderboards/csv/leaderboard_baseline.csv`), same keys."""
    columns = {
        "index_dataset": "Dataset",
        "n_dataset": "N dataset",
        "index_market": "Market",
        "n_market": "N market",
        "index_overall": "Overall",
        "n_overall": "N",
        "brier_dataset": "Brier Dataset",
        "brier_market": "Brier Market",
        "brier_overall": "Brier Overall",
    }
    out = []
    with open(csv_path, newline="", encoding="utf-8") as fh:
        for rec in csv.DictReader(fh):
            if rec.get("Model") not in NAIVE or rec.get("Team") != "ForecastBench":
                continue
            row: dict[str, Any] = {"model": rec["Model"]}
            for key, col in columns.items():
                value = rec.get(col)
                if value in (None, "", "—"):
                    row[key] = None
                else:
                    row[key] = int(value) if key.startswith("n_") else float(value)
            out.append(row)
    return out
