"""Audit check 2, the blind-structure probe, and the inclusion-bias report (docs/design.md §8).

Rows are (event, forecast date, option). Both models are conditional logits over the options
offered at one event-date, so every feature is an option-specific term; an event-level feature
enters only through its interaction with the option's position (a feature that is equal for every
option of a choice set cancels out of the softmax).

* reference (legitimate priors): the base rate by (K, position); question words x position; days
  from the forecast date to the stated deadline x position;
* probe = reference + features that should carry nothing: step, steps_total, weekday, description
  length, option text length, each x position.

Both are fitted on the train split (L2-regularized maximum likelihood, L-BFGS from zero, so the fit
is deterministic) and compared on the audited split by the mean paired Brier difference (probe minus
reference), events weighted equally, with an event-clustered percentile bootstrap. Verdict: FAIL when
the whole 95% interval lies below `-margin` (structure predicts the answer by a margin that
matters); otherwise INCONCLUSIVE when its half-width exceeds `max_half_width` (too few events to
tell); else PASS.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import polars as pl
from scipy import sparse
from scipy.optimize import minimize

from forecast_env.eval.audit.inputs import AuditInputs, AuditSettings, CheckResult
from forecast_env.eval.report.bootstrap import bootstrap_means

#: Positions beyond this share one bucket (position index `MAX_POSITION`).
MAX_POSITION = 7
#: Option counts above this share one base-rate bucket.
MAX_K = 6
_WORD = re.compile(r"[a-z][a-z']+")
_QUESTION_STOP = frozenset(
    ["a", "an", "the", "of", "to", "in", "on", "for", "by", "at", "be", "is", "are", "was", "were", "will", "would", "who", "what", "which", "when", "whether", "or", "and", "with", "from", "as", "its", "it", "this", "that", "than", "their", "his", "her", "there", "than", "do", "does", "did", "has", "have", "had", "before", "after", "into", "over", "under", "more", "less", "least", "most", "any"]
)

#: Column order of the rows table this module consumes (`structure_rows` builds it).
ROW_COLUMNS = ("event_id", "split", "forecast_date", "step", "steps_total", "k", "position", "option",
               "question", "description_chars", "days_to_deadline", "y")


@dataclass(frozen=True)
class ProbeSettings:
    """Thresholds and sizes of the probe (the defaults are the documented audit rule)."""

    draws: int = 4000
    seed: int = 0
    margin: float = 0.01  # FAIL when the 95% interval lies wholly below -margin
    max_half_width: float = 0.02  # INCONCLUSIVE above this half-width
    l2: float = 1.0  # ridge penalty on standardized features (a N(0, 1) prior per weight)
    max_words: int = 40  # question-word vocabulary: the most frequent words in >= min_word_events train events
    min_word_events: int = 3


# ---------------------------------------------------------------------------------------------
# the conditional logit
# ---------------------------------------------------------------------------------------------


@dataclass
class ConditionalLogit:
    """A conditional (McFadden) logit: P(option i | set g) = softmax over g of x_i . beta."""

    beta: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    converged: bool
    iterations: int

    def predict(self, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Per-row probabilities within each group (`groups` sorted, contiguous integer ids)."""
        z = ((x - self.mean) / self.scale) @ self.beta
        return _group_softmax(z, groups)


def _group_starts(groups: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])


def _group_softmax(z: np.ndarray, groups: np.ndarray) -> np.ndarray:
    if len(z) == 0:
        return z.astype(np.float64)
    starts = _group_starts(groups)
    zmax = np.maximum.reduceat(z, starts)
    counts = np.diff(np.r_[starts, len(z)])
    e = np.exp(z - np.repeat(zmax, counts))
    denom = np.add.reduceat(e, starts)
    return e / np.repeat(denom, counts)


def fit_conditional_logit(x: np.ndarray, y: np.ndarray, groups: np.ndarray, l2: float = 1.0,
                          max_iter: int = 500) -> ConditionalLogit:
    """L2-regularized conditional logit by L-BFGS from beta = 0 (deterministic).

    `x` (n, p) option-specific features, `y` (n,) 1 for the chosen option of each group, `groups`
    (n,) sorted group ids. Columns are scaled to unit standard deviation on the fitting rows (a
    constant column gets scale 1); they are not centered: a shift common to every row cancels
    within each group, and uncentered one-hot interactions stay sparse.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, p = x.shape
    mean = np.zeros(p)
    scale = x.std(axis=0) if n else np.ones(p)
    scale = np.where(scale > 1e-12, scale, 1.0)
    xs = sparse.csr_matrix(x / scale)
    xt = xs.T.tocsr()
    starts = _group_starts(groups) if n else np.zeros(0, np.int64)
    counts = np.diff(np.r_[starts, n]) if n else np.zeros(0, np.int64)

    def objective(beta: np.ndarray) -> tuple[float, np.ndarray]:
        z = xs @ beta
        zmax = np.maximum.reduceat(z, starts)
        e = np.exp(z - np.repeat(zmax, counts))
        denom = np.add.reduceat(e, starts)
        logp = z - np.repeat(zmax + np.log(denom), counts)
        prob = e / np.repeat(denom, counts)
        loss = -float(y @ logp) + 0.5 * l2 * float(beta @ beta)
        grad = xt @ (prob - y) + l2 * beta
        return loss, grad

    if n == 0 or p == 0:
        return ConditionalLogit(np.zeros(p), mean, scale, True, 0)
    res = minimize(objective, np.zeros(p), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": 1e-7})
    return ConditionalLogit(np.asarray(res.x), mean, scale, bool(res.success), int(res.nit))


# ---------------------------------------------------------------------------------------------
# features
# ---------------------------------------------------------------------------------------------


def question_words(question: str) -> set[str]:
    """Lower-cased words of a question, minus function words."""
    return {w for w in _WORD.findall((question or "").lower()) if w not in _QUESTION_STOP and len(w) > 2}


def _vocabulary(rows: pl.DataFrame, settings: ProbeSettings) -> list[str]:
    per_event = rows.select("event_id", "question").unique("event_id")
    counts: Counter[str] = Counter()
    for q in per_event["question"].to_list():
        counts.update(question_words(q))
    words = [w for w, c in counts.items() if c >= settings.min_word_events]
    words.sort(key=lambda w: (-counts[w], w))
    return words[: settings.max_words]


def _position_block(values: np.ndarray, position: np.ndarray) -> np.ndarray:
    """`values` (n,) x one-hot(position) -> (n, MAX_POSITION + 1)."""
    out = np.zeros((len(values), MAX_POSITION + 1))
    out[np.arange(len(values)), np.minimum(position, MAX_POSITION)] = values
    return out


@dataclass(frozen=True)
class Design:
    """The two feature matrices of a rows table, aligned with its (sorted) rows."""

    reference: np.ndarray
    probe: np.ndarray
    groups: np.ndarray
    y: np.ndarray
    events: np.ndarray
    reference_names: list[str]
    probe_names: list[str]


def build_design(rows: pl.DataFrame, vocabulary: Sequence[str]) -> Design:
    """Feature matrices of the reference and the probe for `rows` (see the module docstring)."""
    rows = rows.sort(["event_id", "forecast_date", "position"])
    n = rows.height
    pos = rows["position"].to_numpy().astype(np.int64)
    k = rows["k"].to_numpy().astype(np.int64)
    ones = np.ones(n)
    ref_cols: list[np.ndarray] = []
    ref_names: list[str] = []

    # base rate by (K, position): one indicator per (min(K, MAX_K), position) cell
    kb = np.minimum(k, MAX_K)
    for kv in range(2, MAX_K + 1):
        block = _position_block(ones * (kb == kv), pos)
        ref_cols.append(block)
        ref_names += [f"K{kv}{'+' if kv == MAX_K else ''}:pos{p}" for p in range(MAX_POSITION + 1)]
    # question words x position
    qwords = [question_words(q) for q in rows["question"].to_list()]
    for w in vocabulary:
        has = np.array([1.0 if w in qw else 0.0 for qw in qwords])
        ref_cols.append(_position_block(has, pos))
        ref_names += [f"word[{w}]:pos{p}" for p in range(MAX_POSITION + 1)]
    # days to the stated deadline x position
    dtd = np.log1p(np.maximum(rows["days_to_deadline"].to_numpy().astype(np.float64), 0.0))
    ref_cols.append(_position_block(dtd, pos))
    ref_names += [f"log_days_to_deadline:pos{p}" for p in range(MAX_POSITION + 1)]
    reference = np.hstack(ref_cols) if ref_cols else np.zeros((n, 0))

    probe_cols = [reference]
    probe_names = list(ref_names)
    step = rows["step"].to_numpy().astype(np.float64)
    total = rows["steps_total"].to_numpy().astype(np.float64)
    desc = np.log1p(rows["description_chars"].to_numpy().astype(np.float64))
    opt_len = np.log1p(np.array([len(o or "") for o in rows["option"].to_list()], dtype=np.float64))
    weekday = np.array([d.weekday() for d in rows["forecast_date"].to_list()], dtype=np.int64)
    for name, v in (("step", step), ("steps_total", total), ("log_description_chars", desc),
                    ("log_option_chars", opt_len)):
        probe_cols.append(_position_block(v, pos))
        probe_names += [f"{name}:pos{p}" for p in range(MAX_POSITION + 1)]
    probe_cols.append(opt_len[:, None])  # option length also as a plain option attribute
    probe_names.append("log_option_chars")
    for wd in range(7):
        probe_cols.append(_position_block((weekday == wd).astype(np.float64), pos))
        probe_names += [f"weekday{wd}:pos{p}" for p in range(MAX_POSITION + 1)]
    probe = np.hstack(probe_cols)

    keys = list(zip(rows["event_id"].to_list(), rows["forecast_date"].to_list()))
    group_ids = np.zeros(n, dtype=np.int64)
    g = -1
    prev = None
    for i, key in enumerate(keys):
        if key != prev:
            g += 1
            prev = key
        group_ids[i] = g
    return Design(reference, probe, group_ids, rows["y"].to_numpy().astype(np.float64),
                  np.asarray(rows["event_id"].to_list(), dtype=object), ref_names, probe_names)


def _valid_groups(rows: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Rows of the choice sets with >= 2 options and exactly one realized option; dropped set count."""
    stats = rows.group_by(["event_id", "forecast_date"]).agg(pl.len().alias("_n"), pl.col("y").sum().alias("_y"))
    good = stats.filter((pl.col("_n") >= 2) & (pl.col("_y") == 1)).select("event_id", "forecast_date")
    return rows.join(good, on=["event_id", "forecast_date"], how="semi"), stats.height - good.height


def _group_brier(p: np.ndarray, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    starts = _group_starts(groups)
    return np.add.reduceat((p - y) ** 2, starts)


# ---------------------------------------------------------------------------------------------
# the probe
# ---------------------------------------------------------------------------------------------


def run_probe(rows: pl.DataFrame, train_split: str = "train", eval_split: str = "eval",
              settings: ProbeSettings | None = None) -> dict[str, Any]:
    """Fit both models on `train_split` rows, compare them on `eval_split` rows; verdict and figures."""
    st = settings or ProbeSettings()
    rows, dropped_sets = _valid_groups(rows)
    train = rows.filter(pl.col("split") == train_split)
    test = rows.filter(pl.col("split") == eval_split)
    n_train_ev = train["event_id"].n_unique() if train.height else 0
    n_test_ev = test["event_id"].n_unique() if test.height else 0
    out: dict[str, Any] = {"train_events": n_train_ev, "eval_events": n_test_ev,
                           "train_choice_sets": 0, "eval_choice_sets": 0,
                           "choice_sets_dropped": dropped_sets, "draws": st.draws, "seed": st.seed,
                           "margin": st.margin, "max_half_width": st.max_half_width, "l2": st.l2}
    if n_train_ev < 2 or n_test_ev < 2:
        out.update(verdict="INCONCLUSIVE", reason=f"too few events to fit and compare (train {n_train_ev}, "
                                                  f"{eval_split} {n_test_ev})")
        return out
    vocab = _vocabulary(train, st)
    dtr, dte = build_design(train, vocab), build_design(test, vocab)
    ref = fit_conditional_logit(dtr.reference, dtr.y, dtr.groups, st.l2)
    prb = fit_conditional_logit(dtr.probe, dtr.y, dtr.groups, st.l2)
    b_ref = _group_brier(ref.predict(dte.reference, dte.groups), dte.y, dte.groups)
    b_prb = _group_brier(prb.predict(dte.probe, dte.groups), dte.y, dte.groups)
    group_event = dte.events[_group_starts(dte.groups)]
    frame = pl.DataFrame({"event_id": group_event.tolist(), "ref": b_ref, "probe": b_prb})
    per_event = frame.group_by("event_id", maintain_order=True).agg(pl.col("ref").mean(), pl.col("probe").mean())
    per_event = per_event.sort("event_id")
    diff = (per_event["probe"] - per_event["ref"]).to_numpy()
    est = bootstrap_means(diff, draws=st.draws, seed=st.seed)
    half = (est.hi - est.lo) / 2.0
    if est.hi < -st.margin:
        verdict, reason = "FAIL", (f"the probe beats the reference by {-est.value:.3f} Brier, 95% CI "
                                   f"[{est.lo:.3f}, {est.hi:.3f}] wholly below -{st.margin}: "
                                   "schedule/format structure predicts the answer")
    elif half > st.max_half_width:
        verdict, reason = "INCONCLUSIVE", (f"95% CI half-width {half:.3f} > {st.max_half_width}: "
                                           f"too few events ({n_test_ev}) to tell")
    else:
        verdict, reason = "PASS", (f"probe - reference = {est.value:+.4f} [{est.lo:+.4f}, {est.hi:+.4f}]: "
                                   "no usable structure")
    top = _top_weights(prb, dtr.probe_names, len(dtr.reference_names))
    out.update(
        verdict=verdict, reason=reason,
        train_choice_sets=int(dtr.groups.max() + 1) if len(dtr.groups) else 0,
        eval_choice_sets=int(dte.groups.max() + 1) if len(dte.groups) else 0,
        vocabulary_size=len(vocab),
        reference_features=len(dtr.reference_names), probe_features=len(dtr.probe_names),
        brier_reference=float(cast(float, per_event["ref"].mean())), brier_probe=float(cast(float, per_event["probe"].mean())),
        difference=est.value, ci_low=est.lo, ci_high=est.hi, half_width=half,
        fit_converged={"reference": ref.converged, "probe": prb.converged},
        top_probe_weights=top,
    )
    return out


def _top_weights(model: ConditionalLogit, names: Sequence[str], skip: int, n: int = 8) -> list[dict[str, Any]]:
    """The probe-only features with the largest absolute standardized weights (what it learned)."""
    w = model.beta[skip:]
    order = np.argsort(-np.abs(w), kind="stable")[:n]
    return [{"feature": names[skip + int(i)], "weight": round(float(w[i]), 4)} for i in order if abs(w[i]) > 1e-6]


def structure_rows(events: pl.DataFrame, schedule: pl.DataFrame, describe: Any = None) -> pl.DataFrame:
    """The (event, date, option) rows of the probe from the events and schedule tables.

    `events` needs event_id, split, question, description, label and a deadline column (`t_end`,
    else `end_day`, else `close_day`); `describe(description, day)` gives the description shown on a
    date (default: the full text).
    """
    deadline_col = next((c for c in ("t_end", "end_day", "close_day") if c in events.columns), None)
    ev = {r["event_id"]: r for r in events.iter_rows(named=True)}
    out: dict[str, list[Any]] = {c: [] for c in ROW_COLUMNS}
    desc_cache: dict[tuple[str, date], int] = {}
    for r in schedule.sort(["event_id", "step"]).iter_rows(named=True):
        e = ev.get(r["event_id"])
        if e is None:
            continue
        day = r["forecast_date"]
        deadline = e.get(deadline_col) if deadline_col else None
        if isinstance(deadline, datetime):
            deadline = deadline.date()
        dtd = (deadline - day).days if isinstance(deadline, date) else 0
        key = (r["event_id"], day)
        if key not in desc_cache:
            text = describe(e.get("description") or "", day) if describe else (e.get("description") or "")
            desc_cache[key] = len(text)
        opts = list(r["options"] or [])
        for i, o in enumerate(opts):
            out["event_id"].append(r["event_id"])
            out["split"].append(e.get("split"))
            out["forecast_date"].append(day)
            out["step"].append(int(r["step"]))
            out["steps_total"].append(int(r["steps_total"]))
            out["k"].append(len(opts))
            out["position"].append(i)
            out["option"].append(o)
            out["question"].append(e.get("question") or "")
            out["description_chars"].append(desc_cache[key])
            out["days_to_deadline"].append(dtd)
            out["y"].append(1 if o == e.get("label") else 0)
    return pl.DataFrame(out, schema={"event_id": pl.String, "split": pl.String, "forecast_date": pl.Date,
                                     "step": pl.Int64, "steps_total": pl.Int64, "k": pl.Int64,
                                     "position": pl.Int64, "option": pl.String, "question": pl.String,
                                     "description_chars": pl.Int64, "days_to_deadline": pl.Int64, "y": pl.Int64})


# ---------------------------------------------------------------------------------------------
# inclusion bias
# ---------------------------------------------------------------------------------------------


def _label_stats(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    binary = [it for it in items if it.get("type") == "binary" and it.get("label") is not None]
    multi = [it for it in items if it.get("type") == "multi" and it.get("label") is not None]
    first = sum(1 for it in binary if it["options"] and it["label"] == it["options"][0])
    yes = sum(1 for it in binary if str(it["label"]).strip().lower() == "yes")
    yes_no = sum(1 for it in binary if {str(o).strip().lower() for o in it["options"]} == {"yes", "no"})
    return {
        "n": len(items), "with_label": len(binary) + len(multi), "binary": len(binary), "multi": len(multi),
        "binary_yes_share": (yes / yes_no) if yes_no else None,
        "binary_first_option_share": (first / len(binary)) if binary else None,
        "multi_mean_options": (float(np.mean([len(it["options"]) for it in multi])) if multi else None),
        "multi_chance": (float(np.mean([1.0 / len(it["options"]) for it in multi])) if multi else None),
    }


def inclusion_bias(kept: Sequence[Mapping[str, Any]], excluded: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Label distribution of the kept events vs the events each filter excluded.

    `kept` / `excluded` items carry `type`, `options`, `label` (None when unknown) and, for excluded
    ones, `stage` and `reason`. One row for the kept events, then one per (stage, reason) and per
    stage; each has the Yes share of yes/no binary events, the first-option share of binary events,
    and the multi-option count, with the difference in Yes share from the kept events.
    """
    base = _label_stats(kept)
    rows = [{"group": "kept", **base}]
    by: dict[str, list[Mapping[str, Any]]] = {}
    for it in excluded:
        by.setdefault(f"{it.get('stage')}", []).append(it)
        by.setdefault(f"{it.get('stage')}/{it.get('reason')}", []).append(it)
    for group in sorted(by, key=lambda g: (g.split("/")[0], "/" in g, g)):
        s = _label_stats(by[group])
        diff = (s["binary_yes_share"] - base["binary_yes_share"]
                if s["binary_yes_share"] is not None and base["binary_yes_share"] is not None else None)
        rows.append({"group": f"excluded {group}", **s, "yes_share_minus_kept": diff})
    return rows


def yes_share_gap_is_large(row: Mapping[str, Any], base_n: int, min_n: int = 10) -> bool:
    """Whether an excluded group's Yes share differs from the kept events' beyond 2 binomial SEs."""
    d = row.get("yes_share_minus_kept")
    if d is None or row.get("binary", 0) < min_n or base_n < min_n:
        return False
    p = row["binary_yes_share"]
    se = math.sqrt(max(p * (1 - p), 1e-9) / row["binary"])
    return abs(d) > 2 * se


# ---------------------------------------------------------------------------------------------
# the check on a workspace
# ---------------------------------------------------------------------------------------------


def _json_list(value: Any) -> list | None:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        try:
            out = json.loads(value)
        except ValueError:
            return None
        return out if isinstance(out, list) else None
    return None


def gamma_labels(polymarket: Path) -> dict[str, dict[str, Any]]:
    """Type, options and label of every event in a Polymarket cache, read from the raw Gamma JSON.

    Deliberately independent of the events build (only what the inclusion-bias report needs): one
    market = binary with its `outcomes`; two or more = multi with `groupItemTitle` labels; the label
    is the single option whose terminal price is >= 0.99 (None when there is not exactly one).
    """
    from forecast_env.envs.events.polymarket.cache import PolymarketCache

    out: dict[str, dict[str, Any]] = {}
    for ev in PolymarketCache(polymarket).events():
        if not isinstance(ev, Mapping) or ev.get("id") in (None, ""):
            continue
        markets = [m for m in (ev.get("markets") or []) if isinstance(m, Mapping)]
        options: list[str] = []
        resolved: list[str] = []
        if len(markets) == 1:
            m = markets[0]
            outcomes = _json_list(m.get("outcomes")) or []
            prices = _json_list(m.get("outcomePrices")) or []
            options = [str(o) for o in outcomes]
            for o, p in zip(outcomes, prices):
                try:
                    if float(p) >= 0.99:
                        resolved.append(str(o))
                except (TypeError, ValueError):
                    pass
            kind = "binary"
        elif len(markets) >= 2:
            kind = "multi"
            for m in markets:
                name = str(m.get("groupItemTitle") or m.get("question") or m.get("id"))
                options.append(name)
                outcomes = [str(o).lower() for o in (_json_list(m.get("outcomes")) or [])]
                prices = _json_list(m.get("outcomePrices")) or []
                yes = outcomes.index("yes") if "yes" in outcomes else 0
                try:
                    if float(prices[yes]) >= 0.99:
                        resolved.append(name)
                except (IndexError, TypeError, ValueError):
                    pass
        else:
            kind = None
        out[f"pm-{ev.get('id')}"] = {"type": kind, "options": options,
                                     "label": resolved[0] if len(resolved) == 1 else None}
    return out


def check_structure(inputs: AuditInputs, settings: AuditSettings) -> CheckResult:
    """Check 2: the blind-structure probe on the workspace, plus the inclusion-bias report."""
    cut_description: Callable[[str | None, date], str] | None
    try:
        from forecast_env.envs.events.build import description_as_of as cut_description
    except ImportError:  # the build's description cut is unavailable: full descriptions
        cut_description = None
    rows = structure_rows(inputs.events, inputs.schedule, cut_description)
    fit_split, test_split = ("eval", "train") if inputs.split == "train" else ("train", "eval")
    st = ProbeSettings(draws=settings.draws, seed=settings.seed, margin=settings.margin,
                       max_half_width=settings.max_half_width, l2=settings.l2)
    probe = run_probe(rows, fit_split, test_split, st)
    figures: dict[str, Any] = {k: v for k, v in probe.items() if k not in ("verdict", "reason")}
    figures["fit_split"], figures["compared_on"] = fit_split, test_split

    kept = [{"type": r["type"], "options": list(r["options"] or []), "label": r["label"]}
            for r in inputs.events.iter_rows(named=True)]
    labels = gamma_labels(inputs.polymarket) if inputs.polymarket is not None else {}
    excluded = []
    for r in inputs.excluded.iter_rows(named=True):
        info = labels.get(r["event_id"], {})
        excluded.append({"stage": r["stage"], "reason": r["reason"], "type": info.get("type"),
                         "options": info.get("options") or [], "label": info.get("label")})
    bias = inclusion_bias(kept, excluded)
    figures["inclusion_bias"] = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
                                 for row in bias]
    figures["inclusion_bias_labels"] = ("from the Polymarket cache" if labels else
                                        "excluded events unlabelled (pass --polymarket DIR to label them)")
    base_n = bias[0]["binary"]
    gaps = [row["group"] for row in bias[1:] if yes_share_gap_is_large(row, base_n)]
    figures["inclusion_bias_large_gaps"] = gaps
    reason = probe["reason"]
    if gaps:
        reason += f"; inclusion bias: the Yes share differs by > 2 SE in {', '.join(gaps)} (reported, not a failure)"
    return CheckResult("structure", probe["verdict"], reason, figures,
                       [probe["reason"]] if probe["verdict"] == "FAIL" else [], [])
