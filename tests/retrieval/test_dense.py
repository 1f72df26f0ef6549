"""Exact date-restricted dense search against a numpy brute force over the eligible rows.

The shards are built from deterministic vectors (`HashEmbedder`): the dense side depends on the
model only through its vectors (the real model is exercised in test_embed.py).
"""

from __future__ import annotations

import warnings
from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast_env.corpus_build.embed import article_texts
from forecast_env.corpus_build.index import build_index, write_dense_shard
from forecast_env.retrieval import Searcher
from forecast_env.retrieval.dense import DenseShards, read_index
from tests.support.retrieval_data import HashEmbedder, make_rows, write_store

START = date(2025, 3, 1)
DIM = 16


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rows = make_rows(350, start=START, days=95, seed=2, leak_share=0.15)
    ws = write_store(tmp_path_factory.mktemp("dense_ws"), rows)
    build_index(ws.root, progress=False, embedder=HashEmbedder(DIM))
    rows = sorted(rows, key=lambda r: (r["day"], r["doc_id"]))
    vecs = HashEmbedder(DIM).encode_documents(article_texts(pa.Table.from_pylist(rows)))
    return ws.root, rows, vecs


def brute_force(rows, vecs, q, as_of, k, hide):
    ok = np.array([r["day"] <= as_of and not (hide and r["leak_flag"]) for r in rows])
    idx = np.flatnonzero(ok)
    scores = vecs[idx] @ q
    order = np.lexsort((idx, -scores))[:k]
    return [rows[i]["doc_id"] for i in idx[order]], scores[order]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(-3, 100), k=st.integers(1, 400), seed=st.integers(0, 10**6), hide=st.booleans())
def test_dense_is_exact_over_eligible_rows(store, offset, k, seed, hide):
    root, rows, vecs = store
    as_of = START + timedelta(days=offset)
    q = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    q /= np.linalg.norm(q)
    s = Searcher.open(root, hide=hide, embedder=HashEmbedder(DIM))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hits = s.search_vectors(q, as_of, k=k)[0]
    want_ids, want_scores = brute_force(rows, vecs, q, as_of, k, hide)
    eligible = sum(r["day"] <= as_of and not (hide and r["leak_flag"]) for r in rows)
    assert len(hits) == min(k, eligible)
    assert [h.doc_id for h in hits] == want_ids
    np.testing.assert_allclose([h.score for h in hits], want_scores, atol=1e-5)
    assert all(h.day <= as_of for h in hits)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))


def test_text_query_dense_matches_vector_query(store):
    root, _, _ = store
    s = Searcher.open(root, embedder=HashEmbedder(DIM))
    by_text = s.search("oil price storm", "2025-04-20", k=7, mode="dense")
    by_vec = s.search_vectors(HashEmbedder(DIM).encode_queries(["oil price storm"]), "2025-04-20", k=7)[0]
    assert [h.doc_id for h in by_text] == [h.doc_id for h in by_vec]
    batch = s.search_batch(["oil price storm", "election"], "2025-04-20", k=7, mode="dense")
    assert [h.doc_id for h in batch[0]] == [h.doc_id for h in by_text]


def test_shards_are_memory_mapped_and_row_ranges_exact(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((50, 8)).astype(np.float32)
    b = rng.standard_normal((30, 8)).astype(np.float32)
    write_dense_shard(tmp_path / "a.faiss", a)
    write_dense_shard(tmp_path / "b.faiss", b)
    ix = read_index(tmp_path / "a.faiss")
    assert ix.ntotal == 50
    hidden = np.zeros(80, bool)
    hidden[[3, 55, 60]] = True
    shards = DenseShards([tmp_path / "a.faiss", tmp_path / "b.faiss"], np.array([0, 50, 80]), hidden)
    q = rng.standard_normal((2, 8)).astype(np.float32)
    allv = np.vstack([a, b])
    for lo, hi in [(0, 80), (10, 62), (50, 80), (0, 5), (55, 56)]:
        res = shards.search(q, lo, hi, 100)
        for i in range(2):
            idx = np.array([r for r in range(lo, hi) if not hidden[r]])
            want = idx[np.lexsort((idx, -(allv[idx] @ q[i])))] if len(idx) else idx
            assert res[i][0].tolist() == want.tolist()


def test_float16_storage_is_close(tmp_path):
    rng = np.random.default_rng(1)
    v = rng.standard_normal((40, 8)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    write_dense_shard(tmp_path / "h.faiss", v, float16=True)
    shards = DenseShards([tmp_path / "h.faiss"], np.array([0, 40]))
    rows, scores = shards.search(v[:1], 0, 40, 3)[0]
    assert rows[0] == 0 and abs(scores[0] - float(v[0] @ v[0])) < 1e-2 * float(v[0] @ v[0])
