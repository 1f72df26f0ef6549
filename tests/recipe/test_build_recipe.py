"""`forecast-env build --recipe`: from an empty workspace to an audit verdict and a release, against
the sample world served in the real layouts; a second run does nothing; a killed run resumes.

One server on 127.0.0.1:0 (`synth/serve.py`) serves the world's WARC files in the Common Crawl
layout (`crawl-data/CC-NEWS/YYYY/MM/` + `warc.paths.gz`, streamed by the corpus build) and its
Polymarket cache as Gamma, CLOB and the Data API (`synth/serve_polymarket.py`): the same client
code runs as against the real services.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from forecast_env.cli.main import main
from forecast_env.recipe import (
    EXIT_AUDIT_FAIL,
    EXIT_BAD_INPUT,
    EXIT_ITEMS_FAILED,
    EXIT_OK,
    STAGES,
    load_recipe,
    plan_recipe,
    read_record,
    render_plan,
    run_recipe,
)
from forecast_env.synth import serve_polymarket as sp

pytestmark = pytest.mark.slow
#: the stages these recipes run: the optional forecastbench and questions stages are off (reported `disabled`, no
#: record)
BUILT = [s for s in STAGES if s not in ("forecastbench", "questions")]


@pytest.fixture(scope="module")
def recipe_world(micro_world: Path) -> Iterator[dict]:
    """The micro world served (synth/serve.py): CC-NEWS layout + the Polymarket services, one server."""
    from forecast_env.synth.serve import WorldServer

    with WorldServer(micro_world) as server:
        folders = list(server.months())  # crawl-data/CC-NEWS/YYYY/MM, empty months of the span included
        months = [f"{f[-7:-3]}-{f[-2:]}" for f in folders]
        truth = json.loads((micro_world / "truth.json").read_text())
        # the static embedding backend: the index stage runs whole (BM25, dense shards, ANN) at a fraction of the
        # default ONNX encoder's CPU (14 CPU s here); the default backend's index build is tested on the same
        # world by the micro_index fixture and tests/corpus_build/test_index.py
        sets = [*server.client_settings(), "events.polymarket.requests_per_second=0", "embed.backend=static"]
        yield {"world": micro_world, "server": server, "months": months, "truth": truth, "sets": sets,
               "with_files": [m for f, m in zip(folders, months, strict=True) if server.months()[f]]}
    sp.clear_faults(micro_world)


def _recipe_file(tmp: Path, served: dict, **news: object) -> Path:
    splits = served["truth"]["splits"]
    recipe = {
        "name": "served-micro",
        "description": "the micro sample world, served",
        "news": {"cc_news": f"{served['months'][0]}..{served['months'][-1]}", "workers": 1, **news},
        "splits": {s: {"start": splits[s][0], "end": splits[s][1]} for s in ("train", "eval")},
        "audit": {"split": "eval"},
        "release": {"split": "eval", "out": "release"},
    }
    path = tmp / "served.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def _sets(served: dict) -> list[str]:
    return [a for s in served["sets"] for a in ("--set", s)]


def test_build_from_empty_workspace_then_a_second_run_does_nothing(recipe_world: dict, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    recipe = _recipe_file(tmp_path, recipe_world)
    ws = tmp_path / "ws"
    # a killed run: it stopped after the corpus (its records say what finished)
    outcome = run_recipe(load_recipe(recipe, recipe_world["sets"]), ws, progress=False, say=lambda s: None,
                         stop_after="corpus")
    assert outcome.ran == ["fetch", "corpus"] and read_record(ws, "index") is None
    requests_before = dict(sp.request_counts.get(recipe_world["world"].resolve(), {}))

    rc = main(["build", "--recipe", str(recipe), "--workspace", str(ws), "--no-progress", *_sets(recipe_world)])
    out = capsys.readouterr()
    verdict = read_record(ws, "audit")["result"]["verdict"]
    assert rc == EXIT_OK, out.err[-2000:]
    assert verdict in ("PASS", "INCONCLUSIVE")
    assert "[fetch] already done" in out.err and "[corpus] already done" in out.err  # resumed, not redone
    release = json.loads((ws / "release" / "release.json").read_text())
    assert release["split"] == "eval" and release["event_ids"]
    expected = {eid for eid, e in recipe_world["truth"]["events"].items() if e["expect"] == "keep" and e["split"] == "eval"}
    assert set(release["event_ids"]) == expected  # the world's kept eval events, fetched over HTTP
    for stage in BUILT:
        assert read_record(ws, stage) is not None, stage
    assert read_record(ws, "questions") is None and "[questions] disabled in the recipe" in out.err
    assert sp.request_counts[recipe_world["world"].resolve()] == requests_before  # fetch was not redone

    stamps = {s: (ws / "build" / f"{s}.json").stat().st_mtime_ns for s in BUILT}
    manifest = (ws / "corpus" / "manifest.json").stat().st_mtime_ns
    n_log = len(recipe_world["server"].log)
    rc = main(["build", "--recipe", str(recipe), "--workspace", str(ws), "--no-progress", *_sets(recipe_world)])
    out = capsys.readouterr()
    assert rc == EXIT_OK
    assert out.err.count("already done") == len(BUILT)
    assert {s: (ws / "build" / f"{s}.json").stat().st_mtime_ns for s in BUILT} == stamps
    assert (ws / "corpus" / "manifest.json").stat().st_mtime_ns == manifest
    assert sp.request_counts[recipe_world["world"].resolve()] == requests_before
    assert len(recipe_world["server"].log) == n_log  # not one request: listings frozen, nothing to stream

    # a changed setting redoes that stage and those after it, not the ones before
    rc = main(["build", "--recipe", str(recipe), "--workspace", str(ws), "--no-progress", *_sets(recipe_world),
               "--set", "events.filters.min_span_days=9"])
    err = capsys.readouterr().err
    assert rc == EXIT_OK
    assert "[index] already done" in err and "[events] running" in err and "[audit] running" in err

    # an audit FAIL is its own exit status (not bad input) and writes no release: here the stored
    # schedule offers only the label on a first date moved 30 days early (an old, leaky build)
    import polars as pl

    path = ws / "events" / "schedule.parquet"
    sched = pl.read_parquet(path)
    events = pl.read_parquet(ws / "events" / "events.parquet").filter(pl.col("split") == "eval")
    ev = events.sort("event_id").row(0, named=True)
    first = (pl.col("event_id") == ev["event_id"]) & (pl.col("step") == 1)
    early = sched.filter(first)["forecast_date"][0] - timedelta(days=30)
    sched.with_columns(pl.when(first).then(pl.lit(early)).otherwise(pl.col("forecast_date")).alias("forecast_date"),
                       pl.when(first).then(pl.lit([ev["label"]], dtype=pl.List(pl.String)))
                       .otherwise(pl.col("options")).alias("options")).write_parquet(path)
    rc = main(["build", "--recipe", str(recipe), "--workspace", str(ws), "--no-progress", *_sets(recipe_world),
               "--set", "events.filters.min_span_days=9", "--set", "recipe.audit.checks=[schedule]"])
    err = capsys.readouterr().err
    assert rc == EXIT_AUDIT_FAIL, err[-2000:]
    assert "[events] already done" in err and "[release] not written: the audit FAILED (schedule)" in err
    assert read_record(ws, "release") is None


def test_dry_run_reads_the_listings_and_prints_the_plan(recipe_world: dict, tmp_path: Path) -> None:
    recipe = load_recipe(_recipe_file(tmp_path, recipe_world), recipe_world["sets"])
    server = recipe_world["server"]
    server.clear()
    plan = plan_recipe(recipe, tmp_path / "ws")
    assert [m.month for m in plan.months] == recipe_world["months"]
    assert all(m.listing_from == "listing" for m in plan.months)
    assert [m.month for m in plan.months if m.picked] == recipe_world["with_files"]
    sizes = sorted(f.stat().st_size for f in (recipe_world["world"] / "news").glob("*.warc.gz"))
    assert sorted(m.bytes for m in plan.months if m.picked) == sizes  # HEAD's Content-Length, not an estimate
    heads = [e for e in server.log if e[0] == "HEAD"]
    assert len(heads) == len(sizes)
    text = render_plan(plan)
    assert "estimate" not in text.splitlines()[0] and "core-h" in text
    assert not (tmp_path / "ws" / "corpus").exists()  # nothing built, no listing frozen
    again = plan_recipe(recipe, tmp_path / "ws")  # listings and sizes are cached: no request at all
    assert again.to_dict() == plan.to_dict() and len(server.log) == len(heads) + len(plan.months)


def test_dojo_dry_run_offline_is_the_papers_plan_marked_estimate(tmp_path: Path) -> None:
    plan = plan_recipe(load_recipe("dojo"), tmp_path / "ws", offline=True)
    assert plan.files == 7_163 and len(plan.months) == 15
    assert render_plan(plan).splitlines()[0].endswith("(marked: estimate)")
    small = plan_recipe(load_recipe("small"), tmp_path / "ws", offline=True)
    assert small.files == 6 and [m.picked for m in small.months] == [2, 2, 2]


def test_failed_items_exit_4_and_are_retried_by_the_next_run(recipe_world: dict, tmp_path: Path) -> None:
    world = recipe_world["world"]
    cid = sorted(p.stem for p in (world / "polymarket" / "data" / "trades").glob("*.json"))[0]
    sp.inject(world, sp.Fault("/data-api/trades", "404", count=1, match={"market": cid}))
    recipe = load_recipe(_recipe_file(tmp_path, recipe_world), recipe_world["sets"])
    ws = tmp_path / "ws"
    outcome = run_recipe(recipe, ws, progress=False, say=lambda s: None, stop_after="fetch")
    assert outcome.exit_status == EXIT_ITEMS_FAILED and outcome.stages[0].status == "failed_items"
    assert read_record(ws, "fetch") is None  # not recorded as done: the next run retries
    again = run_recipe(recipe, ws, progress=False, say=lambda s: None, stop_after="fetch")
    assert again.exit_status == EXIT_OK and again.stages[0].status == "done"
    assert read_record(ws, "fetch")["result"]["trades_failed"] == 0


def test_bad_recipes_are_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnews: {cc_news: 2025-03}\nsplits: {train: {start: 2025-03-01, end: 2025-04-01}, "
                   "eval: {start: 2025-04-01, end: 2025-05-01}}\nrelase: {split: eval}\n")
    assert main(["build", "--recipe", str(bad), "--workspace", str(tmp_path / "ws")]) == EXIT_BAD_INPUT
    assert "unknown recipe key 'relase.split'" in capsys.readouterr().err
    no_splits = tmp_path / "nosplits.yaml"
    no_splits.write_text("name: x\nnews: {cc_news: 2025-03}\n")
    assert main(["build", "--recipe", str(no_splits), "--workspace", str(tmp_path / "ws"), "--dry-run"]) == 2
    assert "must state its splits" in capsys.readouterr().err
    assert main(["build", "--recipe", "small", "--workspace", str(tmp_path / "ws"), "--dry-run", "--offline",
                 "--set", "events.filters.nope=1"]) == EXIT_BAD_INPUT
    assert main(["build", "--recipe", "small", "--workspace", str(tmp_path / "ws"), "--dry-run", "--offline",
                 "--set", "recipe.news.files_per_month=x"]) == EXIT_BAD_INPUT
    assert main(["build", "--recipe", "small", "--workspace", str(tmp_path / "ws"),
                 "--set", "recipe.news.cc_news=2025-13"]) == EXIT_BAD_INPUT
    assert "is not a month" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()  # refused before any stage ran
