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

Scoring a run of the environment on imported items (`score_run`, `forecastbench_section`): the items are the
rows of `WS/events/forecastbench.parquet` (`schema.FORECASTBENCH_ITEMS`) with status "scored", each answered by
the run's forecast of its event on its schedule date; every agent of the run is a "model". For forecasters that
skip items the fixed effects do not cancel, so they are estimated here (`two_way_fixed_effects`, the model
`brier ~ 1 | question_pk + model_pk` that the leaderboard fits with pyfixest) or read from a file of
ForecastBench's own effects (`read_fixed_effects`).
"""

from __future__ import annotations

import csv
import math
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from forecast_env.envs.events.forecastbench import Round
from forecast_env.errors import RunError

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


# ---------------------------------------------------------------------------------------------
# difficulty adjustment: the two-way fixed effects
# ---------------------------------------------------------------------------------------------

FREEZE = "Freeze value"
MARKET_DUE = "Market on due date"
KINDS = ("dataset", "market")
ITEMS_FILE = "forecastbench.parquet"
ITEM_COLUMNS = ("question_pk", "kind", "due_date", "source", "resolved", "resolved_to", "freeze_value",
                "market_value_due", "event_id", "forecast_date", "status")
FORECAST_COLUMNS = ("agent", "event_id", "rollout", "step", "forecast_date", "options", "probs", "missing")
#: the files of ForecastBench's published question effects (`question_fixed_effects.<date>.<board>.json`)
#: key a question by these instead of `question_pk`
_PUBLISHED_KEY = ("forecast_due_date", "source", "id", "horizon")
FE_SCHEMA = {"question_pk": pl.String, "question_fixed_effect": pl.Float64}


def _require(frame: pl.DataFrame, columns: tuple[str, ...], what: str) -> None:
    lacking = [c for c in columns if c not in frame.columns]
    if lacking:
        raise RunError(f"{what} lacks the column(s) {', '.join(lacking)} (has: {', '.join(frame.columns)})")


def _fit_two_way(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, float], int]:
    """(question effects, model effects, number of connected groups) of brier = a_model + b_question + u.

    Solved exactly, not by iteration: with the question effects eliminated (b_q = mean over q's rows of
    brier - a_model), the normal equations for the model effects are L a = r, L = diag(rows of m) - N' C^-1 N
    the Laplacian of the models' co-answer graph (N: question x model row counts, C: rows per question) and
    r_m = sum over m's rows of (brier - the question's mean brier). L is singular once per connected group of
    models (the groups that share items); each group is solved with its first model's effect held at 0, then
    shifted so that its models' effects, weighted by their rows, average 0.
    """
    _require(frame, ("question_pk", "model", "brier"), "two_way_fixed_effects' input")
    if frame.height == 0:
        return pl.DataFrame(schema=FE_SCHEMA), {}, 0
    bad = frame.filter(pl.col("brier").is_null() | pl.col("question_pk").is_null() | pl.col("model").is_null()
                       | ~pl.col("brier").cast(pl.Float64).is_finite())
    if bad.height:
        raise RunError(f"two_way_fixed_effects: {bad.height} row(s) with a null key or a null or non-finite "
                       f"brier (first: {bad.row(0, named=True)})")
    y = frame["brier"].cast(pl.Float64).to_numpy()
    questions, qi = np.unique(frame["question_pk"].cast(pl.String).to_numpy(), return_inverse=True)
    models, mi = np.unique(frame["model"].cast(pl.String).to_numpy(), return_inverse=True)
    n_q, n_m = len(questions), len(models)
    c_q = np.bincount(qi, minlength=n_q).astype(float)
    c_m = np.bincount(mi, minlength=n_m).astype(float)
    s_q = np.bincount(qi, weights=y, minlength=n_q)
    counts = sparse.csr_matrix((np.ones(len(y)), (qi, mi)), shape=(n_q, n_m))
    shared = (counts.T @ sparse.diags(1.0 / c_q) @ counts).toarray()  # N' C^-1 N, models x models
    lap = np.diag(c_m) - shared
    rhs = np.bincount(mi, weights=y, minlength=n_m) - counts.T @ (s_q / c_q)
    n_groups, group = connected_components(sparse.csr_matrix(shared > 0), directed=False)
    alpha = np.zeros(n_m)
    for g in range(n_groups):
        members = np.flatnonzero(group == g)
        rest = members[1:]
        if len(rest):
            alpha[rest] = np.linalg.solve(lap[np.ix_(rest, rest)], rhs[rest])
        alpha[members] -= np.average(alpha[members], weights=c_m[members])
    beta = (s_q - np.bincount(qi, weights=alpha[mi], minlength=n_q)) / c_q
    effects = pl.DataFrame({"question_pk": questions.astype(str).tolist(), "question_fixed_effect": beta},
                           schema=FE_SCHEMA)
    return effects, dict(zip(models.astype(str).tolist(), alpha.tolist(), strict=True)), int(n_groups)


def two_way_fixed_effects(frame: pl.DataFrame) -> pl.DataFrame:
    """The question effects b of brier_{i,j} = a_model + b_question + u, fitted by least squares.

    `frame` has columns question_pk, model, brier (one row per forecast; a (question, model) pair may repeat).
    The fit is the one pyfixest's `feols("brier ~ 1 | question_pk + model_pk")` makes, which the leaderboard
    uses (`two_way_fixed_effects` in its `src/leaderboard/main.py`), solved exactly (see `_fit_two_way`); a
    question answered by a single model still gets an effect. Returns question_pk, question_fixed_effect, one
    row per question, sorted by question_pk.

    Normalization (the effects are identified up to a constant per connected group of models, the models that
    share items directly or through others): within each group the model effects, weighted by their rows,
    average 0, so the question effects carry the group's mean Brier. pyfixest normalizes otherwise (its first
    model's effect 0); the difference is a constant per group, which the shift that makes "Always 0.5" score
    0.25 cancels when there is one group. With several groups the scores of different groups are not comparable
    through the adjustment (`score_run` says so in a note).
    """
    return _fit_two_way(frame)[0]


def read_fixed_effects(path: str | Path) -> pl.DataFrame:
    """Question effects from a CSV, Parquet or JSON file: columns `question_pk` and `question_fixed_effect`.

    ForecastBench's published files (`question_fixed_effects.<date>.<leaderboard>.json`, records) key a question
    by forecast_due_date, source, id and horizon (null for market questions) instead; such a file is read too,
    the key built as the leaderboard builds it: due_source_id (market), due_source_id_horizon (dataset).
    Returns question_pk, question_fixed_effect; a missing column, a null or non-finite effect or a repeated key
    is a RunError naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise RunError(f"{path}: no such fixed-effects file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pl.read_csv(path, infer_schema=False)  # every column as text: ids and keys stay as written
        elif suffix in (".parquet", ".pq"):
            frame = pl.read_parquet(path)
        elif suffix == ".json":
            frame = pl.read_json(path, infer_schema_length=None)
        else:
            raise RunError(f"{path}: a fixed-effects file is .csv, .parquet or .json, not '{path.suffix}'")
    except RunError:
        raise
    except Exception as exc:  # polars raises its own error types for unreadable files
        raise RunError(f"{path}: not a readable {suffix[1:]} file ({exc})") from exc
    if "question_pk" not in frame.columns and all(c in frame.columns for c in _PUBLISHED_KEY):
        horizon = pl.col("horizon").cast(pl.Float64).round(0).cast(pl.Int64).cast(pl.String)
        base = pl.concat_str([pl.col("forecast_due_date").cast(pl.String).str.slice(0, 10),
                              pl.col("source").cast(pl.String), pl.col("id").cast(pl.String)], separator="_")
        frame = frame.with_columns(question_pk=pl.when(pl.col("horizon").is_null()).then(base)
                                   .otherwise(pl.concat_str([base, horizon], separator="_")))
    lacking = [c for c in ("question_pk", "question_fixed_effect") if c not in frame.columns]
    if lacking:
        raise RunError(f"{path}: no column {' or '.join(repr(c) for c in lacking)} (has: {', '.join(frame.columns)}); "
                       "a fixed-effects file has the columns question_pk and question_fixed_effect")
    try:
        frame = frame.select(pl.col("question_pk").cast(pl.String),
                             pl.col("question_fixed_effect").cast(pl.Float64))
    except Exception as exc:
        raise RunError(f"{path}: question_fixed_effect is not numeric ({exc})") from exc
    bad = frame.filter(pl.col("question_pk").is_null() | pl.col("question_fixed_effect").is_null()
                       | ~pl.col("question_fixed_effect").is_finite())
    if bad.height:
        raise RunError(f"{path}: {bad.height} row(s) with an empty question_pk or a missing or non-finite "
                       f"question_fixed_effect (first: {bad.row(0, named=True)})")
    dups = frame.group_by("question_pk").len().filter(pl.col("len") > 1).sort("question_pk")
    if dups.height:
        raise RunError(f"{path}: {dups.height} question_pk value(s) appear more than once (e.g. "
                       f"{', '.join(dups['question_pk'].head(3).to_list())}); one effect per question")
    return frame.sort("question_pk")


# ---------------------------------------------------------------------------------------------
# scoring a run on imported items
# ---------------------------------------------------------------------------------------------


def _round_rules(items: pl.DataFrame, as_of: date, min_days: int = MIN_DAYS, min_market: int = MIN_MARKET_RESOLVED,
                 min_dataset: int = MIN_DATASET_RESOLVED) -> pl.DataFrame:
    """Per due date: resolved market and dataset rows over all of the round's rows (combination rows in, status
    ignored, as `pool_rounds`), and why the leaderboard would not pool it ("" when it would)."""
    cutoff = as_of - timedelta(days=min_days)
    resolved = pl.col("resolved").fill_null(False)
    per = (items.filter(pl.col("due_date").is_not_null())
           .group_by("due_date")
           .agg(n_market=((pl.col("kind") == "market") & resolved).sum(),
                n_dataset=((pl.col("kind") == "dataset") & resolved).sum())
           .sort("due_date"))
    why: list[str] = []
    for due, n_market, n_dataset in per.select("due_date", "n_market", "n_dataset").iter_rows():
        rules = []
        if due > cutoff:
            rules.append(f"due {(as_of - due).days} days before {as_of.isoformat()} (< {min_days})")
        if n_market < min_market:
            rules.append(f"{n_market} resolved market rows (< {min_market})")
        if n_dataset < min_dataset:
            rules.append(f"{n_dataset} resolved dataset rows (< {min_dataset})")
        why.append("; ".join(rules))
    return per.with_columns(why=pl.Series(why, dtype=pl.String))


def _answers(forecasts: pl.DataFrame, scored: pl.DataFrame, notes: list[str] | None = None) -> pl.DataFrame:
    """Each agent's Brier per scored item: agent, question_pk, brier, rollouts (the mean over rollouts)."""
    keys = ["event_id", "forecast_date"]
    hit = forecasts.join(scored.select(*keys).unique(), on=keys, how="semi")
    missing = hit.filter(pl.col("missing").fill_null(False) | pl.col("probs").is_null())
    answered = hit.filter(~pl.col("missing").fill_null(False) & pl.col("probs").is_not_null()).with_row_index("_r")
    yes = (answered.select("_r", "options", "probs").explode(["options", "probs"])
           .filter(pl.col("options") == "Yes").group_by("_r").agg(p=pl.col("probs").first()))
    with_p = answered.join(yes, on="_r", how="inner")
    if notes is not None:
        if missing.height:
            notes.append(f"{missing.height} forecast(s) on scored items are missing (infrastructure failures): "
                         "not scored, the item counts for the agents that answered it.")
        if with_p.height < answered.height:
            notes.append(f"{answered.height - with_p.height} forecast(s) on scored items have no option 'Yes': "
                         "not scored.")
    per_rollout = (with_p.sort("step").group_by("agent", "rollout", *keys).agg(pl.col("p").last())
                   .join(scored.select(*keys, "question_pk", "resolved_to"), on=keys, how="inner")
                   .with_columns(brier=(pl.col("p") - pl.col("resolved_to")) ** 2))
    return (per_rollout.group_by("agent", "question_pk")
            .agg(pl.col("brier").mean(), rollouts=pl.len())
            .rename({"agent": "model"}))


def _scored_items(items: pl.DataFrame, notes: list[str]) -> pl.DataFrame:
    scored = items.filter(pl.col("status") == "scored")
    usable = pl.all_horizontal(pl.col(c).is_not_null() for c in ("question_pk", "kind", "resolved_to", "event_id",
                                                                 "forecast_date", "due_date"))
    n_unusable = scored.height - scored.filter(usable).height
    if n_unusable:
        notes.append(f"{n_unusable} item(s) with status 'scored' lack a key, kind, outcome, event or date: "
                     "not scored.")
        scored = scored.filter(usable)
    dups = scored.group_by("question_pk").len().filter(pl.col("len") > 1)
    if dups.height:
        raise RunError(f"the items table has {dups.height} question_pk value(s) scored more than once (e.g. "
                       f"{', '.join(dups['question_pk'].sort().head(3).to_list())}); rebuild the import")
    return scored


def _index(x: float | None) -> float | None:
    return None if x is None else brier_index(max(x, 0.0))


def data_date(items: pl.DataFrame) -> date:
    """The date of the resolution data, the leaderboard's run day when no `as_of` is given: the latest resolution
    date of a resolved DATASET row (a dataset row resolves only once its date has passed; a market row's
    resolution date may be the market's scheduled end, months after it resolved early), else of any resolved
    row; today when nothing is resolved."""
    done = items.filter(pl.col("resolved") & pl.col("resolution_date").is_not_null())
    for frame in (done.filter(pl.col("kind") == "dataset"), done):
        if frame.height:
            latest = frame["resolution_date"].max()
            if isinstance(latest, date):
                return latest
    return date.today()


def score_run(forecasts: pl.DataFrame, items: pl.DataFrame, fixed_effects: pl.DataFrame | None = None,
              as_of: date | None = None, pool: bool = True) -> dict[str, Any]:
    """A run's forecasts on imported ForecastBench items, scored by the leaderboard's rules.

    `forecasts`: the run's `forecasts.parquet` (`schema.FORECASTS`); `items`: `WS/events/forecastbench.parquet`
    (`schema.FORECASTBENCH_ITEMS`). An item (status "scored") is answered by a forecast of its event on its
    forecast_date; missing forecasts (infrastructure failures) are not scored, fallbacks are. p = the probability
    of the option "Yes"; the item's Brier is ForecastBench's binary Brier (p - resolved_to)^2, half the
    environment's multiclass Brier of the same forecast (which sums over both options). Several rollouts of an
    agent on one item: the mean of their Briers (within a rollout, the last step of that date). Every agent is
    a model; a model's score on a kind is over the items it answered.

    The items scored: the scored items that at least one agent answered, of the rounds the leaderboard would
    pool (`pool`): due date <= `as_of` - 50 days (default `as_of`: `data_date`, so a report never depends on the clock) and, over all of the round's rows in `items`
    (combination rows in, status ignored, as `pool_rounds`), >= 50 resolved market and >= 225 resolved dataset
    rows. When no answered round passes, every answered round is scored and a note says why each failed.
    Reference rows on those items: "Freeze value" (market items: p = the freeze value clipped to [0, 1]; a
    dataset freeze value is a series level, not a probability), "Market on due date (N=n)" (market items with
    a due-date market value), "Always 0", "Always 1", "Always 0.5".

    Difficulty adjustment: `fixed_effects` (question_pk, question_fixed_effect, e.g. ForecastBench's own, from
    `read_fixed_effects`; items without one are dropped from every row, with a note; none at all is an error),
    else estimated per kind by `two_way_fixed_effects` from the agents and, for market items, "Freeze value"
    (never the Always rows nor "Market on due date", as the leaderboard drops its dummies). adjusted = Brier -
    effect, a model's kind score the mean over its items, overall = (dataset + market) / 2, each shifted by
    0.25 - the "Always 0.5" score (`rescale_difficulty_adjusted_brier`); Brier Index = (1 - sqrt(max(score,
    0))) * 100. The rows' adjusted_* are these shifted scores, brier_* the plain mean Briers.

    Returns {"rows", "notes", "pooled_due_dates" (the answered rounds the rule pools), "scored_due_dates",
    "fixed_effects" ("supplied" or "estimated"), "n_pending" (items with status pending), "by_source"}.
    """
    _require(items, ITEM_COLUMNS, "the ForecastBench items table")
    as_of = as_of or data_date(items)
    _require(forecasts, FORECAST_COLUMNS, "the forecasts")
    notes: list[str] = []
    agents = sorted(forecasts["agent"].drop_nulls().unique().to_list())
    reserved = [a for a in agents if a in NAIVE or a == FREEZE or a.startswith(MARKET_DUE)]
    if reserved:
        raise RunError(f"agent name(s) {', '.join(reserved)} clash with the reference rows of the ForecastBench "
                       "scoring; rename the agent(s)")
    scored = _scored_items(items, notes)
    answers = _answers(forecasts, scored, notes)
    if answers.height == 0:
        raise RunError("no forecast of the run answers a scored ForecastBench item")
    answered = scored.join(answers.select("question_pk").unique(), on="question_pk", how="semi")

    rules = _round_rules(items, as_of)
    answered_rounds = rules.join(answered.select("due_date").unique(), on="due_date", how="semi")
    pooled = answered_rounds.filter(pl.col("why") == "")["due_date"].to_list()
    if not pool:
        use = answered_rounds["due_date"].to_list()
        notes.append("Pooling off: every answered round is scored.")
    elif pooled:
        use = pooled
        left = answered_rounds.filter(pl.col("why") != "")
        if left.height:
            n_left = answered.filter(pl.col("due_date").is_in(left["due_date"].to_list())).height
            notes.append(f"{n_left} answered item(s) of round(s) the leaderboard would not pool yet are not scored: "
                         + "; ".join(f"{d.isoformat()}: {w}" for d, w in left.select("due_date", "why").iter_rows())
                         + ".")
    else:
        use = answered_rounds["due_date"].to_list()
        notes.append("No answered round passes the leaderboard's pooling rules, so every answered round is "
                     "scored: " + "; ".join(f"{d.isoformat()}: {w}"
                                            for d, w in answered_rounds.select("due_date", "why").iter_rows()) + ".")
    universe = answered.filter(pl.col("due_date").is_in(use)).select(
        "question_pk", "kind", "source", "due_date", "resolved_to", "freeze_value", "market_value_due")

    # every model's Brier per item: the agents, then the reference rows
    item_cols = ["question_pk", "kind", "source"]
    agent_rows = answers.join(universe.select(item_cols), on="question_pk", how="inner").select(
        "model", *item_cols, "brier")
    market = universe.filter(pl.col("kind") == "market")
    freeze = market.filter(pl.col("freeze_value").is_not_null())
    clipped = freeze.filter((pl.col("freeze_value") < 0) | (pl.col("freeze_value") > 1)).height
    if clipped:
        notes.append(f"{clipped} market freeze value(s) outside [0, 1] were clipped for the '{FREEZE}' row.")
    due = market.filter(pl.col("market_value_due").is_not_null())
    due_name = f"{MARKET_DUE} (N={due.height})"
    parts = [agent_rows,
             freeze.select(pl.lit(FREEZE).alias("model"), *item_cols,
                           brier=(pl.col("freeze_value").clip(0.0, 1.0) - pl.col("resolved_to")) ** 2),
             due.select(pl.lit(due_name).alias("model"), *item_cols,
                        brier=(pl.col("market_value_due").clip(0.0, 1.0) - pl.col("resolved_to")) ** 2)]
    for name, p in NAIVE.items():
        parts.append(universe.select(pl.lit(name).alias("model"), *item_cols,
                                     brier=(pl.lit(p) - pl.col("resolved_to")) ** 2))
    long = pl.concat([x.with_columns(pl.col("brier").cast(pl.Float64)) for x in parts], how="vertical_relaxed")

    # the question effects
    if fixed_effects is not None:
        _require(fixed_effects, ("question_pk", "question_fixed_effect"), "the supplied fixed effects")
        fe = fixed_effects.select(pl.col("question_pk").cast(pl.String),
                                  pl.col("question_fixed_effect").cast(pl.Float64))
        lacking = universe.join(fe, on="question_pk", how="anti")
        if lacking.height == universe.height:
            raise RunError(f"none of the {universe.height} scored question_pk values has a supplied fixed effect "
                           f"(e.g. {', '.join(universe['question_pk'].sort().head(3).to_list())}); is the file of "
                           "the same rounds?")
        if lacking.height:
            notes.append(f"{lacking.height} of {universe.height} scored question_pk value(s) have no supplied fixed "
                         f"effect (e.g. {', '.join(lacking['question_pk'].sort().head(3).to_list())}): these items "
                         "are dropped from every row.")
        mode = "supplied"
    else:
        frames = []
        for kind in KINDS:
            estimators = [*agents, FREEZE] if kind == "market" else agents
            est = long.filter((pl.col("kind") == kind) & pl.col("model").is_in(estimators))
            if est.height == 0:
                continue
            effects, _, n_groups = _fit_two_way(est.select("question_pk", "model", "brier"))
            frames.append(effects)
            who = sorted(est["model"].unique().to_list())
            n_items = est["question_pk"].n_unique()
            notes.append(f"{kind.capitalize()} question effects estimated from this run's {len(who)} forecaster(s) "
                         f"({', '.join(who)}) on {n_items} item(s).")
            if est.group_by("model").agg(pl.col("question_pk").n_unique())["question_pk"].min() == n_items:
                notes.append(f"Every one of them answered every {kind} item, so the fixed effects cancel: the {kind} "
                             "figures equal the unadjusted ones (adjusted = Brier).")
            if n_groups > 1:
                notes.append(f"The {kind} forecasters fall into {n_groups} groups that share no item; each group's "
                             "effects are normalized on its own, so the adjustment does not compare them.")
        fe = pl.concat(frames) if frames else pl.DataFrame(schema=FE_SCHEMA)
        mode = "estimated"
    long = long.join(fe, on="question_pk", how="inner").with_columns(
        adjusted=pl.col("brier") - pl.col("question_fixed_effect"))

    # per model and kind, the shift, the index
    per = long.group_by("model", "kind").agg(n=pl.len(), brier=pl.col("brier").mean(),
                                             adjusted=pl.col("adjusted").mean())
    stats: dict[tuple[str, str], tuple[int, float, float]] = {
        (m, k): (n, b, a) for m, k, n, b, a in per.select("model", "kind", "n", "brier", "adjusted").iter_rows()}
    half = "Always 0.5"
    order = [*agents, FREEZE, due_name, *NAIVE]
    rows: list[dict[str, Any]] = []
    negative = False
    for model in order:
        if not any((model, k) in stats for k in KINDS):
            continue
        row: dict[str, Any] = {"model": model}
        raw: dict[str, float | None] = {}
        for kind in KINDS:
            n, b, a = stats.get((model, kind), (0, None, None))
            shift = 0.25 - stats[(half, kind)][2] if (half, kind) in stats else 0.0
            adj = None if a is None else a + shift
            raw[kind] = a
            negative = negative or (adj is not None and adj < 0)
            row.update({f"n_{kind}": n, f"brier_{kind}": b, f"adjusted_{kind}": adj, f"index_{kind}": _index(adj)})
        overall: float | None = None
        row["brier_overall"] = None
        if raw["dataset"] is not None and raw["market"] is not None:
            base = (stats[(half, "dataset")][2] + stats[(half, "market")][2]) / 2
            overall = (raw["dataset"] + raw["market"]) / 2 + 0.25 - base
            row["brier_overall"] = (row["brier_dataset"] + row["brier_market"]) / 2
        row.update(adjusted_overall=overall, index_overall=_index(overall), n_overall=row["n_dataset"] + row["n_market"])
        rows.append(row)
    if negative:
        notes.append("A difficulty-adjusted score below 0 is shown with Brier Index 100 (sqrt of 0); the "
                     "leaderboard's own code would give no number.")

    kinds_scored = sorted(universe["kind"].unique().to_list())
    if len(kinds_scored) == 1:
        notes.append(f"Only {kinds_scored[0]} items were scored, so there is no overall score.")
    by_source = (long.filter(pl.col("model").is_in(agents))
                 .group_by("kind", "source", "model").agg(n=pl.len(), brier=pl.col("brier").mean())
                 .join(long.group_by("kind", "source").agg(n_items=pl.col("question_pk").n_unique()),
                       on=["kind", "source"], how="left")
                 .sort("kind", "source", "model")
                 .select("kind", "source", "n_items", "model", "n", "brier"))
    return {
        "rows": rows,
        "notes": notes,
        "pooled_due_dates": [d.isoformat() for d in pooled],
        "scored_due_dates": [d.isoformat() for d in sorted(use)],
        "fixed_effects": mode,
        "n_pending": items.filter(pl.col("status") == "pending").height,
        "by_source": by_source.to_dicts(),
        "as_of": as_of.isoformat(),
    }


def items_path(run_dir: str | Path) -> Path | None:
    """The ForecastBench items table of a run: its own copy, else its workspace's (None when neither exists)."""
    from forecast_env.eval.runs.store import read_record

    run_dir = Path(run_dir)
    if (run_dir / ITEMS_FILE).is_file():
        return run_dir / ITEMS_FILE
    workspace = read_record(run_dir, missing_ok=True).get("workspace")
    for ws in ([Path(workspace)] if workspace else []) + [run_dir.parent.parent]:
        if (ws / "events" / ITEMS_FILE).is_file():
            return ws / "events" / ITEMS_FILE
    return None


def forecastbench_section(run_dir: str | Path, fixed_effects_path: str | Path | None = None,
                          as_of: date | None = None) -> dict[str, Any] | None:
    """`score_run` on a run directory, for the report; None when the run answers no scored item.

    The items table: `run_dir/forecastbench.parquet` if present, else `<workspace>/events/forecastbench.parquet`
    (the workspace of the run's record, else `run_dir/../..`). Adds "items_path" to the result, and makes
    "fixed_effects" "supplied:<path>" when `fixed_effects_path` is given.
    """
    run_dir = Path(run_dir)
    path = items_path(run_dir)
    if path is None or not (run_dir / "forecasts.parquet").is_file():
        return None
    items = pl.read_parquet(path)
    _require(items, ITEM_COLUMNS, f"{path}")
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    _require(forecasts, FORECAST_COLUMNS, f"{run_dir / 'forecasts.parquet'}")
    if _answers(forecasts, _scored_items(items, [])).height == 0:
        return None
    fe = read_fixed_effects(fixed_effects_path) if fixed_effects_path is not None else None
    out = score_run(forecasts, items, fixed_effects=fe, as_of=as_of)
    if fixed_effects_path is not None:
        out["fixed_effects"] = f"supplied:{fixed_effects_path}"
    out["items_path"] = str(path)
    return out
