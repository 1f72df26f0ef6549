"""Murphy decomposition: the exact identities, and the pairs it is computed on."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from forecast_env.eval.report.calibration import calibration_pairs, murphy


def test_identity_exact_when_forecasts_constant_within_bins():
    # forecasts at bin centres only: WBV = WBC = 0 and Brier = REL - RES + UNC
    rng = np.random.default_rng(0)
    f = rng.choice(np.arange(10) / 10 + 0.05, 500)
    o = (rng.random(500) < f).astype(float)
    d = murphy(f, o, 10)
    assert abs(d.within_variance) < 1e-20 and abs(d.within_covariance) < 1e-20
    assert abs(d.brier - (d.reliability - d.resolution + d.uncertainty)) < 1e-12


def test_hand_computed_example():
    # bin 1 (0.1-0.2): f=0.1 x2, outcomes 0, 1 ; bin 8: f=0.8 x2, outcomes 1, 1
    d = murphy(np.array([0.1, 0.1, 0.8, 0.8]), np.array([0.0, 1.0, 1.0, 1.0]))
    obar = 0.75
    rel = (2 * (0.1 - 0.5) ** 2 + 2 * (0.8 - 1.0) ** 2) / 4
    res = (2 * (0.5 - obar) ** 2 + 2 * (1.0 - obar) ** 2) / 4
    assert abs(d.reliability - rel) < 1e-12 and abs(d.resolution - res) < 1e-12
    assert abs(d.uncertainty - obar * (1 - obar)) < 1e-12
    assert d.bins[1]["n"] == 2 and d.bins[8]["observed"] == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=200), st.integers(1, 20))
def test_general_decomposition_with_within_bin_terms(pairs, n_bins):
    f = np.array([p for p, _ in pairs])
    o = np.array([float(y) for _, y in pairs])
    d = murphy(f, o, n_bins)
    total = d.reliability - d.resolution + d.uncertainty + d.within_variance - 2 * d.within_covariance
    assert abs(d.brier - total) < 1e-9


def test_pairs_binary_first_option_and_multi_one_vs_rest():
    f = pl.DataFrame({
        "options": [["Yes", "No"], ["A", "B", "C"]],
        "probs": [[0.7, 0.3], [0.2, 0.5, 0.3]],
        "label": ["No", "B"],
        "type": ["binary", "multi"],
    })
    p = calibration_pairs(f)
    assert p.filter(pl.col("kind") == "binary").rows() == [(0.7, 0.0, "binary")]
    multi = p.filter(pl.col("kind") == "multi")
    assert multi["forecast"].to_list() == [0.2, 0.5, 0.3]
    assert multi["outcome"].to_list() == [0.0, 1.0, 0.0]
