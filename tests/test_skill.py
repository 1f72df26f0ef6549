"""Ridge skill leaderboard: recovers simulated skills in FutureEval's staggered design."""

from __future__ import annotations

import numpy as np
import polars as pl
from forecast_env.eval.skill import date_scores, matchups, skill_leaderboard
from scipy.stats import spearmanr


def staggered(n: int = 40, per_question: int = 10, seed: int = 0) -> tuple[pl.DataFrame, np.ndarray]:
    """Forecasters join one by one in order of skill and leave so at most `per_question` are active;
    scores are peer-centred (question mean removed), so plain averages cannot see skill."""
    rng = np.random.default_rng(seed)
    skills = np.linspace(-1.0, 1.0, n)
    rows = []
    for q in range(n - per_question + 1):
        active = list(range(q, q + per_question))
        for rep in range(4):
            s = skills[active] + rng.normal(0, 0.5, len(active))
            s = s - s.mean()
            for i, v in zip(active, s):
                rows.append({"agent": f"f{i:02d}", "event_id": f"q{q:02d}-{rep}", "step": 1, "steps_total": 1,
                             "score": float(v)})
    return pl.DataFrame(rows), skills


def test_recovers_staggered_skills_where_averages_fail():
    scores, skills = staggered()
    res = skill_leaderboard(scores, anchor=None, draws=200)
    t = res.table.sort("agent")
    rho = spearmanr(t["skill"].to_numpy(), skills).statistic
    assert rho > 0.9
    avg = scores.group_by("agent").agg(pl.col("score").mean()).sort("agent")["score"].to_numpy()
    assert spearmanr(avg, skills).statistic < rho - 0.2
    assert res.lam > 0 and np.isfinite(res.sigma_err) and np.isfinite(res.sigma_skill)
    assert (t["lo"] <= t["skill"] + 1e-12).all() and (t["hi"] >= t["skill"] - 1e-12).all()


def test_uniform_anchor_is_zero_and_ordering():
    rows = []
    rng = np.random.default_rng(1)
    for e in range(30):
        for agent, s in (("uniform", 0.0), ("good", 0.5), ("bad", -0.5)):
            rows.append({"agent": agent, "event_id": f"e{e}", "step": 1, "steps_total": 1,
                         "score": s + rng.normal(0, 0.1)})
    res = skill_leaderboard(pl.DataFrame(rows))
    t = {r["agent"]: r for r in res.table.to_dicts()}
    assert t["uniform"]["skill"] == 0.0 and t["uniform"]["lo"] == 0.0 and t["uniform"]["hi"] == 0.0
    assert t["good"]["lo"] > 0 > t["bad"]["hi"]
    assert res.table["agent"].to_list() == ["good", "uniform", "bad"]


def test_partial_overlap_weights():
    f = pl.DataFrame({"agent": ["a", "a", "a", "a", "b"], "event_id": ["e"] * 5, "step": [1, 2, 3, 4, 4],
                      "steps_total": [4] * 5, "score": [0.0, 0.0, 0.0, 1.0, 0.0]})
    m = matchups(f)
    assert m.rows() == [("a", "b", "e", 1.0, 0.25)]


def test_date_scores_log_and_brier():
    f = pl.DataFrame({"agent": ["x"], "event_id": ["e"], "rollout": [0], "step": [1], "steps_total": [1],
                      "options": [["A", "B"]], "probs": [[0.25, 0.75]], "label": ["B"], "brier": [0.125],
                      "missing": [False]})
    assert abs(date_scores(f)["score"][0] - np.log(0.75)) < 1e-12
    assert date_scores(f, "brier")["score"][0] == -0.125
