"""Scoring (docs/design.md §6): every rule, the paper's identities, and an independent implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast_env.scoring import (
    Report,
    brier,
    log_score_vs_market,
    normalize_report,
    score_report,
    tie_accuracy,
)

OPTS = ["A", "B", "C"]


@pytest.mark.parametrize("k", range(2, 13))
def test_uniform_identities(k: int) -> None:
    options = [f"o{i}" for i in range(k)]
    uniform = {o: 1.0 / k for o in options}
    for truth in options:
        assert brier(uniform, truth, options) == pytest.approx(1 - 1 / k, abs=1e-12)
        assert tie_accuracy(uniform, truth, options) == pytest.approx(1 / k, abs=1e-12)
    # the fallback forecast has the same scores
    assert brier(None, options[0], options) == pytest.approx(1 - 1 / k, abs=1e-12)
    assert tie_accuracy("garbage", options[-1], options) == pytest.approx(1 / k, abs=1e-12)


def test_negative_entries_are_clipped_and_mass_normalized() -> None:
    rep = normalize_report({"A": -0.5, "B": 1.0, "C": 3.0}, OPTS)
    assert rep.fallback is None
    assert rep.probs == {"A": 0.0, "B": 0.25, "C": 0.75}


@pytest.mark.parametrize(
    "bad",
    [
        {"A": float("nan"), "B": 0.5},
        {"A": float("inf")},
        {},
        {"A": 0.0, "B": -1.0},
        {"A": "lots"},
        {"A": None},
        {"A": True},
        {"A": [0.5]},
        {1: 0.5, "B": 0.5},
        [0.5, 0.5],  # wrong length
        "A",
        None,
        42,
    ],
)
def test_unusable_reports_become_uniform(bad: object) -> None:
    rep = normalize_report(bad, OPTS)
    assert rep.fallback is not None
    assert rep.probs == {o: pytest.approx(1 / 3) for o in OPTS}


def test_numeric_strings_and_aligned_lists() -> None:
    assert normalize_report({"A": "0.2", "B": " 0.8 "}, OPTS).probs == {"A": 0.2, "B": 0.8, "C": 0.0}
    rep = normalize_report([1, 1, 2], OPTS)
    assert rep.fallback is None and rep.probs == {"A": 0.25, "B": 0.25, "C": 0.5}
    assert normalize_report(np.array([0.0, 0.0, 5.0]), OPTS).probs["C"] == 1.0


def test_exact_label_matching_and_unsupported_labels_keep_mass() -> None:
    # "a" is not "A": it is an unsupported label that keeps its mass; A gets 0
    rep = normalize_report({"a": 0.5, "B": 0.5}, OPTS)
    assert rep.probs["A"] == 0.0 and rep.probs["a"] == 0.5
    # Brier over U = {a, B} + truth A: (0.5)^2 + (0.5)^2 + (0 - 1)^2
    assert brier({"a": 0.5, "B": 0.5}, "A", OPTS) == pytest.approx(1.5)
    # unreported labels get 0: reporting only B with truth A is a confident miss
    assert brier({"B": 1.0}, "A", OPTS) == pytest.approx(2.0)
    assert brier({"A": 1.0}, "A", OPTS) == 0.0


def test_ties() -> None:
    assert tie_accuracy({"A": 0.4, "B": 0.4, "C": 0.2}, "A", OPTS) == 0.5
    assert tie_accuracy({"A": 0.4, "B": 0.4, "C": 0.2}, "C", OPTS) == 0.0
    assert tie_accuracy({"A": 0.4 + 1e-13, "B": 0.4, "C": 0.2}, "B", OPTS) == 0.5
    assert tie_accuracy({"A": 0.41, "B": 0.4, "C": 0.19}, "A", OPTS) == 1.0


def test_log_score_vs_market() -> None:
    assert log_score_vs_market({"A": 0.5, "B": 0.5}, "A", ["A", "B"], None) is None
    assert log_score_vs_market({"A": 0.8, "B": 0.2}, "A", ["A", "B"], 0.4) == pytest.approx(math.log(2))
    # both sides clipped to [eps, 1]
    assert log_score_vs_market({"A": 0.0, "B": 1.0}, "A", ["A", "B"], 0.5) == pytest.approx(
        math.log(0.001) - math.log(0.5)
    )
    assert log_score_vs_market({"A": 0.0, "B": 1.0}, "A", ["A", "B"], 0.0, eps=0.01) == pytest.approx(0.0)
    # uniform fallback is scored against the market too
    assert log_score_vs_market("junk", "A", ["A", "B"], 0.25) == pytest.approx(math.log(0.5 / 0.25))


def _independent(probs: dict, truth: str, options: list[str]) -> tuple[float, float]:
    """A second implementation of docs/design.md §6 written from the text, for the agreement test."""
    clean = {}
    usable = bool(probs)
    for key, val in probs.items():
        if not math.isfinite(val):
            usable = False
        clean[key] = max(val, 0.0)
    mass = sum(clean.values()) if usable else 0.0
    if mass <= 0:
        clean = {o: 1.0 / len(options) for o in options}
    else:
        clean = {key: v / mass for key, v in clean.items()}
    universe = set(clean) | {truth}
    b = sum((clean.get(c, 0.0) - (c == truth)) ** 2 for c in universe)
    best = max(clean.values())
    winners = [c for c in clean if abs(best - clean[c]) <= 1e-12]
    acc = (truth in winners) / len(winners)
    return b, acc


labels = st.sampled_from(["A", "B", "C", "D", "x"])
values = st.one_of(st.floats(-1, 5, allow_nan=False), st.sampled_from([0.0, float("nan"), float("inf")]))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(labels, values, max_size=5), st.sampled_from(["A", "B", "C", "D"]))
def test_agrees_with_independent_implementation(probs: dict, truth: str) -> None:
    options = ["A", "B", "C", "D"]
    b, acc = _independent(probs, truth, options)
    assert brier(probs, truth, options) == pytest.approx(b, abs=1e-9)
    assert tie_accuracy(probs, truth, options) == pytest.approx(acc, abs=1e-9)
    assert 0.0 <= brier(probs, truth, options) <= 2.0 + 1e-12


def test_score_report_bundles_all_three() -> None:
    s = score_report({"A": 1, "B": 3}, "B", ["A", "B"], market_prob=0.5)
    assert isinstance(s.report, Report)
    assert s.brier == pytest.approx(0.125) and s.accuracy == 1.0
    assert s.log_vs_market == pytest.approx(math.log(0.75 / 0.5))
