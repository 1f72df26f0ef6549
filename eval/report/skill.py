"""Skill leaderboard for agents that saw different events (docs/design.md §7, FutureEval's method).

Model: for agents A, B sharing forecast dates of event e, the head-to-head difference d = A's score
minus B's score on the dates both forecast (each agent's value averaged as everywhere in the report:
dates within a rollout, then rollouts) satisfies d = skill_A - skill_B + noise. Each matchup
(A, B, e) is weighted by the share of the event's scheduled dates both forecast (partial overlap,
like FutureEval's time-overlap weights). Skills solve the weighted ridge problem
min sum w (d - (s_A - s_B))^2 + lambda |s|^2 with lambda = sigma_err^2 / sigma_skill^2:

- sigma_err: the mean over agent pairs (with at least two matchups) of the standard deviation of
  their differences;
- sigma_skill^2: the variance of the skills from an (almost) unregularized fit on the high-volume
  agents only: those whose total matchup weight is at least HIGH_VOLUME_SHARE of the largest
  agent's, or every agent when fewer than MIN_HIGH_VOLUME qualify (a variance of two skills is
  one difference, too fragile to set the prior).

Skills are shifted so the anchor agent (uniform) sits at 0. Intervals: events resampled with
replacement (4,000 draws); every draw re-estimates lambda, both spreads included, on its own
resample ("rerunning the analysis many times", as the seed says); lambda is kept within
[1e-6, 1e6], and is 1 where a spread cannot be estimated. Score per date: natural-log score
ln max(p(Y), eps) (default) or -Brier; higher is better.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from forecast_env.eval.report.bootstrap import DRAWS, LEVEL, SEED, draw_indices

#: an agent is high-volume when its total matchup weight reaches this share of the largest
HIGH_VOLUME_SHARE = 0.5
#: with fewer high-volume agents than this, sigma_skill comes from every agent
MIN_HIGH_VOLUME = 3
#: lambda when a spread cannot be estimated (too few matchups): a unit prior
FALLBACK_LAMBDA = 1.0
#: lambda is kept in [MIN_LAMBDA, MAX_LAMBDA]: a resample whose differences are all equal (sigma_err 0)
#: would otherwise leave the ridge problem singular
MIN_LAMBDA = 1e-6
MAX_LAMBDA = 1e6
OLS_RIDGE = 1e-6


@dataclass(frozen=True)
class SkillResult:
    """Leaderboard (agent, skill, lo, hi, n_events, n_matchups) and the ridge parameters used.

    `lam`, `sigma_err`, `sigma_skill` and `high_volume` are the full-data values; `lam_draws` holds
    the lambda re-estimated in each bootstrap draw.
    """

    table: pl.DataFrame
    lam: float
    sigma_err: float
    sigma_skill: float
    anchor: str | None
    high_volume: tuple[str, ...] = ()
    lam_draws: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def lam_range(self, level: float = LEVEL) -> tuple[float, float]:
        """Percentile range of lambda over the draws (the full-data value when there are none)."""
        if self.lam_draws.size == 0:
            return self.lam, self.lam
        alpha = (1.0 - level) / 2.0
        lo, hi = np.quantile(self.lam_draws, [alpha, 1.0 - alpha])
        return float(lo), float(hi)


MATCHUP_SCHEMA = {"a": pl.String, "b": pl.String, "event_id": pl.String, "diff": pl.Float64, "weight": pl.Float64}


def matchups(scores: pl.DataFrame) -> pl.DataFrame:
    """Head-to-head rows (a, b, event_id, diff, weight) from (agent, event_id, [rollout,] step, steps_total, score)."""
    s = scores.filter(pl.col("score").is_not_null() & pl.col("score").is_finite())
    if "rollout" not in s.columns:
        s = s.with_columns(rollout=pl.lit(0))
    cells = s.group_by(["agent", "event_id", "step"]).agg(pl.col("steps_total").max())
    shared = (cells.join(cells, on=["event_id", "step"], suffix="_b").filter(pl.col("agent") < pl.col("agent_b"))
              .select(a="agent", b="agent_b", event_id="event_id", step="step",
                      total=pl.max_horizontal("steps_total", "steps_total_b")))
    if shared.height == 0:
        return pl.DataFrame(schema=MATCHUP_SCHEMA)
    keys = ["a", "b", "event_id"]

    def value(side: str) -> pl.DataFrame:
        rows = shared.select(*keys, "step").join(s.select(pl.col("agent").alias(side), "event_id", "step", "rollout",
                                                          "score"), on=[side, "event_id", "step"])
        return (rows.group_by([*keys, "rollout"]).agg(pl.col("score").mean())
                .group_by(keys).agg(pl.col("score").mean().alias(f"v_{side}")))

    size = shared.group_by(keys).agg(n=pl.len(), total=pl.col("total").max())
    return (size.join(value("a"), on=keys).join(value("b"), on=keys)
            .select("a", "b", "event_id", diff=pl.col("v_a") - pl.col("v_b"),
                    weight=(pl.col("n") / pl.col("total").clip(lower_bound=1)).clip(upper_bound=1.0).cast(pl.Float64))
            .sort(keys))


def _design(m: pl.DataFrame, agents: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pos = {a: i for i, a in enumerate(agents)}
    x = np.zeros((m.height, len(agents)))
    rows = np.arange(m.height)
    x[rows, [pos[a] for a in m["a"].to_list()]] = 1.0
    x[rows, [pos[b] for b in m["b"].to_list()]] = -1.0
    return x, m["diff"].to_numpy().astype(np.float64), m["weight"].to_numpy().astype(np.float64)


@dataclass(frozen=True)
class _Fit:
    skills: np.ndarray  # (draws, agents)
    lam: np.ndarray
    sigma_err: np.ndarray
    sigma_skill: np.ndarray
    high: np.ndarray  # (draws, agents) bool


class _Problem:
    """Per-event sufficient statistics of the matchups, so that any resample of events (a vector of
    event multiplicities) is fitted, lambda included, with a few matrix products."""

    def __init__(self, m: pl.DataFrame, agents: list[str]) -> None:
        self.agents = agents
        self.events = sorted(set(m["event_id"].to_list()))
        e_pos = {e: i for i, e in enumerate(self.events)}
        ev = np.array([e_pos[e] for e in m["event_id"].to_list()], dtype=np.int64)
        x, d, w = _design(m, agents)
        n_e, p = len(self.events), len(agents)
        self.x, self.d, self.w, self.ev = x, d, w, ev
        pair_keys = sorted(set(zip(m["a"].to_list(), m["b"].to_list())))
        q_pos = {k: i for i, k in enumerate(pair_keys)}
        q = np.array([q_pos[k] for k in zip(m["a"].to_list(), m["b"].to_list())], dtype=np.int64)
        # per (event, pair): count, sum and sum of squares of the differences (sigma_err)
        self.n_q = np.zeros((n_e, len(pair_keys)))
        self.s1_q = np.zeros((n_e, len(pair_keys)))
        self.s2_q = np.zeros((n_e, len(pair_keys)))
        np.add.at(self.n_q, (ev, q), 1.0)
        np.add.at(self.s1_q, (ev, q), d)
        np.add.at(self.s2_q, (ev, q), d * d)
        # per (event, agent): matchup weight (the high-volume rule)
        self.vol = np.zeros((n_e, p))
        np.add.at(self.vol, ev, np.abs(x) * w[:, None])
        self.pair_agents = np.array([[agents.index(a), agents.index(b)] for a, b in pair_keys], dtype=np.int64)

    def _normal(self, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per-event X'WX and X'Wd over the matchups whose two agents are both in `keep`."""
        x, d, w = self.x, self.d, self.w
        if keep is not None:
            rows = (np.abs(x[:, ~keep]).sum(axis=1) == 0)
            x, d, w, ev = x[rows], d[rows], w[rows], self.ev[rows]
        else:
            ev = self.ev
        p = len(self.agents)
        per_a = np.zeros((len(self.events), p, p))
        per_b = np.zeros((len(self.events), p))
        xw = x * w[:, None]
        np.add.at(per_a, ev, xw[:, :, None] * x[:, None, :])
        np.add.at(per_b, ev, xw * d[:, None])
        return per_a, per_b

    def fit(self, counts: np.ndarray, lam: float | None = None) -> _Fit:
        """Fit every resample (rows of `counts`: event multiplicities), lambda estimated per row
        unless `lam` is given."""
        n_draws, p = counts.shape[0], len(self.agents)
        # sigma_err: mean over pairs with >= 2 matchups of the (sample) sd of their differences
        nq, s1, s2 = counts @ self.n_q, counts @ self.s1_q, counts @ self.s2_q
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (s2 - s1 * s1 / nq) / (nq - 1.0)
        sd = np.where(nq >= 2, np.sqrt(np.clip(var, 0.0, None)), np.nan)
        has = np.isfinite(sd).any(axis=1)
        sigma_err = np.full(n_draws, np.nan)
        sigma_err[has] = np.nanmean(sd[has], axis=1)
        # the high-volume agents of each resample
        vol = counts @ self.vol
        high = (vol > 0) & (vol >= HIGH_VOLUME_SHARE * vol.max(axis=1, keepdims=True))
        few = high.sum(axis=1) < MIN_HIGH_VOLUME
        high[few] = vol[few] > 0
        # sigma_skill: spread of an almost unregularized fit on the high-volume agents, by distinct set
        sigma_skill = np.full(n_draws, np.nan)
        sets, inverse = np.unique(high, axis=0, return_inverse=True)
        for k, keep in enumerate(sets):
            idx = np.flatnonzero(inverse.ravel() == k)
            cols = np.flatnonzero(keep)
            if cols.size < 2:
                continue
            per_a, per_b = self._normal(keep)
            a_mat = np.einsum("de,eij->dij", counts[idx], per_a)[:, cols][:, :, cols] + OLS_RIDGE * np.eye(cols.size)
            b_vec = np.einsum("de,ei->di", counts[idx], per_b)[:, cols]
            s = np.linalg.solve(a_mat, b_vec[..., None])[..., 0]
            sigma_skill[idx] = np.std(s - s.mean(axis=1, keepdims=True), axis=1)
        if lam is None:
            with np.errstate(invalid="ignore", divide="ignore"):
                lams = np.clip(sigma_err**2 / np.maximum(sigma_skill**2, 1e-12), MIN_LAMBDA, MAX_LAMBDA)
            lams = np.where(np.isfinite(lams), lams, FALLBACK_LAMBDA)
        else:
            lams = np.full(n_draws, float(lam))
        per_a, per_b = self._normal()
        a_mat = np.einsum("de,eij->dij", counts, per_a) + lams[:, None, None] * np.eye(p)
        b_vec = np.einsum("de,ei->di", counts, per_b)
        skills = np.linalg.solve(a_mat, b_vec[..., None])[..., 0]
        return _Fit(skills, lams, sigma_err, sigma_skill, high)


def skill_leaderboard(scores: pl.DataFrame, anchor: str | None = "uniform", draws: int = DRAWS, seed: int = SEED,
                      level: float = LEVEL, lam: float | None = None) -> SkillResult:
    """Ridge skills with event-bootstrap intervals from per-date scores (see the module docstring).

    `lam` fixes lambda (full data and every draw) instead of estimating it.
    """
    m = matchups(scores)
    empty = pl.DataFrame(schema={"agent": pl.String, "skill": pl.Float64, "lo": pl.Float64, "hi": pl.Float64,
                                 "n_events": pl.Int64, "n_matchups": pl.Int64})
    if m.height == 0 or scores["agent"].n_unique() < 2:
        return SkillResult(empty, float("nan"), float("nan"), float("nan"), None)
    agents = sorted(set(m["a"].to_list()) | set(m["b"].to_list()))
    problem = _Problem(m, agents)
    full = problem.fit(np.ones((1, len(problem.events))), lam)
    anchor_used = anchor if anchor in agents else None
    ai = agents.index(anchor_used) if anchor_used else None
    point = full.skills[0] - (full.skills[0, ai] if ai is not None else 0.0)
    lo = hi = point
    lam_draws = np.zeros(0)
    n_ev = len(problem.events)
    if draws > 0 and n_ev > 1:
        idx = draw_indices(n_ev, draws, seed)
        counts = np.zeros((draws, n_ev))
        np.add.at(counts, (np.repeat(np.arange(draws), n_ev), idx.ravel()), 1.0)
        boot = problem.fit(counts, lam)
        sol = boot.skills - (boot.skills[:, [ai]] if ai is not None else 0.0)
        alpha = (1.0 - level) / 2.0
        lo, hi = np.quantile(sol, alpha, axis=0), np.quantile(sol, 1.0 - alpha, axis=0)
        lam_draws = boot.lam
    n_events = {a: len(set(m.filter((pl.col("a") == a) | (pl.col("b") == a))["event_id"].to_list())) for a in agents}
    n_match = {a: m.filter((pl.col("a") == a) | (pl.col("b") == a)).height for a in agents}
    table = pl.DataFrame({
        "agent": agents, "skill": point.astype(float), "lo": np.asarray(lo, float), "hi": np.asarray(hi, float),
        "n_events": [n_events[a] for a in agents], "n_matchups": [n_match[a] for a in agents],
    }).sort(["skill", "agent"], descending=[True, False])
    sigma_err = float(full.sigma_err[0]) if lam is None else float("nan")
    sigma_skill = float(full.sigma_skill[0]) if lam is None else float("nan")
    high = tuple(a for a, h in zip(agents, full.high[0]) if h)
    return SkillResult(table, float(full.lam[0]), sigma_err, sigma_skill, anchor_used, high, lam_draws)


def label_prob(forecasts: pl.DataFrame) -> pl.Series:
    """Probability each (aligned) forecast row gives its label; 0 when the label was not offered."""
    idx = forecasts.with_row_index("_row").select("_row", "options", "probs", "label")
    hit = (idx.filter(pl.col("probs").is_not_null()).explode(["options", "probs"])
           .filter(pl.col("options") == pl.col("label")).group_by("_row").agg(pl.col("probs").sum()))
    out = idx.select("_row").join(hit, on="_row", how="left").sort("_row")
    return out["probs"].fill_null(0.0).cast(pl.Float64).rename("p_label")


def date_scores(forecasts: pl.DataFrame, kind: str = "log", eps: float = 0.001) -> pl.DataFrame:
    """Per-row score for the leaderboard: ln max(p(label), eps) (default), or -Brier (kind='brier')."""
    f = forecasts.filter(~pl.col("missing").fill_null(False) & pl.col("probs").is_not_null())
    if kind == "brier":
        f = f.with_columns(score=-pl.col("brier"))
    else:
        f = f.with_columns(score=label_prob(f).clip(lower_bound=eps).log())
    return f.select("agent", "event_id", "rollout", "step", "steps_total", "score")
