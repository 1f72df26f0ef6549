"""Audit check 4 `text` (docs/design.md §8): the detector's precision and recall on planted sentences, and
FAIL on a leaky description."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from forecast_env.eval.audit.run import FAIL, run_audit
from forecast_env.eval.audit.text import detect, question_cues
from tests.support.audit_data import FAST

SHOWN = date(2026, 4, 10)
BINARY = question_cues("Will Maria Lopez win the Springfield mayoral election?", ["Yes", "No"], "binary",
                       date(2026, 3, 1))
MULTI = question_cues("Who will win the 2026 Springfield mayoral election?", ["Maria Lopez", "Tom Reed", "Other"],
                      "multi", date(2026, 3, 1))
RATES = question_cues("Will the Central Bank cut interest rates in April?", ["Yes", "No"], "binary",
                      date(2026, 3, 1))

AWARD = question_cues("Which film will win Best Picture at the 2026 Golden Lantern Awards?",
                      ["Night over the River", "The Silver Meadow"], "multi", date(2026, 3, 1))
LIGHTS = question_cues("Northern Lights Film Awards 2026: Best Picture Winner", ["The Silver Meadow", "Night"],
                       "multi", date(2026, 3, 1))
DEAL = question_cues("Will Wexford Robotics complete its acquisition of Bluepeak Logistics by May 3?", ["Yes", "No"],
                     "binary", date(2026, 3, 1))

LEAKY = [
    ("On April 20, 2026, Maria Lopez won the Springfield mayoral election by a wide margin.", BINARY),
    ("Update (2026-04-22): Tom Reed was declared the winner after the count finished.", MULTI),
    ("Maria Lopez won the Springfield mayoral election, officials said.", MULTI),
    ("Tom Reed was elected mayor of Springfield.", MULTI),
    ("The Central Bank cut interest rates by half a point.", RATES),
    ("Last updated: April 15, 2026.", None),
    ("Voters went to the polls on April 14 and turnout was high.", None),
    ("The council approved the budget on April 18.", None),
    ("Tom Reed has won the Springfield election.", MULTI),
    ("The Silver Meadow won Best Picture at the Golden Lantern Awards.", AWARD),
    ("The Silver Meadow won Best Picture at the Northern Lights Film Awards on Sunday.", LIGHTS),
    ("Wexford Robotics completed its acquisition of Bluepeak Logistics.", DEAL),
]
CLEAN = [
    ("The vote is scheduled for April 20, 2026.", MULTI),
    ("Maria Lopez is expected to win the Springfield mayoral election.", MULTI),
    ("This market will resolve to Yes if Maria Lopez wins the election held on April 20, 2026.", BINARY),
    ("Maria Lopez won the endorsement of the Springfield teachers union.", MULTI),
    ("Tom Reed won the primary in 2025.", MULTI),
    ("The Central Bank cut interest rates last year, on March 3, 2025.", RATES),
    ("Polls close on April 20 at 8 p.m.", MULTI),
    ("The hearing was postponed to April 22.", None),
    ("Lopez leads Reed by five points ahead of the April 20 vote.", MULTI),
    ("The Central Bank could cut interest rates in April.", RATES),
    ("The election was held on April 2, 2026.", MULTI),
    ("Officials said on May 2 the count would take a week.", None),
    ("Tom Reed won the debate on Tuesday, according to a snap poll.", MULTI),
    # a resolution names the question's own event: another contest or award is a precursor
    ("Maria Lopez won the mayoral election in neighbouring Shelbyville.", MULTI),
    ("Night over the River took the best film award at the guild awards this month.", AWARD),
    ("The Silver Meadow won the best film award at a major festival this month.", LIGHTS),
    ("Wexford Robotics secured financing to fund the acquisition, people familiar said.", DEAL),
    ("Officials have targeted a date before May 4.", None),
    ("Kickoff for the final on April 19 was confirmed for the evening local time.", None),
    ("Officials confirmed the timetable this week, with the key date fixed for April 28.", None),
]


@pytest.mark.parametrize(("text", "cues"), LEAKY)
def test_detector_flags_post_date_facts_and_resolutions(text: str, cues) -> None:
    assert detect(text, SHOWN, cues), text


@pytest.mark.parametrize(("text", "cues"), CLEAN)
def test_detector_does_not_count_previews_schedules_or_older_facts(text: str, cues) -> None:
    assert detect(text, SHOWN, cues) == [], text


def test_detector_reads_dates_without_a_year_from_the_text_s_own_day() -> None:
    # written on 2025-12-30, "January 3" is 2026-01-03; shown on 2026-01-10 it is in the past
    assert detect("The court ruled on January 3.", date(2026, 1, 10), None, written_on=date(2025, 12, 30)) == []
    assert detect("The court ruled on January 3.", date(2026, 1, 1), None, written_on=date(2025, 12, 30))


def test_text_check_fails_on_a_leaky_description(ws_copy: Path) -> None:
    path = ws_copy / "events" / "events.parquet"
    events = pl.read_parquet(path)
    rows = []
    for r in events.iter_rows(named=True):
        later = (r["close_day"] + timedelta(days=1)).strftime("%B %d, %Y").replace(" 0", " ")
        r["description"] = (f"The result was confirmed on {later}: {r['label']} was declared the winner.\n\n"
                            + (r["description"] or ""))
        rows.append(r)
    pl.DataFrame(rows, schema=events.schema).write_parquet(path)
    res = run_audit(ws_copy, "eval", checks=["text"], settings=FAST).check("text")
    assert res.verdict == FAIL
    assert res.figures["flagged_share"] > 0.9
    assert any(ex["source"] == "description" for ex in res.examples)
