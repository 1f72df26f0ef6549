"""Murphy decomposition and reliability diagrams (docs/design.md §7, 10 equal-width bins).

Pairs (forecast f, outcome o in {0, 1}): binary events give P(first option) against
1[label == first option]; multi-option events give one pair per (option, forecast), one-vs-rest.
With bins k (n_k pairs, mean forecast f_k, observed frequency o_k, base rate o):

    Brier = REL - RES + UNC + WBV - 2 WBC        (exact)
    REL = sum n_k (f_k - o_k)^2 / N,  RES = sum n_k (o_k - o)^2 / N,  UNC = o (1 - o),
    WBV = sum_k sum_i (f_i - f_k)^2 / N,  WBC = sum_k sum_i (f_i - f_k)(o_i - o_k) / N,

the within-bin terms vanishing when forecasts are constant inside each bin (the seed's identity
Brier = REL - RES + UNC). Brier here is the binary (one-vs-rest) squared error per pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl


@dataclass(frozen=True)
class Decomposition:
    """Murphy components over N (forecast, outcome) pairs and the per-bin diagram data."""

    n: int
    brier: float
    reliability: float
    resolution: float
    uncertainty: float
    within_variance: float
    within_covariance: float
    bins: list[dict] = field(default_factory=list)  # lo, hi, n, mean_forecast, observed

    def to_dict(self) -> dict:
        return {"n": self.n, "brier": self.brier, "reliability": self.reliability, "resolution": self.resolution,
                "uncertainty": self.uncertainty, "within_variance": self.within_variance,
                "within_covariance": self.within_covariance, "bins": self.bins}


def bin_index(f: np.ndarray, n_bins: int) -> np.ndarray:
    """Equal-width bin of each forecast on [0, 1]; 1.0 falls in the last bin."""
    return np.clip(np.floor(np.asarray(f, np.float64) * n_bins).astype(np.int64), 0, n_bins - 1)


def murphy(f: np.ndarray, o: np.ndarray, n_bins: int = 10) -> Decomposition:
    """The Murphy decomposition of binary forecasts `f` against outcomes `o`."""
    f = np.asarray(f, np.float64)
    o = np.asarray(o, np.float64)
    n = f.size
    if n == 0:
        nan = float("nan")
        return Decomposition(0, nan, nan, nan, nan, nan, nan, [])
    k = bin_index(f, n_bins)
    counts = np.bincount(k, minlength=n_bins).astype(np.float64)
    safe = np.where(counts > 0, counts, 1.0)
    fk = np.bincount(k, weights=f, minlength=n_bins) / safe
    ok = np.bincount(k, weights=o, minlength=n_bins) / safe
    obar = float(o.mean())
    rel = float(np.sum(counts * (fk - ok) ** 2) / n)
    res = float(np.sum(counts * (ok - obar) ** 2) / n)
    unc = obar * (1.0 - obar)
    df = f - fk[k]
    wbv = float(np.sum(df**2) / n)
    wbc = float(np.sum(df * (o - ok[k])) / n)
    bins = [
        {"lo": i / n_bins, "hi": (i + 1) / n_bins, "n": int(counts[i]),
         "mean_forecast": float(fk[i]) if counts[i] else None, "observed": float(ok[i]) if counts[i] else None}
        for i in range(n_bins)
    ]
    return Decomposition(n, float(np.mean((f - o) ** 2)), rel, res, unc, wbv, wbc, bins)


def calibration_pairs(forecasts: pl.DataFrame) -> pl.DataFrame:
    """(forecast, outcome, kind) pairs: binary P(first option); multi one-vs-rest over options.

    `forecasts` needs `options`, `probs`, `label` and `type` (binary | multi; else by option count).
    """
    f = forecasts.filter(pl.col("probs").is_not_null())
    if f.height == 0:
        return pl.DataFrame(schema={"forecast": pl.Float64, "outcome": pl.Float64, "kind": pl.String})
    if "type" not in f.columns:
        f = f.with_columns(type=pl.when(pl.col("options").list.len() == 2).then(pl.lit("binary"))
                           .otherwise(pl.lit("multi")))
    f = f.with_columns(pl.col("type").fill_null("multi"))
    binary = f.filter(pl.col("type") == "binary").select(
        forecast=pl.col("probs").list.get(0),
        outcome=(pl.col("options").list.get(0) == pl.col("label")).cast(pl.Float64),
        kind=pl.lit("binary"),
    )
    multi = (f.filter(pl.col("type") != "binary").select("options", "probs", "label")
             .explode(["options", "probs"])
             .select(forecast=pl.col("probs"), outcome=(pl.col("options") == pl.col("label")).cast(pl.Float64),
                     kind=pl.lit("multi")))
    return pl.concat([binary, multi]).filter(pl.col("forecast").is_not_null())


def decompose(forecasts: pl.DataFrame, n_bins: int = 10) -> dict[str, Decomposition]:
    """Murphy decompositions for binary pairs, multi one-vs-rest pairs and both together."""
    pairs = calibration_pairs(forecasts)
    out = {}
    for name, sub in (("binary", pairs.filter(pl.col("kind") == "binary")),
                      ("multi", pairs.filter(pl.col("kind") == "multi")), ("all", pairs)):
        out[name] = murphy(sub["forecast"].to_numpy(), sub["outcome"].to_numpy(), n_bins)
    return out
