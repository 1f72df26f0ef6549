"""The code paths that let an index reach 10M articles: the month-at-a-time BM25 merge (memory-mapped
output) and the block prefix sums of BM25's as-of statistics (no per-row int64 arrays in memory)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from forecast_env.retrieval import bm25
from forecast_env.retrieval.bm25 import (
    BM25Index,
    build_global_postings,
    build_month_postings,
    read_month_postings,
    write_month_postings,
)
from forecast_env.retrieval.tokenize import tokenize

WORDS = [f"w{i}" for i in range(300)] + ["the", "of", "élan", "naïve", "東京"]


def texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    p /= p.sum()
    # some empty texts (a row with no tokens) and some long ones
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(0, 40)), p=p)) for _ in range(n)]


@pytest.fixture(scope="module")
def months(tmp_path_factory):
    root = tmp_path_factory.mktemp("bm25_months")
    all_texts, dirs = [], []
    for m, n in enumerate((120, 1, 0, 257, 64)):  # a one-row month and an empty month too
        t = texts(n, m)
        all_texts += t
        dirs.append(root / f"2025-{m + 1:02d}")
        write_month_postings(dirs[-1], build_month_postings(t))
    return root, dirs, all_texts


def read_global(directory):
    arrays = {n: np.load(directory / f"{n}.npy") for n in ("indptr", "rows", "tfs", "doclen")}
    off = np.load(directory / "term_off.npy")
    blob = (directory / "term_blob.bin").read_bytes()
    terms = [blob[a:z].decode() for a, z in pairwise(off)]
    return terms, arrays


def test_merged_months_equal_postings_built_over_the_whole_corpus(months, tmp_path):
    """Merging month folders gives exactly the postings of one pass over every text (global rows)."""
    _, dirs, all_texts = months
    stats = build_global_postings(tmp_path / "g", dirs)
    terms, got = read_global(tmp_path / "g")
    ref = build_month_postings(all_texts)
    assert terms == ref.terms
    np.testing.assert_array_equal(got["indptr"], ref.indptr)
    np.testing.assert_array_equal(got["rows"], ref.rows)
    np.testing.assert_array_equal(got["tfs"], ref.tfs)
    np.testing.assert_array_equal(got["doclen"], ref.doclen)
    assert got["rows"].dtype == np.int32 and got["tfs"].dtype == np.float32
    assert stats == {"terms": len(ref.terms), "postings": len(ref.rows), "rows": len(all_texts)}
    # each term's postings are sorted by row (the as-of cut is a binary search)
    for a, z in pairwise(got["indptr"]):
        assert np.all(np.diff(got["rows"][a:z]) > 0)


def test_merge_of_folders_equals_merge_of_loaded_months(months, tmp_path):
    _, dirs, _ = months
    build_global_postings(tmp_path / "a", dirs)
    build_global_postings(tmp_path / "b", [read_month_postings(d) for d in dirs])
    for name in ("indptr", "rows", "tfs", "doclen", "term_hash", "term_id", "term_off"):
        assert (tmp_path / "a" / f"{name}.npy").read_bytes() == (tmp_path / "b" / f"{name}.npy").read_bytes()
    assert (tmp_path / "a" / "term_blob.bin").read_bytes() == (tmp_path / "b" / "term_blob.bin").read_bytes()


@pytest.mark.parametrize("hide", [False, True])
def test_block_prefix_sums_equal_per_row_sums(months, tmp_path, monkeypatch, hide):
    """N and total length as of every prefix end (block starts, block ends, inside blocks) are exact."""
    _, dirs, all_texts = months
    build_global_postings(tmp_path / "g", dirs)
    monkeypatch.setattr(bm25, "PREFIX_BLOCK", 16)  # many blocks on a small corpus
    n = len(all_texts)
    hidden = (np.random.default_rng(7).random(n) < 0.2) if hide else None
    index = BM25Index(tmp_path / "g", hidden)
    lengths = np.array([len(tokenize(t)) for t in all_texts], dtype=np.int64)
    visible = ~hidden if hide else np.ones(n, bool)
    for end in range(n + 1):
        want = (int(visible[:end].sum()), int(lengths[:end][visible[:end]].sum()))
        assert index.prefix_stats(end) == want, end
        assert index.eligible_count(end) == want[0]


def test_scores_use_the_prefix_statistics(months, tmp_path, monkeypatch):
    """A score as of a prefix equals BM25 computed by hand from that prefix's N, df and avgdl."""
    _, dirs, all_texts = months
    build_global_postings(tmp_path / "g", dirs)
    monkeypatch.setattr(bm25, "PREFIX_BLOCK", 8)
    index = BM25Index(tmp_path / "g", None)
    toks = [tokenize(t) for t in all_texts]
    for end in (5, 121, 200, len(all_texts)):
        rows, scores = index.score(["w3"], end, k=1000)
        n_docs = end
        avgdl = sum(len(t) for t in toks[:end]) / n_docs
        df = sum("w3" in t for t in toks[:end])
        idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        for r, s in zip(rows.tolist(), scores.tolist()):
            tf = toks[r].count("w3")
            want = idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(toks[r]) / avgdl))
            assert s == pytest.approx(want, rel=1e-12)
        assert len(rows) == df


def test_open_index_keeps_no_per_row_arrays_in_private_memory(tmp_path):
    """The as-of statistics cost O(rows / PREFIX_BLOCK) private bytes: at 10M articles a per-row
    int64 prefix sum was 80 MB of the searcher's private memory (per-row data stays mapped)."""
    n = 20_000
    write_month_postings(tmp_path / "m", build_month_postings(texts(n, 11)))
    build_global_postings(tmp_path / "g", [tmp_path / "m"])
    hidden = np.random.default_rng(3).random(n) < 0.1
    for h in (None, hidden):
        index = BM25Index(tmp_path / "g", h)
        private = sum(v.nbytes for k, v in vars(index).items()
                      if isinstance(v, np.ndarray) and not isinstance(v, np.memmap) and k != "hidden")
        assert private <= 2 * 8 * (n // bm25.PREFIX_BLOCK + 1)
        assert all(isinstance(getattr(index, name), np.memmap) for name in ("rows", "tfs", "doclen", "indptr"))
