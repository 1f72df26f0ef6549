"""The dry-run plan's rates and the quality-profile switch (issue 30 items 1 and 4): every rate comes
from the data file forecast_env/rates.json with the benchmark command that measures it (its script
exists), the date and the machine state; the stage lines add up to the total; the plan says what
switching the default `news` profile to `paper` would drop, from a build's parts when there is one."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from forecast_env.config import load_config
from forecast_env.corpus_build.body import BODY_MODES
from forecast_env.corpus_build.pipeline import build_corpus
from forecast_env.corpus_build.rates import MERGE_SECONDS_PER_MILLION
from forecast_env.rates import MACHINE_STATES, read_rates
from forecast_env.recipe import PLAN_RATES, load_recipe, plan_recipe, render_plan
from tests.support.warc_data import SCORES, Page, english_body, write_warc

REPO = Path(__file__).resolve().parents[2]


def test_every_rate_names_its_benchmark_script_date_and_machine_state() -> None:
    rates = read_rates()
    assert set(PLAN_RATES) - {"merge"} <= set(rates)
    for key, rate in {**rates, **PLAN_RATES}.items():
        assert rate.value > 0 and rate.unit and rate.measured_on and rate.section, key
        assert (REPO / rate.script_path()).is_file(), f"rate {key}: its script {rate.script_path()} does not exist"
        assert rate.script_path() == f"benchmarks/{rate.script()}", key
        assert date.fromisoformat(rate.date).isoformat() == rate.date and rate.state in MACHINE_STATES, key
    # the merge's rate is the model corpus_build.rates uses, not a copy that could drift
    assert PLAN_RATES["merge"].value == pytest.approx(sum(MERGE_SECONDS_PER_MILLION.values()))


@pytest.mark.parametrize("mode", BODY_MODES)
def test_every_body_mode_has_a_measured_extract_rate(tmp_path: Path, mode: str) -> None:
    """The planner cites `extract.<mode>` for the configured body path: a mode without a rate crashed it."""
    plan = plan_recipe(load_recipe("dojo", [f"corpus.extract.body_mode={mode}"]), tmp_path / "ws", offline=True)
    corpus = next(s for s in plan.stages if s["stage"] == "corpus")
    assert f"extract.{mode}" in corpus["rates"] and f"{mode} body" in corpus["basis"]


def test_dojo_plan_lines_add_up_and_each_costly_stage_names_its_command(tmp_path: Path) -> None:
    plan = plan_recipe(load_recipe("dojo"), tmp_path / "ws", offline=True)
    text = render_plan(plan)
    rows = [ln.split() for ln in text.splitlines() if ln.startswith("  ") and ln.split()[0] in
            {s["stage"] for s in plan.stages} and len(ln.split()) > 1 and re.fullmatch(r"[\d.]+", ln.split()[1])]
    assert [r[0] for r in rows] == [s["stage"] for s in plan.stages]
    shown = sum(float(r[1]) for r in rows)
    total = float(re.search(r"total: ([\d,]+) core-hours", text).group(1).replace(",", ""))
    assert abs(shown - total) <= 0.05 * len(rows) + 0.5  # each line rounded to 0.1, the total to 1
    assert plan.core_hours == pytest.approx(sum(s["core_hours"] for s in plan.stages))
    assert round(plan.core_hours) == total
    listed = {ln.split("]")[0].strip(" ["): ln for ln in text.splitlines() if re.match(r"  \[\d+\] ", ln)}
    for stage in plan.stages:
        if stage["core_hours"] > 0.01 * plan.core_hours:
            assert stage["rates"], f"{stage['stage']}: a costly stage with no measured rate"
        for key in stage["rates"]:
            n = str(list(PLAN_RATES).index(key) + 1)
            assert f"{PLAN_RATES[key].script()} [" in stage["basis"] and n in stage["basis"], (stage, key)
            assert listed[n].endswith(PLAN_RATES[key].command)  # the plan prints the command itself
    d = plan.to_dict()
    assert d["core_hours"] == plan.core_hours and set(d["rates"]) == set(plan.rates)
    # the default profile is news: the kept count is the paper's rate scaled by the measured keep shares
    corpus = next(s for s in plan.stages if s["stage"] == "corpus")
    assert {"keep.news", "keep.paper"} <= set(corpus["rates"])
    paper = plan_recipe(load_recipe("dojo", ["corpus.quality.profile=paper"]), tmp_path / "ws", offline=True)
    index = {p: next(s["core_hours"] for s in pl_.stages if s["stage"] == "index") for p, pl_ in
             (("news", plan), ("paper", paper))}
    ratio = PLAN_RATES["keep.news"].value / PLAN_RATES["keep.paper"].value
    assert index["news"] == pytest.approx(index["paper"] * ratio)


def test_no_build_the_plan_gives_the_expected_share(tmp_path: Path) -> None:
    plan = plan_recipe(load_recipe("small"), tmp_path / "ws", offline=True)
    assert plan.profile["active"] == "news" and plan.profile["from"] == "expected"
    assert plan.profile["share"] == pytest.approx(1 - PLAN_RATES["keep.paper"].value / PLAN_RATES["keep.news"].value)
    line = next(ln for ln in render_plan(plan).splitlines() if "quality profile" in ln)
    assert "news (the default)" in line and "--set quality.profile=paper" in line and "no build" in line
    assert f"{100 * plan.profile['share']:.1f}%" in line and "corpus/quality_profile_keep.py [7, 8]" in line
    same = plan_recipe(load_recipe("small", ["corpus.quality.profile=paper"]), tmp_path / "ws", offline=True)
    assert same.profile["from"] == "same profile" and "keep.paper" not in same.rates


def test_a_build_the_plan_counts_from_the_parts(tmp_path: Path) -> None:
    warc = write_warc(tmp_path / "w.warc.gz", [
        Page("https://news.example.com/scores", title="Premier League results and table", body=SCORES,
             published="2025-04-12T20:00:00Z"),
        Page("https://news.example.com/plain", title="Council approves the budget plan", body=english_body(77),
             published="2025-04-12T09:00:00Z"),
        Page("https://news.example.com/short", title="Short", body="The council met on Tuesday evening.",
             published="2025-04-12T20:00:00Z"),
    ])
    ws = tmp_path / "ws"
    build_corpus([warc], ws, workers=1, progress=False)  # the default: news
    plan = plan_recipe(load_recipe("small"), ws, offline=True)
    assert plan.profile == {"active": "news", "to": "paper", "from": "parts", "built_with": "news",
                            "workspace": str(ws), "kept": 2, "drops": 1, "by_reason": {"gopher_alpha_words": 1},
                            "share": 0.5}
    line = next(ln for ln in render_plan(plan).splitlines() if "quality profile" in ln)
    assert "1 of the 2 kept articles (50.0%)" in line and "gopher_alpha_words 1" in line
    # a paper build in the same workspace (the merge only): the store is paper's, so the plan counts
    # news's quality passes that paper drops, from the parts alone
    build_corpus([warc], ws, config=load_config("corpus", overrides=["quality.profile=paper"]), workers=1,
                 progress=False)
    again = plan_recipe(load_recipe("small"), ws, offline=True).profile
    assert (again["from"], again["built_with"], again["drops"], again["by_reason"]) == (
        "parts, quality stage", "paper", 1, {"gopher_alpha_words": 1})


PLAN_START = "```\n$ forecast-env build --recipe dojo --workspace ws --dry-run --offline\n"
MONTHS_ELIDED = "  ...             (one line per month, 2025-03 .. 2026-05)"
RATES_ELIDED = "  ...             (one line per cited rate: its value, what it was measured on, its benchmark command)"


def _plan_block(plan_text: str, short: bool) -> str:
    """The plan as a doc shows it: whole (docs/recipes.md), or without the months and commands (README)."""
    lines = plan_text.splitlines()
    if short:
        head = lines[:3] + [MONTHS_ELIDED]
        rest = [ln for ln in lines[3:] if not re.match(r"  20\d\d-\d\d ", ln) and not re.match(r"  \[\d+\] ", ln)]
        at = next(i for i, ln in enumerate(rest) if ln.startswith("  rates, from"))
        lines = head + rest[:at + 1] + [RATES_ELIDED] + rest[at + 1:]
    return "\n".join(lines) + "\n"


def test_docs_show_todays_dojo_plan(tmp_path: Path) -> None:
    """README.md and docs/recipes.md show the plan this code prints (UPDATE_GOLDEN=1 rewrites them:
    `.venv/bin/python tests/golden/regenerate.py --no-demo`)."""
    import os

    text = render_plan(plan_recipe(load_recipe("dojo"), tmp_path / "ws", offline=True))
    for path, short in ((REPO / "README.md", True), (REPO / "docs" / "recipes.md", False)):
        doc = path.read_text()
        a = doc.index(PLAN_START) + len(PLAN_START)
        b = doc.index("```\n", a)
        want = _plan_block(text, short)
        if os.environ.get("UPDATE_GOLDEN") == "1":
            path.write_text(doc[:a] + want + doc[b:])
            doc, b = path.read_text(), a + len(want)
        assert doc[a:b] == want, (f"{path.name} shows another dojo plan than the code prints; rerun "
                                  "`.venv/bin/python tests/golden/regenerate.py --no-demo` and review the diff")
