"""Evidence diagnostics from memory-on notebooks (SPEC section 7, Forecast-Dojo Figure 2b/2c).

- own count n_k(r, e, t), t >= 2: entries of the step-t notebook snapshot (active and superseded,
  each entry once) whose `date_observed` d satisfies  tau_{t-1} < d <= tau_t; entries with an
  unparseable date, or a date after the forecast date of the step that created them (future),
  are excluded. Because such an entry cannot exist before step t, carried entries are never
  counted twice and earlier evidence found late is not counted.
- nbar_k(e, t): mean over the rollouts that have a notebook chain.
- A_k(e, t): mean of nbar_j(e, t) over the *other* agents j with a count (leave-one-agent-out).
- kappa_k = sum(nbar_k * A_k) / sum(A_k^2) over event-steps with both (no-intercept slope).
- dBrier_k(e, t) = Brier(t) - Brier(t-1) per rollout (negative = improvement), grouped by
  quartile of A (cut points over all agents), averaged within events, then across events.
- G_k = Brier(first) - Brier(last) per rollout, averaged over rollouts within an event, then across
  events (positive = improvement). Spearman of kappa, and of search / open counts per forecast, with G.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np
import polars as pl
from forecast_env.eval.bootstrap import DRAWS, LEVEL, SEED, Estimate, clustered_mean


@dataclass(frozen=True)
class EvidenceResult:
    counts: pl.DataFrame  # agent, event_id, step, own, A
    per_agent: pl.DataFrame  # agent, kappa, G, G_lo, G_hi, n_events, searches, opens
    quartiles: pl.DataFrame  # quartile, lo_cut, hi_cut, d_brier, lo, hi, n_events
    cut_points: list[float]
    spearman: dict[str, float]


def _parse_day(x: str | None) -> date | None:
    if x is None:
        return None
    try:
        return date.fromisoformat(str(x).strip()[:10])
    except ValueError:
        return None


def own_counts(notebook: pl.DataFrame, forecasts: pl.DataFrame) -> pl.DataFrame:
    """n_k(r, e, t) for t >= 2 from notebook snapshots of memory-on episodes (zeros included)."""
    sched = forecasts.select("agent", "event_id", "rollout", "step", "forecast_date", "memory").unique(
        ["agent", "event_id", "rollout", "step"])
    mem = sched.filter(pl.col("memory").fill_null(True))
    prev = mem.select("agent", "event_id", "rollout", step=pl.col("step") + 1, prev_date=pl.col("forecast_date"))
    steps = mem.join(prev, on=["agent", "event_id", "rollout", "step"], how="inner").select(
        "agent", "event_id", "rollout", "step", "forecast_date", "prev_date")
    if notebook.height == 0:
        return steps.select("agent", "event_id", "rollout", "step", own=pl.lit(0, pl.Int64))
    nb = notebook.select("agent", "event_id", "rollout", "step", "entry_id", "date_observed", "created_step").unique(
        ["agent", "event_id", "rollout", "step", "entry_id"])
    nb = nb.with_columns(d=pl.col("date_observed").map_elements(_parse_day, return_dtype=pl.Date))
    created = mem.select("agent", "event_id", "rollout", created_step="step", created_date="forecast_date")
    nb = nb.join(created, on=["agent", "event_id", "rollout", "created_step"], how="left")
    nb = nb.filter(pl.col("d").is_not_null() & (pl.col("created_date").is_null() | (pl.col("d") <= pl.col("created_date"))))
    hits = (nb.join(steps, on=["agent", "event_id", "rollout", "step"], how="inner")
            .filter((pl.col("d") > pl.col("prev_date")) & (pl.col("d") <= pl.col("forecast_date")))
            .group_by(["agent", "event_id", "rollout", "step"]).len("own"))
    # every memory-on rollout is a notebook chain, an empty ledger counting zero
    return (steps.join(hits, on=["agent", "event_id", "rollout", "step"], how="left")
            .with_columns(pl.col("own").fill_null(0).cast(pl.Int64))
            .select("agent", "event_id", "rollout", "step", "own"))


def availability(own: pl.DataFrame) -> pl.DataFrame:
    """nbar_k(e, t) and the leave-one-agent-out index A_k(e, t) (null when no peer has a count)."""
    nbar = own.group_by(["agent", "event_id", "step"]).agg(own=pl.col("own").cast(pl.Float64).mean())
    tot = nbar.group_by(["event_id", "step"]).agg(s=pl.col("own").sum(), c=pl.len())
    return (nbar.join(tot, on=["event_id", "step"])
            .with_columns(A=pl.when(pl.col("c") > 1).then((pl.col("s") - pl.col("own")) / (pl.col("c") - 1)))
            .select("agent", "event_id", "step", "own", "A").sort(["agent", "event_id", "step"]))


def capture_slopes(avail: pl.DataFrame) -> pl.DataFrame:
    """kappa_k = sum(own * A) / sum(A^2) per agent."""
    return (avail.filter(pl.col("A").is_not_null())
            .group_by("agent").agg(num=(pl.col("own") * pl.col("A")).sum(), den=(pl.col("A") ** 2).sum())
            .select("agent", kappa=pl.when(pl.col("den") > 0).then(pl.col("num") / pl.col("den")))
            .sort("agent"))


def episode_improvement(forecasts: pl.DataFrame, draws: int = DRAWS, seed: int = SEED,
                        level: float = LEVEL) -> pl.DataFrame:
    """G_k: first minus last recorded Brier per memory-on rollout, events weighted equally."""
    f = forecasts.filter(pl.col("brier").is_not_null() & pl.col("memory").fill_null(True))
    ends = (f.sort("step").group_by(["agent", "event_id", "rollout"])
            .agg(first=pl.col("brier").first(), last=pl.col("brier").last(), n=pl.len())
            .filter(pl.col("n") >= 2).with_columns(g=pl.col("first") - pl.col("last")))
    rows = []
    for agent in sorted(ends["agent"].unique().to_list()):
        sub = ends.filter(pl.col("agent") == agent)
        est = clustered_mean(sub, "g", draws, seed, level, within=("rollout",))
        rows.append({"agent": agent, "G": est.value, "G_lo": est.lo, "G_hi": est.hi, "n_events": est.n_events})
    return pl.DataFrame(rows, schema={"agent": pl.String, "G": pl.Float64, "G_lo": pl.Float64, "G_hi": pl.Float64,
                                      "n_events": pl.Int64})


def brier_change_by_quartile(forecasts: pl.DataFrame, avail: pl.DataFrame, draws: int = DRAWS, seed: int = SEED,
                             level: float = LEVEL) -> tuple[pl.DataFrame, list[float]]:
    """Mean Brier change between consecutive forecasts by quartile of A (Figure 2b)."""
    f = forecasts.filter(pl.col("brier").is_not_null()).select("agent", "event_id", "rollout", "step", "brier")
    prev = f.select("agent", "event_id", "rollout", step=pl.col("step") + 1, prev_brier="brier")
    d = (f.join(prev, on=["agent", "event_id", "rollout", "step"], how="inner")
         .with_columns(d_brier=pl.col("brier") - pl.col("prev_brier"))
         .join(avail.filter(pl.col("A").is_not_null()).select("agent", "event_id", "step", "A"),
               on=["agent", "event_id", "step"], how="inner"))
    schema = {"quartile": pl.Int64, "lo_cut": pl.Float64, "hi_cut": pl.Float64, "d_brier": pl.Float64,
              "lo": pl.Float64, "hi": pl.Float64, "n_events": pl.Int64}
    if d.height == 0:
        return pl.DataFrame(schema=schema), []
    a = d["A"].to_numpy()
    cuts = [float(c) for c in np.quantile(a, [0.25, 0.5, 0.75])]
    q = np.searchsorted(np.asarray(cuts), a, side="right") + 1  # 1..4; values on a cut go up
    d = d.with_columns(quartile=pl.Series(q.astype(np.int64)))
    edges = [float(a.min()), *cuts, float(a.max())]
    rows = []
    for k in range(1, 5):
        sub = d.filter(pl.col("quartile") == k)
        est = clustered_mean(sub, "d_brier", draws, seed, level, within=("agent", "rollout", "step")) \
            if sub.height else Estimate(float("nan"), float("nan"), float("nan"), 0)
        rows.append({"quartile": k, "lo_cut": edges[k - 1], "hi_cut": edges[k], "d_brier": est.value, "lo": est.lo,
                     "hi": est.hi, "n_events": est.n_events})
    return pl.DataFrame(rows, schema=schema), cuts


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties); NaN with fewer than 3 pairs."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3:
        return float("nan")
    from scipy.stats import rankdata

    rx, ry = rankdata(x), rankdata(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def evidence_diagnostics(forecasts: pl.DataFrame, notebook: pl.DataFrame, draws: int = DRAWS, seed: int = SEED,
                         level: float = LEVEL) -> EvidenceResult:
    """Every Figure 2b/2c quantity from a run's forecasts and notebook snapshots."""
    scored = forecasts.filter(~pl.col("missing").fill_null(False))
    avail = availability(own_counts(notebook, scored))
    kappa = capture_slopes(avail)
    g = episode_improvement(scored, draws, seed, level)
    usage = (scored.group_by("agent").agg(searches=pl.col("n_search").cast(pl.Float64).mean(),
                                          opens=pl.col("n_open").cast(pl.Float64).mean()))
    per_agent = (g.join(kappa, on="agent", how="full", coalesce=True)
                 .join(usage, on="agent", how="left").sort("agent")
                 .select("agent", "kappa", "G", "G_lo", "G_hi", "n_events", "searches", "opens"))
    quart, cuts = brier_change_by_quartile(scored, avail, draws, seed, level)
    gv = per_agent["G"].to_numpy()
    rho = {name: spearman(per_agent[name].to_numpy(), gv) for name in ("kappa", "searches", "opens")}
    return EvidenceResult(avail, per_agent, quart, cuts, rho)
