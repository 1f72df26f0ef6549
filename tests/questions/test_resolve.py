"""The resolution checks on planted votes: every bad vote is rejected with its reason, every clean vote counts,
and the verdict follows the configured vote (three resolvers, a fourth breaks ties)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from forecast_env.questions.records import UNRESOLVABLE, Draft, Evidence, Vote
from forecast_env.questions.resolve import check_vote, decide, needs_tiebreak, tally
from forecast_env.retrieval import Searcher
from tests.support.question_data import WorldFacts, first_sentence, world_facts


@pytest.fixture(scope="module")
def facts(questions_world: Path) -> WorldFacts:
    return world_facts(questions_world)


@pytest.fixture(scope="module")
def searcher(questions_world: Path) -> Searcher:
    s = Searcher.open(questions_world / "ws")
    yield s
    s.close()


def _case(facts: WorldFacts) -> tuple[str, dict, Draft, dict, dict]:
    """An event with an outcome report and a news article before the question date."""
    for eid, ev in sorted(facts.events.items()):
        reports, news = facts.reports.get(eid), facts.news.get(eid)
        if reports and news:
            d = news[0]["day"] + timedelta(days=1)
            dr = Draft(qid="p-test", route="prospective", date=d, resolution_date=date.fromisoformat(ev["close_day"]),
                       question="Q?", options=list(ev["options"]), criteria="c")
            return eid, ev, dr, reports[0], news[0]
    raise AssertionError("no event with both an outcome report and earlier news")


def test_planted_bad_votes_are_rejected_with_their_reason_and_clean_votes_count(facts: WorldFacts,
                                                                                searcher: Searcher) -> None:
    _, ev, dr, rep, early = _case(facts)
    until = dr.resolution_date + timedelta(days=7)
    q = first_sentence(rep["body"])
    planted = {
        "clean": Vote("r0", ev["label"], [Evidence(rep["doc_id"], q)]),
        "clean_retyped": Vote("r1", ev["label"], [Evidence(rep["doc_id"], "  " + q.upper().replace(" ", "  "))]),
        "fabricated_quote": Vote("r2", ev["label"], [Evidence(rep["doc_id"], "the committee declared a clear winner today")]),
        "evidence_before_D": Vote("r3", ev["label"], [Evidence(early["doc_id"], first_sentence(early["body"]))]),
        "unknown_article": Vote("r4", ev["label"], [Evidence("0000000000000000", q)]),
        "no_evidence": Vote("r5", ev["label"], []),
        "unreadable": Vote("r6", None),
        "short_quote": Vote("r7", ev["label"], [Evidence(rep["doc_id"], q[:5])]),
    }
    got = {k: check_vote(v, dr, searcher, until, 12).problem for k, v in planted.items()}
    assert got == {"clean": None, "clean_retyped": None, "fabricated_quote": "fabricated_quote",
                   "evidence_before_D": "evidence_before_D", "unknown_article": "unknown_article",
                   "no_evidence": "no_evidence", "unreadable": "unreadable", "short_quote": "fabricated_quote"}
    # an article visible only after R + g cannot be cited either (the window ends there)
    late = check_vote(Vote("r8", ev["label"], [Evidence(rep["doc_id"], q)]), dr, searcher, rep["day"] - timedelta(days=1), 12)
    assert late.problem == "unknown_article"
    # "unresolvable" needs no quote
    assert check_vote(Vote("r9", UNRESOLVABLE, []), dr, searcher, until, 12).valid


def _v(answer: str | None, ok: bool = True) -> Vote:
    return Vote("r", answer, [], None if ok else "fabricated_quote")


@pytest.mark.parametrize(("votes", "verdict", "tiebreak"), [
    (["A", "A", "A"], "A", False),
    (["A", "A", "B"], "A", False),  # a wrong minority vote is outvoted
    (["A", "B", "C"], None, True),
    (["A", "B", ("A", False)], None, True),  # an invalid vote does not count toward a majority
    (["A", "B", "C", "A"], "A", True),  # the tie-breaker decides
    (["A", "B", "C", "D"], None, True),  # still split
    ([("A", False), ("A", False), "A", "A"], "A", True),  # two valid agreeing votes with the tie-breaker
    ([("A", False), ("A", False), ("A", False), "A"], None, True),  # one valid vote is not a verdict
    ([UNRESOLVABLE, UNRESOLVABLE, "A"], UNRESOLVABLE, False),
])
def test_the_vote(votes: list, verdict: str | None, tiebreak: bool) -> None:
    vs = [_v(*v) if isinstance(v, tuple) else _v(v) for v in votes]
    assert needs_tiebreak(vs[:3], 3) == tiebreak
    assert tally(vs, 3) == verdict


def test_decide_drops_with_the_reason_and_sets_the_first_report_day() -> None:
    d0 = date(2026, 3, 1)

    def draft(route: str = "prospective", answer: str | None = None) -> Draft:
        return Draft(qid="q", route=route, date=d0, resolution_date=d0 + timedelta(days=20), question="Q?",
                     options=["A", "B"], criteria="c", answer=answer)

    def vote(a: str, day: int) -> Vote:
        return Vote("r", a, [Evidence("x", "quote", d0 + timedelta(days=day))])

    ok = decide(draft(), [vote("A", 9), vote("A", 5), vote("B", 2)], 3)
    assert ok.status == "resolved" and ok.resolved == "A" and ok.known_day == d0 + timedelta(days=5)
    split = decide(draft(), [vote("A", 9), vote("B", 5), Vote("r", "A", [], "fabricated_quote")], 3)
    assert split.drop is not None and split.drop.reason == "split_vote" and split.status == "dropped"
    none = decide(draft(), [Vote("r", None, [], "unreadable")] * 3, 3)
    assert none.drop is not None and none.drop.reason == "no_valid_votes"
    unres = decide(draft(), [Vote("r", UNRESOLVABLE, [])] * 3, 3)
    assert unres.drop is not None and unres.drop.reason == "unresolvable"
    disputed = decide(draft("retrospective", answer="B"), [vote("A", 9), vote("A", 5), vote("A", 2)], 3)
    assert disputed.drop is not None and disputed.drop.reason == "answer_disputed"
    agreed = decide(draft("retrospective", answer="A"), [vote("A", 9), vote("A", 5), vote("A", 2)], 3)
    assert agreed.drop is None and agreed.resolved == "A"
