"""Episode and world runs side by side in the report: golden Markdown of a fixed pair, each mode's rows
from its own run, the paired world - episode difference on the shared cells, companion discovery."""

from __future__ import annotations

import json
import os
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from forecast_env import schema
from forecast_env.errors import RunError
from forecast_env.eval.report.modes import find_companion, incompatibility
from forecast_env.eval.report.render import build_report
from forecast_env.store import atomic_write_table
from tests.support.eval_data import EVENTS, forecast_rows, market_rows
from tests.support.paths import GOLDEN

GOLDEN = GOLDEN / "report_modes.md"
AGENTS = [{"name": "retrieval", "label": "sharp", "kwargs": {}}, {"name": "uniform", "label": "uniform", "kwargs": {}}]
WORLD_EVENTS = ["e1", "e2", "e3", "e5"]  # e4 is outside the world's calendar


def _meta(run_id: str, mode: str, agents: list[dict], event_ids: list[str]) -> dict:
    return {"run_id": run_id, "mode": mode, "split": "eval", "rollouts": 2 if mode == "episode" else 1, "seed": 0,
            "agents": agents, "event_ids": event_ids, "corpus_snapshot_id": "hand-made",
            "index_manifest_sha256": "abc", "events_config_hash": "def",
            "config": {"env": {"memory": True}, "benchmark": {"retrieval": {"open_k": 2}}},
            "world": {"start": "2026-03-01", "end": "2026-03-14"} if mode == "world" else None}


def _write(run_dir: Path, rows: list[dict], meta: dict) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_table(run_dir / "forecasts.parquet", pa.Table.from_pylist(rows), schema.FORECASTS)
    atomic_write_table(run_dir / "notebook.parquet", schema.empty_table(schema.NOTEBOOK))
    atomic_write_table(run_dir / "tool_calls.parquet", schema.empty_table(schema.TOOL_CALLS))
    ids = set(meta["event_ids"])
    ev = pl.DataFrame([{"event_id": e, "question": f"Q {e}?", "type": t, "category": c, "options": o, "label": lab,
                        "split": "eval", "steps_total": s} for e, t, c, o, lab, s in EVENTS if e in ids])
    atomic_write_table(run_dir / "events.parquet", ev.to_arrow())
    market = pl.DataFrame(market_rows()).filter(pl.col("event_id").is_in(list(ids)))
    atomic_write_table(run_dir / "market.parquet", market.to_arrow())
    (run_dir / "run.json").write_text(json.dumps(meta))
    return run_dir


def write_pair(runs: Path) -> tuple[Path, Path]:
    """An episode run (sharp, uniform and an `extra` agent the world run lacks; 2 rollouts; 5 events) and a
    world run (sharp and uniform, 1 rollout, 4 events) whose sharp forecasts differ from the episode's."""
    ep_rows = [r for r in forecast_rows(agents=("extra", "sharp", "uniform"), rollouts=2, seed=0)]
    ep = _write(runs / "20260301-000000-ep", [{**r, "run_id": "20260301-000000-ep"} for r in ep_rows],
                _meta("20260301-000000-ep", "episode",
                      [*AGENTS, {"name": "retrieval", "label": "extra", "kwargs": {"open_k": 1}}],
                      [e[0] for e in EVENTS]))
    wo_rows = [{**r, "run_id": "20260302-000000-wo"} for r in forecast_rows(rollouts=1, seed=7)
               if r["event_id"] in WORLD_EVENTS]
    for r in wo_rows:  # a day the world run missed (infrastructure failure): not a shared cell
        if (r["agent"], r["event_id"], r["step"]) == ("sharp", "e3", 4):
            r.update(missing=True, probs=None, brier=None, accuracy=None, log_vs_market=None)
    wo = _write(runs / "20260302-000000-wo", wo_rows, _meta("20260302-000000-wo", "world", AGENTS, WORLD_EVENTS))
    questions = []
    for agent, base in (("sharp", 0.2), ("uniform", 0.55)):
        for i, eid in enumerate(WORLD_EVENTS):
            questions.append({"run_id": "20260302-000000-wo", "agent": agent, "world_id": "world-x", "rollout": 0,
                              "event_id": eid, "first_day": date(2026, 3, 1), "last_day": date(2026, 3, 12),
                              "cut": None, "scored": 3, "brier": base, "eligible_days": 10 + i,
                              "days_with_standing": 10, "time_weighted_brier": base + 0.01 * i})
    atomic_write_table(wo / "world_questions.parquet", pa.Table.from_pylist(questions), schema.WORLD_QUESTIONS)
    days, calls = [], []
    for agent in ("sharp", "uniform"):
        for i in range(14):
            day = date(2026, 3, 1) + timedelta(days=i)
            days.append({"run_id": "20260302-000000-wo", "agent": agent, "world_id": "world-x", "rollout": 0,
                         "date": day, "day": i + 1, "listed": 4, "standing": 4, "scored": 1, "brier": 0.5,
                         "n_calls": 3, "budget": 40, "budget_exhausted": False, "skipped": None})
            for r in wo_rows:  # the reader opens one article per question on each of its scheduled dates
                if r["agent"] == agent and r["forecast_date"] == day:
                    tools = ([("open_article", {"doc_id": f"{r['event_id']}-{i}"})] if agent == "sharp" else []) + [
                        ("forecast", {"question_id": r["event_id"], "probabilities": r["probs"]})]
                    for tool, args in tools:
                        calls.append({"run_id": "20260302-000000-wo", "agent": agent, "event_id": "world-x",
                                      "rollout": 0, "step": i + 1, "call_index": len(calls), "tool": tool,
                                      "args_json": json.dumps(args), "result_doc_ids": [], "error": None})
    atomic_write_table(wo / "world_days.parquet", pa.Table.from_pylist(days), schema.WORLD_DAYS)
    atomic_write_table(wo / "tool_calls.parquet", pa.Table.from_pylist(calls), schema.TOOL_CALLS)
    return ep, wo


def _event_mean(rows: list[dict], agent: str, value: str, cells: set | None = None) -> dict[str, float]:
    """Per event: mean over rollouts of each rollout's mean over its scored dates (by hand)."""
    by: dict[str, dict[int, list[float]]] = {}
    for r in rows:
        if r["agent"] != agent or r["missing"] or r[value] is None:
            continue
        if cells is not None and (r["event_id"], r["step"]) not in cells:
            continue
        by.setdefault(r["event_id"], {}).setdefault(r["rollout"], []).append(r[value])
    return {e: float(np.mean([np.mean(v) for v in rs.values()])) for e, rs in by.items()}


def test_side_by_side_markdown_matches_golden(tmp_path):
    ep, wo = write_pair(tmp_path / "runs")
    md = Path(build_report(wo, plots=False)["markdown"]).read_text()
    if os.environ.get("UPDATE_GOLDEN") == "1":  # regenerate on purpose only, then review the diff
        GOLDEN.write_text(md)
    assert GOLDEN.exists(), f"{GOLDEN} is missing; regenerate it on purpose with UPDATE_GOLDEN=1 and review it"
    assert md == GOLDEN.read_text(), "report.md changed; if intended, rerun with UPDATE_GOLDEN=1 and review the diff"
    # the episode run's report finds the world run and shows the same section, byte for byte
    ep_md = Path(build_report(ep, plots=False)["markdown"]).read_text()
    section = md.split("## Episode and world mode side by side")[1].split("\n## ")[0]
    assert ep_md.split("## Episode and world mode side by side")[1].split("\n## ")[0] == section


def test_each_mode_row_comes_from_its_own_run_and_the_paired_difference_from_shared_cells(tmp_path):
    ep, wo = write_pair(tmp_path / "runs")
    res = json.loads(Path(build_report(ep, plots=False)["json"]).read_text())["modes"]
    assert res["agents"] == ["sharp", "uniform"] and res["events"] == 4  # `extra` and e4 are in one run only
    ep_rows = pl.read_parquet(ep / "forecasts.parquet").to_dicts()
    wo_rows = pl.read_parquet(wo / "forecasts.parquet").to_dicts()
    rows = {(r["agent"], r["mode"]): r for r in res["rows"]}
    for value in ("brier", "accuracy", "log_vs_market"):
        e = _event_mean([r for r in ep_rows if r["event_id"] in WORLD_EVENTS], "sharp", value)
        w = _event_mean(wo_rows, "sharp", value)
        assert rows[("sharp", "episode")][value]["value"] == pytest.approx(np.mean(list(e.values())), abs=1e-12)
        assert rows[("sharp", "world")][value]["value"] == pytest.approx(np.mean(list(w.values())), abs=1e-12)
    # the two modes differ here, so a row computed from the other run's forecasts could not pass
    assert abs(rows[("sharp", "world")]["brier"]["value"] - rows[("sharp", "episode")]["brier"]["value"]) > 1e-3
    assert rows[("sharp", "world")]["n_forecasts"] == 11 and rows[("sharp", "episode")]["n_forecasts"] == 23
    assert rows[("sharp", "world")]["time_weighted_brier"]["value"] == pytest.approx(0.2 + 0.015)
    assert rows[("sharp", "episode")]["time_weighted_brier"] is None
    # paired: on the cells both scored (e3 step 4 is missing in the world run), world - episode
    cells = {(r["event_id"], r["step"]) for r in wo_rows if r["agent"] == "sharp" and not r["missing"]}
    e = _event_mean(ep_rows, "sharp", "brier", cells)
    w = _event_mean(wo_rows, "sharp", "brier", cells)
    paired = {r["agent"]: r for r in res["paired"]}
    assert paired["sharp"]["cells"] == len(cells) == 11
    assert paired["sharp"]["brier"]["value"] == pytest.approx(np.mean([w[k] - e[k] for k in w]), abs=1e-12)
    assert paired["uniform"]["brier"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert paired["uniform"]["brier"]["significant"] is False


def test_companion_is_found_only_when_the_runs_compare(tmp_path):
    ep, wo = write_pair(tmp_path / "runs")
    assert find_companion(wo, json.loads((wo / "run.json").read_text())) == ep
    meta = json.loads((ep / "run.json").read_text())
    assert find_companion(ep, meta) == wo
    other = json.loads((wo / "run.json").read_text())
    assert incompatibility(meta, {**other, "corpus_snapshot_id": "another"}).startswith("corpus_snapshot_id differs")
    assert "env.memory" in incompatibility(meta, {**other, "config": {"env": {"memory": False}}})
    assert incompatibility(meta, {**other, "agents": [{"name": "base_rate", "label": "sharp"}]}).startswith("no agent")
    assert incompatibility(meta, meta) == "both runs are episode runs"
    # a world run alone says how to get the comparison; an explicit run that does not compare is an error
    (wo / "run.json").write_text(json.dumps({**other, "corpus_snapshot_id": "another"}))
    md = Path(build_report(wo, plots=False)["markdown"]).read_text()
    assert "No episode run of the same agents" in md
    with pytest.raises(RunError, match="corpus_snapshot_id differs"):
        build_report(wo, plots=False, compare=ep)
    assert "## Episode and world mode side by side" not in Path(build_report(ep, plots=False)["markdown"]).read_text()


def test_report_cli_compares_a_run_given_by_id_and_can_leave_it_out(tmp_path, capsys):
    from forecast_env.cli.main import main

    ep, wo = write_pair(tmp_path / "ws" / "runs")
    (tmp_path / "ws" / "runs" / "x").mkdir()  # not a run: ignored by the search
    assert main(["report", "--workspace", str(tmp_path / "ws"), "--run-id", wo.name, "--compare", ep.name]) == 0
    assert f"Episode run `{ep.name}` and world run `{wo.name}`" in capsys.readouterr().out
    assert main(["report", "--run", str(wo), "--no-compare"]) == 0
    assert "## Episode and world mode side by side" not in capsys.readouterr().out
    assert main(["report", "--run", str(wo), "--compare", str(tmp_path / "ws" / "runs" / "x")]) == 2
    assert "not a finished run directory" in capsys.readouterr().err


def test_side_by_side_plot_is_embedded_with_a_legend(tmp_path):
    from forecast_env.eval.report.plots import figure_modes

    _, wo = write_pair(tmp_path / "runs")
    paths = build_report(wo)
    assert any(Path(p).name == "modes.png" for p in paths["plots"])
    assert "![Episode and world mode side by side](plots/modes.png)" in Path(paths["markdown"]).read_text()
    fig = figure_modes(json.loads(Path(paths["json"]).read_text()))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["episode: Brier", "world: Brier", "world: time-weighted Brier"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["sharp", "uniform"]
