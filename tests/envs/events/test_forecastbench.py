"""ForecastBench reader: rounds of the fixture subset, and bad files as counted errors, never tracebacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from forecast_env.envs.events.forecastbench import due_dates, read_round, read_rounds

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "forecastbench"


def test_fixture_rounds_counts_and_kinds() -> None:
    rounds = read_rounds(FIXTURE)
    assert [r.due_date for r in rounds] == ["2025-08-31", "2026-03-01", "2026-03-15", "2026-07-19", "2026-08-02"]
    old, _, _, mid, new = rounds
    assert old.questions == [] and old.errors == ["question_sets/2025-08-31-llm.json: file missing"]
    assert len(old.resolutions) == 360
    assert sum(r.combo for r in old.resolutions.values()) == 180
    assert mid.errors == [] and new.errors == []
    assert len(mid.questions) == 54 and len(mid.resolutions) == 457 and len(new.resolutions) == 472
    kinds = {q.source: q.kind for q in mid.questions}
    assert kinds == {
        **dict.fromkeys(["manifold", "metaculus", "infer", "polymarket"], "market"),
        **dict.fromkeys(["acled", "dbnomics", "fred", "wikipedia", "yfinance"], "dataset"),
    }
    market = [r for r in mid.resolutions.values() if r.kind == "market"]
    assert (len(market), sum(r.resolved for r in market)) == (214, 45)
    q = next(q for q in mid.questions if q.source == "manifold")
    assert q.question and q.url.startswith("https://manifold") and isinstance(q.freeze_value, float)
    wiki = [q for q in mid.questions if q.source == "wikipedia"]
    assert all(
        q.freeze_value is None and q.freeze_value_text for q in wiki if q.freeze_value_text in ("Yes", "No")
    )


def test_latest_pointer_skipped_and_range() -> None:
    assert (FIXTURE / "datasets/question_sets/latest-llm.json").is_file()
    assert "latest" not in " ".join(due_dates(FIXTURE))
    assert [r.due_date for r in read_rounds(FIXTURE, "2026-03-02", "2026-07-31")] == ["2026-03-15", "2026-07-19"]


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "fb"
    shutil.copytree(FIXTURE / "datasets", root / "datasets")
    return root


def test_truncated_empty_lfs_and_missing_files_are_errors(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    rs = root / "datasets/resolution_sets"
    text = (rs / "2026-07-19_resolution_set.json").read_text()
    (rs / "2026-07-19_resolution_set.json").write_text(text[: len(text) // 2])  # truncated
    (root / "datasets/question_sets/2026-08-02-llm.json").write_text("")  # empty
    (rs / "2026-08-02_resolution_set.json").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n"
    )
    r19 = read_round(root, "2026-07-19")
    assert len(r19.questions) == 54 and r19.resolutions == {}
    assert len(r19.errors) == 1 and "2026-07-19_resolution_set.json: not valid JSON" in r19.errors[0]
    r02 = read_round(root, "2026-08-02")
    assert r02.questions == [] and r02.resolutions == {}
    assert r02.errors == [
        "question_sets/2026-08-02-llm.json: empty file, skipped",
        "resolution_sets/2026-08-02_resolution_set.json: Git LFS pointer, not the data",
    ]
    nothing = read_round(root, "2020-01-01")
    assert len(nothing.errors) == 2 and all(e.endswith("file missing") for e in nothing.errors)


def test_bad_records_are_counted_with_key(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    path = root / "datasets/resolution_sets/2026-07-19_resolution_set.json"
    doc = json.loads(path.read_text())
    res = doc["resolutions"]
    for r in res[:3]:
        del r["resolved_to"]  # resolved rows without a value
    res[3]["resolution_date"] = "soon"
    res[4]["id"] = 7
    res.append(dict(res[10]))  # a duplicate
    res.append("junk")
    doc["forecast_due_date"] = "2026-07-18"
    path.write_text(json.dumps(doc))
    rnd = read_round(root, "2026-07-19")
    name = "resolution_sets/2026-07-19_resolution_set.json"
    assert sorted(rnd.errors) == sorted(
        [
            f"{name}: key forecast_due_date is '2026-07-18', not '2026-07-19'",
            f"{name}: 1 record(s) duplicating (source, id, direction, resolution_date), later one dropped",
            f"{name}: 1 record(s) not an object, dropped",
            f"{name}: 1 record(s) with key id missing or bad, dropped",
            f"{name}: 1 record(s) with key resolution_date missing or bad, dropped",
            f"{name}: 3 record(s) resolved with key resolved_to missing or outside [0, 1], dropped",
        ]
    )
    assert len(rnd.resolutions) == 457 - 5
