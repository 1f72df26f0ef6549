"""Audit check 2 `structure` (docs/design.md §8): the conditional logit, the blind-structure probe on
synthetic tables, the inclusion-bias report, and (benchmark) the probe's power against the old schedule on a
large world."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import polars as pl
import pytest

from forecast_env.eval.audit.run import FAIL, INCONCLUSIVE, PASS
from forecast_env.eval.audit.schedule import ScheduleInputs
from forecast_env.eval.audit.structure import fit_conditional_logit, run_probe
from tests.support.audit_data import build_old_schedule


def _choice_data(n_groups: int, beta: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs, ys, gs = [], [], []
    for g in range(n_groups):
        k = int(rng.integers(2, 5))
        x = rng.standard_normal((k, len(beta)))
        u = x @ beta
        p = np.exp(u - u.max())
        p /= p.sum()
        y = np.zeros(k)
        y[rng.choice(k, p=p)] = 1
        xs.append(x)
        ys.append(y)
        gs.append(np.full(k, g))
    return np.vstack(xs), np.concatenate(ys), np.concatenate(gs)


def test_conditional_logit_recovers_known_weights() -> None:
    beta = np.array([1.5, -0.8, 0.0])
    x, y, g = _choice_data(4000, beta, seed=1)
    model = fit_conditional_logit(x, y, g, l2=1e-3)
    # back to raw-feature units
    est = model.beta / model.scale
    assert model.converged
    np.testing.assert_allclose(est, beta, atol=0.12)
    p = model.predict(x, g)
    sums = np.add.reduceat(p, np.flatnonzero(np.r_[True, g[1:] != g[:-1]]))
    np.testing.assert_allclose(sums, 1.0)


def test_conditional_logit_is_deterministic_and_ignores_group_constants() -> None:
    beta = np.array([1.0, 0.5])
    x, y, g = _choice_data(500, beta, seed=2)
    a = fit_conditional_logit(x, y, g)
    b = fit_conditional_logit(x.copy(), y.copy(), g.copy())
    np.testing.assert_array_equal(a.beta, b.beta)
    # a feature constant within each group carries nothing: its weight stays at the prior (0)
    const = np.repeat(np.random.default_rng(3).standard_normal(g.max() + 1), np.bincount(g))
    c = fit_conditional_logit(np.c_[x, const], y, g)
    assert abs(c.beta[-1]) < 1e-6


def _table(n_events: int, leak: bool, seed: int = 0) -> pl.DataFrame:
    """Binary events over several dates; with `leak`, steps_total tells the answer (as the old
    close-derived schedule did: early Yes resolutions get fewer dates)."""
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_events):
        yes = rng.random() < 0.4
        total = (int(rng.integers(1, 3)) if yes else int(rng.integers(3, 6))) if leak else int(rng.integers(1, 6))
        start = date(2026, 3, 1) + timedelta(days=int(rng.integers(0, 60)))
        for s in range(1, total + 1):
            for pos, o in enumerate(["Yes", "No"]):
                rows.append({"event_id": f"e{e:04d}", "split": "train" if e % 2 == 0 else "eval",
                             "forecast_date": start + timedelta(days=7 * s), "step": s, "steps_total": total,
                             "k": 2, "position": pos, "option": o, "question": f"Will thing {e % 7} happen by June?",
                             "description_chars": 500 + int(rng.integers(0, 100)),
                             "days_to_deadline": 7 * (5 - s) + 3, "y": int((o == "Yes") == yes)})
    return pl.DataFrame(rows)


def test_probe_fails_when_structure_predicts_the_answer() -> None:
    out = run_probe(_table(500, leak=True))
    assert out["verdict"] == FAIL, out["reason"]
    assert out["ci_high"] < -0.01
    assert any("steps_total" in w["feature"] for w in out["top_probe_weights"][:2])


def test_probe_passes_without_structure_and_is_inconclusive_when_small() -> None:
    out = run_probe(_table(600, leak=False))
    assert out["verdict"] == PASS, out["reason"]
    assert out["half_width"] <= 0.02
    small = run_probe(_table(40, leak=False))
    assert small["verdict"] == INCONCLUSIVE, small["reason"]


def test_inclusion_bias_compares_label_shares_per_filter() -> None:
    from forecast_env.eval.audit.structure import inclusion_bias, yes_share_gap_is_large

    yn = ["Yes", "No"]
    kept = [{"type": "binary", "options": yn, "label": "Yes" if i < 3 else "No"} for i in range(12)]
    kept.append({"type": "multi", "options": ["A", "B", "C", "D"], "label": "B"})
    excluded = [{"stage": "signal", "reason": "nearly_certain", "type": "binary", "options": yn, "label": "Yes"}
                for _ in range(12)]
    excluded.append({"stage": "parse", "reason": "bad_json", "type": None, "options": [], "label": None})
    rows = {r["group"]: r for r in inclusion_bias(kept, excluded)}
    assert rows["kept"]["binary_yes_share"] == 0.25 and rows["kept"]["multi_chance"] == 0.25
    sig = rows["excluded signal/nearly_certain"]
    assert sig["binary_yes_share"] == 1.0 and sig["yes_share_minus_kept"] == 0.75
    assert yes_share_gap_is_large(sig, rows["kept"]["binary"])
    assert rows["excluded parse/bad_json"]["with_label"] == 0
    assert not yes_share_gap_is_large(rows["excluded parse/bad_json"], rows["kept"]["binary"])


# ---------------------------------------------------------------------------------------------
# the blind-structure probe has power against the old schedule (benchmark: a large world)
# ---------------------------------------------------------------------------------------------


def _power_world(n: int, seed: int = 0) -> list[tuple[str, str, ScheduleInputs]]:
    """`n` events with Polymarket's mechanics: 60% binary deadline questions ("Will X happen by
    <end>?", 40% Yes) whose market closes the day after the event happens when it resolves Yes
    (the outcome known that day), else at the scheduled end; 40% bundles of 3-6 candidates, half of
    them with a losing leg added 3 days to half the span after the start. Half train, half eval."""
    from forecast_env.config import load_config

    cfg = dict(load_config("events")["schedule"])
    rng = np.random.default_rng(seed)
    out = []
    for e in range(n):
        split = "train" if e % 2 == 0 else "eval"
        start = (date(2025, 6, 1) if split == "train" else date(2026, 3, 1)) + timedelta(days=int(rng.integers(0, 30)))
        span = int(rng.integers(14, 60))
        end = start + timedelta(days=span)
        if rng.random() < 0.6:
            opts: tuple[str, ...] = ("Yes", "No")
            yes = bool(rng.random() < 0.4)
            label = "Yes" if yes else "No"
            happened = start + timedelta(days=int(rng.integers(3, span + 1)))
            close, known = (min(happened + timedelta(days=1), end), happened) if yes else (end, None)
            starts = {o: start for o in opts}
            question = f"Will thing {e} happen by {end:%B %d}?"
        else:
            k = int(rng.integers(3, 7))
            opts = tuple(f"Candidate {chr(65 + i)}{e}" for i in range(k))
            label = opts[int(rng.integers(0, k))]
            starts = {o: start for o in opts}
            if rng.random() < 0.5:
                late = [o for o in opts if o != label][int(rng.integers(0, k - 1))]
                starts[late] = start + timedelta(days=int(rng.integers(3, max(4, span // 2))))
            close, known = end, None
            question = f"Who will win contest {e}?"
        out.append((split, question, ScheduleInputs(f"e{e:05d}", opts, label, start, max(starts.values()), end,
                                                    close, known, starts, {}, {}, cfg)))
    return out


def _probe_rows(world: list[tuple[str, str, ScheduleInputs]], builder) -> pl.DataFrame:
    from forecast_env.eval.audit.structure import ROW_COLUMNS

    cols: dict[str, list] = {c: [] for c in ROW_COLUMNS}
    for split, question, inp in world:
        b = builder(inp)
        for i, (d, offered) in enumerate(zip(b.dates, b.options)):
            for pos, o in enumerate(offered):
                values = (inp.event_id, split, d, i + 1, b.steps_total, len(offered), pos, o, question, 400,
                          (inp.end_day - d).days, int(o == inp.label))
                for c, v in zip(ROW_COLUMNS, values):
                    cols[c].append(v)
    return pl.DataFrame(cols)


@pytest.mark.benchmark
def test_probe_has_power_against_the_old_schedule_on_a_large_world() -> None:
    """1,200 events (600 eval): the old label-dependent schedule FAILs the probe, the project's
    schedule (`envs/events/schedule.py` through the audit's rebuild) does not."""
    from forecast_env.eval.audit.schedule import build_with_project

    world = _power_world(1200)
    old = run_probe(_probe_rows(world, build_old_schedule))
    new = run_probe(_probe_rows(world, build_with_project))
    print(f"\nold schedule: {old['verdict']} {old['difference']:+.4f} [{old['ci_low']:+.4f}, {old['ci_high']:+.4f}]"
          f"; project schedule: {new['verdict']} {new['difference']:+.4f} [{new['ci_low']:+.4f}, {new['ci_high']:+.4f}]")
    assert old["verdict"] == FAIL, old["reason"]
    assert new["verdict"] != FAIL, new["reason"]
