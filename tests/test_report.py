"""Report: golden Markdown of a fixed hand-made run; HTML self-contained with embedded PNG plots."""

from __future__ import annotations

import os
from pathlib import Path

from _eval_data import write_run
from forecast_env.eval.report import build_report

GOLDEN = Path(__file__).parent / "golden" / "report.md"


def test_markdown_matches_golden(tmp_path):
    run_dir = write_run(tmp_path / "run")
    paths = build_report(run_dir, plots=False)
    md = Path(paths["markdown"]).read_text()
    if os.environ.get("UPDATE_GOLDEN") == "1" or not GOLDEN.exists():
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(md)
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
