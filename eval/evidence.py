"""Evidence diagnostics from memory-on notebooks (docs/design.md §7, Forecast-Dojo Figure 2b/2c).

- notebook keepers: the agents that wrote at least one notebook entry in the run. Only they count
  as peers for A and only they get kappa, the A groups and the Spearman correlations (an agent
  without a notebook tool, like `uniform`, would otherwise dilute A by a factor that depends on how
  many baselines were run); G and search / open counts are reported for every agent.
- own count n_k(r, e, t), t >= 2: entries of the step-t notebook snapshot (active and superseded,
  each entry once) whose `date_observed` d satisfies  tau_{t-1} < d <= tau_t; entries with an
  unparseable date, or a date after the forecast date of the step that created them (future),
  are excluded. Because such an entry cannot exist before step t, carried entries are never
  counted twice and earlier evidence found late is not counted.
- nbar_k(e, t): mean over the rollouts that have a notebook chain.
- A_k(e, t): mean of nbar_j(e, t) over the *other* keepers j with a count (leave-one-agent-out).
- kappa_k = sum(nbar_k * A_k) / sum(A_k^2) over event-steps with both (no-intercept slope);
  undefined, with the reason recorded, when the agent keeps no notebook, has no peer keeper, or
  its peers never recorded newly dated evidence (A = 0 throughout).
- dBrier_k(e, t) = Brier(t) - Brier(t-1) per rollout (negative = improvement), grouped by A:
  by quartile (cut points over all keepers' transitions, a value on a cut point in the lower
  group, tied cut points merged) when A takes more than four distinct values, else by value;
  averaged over steps within a rollout, rollouts, agents, then across events.
- G_k = Brier(first) - Brier(last) per rollout, averaged over rollouts within an event, then across
  events (positive = improvement). Spearman of kappa, and of search / open counts per forecast,
  with G across keepers (at least three).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

import numpy as np
import polars as pl
from forecast_env.eval.bootstrap import DRAWS, LEVEL, SEED, clustered_mean

#: with at most this many distinct values of A, transitions are grouped by value, not quartile
MAX_VALUE_GROUPS = 4
MIN_SPEARMAN_AGENTS = 3


@dataclass(frozen=True)
class EvidenceResult:
    """Every Figure 2b/2c quantity; `notes` says why a diagnostic is undefined (keyed by name)."""

    counts: pl.DataFrame  # agent, event_id, step, own, A
    per_agent: pl.DataFrame  # agent, keeper, kappa, kappa_note, G, G_lo, G_hi, n_events, searches, opens
    quartiles: pl.DataFrame  # quartile, label, lo_cut, hi_cut, n, d_brier, lo, hi, n_events
    cut_points: list[float]
    spearman: dict[str, float]
    grouping: str = "quartiles"  # "quartiles" | "values" | "none"
    keepers: tuple[str, ...] = ()
    notes: dict[str, str] = field(default_factory=dict)


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


def availability(own: pl.DataFrame, keepers: Sequence[str] | None = None) -> pl.DataFrame:
    """nbar_k(e, t) and the leave-one-agent-out index A_k(e, t) over the peer `keepers` (default:
    every agent in `own`); A is null when no peer keeper has a count."""
    nbar = own.group_by(["agent", "event_id", "step"]).agg(own=pl.col("own").cast(pl.Float64).mean())
    peers = nbar if keepers is None else nbar.filter(pl.col("agent").is_in(list(keepers)))
    tot = peers.group_by(["event_id", "step"]).agg(s=pl.col("own").sum(), c=pl.len())
    is_peer = pl.lit(True) if keepers is None else pl.col("agent").is_in(list(keepers))
    self_s = pl.when(is_peer).then(pl.col("own")).otherwise(0.0)
    self_c = pl.when(is_peer).then(1).otherwise(0)
    return (nbar.join(tot, on=["event_id", "step"], how="left")
            .with_columns(pl.col("s").fill_null(0.0), pl.col("c").fill_null(0))
            .with_columns(A=pl.when(pl.col("c") - self_c > 0).then((pl.col("s") - self_s) / (pl.col("c") - self_c)))
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
        est = clustered_mean(sub, "g", draws, seed, level, levels=("rollout",))
        rows.append({"agent": agent, "G": est.value, "G_lo": est.lo, "G_hi": est.hi, "n_events": est.n_events})
    return pl.DataFrame(rows, schema={"agent": pl.String, "G": pl.Float64, "G_lo": pl.Float64, "G_hi": pl.Float64,
                                      "n_events": pl.Int64})


def a_groups(a: np.ndarray) -> tuple[np.ndarray, list[float], str]:
    """Group index (0-based) of each A value, the cut points used, and the grouping kind.

    More than MAX_VALUE_GROUPS distinct values: quartiles (a value on a cut point goes to the lower
    group; tied cut points merge groups, so there may be fewer than four). Otherwise one group per
    distinct value, since quartiles of a few values would be empty or repeat a value.
    """
    distinct = np.unique(a)
    if distinct.size <= MAX_VALUE_GROUPS:
        return np.searchsorted(distinct, a), [], "values"
    cuts = np.unique(np.quantile(a, [0.25, 0.5, 0.75]))
    group = np.searchsorted(cuts, a, side="left")
    _, dense = np.unique(group, return_inverse=True)  # drop groups left empty by ties
    return dense.ravel(), [float(c) for c in cuts], "quartiles"


def brier_change_by_quartile(forecasts: pl.DataFrame, avail: pl.DataFrame, draws: int = DRAWS, seed: int = SEED,
                             level: float = LEVEL) -> tuple[pl.DataFrame, list[float], str]:
    """Mean Brier change between consecutive forecasts by group of A (Figure 2b); see `a_groups`."""
    f = forecasts.filter(pl.col("brier").is_not_null()).select("agent", "event_id", "rollout", "step", "brier")
    prev = f.select("agent", "event_id", "rollout", step=pl.col("step") + 1, prev_brier="brier")
    d = (f.join(prev, on=["agent", "event_id", "rollout", "step"], how="inner")
         .with_columns(d_brier=pl.col("brier") - pl.col("prev_brier"))
         .join(avail.filter(pl.col("A").is_not_null()).select("agent", "event_id", "step", "A"),
               on=["agent", "event_id", "step"], how="inner"))
    schema = {"quartile": pl.Int64, "label": pl.String, "lo_cut": pl.Float64, "hi_cut": pl.Float64, "n": pl.Int64,
              "d_brier": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "n_events": pl.Int64}
    if d.height == 0:
        return pl.DataFrame(schema=schema), [], "none"
    a = d["A"].to_numpy()
    group, cuts, kind = a_groups(a)
    d = d.with_columns(quartile=pl.Series((group + 1).astype(np.int64)))
    n_groups = int(group.max()) + 1
    rows = []
    for k in range(1, n_groups + 1):
        sub = d.filter(pl.col("quartile") == k)
        lo_a, hi_a = float(sub["A"].min()), float(sub["A"].max())
        est = clustered_mean(sub, "d_brier", draws, seed, level, levels=("agent", "rollout"))
        if kind == "values":
            label = f"A = {lo_a:.2f}"
        else:  # real quartiles only when no tie merged or emptied a group
            label = f"Q{k}" if n_groups == 4 else f"G{k}"
        rows.append({"quartile": k, "label": label, "lo_cut": lo_a, "hi_cut": hi_a, "n": sub.height,
                     "d_brier": est.value, "lo": est.lo, "hi": est.hi, "n_events": est.n_events})
    return pl.DataFrame(rows, schema=schema), cuts, kind


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


def notebook_keepers(notebook: pl.DataFrame) -> tuple[str, ...]:
    """Agents with at least one notebook entry in the run."""
    return tuple(sorted(notebook["agent"].unique().to_list())) if notebook.height else ()


def _kappa_note(agent: str, keepers: tuple[str, ...], avail: pl.DataFrame) -> str | None:
    if agent not in keepers:
        return "keeps no notebook (no entries in this run)"
    if len(keepers) < 2:
        return "no other agent keeps a notebook, so the peer index A is undefined"
    a = avail.filter((pl.col("agent") == agent) & pl.col("A").is_not_null())
    if a.height == 0:
        return "no step >= 2 shared with a peer notebook"
    if float((a["A"] ** 2).sum()) == 0.0:
        return "A = 0 at every step (peers recorded no newly dated evidence)"
    return None


def evidence_diagnostics(forecasts: pl.DataFrame, notebook: pl.DataFrame, draws: int = DRAWS, seed: int = SEED,
                         level: float = LEVEL) -> EvidenceResult:
    """Every Figure 2b/2c quantity from a run's forecasts and notebook snapshots."""
    scored = forecasts.filter(~pl.col("missing").fill_null(False))
    keepers = notebook_keepers(notebook)
    avail = availability(own_counts(notebook, scored), keepers)
    kept = avail.filter(pl.col("agent").is_in(list(keepers)))
    notes = {}
    kappa = capture_slopes(kept)
    g = episode_improvement(scored, draws, seed, level)
    usage = (scored.group_by("agent").agg(searches=pl.col("n_search").cast(pl.Float64).mean(),
                                          opens=pl.col("n_open").cast(pl.Float64).mean()))
    per_agent = (g.join(kappa, on="agent", how="full", coalesce=True)
                 .join(usage, on="agent", how="full", coalesce=True).sort("agent"))
    kappa_notes = [_kappa_note(a, keepers, avail) for a in per_agent["agent"].to_list()]
    per_agent = (per_agent.with_columns(keeper=pl.col("agent").is_in(list(keepers)),
                                        kappa_note=pl.Series(kappa_notes, dtype=pl.String))
                 .with_columns(kappa=pl.when(pl.col("kappa_note").is_null()).then(pl.col("kappa")))
                 .select("agent", "keeper", "kappa", "kappa_note", "G", "G_lo", "G_hi", "n_events", "searches",
                         "opens"))
    quart, cuts, kind = brier_change_by_quartile(scored.filter(pl.col("agent").is_in(list(keepers))), kept, draws,
                                                 seed, level)
    if kind == "none":
        notes["quartiles"] = ("no consecutive forecasts with a defined A (needs two notebook-keeping agents "
                              "and memory-on episodes of two or more dates)")
    elif kind == "values":
        notes["quartiles"] = (f"A takes only {quart.height} distinct value(s) over the transitions, so they are "
                              "grouped by value instead of by quartile")
    elif quart.height < 4:
        notes["quartiles"] = (f"tied quartile cut points leave {quart.height} groups (a value on a cut point "
                              "belongs to the lower group)")
    rank = per_agent.filter(pl.col("keeper"))
    gv = rank["G"].to_numpy()
    rho = {name: spearman(rank[name].to_numpy(), gv) for name in ("kappa", "searches", "opens")}
    for name, value in rho.items():
        if not np.isfinite(value):
            ok = rank.filter(pl.col(name).is_not_null() & pl.col("G").is_not_null()).height
            notes[f"spearman_{name}"] = (f"needs {MIN_SPEARMAN_AGENTS} notebook-keeping agents with {name} and G; "
                                         f"this run has {ok}" if ok < MIN_SPEARMAN_AGENTS
                                         else f"{name} or G is the same for every agent (no ranks)")
    return EvidenceResult(avail, per_agent, quart, cuts, rho, kind, keepers, notes)
