"""The vetting checks of generated questions (questions/vet.py): planted bad drafts dropped for the right reason,
planted clean drafts kept, on the `micro` sample world's corpus and index and on hand-written texts."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast_env.envs.events.exposure import QuestionText, fold
from forecast_env.questions.records import Draft, Drop, Evidence, Vote
from forecast_env.questions.text import normalize
from forecast_env.questions.vet import (
    distinctive_terms,
    find_duplicates,
    find_exposed,
    market_question_texts,
    post_d_text,
    public_at_d,
    rebalance,
    shingle_jaccard,
    shingles,
)
from forecast_env.retrieval.searcher import Searcher

YES_NO = ["Yes", "No"]


def draft(qid: str, question: str, options: Sequence[str] = ("Yes", "No"), d: date = date(2025, 11, 1),
          r: date | None = None, description: str = "", criteria: str = "", resolved: str | None = None,
          evidence: Sequence[Evidence] = ()) -> Draft:
    votes = [Vote("r1", resolved, list(evidence)), Vote("r2", resolved, [])] if resolved is not None else []
    return Draft(qid=qid, route="prospective", date=d, resolution_date=r or d + timedelta(days=30), question=question,
                 options=list(options), criteria=criteria, description=description, resolved=resolved, votes=votes)


def assert_drop(drop: Drop | None, reason: str) -> Drop:
    assert drop is not None, f"expected a {reason} drop"
    assert drop.stage == "vet" and drop.reason == reason, drop
    return drop


# ---------------------------------------------------------------------------------------------
# the micro world's corpus
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def searcher(micro_index: Path) -> Searcher:
    return Searcher.open(micro_index)


@pytest.fixture(scope="module")
def articles(micro_index: Path) -> pl.DataFrame:
    """The articles the searcher shows (hidden flags left out), oldest first."""
    shards = sorted((micro_index / "corpus" / "articles").glob("*.parquet"))
    df = pl.concat([pl.read_parquet(p, columns=["doc_id", "day", "title", "summary", "body", "leak_flag",
                                                  "market_quote"]) for p in shards])
    return df.filter(~pl.col("leak_flag").fill_null(False) & ~pl.col("market_quote").fill_null(False)).sort(
        ["day", "doc_id"])


def _text(r: dict) -> str:
    return fold(f"{r['title']}\n{r['summary']}\n{r['body']}")


def first_day(articles: pl.DataFrame, term: str) -> date | None:
    """The first day a visible article holds `term` (whole words, case-insensitive)."""
    rx = re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, fold(term).split())) + r"(?!\w)")
    days = [r["day"] for r in articles.iter_rows(named=True) if rx.search(_text(r))]
    return min(days) if days else None


def seen(articles: pl.DataFrame, term: str) -> date:
    """`first_day`, which the planted material needs."""
    d = first_day(articles, term)
    assert d is not None, f"the micro world no longer mentions {term!r}"
    return d


def sentences_of(body: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", body or "") if len(s.strip()) > 40]


def quote_after(articles: pl.DataFrame, d: date, must: str = "") -> Evidence | None:
    """A sentence of an article visible after `d` that no article visible on or before `d` holds."""
    before = "\n".join(normalize(f"{r['title']}\n{r['summary']}\n{r['body']}").casefold()
                       for r in articles.filter(pl.col("day") <= d).iter_rows(named=True))
    for r in articles.filter(pl.col("day") > d).iter_rows(named=True):
        for s in sentences_of(r["body"]):
            if must.casefold() in s.casefold() and normalize(s).casefold() not in before:
                return Evidence(r["doc_id"], s, r["day"])
    return None


# ---------------------------------------------------------------------------------------------
# post_D_text
# ---------------------------------------------------------------------------------------------


def test_distinctive_terms_take_names_options_and_numbers_not_years_or_calendar_words() -> None:
    d = draft("t", "Will more than 1,200 delegates of the Bank of England attend the Harbor Summit in March 2026?",
              ["Yes", "No"], description="On Monday, Delia Halvorsen said 350 seats were left. The summit opens in May.",
              criteria="Resolves Yes if Meridian Research counts more than 1,200 delegates.")
    terms = distinctive_terms(d)
    assert terms[:3] == ["Bank of England", "Harbor Summit", "Delia Halvorsen"]
    assert "Meridian Research" in terms and "1,200" in terms and "350" in terms
    assert not {"March", "May", "Monday", "2026", "Will", "On", "Yes", "No", "The", "Resolves"} & set(terms)
    multi = draft("m", "Who will win the Lunland presidential election?", ["Tomas Reyes", "Julian Falk"])
    assert distinctive_terms(multi)[:3] == ["Tomas Reyes", "Julian Falk", "Lunland"]
    assert len(distinctive_terms(d, max_terms=2)) == 2


def test_a_term_first_seen_after_d_drops_the_draft_and_its_twin_after_that_day_stays(
        searcher: Searcher, articles: pl.DataFrame) -> None:
    first = seen(articles, "Nexora Energy")
    assert first - articles.row(0, named=True)["day"] > timedelta(days=30)  # the plant needs a late name
    q = "Will Nexora Energy announce new plans for its network before the end of the year?"
    bad = assert_drop(post_d_text(draft("bad", q, d=first - timedelta(days=5)), searcher), "post_D_text")
    assert "'Nexora Energy'" in bad.detail and first.isoformat() in bad.detail
    assert post_d_text(draft("twin", q, d=first), searcher) is None  # visible on D itself
    assert post_d_text(draft("twin2", q, d=first + timedelta(days=3)), searcher) is None
    # an option label counts as a term too
    opts = assert_drop(post_d_text(draft("opt", "Which company will report first?", ["Nexora Energy", "Other"],
                                         d=first - timedelta(days=5)), searcher), "post_D_text")
    assert "'Nexora Energy'" in opts.detail


def test_a_term_nowhere_in_the_corpus_proves_nothing(searcher: Searcher, articles: pl.DataFrame) -> None:
    assert first_day(articles, "Zorblax Quantum") is None
    assert post_d_text(draft("nowhere", "Will Zorblax Quantum list its shares by June?", d=date(2025, 11, 1)),
                       searcher) is None
    # before the corpus begins, the corpus cannot tell what was known: the term test is silent
    assert searcher.first_day is not None
    early = searcher.first_day - timedelta(days=10)
    assert post_d_text(draft("early", "Will Nexora Energy announce new plans?", d=early), searcher) is None


def test_a_description_reporting_a_dated_fact_after_d_is_dropped(searcher: Searcher, articles: pl.DataFrame) -> None:
    d = max(seen(articles, "Nexora Energy"), seen(articles, "Bluepeak Logistics"))
    later = d + timedelta(days=4)
    bad = draft("dated", "Will regulators approve the Nexora Energy bid for Bluepeak Logistics?", d=d,
                description=f"The deal was approved on {later.strftime('%B')} {later.day}, {later.year} by the "
                            "regulator.")
    drop = assert_drop(post_d_text(bad, searcher), "post_D_text")
    assert drop.detail.startswith("description: post_date_fact") and later.isoformat() in drop.detail
    stamp = draft("stamp", bad.question, d=d, criteria=f"Last updated {later.isoformat()}: see the regulator's site.")
    assert "update_stamp" in assert_drop(post_d_text(stamp, searcher), "post_D_text").detail
    resolution = draft("res", "Who will win the Lunland presidential election?", ["Tomas Reyes", "Julian Falk",
                                                                                   "Victor Brandt"],
                       d=date(2025, 12, 20), description="Julian Falk won the Lunland presidential election.")
    assert "resolution" in assert_drop(post_d_text(resolution, searcher), "post_D_text").detail


def clean_drafts(articles: pl.DataFrame) -> list[Draft]:
    """Drafts in the style the generator writes, every name seen in the corpus by D, no fact after D."""
    d1 = max(seen(articles, t) for t in ("Nexora Energy", "Bluepeak Logistics", "Silverton"))
    d2 = max(seen(articles, t) for t in ("Lunland", "Tomas Reyes", "Julian Falk", "Victor Brandt"))
    deadline = d1 + timedelta(days=14)
    dl = f"{deadline.strftime('%B')} {deadline.day}, {deadline.year}"
    vote = d2 + timedelta(days=21)
    late = f"{vote.strftime('%B')} {vote.day}, {vote.year}"
    return [
        draft("c1", f"Will Nexora Energy complete its acquisition of Bluepeak Logistics by {dl}?", d=d1, r=deadline,
              description="Nexora Energy has made an offer for Bluepeak Logistics. Regulators in Silverton are "
                          "reviewing the deal, and shareholders are expected to vote before the deadline.",
              criteria=f"Resolves Yes if credible news reports confirm that the acquisition was completed on or "
                       f"before {dl}. Resolves No otherwise. A completion announced after {dl} does not count."),
        draft("c2", "Who will win the Lunland presidential election?", ["Tomas Reyes", "Julian Falk", "Victor Brandt"],
              d=d2, r=d2 + timedelta(days=25),
              description="Lunland elects a president for a five-year term. Polls show a close race between Tomas "
                          "Reyes, Julian Falk and Victor Brandt; the vote is scheduled for later this month.",
              criteria="This question resolves to the candidate declared the winner by the electoral commission of "
                       "Lunland. If no winner is declared by the resolution date, it resolves to the candidate "
                       f"leading the official count. The question resolves based on the official results announced "
                       f"by the electoral commission on {late}."),
        draft("c3", "Will Julian Falk lead the final poll of the Brightmoor Survey Unit before the vote?", d=d2,
              description="Julian Falk won an endorsement from a former president earlier in the campaign.",
              criteria="Resolves Yes if the last published survey of the Brightmoor Survey Unit before polling day "
                       "puts Julian Falk ahead of every rival."),
    ]


def test_clean_drafts_raise_nothing(searcher: Searcher, articles: pl.DataFrame) -> None:
    for c in clean_drafts(articles):
        assert post_d_text(c, searcher) is None, c.qid


# ---------------------------------------------------------------------------------------------
# public_at_D
# ---------------------------------------------------------------------------------------------


def test_an_evidence_quote_visible_before_d_makes_the_answer_public(searcher: Searcher, articles: pl.DataFrame) -> None:
    counts: dict[str, int] = {}
    rows = list(articles.iter_rows(named=True))
    for r in rows:
        for s in set(map(lambda x: normalize(x).casefold(), sentences_of(r["body"]))):
            counts[s] = counts.get(s, 0) + 1
    mid = rows[len(rows) // 2:]
    source, quote = next((r, s) for r in mid for s in sentences_of(r["body"])
                         if counts[normalize(s).casefold()] == 1 and len(s) > 60)
    d = source["day"] + timedelta(days=2)
    bad = draft("public", f"Will the story '{source['title']}' see a follow-up?", d=d, resolved="Yes",
                evidence=[Evidence(source["doc_id"], quote, source["day"])])
    drop = assert_drop(public_at_d(bad, searcher), "public_at_D")
    assert source["doc_id"] in drop.detail and "evidence quote" in drop.detail
    # the same quote rejected by the quote check (problem set) is no evidence
    ignored = draft("ignored", bad.question, d=d, resolved="Yes",
                    evidence=[Evidence(source["doc_id"], quote, source["day"], problem="quote_not_found")])
    assert public_at_d(ignored, searcher) is None
    # the retrospective route: its source article, visible on D, states its own answer
    retro = draft("retro", bad.question, d=d, resolved="Yes")
    retro.route, retro.answer, retro.answer_quote, retro.source_id = "retrospective", "Yes", quote, source["doc_id"]
    assert source["doc_id"] in assert_drop(public_at_d(retro, searcher), "public_at_D").detail


def _settled_sentence(articles: pl.DataFrame) -> tuple[dict, str, str]:
    """An article sentence "<First Last> won a/an/the <words>," and its name and object."""
    rx = re.compile(r"^([A-Z][a-z]+ [A-Z][a-z]+) won ((?:an?|the) [a-z ]+?)[,.]")
    for r in articles.iter_rows(named=True):
        for s in sentences_of(r["body"]):
            m = rx.match(s)
            if m:
                return r, m.group(1), m.group(2)
    raise AssertionError("the micro world has no '<name> won <object>' sentence to plant")


def test_an_article_before_d_stating_the_outcome_makes_the_answer_public(
        searcher: Searcher, articles: pl.DataFrame) -> None:
    source, name, obj = _settled_sentence(articles)
    d = source["day"] + timedelta(days=3)
    late = quote_after(articles, d, must=name)
    assert late is not None
    binary = draft("b", f"Will {name} win {obj}?", d=d, resolved="Yes", evidence=[late])
    drop = assert_drop(public_at_d(binary, searcher), "public_at_D")
    assert "event/" in drop.detail and "won" in drop.detail
    others = ["Ana Moreau", "Alan Brandt"]
    multi = draft("m", f"Who will win {obj}?", [name, *others], d=d, resolved=name, evidence=[late])
    drop = assert_drop(public_at_d(multi, searcher), "public_at_D")
    assert "option/" in drop.detail and source["doc_id"] in drop.detail
    # a settled cue on an option that did not win is not this answer made public
    assert public_at_d(draft("m2", multi.question, multi.options, d=d, resolved=others[0]), searcher) is None
    # nor is a cue on another contest: the sentence does not name this question's event
    assert public_at_d(draft("m3", "Who will win the Zelland national lottery jackpot?", [name, *others], d=d,
                             resolved=name, evidence=[late]), searcher) is None


def test_answers_stated_only_after_d_are_not_public(searcher: Searcher, articles: pl.DataFrame,
                                                    micro_truth: dict) -> None:
    """Every labeled market question of the world, asked on its start day with evidence from after it: kept."""
    n = 0
    for eid, ev in sorted(micro_truth["events"].items()):
        if not ev.get("label"):
            continue
        d = date.fromisoformat(ev["start_day"])
        must = ev["label"] if ev["type"] == "multi" else ""
        late = quote_after(articles, d, must=must)
        clean = draft(eid, ev["title"], ev["options"], d=d, r=date.fromisoformat(ev["close_day"]),
                      resolved=ev["label"], evidence=[late] if late else [])
        assert public_at_d(clean, searcher) is None, eid
        n += 1
    assert n >= 5
    for c in clean_drafts(articles):
        c.resolved = c.options[0]
        assert public_at_d(c, searcher) is None, c.qid
    assert public_at_d(draft("none", "Will it rain?", resolved=None), searcher) is None


# ---------------------------------------------------------------------------------------------
# duplicates
# ---------------------------------------------------------------------------------------------


def orthogonal(texts: list[str]) -> np.ndarray:
    """No two texts alike: only the Jaccard path can join them."""
    return np.eye(len(texts), dtype=np.float32)


def by_table(table: dict[str, int], dim: int = 8) -> Callable[[list[str]], np.ndarray]:
    """Texts mapped to given unit vectors (equal index: cosine 1; else orthogonal)."""
    def embed(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, table[t]] = 1.0
        return out
    return embed


NEXORA = "Will Nexora Energy complete its acquisition of Bluepeak Logistics by November 16?"
NEXORA_REWORDED = "Will the acquisition of Bluepeak Logistics by Nexora Energy be completed by November 16?"
NEXORA_CLOSE = "Will Nexora Energy close its takeover of Bluepeak Logistics before November 16?"
NEXORA_COPY = "Will Nexora Energy complete its acquisition of Bluepeak Logistics by November 20?"
LUNLAND = "Who will win the Lunland presidential election?"
BISONS = "Will the Glenrock Bisons win the National Basketball Circuit final?"
PILOTS = "Will the Harbor City Pilots win the National Basketball Circuit final?"


def test_reworded_copies_are_duplicates_by_the_index_encoder_and_the_earliest_stays(searcher: Searcher) -> None:
    drafts = [draft("a1", NEXORA, d=date(2025, 11, 1)), draft("a2", NEXORA_REWORDED, d=date(2025, 11, 8)),
              draft("a0", NEXORA_CLOSE, d=date(2025, 10, 30)), draft("b", LUNLAND, d=date(2025, 12, 1)),
              draft("c1", BISONS, d=date(2026, 4, 8)), draft("c2", PILOTS, d=date(2026, 4, 8))]
    assert shingle_jaccard(shingles(NEXORA), shingles(NEXORA_REWORDED)) < 0.6  # the encoder, not the shingles
    drops = find_duplicates(drafts, searcher.embedder.encode_queries)
    assert set(drops) == {"a1", "a2"}
    for qid in ("a1", "a2"):
        assert_drop(drops[qid], "duplicate")
        assert "near-duplicate of a0" in drops[qid].detail and "cosine" in drops[qid].detail


def test_near_copies_are_duplicates_by_shingles_alone() -> None:
    assert shingle_jaccard(shingles(NEXORA), shingles(NEXORA_COPY)) >= 0.6
    drafts = [draft("z", NEXORA_COPY, d=date(2025, 11, 2)), draft("y", NEXORA, d=date(2025, 11, 2)),
              draft("x", LUNLAND), draft("w", BISONS), draft("v", PILOTS)]
    drops = find_duplicates(drafts, orthogonal)
    assert set(drops) == {"z"}  # the same D: the smaller qid stays
    jac = shingle_jaccard(shingles(NEXORA), shingles(NEXORA_COPY))
    assert "near-duplicate of y" in drops["z"].detail and f"Jaccard {jac:.3f}" in drops["z"].detail
    assert find_duplicates(drafts, orthogonal, jaccard=0.95) == {}


def test_the_cosine_path_and_chains_join_one_cluster() -> None:
    table = {NEXORA: 0, NEXORA_REWORDED: 0, NEXORA_COPY: 1, LUNLAND: 2, BISONS: 3}
    drafts = [draft("p", NEXORA_REWORDED, d=date(2025, 11, 1)), draft("q", NEXORA, d=date(2025, 11, 5)),
              draft("r", NEXORA_COPY, d=date(2025, 11, 9)), draft("s", LUNLAND), draft("t", BISONS)]
    drops = find_duplicates(drafts, by_table(table))
    assert set(drops) == {"q", "r"}
    assert "near-duplicate of p" in drops["q"].detail and "cosine 1.000" in drops["q"].detail
    # r joins p's cluster through q (shingles), not directly
    assert "near-duplicate of p" in drops["r"].detail and "joined through q (jaccard" in drops["r"].detail
    with pytest.raises(ValueError, match="one row per text"):
        find_duplicates(drafts, lambda texts: np.zeros((1, 4), dtype=np.float32))
    assert find_duplicates(drafts[:1], orthogonal) == {}


WORDS = ["will", "the", "vote", "pass", "Nexora", "Lunland", "win", "by", "March", "final"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=2, max_size=7), st.integers(0, 5)),
                min_size=1, max_size=12))
def test_duplicates_keep_one_draft_per_connected_cluster_the_earliest(items: list[tuple[list[str], int]]) -> None:
    drafts = [draft(f"q{i:02d}", " ".join(w), d=date(2025, 1, 1) + timedelta(days=day))
              for i, (w, day) in enumerate(items)]
    drops = find_duplicates(drafts, orthogonal, jaccard=0.6)
    sets = [shingles(normalize(d.question)) for d in drafts]
    n = len(drafts)
    adj = [[j for j in range(n) if j != i and shingle_jaccard(sets[i], sets[j]) >= 0.6] for i in range(n)]
    seen: set[int] = set()
    for i in range(n):  # brute force: each connected component keeps exactly its earliest member
        if i in seen:
            continue
        comp, stack = set(), [i]
        while stack:
            k = stack.pop()
            if k not in comp:
                comp.add(k)
                stack += adj[k]
        seen |= comp
        earliest = min(comp, key=lambda k: (drafts[k].date, drafts[k].qid))
        assert drafts[earliest].qid not in drops
        assert all(drafts[k].qid in drops and f"near-duplicate of {drafts[earliest].qid} " in drops[drafts[k].qid].detail
                   for k in comp - {earliest})


# ---------------------------------------------------------------------------------------------
# cross-question exposure
# ---------------------------------------------------------------------------------------------

D0 = date(2025, 11, 10)
TEAMS = ["Oakhurst Ravens", "Lakeshire Pilots", "Marlow Bay Mariners", "Northfield Knights"]
CANDIDATES = ["Tomas Reyes", "Julian Falk", "Victor Brandt"]


def test_a_draft_stating_another_drafts_answer_exposes_it() -> None:
    drafts = [
        draft("league", "Who will win the Coastal Football League title?", TEAMS, d=D0),
        draft("coach", "After Marlow Bay Mariners won the Coastal Football League title, will their coach stay for "
                       "next season?", d=D0),
        draft("deal", NEXORA, d=D0),
        draft("shares", "Nexora Energy completed its acquisition of Bluepeak Logistics: will Bluepeak shares rise by "
                        "December 31?", d=D0 + timedelta(days=10)),
        draft("lunland", LUNLAND, CANDIDATES, d=D0),
        draft("debate", "Will Julian Falk attend the debate in Glenrock?", d=D0),  # a mention without a cue
    ]
    drops, later = find_exposed(drafts)
    assert set(drops) == {"league"}
    assert_drop(drops["league"], "exposed")
    assert "by coach" in drops["league"].detail and "marlow bay mariners won" in drops["league"].detail
    # exposed ten days after its D: the events build cuts its schedule; nothing to drop here
    assert set(later) == {"deal"} and later["deal"].by == "shares" and later["deal"].day == D0 + timedelta(days=10)


def test_market_questions_expose_drafts_and_are_read_from_the_workspace(micro_events: Path) -> None:
    market = QuestionText("pm-x", "Will President-elect Julian Falk name a cabinet by January 31?", "", ("Yes", "No"),
                          D0 + timedelta(days=1), D0 + timedelta(days=60), D0 + timedelta(days=1))
    drafts = [draft("lunland", LUNLAND, CANDIDATES, d=D0), draft("deal", NEXORA, d=D0)]
    drops, later = find_exposed(drafts, [market])
    assert set(drops) == {"lunland"} and "by pm-x" in drops["lunland"].detail and later == {}
    stored = market_question_texts(micro_events)
    events = pl.read_parquet(micro_events / "events" / "events.parquet")
    assert stored and all(isinstance(q, QuestionText) and q.event_id.startswith("pm-") for q in stored)
    assert {q.event_id for q in stored} <= set(events["event_id"].to_list())
    assert all(q.first_day <= q.last_day + timedelta(days=2) for q in stored)
    drops, _ = find_exposed(drafts[1:], stored)  # the stored market texts state nothing about the deal draft
    assert drops == {}


# ---------------------------------------------------------------------------------------------
# label balance
# ---------------------------------------------------------------------------------------------


def labeled(n_yes: int, n_no: int, prefix: str, d: date = D0) -> list[Draft]:
    return [draft(f"{prefix}{i:02d}", f"Question {prefix} {i}?", d=d, resolved="Yes" if i < n_yes else "No")
            for i in range(n_yes + n_no)]


def test_a_lopsided_split_is_subsampled_to_the_share_deterministically() -> None:
    train = labeled(16, 4, "t")
    evals = labeled(5, 5, "e")
    multi = [draft("m", LUNLAND, CANDIDATES, resolved="Julian Falk")]
    loose = labeled(3, 0, "n")  # no split
    drafts = train + evals + multi + loose
    split = {**{d.qid: "train" for d in train + multi}, **{d.qid: "eval" for d in evals}}
    drops, report = rebalance(drafts, lambda d: split.get(d.qid), 0.6, seed=0)
    assert len(drops) == 10 and all(drops[q].reason == "balance" and drops[q].stage == "vet" for q in drops)
    assert {q for q in drops} <= {d.qid for d in train if d.resolved == "Yes"}
    t = report["splits"]["train"]
    assert t["n"] == 20 and t["labels_before"] == {"No": 4, "Yes": 16} and t["labels_after"] == {"No": 4, "Yes": 6}
    assert t["majority_share_before"] == 0.8 and t["majority_share_after"] == 0.6 and t["dropped"] == 10
    assert report["splits"]["eval"]["dropped"] == 0 and "n" not in report["splits"]
    assert report["answer_position_before"] == {"0": 16 + 5 + 3, "1": 4 + 5 + 1}
    assert report["answer_position_after"] == {"0": 6 + 5 + 3, "1": 4 + 5 + 1}
    again, _ = rebalance(drafts, lambda d: split.get(d.qid), 0.6, seed=0)
    other, _ = rebalance(drafts, lambda d: split.get(d.qid), 0.6, seed=1)
    assert again == drops and set(other) != set(drops) and len(other) == 10
    only, rep = rebalance(drafts, lambda d: split.get(d.qid), 1.0)
    assert only == {} and rep["splits"]["train"]["majority_share_after"] == 0.8
    with pytest.raises(ValueError, match="0.5 to 1.0"):
        rebalance(drafts, lambda d: "train", 0.4)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(["train", "eval", "test"]),
                       st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=3),
       st.floats(0.5, 0.95), st.integers(0, 3))
def test_rebalance_drops_only_the_majority_and_meets_the_share(sizes: dict[str, tuple[int, int]], share: float,
                                                               seed: int) -> None:
    drafts, split = [], {}
    for s, (n_yes, n_no) in sizes.items():
        for d in labeled(n_yes, n_no, s):
            drafts.append(d)
            split[d.qid] = s
    drops, report = rebalance(drafts, lambda d: split[d.qid], share, seed)
    assert rebalance(drafts, lambda d: split[d.qid], share, seed)[0] == drops
    for s, (n_yes, n_no) in sizes.items():
        if n_yes + n_no == 0:
            continue
        major = "Yes" if n_yes >= n_no else "No"
        gone = [d for d in drafts if split[d.qid] == s and d.qid in drops]
        assert all(d.resolved == major for d in gone)  # never a minority draft
        kept_major = max(n_yes, n_no) - len(gone)
        minor = min(n_yes, n_no)
        if minor == 0:
            assert not gone  # one label: reported, nothing to balance against
            continue
        assert kept_major / (kept_major + minor) <= max(share, max(n_yes, n_no) / (n_yes + n_no)) + 1e-9
        if gone:  # as many kept as the share allows
            assert kept_major / (kept_major + minor) <= share + 1e-9 < (kept_major + 1) / (kept_major + 1 + minor)
        assert report["splits"][s]["dropped"] == len(gone)


def test_deadlines_after_d_are_not_reported_facts_but_a_dated_past_event_still_is(searcher: Searcher) -> None:
    d = date(2025, 11, 20)
    clean = [
        "Settled by official results reported by 2025-12-13.",
        "Resolves Yes if the merger is completed before December 21, 2025, as announced by either company.",
        "The vote counts only if held no later than 12 December 2025; results published until 2025-12-20 count.",
    ]
    for i, crit in enumerate(clean):
        dr = draft(f"dl{i}", "Will the measure pass?", d=d)
        dr.criteria = crit
        assert post_d_text(dr, searcher) is None, crit
    leak = draft("dl-leak", "Will the measure pass?", d=d)
    leak.description = "The measure was approved on December 3, 2025 by a wide margin."
    assert_drop(post_d_text(leak, searcher), "post_D_text")
