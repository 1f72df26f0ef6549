"""The audit (docs/design.md §8): the maths of its parts, PASS on the sample world, and FAIL on each
planted leak (old label-dependent schedules, a moved closedTime, an index serving future articles,
a leaky description, a nondeterministic agent, structure that predicts the answer)."""

from __future__ import annotations

import json
import math
import random
import shutil
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from forecast_env.eval.audit.run import FAIL, INCONCLUSIVE, PASS, AuditSettings, run_audit
from forecast_env.eval.audit.schedule import BuiltSchedule, ScheduleInputs
from forecast_env.eval.audit.structure import fit_conditional_logit, run_probe
from forecast_env.eval.audit.text import detect, question_cues

FAST = AuditSettings(probes=60, probe_days=3, queries_per_day=6, replay_events=2, draws=500)


# ---------------------------------------------------------------------------------------------
# the conditional logit and the probe (synthetic tables)
# ---------------------------------------------------------------------------------------------


def _choice_data(n_groups: int, beta: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    xs, ys, gs = [], [], []
    for g in range(n_groups):
        k = int(rng.integers(2, 5))
        x = rng.standard_normal((k, len(beta)))
        u = x @ beta
        p = np.exp(u - u.max())
        p /= p.sum()
        y = np.zeros(k)
        y[rng.choice(k, p=p)] = 1
        xs.append(x)
        ys.append(y)
        gs.append(np.full(k, g))
    return np.vstack(xs), np.concatenate(ys), np.concatenate(gs)


def test_conditional_logit_recovers_known_weights() -> None:
    beta = np.array([1.5, -0.8, 0.0])
    x, y, g = _choice_data(4000, beta, seed=1)
    model = fit_conditional_logit(x, y, g, l2=1e-3)
    # back to raw-feature units
    est = model.beta / model.scale
    assert model.converged
    np.testing.assert_allclose(est, beta, atol=0.12)
    p = model.predict(x, g)
    sums = np.add.reduceat(p, np.flatnonzero(np.r_[True, g[1:] != g[:-1]]))
    np.testing.assert_allclose(sums, 1.0)


def test_conditional_logit_is_deterministic_and_ignores_group_constants() -> None:
    beta = np.array([1.0, 0.5])
    x, y, g = _choice_data(500, beta, seed=2)
    a = fit_conditional_logit(x, y, g)
    b = fit_conditional_logit(x.copy(), y.copy(), g.copy())
    np.testing.assert_array_equal(a.beta, b.beta)
    # a feature constant within each group carries nothing: its weight stays at the prior (0)
    const = np.repeat(np.random.default_rng(3).standard_normal(g.max() + 1), np.bincount(g))
    c = fit_conditional_logit(np.c_[x, const], y, g)
    assert abs(c.beta[-1]) < 1e-6


def _table(n_events: int, leak: bool, seed: int = 0) -> pl.DataFrame:
    """Binary events over several dates; with `leak`, steps_total tells the answer (as the old
    close-derived schedule did: early Yes resolutions get fewer dates)."""
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_events):
        yes = rng.random() < 0.4
        total = (int(rng.integers(1, 3)) if yes else int(rng.integers(3, 6))) if leak else int(rng.integers(1, 6))
        start = date(2026, 3, 1) + timedelta(days=int(rng.integers(0, 60)))
        for s in range(1, total + 1):
            for pos, o in enumerate(["Yes", "No"]):
                rows.append({"event_id": f"e{e:04d}", "split": "train" if e % 2 == 0 else "eval",
                             "forecast_date": start + timedelta(days=7 * s), "step": s, "steps_total": total,
                             "k": 2, "position": pos, "option": o, "question": f"Will thing {e % 7} happen by June?",
                             "description_chars": 500 + int(rng.integers(0, 100)),
                             "days_to_deadline": 7 * (5 - s) + 3, "y": int((o == "Yes") == yes)})
    return pl.DataFrame(rows)


def test_probe_fails_when_structure_predicts_the_answer() -> None:
    out = run_probe(_table(500, leak=True))
    assert out["verdict"] == FAIL, out["reason"]
    assert out["ci_high"] < -0.01
    assert any("steps_total" in w["feature"] for w in out["top_probe_weights"][:2])


def test_probe_passes_without_structure_and_is_inconclusive_when_small() -> None:
    out = run_probe(_table(600, leak=False))
    assert out["verdict"] == PASS, out["reason"]
    assert out["half_width"] <= 0.02
    small = run_probe(_table(40, leak=False))
    assert small["verdict"] == INCONCLUSIVE, small["reason"]


def test_inclusion_bias_compares_label_shares_per_filter() -> None:
    from forecast_env.eval.audit.structure import inclusion_bias, yes_share_gap_is_large

    yn = ["Yes", "No"]
    kept = [{"type": "binary", "options": yn, "label": "Yes" if i < 3 else "No"} for i in range(12)]
    kept.append({"type": "multi", "options": ["A", "B", "C", "D"], "label": "B"})
    excluded = [{"stage": "signal", "reason": "nearly_certain", "type": "binary", "options": yn, "label": "Yes"}
                for _ in range(12)]
    excluded.append({"stage": "parse", "reason": "bad_json", "type": None, "options": [], "label": None})
    rows = {r["group"]: r for r in inclusion_bias(kept, excluded)}
    assert rows["kept"]["binary_yes_share"] == 0.25 and rows["kept"]["multi_chance"] == 0.25
    sig = rows["excluded signal/nearly_certain"]
    assert sig["binary_yes_share"] == 1.0 and sig["yes_share_minus_kept"] == 0.75
    assert yes_share_gap_is_large(sig, rows["kept"]["binary"])
    assert rows["excluded parse/bad_json"]["with_label"] == 0
    assert not yes_share_gap_is_large(rows["excluded parse/bad_json"], rows["kept"]["binary"])


# ---------------------------------------------------------------------------------------------
# the text detector: precision and recall on planted sentences
# ---------------------------------------------------------------------------------------------

SHOWN = date(2026, 4, 10)
BINARY = question_cues("Will Maria Lopez win the Springfield mayoral election?", ["Yes", "No"], "binary",
                       date(2026, 3, 1))
MULTI = question_cues("Who will win the 2026 Springfield mayoral election?", ["Maria Lopez", "Tom Reed", "Other"],
                      "multi", date(2026, 3, 1))
RATES = question_cues("Will the Central Bank cut interest rates in April?", ["Yes", "No"], "binary",
                      date(2026, 3, 1))

AWARD = question_cues("Which film will win Best Picture at the 2026 Golden Lantern Awards?",
                      ["Night over the River", "The Silver Meadow"], "multi", date(2026, 3, 1))
LIGHTS = question_cues("Northern Lights Film Awards 2026: Best Picture Winner", ["The Silver Meadow", "Night"],
                       "multi", date(2026, 3, 1))
DEAL = question_cues("Will Wexford Robotics complete its acquisition of Bluepeak Logistics by May 3?", ["Yes", "No"],
                     "binary", date(2026, 3, 1))

LEAKY = [
    ("On April 20, 2026, Maria Lopez won the Springfield mayoral election by a wide margin.", BINARY),
    ("Update (2026-04-22): Tom Reed was declared the winner after the count finished.", MULTI),
    ("Maria Lopez won the Springfield mayoral election, officials said.", MULTI),
    ("Tom Reed was elected mayor of Springfield.", MULTI),
    ("The Central Bank cut interest rates by half a point.", RATES),
    ("Last updated: April 15, 2026.", None),
    ("Voters went to the polls on April 14 and turnout was high.", None),
    ("The council approved the budget on April 18.", None),
    ("Tom Reed has won the Springfield election.", MULTI),
    ("The Silver Meadow won Best Picture at the Golden Lantern Awards.", AWARD),
    ("The Silver Meadow won Best Picture at the Northern Lights Film Awards on Sunday.", LIGHTS),
    ("Wexford Robotics completed its acquisition of Bluepeak Logistics.", DEAL),
]
CLEAN = [
    ("The vote is scheduled for April 20, 2026.", MULTI),
    ("Maria Lopez is expected to win the Springfield mayoral election.", MULTI),
    ("This market will resolve to Yes if Maria Lopez wins the election held on April 20, 2026.", BINARY),
    ("Maria Lopez won the endorsement of the Springfield teachers union.", MULTI),
    ("Tom Reed won the primary in 2025.", MULTI),
    ("The Central Bank cut interest rates last year, on March 3, 2025.", RATES),
    ("Polls close on April 20 at 8 p.m.", MULTI),
    ("The hearing was postponed to April 22.", None),
    ("Lopez leads Reed by five points ahead of the April 20 vote.", MULTI),
    ("The Central Bank could cut interest rates in April.", RATES),
    ("The election was held on April 2, 2026.", MULTI),
    ("Officials said on May 2 the count would take a week.", None),
    ("Tom Reed won the debate on Tuesday, according to a snap poll.", MULTI),
    # a resolution names the question's own event: another contest or award is a precursor
    ("Maria Lopez won the mayoral election in neighbouring Shelbyville.", MULTI),
    ("Night over the River took the best film award at the guild awards this month.", AWARD),
    ("The Silver Meadow won the best film award at a major festival this month.", LIGHTS),
    ("Wexford Robotics secured financing to fund the acquisition, people familiar said.", DEAL),
    ("Officials have targeted a date before May 4.", None),
    ("Kickoff for the final on April 19 was confirmed for the evening local time.", None),
    ("Officials confirmed the timetable this week, with the key date fixed for April 28.", None),
]


@pytest.mark.parametrize(("text", "cues"), LEAKY)
def test_detector_flags_post_date_facts_and_resolutions(text: str, cues) -> None:
    assert detect(text, SHOWN, cues), text


@pytest.mark.parametrize(("text", "cues"), CLEAN)
def test_detector_does_not_count_previews_schedules_or_older_facts(text: str, cues) -> None:
    assert detect(text, SHOWN, cues) == [], text


def test_detector_reads_dates_without_a_year_from_the_text_s_own_day() -> None:
    # written on 2025-12-30, "January 3" is 2026-01-03; shown on 2026-01-10 it is in the past
    assert detect("The court ruled on January 3.", date(2026, 1, 10), None, written_on=date(2025, 12, 30)) == []
    assert detect("The court ruled on January 3.", date(2026, 1, 1), None, written_on=date(2025, 12, 30))


# ---------------------------------------------------------------------------------------------
# the sample world: PASS, and FAIL on each planted leak
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def audited_micro(micro_events: Path, micro_world: Path):
    return run_audit(micro_events, "eval", settings=FAST, polymarket=micro_world / "polymarket")


@pytest.fixture()
def ws_copy(micro_events: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "ws"
    shutil.copytree(micro_events, dst, ignore=shutil.ignore_patterns("runs", "audit", "exports"))
    return dst


def test_audit_passes_on_the_sample_world(audited_micro, tmp_path: Path) -> None:
    rep = audited_micro
    verdicts = {c.name: c.verdict for c in rep.checks}
    assert [c.name for c in rep.checks] == ["schedule", "structure", "retrieval", "text", "replay", "siblings"]
    for name in ("schedule", "retrieval", "text", "replay", "siblings"):
        assert verdicts[name] == PASS, (name, rep.check(name).reason, rep.check(name).examples[:3])
    # micro has a handful of events: the probe cannot tell, and says so
    assert verdicts["structure"] in (PASS, INCONCLUSIVE)
    assert rep.verdict != FAIL
    paths = rep.write(tmp_path / "audit")
    data = json.loads(paths["json"].read_text())
    assert data["verdict"] == rep.verdict and len(data["checks"]) == 6
    assert "inclusion_bias" in data["checks"][1]["figures"]
    assert "Verdict" in paths["md"].read_text()


def _old_builder(inp: ScheduleInputs) -> BuiltSchedule:
    """The schedule as built before the fix: grid from the ACTUAL close, dates before the realized
    option's leg started dropped, only the started legs offered (label-dependent)."""
    last = inp.close_day - timedelta(days=2)
    grid = [inp.start_day + timedelta(days=i) for i in range(max(0, (last - inp.start_day).days + 1))]
    label_start = inp.option_start.get(inp.label, inp.start_day)
    eligible = [d for d in grid if d >= label_start]
    if not eligible:
        return BuiltSchedule(0, (), ())
    t_q = min(5, max(1, math.ceil(len(eligible) / 7)))
    dates, offered = [], []
    for idx in np.array_split(np.arange(len(eligible)), t_q):
        d = eligible[int(idx[0])]
        dates.append(d)
        offered.append(tuple(o for o in inp.options if inp.option_start.get(o, inp.start_day) <= d))
    return BuiltSchedule(t_q, tuple(dates), tuple(offered))


def test_schedule_check_fails_on_the_old_label_dependent_schedule(ws_copy: Path) -> None:
    # a bundle whose losing legs were added later, as Polymarket does
    legs = pl.read_parquet(ws_copy / "events" / "legs.parquet")
    events = pl.read_parquet(ws_copy / "events" / "events.parquet").filter(pl.col("split") == "eval")
    ev = events.sort("event_id").row(0, named=True)
    losers = [o for o in ev["options"] if o != ev["label"]]
    late = ev["start_day"] + timedelta(days=6)
    legs = legs.with_columns(pl.when((pl.col("event_id") == ev["event_id"]) & pl.col("option").is_in(losers[:1]))
                             .then(pl.lit(late)).otherwise(pl.col("start_day")).alias("start_day"))
    legs.write_parquet(ws_copy / "events" / "legs.parquet")
    res = run_audit(ws_copy, "eval", checks=["schedule"], settings=FAST, schedule_builder=_old_builder).check("schedule")
    assert res.verdict == FAIL
    assert res.figures["label_changes_schedule"] >= 1, res.figures
    assert res.figures["close_moves_schedule"] >= 1, res.figures
    assert "label_changes_schedule" in res.reason


def test_schedule_check_fails_on_a_stored_old_schedule(ws_copy: Path) -> None:
    """The stored table of an old build: a late leg missing from the first date, which lies before t_all."""
    path = ws_copy / "events" / "schedule.parquet"
    sched = pl.read_parquet(path)
    events = pl.read_parquet(ws_copy / "events" / "events.parquet").filter(pl.col("split") == "eval")
    ev = events.sort("event_id").row(0, named=True)
    first = sched.filter((pl.col("event_id") == ev["event_id"]) & (pl.col("step") == 1)).row(0, named=True)
    early = first["forecast_date"] - timedelta(days=30)
    fixed = sched.with_columns(
        pl.when((pl.col("event_id") == ev["event_id"]) & (pl.col("step") == 1)).then(pl.lit(early))
        .otherwise(pl.col("forecast_date")).alias("forecast_date"),
        pl.when((pl.col("event_id") == ev["event_id"]) & (pl.col("step") == 1))
        .then(pl.lit([ev["label"]], dtype=pl.List(pl.String))).otherwise(pl.col("options")).alias("options"))
    fixed.write_parquet(path)
    res = run_audit(ws_copy, "eval", checks=["schedule"], settings=FAST).check("schedule")
    assert res.verdict == FAIL
    assert res.figures["all_options"] >= 1 and res.figures["before_t_all"] >= 1, res.figures
    assert res.figures["stored_vs_rebuilt"] >= 1


def test_schedule_check_fails_when_closed_time_moved_before_the_dates(ws_copy: Path) -> None:
    path = ws_copy / "events" / "events.parquet"
    events = pl.read_parquet(path)
    sched = pl.read_parquet(ws_copy / "events" / "schedule.parquet")
    eid = sorted(events.filter(pl.col("split") == "eval")["event_id"].to_list())[0]
    last = sched.filter(pl.col("event_id") == eid)["forecast_date"].max()
    events = events.with_columns(pl.when(pl.col("event_id") == eid).then(pl.lit(last + timedelta(days=1)))
                                 .otherwise(pl.col("close_day")).alias("close_day"))
    events.write_parquet(path)
    res = run_audit(ws_copy, "eval", checks=["schedule"], settings=FAST).check("schedule")
    assert res.verdict == FAIL
    assert res.figures["after_close"] >= 1, res.figures


def test_retrieval_check_fails_when_the_index_serves_articles_early(ws_copy: Path) -> None:
    """An index whose days are 3 days early (e.g. built on publication days while the store uses
    visibility days): it serves articles before the store says they existed."""
    days_path = ws_copy / "index" / "rows" / "days.npy"
    days = np.load(days_path)
    np.save(days_path, days - 3)
    res = run_audit(ws_copy, "eval", checks=["retrieval"], settings=FAST).check("retrieval")
    assert res.verdict == FAIL
    assert res.figures["future_hits"] > 0, res.figures
    assert res.figures["prefix_bm25"] > 0


def test_text_check_fails_on_a_leaky_description(ws_copy: Path) -> None:
    path = ws_copy / "events" / "events.parquet"
    events = pl.read_parquet(path)
    rows = []
    for r in events.iter_rows(named=True):
        later = (r["close_day"] + timedelta(days=1)).strftime("%B %d, %Y").replace(" 0", " ")
        r["description"] = (f"The result was confirmed on {later}: {r['label']} was declared the winner.\n\n"
                            + (r["description"] or ""))
        rows.append(r)
    pl.DataFrame(rows, schema=events.schema).write_parquet(path)
    res = run_audit(ws_copy, "eval", checks=["text"], settings=FAST).check("text")
    assert res.verdict == FAIL
    assert res.figures["flagged_share"] > 0.9
    assert any(ex["source"] == "description" for ex in res.examples)


class _CoinAgent:
    """Forecasts from an unseeded random source: its episodes differ from run to run."""

    name = "coin"

    def __init__(self) -> None:
        self._rng = random.SystemRandom()

    def reset(self, *, seed: int | None = None) -> None:
        return None

    def act(self, observation: str, info: dict) -> dict:
        opts = list(info.get("options") or [])
        w = [self._rng.random() + 0.01 for _ in opts]
        return {"tool": "forecast", "args": {"probabilities": {o: x / sum(w) for o, x in zip(opts, w)}}}


def test_replay_check_fails_on_a_nondeterministic_agent(micro_events: Path) -> None:
    res = run_audit(micro_events, "eval", checks=["replay"], settings=FAST,
                    agent_factory=lambda i: _CoinAgent()).check("replay")
    assert res.verdict == FAIL
    assert res.examples and "/forecasts" in res.examples[0]["first_difference"]


def test_replay_check_replays_on_another_thread_count_and_simd_level(micro_events: Path, monkeypatch) -> None:
    """Check 5's third run is a child process under another OMP thread count and FAISS SIMD level; it
    PASSes on identical logs and FAILs, naming that machine, when the child's logs differ."""
    import faiss

    from forecast_env.eval.audit import replay as audit_replay

    res = run_audit(micro_events, "eval", checks=["replay"], settings=FAST).check("replay")
    assert res.verdict == PASS, res.reason
    env = res.figures["other_machine"]
    assert env["FAISS_SIMD_LEVEL"] != faiss.SIMDConfig.get_level_name()
    assert int(env["OMP_NUM_THREADS"]) != faiss.omp_get_max_threads()
    real = audit_replay.replay_elsewhere

    def perturbed(*a, **kw):
        logs = real(*a, **kw)
        logs[-1]["forecasts"][0]["probabilities"] = {"tampered": 1.0}
        return logs

    monkeypatch.setattr(audit_replay, "replay_elsewhere", perturbed)
    res = run_audit(micro_events, "eval", checks=["replay"], settings=FAST).check("replay")
    assert res.verdict == FAIL and "under {'OMP_NUM_THREADS'" in res.examples[0]["first_difference"]


def test_cli_exit_codes(micro_events: Path, tmp_path: Path, capsys) -> None:
    from forecast_env.cli.main import main

    code = main(["audit", "--workspace", str(micro_events), "--checks", "schedule,replay", "--out",
                 str(tmp_path / "a"), "--no-progress", "--audit-set", "replay_events=1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "audit PASS" in out and (tmp_path / "a" / "audit.md").exists()
    assert main(["audit", "--workspace", str(tmp_path / "nowhere")]) == 2
    assert main(["audit", "--workspace", str(micro_events), "--audit-set", "bogus=1"]) == 2
    assert main(["audit", "--workspace", str(micro_events), "--checks", "nonsense"]) == 2


# ---------------------------------------------------------------------------------------------
# the blind-structure probe has power against the old schedule (benchmark: a large world)
# ---------------------------------------------------------------------------------------------


def _power_world(n: int, seed: int = 0) -> list[tuple[str, str, ScheduleInputs]]:
    """`n` events with Polymarket's mechanics: 60% binary deadline questions ("Will X happen by
    <end>?", 40% Yes) whose market closes the day after the event happens when it resolves Yes
    (the outcome known that day), else at the scheduled end; 40% bundles of 3-6 candidates, half of
    them with a losing leg added 3 days to half the span after the start. Half train, half eval."""
    from forecast_env.config import load_config

    cfg = dict(load_config("events")["schedule"])
    rng = np.random.default_rng(seed)
    out = []
    for e in range(n):
        split = "train" if e % 2 == 0 else "eval"
        start = (date(2025, 6, 1) if split == "train" else date(2026, 3, 1)) + timedelta(days=int(rng.integers(0, 30)))
        span = int(rng.integers(14, 60))
        end = start + timedelta(days=span)
        if rng.random() < 0.6:
            opts: tuple[str, ...] = ("Yes", "No")
            yes = bool(rng.random() < 0.4)
            label = "Yes" if yes else "No"
            happened = start + timedelta(days=int(rng.integers(3, span + 1)))
            close, known = (min(happened + timedelta(days=1), end), happened) if yes else (end, None)
            starts = {o: start for o in opts}
            question = f"Will thing {e} happen by {end:%B %d}?"
        else:
            k = int(rng.integers(3, 7))
            opts = tuple(f"Candidate {chr(65 + i)}{e}" for i in range(k))
            label = opts[int(rng.integers(0, k))]
            starts = {o: start for o in opts}
            if rng.random() < 0.5:
                late = [o for o in opts if o != label][int(rng.integers(0, k - 1))]
                starts[late] = start + timedelta(days=int(rng.integers(3, max(4, span // 2))))
            close, known = end, None
            question = f"Who will win contest {e}?"
        out.append((split, question, ScheduleInputs(f"e{e:05d}", opts, label, start, max(starts.values()), end,
                                                    close, known, starts, {}, {}, cfg)))
    return out


def _probe_rows(world: list[tuple[str, str, ScheduleInputs]], builder) -> pl.DataFrame:
    from forecast_env.eval.audit.structure import ROW_COLUMNS

    cols: dict[str, list] = {c: [] for c in ROW_COLUMNS}
    for split, question, inp in world:
        b = builder(inp)
        for i, (d, offered) in enumerate(zip(b.dates, b.options)):
            for pos, o in enumerate(offered):
                values = (inp.event_id, split, d, i + 1, b.steps_total, len(offered), pos, o, question, 400,
                          (inp.end_day - d).days, int(o == inp.label))
                for c, v in zip(ROW_COLUMNS, values):
                    cols[c].append(v)
    return pl.DataFrame(cols)


@pytest.mark.benchmark
def test_probe_has_power_against_the_old_schedule_on_a_large_world() -> None:
    """1,200 events (600 eval): the old label-dependent schedule FAILs the probe, the project's
    schedule (`envs/events/schedule.py` through the audit's rebuild) does not."""
    from forecast_env.eval.audit.schedule import build_with_project

    world = _power_world(1200)
    old = run_probe(_probe_rows(world, _old_builder))
    new = run_probe(_probe_rows(world, build_with_project))
    print(f"\nold schedule: {old['verdict']} {old['difference']:+.4f} [{old['ci_low']:+.4f}, {old['ci_high']:+.4f}]"
          f"; project schedule: {new['verdict']} {new['difference']:+.4f} [{new['ci_low']:+.4f}, {new['ci_high']:+.4f}]")
    assert old["verdict"] == FAIL, old["reason"]
    assert new["verdict"] != FAIL, new["reason"]
