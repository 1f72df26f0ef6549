"""The optional `questions` stage of `forecast-env build --recipe`: validated with the one config validator, off by
default, run between the events and the audit (generate, then resolve: the accepted questions become events that
the audit and the release see), skipped when its record matches, rerun when its config changes; its dry-run row.

The build runs the `questions` sample world served in the real layouts (synth/serve.py: Polymarket's services;
the WARC files are read from disk) with a scripted OpenAI-compatible model (tests/support/question_data.py) over
HTTP: the same code paths as a real build, in about 20 s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from forecast_env.cli.main import main
from forecast_env.errors import ConfigError
from forecast_env.recipe import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    PLAN_RATES,
    STAGES,
    load_recipe,
    plan_recipe,
    read_record,
    render_plan,
    run_recipe,
)
from tests.support.chat_server import ChatServer
from tests.support.question_data import scripted_model, world_facts

SPLITS = {"train": {"start": "2026-03-01", "end": "2026-04-15"}, "eval": {"start": "2026-04-15", "end": "2026-06-01"}}
MODEL = {"llm": {"model": "scripted", "base_url": "http://127.0.0.1:9/v1"}}
#: the questions of the build: the `questions` world's dates, as tests/questions/test_pipeline.py asks them
DATES = "2025-11-10..2026-04-20"
#: the audit's checks without 4 (text leakage): the scripted model's criteria ("Settled by official results
#: reported by R") sit in a generated event's description, and check 4 reads "reported by R" on an earlier date as
#: a post-date fact (it FAILs; a real model's wording is the questions pipeline's matter, not the stage's)
CHECKS = ["schedule", "structure", "retrieval", "replay", "siblings"]


def _recipe(tmp_path: Path, **keys: object) -> Path:
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump({"name": "q", "news": {"cc_news": "2026-03..2026-05"}, "splits": SPLITS, **keys}))
    return path


# -- the recipe keys ---------------------------------------------------------------------------------


def test_the_stage_is_off_by_default_and_the_packaged_recipes_keep_their_stages(tmp_path: Path) -> None:
    for name in ("dojo", "small"):
        recipe = load_recipe(name)
        assert not recipe.questions_enabled and recipe.get("questions") == {"enabled": False, "dates": None,
                                                                            "config": {}}
        assert "questions" not in [s["stage"] for s in plan_recipe(recipe, tmp_path / "ws", offline=True).stages]
    assert STAGES.index("events") < STAGES.index("questions") < STAGES.index("audit")


def test_an_enabled_block_gives_the_questions_section(tmp_path: Path) -> None:
    path = _recipe(tmp_path, questions={"enabled": True, "dates": "2026-03-01..2026-05-15",
                                        "config": {**MODEL, "seeds": {"per_date": 4}, "import_events": False}})
    recipe = load_recipe(path, ["questions.seeds.window_days=5", "recipe.questions.config.horizon.max_days=30"])
    q = recipe.questions
    assert recipe.questions_enabled and recipe.get("questions.dates") == "2026-03-01..2026-05-15"
    assert q["llm"]["model"] == "scripted" and q["seeds"]["per_date"] == 4 and q["seeds"]["window_days"] == 5
    assert q["horizon"] == {"min_days": 7, "max_days": 30} and q["import_events"] is False
    assert q["prospective"]["max_questions_per_seed"] == 3  # the section's defaults
    assert recipe.corpus and recipe.events["splits"]["eval"] == SPLITS["eval"]  # the other sections as before


@pytest.mark.parametrize("block, overrides, message", [
    ({"enabled": "x"}, [], "recipe key 'questions.enabled' must be bool, got 'x'"),
    ({"enabeld": True}, [], "q.yaml: unknown recipe key 'questions.enabeld'; allowed here: config, dates, enabled"),
    ({"config": 3}, [], "recipe key 'questions.config' must be a mapping"),
    ({"config": {"seeds": {"per_dat": 4}}}, [],
     "q.yaml: unknown recipe key 'questions.config.seeds.per_dat'; allowed here: hosts, min_chars, per_date"),
    ({"config": {"seeds": {"per_date": "four"}}}, [], "recipe key 'questions.config.seeds.per_date' must be int"),
    ({"config": {"replay": "never"}}, [], "recipe key 'questions.config.replay' = 'never' is not allowed"),
    ({}, ["recipe.questions.config.llm.modle=x"], "--set recipe.questions.config.llm.modle=x: unknown recipe key "
                                                  "'questions.config.llm.modle'"),
    ({}, ["questions.seeds.per_date=x"], "questions.seeds.per_date must be int, got 'x'"),
    ({"enabled": True, "config": MODEL}, [], "questions.dates is missing"),
    ({"enabled": True, "dates": "2026-03-01", "config": MODEL}, [],
     "recipe key 'questions.dates' = '2026-03-01' is not A..B with ISO days"),
    ({"enabled": True, "dates": "2026-05-01..2026-03-01", "config": MODEL}, [], "the end is before the start"),
    ({"enabled": True, "dates": DATES}, [], "questions.config.llm.model is not set"),
])
def test_bad_questions_keys_name_the_key(tmp_path: Path, block: dict, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_recipe(_recipe(tmp_path, questions=block), overrides)


def test_a_bad_questions_key_is_bad_input_before_any_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _recipe(tmp_path, questions={"enabled": True, "dates": DATES, "config": {"seeds": {"per_dat": 4}}})
    assert main(["build", "--recipe", str(path), "--workspace", str(tmp_path / "ws")]) == EXIT_BAD_INPUT
    assert "unknown recipe key 'questions.config.seeds.per_dat'" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()


# -- the dry run ---------------------------------------------------------------------------------------


def test_the_dry_run_prices_the_questions_stage_from_its_rates(tmp_path: Path) -> None:
    path = _recipe(tmp_path, questions={"enabled": True, "dates": "2026-03-01..2026-05-15",
                                        "config": {**MODEL, "seeds": {"per_date": 4}}})
    plan = plan_recipe(load_recipe(path), tmp_path / "ws", offline=True)
    assert [s["stage"] for s in plan.stages].index("questions") == [s["stage"] for s in plan.stages].index("events") + 1
    row = next(s for s in plan.stages if s["stage"] == "questions")
    seeds = 11 * 4 * 2  # question dates 03-01, 03-08, ... 05-10 (every 7 days) x 4 per date x 2 routes
    per_seed, per_accepted = PLAN_RATES["questions.tokens_per_seed"], PLAN_RATES["questions.tokens_per_accepted"]
    cpu = PLAN_RATES["questions.pipeline_seconds_per_seed"]
    assert row["seeds"] == seeds and row["model_tokens"] == pytest.approx(seeds * per_seed.value)
    assert row["accepted"] == pytest.approx(seeds * per_seed.value / per_accepted.value)
    assert row["core_hours"] == pytest.approx(seeds * cpu.value / 3600)
    assert row["rates"] == ["questions.tokens_per_seed", "questions.tokens_per_accepted",
                            "questions.pipeline_seconds_per_seed"]
    text = render_plan(plan)
    line = next(ln for ln in text.splitlines() if ln.startswith("  questions "))
    assert f"{seeds} seeds (11 question dates x 4 per date x 2 route(s))" in line
    assert f"{seeds * per_seed.value:,.0f} model tokens" in line
    for key in row["rates"]:
        n = list(PLAN_RATES).index(key) + 1
        assert f"{PLAN_RATES[key].script()} [{n}]" in line
        assert any(ln.startswith(f"  [{n}] {key} = ") and ln.endswith(PLAN_RATES[key].command) for ln in text.splitlines())
    # the stage lines still add up to the total, the questions row included
    assert round(plan.core_hours) == int(re.search(r"total: ([\d,]+) core-hours", text).group(1).replace(",", ""))
    one_route = plan_recipe(load_recipe(path, ["questions.routes=[retrospective]"]), tmp_path / "ws", offline=True)
    assert next(s for s in one_route.stages if s["stage"] == "questions")["seeds"] == seeds // 2


# -- the build -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The `questions` world (seed 0; its Polymarket services served), a scripted model server and a recipe."""
    from forecast_env.synth import synthesize
    from forecast_env.synth.serve import WorldServer

    root = tmp_path_factory.mktemp("questions_recipe")
    synthesize(root / "world", preset="questions", seed=0, progress=False)
    truth = json.loads((root / "world" / "truth.json").read_text())
    recipe = {
        "name": "questions-served",
        "news": {"warc": sorted(str(p) for p in (root / "world" / "news").glob("*.warc.gz")), "workers": 1},
        "splits": {s: {"start": truth["splits"][s][0], "end": truth["splits"][s][1]} for s in ("train", "eval")},
        "audit": {"split": "eval", "checks": CHECKS},
        "release": {"split": "eval", "out": "release"},
        "questions": {"enabled": True, "dates": DATES,
                      "config": {"llm": {"model": "scripted", "backoff_seconds": 0.0, "max_retries": 0},
                                 "seeds": {"per_date": 3}}},
    }
    path = root / "questions.yaml"
    path.write_text(yaml.safe_dump(recipe))
    with WorldServer(root / "world") as server, ChatServer() as chat:
        # the static embedding backend: the index stage at a fraction of the default encoder's CPU
        sets = [*server.client_settings(), "events.polymarket.requests_per_second=0", "embed.backend=static",
                f"questions.llm.base_url={chat.base_url}"]
        yield {"root": root, "recipe": path, "sets": sets, "chat": chat}


def _said(lines: list[str], stage: str) -> str:
    return next(ln for ln in lines if ln.startswith(f"[{stage}] "))


@pytest.mark.slow
def test_the_stage_runs_after_events_and_the_release_freezes_its_events(served: dict) -> None:
    root, chat = served["root"], served["chat"]
    ws = root / "ws"  # world_facts reads root/world and root/ws
    recipe = load_recipe(served["recipe"], served["sets"])
    first = run_recipe(recipe, ws, progress=False, say=lambda s: None, stop_after="events")
    assert first.ran == ["fetch", "corpus", "index", "events"]
    assert {s.stage: s.status for s in first.stages}["questions"] == "not_run"  # enabled, not reached
    chat.default = scripted_model(world_facts(root))

    said: list[str] = []
    outcome = run_recipe(recipe, ws, progress=False, say=said.append)
    assert outcome.exit_status == EXIT_OK, said
    assert outcome.ran == ["questions", "audit", "release"]
    assert [s.stage for s in outcome.stages] == list(STAGES)
    assert {s.stage: s.status for s in outcome.stages}["forecastbench"] == "disabled"
    rec = read_record(ws, "questions")
    assert rec["inputs"]["dates"] == DATES and rec["result"]["accepted"] > 0 and rec["result"]["live_calls"] > 0
    assert rec["result"]["events"] == rec["result"]["accepted"]
    # the audit and the release came after it and see the generated events
    release = json.loads((ws / "release" / "release.json").read_text())
    generated = [e for e in release["event_ids"] if e.startswith("g-")]
    assert generated and release["questions"]["event_ids"] == generated
    accepted = [json.loads(x) for x in (ws / "questions" / "accepted.jsonl").read_text().splitlines()]
    assert set(generated) <= {f"g-{a['id']}" for a in accepted}
    assert release["questions"]["models"] == {"generate": "scripted", "resolve": "scripted"}
    assert read_record(ws, "audit")["inputs"]["questions"] == rec["fingerprint"]

    # a second run does nothing and asks the model nothing; an execution setting of the model changes nothing
    n_requests = len(chat.requests)
    built = [s for s in STAGES if s != "forecastbench"]  # off in this recipe: no record
    stamps = {s: (ws / "build" / f"{s}.json").stat().st_mtime_ns for s in built}
    said.clear()
    again = run_recipe(load_recipe(served["recipe"], [*served["sets"], "questions.llm.timeout_seconds=60"]), ws,
                       progress=False, say=said.append)
    assert again.exit_status == EXIT_OK and again.ran == [] and len(said) == len(STAGES)
    assert "already done" in _said(said, "questions")
    assert len(chat.requests) == n_requests
    assert {s: (ws / "build" / f"{s}.json").stat().st_mtime_ns for s in built} == stamps

    # a changed questions config redoes the stage and those after it (the recording answers what it asked before)
    said.clear()
    changed = run_recipe(load_recipe(served["recipe"], [*served["sets"], "questions.seeds.per_date=2"]), ws,
                         progress=False, say=said.append)
    assert changed.exit_status == EXIT_OK and changed.ran == ["questions", "audit", "release"], said
    assert read_record(ws, "questions")["fingerprint"] != rec["fingerprint"]
    assert read_record(ws, "questions")["result"]["replayed_calls"] > 0

    # disabled: reported as such (never `not_run`), said once, and the audit compares what it did without questions
    said.clear()
    off = load_recipe(served["recipe"], [*served["sets"], "recipe.questions.enabled=false"])
    stopped = run_recipe(off, ws, progress=False, say=said.append, stop_after="fetch")
    assert {s.stage: s.status for s in stopped.stages}["questions"] == "disabled"
    assert {s.stage: s.status for s in stopped.stages}["audit"] == "not_run"
    said.clear()
    disabled = run_recipe(off, ws, progress=False, say=said.append)
    assert disabled.exit_status == EXIT_OK and disabled.ran == ["audit", "release"], said
    status = {s.stage: s for s in disabled.stages}["questions"]
    assert status.status == "disabled" and "still holds the generated events" in status.note
    assert "questions" not in read_record(ws, "audit")["inputs"]
