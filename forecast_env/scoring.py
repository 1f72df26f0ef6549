"""Scoring of probability reports (docs/design.md §6): normalization, Brier, tie accuracy, log vs market.

A usable report is a mapping of labels to numbers (or numeric strings), or a list aligned with the
offered options. Negative entries are clipped to 0 and the positive mass is normalized. Unusable
reports (no positive mass, NaN/inf, non-numeric values, non-string labels, a list of the wrong
length, anything else) become the uniform forecast over the K offered options, with the reason in
`Report.fallback`. Labels match exactly; unreported labels get 0; reported labels that are not
offered keep their mass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TIE_TOL = 1e-12
DEFAULT_EPS = 0.001


@dataclass(frozen=True)
class Report:
    """A normalized report: `probs` maps every offered option (0 when unreported) and every
    unsupported reported label to its probability; `fallback` names why the uniform forecast was
    used, or is None when the agent's own report was usable."""

    probs: dict[str, float]
    fallback: str | None = None

    def aligned(self, options: Sequence[str]) -> list[float]:
        """Probabilities in the order of `options` (0 for an option without mass)."""
        return [self.probs.get(o, 0.0) for o in options]


@dataclass(frozen=True)
class Scores:
    """The three scores of one forecast."""

    brier: float
    accuracy: float
    log_vs_market: float | None
    report: Report = field(repr=False)


def uniform_report(options: Sequence[str], reason: str | None = None) -> Report:
    """The uniform forecast over the offered options."""
    k = len(options)
    if k == 0:
        raise ValueError("uniform_report needs at least one option")
    return Report({o: 1.0 / k for o in options}, reason)


def _to_number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def normalize_report(probs: Any, options: Sequence[str]) -> Report:
    """Normalize an agent's report over `options` (docs/design.md §6); never raises on bad input."""
    options = list(options)
    if isinstance(probs, Report):
        return probs
    if isinstance(probs, Mapping):
        items = list(probs.items())
        if any(not isinstance(k, str) for k, _ in items):
            return uniform_report(options, "non-string label")
    elif isinstance(probs, (list, tuple, np.ndarray)):
        if len(probs) != len(options):
            return uniform_report(options, f"list of length {len(probs)} for {len(options)} options")
        items = list(zip(options, list(probs)))
    else:
        return uniform_report(options, f"not a mapping or list ({type(probs).__name__})")
    values: dict[str, float] = {}
    for label, raw in items:
        num = _to_number(raw)
        if num is None:
            return uniform_report(options, f"non-numeric value for {label!r}")
        if not math.isfinite(num):
            return uniform_report(options, f"non-finite value for {label!r}")
        values[label] = values.get(label, 0.0) + max(num, 0.0)
    total = sum(values.values())
    if not total > 0.0 or not math.isfinite(total):
        return uniform_report(options, "no positive mass")
    out = {o: 0.0 for o in options}
    for label, v in values.items():
        out[label] = v / total
    return Report(out, None)


def brier(probs: Any, truth: str, options: Sequence[str]) -> float:
    """Multiclass Brier over U = reported labels + truth, on [0, 2]."""
    rep = normalize_report(probs, options)
    # sorted: the float sum must not depend on the process's string-hash seed
    labels = sorted(set(rep.probs) | {truth})
    return float(sum((rep.probs.get(c, 0.0) - (1.0 if c == truth else 0.0)) ** 2 for c in labels))


def tie_accuracy(probs: Any, truth: str, options: Sequence[str]) -> float:
    """Fractional-tie accuracy: 1[truth in argmax] / |argmax| (ties within 1e-12)."""
    rep = normalize_report(probs, options)
    top = max(rep.probs.values())
    argmax = [c for c, p in rep.probs.items() if top - p <= TIE_TOL]
    return (1.0 / len(argmax)) if truth in argmax else 0.0


def log_score_vs_market(
    probs: Any, truth: str, options: Sequence[str], market_prob: float | None, eps: float = DEFAULT_EPS
) -> float | None:
    """ln p(Y) - ln m(Y), both clipped to [eps, 1]; None when the market probability is missing."""
    if market_prob is None or (isinstance(market_prob, float) and math.isnan(market_prob)):
        return None
    rep = normalize_report(probs, options)
    p = min(max(rep.probs.get(truth, 0.0), eps), 1.0)
    m = min(max(float(market_prob), eps), 1.0)
    return math.log(p) - math.log(m)


def score_report(
    probs: Any, truth: str, options: Sequence[str], market_prob: float | None = None, eps: float = DEFAULT_EPS
) -> Scores:
    """Normalize once and compute all three scores."""
    rep = normalize_report(probs, options)
    return Scores(
        brier=brier(rep, truth, options),
        accuracy=tie_accuracy(rep, truth, options),
        log_vs_market=log_score_vs_market(rep, truth, options, market_prob, eps),
        report=rep,
    )
