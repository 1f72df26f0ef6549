"""Report: golden Markdown of a fixed hand-made run; HTML self-contained with embedded PNG plots."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from forecast_env.eval.report.render import build_report
from tests.support.eval_data import write_reader_run, write_run
from tests.support.paths import GOLDEN

GOLDEN = GOLDEN / "report.md"


def test_markdown_matches_golden(tmp_path):
    run_dir = write_run(tmp_path / "run")
    paths = build_report(run_dir, plots=False)
    md = Path(paths["markdown"]).read_text()
    if os.environ.get("UPDATE_GOLDEN") == "1":  # regenerate on purpose only, then review the diff
        GOLDEN.write_text(md)
    assert GOLDEN.exists(), f"{GOLDEN} is missing; regenerate it on purpose with UPDATE_GOLDEN=1 and review it"
    assert md == GOLDEN.read_text(), "report.md changed; if intended, rerun with UPDATE_GOLDEN=1 and review the diff"
    # the same run built twice gives the same bytes
    assert Path(build_report(run_dir, out=tmp_path / "again", plots=False)["markdown"]).read_text() == md


def test_html_embeds_plots_and_json(tmp_path):
    run_dir = write_run(tmp_path / "run")
    paths = build_report(run_dir)
    html = Path(paths["html"]).read_text()
    assert html.count("data:image/png;base64,") == len(paths["plots"]) >= 4
    assert "src='plots/" not in html
    for p in paths["plots"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert Path(paths["json"]).exists()
    assert "## Skill leaderboard" in Path(paths["markdown"]).read_text()


def test_reader_run_defines_every_diagnostic_and_compares_with_the_close(tmp_path):
    paths = build_report(write_reader_run(tmp_path / "run"), plots=False)
    res = json.loads(Path(paths["json"]).read_text())
    md = Path(paths["markdown"]).read_text()
    assert res["market_comparisons"] == ["log_vs_market", "log_vs_market_close"]
    agents = {r["agent"]: r for r in res["agents"]}
    # uniform: ln(0.5 / 0.55) on the three binary events, ln((1/3) / 0.55) on the two 3-option ones
    expected = (3 * math.log(0.5 / 0.55) + 2 * math.log((1 / 3) / 0.55)) / 5
    assert agents["uniform"]["log_vs_market_close"]["value"] == pytest.approx(expected, abs=1e-9)
    assert "| agent | Brier | accuracy | log vs market (day mean) | log vs market (day close) |" in md
    ev = res["evidence"]
    assert ev["keepers"] == ["reader", "sharp", "skim"]
    per = {r["agent"]: r for r in ev["per_agent"]}
    for agent in ev["keepers"]:
        assert math.isfinite(per[agent]["kappa"]) and per[agent]["kappa_note"] is None
    assert per["uniform"]["kappa"] is None and per["uniform"]["kappa_note"]
    assert all(math.isfinite(v) for v in ev["spearman"].values())
    assert "(undefined" not in md and ev["quartiles"]


def _figures(tmp_path):
    from forecast_env.eval.report.plots import FIGURES

    res = json.loads(Path(build_report(write_reader_run(tmp_path / "run"), plots=False)["json"]).read_text())
    return res, {name: make(res) for name, make in FIGURES.items()}


def test_every_panel_has_a_legend_and_no_labels_overlap(tmp_path):
    res, figs = _figures(tmp_path)
    assert figs.pop("modes") is None  # an episode run alone: nothing to put beside it
    assert all(f is not None for f in figs.values())
    for name, fig in figs.items():
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            assert ax.get_legend() is not None, f"{name}: a panel without a legend"
            boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
            for i, a in enumerate(boxes):
                assert not any(a.overlaps(b) for b in boxes[i + 1:]), f"{name}: overlapping labels"
    # axes of scores fit the data: Brier of the thirds is 0.02-0.6 here, the axis must not start far below
    lows = [r["brier"]["lo"] for r in res["step_thirds"] if r["brier"]["lo"] is not None]
    highs = [r["brier"]["hi"] for r in res["step_thirds"] if r["brier"]["hi"] is not None]
    y0, y1 = figs["thirds"].axes[0].get_ylim()
    assert min(lows) - 0.1 * (max(highs) - min(lows)) <= y0 <= min(lows)
    assert max(highs) <= y1 <= max(highs) + 0.1 * (max(highs) - min(lows))
    # the kappa-G panel tells agents apart by marker, one legend entry per keeper
    right = figs["evidence"].axes[1]
    assert [t.get_text() for t in right.get_legend().get_texts()] == res["evidence"]["keepers"]
