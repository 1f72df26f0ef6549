"""Ridge skill leaderboard: recovers simulated skills in FutureEval's staggered design."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr

from forecast_env.eval.report.bootstrap import draw_indices
from forecast_env.eval.report.skill import date_scores, matchups, skill_leaderboard


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


# -- lambda re-estimated in every bootstrap draw ----------------------------------------------


def _brute_force_fit(m: pl.DataFrame, agents: list[str]) -> tuple[np.ndarray, float]:
    """The whole analysis on one (resampled) matchup table, written plainly from the seed:
    sigma_err = mean over pairs (>= 2 matchups) of the sd of their differences; sigma_skill = sd of
    a least-squares fit on the high-volume agents (matchup weight >= half the largest, or all when
    fewer than 3 qualify); lambda = ratio; then the weighted ridge fit."""
    sds = []
    for (a, b), sub in m.group_by(["a", "b"]):
        if sub.height >= 2:
            sds.append(float(np.std(sub["diff"].to_numpy(), ddof=1)))
    sigma_err = float(np.mean(sds)) if sds else float("nan")
    vol = {x: float(m.filter((pl.col("a") == x) | (pl.col("b") == x))["weight"].sum()) for x in agents}
    top = max(vol.values())
    high = [x for x in agents if vol[x] > 0 and vol[x] >= 0.5 * top]
    if len(high) < 3:
        high = [x for x in agents if vol[x] > 0]
    sub = m.filter(pl.col("a").is_in(high) & pl.col("b").is_in(high))
    xh = np.zeros((sub.height, len(high)))
    for i, (a, b) in enumerate(zip(sub["a"], sub["b"])):
        xh[i, high.index(a)], xh[i, high.index(b)] = 1.0, -1.0
    sw = np.sqrt(sub["weight"].to_numpy())
    s_high = np.linalg.lstsq(xh * sw[:, None], sub["diff"].to_numpy() * sw, rcond=None)[0]  # min-norm: sum 0
    sigma_skill = float(np.std(s_high))
    lam = sigma_err**2 / sigma_skill**2 if np.isfinite(sigma_err) and sigma_skill > 0 else 1.0
    x = np.zeros((m.height, len(agents)))
    for i, (a, b) in enumerate(zip(m["a"], m["b"])):
        x[i, agents.index(a)], x[i, agents.index(b)] = 1.0, -1.0
    w = m["weight"].to_numpy()
    s = np.linalg.solve(x.T @ (x * w[:, None]) + lam * np.eye(len(agents)), x.T @ (w * m["diff"].to_numpy()))
    return s, lam


def _noisy_three(n_events: int = 16, seed: int = 4) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_events):
        steps = int(rng.integers(1, 4))
        present = [a for a in ("uniform", "mid", "good", "erratic") if rng.random() < 0.8] or ["uniform", "good"]
        for agent in present:
            for step in range(1, steps + 1):
                base = {"uniform": 0.0, "mid": 0.1, "good": 0.3, "erratic": 0.0}[agent]
                noise = rng.normal(0, 0.6 if agent == "erratic" else 0.2)
                rows.append({"agent": agent, "event_id": f"e{e:02d}", "rollout": 0, "step": step,
                             "steps_total": steps, "score": base + noise})
    return pl.DataFrame(rows)


def test_interval_reestimates_lambda_in_every_draw():
    scores = _noisy_three()
    draws = 300
    res = skill_leaderboard(scores, anchor="uniform", draws=draws, seed=0)
    m = matchups(scores)
    agents = sorted(set(m["a"].to_list()) | set(m["b"].to_list()))
    events = sorted(set(m["event_id"].to_list()))
    full, lam = _brute_force_fit(m, agents)
    assert res.lam == pytest.approx(lam, rel=1e-6)
    sols, lams = [], []
    for row in draw_indices(len(events), draws, 0):
        resampled = pl.concat([m.filter(pl.col("event_id") == events[i]) for i in row])
        s, lam_d = _brute_force_fit(resampled, agents)
        sols.append(s - s[agents.index("uniform")])
        lams.append(lam_d)
    sols = np.array(sols)
    assert np.std(lams) > 0.1 * np.mean(lams)  # lambda really moves across draws
    t = {r["agent"]: r for r in res.table.to_dicts()}
    for i, a in enumerate(agents):
        assert t[a]["skill"] == pytest.approx(full[i] - full[agents.index("uniform")], abs=1e-6)
        assert t[a]["lo"] == pytest.approx(np.quantile(sols[:, i], 0.025), abs=1e-6)
        assert t[a]["hi"] == pytest.approx(np.quantile(sols[:, i], 0.975), abs=1e-6)
    assert res.lam_draws == pytest.approx(np.asarray(lams), rel=1e-5)
    # holding lambda at its full-data value gives another (here narrower or shifted) interval
    fixed = {r["agent"]: r for r in skill_leaderboard(scores, draws=draws, seed=0, lam=res.lam).table.to_dicts()}
    assert any(abs(fixed[a]["lo"] - t[a]["lo"]) > 1e-4 or abs(fixed[a]["hi"] - t[a]["hi"]) > 1e-4 for a in agents)


def test_high_volume_rule_keeps_three_agents_with_66_67_67_matchups():
    rng = np.random.default_rng(7)
    rows = []
    pairs = [("a", "b")] * 33 + [("a", "c")] * 33 + [("b", "c")] * 34
    skill = {"a": 0.0, "b": 0.2, "c": 0.5}
    for e, pair in enumerate(pairs):
        for agent in pair:
            rows.append({"agent": agent, "event_id": f"e{e:03d}", "rollout": 0, "step": 1, "steps_total": 1,
                         "score": skill[agent] + rng.normal(0, 0.3)})
    scores = pl.DataFrame(rows)
    res = skill_leaderboard(scores, anchor=None, draws=0)
    assert res.table.sort("agent")["n_matchups"].to_list() == [66, 67, 67]
    m = matchups(scores)
    _, lam = _brute_force_fit(m, ["a", "b", "c"])
    assert res.lam == pytest.approx(lam, rel=1e-6)
    # sigma_skill from the three-agent least-squares fit, not from b and c alone
    x = np.zeros((m.height, 3))
    for i, (a, b) in enumerate(zip(m["a"], m["b"])):
        x[i, "abc".index(a)], x[i, "abc".index(b)] = 1.0, -1.0
    s3 = np.linalg.lstsq(x, m["diff"].to_numpy(), rcond=None)[0]
    assert res.sigma_skill == pytest.approx(np.std(s3), rel=1e-6)
    bc = m.filter(pl.col("a").is_in(["b", "c"]) & pl.col("b").is_in(["b", "c"]))
    assert abs(res.sigma_skill - abs(float(bc["diff"].mean())) / 2) > 1e-3
    assert res.high_volume == ("a", "b", "c")


def test_matchups_average_dates_within_rollouts_first():
    # agent a: rollout 0 scores dates 1, 2 (0.0, 1.0); rollout 1 only date 1 (0.0); b scores 0 on both dates
    f = pl.DataFrame({"agent": ["a", "a", "a", "b", "b"], "event_id": ["e"] * 5, "rollout": [0, 0, 1, 0, 0],
                      "step": [1, 2, 1, 1, 2], "steps_total": [2] * 5, "score": [0.0, 1.0, 0.0, 0.0, 0.0]})
    m = matchups(f)
    # a's event value: mean(mean(0, 1), mean(0)) = 0.25 (per date first would give mean(0, 1) = 0.5)
    assert m.rows() == [("a", "b", "e", 0.25, 1.0)]
