"""Content-level leakage screen (SPEC 2.7): past events / update stamps after t flagged, previews not."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from forecast_env.corpus_build.leakage import screen_leakage

T = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)

POSITIVES = [
    ("The Senate voted 52-48 on March 18 to approve the bill.", "past_event:2026-03-18"),
    ("On March 18, the committee approved the measure.", "past_event:2026-03-18"),
    ("The company announced on March 17 that it would merge.", "past_event:2026-03-17"),
    ("Smith won the primary on March 17, 2026.", "past_event:2026-03-17"),
    ("It was announced on March 19 that the deal was off.", "past_event:2026-03-19"),
    ("The bill was approved by the Senate on March 18.", "past_event:2026-03-18"),
    ("The minister said on 20 March that talks had failed.", "past_event:2026-03-20"),
    ("Shares fell 4% on 2026-03-16 after the report.", "past_event:2026-03-16"),
    ("Updated March 20, 2026 at 10:00 a.m.", "updated_stamp:2026-03-20"),
    ("Last updated: 2026-03-16", "updated_stamp:2026-03-16"),
    ("(Updated Mar. 15 with comment from the ministry)", "updated_stamp:2026-03-15"),
    ("Editor's note: This story was updated on March 21 with new figures.", "updated_stamp:2026-03-21"),
    ("Last modified: Friday, March 20, 2026", "updated_stamp:2026-03-20"),
]

NEGATIVES = [
    "Opening box office figures will be reported on March 22.",
    "The bill is to be signed on March 22.",
    "The deal could be announced March 22.",
    "The vote is scheduled for March 14.",
    "The vote scheduled for March 18 could change the race.",
    "Lawmakers will vote on March 18.",
    "The hearing is set to take place on March 20.",
    "A decision is expected on March 19.",
    "Fans are ready for next Tuesday's match.",
    "Ahead of the March 18 vote, senators met privately.",
    "The Senate voted on March 10 to approve the bill.",
    "Updated March 14, 2026",
    "Updated March 12, 2026",
    "The company said it would announce results on March 20.",
    "Smith said the vote, which was held last year, takes effect March 20.",
    "The May 20 election will decide the seat.",
    "Officials said the final tally could come on March 19.",
    "Voting closes March 20, officials said.",
    "The Senate passed the bill, which takes effect on March 20.",
    "Lawmakers voted to delay the decision until March 20.",
    "On March 18, the Senate will vote on the bill.",
    "The final is slated for March 22 in London.",
    "The central bank is poised to raise rates on March 18.",
    "Voters may head to the polls in May.",
    "The company updated its guidance in a filing.",
    "Results are due on March 20, the agency said.",
]


@pytest.mark.parametrize("sentence,reason", POSITIVES)
def test_positive_sentences_flagged(sentence: str, reason: str) -> None:
    body = "Officials met on Friday in the capital.\n" + sentence + "\nMore talks followed."
    assert screen_leakage(body, "A headline", T) == (True, reason)


@pytest.mark.parametrize("sentence", NEGATIVES)
def test_previews_and_earlier_events_not_flagged(sentence: str) -> None:
    assert screen_leakage("Officials met in the capital.\n\n" + sentence, None, T) == (False, None)


def test_yearless_dates_roll_over_year_end() -> None:
    t = datetime(2025, 12, 30, tzinfo=UTC)
    assert screen_leakage("The council voted on Jan. 3 to close the plant.", None, t) == (
        True,
        "past_event:2026-01-03",
    )
    t = datetime(2026, 1, 3, tzinfo=UTC)
    assert screen_leakage("The council voted on Dec. 30 to close the plant.", None, t) == (False, None)


def test_same_day_event_and_stamp_not_flagged() -> None:
    t = datetime(2026, 3, 18, 23, 59, tzinfo=UTC)
    body = "Updated March 18, 2026\nThe Senate voted on March 18 to approve the bill."
    assert screen_leakage(body, None, t) == (False, None)


def test_title_is_screened_and_empty_text_is_clean() -> None:
    assert screen_leakage("", "Updated March 20: Senate approves bill", T)[0] is True
    assert screen_leakage("", None, T) == (False, None)
