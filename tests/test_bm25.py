"""BM25 as of a date: tokenization, and equality with the rank_bm25 oracle on the eligible prefix."""

from __future__ import annotations

import math
from datetime import date, timedelta

import pytest
from _retrieval_data import VOCAB, HashEmbedder, make_rows, write_store
from forecast_env.corpus_build.index import build_index
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from forecast_env.retrieval import Searcher
from forecast_env.retrieval.bm25 import build_month_postings, top_k
from forecast_env.retrieval.dense import document_text
from forecast_env.retrieval.tokenize import stopwords, tokenize

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
