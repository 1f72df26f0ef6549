"""Cross-question exposure (docs/design.md §4): the rule and check 6 on real question texts, and their speed.

    python -m benchmarks.envs.exposure speed [--questions 10000]
    python -m benchmarks.envs.exposure real --data DIR [--split design|report|all] [--samples OUT.md]
    python -m benchmarks.envs.exposure check6 --preset siblings_large [--seeds 0 1] [--draws 400] [--out DIR]

`speed`: 10,000 synthetic questions open in one window (bundles over a shared pool of names, Yes/No
follow-ups naming them, with and without cues, descriptions of a few hundred words), on one core:
prints the time of the build's rule (`find_exposures`) and of check 6's detector and count, and the
number of candidate pairs (questions that name another's option or key term).

`real`: ForecastBench question sets (CC BY-SA 4.0, github.com/forecastingresearch/forecastbench-datasets;
DIR holds its `question_sets/*.json`, read from the path given, never copied into this repository). The
market questions (Polymarket, Manifold, Metaculus, INFER), each visible from its open day to its close day
- 2; Polymarket's "Will X win <contest>?" legs that share a contest are also grouped back into one bundle
(options = the names), as the events build would see a negRisk bundle. Questions are split by the question
set they first appear in: `design` (sets up to 2026-01-18, what the cue list may be tuned on) and `report`
(later sets, reported on). Prints how many questions expose another, how many forecast dates the rule cuts
(schedules built with `envs/events/schedule.py` from each question's window), and writes `--samples` (outside the
repository): 50 detections and 50 non-detections among pairs that name the same option or key term, for a
hand check.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path

from forecast_env.envs.events.exposure import QuestionText, find_exposures
from forecast_env.envs.events.schedule import build_schedule

DESIGN_LAST_SET = "2026-01-18"
MARKET_SOURCES = ("polymarket", "manifold", "metaculus", "infer")
_WIN = re.compile(r"^\s*Will (?:the )?(?P<name>.+?) win (?P<tail>.+?)\??\s*$")


# ---------------------------------------------------------------------------------------------
# real texts
# ---------------------------------------------------------------------------------------------


def _day(value: object) -> date | None:
    try:
        return date.fromisoformat(str(value)[:10])
    except (TypeError, ValueError):
        return None


def load_forecastbench(root: Path) -> dict[str, dict]:
    """Unique market questions of every question set under `root` ({key: question + `first_set`})."""
    files = sorted((root / "question_sets").glob("*-llm.json")) or sorted(root.glob("**/question_sets/*-llm.json"))
    if not files:
        raise SystemExit(f"{root}: no question_sets/*-llm.json (ForecastBench's datasets folder)")
    out: dict[str, dict] = {}
    for f in files:
        data = json.loads(f.read_text())
        set_day = str(data.get("forecast_due_date") or f.name[:10])
        for q in data.get("questions", []):
            if q.get("source") not in MARKET_SOURCES:
                continue
            key = f"{q['source']}:{q['id']}"
            if key not in out:
                out[key] = {**q, "first_set": set_day}
    return out


def real_questions(raw: dict[str, dict], split: str) -> list[QuestionText]:
    """The visible questions of one split, with the Polymarket "Will X win <contest>?" legs regrouped."""
    qs: list[QuestionText] = []
    bundles: dict[str, list[tuple[str, date, date]]] = defaultdict(list)
    for key, q in raw.items():
        part = "design" if q["first_set"] <= DESIGN_LAST_SET else "report"
        if split != "all" and part != split:
            continue
        first = _day(q.get("market_info_open_datetime")) or _day(q.get("freeze_datetime"))
        close = _day(q.get("market_info_close_datetime"))
        if first is None or close is None or close <= first:
            continue
        last = close - timedelta(days=2)
        desc = str(q.get("background") or "")
        crit = q.get("market_info_resolution_criteria")
        if crit and crit != "N/A":
            desc += "\n\n" + str(crit)
        text = str(q.get("question") or "").strip()
        qs.append(QuestionText(key, text, desc, ("Yes", "No"), first, last, first))
        m = _WIN.match(text)
        if q["source"] == "polymarket" and m:
            bundles[m.group("tail").lower()].append((m.group("name"), first, last))
    for tail, legs in bundles.items():
        names = sorted({n for n, _, _ in legs})
        if len(names) >= 2:
            qs.append(QuestionText(f"bundle:{tail}", f"Who will win {tail}?", "", tuple(names),
                                   min(f for _, f, _ in legs), max(x for _, _, x in legs)))
    return qs


def dates_cut(qs: list[QuestionText], exposures: dict) -> tuple[int, int, int]:
    """(scheduled dates of the exposed questions, dates the rule cuts, questions left with none)."""
    by_id = {q.event_id: q for q in qs}
    total = cut = emptied = 0
    for eid, e in exposures.items():
        q = by_id[eid]
        end = q.last_day + timedelta(days=2)
        uncut = build_schedule(q.first_day, None, end, list(q.options), {}, {}, None)
        kept = build_schedule(q.first_day, None, end, list(q.options), {}, {}, e.day)
        total += len(uncut.steps)
        cut += len(uncut.steps) - len(kept.steps)
        emptied += not kept.steps
    return total, cut, emptied


def shared_name_pairs(qs: list[QuestionText], exposures: dict, limit: int, rng: random.Random) -> list[tuple]:
    """Pairs (q', q) where q' names one of q's options (bundles) or every key word of q (Yes/No), and the
    rule found no exposure: the population of possible misses."""
    from forecast_env.envs.events.exposure import ExposureReport, _Index, _segments, event_settled, stem  # noqa: F401

    index = _Index(qs, ExposureReport())
    out = []
    for qp in qs:
        for where, sents in _segments(qp, qp.last_day):
            for sent in sents:
                for _i, _j, k in index.option_matches(sent):
                    if k.event_id != qp.event_id and k.event_id not in exposures:
                        out.append((qp.event_id, k.event_id, where, " ".join(sent)[:300]))
                if where == "options":
                    continue
                have = {stem(w) for w in sent}
                for s in have:
                    for ek in index.event_by_stem.get(s, ()):
                        if ek.event_id != qp.event_id and ek.event_id not in exposures and ek.stems <= have:
                            out.append((qp.event_id, ek.event_id, where, " ".join(sent)[:300]))
    uniq = list({(a, b): (a, b, w, s) for a, b, w, s in out}.values())
    rng.shuffle(uniq)
    return uniq[:limit], len(uniq)


def run_real(args: argparse.Namespace) -> int:
    raw = load_forecastbench(Path(args.data))
    qs = real_questions(raw, args.split)
    t0 = time.perf_counter()
    rep = find_exposures(qs)
    secs = time.perf_counter() - t0
    n_bundles = sum(1 for q in qs if q.event_id.startswith("bundle:"))
    exposers = {e.by for e in rep.exposures.values()}
    total, cut, emptied = dates_cut(qs, rep.exposures)
    by_rule = defaultdict(int)
    for e in rep.exposures.values():
        by_rule[e.rule] += 1
    print(f"split {args.split}: {len(qs)} visible questions ({n_bundles} regrouped bundles), "
          f"{rep.candidate_pairs} candidate pairs, {len(rep.exposures)} questions exposed "
          f"({dict(by_rule)}) by {len(exposers)} questions; the rule cuts {cut} of {total} scheduled dates of the "
          f"exposed questions ({emptied} left with none); skipped {rep.skipped_counts()}; {secs:.2f} s")
    if args.samples:
        rng = random.Random(0)
        by_id = {q.event_id: q for q in qs}
        det = sorted(rep.exposures.values(), key=lambda e: e.event_id)
        rng.shuffle(det)
        misses, n_pop = shared_name_pairs(qs, rep.exposures, 50, rng)
        lines = [f"# exposure samples, split {args.split} (ForecastBench texts, CC BY-SA 4.0; not for the repository)",
                 "", f"## 50 of {len(det)} detections", ""]
        for i, e in enumerate(det[:50], 1):
            lines += [f"{i}. EXPOSED {e.event_id}: {by_id[e.event_id].question} | options {list(by_id[e.event_id].options)[:6]}",
                      f"   BY {e.by} ({e.rule}/{e.where}, {e.day}): {by_id[e.by].question}", f"   WORDS {e.words}", ""]
        lines += [f"## 50 of {n_pop} non-detections among pairs that share an option name or every key word", ""]
        for i, (a, b, where, sent) in enumerate(misses, 1):
            lines += [f"{i}. Q {b}: {by_id[b].question} | options {list(by_id[b].options)[:6]}",
                      f"   Q' {a} ({where}): {sent}", ""]
        Path(args.samples).write_text("\n".join(lines), encoding="utf-8")
        print(f"samples -> {args.samples}")
    return 0


# ---------------------------------------------------------------------------------------------
# speed
# ---------------------------------------------------------------------------------------------

_FIRST = ["Ana", "Alan", "Al", "Bea", "Cy", "Dana", "Emil", "Greta", "Hugo", "Iris", "Jon", "Kai", "Lena", "Milo",
          "Nia", "Omar", "Pia", "Raul", "Sara", "Tomas", "Uma", "Vera", "Wes", "Xena", "Yuri", "Zoe", "José", "Zoë"]
_LAST = ["Moreau", "Brandt", "Kim", "Novak", "Reyes", "Okafor", "Lindqvist", "Pérez", "Ito", "Haddad", "Silva",
         "Mbeki", "Rossi", "Nakamura", "Berg", "Costa", "Dubois", "Fischer", "Garcia", "Hale"]
_FILLER = ("The market resolves according to the official announcement and a consensus of credible reporting. "
           "Delays beyond the stated date do not change the resolution unless the result is formally suspended. ")


def synthetic_questions(n: int, seed: int = 0) -> list[QuestionText]:
    """`n` questions open in one 60-day window: a fifth are bundles over a shared pool of 560 names, the
    rest Yes/No questions, a quarter of which name a bundle's option (some with a settled cue)."""
    rng = random.Random(seed)
    names = [f"{a} {b}" for a in _FIRST for b in _LAST]
    d0 = date(2026, 3, 1)
    qs: list[QuestionText] = []
    n_b = n // 5
    for i in range(n_b):
        opts = rng.sample(names, rng.randint(3, 6))
        qs.append(QuestionText(f"b{i}", f"Who will win contest {i} of the Veltria cup?", _FILLER * 3, tuple(opts),
                               d0, d0 + timedelta(days=60)))
    for i in range(n - n_b):
        r = rng.random()
        if r < 0.05:
            title = f"After {rng.choice(names)}'s win in contest {rng.randrange(n_b)}, will the index rise by {i}?"
        elif r < 0.25:
            title = f"Will {rng.choice(names)} attend summit {i}?"
        else:
            title = f"Will the council of district {i} approve budget measure {i % 97} by April {1 + i % 28}?"
        qs.append(QuestionText(f"y{i}", title, f"<p>{_FILLER * 4}</p>", ("Yes", "No"), d0 + timedelta(days=i % 30),
                               d0 + timedelta(days=60)))
    return qs


def run_speed(args: argparse.Namespace) -> int:
    import polars as pl

    from forecast_env.eval.audit.siblings import direct_count, find_mentions, visible_questions

    qs = synthetic_questions(args.questions)
    t0 = time.perf_counter()
    rep = find_exposures(qs)
    t_rule = time.perf_counter() - t0
    # check 6's detector and count over the same questions, three scheduled dates each
    ev = pl.DataFrame({"event_id": [q.event_id for q in qs], "question": [q.question for q in qs],
                       "description": [q.description for q in qs], "options": [list(q.options) for q in qs],
                       "start_day": [q.first_day for q in qs], "t_all": [q.first_day for q in qs],
                       "end_day": [q.last_day + timedelta(days=2) for q in qs],
                       "label": [q.options[0] for q in qs], "split": ["eval"] * len(qs), "type": ["x"] * len(qs)})
    sched = pl.DataFrame({"event_id": [q.event_id for q in qs for _ in range(3)],
                          "forecast_date": [q.first_day + timedelta(days=7 * s) for q in qs for s in range(3)]})
    t0 = time.perf_counter()
    vis = visible_questions(ev)
    mentions, statements, _ = find_mentions(vis, ev)
    count = direct_count(ev, sched, vis, mentions, statements)
    t_check = time.perf_counter() - t0
    print(f"{len(qs)} questions open in one window: rule {t_rule:.2f} s ({rep.candidate_pairs} candidate pairs, "
          f"{len(rep.exposures)} exposed); check 6 detector + count {t_check:.2f} s ({len(mentions)} mentions, "
          f"{len(statements)} statements, {count['exposed_dates']} of {count['scheduled_dates']} dates exposed)")
    return 0 if t_rule + t_check < 60 else 1


def run_check6(args: argparse.Namespace) -> int:
    """Check 6 on a planted sample world, the rule off and on, both splits: one line per run."""
    import tempfile

    from forecast_env.envs.events.build import build_events
    from forecast_env.eval.audit.run import AuditSettings, run_audit
    from forecast_env.synth import synthesize

    root = Path(args.out or tempfile.mkdtemp(prefix="check6-"))
    for seed in args.seeds:
        world = root / f"{args.preset}-{seed}"
        synthesize(world, preset=args.preset, seed=seed, progress=False)
        for name, flag in (("off", False), ("on", True)):
            ws = root / f"ws-{args.preset}-{seed}-{name}"
            build_events(world / "polymarket", ws, progress=False,
                         config={"screen": {"enabled": False},
                                 "schedule": {"require_index": False, "cross_question": flag}})
            for split in ("eval", "train"):
                c = run_audit(ws, split, checks=["siblings"], settings=AuditSettings(draws=args.draws)).check("siblings")
                f, pr = c.figures, c.figures["probe"]
                print(f"{args.preset} seed {seed} rule {name} {split}: {c.verdict}; count {f['count_exposed_dates']}/"
                      f"{f['count_scheduled_dates']} ({f['count_share']:.1%}); probe {pr['verdict']} "
                      f"{pr.get('difference', 0.0):+.4f} [{pr.get('ci_low', 0.0):+.4f}, {pr.get('ci_high', 0.0):+.4f}] "
                      f"(fit on {f['fit_split']} {pr['train_events']} events, compared on {split} "
                      f"{pr['eval_events']})", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--questions", type=int, default=10_000)
    r = sub.add_parser("real")
    r.add_argument("--data", required=True, help="ForecastBench datasets folder (with question_sets/)")
    r.add_argument("--split", default="report", choices=["design", "report", "all"])
    r.add_argument("--samples", default=None, help="write 50 detections and 50 non-detections here (Markdown)")
    c = sub.add_parser("check6")
    c.add_argument("--preset", default="siblings_large")
    c.add_argument("--seeds", type=int, nargs="+", default=[0])
    c.add_argument("--draws", type=int, default=400)
    c.add_argument("--out", default=None, help="where the worlds and builds go (default: a temporary folder)")
    args = ap.parse_args(argv)
    return {"speed": run_speed, "real": run_real, "check6": run_check6}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
