"""A small hand-made run (forecasts, notebook, events, market, run.json) for metrics and report tests."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from forecast_env import schema, scoring
from forecast_env.store import atomic_write_table

EVENTS = [  # event_id, type, category, options, label, steps
    ("e1", "binary", "politics", ["Yes", "No"], "Yes", 3),
    ("e2", "binary", "sports", ["Yes", "No"], "No", 3),
    ("e3", "multi", "politics", ["A", "B", "C"], "B", 4),
    ("e4", "multi", "economy", ["A", "B", "C"], "C", 1),
    ("e5", "binary", "sports", ["Yes", "No"], "Yes", 2),
]


def forecast_rows(agents=("sharp", "uniform"), rollouts: int = 2, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for eid, typ, cat, opts, label, steps in EVENTS:
        k = len(opts)
        for agent in agents:
            for r in range(rollouts):
                for step in range(1, steps + 1):
                    if agent == "uniform":
                        p = np.full(k, 1.0 / k)
                    else:
                        conf = 0.4 + 0.15 * step + 0.05 * rng.random()
                        p = np.full(k, (1 - conf) / (k - 1))
                        p[opts.index(label)] = conf
                    probs = dict(zip(opts, p.tolist()))
                    mp = 0.5 if not (eid == "e2" and step == 1) else None
                    missing = agent == "sharp" and eid == "e5" and step == 2 and r == 1
                    day = date(2026, 3, 1) + timedelta(days=3 * step)
                    rows.append({
                        "run_id": "golden", "agent": agent, "event_id": eid, "rollout": r, "step": step,
                        "steps_total": steps, "forecast_date": day, "options": opts,
                        "probs": None if missing else [round(x, 6) for x in p.tolist()],
                        "raw_report": None, "fallback": None, "missing": missing, "label": label,
                        "brier": None if missing else scoring.brier(probs, label, opts),
                        "accuracy": None if missing else scoring.tie_accuracy(probs, label, opts),
                        "market_prob": mp,
                        "log_vs_market": None if (missing or mp is None) else
                        scoring.log_score_vs_market(probs, label, opts, mp),
                        "n_calls": 3 if agent == "sharp" else 1, "n_search": 2 if agent == "sharp" else 0,
                        "n_open": 1 if agent == "sharp" else 0, "memory": True, "show_market": False,
                    })
    return rows


def notebook_rows() -> list[dict]:
    rows = []
    for eid, *_rest, steps in EVENTS:
        for step in range(2, steps + 1):
            day = date(2026, 3, 1) + timedelta(days=3 * step - 1)
            rows.append({"run_id": "golden", "agent": "sharp", "event_id": eid, "rollout": 0, "step": step,
                         "entry_id": step, "claim": "c", "date_observed": day.isoformat(), "doc_ids": ["d"],
                         "created_step": step, "status": "active", "superseded_reason": None})
    return rows


def market_rows() -> list[dict]:
    rows = []
    for eid, typ, cat, opts, label, steps in EVENTS:
        for step in range(1, steps + 1):
            k = len(opts)
            p = np.full(k, 0.6 / (k - 1)) if k > 2 else np.array([0.5, 0.5])
            if k > 2:
                p[opts.index(label)] = 0.4
            probs = dict(zip(opts, p.tolist()))
            rows.append({"event_id": eid, "step": step, "steps_total": steps,
                         "forecast_date": date(2026, 3, 1) + timedelta(days=3 * step), "options": opts,
                         "probs": p.tolist(), "label": label, "brier": scoring.brier(probs, label, opts),
                         "accuracy": scoring.tie_accuracy(probs, label, opts)})
    return rows


def write_run(run_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_table(run_dir / "forecasts.parquet", pa.Table.from_pylist(forecast_rows()), schema.FORECASTS)
    atomic_write_table(run_dir / "notebook.parquet", pa.Table.from_pylist(notebook_rows()), schema.NOTEBOOK)
    atomic_write_table(run_dir / "tool_calls.parquet", schema.empty_table(schema.TOOL_CALLS))
    ev = pl.DataFrame([{"event_id": e, "question": f"Q {e}?", "type": t, "category": c, "options": o, "label": lab,
                        "split": "eval", "steps_total": s} for e, t, c, o, lab, s in EVENTS])
    atomic_write_table(run_dir / "events.parquet", ev.to_arrow())
    atomic_write_table(run_dir / "market.parquet", pl.DataFrame(market_rows()).to_arrow())
    (run_dir / "run.json").write_text(json.dumps({"run_id": "golden", "split": "eval", "rollouts": 2, "seed": 0,
                                                  "event_ids": [e[0] for e in EVENTS],
                                                  "corpus_snapshot_id": "hand-made"}))
    return run_dir


def write_reader_run(run_dir: Path, close_price: float = 0.55) -> Path:
    """The hand-made run with three notebook-keeping readers (sharp, reader, skim) beside uniform,
    and the day's last market price recorded (`market_prob_close`, `log_vs_market_close`)."""
    write_run(run_dir)
    rows = forecast_rows(agents=("reader", "sharp", "skim", "uniform"))
    for r in rows:
        has = r["market_prob"] is not None and not r["missing"]
        r["market_prob_close"] = close_price if r["market_prob"] is not None else None
        r["log_vs_market_close"] = scoring.log_score_vs_market(
            dict(zip(r["options"], r["probs"])), r["label"], r["options"], close_price) if has else None
    atomic_write_table(run_dir / "forecasts.parquet", pa.Table.from_pylist(rows), schema.FORECASTS)
    notebook = []
    for agent, every in (("sharp", 1), ("reader", 2), ("skim", 3)):
        for i, r in enumerate(notebook_rows()):
            if i % every == 0:
                notebook.append({**r, "agent": agent})
    atomic_write_table(run_dir / "notebook.parquet", pa.Table.from_pylist(notebook), schema.NOTEBOOK)
    return run_dir
