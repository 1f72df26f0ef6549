"""Evidence diagnostics on hand-made ledgers (counts, A_k leave-one-out, kappa, G, quartiles)."""

from __future__ import annotations

from datetime import date

import numpy as np
import polars as pl
import pytest

from forecast_env.eval.report.evidence import availability, evidence_diagnostics, own_counts, spearman

DATES = {1: date(2026, 3, 1), 2: date(2026, 3, 5), 3: date(2026, 3, 10)}


def forecasts(briers: dict[str, list[float]], rollouts: int = 1) -> pl.DataFrame:
    rows = []
    for agent, bs in briers.items():
        for r in range(rollouts):
            for step, b in zip((1, 2, 3), bs):
                rows.append({"agent": agent, "event_id": "e", "rollout": r, "step": step, "steps_total": 3,
                             "forecast_date": DATES[step], "memory": True, "missing": False, "brier": b,
                             "n_search": {"a": 3, "b": 2, "c": 1}[agent], "n_open": 1})
    return pl.DataFrame(rows)


def entry(agent, step, entry_id, d, created, status="active", rollout=0):
    return {"agent": agent, "event_id": "e", "rollout": rollout, "step": step, "entry_id": entry_id,
            "date_observed": d, "created_step": created, "status": status}


NOTEBOOK = pl.DataFrame([
    # a, step 2: 03-03 counts; 03-01 is not after the previous date; "soon" is invalid
    entry("a", 2, 0, "2026-03-03", 2), entry("a", 2, 1, "2026-03-01", 2), entry("a", 2, 2, "soon", 2),
    # a, step 3: entry 0 carried (not counted again); 03-07 superseded counts; 03-12 is in the future
    entry("a", 3, 0, "2026-03-03", 2), entry("a", 3, 1, "2026-03-01", 2), entry("a", 3, 2, "soon", 2),
    entry("a", 3, 3, "2026-03-07", 3, "superseded"), entry("a", 3, 4, "2026-03-12", 3),
    # b: two at step 2, none new at step 3
    entry("b", 2, 0, "2026-03-04", 2), entry("b", 2, 1, "2026-03-05", 2),
    entry("b", 3, 0, "2026-03-04", 2), entry("b", 3, 1, "2026-03-05", 2),
    # c: nothing at step 2, one dated on the forecast date at step 3
    entry("c", 3, 0, "2026-03-10", 3),
])

BRIERS = {"a": [0.6, 0.4, 0.2], "b": [0.6, 0.5, 0.5], "c": [0.5, 0.6, 0.7]}


def test_own_counts_by_hand():
    own = own_counts(NOTEBOOK, forecasts(BRIERS)).sort(["agent", "step"])
    assert own.select("agent", "step", "own").rows() == [
        ("a", 2, 1), ("a", 3, 1), ("b", 2, 2), ("b", 3, 0), ("c", 2, 0), ("c", 3, 1)]


def test_leave_one_agent_out_availability():
    av = {(r["agent"], r["step"]): r["A"] for r in availability(own_counts(NOTEBOOK, forecasts(BRIERS))).to_dicts()}
    assert av[("a", 2)] == 1.0 and av[("a", 3)] == 0.5
    assert av[("b", 2)] == 0.5 and av[("b", 3)] == 1.0
    assert av[("c", 2)] == 1.5 and av[("c", 3)] == 0.5


def test_rollouts_are_averaged_before_peers():
    nb = pl.concat([NOTEBOOK, pl.DataFrame([entry("b", 3, 5, "2026-03-09", 3, rollout=1)])])
    own = own_counts(nb, forecasts(BRIERS, rollouts=2))
    av = {(r["agent"], r["step"]): r for r in availability(own).to_dicts()}
    assert av[("b", 2)]["own"] == 1.0  # (2 + 0) / 2 rollouts
    assert av[("b", 3)]["own"] == 0.5  # (0 + 1) / 2
    assert av[("a", 3)]["A"] == pytest.approx((0.5 + 0.5) / 2)


def test_kappa_g_and_spearman():
    res = evidence_diagnostics(forecasts(BRIERS), NOTEBOOK, draws=200)
    per = {r["agent"]: r for r in res.per_agent.to_dicts()}
    assert per["a"]["kappa"] == pytest.approx(1.5 / 1.25)
    assert per["b"]["kappa"] == pytest.approx(1.0 / 1.25)
    assert per["c"]["kappa"] == pytest.approx(0.5 / 2.5)
    assert per["a"]["G"] == pytest.approx(0.4) and per["c"]["G"] == pytest.approx(-0.2)
    assert res.spearman["kappa"] == pytest.approx(1.0)
    assert res.spearman["searches"] == pytest.approx(1.0)
    # A takes the values 0.5, 1.0, 1.5 on the transitions: grouped by value, not into empty quartiles
    assert res.grouping == "values" and res.cut_points == []
    assert res.quartiles["label"].to_list() == ["A = 0.50", "A = 1.00", "A = 1.50"]
    assert res.quartiles["n"].to_list() == [3, 2, 1]
    assert "distinct value" in res.notes["quartiles"]


def test_spearman_needs_three_points():
    assert spearman([1, 2], [2, 1]) != spearman([1, 2], [2, 1])  # NaN
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def _reader_run() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two notebook-keeping readers (r1, r2) and a uniform agent that keeps no notebook."""
    rows = []
    for agent, bs in {"r1": [0.6, 0.4, 0.3], "r2": [0.6, 0.5, 0.5], "uniform": [0.5, 0.5, 0.5]}.items():
        for step, b in zip((1, 2, 3), bs):
            rows.append({"agent": agent, "event_id": "e", "rollout": 0, "step": step, "steps_total": 3,
                         "forecast_date": DATES[step], "memory": True, "missing": False, "brier": b,
                         "n_search": 0 if agent == "uniform" else 2, "n_open": 0 if agent == "uniform" else 1})
    nb = pl.DataFrame([
        entry("r1", 2, 0, "2026-03-03", 2), entry("r1", 3, 0, "2026-03-03", 2), entry("r1", 3, 1, "2026-03-07", 3),
        entry("r2", 2, 0, "2026-03-02", 2), entry("r2", 2, 1, "2026-03-04", 2),
        entry("r2", 3, 0, "2026-03-02", 2), entry("r2", 3, 1, "2026-03-04", 2),
    ])
    return pl.DataFrame(rows), nb


def test_two_readers_define_kappa_and_a_non_keeper_does_not_dilute_a():
    f, nb = _reader_run()
    res = evidence_diagnostics(f, nb, draws=100)
    per = {r["agent"]: r for r in res.per_agent.to_dicts()}
    # own: r1 = (1, 1), r2 = (2, 0) at steps 2, 3; A_r1 = r2's counts, A_r2 = r1's counts
    assert per["r1"]["kappa"] == pytest.approx((1 * 2 + 1 * 0) / (2**2 + 0**2))
    assert per["r2"]["kappa"] == pytest.approx((2 * 1 + 0 * 1) / (1**2 + 1**2))
    assert res.keepers == ("r1", "r2")
    assert per["r1"]["kappa_note"] is None and per["r2"]["kappa_note"] is None
    assert per["uniform"]["kappa"] is None and "keeps no notebook" in per["uniform"]["kappa_note"]
    assert per["uniform"]["G"] == pytest.approx(0.0)  # G and usage still reported for every agent
    # Brier changes of the keepers grouped by A's values (2 and 0 for r1; 1 and 1 for r2)
    assert res.grouping == "values"
    assert dict(zip(res.quartiles["label"], res.quartiles["d_brier"])) == pytest.approx(
        {"A = 0.00": -0.1, "A = 1.00": (-0.1 + 0.0) / 2, "A = 2.00": -0.2})
    assert "spearman_kappa" in res.notes  # two keepers: too few to rank


def test_a_single_keeper_has_undefined_kappa_with_the_reason():
    f, nb = _reader_run()
    res = evidence_diagnostics(f, nb.filter(pl.col("agent") == "r1"), draws=100)
    per = {r["agent"]: r for r in res.per_agent.to_dicts()}
    assert per["r1"]["kappa"] is None and "no other agent keeps a notebook" in per["r1"]["kappa_note"]
    assert res.grouping == "none" and "quartiles" in res.notes


def test_quartiles_of_many_values_use_cut_points_and_merge_ties():
    from forecast_env.eval.report.evidence import a_groups

    a = np.array([0.0] * 6 + [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    group, cuts, kind = a_groups(a)
    assert kind == "quartiles"
    # quartiles 0, 0.5, 3.25: the zeros (half the values) stay in one group on the first cut point,
    # and the group (0, 0.5] that no value falls in is dropped instead of shown empty
    assert cuts == pytest.approx([0.0, 0.5, 3.25])
    assert group.tolist() == [0] * 6 + [1, 1, 1, 2, 2, 2]
