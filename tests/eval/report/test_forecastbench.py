"""ForecastBench leaderboard scoring: the naive rows by hand on the fixture, and against the published board."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import date, datetime
from pathlib import Path

import polars as pl
import pytest

from forecast_env.envs.events.forecastbench import read_rounds
from forecast_env.eval.report.forecastbench import items, naive_rows, pool_rounds, published_naive_rows

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "forecastbench"
#: a bare git mirror of forecastingresearch/forecastbench-datasets (FORECASTBENCH_MIRROR); the comparison with the
#: published leaderboard on the whole repository is benchmark-marked (`make bench`), the fixture tests run in make test
MIRROR = Path(os.environ.get("FORECASTBENCH_MIRROR", "/work/.mirror/forecastingresearch+forecastbench-datasets/repo"))


def test_items_drop_combos_and_unresolved() -> None:
    frame = items(read_rounds(FIXTURE))
    # tests/fixtures/forecastbench/README.md: 544 dataset + 127 market items
    assert frame.height == 671
    assert frame.filter(frame["kind"] == "dataset").height == 544
    assert not frame["id"].str.starts_with("[").any()
    assert frame.select(pl.col("horizon").min()).item() > 0


def test_naive_rows_match_hand_computation() -> None:
    rows = {r["model"]: r for r in naive_rows(items(read_rounds(FIXTURE)))}
    # README.md: dataset 189 of 544 resolved to 1, market 31 of 127; every resolved_to is 0 or 1
    a0, a1, half = rows["Always 0"], rows["Always 1"], rows["Always 0.5"]
    assert (a0["n_dataset"], a0["n_market"], a0["n_overall"]) == (544, 127, 671)
    assert a0["brier_dataset"] == pytest.approx(189 / 544)
    assert a0["brier_market"] == pytest.approx(31 / 127)
    assert a0["brier_overall"] == pytest.approx(0.29576047938860583)
    assert a0["index_dataset"] == pytest.approx(41.05710640049682)
    assert a1["brier_dataset"] == pytest.approx(355 / 544)
    assert a1["brier_market"] == pytest.approx(96 / 127)
    assert a1["brier_overall"] == pytest.approx(0.7042395206113942)
    assert half["brier_overall"] == 0.25 and half["index_overall"] == pytest.approx(50.0)


def test_pool_rounds_rules() -> None:
    rounds = read_rounds(FIXTURE)
    # resolved rows, combination rows counted: 2025-08-31 subset 120 dataset / 120 market,
    # 2026-07-19 243 / 45, 2026-08-02 241 / 22; the code needs >= 225 dataset and >= 50 market
    assert pool_rounds(rounds, date(2026, 12, 31)) == []
    loose = {"min_market": 40, "min_dataset": 100}
    assert [r.due_date for r in pool_rounds(rounds, date(2026, 12, 31), **loose)] == [
        "2025-08-31",
        "2026-07-19",
    ]
    # 50 days: a round due 2026-07-19 is pooled from 2026-09-07 on
    assert [r.due_date for r in pool_rounds(rounds, date(2026, 9, 6), **loose)] == ["2025-08-31"]
    assert [r.due_date for r in pool_rounds(rounds, date(2026, 9, 7), **loose)] == [
        "2025-08-31",
        "2026-07-19",
    ]


def test_published_naive_rows_fixture() -> None:
    rows = {
        r["model"]: r for r in published_naive_rows(FIXTURE / "leaderboards/csv/leaderboard_baseline.csv")
    }
    assert rows["Always 0"]["n_dataset"] == 32640 and rows["Always 1"]["index_overall"] == 16.7


def _extract(tmp_path: Path) -> Path:
    """The mirror's resolution sets, leaderboard CSV and baseline HTML (its "Updated" date) into a folder."""
    git = ["git", f"--git-dir={MIRROR}"]
    names = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", "HEAD", "datasets/resolution_sets"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in [
        *names,
        "leaderboards/csv/leaderboard_baseline.csv",
        "leaderboards/html/leaderboard_baseline.html",
    ]:
        out = tmp_path / name
        out.parent.mkdir(parents=True, exist_ok=True)
        blob = subprocess.run([*git, "show", f"HEAD:{name}"], capture_output=True)
        if blob.returncode == 0:
            out.write_bytes(blob.stdout)
    return tmp_path


@pytest.mark.benchmark
@pytest.mark.skipif(not MIRROR.is_dir(), reason="no forecastbench-datasets mirror: set FORECASTBENCH_MIRROR")
def test_rebuilt_naive_rows_match_published_leaderboard(tmp_path: Path) -> None:
    root = _extract(tmp_path)
    html = (root / "leaderboards/html/leaderboard_baseline.html").read_text()
    updated = re.search(r"Updated ([A-Za-z]+)\. (\d+), (\d{4})", html)  # "Updated Aug. 21, 2026"
    assert updated is not None
    as_of = datetime.strptime(" ".join(updated.groups()), "%b %d %Y").date()
    rebuilt = {r["model"]: r for r in naive_rows(items(pool_rounds(read_rounds(root), as_of)))}
    published = {
        r["model"]: r for r in published_naive_rows(root / "leaderboards/csv/leaderboard_baseline.csv")
    }
    assert set(published) == set(rebuilt) == {"Always 0", "Always 1", "Always 0.5"}
    for model, pub in published.items():
        for kind in ("dataset", "market", "overall"):
            assert abs(rebuilt[model][f"index_{kind}"] - pub[f"index_{kind}"]) <= 0.2, (model, kind)
            assert abs(rebuilt[model][f"n_{kind}"] - pub[f"n_{kind}"]) <= 0.01 * pub[f"n_{kind}"], (
                model,
                kind,
            )
