"""BM25 as of a date: tokenization, and equality with the rank_bm25 oracle on the eligible prefix."""

from __future__ import annotations

import math
from datetime import date, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from forecast_env.corpus_build.index import build_index
from forecast_env.retrieval import Searcher
from forecast_env.retrieval.bm25 import build_month_postings, top_k
from forecast_env.retrieval.dense import document_text
from forecast_env.retrieval.tokenize import stopwords, tokenize
from tests.support.retrieval_data import VOCAB, HashEmbedder, make_rows, write_store

START = date(2025, 3, 1)


class OracleBM25(BM25Okapi):
    """rank_bm25 with the non-negative IDF of docs/design.md §3."""

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


def test_tokenize_lowercases_unicode_and_drops_stopwords():
    assert tokenize("The Élection of 2025, in São_Paulo!") == ["élection", "2025", "são_paulo"]
    assert tokenize("") == [] and tokenize(None) == []
    assert {"the", "and", "of"} <= stopwords()
    assert tokenize("running runs") == ["running", "runs"]  # no stemming


def test_month_postings_are_csr_sorted_by_row():
    mp = build_month_postings(["oil oil price", "price", "", "oil"])
    assert mp.doclen.tolist() == [3, 1, 0, 1]
    oil = mp.terms.index("oil")
    a, z = mp.indptr[oil], mp.indptr[oil + 1]
    assert mp.rows[a:z].tolist() == [0, 3] and mp.tfs[a:z].tolist() == [2.0, 1.0]


def test_top_k_breaks_ties_by_row():
    import numpy as np

    rows, _ = top_k(np.array([5, 3, 9, 1]), np.array([1.0, 2.0, 2.0, 0.5]), 2)
    assert rows.tolist() == [3, 9]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rows = make_rows(400, start=START, days=100, seed=1)
    ws = write_store(tmp_path_factory.mktemp("bm25_ws"), rows)
    build_index(ws.root, progress=False, embedder=HashEmbedder())
    return ws.root, sorted(rows, key=lambda r: (r["day"], r["doc_id"]))


def oracle_scores(rows, as_of, query_tokens, hide):
    eligible = [r for r in rows if r["day"] <= as_of and not (hide and r["leak_flag"])]
    if not eligible:
        return {}
    corpus = [tokenize(document_text(r["title"], r["summary"], r["body"])) for r in eligible]
    scores = OracleBM25(corpus, k1=1.2, b=0.75).get_scores(query_tokens)
    return {r["doc_id"]: float(s) for r, s, toks in zip(eligible, scores, corpus)
            if any(t in toks for t in query_tokens)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    offset=st.integers(-5, 110),
    words=st.lists(st.sampled_from(VOCAB + ["unseenword", "SENATE", "Summary"]), min_size=1, max_size=5),
    hide=st.booleans(),
)
def test_bm25_equals_oracle_on_eligible_prefix(store, offset, words, hide):
    root, rows = store
    as_of = START + timedelta(days=offset)
    s = Searcher.open(root, hide=hide)
    query = " ".join(words)
    tokens = tokenize(query)
    expected = oracle_scores(rows, as_of, tokens, hide)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not tokens:
            return
        hits = s.search(query, as_of, k=1000, mode="bm25")
        top = s.search(query, as_of, k=5, mode="bm25")
    got = {h.doc_id: h.score for h in hits}
    assert set(got) == set(expected)
    for doc_id, score in expected.items():
        assert got[doc_id] == pytest.approx(score, rel=1e-9, abs=1e-12)
    assert all(h.day <= as_of for h in hits)
    # ordered by score, ties by (day, doc_id)
    keys = [(-h.score, h.day, h.doc_id) for h in hits]
    assert keys == sorted(keys)
    # top-k is a prefix of the full ranking
    assert [h.doc_id for h in top] == [h.doc_id for h in hits[:5]]


def test_stopword_only_query_matches_nothing(store):
    root, _ = store
    assert Searcher.open(root).search("the and of", "2025-05-01", mode="bm25") == []


# ---------------------------------------------------------------------------------------------
# the pruned search (MaxScore) equals the exhaustive one bit for bit
# ---------------------------------------------------------------------------------------------

#: Words drawn with repeats, so that document frequencies are skewed (ka common, kf..kj rare).
SKEWED = ["ka"] * 12 + ["kb"] * 6 + ["kc"] * 4 + ["kd"] * 3 + ["ke"] * 2 + ["kf", "kg", "kh", "ki", "kj"]
WORDS = sorted(set(SKEWED))


def bm25_index(directory, docs, hidden=None, k1=1.2, b=0.75, split=None):
    """A BM25Index over `docs` (token lists, one per row) built as two months split at `split`.

    It prunes however few postings a query has (the default scores small queries exhaustively).
    """
    import numpy as np

    from forecast_env.retrieval.bm25 import BM25Index, build_global_postings

    texts = [" ".join(d) for d in docs]
    split = len(texts) // 2 if split is None else split
    build_global_postings(directory, [build_month_postings(texts[:split]), build_month_postings(texts[split:])])
    index = BM25Index(directory, None if hidden is None else np.asarray(hidden, dtype=bool), k1=k1, b=b)
    index.prune_min_postings = 0
    return index


def assert_same_as_exhaustive(index, tokens, end, k, start=0):
    rows, scores = index.score(tokens, end, k, start=start)
    ref_rows, ref_scores = index._score_exhaustive(tokens, end, k, start=start)
    assert rows.dtype == ref_rows.dtype and scores.dtype == ref_scores.dtype
    assert rows.tolist() == ref_rows.tolist()
    assert scores.tobytes() == ref_scores.tobytes()  # bit for bit, not approximately


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(SKEWED), max_size=14), min_size=1, max_size=70),
    params=st.tuples(st.sampled_from([1.2, 0.0, 0.5, 2.0]), st.sampled_from([0.75, 0.0, 1.0])),
    data=st.data(),
)
def test_pruned_score_equals_exhaustive(docs, params, data):
    import tempfile
    from pathlib import Path

    n = len(docs)
    hidden = data.draw(st.none() | st.lists(st.booleans(), min_size=n, max_size=n), label="hidden")
    split = data.draw(st.integers(0, n), label="split")
    queries = data.draw(st.lists(st.tuples(
        st.lists(st.sampled_from([*WORDS, "zz"]), max_size=6),  # repeats weigh; zz is in no row
        st.integers(0, n), st.integers(0, n), st.integers(1, n + 3)), min_size=1, max_size=6), label="queries")
    with tempfile.TemporaryDirectory() as tmp:
        index = bm25_index(Path(tmp), docs, hidden, *params, split=split)
        # several queries on one index: the hidden counts it keeps per term serve later prefixes
        for tokens, end, start, k in queries:
            assert_same_as_exhaustive(index, tokens, end, k, start=min(start, end))
            assert_same_as_exhaustive(index, tokens, end, k, start=start)


def test_pruned_score_stops_early_and_expands_on_a_seeded_corpus(tmp_path):
    import numpy as np

    rng = np.random.default_rng(7)
    weights = np.array([SKEWED.count(w) for w in WORDS], dtype=float)
    docs = [list(rng.choice(WORDS, size=int(rng.integers(1, 25)), p=weights / weights.sum())) for _ in range(3000)]
    index = bm25_index(tmp_path, docs, hidden=rng.random(len(docs)) < 0.05)
    plans = []
    for _ in range(200):
        tokens = list(rng.choice([*WORDS, "zz"], size=int(rng.integers(1, 6))))
        end = int(rng.integers(1, len(docs) + 1))
        start = int(rng.integers(0, end)) if rng.random() < 0.3 else 0
        k = int(rng.choice([1, 5, 10, 100]))
        assert_same_as_exhaustive(index, tokens, end, k, start=start)
        plans.append(index._score_pruned(tokens, end, k, start=start)[2])
    # both ways are exercised: candidates from the rarest terms only, and every term's rows
    assert any(used < matched for used, matched in plans)
    assert any(1 < used == matched for used, matched in plans)


def test_pruning_keeps_a_row_without_the_rare_term(tmp_path):
    # kb is the rarer term, so its rows are the first candidates; but ka, asked three times, adds
    # more than any kb row scores: the best row (a short one full of ka) has no kb at all
    docs = [["kb", "kc", "kc", "kc", "kc", "kc", "kc"], ["kb", "kc", "kc", "kc", "kc", "kc"]]
    docs += [["ka", "kc", "kc", "kc"] for _ in range(8)] + [["ka", "ka", "ka"]] + [["kc"] for _ in range(30)]
    index = bm25_index(tmp_path, docs)
    tokens = ["kb", "ka", "ka", "ka"]
    rows, _ = index.score(tokens, len(docs), 1)
    assert docs[int(rows[0])] == ["ka", "ka", "ka"]
    assert index._score_pruned(tokens, len(docs), 1)[2] == (2, 2)  # the rare term alone did not suffice
    for k in (1, 2, 3, 11, 50):
        assert_same_as_exhaustive(index, tokens, len(docs), k)


def test_pruning_needs_a_strict_margin_on_ties(tmp_path):
    # k1 = 0: a term adds exactly its bound, so the row outside the candidates (row 0, kb only)
    # ties with the best candidate (row 1, ka only) and wins the tie by its smaller row
    index = bm25_index(tmp_path, [["kb"], ["ka"], ["kc"]], k1=0.0, split=3)
    rows, scores = index.score(["ka", "kb"], 3, 1)
    assert rows.tolist() == [0]
    assert_same_as_exhaustive(index, ["ka", "kb"], 3, 1)


def test_pruning_stops_at_the_rare_term_when_the_common_one_cannot_catch_up(tmp_path):
    docs = [["ka", "kc"] for _ in range(200)] + [["ka", "kb", "kb"], ["kb", "kc"]]
    index = bm25_index(tmp_path, docs)
    rows, scores, plan = index._score_pruned(["ka", "kb"], len(docs), 2)
    assert plan == (1, 2) and sorted(rows.tolist()) == [200, 201]
    assert_same_as_exhaustive(index, ["ka", "kb"], len(docs), 2)
