"""ForecastBench rounds as events (envs/events/forecastbench_import.py): items, schedule, splits, duplicates, leaks.

The real subset in tests/fixtures/forecastbench (CC BY-SA 4.0, README.md there) holds the rounds 2026-03-01 and
2026-03-15: per market source 3 questions of both rounds resolved by the later set and 1 unresolved, per dataset
source 3 questions of the first round.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from forecast_env.cli.main import main
from forecast_env.envs.events.build import build_events, import_forecastbench
from forecast_env.envs.events.forecastbench import MARKET_SOURCES, read_rounds
from forecast_env.envs.events.forecastbench_import import parse_rounds, read_items, safe_id
from forecast_env.envs.events.tables import load_events
from forecast_env.errors import EventsError
from tests.support.audit_data import FAST

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "forecastbench"
ROUNDS = "2026-03-01..2026-03-15"
#: the fixture's two import rounds: 56 market rows (14 questions x 2 rounds, 4 of them never resolved) and
#: 42 resolved dataset rows (15 questions x their resolved horizons)
N_MARKET_ROWS, N_PENDING_ROWS, N_DATASET_ROWS = 28, 4, 42
#: the corpus screen off where a test is about something else (it is on in the shared `imported` workspace)
NO_SCREEN = {"screen": {"enabled": False}}


@pytest.fixture()
def ws(micro_events: Path, tmp_path: Path) -> Path:
    out = tmp_path / "ws"
    shutil.copytree(micro_events, out, ignore=shutil.ignore_patterns("runs", "exports", "audit"))
    return out


@pytest.fixture(scope="module")
def imported(micro_events: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture rounds imported once into a copy of the micro workspace; tests that change it copy it."""
    out = tmp_path_factory.mktemp("fb") / "ws"
    shutil.copytree(micro_events, out, ignore=shutil.ignore_patterns("runs", "exports", "audit"))
    import_forecastbench(FIXTURE, out, rounds=ROUNDS, progress=False)
    return out


def _fb(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("event_id").str.starts_with("fb-"))


def test_items_and_events_of_the_fixture_rounds(imported: Path) -> None:
    items = read_items(imported)
    assert items["status"].value_counts().sort("status").rows() == [
        ("pending", N_PENDING_ROWS), ("scored", N_MARKET_ROWS - N_PENDING_ROWS + N_DATASET_ROWS)]
    tables = load_events(imported)
    events = tables.events.filter(pl.col("source") == "forecastbench")
    scored = items.filter(pl.col("status") == "scored")
    # every scored item is one event on one date: its round's freeze day, before the due date
    assert scored["event_id"].n_unique() == scored.height == events.height
    sched = _fb(tables.schedule)
    assert sched.height == events.height and set(sched["steps_total"].to_list()) == {1}
    joined = scored.join(sched, on="event_id")
    assert (joined["forecast_date"] == joined["forecast_date_right"]).all()
    assert (joined["freeze_date"] < joined["due_date"]).all()
    # the label is the resolved value: 1 -> Yes, 0 -> No
    lab = scored.join(events.select("event_id", "label"), on="event_id")
    assert ((lab["resolved_to"] == 1.0) == (lab["label"] == "Yes")).all()
    assert set(lab["resolved_to"].to_list()) == {0.0, 1.0}
    # dataset questions: placeholders filled with the round's due date and the item's resolution date
    ds = events.filter(pl.col("tags").list.contains("dataset"))
    assert ds.height == N_DATASET_ROWS and not ds["question"].str.contains(r"\{").any()
    one = scored.filter(pl.col("kind") == "dataset").join(ds, on="event_id").row(0, named=True)
    if "{resolution_date}" in _raw_question(one["source"], one["id"]):
        assert str(one["resolution_date"]) in one["question"]
    # the unresolved questions are excluded as pending, their items say so
    excl = _fb(tables.excluded)
    assert excl.group_by("stage", "reason").len().rows() == [("label", "unresolved", N_PENDING_ROWS)]
    # the Polymarket build's events are untouched
    assert tables.events.filter(pl.col("source") == "polymarket").height == load_events_count(imported)
    # the cross-question exposure pass saw every question of the workspace: these and the Polymarket ones
    rule = json.loads((imported / "events" / "report.json").read_text())["forecastbench"]["schedule_rules"]
    assert rule["cross_question"]["visible_questions"] == tables.events.height


def _raw_question(source: str, qid: str) -> str:
    doc = json.loads((FIXTURE / "datasets/question_sets/2026-03-01-llm.json").read_text())
    return next(q["question"] for q in doc["questions"] if q["source"] == source and q["id"] == qid)


def load_events_count(ws: Path) -> int:
    return json.loads((ws / "events" / "report.json").read_text())["polymarket"]["kept"]


def test_market_belief_is_the_freeze_value_and_hidden_from_the_text(imported: Path) -> None:
    items = read_items(imported).filter((pl.col("kind") == "market") & (pl.col("status") == "scored"))
    tables = load_events(imported)
    beliefs = _fb(tables.beliefs).filter(pl.col("option") == "Yes")
    got = items.join(beliefs, left_on=["event_id", "forecast_date"], right_on=["event_id", "day"])
    assert got.height == items.height
    assert got["belief"].to_list() == pytest.approx(got["freeze_value"].to_list())
    # the market's price is not written into what the agent reads (shown only in the show_market ablation)
    events = tables.events.filter(pl.col("tags").list.contains("market"))
    for row in events.join(items, on="event_id").iter_rows(named=True):
        assert f"{row['freeze_value']}" not in row["description"]


def test_every_date_is_before_the_outcome(imported: Path) -> None:
    """No offered date lies on or after the day before the question resolved (the close cut)."""
    tables = load_events(imported)
    sched = _fb(tables.schedule).join(tables.events.select("event_id", "close_day"), on="event_id")
    assert sched.height
    assert sched.select((pl.col("forecast_date") < pl.col("close_day") - pl.duration(days=1)).all()).item()


def test_reimport_is_byte_identical_and_replaces(imported: Path, tmp_path: Path) -> None:
    shutil.copytree(imported, tmp_path / "ws")
    imported = tmp_path / "ws"
    path = imported / "events" / "forecastbench.parquet"
    first = path.read_bytes()
    events_first = (imported / "events" / "events.parquet").read_bytes()
    import_forecastbench(FIXTURE, imported, rounds=ROUNDS, progress=False)
    assert path.read_bytes() == first
    assert (imported / "events" / "events.parquet").read_bytes() == events_first
    # a narrower re-import replaces every ForecastBench event
    import_forecastbench(FIXTURE, imported, rounds="2026-03-15", progress=False)
    events = load_events(imported).events.filter(pl.col("source") == "forecastbench")
    assert events.height and events["event_id"].str.starts_with("fb-2026-03-15-").all()


def test_splits_by_due_date_keep_eval_clean(ws: Path) -> None:
    """A question first seen in a train round has no eval event; a train event resolves before train ends."""
    cfg = {"forecastbench": {"splits": {"train": {"start": "2025-01-01", "end": "2026-03-10"},
                                        "eval": {"start": "2026-03-10", "end": "2027-01-01"}}}}
    import_forecastbench(FIXTURE, ws, rounds=ROUNDS, config={**cfg, **NO_SCREEN}, progress=False)
    tables = load_events(ws)
    events = tables.events.filter(pl.col("source") == "forecastbench")
    excl = _fb(tables.excluded)
    crossing = excl.filter(pl.col("reason") == "crossing_split")
    # every 2026-03-15 market event: its question appeared on 2026-03-01 (train)
    assert not events.filter(pl.col("split") == "eval").height
    assert crossing.filter(pl.col("event_id").str.starts_with("fb-2026-03-15-")).height == N_MARKET_ROWS // 2 - 2
    train = events.filter(pl.col("split") == "train")
    assert train.height and (train["close_day"] < date(2026, 3, 10)).all()
    # the long-horizon items of the train round resolve after train's end: excluded, not silently kept
    assert crossing.filter(pl.col("detail").str.contains("on or after the end of train")).height > 0


def test_outside_the_splits(ws: Path) -> None:
    cfg = {"forecastbench": {"splits": {"train": {"start": "2020-01-01", "end": "2021-01-01"},
                                        "eval": {"start": "2021-01-01", "end": "2022-01-01"}}}}
    report = import_forecastbench(FIXTURE, ws, rounds=ROUNDS, config={**cfg, **NO_SCREEN}, progress=False)
    assert report["kept"] == 0
    reasons = {r["stage"]: r["reasons"] for r in report["stages"] if r["excluded"]}
    assert reasons["split"] == {"outside_splits": N_MARKET_ROWS - N_PENDING_ROWS + N_DATASET_ROWS}


def _fixture_copy(tmp_path: Path) -> Path:
    root = tmp_path / "fb"
    shutil.copytree(FIXTURE / "datasets", root / "datasets")
    return root


def _edit(root: Path, name: str, fn: Callable[[dict], None]) -> None:
    path = root / "datasets" / name
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _polymarket_question(root: Path) -> str:
    doc = json.loads((root / "datasets/question_sets/2026-03-01-llm.json").read_text())
    return next(q["id"] for q in doc["questions"] if q["source"] == "polymarket")


def _set_id(root: Path, old: str, new: str) -> None:
    for due in ("2026-03-01", "2026-03-15"):
        def swap(doc: dict, key: str) -> None:
            for rec in doc[key]:
                if rec["id"] == old:
                    rec["id"] = new
        _edit(root, f"question_sets/{due}-llm.json", lambda d: swap(d, "questions"))
        _edit(root, f"resolution_sets/{due}_resolution_set.json", lambda d: swap(d, "resolutions"))


def _a_pm_condition(ws: Path) -> tuple[str, str]:
    legs = load_events(ws).legs.filter(pl.col("event_id").str.starts_with("pm-") & pl.col("condition_id").is_not_null())
    eid, cond = legs.select("event_id", "condition_id").row(0)
    return str(eid), str(cond)


def test_polymarket_duplicate_keeps_the_polymarket_event_in_either_order(
        ws: Path, micro_world: Path, tmp_path: Path) -> None:
    root = _fixture_copy(tmp_path)
    pm_event, condition = _a_pm_condition(ws)
    fb_id = _polymarket_question(root)
    _set_id(root, fb_id, condition.upper())  # ids compare case-insensitively (hex)
    pm_before = load_events(ws).events.filter(pl.col("source") == "polymarket").height
    # order 1: Polymarket built first, then the ForecastBench import
    import_forecastbench(root, ws, rounds=ROUNDS, config=NO_SCREEN, progress=False)
    items = read_items(ws)
    dup = items.filter(pl.col("status") == "duplicate")
    assert dup.height == 2 and dup["detail"].str.contains(pm_event).all()
    tables = load_events(ws)
    assert not tables.events.filter(pl.col("event_id").is_in(dup["event_id"].to_list())).height
    assert _fb(tables.excluded).filter(pl.col("reason") == "duplicate").height == 2
    assert tables.events.filter(pl.col("source") == "polymarket").height == pm_before
    # the market's own price on the due date comes from the Polymarket event's beliefs, where it has that day
    beliefs = tables.beliefs.filter(pl.col("event_id") == pm_event)
    days = set(beliefs["day"].to_list())
    for row in dup.iter_rows(named=True):
        assert (row["market_value_due"] is not None) == (row["due_date"] in days)

    # order 2: the ForecastBench import first (no Polymarket event yet), then the Polymarket build drops it
    ws2 = tmp_path / "ws2"
    shutil.copytree(ws, ws2)
    for name in ("events", "legs", "beliefs", "trades_daily", "schedule", "screen", "excluded"):
        path = ws2 / "events" / f"{name}.parquet"
        frame = pl.read_parquet(path)
        frame.filter(~pl.col("event_id").str.starts_with("pm-")).write_parquet(path)
    (ws2 / "events" / "forecastbench.parquet").unlink()
    import_forecastbench(root, ws2, rounds=ROUNDS, config=NO_SCREEN, progress=False)
    assert read_items(ws2).filter(pl.col("status") == "duplicate").height == 0
    build_events(micro_world / "polymarket", ws2, progress=False)
    items2 = read_items(ws2)
    assert items2.filter(pl.col("status") == "duplicate")["event_id"].sort().to_list() == \
        dup["event_id"].sort().to_list()
    events2 = load_events(ws2).events
    assert not events2.filter(pl.col("event_id").is_in(dup["event_id"].to_list())).height
    assert events2.filter(pl.col("source") == "polymarket").height == pm_before


def test_labels_that_cannot_be_scored(ws: Path, tmp_path: Path) -> None:
    root = _fixture_copy(tmp_path)
    doc = json.loads((root / "datasets/resolution_sets/2026-03-15_resolution_set.json").read_text())
    resolved = [r for r in doc["resolutions"] if r["resolved"]]
    half, clash = resolved[0]["id"], resolved[1]["id"]

    def fractional(d: dict) -> None:
        for r in d["resolutions"]:
            if r["id"] == half:
                r["resolved_to"] = 0.5

    def disagree(d: dict) -> None:  # 2026-03-01 says the opposite of 2026-03-15
        for r in d["resolutions"]:
            if r["id"] == clash:
                r["resolved"], r["resolved_to"] = True, 1.0 - resolved[1]["resolved_to"]

    for due in ("2026-03-01", "2026-03-15"):
        _edit(root, f"resolution_sets/{due}_resolution_set.json", fractional)
    _edit(root, "resolution_sets/2026-03-01_resolution_set.json", disagree)
    import_forecastbench(root, ws, rounds=ROUNDS, config=NO_SCREEN, progress=False)
    excl = _fb(load_events(ws).excluded)
    by_reason = {r: set(g["event_id"].to_list()) for (r,), g in excl.group_by("reason")}
    assert by_reason["not_binary"] and all(e.endswith(f"-{safe_id(half)}") for e in by_reason["not_binary"])
    assert by_reason["conflicting"] and all(e.endswith(f"-{safe_id(clash)}") for e in by_reason["conflicting"])


def test_bad_files_are_counted_never_a_traceback(ws: Path, tmp_path: Path) -> None:
    root = _fixture_copy(tmp_path)
    (root / "datasets/resolution_sets/2026-03-15_resolution_set.json").write_text('{"forecast_due_date": "2026-03-1')
    (root / "datasets/question_sets/2026-03-01-llm.json").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n")
    report = import_forecastbench(root, ws, rounds=ROUNDS, config=NO_SCREEN, progress=False)
    problems = report["file_problems"]
    assert any("2026-03-15_resolution_set.json: not valid JSON" in p for p in problems)
    assert any("2026-03-01-llm.json: Git LFS pointer" in p for p in problems)
    items = read_items(ws)
    # the 2026-03-01 rows have no question text: recorded, not imported
    assert set(items.filter(pl.col("due_date") == date(2026, 3, 1))["status"].to_list()) == {"no_question"}


def test_rounds_spec_and_errors(ws: Path, tmp_path: Path) -> None:
    assert parse_rounds("2026-03-01..2026-03-15") == ("2026-03-01", "2026-03-15")
    assert parse_rounds("2026-03-01") == ("2026-03-01", "2026-03-01")
    assert parse_rounds("..2026-03-15") == (None, "2026-03-15")
    assert parse_rounds(None) == (None, None)
    for bad in ("2026-3-1", "2026-03-15..2026-03-01", "..", "2026-02-30"):
        with pytest.raises(EventsError):
            parse_rounds(bad)
    with pytest.raises(EventsError, match="no datasets/ folder"):
        import_forecastbench(tmp_path, ws, progress=False)
    with pytest.raises(EventsError, match="no ForecastBench round"):
        import_forecastbench(FIXTURE, ws, rounds="2030-01-01..", progress=False)
    assert safe_id("ANFCI") == "ANFCI" and len(safe_id("0x" + "a" * 64)) == 16
    assert safe_id("ECB/EXR/D.USD") != "ECB/EXR/D.USD"  # never a path separator in an event id


def test_cli_import_and_exclusive_sources(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["events", "import", "--forecastbench", str(FIXTURE), "--rounds", ROUNDS, "--workspace", str(ws),
                 "--no-progress", "--set", "screen.enabled=false"])
    out = capsys.readouterr().out
    assert code == 0
    assert "rounds: 2 (2026-03-01 .. 2026-03-15)" in out and f"dataset scored {N_DATASET_ROWS}" in out
    assert main(["events", "import", "--forecastbench", str(FIXTURE), "--questions", "q.jsonl",
                 "--workspace", str(ws)]) == 2
    assert "not allowed with argument --forecastbench" in capsys.readouterr().err
    assert main(["events", "import", "--questions", "q.jsonl", "--rounds", ROUNDS, "--workspace", str(ws)]) == 2


def test_screen_insufficient_is_recorded_not_excluding(imported: Path) -> None:
    tables = load_events(imported)
    events = tables.events.filter(pl.col("source") == "forecastbench")
    verdicts = set(events["screen_verdict"].to_list())
    assert "Insufficient" in verdicts  # kept: data series are rarely news
    assert not _fb(tables.excluded).filter(pl.col("stage") == "screen").height


def test_market_sources_are_forecastbench_s() -> None:
    rounds = read_rounds(FIXTURE, "2026-03-01", "2026-03-15")
    assert {q.source for r in rounds for q in r.questions if q.kind == "market"} == MARKET_SOURCES


def test_an_imported_round_plays_end_to_end(imported: Path, tmp_path: Path) -> None:
    """env (runner), report (ForecastBench's rules), export and the audit take the imported events unchanged."""
    from forecast_env.eval.audit.run import run_audit
    from forecast_env.eval.report.render import build_report
    from forecast_env.eval.runs.export import export
    from forecast_env.eval.runs.runner import run_benchmark

    fb_ids = load_events(imported).events.filter(pl.col("source") == "forecastbench")["event_id"].to_list()
    run = run_benchmark(imported, agents=["uniform", "base_rate"], split="eval", event_ids=fb_ids, workers=1,
                        progress=False, run_id="fb")
    forecasts = pl.read_parquet(run / "forecasts.parquet")
    assert set(forecasts["event_id"].to_list()) == set(fb_ids) and not forecasts["missing"].any()
    paths = build_report(run, plots=False)
    fb = json.loads(Path(paths["json"]).read_text())["forecastbench"]
    rows = {r["model"]: r for r in fb["rows"]}
    assert rows["uniform"]["n_dataset"] == N_DATASET_ROWS
    assert rows["uniform"]["n_market"] == N_MARKET_ROWS - N_PENDING_ROWS
    assert rows["uniform"]["brier_market"] == pytest.approx(0.25)  # p(Yes) = 0.5 on every item
    assert rows["uniform"]["index_overall"] == pytest.approx(50.0)
    # the freeze-value forecaster by hand: (freeze value - outcome)^2 over the scored market items
    items = read_items(imported).filter((pl.col("status") == "scored") & (pl.col("kind") == "market"))
    by_hand = items.select(((pl.col("freeze_value").clip(0, 1) - pl.col("resolved_to")) ** 2).mean()).item()
    assert rows["Freeze value"]["brier_market"] == pytest.approx(by_hand)
    assert "ForecastBench (its leaderboard's rules)" in Path(paths["markdown"]).read_text()
    out = export(imported, "eval", tmp_path / "export", run_id="fb", formats=("jsonl",), progress=False)
    prompts = (tmp_path / "export" / "prompts" / "prompts.jsonl").read_text()
    assert all(eid in prompts for eid in fb_ids[:5]) and out
    audit = run_audit(imported, "eval", checks=["schedule", "text", "siblings"], settings=FAST)
    assert audit.verdict != "FAIL", audit.to_markdown()[:2000]


def test_report_cli_takes_supplied_fixed_effects(imported: Path, tmp_path: Path) -> None:
    """ForecastBench's own question effects, from a file: the section says so and uses them."""
    from forecast_env.eval.runs.runner import run_benchmark

    fb_ids = load_events(imported).events.filter(pl.col("source") == "forecastbench")["event_id"].to_list()
    run = run_benchmark(imported, agents=["uniform"], split="eval", event_ids=fb_ids[:20], workers=1,
                        progress=False, run_id="fe")
    items = read_items(imported).filter(pl.col("status") == "scored")
    fe = tmp_path / "fe.csv"
    items.select("question_pk", question_fixed_effect=pl.lit(0.01)).write_csv(fe)
    out = tmp_path / "report"
    out.mkdir()
    assert main(["report", "--run", str(run), "--out", str(out), "--no-compare",
                 "--forecastbench-fixed-effects", str(fe)]) == 0
    section = json.loads((out / "report.json").read_text())["forecastbench"]
    assert section["fixed_effects"].startswith("supplied")
    assert main(["report", "--run", str(run), "--out", str(out), "--no-compare",
                 "--forecastbench-fixed-effects", str(tmp_path / "missing.csv")]) != 0


def test_home_split_and_missing_rows_use_every_round(ws: Path, tmp_path: Path) -> None:
    """Importing one round gives its questions the split and label that every round of the folder gives them;
    a question missing from its round's resolution set is not an event of that round."""
    cfg = {"forecastbench": {"splits": {"train": {"start": "2025-01-01", "end": "2026-03-10"},
                                        "eval": {"start": "2026-03-10", "end": "2027-01-01"}}}, **NO_SCREEN}
    import_forecastbench(FIXTURE, ws, rounds="2026-03-15", config=cfg, progress=False)
    excl = _fb(load_events(ws).excluded)
    # its market questions first appeared on 2026-03-01 (train), a round not imported
    assert excl.filter(pl.col("reason") == "crossing_split").height == N_MARKET_ROWS // 2 - 2
    root = _fixture_copy(tmp_path)
    doc = json.loads((root / "datasets/resolution_sets/2026-03-15_resolution_set.json").read_text())
    dropped = next(r for r in doc["resolutions"] if r["resolved"])
    _edit(root, "resolution_sets/2026-03-15_resolution_set.json",
          lambda d: d.update(resolutions=[r for r in d["resolutions"] if r["id"] != dropped["id"]]))
    import_forecastbench(root, ws, rounds=ROUNDS, config=NO_SCREEN, progress=False)
    excl = _fb(load_events(ws).excluded)
    row = excl.filter(pl.col("event_id").str.ends_with(f"-{safe_id(dropped['id'])}")
                      & pl.col("event_id").str.starts_with("fb-2026-03-15-"))
    assert row.select("stage", "reason").rows() == [("label", "no_resolution_row")]
    # the same question's 2026-03-01 event stays, labelled from the other round
    kept = load_events(ws).events.filter(pl.col("event_id").str.ends_with(f"-{safe_id(dropped['id'])}"))
    assert kept["event_id"].str.starts_with("fb-2026-03-01-").all() and kept.height == 1
    # a round with no resolution set at all: its questions are pending
    (root / "datasets/resolution_sets/2026-03-15_resolution_set.json").unlink()
    import_forecastbench(root, ws, rounds=ROUNDS, config=NO_SCREEN, progress=False)
    excl = _fb(load_events(ws).excluded).filter(pl.col("event_id").str.starts_with("fb-2026-03-15-"))
    assert set(excl["reason"].to_list()) == {"unresolved"} and excl.height == N_MARKET_ROWS // 2


def test_same_question_across_rounds_is_not_another_question() -> None:
    """The exposure pass skips a ForecastBench question's own copies (other rounds, other horizons): a round's
    copy restates the same background (seen on the full data: metaculus 40849 "exposed" by itself)."""
    from forecast_env.envs.events.exposure import same_question

    assert same_question("fb-2026-03-01-metaculus-40849", "fb-2026-03-15-metaculus-40849")
    assert same_question("fb-2026-03-01-fred-ANFCI-h7", "fb-2026-03-15-fred-ANFCI-h30")
    assert not same_question("fb-2026-03-01-metaculus-40849", "fb-2026-03-01-metaculus-42472")
    assert not same_question("fb-2026-03-01-fred-ANFCI-h7", "fb-2026-03-01-fred-DGS10-h7")
    assert not same_question("pm-1", "pm-2") and same_question("pm-1", "pm-1")
    assert not same_question("fb-2026-03-01-polymarket-abc", "q-polymarket-abc")
