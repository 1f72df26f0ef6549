"""The optional `forecastbench` stage of `forecast-env build --recipe`: ForecastBench rounds from a local copy of
forecastbench-datasets imported as events (`envs.events.build.import_forecastbench`), off by default, validated with
the one config validator, run right after the events stage in the same workspace with the same events config,
skipped when its record matches (the events record, repo, rounds, every round file's size and mtime: the import
reads every round for the labels), rerun when the rounds, a round file or the events change; its dry-run row; the release freezes the items table that scores its events.

The build runs the `micro` sample world served in the real layouts (synth/serve.py), as test_build_recipe.py does,
with the real ForecastBench subset in tests/fixtures/forecastbench (rounds 2026-03-01 and 2026-03-15 fall in the
default ForecastBench eval split), the corpus screen off: the whole build, the stage included, in about 10 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
import yaml

from forecast_env.cli.main import main
from forecast_env.errors import ConfigError, RunError
from forecast_env.eval.runs.release import FORECASTBENCH_ITEMS, load_release, score_run, verify_workspace
from forecast_env.recipe import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    STAGES,
    load_recipe,
    plan_recipe,
    read_record,
    render_outcome,
    render_plan,
    run_recipe,
)
from forecast_env.store import sha256_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "forecastbench"
ROUNDS = "2026-03-01..2026-03-15"
#: the fixture's round files of ROUNDS, as the stage lists them
FILES = ["datasets/question_sets/2026-03-01-llm.json", "datasets/resolution_sets/2026-03-01_resolution_set.json",
         "datasets/question_sets/2026-03-15-llm.json", "datasets/resolution_sets/2026-03-15_resolution_set.json"]
#: every round file of the fixture (the stage's record holds them all: the labels come from every round)
EVERY = sorted([*FILES, "datasets/resolution_sets/2025-08-31_resolution_set.json",
                *(f"datasets/{kind}" for d in ("2026-07-19", "2026-08-02")
                  for kind in (f"question_sets/{d}-llm.json", f"resolution_sets/{d}_resolution_set.json"))],
               key=lambda f: (Path(f).name[:10], f))
#: the candidate events of ROUNDS: 14 market questions x 2 rounds + 42 dataset items
#: (tests/envs/events/test_forecastbench_import.py)
EVENTS_IN = 14 * 2 + 42
SPLITS = {"train": {"start": "2026-03-01", "end": "2026-04-15"}, "eval": {"start": "2026-04-15", "end": "2026-06-01"}}
#: the stages a build with the forecastbench stage on runs (the questions stage is off)
BUILT = [s for s in STAGES if s != "questions"]


def _recipe(tmp_path: Path, **keys: object) -> Path:
    path = tmp_path / "fb.yaml"
    path.write_text(yaml.safe_dump({"name": "fb", "news": {"cc_news": "2026-03..2026-05"}, "splits": SPLITS, **keys}))
    return path


def _on(**block: object) -> dict:
    return {"enabled": True, "repo": str(FIXTURE), "rounds": ROUNDS, **block}


# -- the recipe keys ---------------------------------------------------------------------------------


def test_the_stage_is_off_by_default_and_comes_right_after_events(tmp_path: Path) -> None:
    for name in ("dojo", "small"):
        recipe = load_recipe(name)
        assert not recipe.forecastbench_enabled and recipe.forecastbench_repo is None
        assert recipe.get("forecastbench") == {"enabled": False, "repo": None, "rounds": None}
        assert "forecastbench" not in [s["stage"] for s in plan_recipe(recipe, tmp_path / "ws", offline=True).stages]
    assert STAGES.index("forecastbench") == STAGES.index("events") + 1 < STAGES.index("questions")


def test_an_enabled_block_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = load_recipe(_recipe(tmp_path, forecastbench=_on()))
    assert recipe.forecastbench_enabled and recipe.forecastbench_repo == FIXTURE
    assert recipe.get("forecastbench.rounds") == ROUNDS
    # a relative repo is the current folder's; one round may be a bare YAML date; --set recipe.forecastbench.*
    monkeypatch.chdir(FIXTURE.parent)
    path = tmp_path / "one.yaml"
    path.write_text(f"name: one\nnews: {{cc_news: 2026-03}}\nsplits: {json.dumps(SPLITS)}\n"
                    "forecastbench: {enabled: true, repo: forecastbench, rounds: 2026-03-15}\n")
    one = load_recipe(path, ["recipe.forecastbench.rounds=2026-03-01.."])
    assert one.forecastbench_repo == FIXTURE and one.get("forecastbench.rounds") == "2026-03-01.."
    assert load_recipe(path).get("forecastbench.rounds") == "2026-03-15"


@pytest.mark.parametrize("block, overrides, message", [
    ({"enabled": True}, [], "fb.yaml: forecastbench.repo is missing: the forecastbench stage reads a local copy"),
    (_on(repo="/nowhere/fb"), [], "recipe key 'forecastbench.repo' = '/nowhere/fb' does not exist"),
    (_on(repo=str(FIXTURE / "datasets")), [], "forecastbench.repo' = '" + str(FIXTURE / "datasets")
     + "' has no datasets/ folder"),
    (_on(repo=3), [], "recipe key 'forecastbench.repo' must be str or null, got 3"),
    (_on(rounds="2026-03"), [], "recipe key 'forecastbench.rounds' = '2026-03' is not A..B, A.., ..B or A"),
    (_on(rounds="2026-03-15..2026-03-01"), [], "the first not after the last"),
    (_on(rounds="2027-01-01.."), [], "'forecastbench.rounds' = '2027-01-01..' selects no round of "
     f"{FIXTURE / 'datasets'} (due dates there: 2025-08-31..2026-08-02)"),
    ({"enabeld": True}, [], "unknown recipe key 'forecastbench.enabeld'; allowed here: enabled, repo, rounds"),
    ({}, ["recipe.forecastbench.enabled=true"], "fb.yaml: forecastbench.repo is missing"),  # as --set enables it
])
def test_bad_forecastbench_keys_name_the_key(tmp_path: Path, block: dict, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_recipe(_recipe(tmp_path, forecastbench=block), overrides)


def test_a_missing_repo_is_bad_input_before_any_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _recipe(tmp_path, forecastbench={"enabled": True, "rounds": ROUNDS})
    assert main(["build", "--recipe", str(path), "--workspace", str(tmp_path / "ws")]) == EXIT_BAD_INPUT
    assert "forecastbench.repo is missing" in capsys.readouterr().err
    assert main(["build", "--recipe", str(path), "--workspace", str(tmp_path / "ws"), "--dry-run", "--offline"]) == 2
    assert not (tmp_path / "ws").exists()


# -- the dry run ---------------------------------------------------------------------------------------


def test_the_dry_run_lists_the_rounds_files_and_candidate_events(tmp_path: Path) -> None:
    plan = plan_recipe(load_recipe(_recipe(tmp_path, forecastbench=_on())), tmp_path / "ws", offline=True)
    names = [s["stage"] for s in plan.stages]
    assert names.index("forecastbench") == names.index("events") + 1
    row = plan.stages[names.index("forecastbench")]
    assert row["rounds"] == ["2026-03-01", "2026-03-15"] and row["files"] == len(FILES)
    assert row["bytes"] == sum((FIXTURE / f).stat().st_size for f in FILES)
    assert row["events"] == EVENTS_IN and row["file_problems"] == [] and row["model_tokens"] == 0
    assert row["rates"] == [] and row["core_hours"] > 0
    text = render_plan(plan)
    line = next(ln for ln in text.splitlines() if ln.startswith("  forecastbench "))
    assert f"2 round(s) 2026-03-01..2026-03-15, 4 files ({row['bytes'] / 1e3:,.1f} kB) under {FIXTURE / 'datasets'}" \
        in line and f"{EVENTS_IN} candidate events (" in line
    assert "the labels and home splits read every round's files (9, " in line
    assert round(plan.core_hours) == int(re.search(r"total: ([\d,]+) core-hours", text).group(1).replace(",", ""))
    assert not (tmp_path / "ws").exists()
    # every round: 2025-08-31 has a resolution set but no question set (its rows have no question: no event),
    # 2026-07-19 and 08-02 count their market questions and dataset items
    every = plan_recipe(load_recipe(_recipe(tmp_path, forecastbench=_on(rounds=None))), tmp_path / "ws", offline=True)
    row = next(s for s in every.stages if s["stage"] == "forecastbench")
    assert row["rounds"] == ["2025-08-31", "2026-03-01", "2026-03-15", "2026-07-19", "2026-08-02"]
    assert row["files"] == 9 and row["events"] > EVENTS_IN
    assert row["file_problems"] == ["question_sets/2025-08-31-llm.json: file missing"]
    assert "1 file problem(s): question_sets/2025-08-31-llm.json: file missing" in row["basis"]


# -- the build -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(micro_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The micro world served, a recipe with the forecastbench stage on (its Polymarket cache outside the workspace,
    so that a copied workspace keeps its records) and its whole build."""
    from forecast_env.synth.serve import WorldServer

    root = tmp_path_factory.mktemp("forecastbench_recipe")
    truth = json.loads((micro_world / "truth.json").read_text())
    with WorldServer(micro_world) as server:
        months = [f"{f[-7:-3]}-{f[-2:]}" for f in server.months()]
        recipe = {
            "name": "fb-micro",
            "polymarket": {"cache": str(root / "polymarket")},
            "news": {"cc_news": f"{months[0]}..{months[-1]}", "workers": 1},
            "splits": {s: {"start": truth["splits"][s][0], "end": truth["splits"][s][1]} for s in ("train", "eval")},
            "audit": {"split": "eval"},
            "release": {"split": "eval", "out": "release"},
            "forecastbench": _on(),
            # the corpus screen off (the import's screen is tested in tests/envs/events/test_forecastbench_import.py):
            # the events and forecastbench stages in 0.2 s each instead of 0.5 s and 3 s
            "events": {"screen": {"enabled": False}},
        }
        path = root / "fb.yaml"
        path.write_text(yaml.safe_dump(recipe))
        # the static embedding backend: the index stage at a fraction of the default encoder's CPU
        sets = [*server.client_settings(), "events.polymarket.requests_per_second=0", "embed.backend=static"]
        said: list[str] = []
        outcome = run_recipe(load_recipe(path, sets), root / "ws", progress=False, say=said.append)
        yield {"root": root, "ws": root / "ws", "recipe": path, "sets": sets, "outcome": outcome, "said": said}


def _copy(built: dict, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(built["ws"], ws)
    return ws


def _said(lines: list[str], stage: str) -> list[str]:
    return [ln for ln in lines if ln.startswith(f"[{stage}] ")]


@pytest.mark.slow
def test_the_stage_imports_the_rounds_after_the_events(built: dict) -> None:
    ws, outcome, said = built["ws"], built["outcome"], built["said"]
    assert outcome.exit_status == EXIT_OK, said
    assert outcome.ran == BUILT and [s.stage for s in outcome.stages] == list(STAGES)
    assert {s.stage: s.status for s in outcome.stages}["questions"] == "disabled"
    assert said.index("[events] running") < said.index("[forecastbench] running") < said.index("[audit] running")
    rec = read_record(ws, "forecastbench")
    assert rec["inputs"]["repo"] == str(FIXTURE) and rec["inputs"]["rounds"] == ROUNDS
    assert [f[0] for f in rec["inputs"]["files"]] == EVERY
    assert [f[1] for f in rec["inputs"]["files"]] == [(FIXTURE / f).stat().st_size for f in EVERY]
    assert rec["inputs"]["events"] == read_record(ws, "events")["fingerprint"]
    assert rec["result"]["rounds"] == ["2026-03-01", "2026-03-15"] and rec["result"]["file_problems"] == 0
    # the dry run's count is what the import considered
    plan = plan_recipe(load_recipe(built["recipe"], built["sets"]), built["root"] / "plan_ws", offline=True)
    assert rec["result"]["events_in"] == EVENTS_IN == next(s for s in plan.stages
                                                           if s["stage"] == "forecastbench")["events"]
    # into the recipe's workspace, beside the Polymarket events, with the items table
    events = pl.read_parquet(ws / "events" / "events.parquet")
    fb = events.filter(pl.col("source") == "forecastbench")
    assert fb.height == rec["result"]["kept"] > 0 and fb["event_id"].str.starts_with("fb-").all()
    assert events.filter(pl.col("source") == "polymarket").height == read_record(ws, "events")["result"]["kept"]
    items = pl.read_parquet(ws / FORECASTBENCH_ITEMS)
    assert set(items["due_date"].cast(pl.Utf8)) == {"2026-03-01", "2026-03-15"}
    # the audit and the release came after it: they compare its record, and the release freezes its items table
    assert read_record(ws, "audit")["inputs"]["forecastbench"] == rec["fingerprint"]
    assert read_record(ws, "release")["inputs"]["forecastbench"] == rec["fingerprint"]
    release = load_release(ws / "release")
    eval_fb = sorted(fb.filter(pl.col("split") == "eval")["event_id"].to_list())
    assert eval_fb and release.data["forecastbench"] == {"event_ids": eval_fb,
                                                         "items_sha256": sha256_file(ws / FORECASTBENCH_ITEMS)}
    assert set(eval_fb) <= set(release.event_ids)
    table = render_outcome(outcome)
    assert re.search(r"^forecastbench +done ", table, re.M) and re.search(r"^questions +disabled ", table, re.M)


@pytest.mark.slow
def test_a_second_run_skips_it_and_changed_rounds_or_events_rerun_it(built: dict, tmp_path: Path) -> None:
    ws = _copy(built, tmp_path)
    said: list[str] = []
    recipe = load_recipe(built["recipe"], built["sets"])
    again = run_recipe(recipe, ws, progress=False, say=said.append)
    assert again.exit_status == EXIT_OK and again.ran == [], said
    assert _said(said, "forecastbench") == [f"[forecastbench] already done ({ws / 'build' / 'forecastbench.json'}); "
                                            "skipped"]

    # other rounds: the stage imports again (a re-import replaces every earlier ForecastBench event); the audit
    # and the release would follow (stopped before them here: test_off_the_stage_is_disabled runs them again)
    said.clear()
    one = load_recipe(built["recipe"], [*built["sets"], "recipe.forecastbench.rounds=2026-03-01"])
    changed = run_recipe(one, ws, progress=False, say=said.append, stop_after="forecastbench")
    assert changed.exit_status == EXIT_OK and changed.ran == ["forecastbench"], said
    assert {s.stage: s.status for s in changed.stages}["audit"] == "not_run"
    rec = read_record(ws, "forecastbench")
    assert rec["inputs"]["rounds"] == "2026-03-01" and [f[0] for f in rec["inputs"]["files"]] == EVERY
    items = pl.read_parquet(ws / FORECASTBENCH_ITEMS)
    assert set(items["due_date"].cast(pl.Utf8)) == {"2026-03-01"}
    fb = pl.read_parquet(ws / "events" / "events.parquet").filter(pl.col("source") == "forecastbench")
    assert fb.height == rec["result"]["kept"] and not fb["event_id"].str.starts_with("fb-2026-03-15-").any()

    # another repo, or a touched round file (a new snapshot of the repository, say), reruns it: a later round's too
    # (its resolution set may resolve this round's market questions); so does a rebuilt events stage
    src = tmp_path / "repo"
    shutil.copytree(FIXTURE, src)
    moved = load_recipe(built["recipe"], [*built["sets"], "recipe.forecastbench.rounds=2026-03-01",
                                          f"recipe.forecastbench.repo={src}"])
    assert run_recipe(moved, ws, progress=False, say=lambda s: None, stop_after="forecastbench").ran == \
        ["forecastbench"]
    assert run_recipe(moved, ws, progress=False, say=lambda s: None, stop_after="forecastbench").ran == []
    later_round = src / "datasets/resolution_sets/2026-03-15_resolution_set.json"
    later = later_round.stat().st_mtime_ns + 10**9
    os.utime(later_round, ns=(later, later))
    assert run_recipe(moved, ws, progress=False, say=lambda s: None, stop_after="forecastbench").ran == \
        ["forecastbench"]
    said.clear()
    events = load_recipe(built["recipe"], [*built["sets"], "recipe.forecastbench.rounds=2026-03-01",
                                           f"recipe.forecastbench.repo={src}", "events.filters.min_span_days=9"])
    rebuilt = run_recipe(events, ws, progress=False, say=said.append, stop_after="forecastbench")
    assert rebuilt.ran == ["events", "forecastbench"], said
    assert read_record(ws, "forecastbench")["inputs"]["events"] == read_record(ws, "events")["fingerprint"]


@pytest.mark.slow
def test_off_the_stage_is_disabled(built: dict, tmp_path: Path) -> None:
    ws = _copy(built, tmp_path)
    off = load_recipe(built["recipe"], [*built["sets"], "recipe.forecastbench.enabled=false"])
    stopped = run_recipe(off, ws, progress=False, say=lambda s: None, stop_after="fetch")
    assert {s.stage: s.status for s in stopped.stages}["forecastbench"] == "disabled"  # never `not_run`
    said: list[str] = []
    disabled = run_recipe(off, ws, progress=False, say=said.append)
    # the audit and the release compare what they did without the stage (so they run again here)
    assert disabled.exit_status == EXIT_OK and disabled.ran == ["audit", "release"], said
    status = {s.stage: s for s in disabled.stages}["forecastbench"]
    assert status.status == "disabled" and "still holds the ForecastBench events" in status.note
    assert len(_said(said, "forecastbench")) == 1 and "forecastbench" not in read_record(ws, "audit")["inputs"]


@pytest.mark.slow
def test_score_refuses_a_run_whose_items_table_is_not_the_released_one(built: dict, tmp_path: Path) -> None:
    from forecast_env.eval.runs.runner import run_benchmark

    ws = _copy(built, tmp_path)
    release = ws / "release"
    run = run_benchmark(ws, ["uniform"], split="eval", workers=1, progress=False, run_id="fb-ok")
    assert json.loads(Path(score_run(release, run)["release_check"]).read_text())["run_id"] == "fb-ok"
    verify_workspace(release, ws)
    # a flipped resolution: the report would score the run on other answers
    path = ws / FORECASTBENCH_ITEMS
    scored = pl.col("status") == "scored"
    pl.read_parquet(path).with_columns(resolved_to=pl.when(scored).then(1.0 - pl.col("resolved_to"))
                                       .otherwise(pl.col("resolved_to"))).write_parquet(path)
    pattern = (rf"was not made against release .*forecastbench: {re.escape(str(path))} has sha256 [0-9a-f]{{16}}\.\.\., "
               r"the release [0-9a-f]{16}\.\.\. \(the ForecastBench items that score the run are not those the "
               r"release froze\)")
    with pytest.raises(RunError, match=pattern):
        score_run(release, run)
    with pytest.raises(RunError, match=r"is not the one release .* froze: forecastbench: .*forecastbench\.parquet"):
        verify_workspace(release, ws)
    path.unlink()
    with pytest.raises(RunError, match=rf"forecastbench: {re.escape(str(path))} is missing"):
        score_run(release, run)
