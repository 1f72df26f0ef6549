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

World runs (`world_evidence_diagnostics`, docs/design.md §7 "Evidence in world runs"): one notebook
serves every question and is recorded once, at the world's end, so the evidence behind a forecast
is what the agent READ for that question instead. A reading segment is the run of one day's tool
calls after that day's previous successful `forecast` (or the day's start) up to a successful
`forecast(question_id)`; its articles (successful `open_article` calls) and searches are
attributed to that question. Calls after a day's last forecast concern no question and are not
counted. For a question's scheduled step t (date tau_t), the own count is the number of distinct
articles in its segments on days d with tau_{t-1} < d <= tau_t (the reading behind the forecasts
that replaced the one scored at tau_{t-1}); searches and opens per scored row are counted the same
way, with no lower bound at t = 1. Readers (agents with at least one attributed article) play the
part of notebook keepers; A, kappa, the Brier-change groups, G and the Spearman correlations are
then computed exactly as above, on every rollout (reading does not depend on the memory setting).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import cast

import numpy as np
import polars as pl

from forecast_env.eval.report.bootstrap import DRAWS, LEVEL, SEED, clustered_mean

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
    basis: str = "notebook"  # "notebook" (episode runs) | "reading" (world runs: articles read per question)


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
        lo_a, hi_a = float(cast(float, sub["A"].min())), float(cast(float, sub["A"].max()))
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


#: how the diagnostics name their evidence, per basis
WORDS = {
    "notebook": {"none": "keeps no notebook (no entries in this run)",
                 "alone": "no other agent keeps a notebook, so the peer index A is undefined",
                 "shared": "no step >= 2 shared with a peer notebook",
                 "zero": "A = 0 at every step (peers recorded no newly dated evidence)",
                 "peers": "notebook-keeping agents",
                 "transitions": "needs two notebook-keeping agents and memory-on episodes of two or more dates"},
    "reading": {"none": "read no article for any question (no open_article before a forecast in this run)",
                "alone": "no other agent read articles for its forecasts, so the peer index A is undefined",
                "shared": "no scheduled step >= 2 shared with a peer reader",
                "zero": "A = 0 at every step (peers read nothing new between scheduled dates)",
                "peers": "reading agents",
                "transitions": "needs two reading agents and questions scheduled on two or more dates"},
}


def _kappa_note(agent: str, keepers: tuple[str, ...], avail: pl.DataFrame, basis: str = "notebook") -> str | None:
    words = WORDS[basis]
    if agent not in keepers:
        return words["none"]
    if len(keepers) < 2:
        return words["alone"]
    a = avail.filter((pl.col("agent") == agent) & pl.col("A").is_not_null())
    if a.height == 0:
        return words["shared"]
    if float((a["A"] ** 2).sum()) == 0.0:
        return words["zero"]
    return None


def evidence_diagnostics(forecasts: pl.DataFrame, notebook: pl.DataFrame, draws: int = DRAWS, seed: int = SEED,
                         level: float = LEVEL) -> EvidenceResult:
    """Every Figure 2b/2c quantity from a run's forecasts and notebook snapshots."""
    scored = forecasts.filter(~pl.col("missing").fill_null(False))
    usage = (scored.group_by("agent").agg(searches=pl.col("n_search").cast(pl.Float64).mean(),
                                          opens=pl.col("n_open").cast(pl.Float64).mean()))
    return _diagnose(scored, own_counts(notebook, scored), notebook_keepers(notebook), usage, "notebook", draws,
                     seed, level)


def world_reading(forecasts: pl.DataFrame, tool_calls: pl.DataFrame, days: pl.DataFrame) -> pl.DataFrame:
    """Per world forecast row (agent, event_id = question, rollout, step): `own` = distinct articles read
    for the question on days in (tau_{t-1}, tau_t], `searches`, `opens` likewise (no lower bound at the
    first step), and `first` (no earlier scheduled step). See the module docstring."""
    keys = ["agent", "rollout"]
    rows = forecasts.select("agent", "event_id", "rollout", "step", "forecast_date").unique(
        ["agent", "event_id", "rollout", "step"]).sort("agent", "event_id", "rollout", "step")
    rows = rows.with_columns(prev=pl.col("forecast_date").shift(1).over("agent", "event_id", "rollout"))
    empty = rows.with_columns(own=pl.lit(0, pl.Int64), searches=pl.lit(0, pl.Int64), opens=pl.lit(0, pl.Int64))
    if tool_calls.height == 0:
        return empty.select("agent", "event_id", "rollout", "step", "own", "searches", "opens",
                            first=pl.col("prev").is_null())
    ok = pl.col("error").is_null()
    tc = (tool_calls.filter(pl.col("tool").is_not_null())
          .sort("agent", "rollout", "call_index")
          .with_columns(fc=((pl.col("tool") == "forecast") & ok).cast(pl.Int64))
          .with_columns(seg=pl.col("fc").cum_sum().over("agent", "rollout", "step") - pl.col("fc"),
                        qid=pl.when(pl.col("fc") == 1).then(pl.col("args_json").str.json_path_match("$.question_id")),
                        doc=pl.when((pl.col("tool") == "open_article") & ok)
                        .then(pl.col("args_json").str.json_path_match("$.doc_id"))))
    segs = (tc.group_by(*keys, "step", "seg")
            .agg(question=pl.col("qid").drop_nulls().first(), docs=pl.col("doc").drop_nulls().unique(),
                 searches=(pl.col("tool") == "search").sum().cast(pl.Int64),
                 opens=((pl.col("tool") == "open_article") & ok).sum().cast(pl.Int64))
            .filter(pl.col("question").is_not_null())
            .join(days.select(*keys, step="day", day_date="date"), on=[*keys, "step"], how="inner"))
    hit = (rows.join(segs, left_on=[*keys, "event_id"], right_on=[*keys, "question"], how="inner")
           .filter((pl.col("day_date") <= pl.col("forecast_date"))
                   & (pl.col("prev").is_null() | (pl.col("day_date") > pl.col("prev"))))
           .group_by("agent", "event_id", "rollout", "step")
           .agg(own=pl.col("docs").explode().drop_nulls().n_unique().cast(pl.Int64),
                searches=pl.col("searches").sum(), opens=pl.col("opens").sum()))
    return (rows.join(hit, on=["agent", "event_id", "rollout", "step"], how="left")
            .with_columns(pl.col("own", "searches", "opens").fill_null(0))
            .select("agent", "event_id", "rollout", "step", "own", "searches", "opens", first=pl.col("prev").is_null()))


def world_evidence_diagnostics(forecasts: pl.DataFrame, tool_calls: pl.DataFrame, days: pl.DataFrame,
                               draws: int = DRAWS, seed: int = SEED, level: float = LEVEL) -> EvidenceResult:
    """The Figure 2b/2c quantities of a world run, from the articles read per question (module docstring):
    `tool_calls` and `days` are the run's tool calls and `world_days` rows."""
    scored = forecasts.filter(~pl.col("missing").fill_null(False)).with_columns(memory=pl.lit(True))
    reading = world_reading(scored, tool_calls, days)
    readers = tuple(sorted(reading.group_by("agent").agg(pl.col("own").sum()).filter(pl.col("own") > 0)["agent"]
                           .to_list()))
    own = reading.filter(~pl.col("first")).select("agent", "event_id", "rollout", "step", "own")
    usage = reading.group_by("agent").agg(searches=pl.col("searches").cast(pl.Float64).mean(),
                                          opens=pl.col("opens").cast(pl.Float64).mean())
    return _diagnose(scored, own, readers, usage, "reading", draws, seed, level)


def _diagnose(scored: pl.DataFrame, own: pl.DataFrame, keepers: tuple[str, ...], usage: pl.DataFrame, basis: str,
              draws: int, seed: int, level: float) -> EvidenceResult:
    """A, kappa, the Brier-change groups, G and the Spearman correlations from the own counts of `keepers`."""
    words = WORDS[basis]
    avail = availability(own, keepers)
    kept = avail.filter(pl.col("agent").is_in(list(keepers)))
    notes = {}
    kappa = capture_slopes(kept)
    g = episode_improvement(scored, draws, seed, level)
    per_agent = (g.join(kappa, on="agent", how="full", coalesce=True)
                 .join(usage, on="agent", how="full", coalesce=True).sort("agent"))
    kappa_notes = [_kappa_note(a, keepers, avail, basis) for a in per_agent["agent"].to_list()]
    per_agent = (per_agent.with_columns(keeper=pl.col("agent").is_in(list(keepers)),
                                        kappa_note=pl.Series(kappa_notes, dtype=pl.String))
                 .with_columns(kappa=pl.when(pl.col("kappa_note").is_null()).then(pl.col("kappa")))
                 .select("agent", "keeper", "kappa", "kappa_note", "G", "G_lo", "G_hi", "n_events", "searches",
                         "opens"))
    quart, cuts, kind = brier_change_by_quartile(scored.filter(pl.col("agent").is_in(list(keepers))), kept, draws,
                                                 seed, level)
    if kind == "none":
        notes["quartiles"] = f"no consecutive forecasts with a defined A ({words['transitions']})"
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
            notes[f"spearman_{name}"] = (f"needs {MIN_SPEARMAN_AGENTS} {words['peers']} with {name} and G; "
                                         f"this run has {ok}" if ok < MIN_SPEARMAN_AGENTS
                                         else f"{name} or G is the same for every agent (no ranks)")
    return EvidenceResult(avail, per_agent, quart, cuts, rho, kind, keepers, notes, basis)
