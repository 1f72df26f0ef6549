"""Export: one split only, round trip through datasets, text stripped on request."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import polars as pl
import pytest

from forecast_env.errors import RunError
from forecast_env.eval.runs.export import export, strip_text
from forecast_env.eval.runs.runner import run_benchmark
from forecast_env.store import Workspace
from tests.support.env_data import build_workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    ws = build_workspace(tmp_path_factory.mktemp("export_ws"))
    run_benchmark(ws, ["uniform", "retrieval"], run_id="r", workers=1, progress=False)
    return ws


def _ids(rows) -> set[str]:
    return {json.loads(r["info"])["event_id"] for r in rows}


def test_train_export_has_no_eval_event_and_round_trips(ws, tmp_path):
    s = export(ws, "train", tmp_path / "train", progress=False)
    assert s["rows"] == {"prompts": 2}
    ds = datasets.load_from_disk(s["paths"]["prompts"]["hf"])
    assert len(ds) == 2 and _ids(ds) == {"pm-3"}
    eval_ids = set(pl.read_parquet(ws / "events" / "events.parquet").filter(pl.col("split") == "eval")["event_id"])
    assert not (_ids(ds) & eval_ids)
    row = ds[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["window_end"] == row["forecast_date"] and row["answer"] == "No"
    assert "Will the harbor close" in row["prompt"][1]["content"]
    jl = [json.loads(x) for x in Path(s["paths"]["prompts"]["jsonl"]).read_text().splitlines()]
    assert jl == [dict(r) for r in ds]
    assert pl.read_parquet(s["paths"]["prompts"]["parquet"]).height == 2


def test_train_export_of_an_eval_run_writes_no_trajectory(ws, tmp_path):
    s = export(ws, "train", tmp_path / "t", run_id="r", progress=False)
    assert s["rows"]["trajectories"] == 0


def test_eval_trajectories_with_and_without_text(ws, tmp_path):
    s = export(ws, "eval", tmp_path / "full", run_id="r", progress=False)
    assert s["rows"] == {"prompts": 7, "trajectories": 14}  # one sample per (agent, event, date) session
    ds = datasets.load_from_disk(s["paths"]["trajectories"]["hf"])
    assert set(ds.column_names) >= {"prompt", "completion", "answer", "reward", "info"}
    assert all(r <= 0 for r in ds["reward"])
    full = json.dumps(ds[:]["completion"])
    stripped = export(ws, "eval", tmp_path / "ids", run_id="r", include_text=False, progress=False)
    ds2 = datasets.load_from_disk(stripped["paths"]["trajectories"]["hf"])
    text = json.dumps(ds2[:]["completion"])
    assert "Storms and rain" not in text and "doc00" in text
    assert "senators debate spending" in full and "senators debate spending" not in text


def test_bad_split_and_format(ws, tmp_path):
    with pytest.raises(RunError):
        export(ws, "all", tmp_path, progress=False)
    with pytest.raises(RunError):
        export(ws, "train", tmp_path, formats=["csv"], progress=False)


def test_strip_text_keeps_ids():
    assert strip_text({"hits": [{"doc_id": "d1", "title": "t", "day": "2026-03-01"}]}) == \
        {"hits": [{"doc_id": "d1", "title": "[removed]", "day": "2026-03-01"}]}


def _titles(ws: Path) -> set[str]:
    return set(pl.read_parquet(Workspace.at(ws).articles_dir / "*.parquet")["title"].to_list())


def test_no_text_also_removes_titles_copied_into_notebook_claims(ws, tmp_path):
    titles = _titles(ws)
    full = export(ws, "eval", tmp_path / "full", run_id="r", formats=["jsonl"], progress=False)
    full_text = Path(full["paths"]["trajectories"]["jsonl"]).read_text()
    # the retrieval agent's claims name the articles it read, in its actions and its tool-call arguments
    assert '"claim' in full_text and any(t in full_text for t in titles)
    bare = export(ws, "eval", tmp_path / "bare", run_id="r", formats=["jsonl"], include_text=False,
                  progress=False)
    text = Path(bare["paths"]["trajectories"]["jsonl"]).read_text()
    leaked = sorted(t for t in titles if t in text)
    assert leaked == [], f"article titles left in a --no-text export: {leaked[:3]}"
    rows = [json.loads(x) for x in text.splitlines()]
    calls = [c for r in rows for c in json.loads(r["info"])["tool_calls"] if c["tool"] == "notebook_add"]
    assert calls and all(json.loads(c["args_json"])["claim"] == "[removed]" for c in calls)
    assert all(json.loads(c["args_json"])["doc_ids"] for c in calls)  # the ids stay


def test_prompts_carry_the_packaged_system_prompt_and_a_failed_load_stops_the_export(ws, tmp_path, monkeypatch):
    from forecast_env.agents import llm

    s = export(ws, "train", tmp_path / "ok", formats=["jsonl"], progress=False)
    row = json.loads(Path(s["paths"]["prompts"]["jsonl"]).read_text().splitlines()[0])
    assert row["prompt"][0]["content"] == llm.system_prompt()

    def unreadable() -> str:
        raise FileNotFoundError("system.md")

    monkeypatch.setattr(llm, "system_prompt", unreadable)
    with pytest.raises(RunError, match="system prompt"):
        export(ws, "train", tmp_path / "broken", formats=["jsonl"], progress=False)
    assert not (tmp_path / "broken").exists()
