"""Content-level leakage screen (docs/design.md §2): past events / update stamps after t flagged, previews not."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from forecast_env.corpus_build.leakage import find_market_quote, screen_leakage

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


# Market quotes (docs/design.md §2.market quotes): sentences in the style of real reports.
MARKET_QUOTES = [
    "Polymarket gives Smith a 70% chance of winning the nomination.",
    "Bettors on Kalshi put the odds at 3-1 that the Fed holds rates in June.",
    "Traders on PredictIt are pricing a Democratic win at 62 cents.",
    "According to Polymarket, the odds of a rate cut in September stand at 85 percent.",
    "Bookmakers make City the 5/2 favourites to lift the trophy.",
    "Smith is now the betting favorite at +150 on DraftKings.",
    "On the prediction market Polymarket, contracts on a ceasefire were trading at 23 cents on Tuesday.",
    "The odds on Polymarket swung from 30% to 70% overnight.",
    "Betfair punters have her odds-on to win.",
    "Polymarket, which had given the incumbent a 60 percent chance, now shows him trailing.",
    "Prediction markets put the probability of a shutdown at 41%.",
]
NOT_MARKET_QUOTES = [
    "Polymarket, the crypto-based prediction market, raised $45 million in a funding round led by Founders Fund.",
    "Polymarket's trading volume rose 20% in October, the company said.",
    "Kalshi won a court ruling in 2024 allowing it to list election contracts.",
    "A Reuters/Ipsos poll gives Smith a 45% share of the vote, with a margin of error of 3 percentage points.",
    "Smith has a 70% chance of winning, according to the Silver Bulletin model.",
    "Users bet $3.3 billion on Polymarket during the election, 40% more than analysts expected.",
    "The Lakers beat the Celtics 110-102 on Sunday.",
    "The SEC and the CFTC are investigating whether Polymarket allowed U.S. users to trade.",
    "The poll found 52 percent of voters favor the measure, while 41 percent oppose it.",
    "Regulators fined Kalshi $1.3 million for 2 violations, a 10% cut from the initial penalty.",
    "The odds of a recession have risen, economists said, putting the probability at 35%.",
    "Polymarket users placed bets on 1,200 markets in 2025.",
    "DraftKings stock price fell 5% after the earnings call.",
    "There are manifold reasons to doubt the 60% figure, the odds say nothing.",
    "Bookmakers shortened the odds on the Hornets after 2 training sessions.",  # a move, no level quoted
]


@pytest.mark.parametrize("sentence", MARKET_QUOTES)
def test_market_quote_found(sentence: str) -> None:
    body = f"The council met on Monday. {sentence} Officials declined to comment."
    assert find_market_quote(body) == sentence
    assert find_market_quote("Nothing here.", title=sentence) == sentence


@pytest.mark.parametrize("sentence", NOT_MARKET_QUOTES)
def test_company_news_and_polls_are_not_market_quotes(sentence: str) -> None:
    assert find_market_quote(f"The council met on Monday. {sentence} Officials declined to comment.") is None


@pytest.mark.slow
def test_micro_world_market_quotes(micro_corpus, micro_truth) -> None:
    """Every kept page of the sample world carries the market_quote flag truth.json gives: the planted
    quotes are flagged, the story about the venues and the poll is not, nor is any other page."""
    import json

    import polars as pl

    arts = pl.concat([pl.read_parquet(p) for p in sorted((micro_corpus / "corpus" / "articles").glob("*.parquet"))])
    got = dict(zip(arts["url"].to_list(), arts["market_quote"].to_list()))
    want = {u: w["market_quote"] for u, w in micro_truth["articles"].items() if w["expect"] == "keep"}
    assert {u: got[u] for u in want} == want
    assert sum(want.values()) >= 1
    assert any(w.get("note") == "market_mention" and w["expect"] == "keep" for w in micro_truth["articles"].values())
    report = json.loads((micro_corpus / "corpus" / "report.json").read_text())
    assert report["market_quotes"] == sum(want.values())
