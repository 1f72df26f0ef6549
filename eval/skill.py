"""Skill leaderboard for agents that saw different events (SPEC section 7, FutureEval's method).

Model: for agents A, B sharing forecast dates of event e, the head-to-head difference
d = mean over shared dates of (score_A - score_B) satisfies d = skill_A - skill_B + noise. Each
matchup (A, B, e) is weighted by the share of the event's scheduled dates both forecast (partial
overlap, like FutureEval's time-overlap weights). Skills solve the weighted ridge problem
min sum w (d - (s_A - s_B))^2 + lambda |s|^2 with lambda = sigma_err^2 / sigma_skill^2:
sigma_err is the mean over agent pairs of the standard deviation of their differences, sigma_skill^2
the variance of skills from an (almost) unregularized fit on high-volume agents only (at least the
median number of matchups). Skills are shifted so the anchor agent (uniform) sits at 0. Intervals:
events resampled with replacement (4,000 draws), lambda held at its full-data value.
Score per date: natural-log score ln max(p(Y), eps) (default) or -Brier; higher is better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from forecast_env.eval.bootstrap import DRAWS, LEVEL, SEED, draw_indices


@dataclass(frozen=True)
class SkillResult:
    """Leaderboard (agent, skill, lo, hi, n_events, n_matchups) and the ridge parameters used."""

    table: pl.DataFrame
    lam: float
    sigma_err: float
    sigma_skill: float
    anchor: str | None


def matchups(scores: pl.DataFrame) -> pl.DataFrame:
    """Head-to-head rows (a, b, event_id, diff, weight) from (agent, event_id, step, steps_total, score)."""
    s = (scores.filter(pl.col("score").is_not_null() & pl.col("score").is_finite())
         .group_by(["agent", "event_id", "step"])
         .agg(pl.col("score").mean(), pl.col("steps_total").max()))
    pairs = s.join(s, on=["event_id", "step"], suffix="_b").filter(pl.col("agent") < pl.col("agent_b"))
    if pairs.height == 0:
        return pl.DataFrame(schema={"a": pl.String, "b": pl.String, "event_id": pl.String, "diff": pl.Float64,
                                    "weight": pl.Float64})
    return (pairs.group_by(["agent", "agent_b", "event_id"])
            .agg(diff=(pl.col("score") - pl.col("score_b")).mean(), shared=pl.len(),
                 total=pl.max_horizontal("steps_total", "steps_total_b").max())
            .select(a="agent", b="agent_b", event_id="event_id", diff="diff",
                    weight=(pl.col("shared") / pl.col("total").clip(lower_bound=1)).clip(upper_bound=1.0))
            .sort(["event_id", "a", "b"]))


def _design(m: pl.DataFrame, agents: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pos = {a: i for i, a in enumerate(agents)}
    x = np.zeros((m.height, len(agents)))
    rows = np.arange(m.height)
    x[rows, [pos[a] for a in m["a"].to_list()]] = 1.0
    x[rows, [pos[b] for b in m["b"].to_list()]] = -1.0
    return x, m["diff"].to_numpy().astype(np.float64), m["weight"].to_numpy().astype(np.float64)


def ridge(x: np.ndarray, d: np.ndarray, w: np.ndarray, lam: float) -> np.ndarray:
    """Weighted ridge solution (skills sum to ~0 through the penalty)."""
    a = x.T @ (x * w[:, None]) + lam * np.eye(x.shape[1])
    return np.linalg.solve(a, x.T @ (w * d))


def estimate_lambda(m: pl.DataFrame, agents: list[str]) -> tuple[float, float, float]:
    """(lambda, sigma_err, sigma_skill) as the FutureEval seed says."""
    sds = (m.group_by(["a", "b"]).agg(pl.col("diff").std(), pl.len())
           .filter((pl.col("len") >= 2) & pl.col("diff").is_not_null()))
    sigma_err = float(sds["diff"].mean()) if sds.height else float("nan")
    counts = pl.concat([m.select(agent="a"), m.select(agent="b")]).group_by("agent").len()
    cut = float(np.median(counts["len"].to_numpy())) if counts.height else 0.0
    high = sorted(counts.filter(pl.col("len") >= cut)["agent"].to_list())
    sub = m.filter(pl.col("a").is_in(high) & pl.col("b").is_in(high))
    if len(high) < 2 or sub.height == 0:
        high, sub = agents, m
    x, d, w = _design(sub, high)
    s = ridge(x, d, w, 1e-6)
    sigma_skill = float(np.std(s - s.mean())) if len(high) > 1 else float("nan")
    if not math.isfinite(sigma_err) or not math.isfinite(sigma_skill):
        return 1.0, sigma_err, sigma_skill  # too few matchups to estimate: a unit prior
    lam = sigma_err**2 / max(sigma_skill**2, 1e-12)
    return float(min(lam, 1e6)), sigma_err, sigma_skill


def skill_leaderboard(scores: pl.DataFrame, anchor: str | None = "uniform", draws: int = DRAWS, seed: int = SEED,
                      level: float = LEVEL, lam: float | None = None) -> SkillResult:
    """Ridge skills with event-bootstrap intervals from per-date scores (see the module docstring)."""
    m = matchups(scores)
    agents = sorted(set(scores["agent"].unique().to_list()))
    empty = pl.DataFrame(schema={"agent": pl.String, "skill": pl.Float64, "lo": pl.Float64, "hi": pl.Float64,
                                 "n_events": pl.Int64, "n_matchups": pl.Int64})
    if m.height == 0 or len(agents) < 2:
        return SkillResult(empty, float("nan"), float("nan"), float("nan"), None)
    in_play = sorted(set(m["a"].to_list()) | set(m["b"].to_list()))
    agents = in_play
    if lam is None:
        lam, sigma_err, sigma_skill = estimate_lambda(m, agents)
    else:
        sigma_err = sigma_skill = float("nan")
    x, d, w = _design(m, agents)
    skills = ridge(x, d, w, lam)
    anchor_used = anchor if anchor in agents else None
    shift = skills[agents.index(anchor_used)] if anchor_used else 0.0
    point = skills - shift

    # bootstrap over events: per-event normal-equation pieces, summed with resampling counts
    events = sorted(set(m["event_id"].to_list()))
    e_pos = {e: i for i, e in enumerate(events)}
    eidx = np.array([e_pos[e] for e in m["event_id"].to_list()])
    p = len(agents)
    xw = x * w[:, None]
    per_a = np.zeros((len(events), p, p))
    per_b = np.zeros((len(events), p))
    np.add.at(per_a, eidx, xw[:, :, None] * x[:, None, :])
    np.add.at(per_b, eidx, xw * d[:, None])
    lo = hi = point
    if draws > 0 and len(events) > 1:
        idx = draw_indices(len(events), draws, seed)
        counts = np.zeros((draws, len(events)))
        np.add.at(counts, (np.repeat(np.arange(draws), len(events)), idx.ravel()), 1.0)
        a_mat = np.einsum("be,eij->bij", counts, per_a) + lam * np.eye(p)
        b_vec = np.einsum("be,ei->bi", counts, per_b)
        sol = np.linalg.solve(a_mat, b_vec[..., None])[..., 0]
        if anchor_used:
            sol = sol - sol[:, [agents.index(anchor_used)]]
        alpha = (1.0 - level) / 2.0
        lo, hi = np.quantile(sol, alpha, axis=0), np.quantile(sol, 1.0 - alpha, axis=0)
    n_events = {a: len(set(m.filter((pl.col("a") == a) | (pl.col("b") == a))["event_id"].to_list())) for a in agents}
    n_match = {a: m.filter((pl.col("a") == a) | (pl.col("b") == a)).height for a in agents}
    table = pl.DataFrame({
        "agent": agents, "skill": point.astype(float), "lo": np.asarray(lo, float), "hi": np.asarray(hi, float),
        "n_events": [n_events[a] for a in agents], "n_matchups": [n_match[a] for a in agents],
    }).sort(["skill", "agent"], descending=[True, False])
    return SkillResult(table, float(lam), sigma_err, sigma_skill, anchor_used)


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
