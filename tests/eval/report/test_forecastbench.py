"""ForecastBench leaderboard scoring: the naive rows by hand on the fixture, and against the published board; the
two-way fixed effects against an explicit least-squares fit; a run scored on hand-made imported items."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast_env import schema
from forecast_env.envs.events.forecastbench import read_rounds
from forecast_env.errors import RunError
from forecast_env.eval.report.forecastbench import (
    brier_index,
    forecastbench_section,
    items,
    naive_rows,
    pool_rounds,
    published_naive_rows,
    read_fixed_effects,
    score_run,
    two_way_fixed_effects,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "forecastbench"
#: the rounds of the hand computation in the fixture's README (its import rounds 2026-03-01/15 are for the import)
HAND_ROUNDS = ("2025-08-31", "2026-07-19", "2026-08-02")


def _hand_rounds() -> list:
    return [r for r in read_rounds(FIXTURE) if r.due_date in HAND_ROUNDS]
#: a bare git mirror of forecastingresearch/forecastbench-datasets (FORECASTBENCH_MIRROR); the comparison with the
#: published leaderboard on the whole repository is benchmark-marked (`make bench`), the fixture tests run in make test
MIRROR = Path(os.environ.get("FORECASTBENCH_MIRROR", "/work/.mirror/forecastingresearch+forecastbench-datasets/repo"))


def test_items_drop_combos_and_unresolved() -> None:
    frame = items(_hand_rounds())
    # tests/fixtures/forecastbench/README.md: 544 dataset + 127 market items
    assert frame.height == 671
    assert frame.filter(frame["kind"] == "dataset").height == 544
    assert not frame["id"].str.starts_with("[").any()
    assert frame.select(pl.col("horizon").min()).item() > 0


def test_naive_rows_match_hand_computation() -> None:
    rows = {r["model"]: r for r in naive_rows(items(_hand_rounds()))}
    # README.md: dataset 189 of 544 resolved to 1, market 31 of 127; every resolved_to is 0 or 1
    a0, a1, half = rows["Always 0"], rows["Always 1"], rows["Always 0.5"]
    assert (a0["n_dataset"], a0["n_market"], a0["n_overall"]) == (544, 127, 671)
    assert a0["brier_dataset"] == pytest.approx(189 / 544)
    assert a0["brier_market"] == pytest.approx(31 / 127)
    assert a0["brier_overall"] == pytest.approx(0.29576047938860583)
    assert a0["index_dataset"] == pytest.approx(41.05710640049682)
    assert a1["brier_dataset"] == pytest.approx(355 / 544)
    assert a1["brier_market"] == pytest.approx(96 / 127)
    assert a1["brier_overall"] == pytest.approx(0.7042395206113942)
    assert half["brier_overall"] == 0.25 and half["index_overall"] == pytest.approx(50.0)


def test_pool_rounds_rules() -> None:
    rounds = _hand_rounds()
    # resolved rows, combination rows counted: 2025-08-31 subset 120 dataset / 120 market,
    # 2026-07-19 243 / 45, 2026-08-02 241 / 22; the code needs >= 225 dataset and >= 50 market
    assert pool_rounds(rounds, date(2026, 12, 31)) == []
    loose = {"min_market": 40, "min_dataset": 100}
    assert [r.due_date for r in pool_rounds(rounds, date(2026, 12, 31), **loose)] == [
        "2025-08-31",
        "2026-07-19",
    ]
    # 50 days: a round due 2026-07-19 is pooled from 2026-09-07 on
    assert [r.due_date for r in pool_rounds(rounds, date(2026, 9, 6), **loose)] == ["2025-08-31"]
    assert [r.due_date for r in pool_rounds(rounds, date(2026, 9, 7), **loose)] == [
        "2025-08-31",
        "2026-07-19",
    ]


def test_naive_rows_of_the_pooled_items_match_the_published_board() -> None:
    """The items the published baseline board of 2026-08-21 pools, rebuilt from every resolution set by this
    reader and pooling (fixture pooled_items.parquet, make_subset.py), give its naive rows within 0.2 Brier
    Index points and 1% of N (the whole repository: the benchmark-marked test below)."""
    frame = pl.read_parquet(FIXTURE / "pooled_items.parquet")
    assert (FIXTURE / "pooled_items.as_of").read_text().strip() == "2026-08-21"
    rebuilt = {r["model"]: r for r in naive_rows(frame)}
    published = {r["model"]: r for r in published_naive_rows(FIXTURE / "leaderboards/csv/leaderboard_baseline.csv")}
    assert set(rebuilt) == set(published) == {"Always 0", "Always 1", "Always 0.5"}
    for model, pub in published.items():
        for kind in ("dataset", "market", "overall"):
            assert abs(rebuilt[model][f"index_{kind}"] - pub[f"index_{kind}"]) <= 0.2, (model, kind)
            assert abs(rebuilt[model][f"n_{kind}"] - pub[f"n_{kind}"]) <= 0.01 * pub[f"n_{kind}"], (model, kind)
    # not vacuous: "Always 0" is far from "Always 1" and from 50 on both kinds
    assert rebuilt["Always 0"]["index_dataset"] == pytest.approx(37.64, abs=0.01)
    assert rebuilt["Always 1"]["index_market"] == pytest.approx(11.87, abs=0.01)


def test_published_naive_rows_fixture() -> None:
    rows = {
        r["model"]: r for r in published_naive_rows(FIXTURE / "leaderboards/csv/leaderboard_baseline.csv")
    }
    assert rows["Always 0"]["n_dataset"] == 32640 and rows["Always 1"]["index_overall"] == 16.7


def _extract(tmp_path: Path) -> Path:
    """The mirror's resolution sets, leaderboard CSV and baseline HTML (its "Updated" date) into a folder."""
    git = ["git", f"--git-dir={MIRROR}"]
    names = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", "HEAD", "datasets/resolution_sets"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in [
        *names,
        "leaderboards/csv/leaderboard_baseline.csv",
        "leaderboards/html/leaderboard_baseline.html",
    ]:
        out = tmp_path / name
        out.parent.mkdir(parents=True, exist_ok=True)
        blob = subprocess.run([*git, "show", f"HEAD:{name}"], capture_output=True)
        if blob.returncode == 0:
            out.write_bytes(blob.stdout)
    return tmp_path


@pytest.mark.benchmark
@pytest.mark.skipif(not MIRROR.is_dir(), reason="no forecastbench-datasets mirror: set FORECASTBENCH_MIRROR")
def test_rebuilt_naive_rows_match_published_leaderboard(tmp_path: Path) -> None:
    root = _extract(tmp_path)
    html = (root / "leaderboards/html/leaderboard_baseline.html").read_text()
    updated = re.search(r"Updated ([A-Za-z]+)\. (\d+), (\d{4})", html)  # "Updated Aug. 21, 2026"
    assert updated is not None
    as_of = datetime.strptime(" ".join(updated.groups()), "%b %d %Y").date()
    rebuilt = {r["model"]: r for r in naive_rows(items(pool_rounds(read_rounds(root), as_of)))}
    published = {
        r["model"]: r for r in published_naive_rows(root / "leaderboards/csv/leaderboard_baseline.csv")
    }
    assert set(published) == set(rebuilt) == {"Always 0", "Always 1", "Always 0.5"}
    for model, pub in published.items():
        for kind in ("dataset", "market", "overall"):
            assert abs(rebuilt[model][f"index_{kind}"] - pub[f"index_{kind}"]) <= 0.2, (model, kind)
            assert abs(rebuilt[model][f"n_{kind}"] - pub[f"n_{kind}"]) <= 0.01 * pub[f"n_{kind}"], (
                model,
                kind,
            )


# ---------------------------------------------------------------------------------------------
# a run scored on imported items: the two-way fixed effects, score_run, the report section
# ---------------------------------------------------------------------------------------------

ITEM_COLS = pl.from_arrow(schema.empty_table(schema.FORECASTBENCH_ITEMS)).schema
FORECAST_COLS = pl.from_arrow(schema.empty_table(schema.FORECASTS)).schema
FREEZE_DAYS = 10


def _item(due: date, source: str, id_: str, kind: str, resolved_to: float | None, *, status: str = "scored",
          horizon: int = 30, freeze_value: float | None = None, market_value_due: float | None = None,
          combo: bool = False, resolved: bool = True) -> dict[str, Any]:
    pk = f"{due}_{source}_{id_}" if kind == "market" else f"{due}_{source}_{id_}_{horizon}"
    scored = status == "scored"
    return {"question_pk": pk, "kind": kind, "due_date": due, "freeze_date": due - timedelta(days=FREEZE_DAYS),
            "source": source, "id": id_, "combo": combo, "horizon": horizon,
            "resolution_date": due + timedelta(days=horizon), "resolved": resolved, "resolved_to": resolved_to,
            "freeze_value": freeze_value, "market_value_due": market_value_due,
            "event_id": f"ev-{pk}" if scored else None,
            "forecast_date": due - timedelta(days=FREEZE_DAYS) if scored else None, "status": status, "detail": None}


def _filler(due: date, n_market: int, n_dataset: int) -> list[dict[str, Any]]:
    """Resolved combination rows: they count for pooling, never for scoring."""
    return [_item(due, "polymarket" if kind == "market" else "fred", f'["c{kind}{i}", "x"]', kind, 1.0,
                  status="combo", combo=True)
            for kind, n in (("market", n_market), ("dataset", n_dataset)) for i in range(n)]


def _items(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=ITEM_COLS)


def _fc(agent: str, item: dict[str, Any], p_yes: float, *, rollout: int = 0, step: int = 1, missing: bool = False,
        fallback: str | None = None, options: tuple[str, ...] = ("Yes", "No"), day: date | None = None,
        ) -> dict[str, Any]:
    return {"run_id": "t", "agent": agent, "event_id": item["event_id"], "rollout": rollout, "step": step,
            "steps_total": 1, "forecast_date": day or item["forecast_date"], "options": list(options),
            "probs": None if missing else [p_yes if o == "Yes" else 1 - p_yes for o in options],
            "fallback": fallback, "missing": missing}


def _forecasts(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=FORECAST_COLS)


def _rows(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["model"]: r for r in result["rows"]}


def test_two_way_fixed_effects_match_dummy_least_squares() -> None:
    rng = np.random.default_rng(7)
    rows = []
    for q in range(25):
        for m in range(5):
            if m == q % 5 or rng.random() < 0.5:  # unbalanced; every question answered
                rows.append((f"q{q:02d}", f"m{m}", float(rng.random())))
    rows += [("q00", "m0", 0.3), ("solo", "m3", 0.9)]  # a repeated pair; a question only m3 answered
    frame = pl.DataFrame(rows, schema=["question_pk", "model", "brier"], orient="row")
    fe = two_way_fixed_effects(frame)
    qs, ms = sorted({r[0] for r in rows}), sorted({r[1] for r in rows})
    design = np.zeros((len(rows), len(qs) + len(ms)))
    for i, (q, m, _) in enumerate(rows):
        design[i, qs.index(q)] = design[i, len(qs) + ms.index(m)] = 1.0
    coef = np.linalg.lstsq(design, frame["brier"].to_numpy(), rcond=None)[0]
    assert fe["question_pk"].to_list() == qs
    diff = fe["question_fixed_effect"].to_numpy() - coef[: len(qs)]
    assert np.ptp(diff) < 1e-10  # the same effects up to one constant
    ours = frame.join(fe, on="question_pk").group_by("model").agg(
        (pl.col("brier") - pl.col("question_fixed_effect")).mean().alias("adj")).sort("model")["adj"].to_numpy()
    b_ls = dict(zip(qs, coef[: len(qs)], strict=True))
    theirs = np.array([np.mean([y - b_ls[q] for q, m, y in rows if m == model]) for model in ms])
    assert np.ptp(ours - theirs) < 1e-10 and np.ptp(ours) > 0.01  # adjusted model means: equal up to a constant


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 7), st.integers(2, 4), st.data())
def test_a_constant_on_one_model_leaves_question_effect_differences(n_q: int, n_m: int, data: Any) -> None:
    cells = [(q, m) for q in range(n_q) for m in range(n_m)
             if m == 0 or data.draw(st.booleans())]  # model 0 answers every question: connected
    briers = data.draw(st.lists(st.floats(0, 1), min_size=len(cells), max_size=len(cells)))
    shifted = data.draw(st.integers(0, n_m - 1))
    c = data.draw(st.floats(-1, 1))
    base = pl.DataFrame({"question_pk": [f"q{q}" for q, _ in cells], "model": [f"m{m}" for _, m in cells],
                         "brier": briers})
    moved = base.with_columns(pl.when(pl.col("model") == f"m{shifted}").then(pl.col("brier") + c)
                              .otherwise(pl.col("brier")).alias("brier"))
    a = two_way_fixed_effects(base)["question_fixed_effect"].to_numpy()
    b = two_way_fixed_effects(moved)["question_fixed_effect"].to_numpy()
    assert np.allclose(np.diff(a), np.diff(b), atol=1e-9)


def test_two_way_fixed_effects_rejects_null_briers() -> None:
    with pytest.raises(RunError, match="null"):
        two_way_fixed_effects(pl.DataFrame({"question_pk": ["q"], "model": ["m"], "brier": [None]},
                                           schema={"question_pk": pl.String, "model": pl.String,
                                                   "brier": pl.Float64}))


def test_balanced_panel_adjusted_scores_equal_raw_briers() -> None:
    rng = np.random.default_rng(3)
    due = date(2026, 1, 4)
    rows = [_item(due, "fred", f"d{i}", "dataset", float(rng.integers(0, 2))) for i in range(6)]
    rows += [_item(due, "manifold", f"m{i}", "market", float(rng.integers(0, 2)), freeze_value=float(rng.random()),
                   market_value_due=0.5 if i < 2 else None) for i in range(5)]
    fc = [_fc(agent, it, float(rng.random()), rollout=r) for agent in ("a", "b", "c") for it in rows
          for r in range(2)]
    res = score_run(_forecasts(fc), _items(rows), as_of=date(2026, 12, 1), pool=False)
    got = _rows(res)
    assert set(got) == {"a", "b", "c", "Freeze value", "Market on due date (N=2)", "Always 0", "Always 1",
                        "Always 0.5"}
    for model, r in got.items():
        if model.startswith("Market on due date"):
            continue  # on 2 of the 5 market items: the effects do not cancel
        for kind in ("dataset", "market", "overall"):
            if r[f"brier_{kind}"] is None:
                assert model == "Freeze value" and kind != "market"
                continue
            assert abs(r[f"adjusted_{kind}"] - r[f"brier_{kind}"]) < 1e-12, (model, kind)
    assert got["a"]["n_dataset"] == 6 and got["a"]["n_market"] == 5 and got["a"]["n_overall"] == 11
    assert sum("fixed effects cancel" in n for n in res["notes"]) == 2
    assert res["fixed_effects"] == "estimated"


def test_unbalanced_model_on_easy_items_only_scores_worse_adjusted() -> None:
    due = date(2026, 1, 4)
    easy = [_item(due, "fred", f"e{i}", "dataset", 1.0) for i in range(2)]
    hard = [_item(due, "fred", f"h{i}", "dataset", 1.0) for i in range(2)]
    # A: Brier 0.01 on the easy items, 0.36 on the hard ones (mean 0.185); B: 0.04 on the easy ones only
    fc = [_fc("A", it, 0.9) for it in easy] + [_fc("A", it, 0.4) for it in hard] + [_fc("B", it, 0.8) for it in easy]
    res = score_run(_forecasts(fc), _items(easy + hard), as_of=date(2026, 12, 1), pool=False)
    got = _rows(res)
    # by hand: B - A = 0.03 on the shared items; effects (A's and B's model effects -0.01, 0.02, rows 4 and 2)
    # easy 0.02, hard 0.37; Always 0.5 adjusted 0.25 - 0.195 = 0.055, shift 0.195
    assert got["A"]["brier_dataset"] == pytest.approx(0.185) and got["A"]["adjusted_dataset"] == pytest.approx(0.185)
    assert got["B"]["brier_dataset"] == pytest.approx(0.04)
    assert got["B"]["adjusted_dataset"] == pytest.approx(0.215)
    assert got["B"]["index_dataset"] == pytest.approx((1 - math.sqrt(0.215)) * 100)
    assert got["B"]["index_dataset"] < got["A"]["index_dataset"]
    assert got["Always 0.5"]["adjusted_dataset"] == pytest.approx(0.25)
    assert got["B"]["adjusted_overall"] is None and got["B"]["n_market"] == 0
    fe = dict(two_way_fixed_effects(pl.DataFrame({
        "question_pk": [it["question_pk"] for it in easy + hard + easy], "model": ["A"] * 4 + ["B"] * 2,
        "brier": [0.01, 0.01, 0.36, 0.36, 0.04, 0.04]})).iter_rows())
    assert fe[hard[0]["question_pk"]] - fe[easy[0]["question_pk"]] == pytest.approx(0.35)
    assert not any("cancel" in n for n in res["notes"])
    assert any("estimated from this run's 2 forecaster(s) (A, B)" in n for n in res["notes"])


R1, R2, R3 = date(2026, 1, 4), date(2026, 5, 1), date(2026, 2, 1)
AS_OF = R2 + timedelta(days=49)


def _scenario() -> tuple[pl.DataFrame, pl.DataFrame, dict[str, dict[str, Any]]]:
    it = {
        "m1": _item(R1, "polymarket", "m1", "market", 1.0, freeze_value=0.7, market_value_due=0.8),
        "m2": _item(R1, "polymarket", "m2", "market", 0.0, freeze_value=0.2),
        "m3": _item(R1, "manifold", "m3", "market", 1.0, freeze_value=1.3),  # clipped to 1
        "d1": _item(R1, "fred", "d1", "dataset", 1.0, freeze_value=5000.0),  # a series level: never a forecast
        "d2": _item(R1, "fred", "d2", "dataset", 0.0),
        "d5": _item(R2, "fred", "d5", "dataset", 1.0),  # round 49 days old at AS_OF
        "m9": _item(R3, "polymarket", "m9", "market", 1.0),  # round with 49 resolved market rows
        "pending": _item(R1, "polymarket", "p1", "market", 0.4, status="pending", resolved=False),
    }
    rows = [*it.values(), *_filler(R1, 47, 223), *_filler(R2, 50, 225), *_filler(R3, 48, 225)]
    fc = [
        _fc("a", it["m1"], 0.6, rollout=0), _fc("a", it["m1"], 0.8, rollout=1, options=("No", "Yes")),
        _fc("a", it["m1"], 0.0, day=R1),  # another date: answers nothing
        _fc("a", it["m2"], 0.9), _fc("a", it["m2"], 0.3, step=2),  # two steps on one date: the last counts
        _fc("a", it["d1"], 0.7), _fc("a", it["d2"], 0.2),
        _fc("a", it["d5"], 0.5), _fc("a", it["m9"], 0.5),
        _fc("b", it["m1"], 0.5), _fc("b", it["m3"], 0.9), _fc("b", it["d1"], 0.0, missing=True),
        _fc("b", it["d2"], 0.5, fallback="parse_error"),
    ]
    return _forecasts(fc), _items(rows), it


def test_score_run_by_hand_with_estimated_effects() -> None:
    forecasts, items_, it = _scenario()
    res = score_run(forecasts, items_, as_of=AS_OF)
    assert res["pooled_due_dates"] == res["scored_due_dates"] == ["2026-01-04"]
    assert res["n_pending"] == 1 and res["fixed_effects"] == "estimated"
    got = _rows(res)
    assert list(got) == ["a", "b", "Freeze value", "Market on due date (N=1)", "Always 0", "Always 1", "Always 0.5"]
    a, b = got["a"], got["b"]
    # a: m1 rollouts (0.6 - 1)^2 = 0.16 and (0.8 - 1)^2 = 0.04, mean 0.10; m2 0.09; d1 0.09; d2 0.04
    assert (a["n_market"], a["n_dataset"], a["n_overall"]) == (2, 2, 4)
    assert a["brier_market"] == pytest.approx(0.095) and a["brier_dataset"] == pytest.approx(0.065)
    # b: m1 0.25, m3 0.01; d1 missing (not scored); d2 a fallback 0.5, scored: 0.25
    assert (b["n_market"], b["n_dataset"]) == (2, 1)
    assert b["brier_market"] == pytest.approx(0.13) and b["brier_dataset"] == pytest.approx(0.25)
    fz = got["Freeze value"]  # (0.7 - 1)^2, (0.2 - 0)^2, (1 - 1)^2; no dataset row
    assert fz["n_market"] == 3 and fz["brier_market"] == pytest.approx(0.13 / 3)
    assert fz["n_dataset"] == 0 and fz["index_dataset"] is None and fz["adjusted_overall"] is None
    assert got["Market on due date (N=1)"]["brier_market"] == pytest.approx(0.04)
    assert got["Always 0"]["brier_market"] == pytest.approx(2 / 3) and got["Always 1"]["brier_market"] == pytest.approx(
        1 / 3)
    assert got["Always 0"]["brier_dataset"] == pytest.approx(0.5) and got["Always 0"]["n_overall"] == 5
    half = got["Always 0.5"]
    assert half["adjusted_market"] == pytest.approx(0.25) and half["index_overall"] == pytest.approx(50.0)
    # the market effects come from a, b and the freeze value only (the Always rows would change them)
    pk = {k: v["question_pk"] for k, v in it.items()}
    fe = dict(two_way_fixed_effects(pl.DataFrame({
        "question_pk": [pk["m1"], pk["m2"], pk["m1"], pk["m3"], pk["m1"], pk["m2"], pk["m3"]],
        "model": ["a", "a", "b", "b", "F", "F", "F"], "brier": [0.10, 0.09, 0.25, 0.01, 0.09, 0.04, 0.0]})).iter_rows())
    mean_fe = (fe[pk["m1"]] + fe[pk["m2"]] + fe[pk["m3"]]) / 3
    want_b = ((0.25 - fe[pk["m1"]]) + (0.01 - fe[pk["m3"]])) / 2 + mean_fe
    assert b["adjusted_market"] == pytest.approx(want_b, abs=1e-12)
    assert b["adjusted_market"] != pytest.approx(b["brier_market"], abs=1e-3)
    assert b["index_market"] == pytest.approx(brier_index(want_b))
    assert b["adjusted_overall"] == pytest.approx((b["adjusted_market"] + b["adjusted_dataset"]) / 2)
    notes = " ".join(res["notes"])
    assert "1 forecast(s) on scored items are missing" in notes
    assert "estimated from this run's 3 forecaster(s) (Freeze value, a, b)" in notes
    assert "2 answered item(s) of round(s) the leaderboard would not pool" in notes
    assert "2026-05-01: due 49 days before 2026-06-19 (< 50)" in notes
    assert "2026-02-01: 49 resolved market rows (< 50)" in notes
    assert "1 market freeze value(s) outside [0, 1] were clipped" in notes
    src = {(r["source"], r["model"]): r for r in res["by_source"]}
    assert src[("polymarket", "a")]["n_items"] == 2 and src[("polymarket", "b")]["n"] == 1
    assert src[("manifold", "b")]["brier"] == pytest.approx(0.01)
    assert ("manifold", "a") not in src and ("fred", "Freeze value") not in src
    # a day later the round due 2026-05-01 is 50 days old and pooled
    later = score_run(forecasts, items_, as_of=AS_OF + timedelta(days=1))
    assert later["pooled_due_dates"] == ["2026-01-04", "2026-05-01"]
    assert _rows(later)["a"]["n_dataset"] == 3


def test_score_run_pooling_counts_every_row_and_falls_back() -> None:
    forecasts, items_, _ = _scenario()
    # without the combination rows no round has enough resolved rows: every answered round is scored, with why
    bare = items_.filter(pl.col("status") != "combo")
    res = score_run(forecasts, bare, as_of=AS_OF)
    assert res["pooled_due_dates"] == [] and res["scored_due_dates"] == ["2026-01-04", "2026-02-01", "2026-05-01"]
    assert any(n.startswith("No answered round passes") and "2026-01-04: 3 resolved market rows (< 50); "
               "2 resolved dataset rows (< 225)" in n for n in res["notes"])
    assert _rows(res)["a"]["n_overall"] == 6
    off = score_run(forecasts, items_, as_of=AS_OF, pool=False)
    assert off["scored_due_dates"] == ["2026-01-04", "2026-02-01", "2026-05-01"]
    assert off["pooled_due_dates"] == ["2026-01-04"]


def test_score_run_with_supplied_effects() -> None:
    forecasts, items_, it = _scenario()
    pk = {k: v["question_pk"] for k, v in it.items()}
    fe = pl.DataFrame({"question_pk": [pk["m1"], pk["m2"], pk["d1"], pk["d2"], "2020-01-01_fred_other_30"],
                       "question_fixed_effect": [0.1, 0.3, 0.2, 0.0, 9.0]})  # no effect for m3
    res = score_run(forecasts, items_, fixed_effects=fe, as_of=AS_OF)
    assert res["fixed_effects"] == "supplied"
    assert any(f"1 of 5 scored question_pk value(s) have no supplied fixed effect (e.g. {pk['m3']})" in n
               for n in res["notes"])
    got = _rows(res)
    # m3 dropped from every row; market shift 0.25 - (0.25 - 0.2) = 0.2, dataset 0.25 - (0.25 - 0.1) = 0.1
    assert got["Always 0"]["n_market"] == 2 and got["Freeze value"]["n_market"] == 2
    assert got["a"]["adjusted_market"] == pytest.approx(0.095)  # a answered every item left
    assert got["b"]["n_market"] == 1 and got["b"]["adjusted_market"] == pytest.approx(0.25 - 0.1 + 0.2)
    assert got["b"]["adjusted_dataset"] == pytest.approx(0.25 - 0.0 + 0.1)
    assert got["b"]["adjusted_overall"] == pytest.approx(0.35)
    assert got["b"]["index_overall"] == pytest.approx((1 - math.sqrt(0.35)) * 100)
    assert got["Freeze value"]["adjusted_market"] == pytest.approx(0.065)
    none = pl.DataFrame({"question_pk": ["nope"], "question_fixed_effect": [0.1]})
    with pytest.raises(RunError, match="none of the 5 scored question_pk"):
        score_run(forecasts, items_, fixed_effects=none, as_of=AS_OF)


def test_score_run_rejects_what_it_cannot_score() -> None:
    forecasts, items_, _ = _scenario()
    with pytest.raises(RunError, match="no forecast of the run answers"):
        score_run(forecasts.filter(pl.col("event_id") == "nothing"), items_, as_of=AS_OF)
    with pytest.raises(RunError, match="clash"):
        score_run(forecasts.with_columns(agent=pl.lit("Always 0.5")), items_, as_of=AS_OF)
    with pytest.raises(RunError, match="freeze_value"):
        score_run(forecasts, items_.drop("freeze_value"), as_of=AS_OF)


def test_read_fixed_effects(tmp_path: Path) -> None:
    good = pl.DataFrame({"question_pk": ["2026-01-04_fred_X_30", "007"], "question_fixed_effect": [0.1, -0.2]})
    good.write_csv(tmp_path / "fe.csv")
    good.write_parquet(tmp_path / "fe.parquet")
    for name in ("fe.csv", "fe.parquet"):
        assert read_fixed_effects(tmp_path / name).sort("question_pk").to_dicts() == good.sort(
            "question_pk").to_dicts()
    pl.DataFrame({"question_pk": ["a"], "effect": [0.1]}).write_csv(tmp_path / "bad.csv")
    with pytest.raises(RunError, match=r"bad\.csv: no column 'question_fixed_effect'"):
        read_fixed_effects(tmp_path / "bad.csv")
    pl.DataFrame({"question_pk": ["a", "a"], "question_fixed_effect": [0.1, 0.2]}).write_parquet(tmp_path / "dup.parquet")
    with pytest.raises(RunError, match=r"dup\.parquet: 1 question_pk value\(s\) appear more than once \(e\.g\. a\)"):
        read_fixed_effects(tmp_path / "dup.parquet")
    pl.DataFrame({"question_pk": ["a"], "question_fixed_effect": [None]}, schema=FE_TYPES).write_csv(
        tmp_path / "null.csv")
    with pytest.raises(RunError, match=r"null\.csv: 1 row"):
        read_fixed_effects(tmp_path / "null.csv")
    (tmp_path / "fe.txt").write_text("x")
    with pytest.raises(RunError, match=r"\.csv, \.parquet or \.json"):
        read_fixed_effects(tmp_path / "fe.txt")
    with pytest.raises(RunError, match="no such"):
        read_fixed_effects(tmp_path / "absent.csv")
    # ForecastBench's published records: the key built from due date, source, id and horizon (null: market)
    (tmp_path / "question_fixed_effects.json").write_text(json.dumps([
        {"forecast_due_date": "2026-01-04", "source": "fred", "id": "X", "horizon": 30.0,
         "leaderboard_type": "baseline", "question_fixed_effect": 0.1},
        {"forecast_due_date": "2026-01-04", "source": "polymarket", "id": "0xab", "horizon": None,
         "leaderboard_type": "baseline", "question_fixed_effect": 0.2}]))
    assert dict(read_fixed_effects(tmp_path / "question_fixed_effects.json").iter_rows()) == {
        "2026-01-04_fred_X_30": 0.1, "2026-01-04_polymarket_0xab": 0.2}


FE_TYPES = {"question_pk": pl.String, "question_fixed_effect": pl.Float64}


def _report_items() -> list[dict[str, Any]]:
    """Items for tests/support/eval_data.write_run's binary events (forecast dates 2026-03-01 + 3 * step)."""
    rows = []
    for eid, kind, day, outcome in (("e1", "market", date(2026, 3, 4), 1.0), ("e2", "dataset", date(2026, 3, 7), 0.0),
                                    ("e5", "market", date(2026, 3, 7), 1.0)):
        row = _item(day + timedelta(days=FREEZE_DAYS), "fred" if kind == "dataset" else "manifold", eid, kind,
                    outcome, freeze_value=0.6 if kind == "market" else None)
        row["event_id"] = eid
        rows.append(row)
    return rows


def test_report_has_the_forecastbench_section(tmp_path: Path) -> None:
    from forecast_env.eval.report.render import build_report
    from tests.support.eval_data import write_run

    run_dir = write_run(tmp_path / "ws" / "runs" / "r1")
    assert forecastbench_section(run_dir) is None  # no items table
    _items(_report_items()).write_parquet(tmp_path / "ws" / "events" / "forecastbench.parquet", mkdir=True)
    section = forecastbench_section(run_dir, as_of=date(2026, 12, 31))  # the workspace's table (run_dir/../..)
    assert section is not None and section["items_path"].endswith("ws/events/forecastbench.parquet")
    uniform = _rows(section)["uniform"]
    assert uniform["brier_market"] == pytest.approx(0.25) and uniform["brier_dataset"] == pytest.approx(0.25)
    assert (uniform["n_market"], uniform["n_dataset"]) == (2, 1)
    pl.DataFrame({"question_pk": [r["question_pk"] for r in _report_items()],
                  "question_fixed_effect": [0.1, 0.2, 0.3]}).write_csv(tmp_path / "fe.csv")
    paths = build_report(run_dir, plots=False, forecastbench_fixed_effects=tmp_path / "fe.csv")
    res = json.loads(Path(paths["json"]).read_text())["forecastbench"]
    assert res["fixed_effects"] == f"supplied:{tmp_path / 'fe.csv'}"
    assert {r["model"] for r in res["rows"]} >= {"sharp", "uniform", "Freeze value", "Always 0.5"}
    md = Path(paths["markdown"]).read_text()
    assert "## ForecastBench (its leaderboard's rules)" in md
    assert "| model | Brier Index | Brier Index dataset | Brier Index market |" in md
    assert "| uniform | 50.0 | 50.0 | 50.0 |" in md  # always 0.5 on every item, like Always 0.5
    assert "their values are not news, so the corpus rarely holds the answer." in md
    assert "No answered round passes the leaderboard's pooling rules" in md
    # a run without ForecastBench items has no section
    other = write_run(tmp_path / "elsewhere" / "runs" / "r2")
    assert "ForecastBench" not in Path(build_report(other, plots=False)["markdown"]).read_text()
