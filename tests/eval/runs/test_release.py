"""Frozen releases: write one, play it, score the run; runs made against something else are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from forecast_env.cli.main import main
from forecast_env.errors import RunError
from forecast_env.eval.runs.release import load_release, score_run
from forecast_env.eval.runs.runner import run_benchmark


@pytest.fixture(scope="module")
def release(micro_events: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release")
    assert main(["release", "--workspace", str(micro_events), "--split", "eval", "--out", str(out)]) == 0
    return out


def test_release_pins_the_workspace_and_holds_no_schedule_dates(release: Path, micro_events: Path) -> None:
    rel = load_release(release)
    sched = pl.read_parquet(micro_events / "events" / "schedule.parquet")
    assert set(rel.event_ids) <= set(sched["event_id"].to_list()) and rel.event_ids
    text = (release / "release.json").read_text()
    dates = {d.isoformat() for d in sched.filter(pl.col("event_id").is_in(rel.event_ids))["forecast_date"].to_list()}
    assert not [d for d in dates if d in text], "a release must not list the forecast dates"
    for key in ("corpus_snapshot_id", "index_manifest_sha256", "events_config_hash", "env_config"):
        assert rel.data[key]


def test_tampered_release_is_refused(release: Path, tmp_path: Path) -> None:
    copy = tmp_path / "rel"
    shutil.copytree(release, copy)
    data = json.loads((copy / "release.json").read_text())
    data["event_ids"] = data["event_ids"][:-1]
    (copy / "release.json").write_text(json.dumps(data))
    with pytest.raises(RunError, match="changed after it was written"):
        load_release(copy)
    (copy / "release.sha256").unlink()
    with pytest.raises(RunError, match="edited"):
        load_release(copy)


@pytest.mark.slow
def test_round_trip_and_refusals(release: Path, micro_events: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = run_benchmark(micro_events, ["uniform"], split="eval", workers=1, progress=False, run_id="release-ok")
    paths = score_run(release, run)
    assert Path(paths["markdown"]).exists()
    assert json.loads(Path(paths["release_check"]).read_text())["release_id"] == load_release(release).release_id

    # an ablation is not the release
    ablation = run_benchmark(micro_events, ["uniform"], split="eval", workers=1, progress=False,
                             run_id="release-memory-off", env_config={"memory": False})
    with pytest.raises(RunError, match=r"env\.memory: run False vs release True"):
        score_run(release, ablation)

    # a subset of the events is not the release
    ids = load_release(release).event_ids
    subset = run_benchmark(micro_events, ["uniform"], split="eval", workers=1, progress=False,
                           run_id="release-subset", event_ids=ids[:1])
    with pytest.raises(RunError, match="1 missing from the run" if len(ids) == 2 else "missing from the run"):
        score_run(release, subset)

    # another workspace: same events, but its index was rebuilt (another manifest)
    other = tmp_path / "other_ws"
    shutil.copytree(micro_events, other, ignore=shutil.ignore_patterns("runs"))
    manifest = other / "index" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["rebuilt"] = True
    manifest.write_text(json.dumps(data))
    foreign = run_benchmark(other, ["uniform"], split="eval", workers=1, progress=False, run_id="release-foreign")
    code = main(["score", "--release", str(release), "--run", str(foreign)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "index_manifest_sha256" in err[0], err
