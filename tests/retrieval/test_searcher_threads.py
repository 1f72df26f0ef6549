"""One Searcher shared by many threads, and `search_many`: exactly the hits and float scores of one
`search` at a time (scores are recorded for replay), whatever the batch, the threads or the cache."""

from __future__ import annotations

import random
import threading
import warnings
from datetime import date, timedelta

import faiss
import numpy as np
import pytest

from forecast_env.config import load_config
from forecast_env.corpus_build.index import build_index
from forecast_env.retrieval import QueryError, Searcher, static_encoder
from forecast_env.retrieval.batcher import BatchedSearcher
from forecast_env.retrieval.dense import DenseShards, Embedder, batch_limit, make_index
from tests.support.retrieval_data import VOCAB, make_rows, write_store

START = date(2025, 3, 1)
MODES = ("hybrid", "dense", "bm25")
THREADS = 12


def corpus_config(float16: bool = False, cache: int | None = None) -> dict:
    cfg = load_config("corpus")
    cfg["embed"].update(backend="static", float16=float16)
    if cache is not None:
        cfg["embed"]["query_cache_size"] = cache
    # IVF months after the first 150 rows (the first approximate month keeps rows exact), few lists
    cfg["index"].update(ann_min_rows=150, ann_nlist=16, ann_nprobe=4, ann_candidates=20)
    return cfg


@pytest.fixture(scope="module", params=["flat", "float16"])
def store(request, tmp_path_factory):
    """Static-backend index over 4 months: exact and IVF months, leak-flagged and market-quote rows."""
    rows = make_rows(700, start=START, days=115, seed=11)
    for i, r in enumerate(rows):
        r["market_quote"] = i % 13 == 5
    ws = write_store(tmp_path_factory.mktemp(f"threads_{request.param}"), rows)
    cfg = corpus_config(float16=request.param == "float16")
    build_index(ws.root, cfg, progress=False)
    return ws.root, cfg


def queries(n: int, seed: int) -> list[tuple[str, date]]:
    """Mixed lengths (1 to 40 words, repeats included) at dates before, in and after the corpus."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.choices(VOCAB, k=rng.choice([1, 1, 2, 3, 5, 12, 40]))
        out.append((" ".join(words), START + timedelta(days=rng.randint(-10, 130))))
    out += out[: n // 8]  # repeated (query, date) pairs
    rng.shuffle(out)
    return out


def quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def same(a, b) -> bool:
    """Identical hit lists: ids, ranks, texts and float scores compared exactly (not approximately)."""
    return len(a) == len(b) and all(x == y and x.score.hex() == y.score.hex() for x, y in zip(a, b))


def reference(root, cfg, pairs, k, mode, hide=None):
    with Searcher.open(root, cfg, hide=hide) as s:
        return [quiet(s.search, q, d, k=k, mode=mode) for q, d in pairs]


# ------------------------------------------------------------------ search_many == search, bit for bit


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hide", [None, False, ["leak_flag"]])
def test_search_many_equals_one_search_at_a_time(store, mode, hide):
    root, cfg = store
    pairs = queries(90, seed=hash((mode, str(hide))) % 1000)
    ref = reference(root, cfg, pairs, 7, mode, hide)
    assert any(ref) and any(not r for r in ref)  # hits, and dates before the corpus without any
    with Searcher.open(root, cfg, hide=hide) as s:
        for size in (1, 2, 19, 20, 21, 40, len(pairs)):  # both sides of FAISS's classic BLAS threshold (20)
            got = []
            for a in range(0, len(pairs), size):
                chunk = pairs[a:a + size]
                got += quiet(s.search_many, [q for q, _ in chunk], [d for _, d in chunk], k=7, mode=mode)
            assert all(same(g, r) for g, r in zip(got, ref, strict=True)), size


@pytest.mark.parametrize("mode", ("dense", "hybrid"))
def test_search_many_stays_exact_when_the_blas_threshold_is_low(store, mode):
    """With FAISS's BLAS threshold (query floats, nq x d) at 5 queries' worth, batched IVF and scalar
    quantizer calls are cut to 4 queries, below it: the scores stay those of one query per call."""
    root, cfg = store
    pairs = queries(70, seed=5)
    ref = reference(root, cfg, pairs, 10, mode)
    old = faiss.cvar.distance_compute_blas_threshold
    with Searcher.open(root, cfg) as s:
        faiss.cvar.distance_compute_blas_threshold = 5 * s.dense.dim
        try:
            assert batch_limit(s.dense.dim) == 4
            got = quiet(s.search_many, [q for q, _ in pairs], [d for _, d in pairs], k=10, mode=mode)
        finally:
            faiss.cvar.distance_compute_blas_threshold = old
    assert all(same(g, r) for g, r in zip(got, ref, strict=True))


@pytest.fixture
def two_omp_threads():
    old = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    yield
    faiss.omp_set_num_threads(old)


def test_dense_ranges_equal_one_query_per_call_on_large_months(tmp_path, two_omp_threads):
    """Months past FAISS's database-parallel size (10k rows) on 2 OpenMP threads: a flat float32 month
    (where a batch of queries and a lone query take different kernels), a float16 month and an IVF
    month; queries at many row ranges (shared and partial months, hidden rows): every query's rows and
    scores are those of its own `search`."""
    rng = np.random.default_rng(0)
    sizes, dim = (12_000, 11_000, 12_000), 32
    vecs = [rng.standard_normal((n, dim)).astype(np.float32) for n in sizes]
    vecs = [v / np.linalg.norm(v, axis=1, keepdims=True) for v in vecs]
    paths = []
    for i, (v, f16) in enumerate(zip(vecs, (False, True, False))):
        paths.append(tmp_path / f"m{i}.faiss")
        faiss.write_index(make_index(v, float16=f16), str(paths[-1]))
    quantizer = faiss.IndexFlatIP(dim)
    ivf = faiss.IndexIVFScalarQuantizer(quantizer, dim, 64, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    ivf.train(vecs[1])
    ivf.add_with_ids(vecs[2], np.arange(sizes[2], dtype=np.int64))
    faiss.write_index(ivf, str(tmp_path / "ivf.faiss"))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    hidden = rng.random(int(offsets[-1])) < 0.02
    hidden[: sizes[0]] = False  # a hidden-row selector would keep FAISS on its per-query scan there
    ann = [None, None, {"path": tmp_path / "ivf.faiss", "nprobe": 8, "candidates": 60}]
    shards = DenseShards(paths, offsets, hidden, ann)
    q = rng.standard_normal((45, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    ends = [int(offsets[-1])] * 20 + [int(x) for x in rng.integers(1, offsets[-1], 25)]
    starts = [0] * 40 + [int(e) // 2 for e in ends[40:]]
    one = [shards.search(q[i:i + 1], starts[i], ends[i], 9)[0] for i in range(len(q))]
    got = shards.search_ranges(q, starts, ends, 9)
    for (r1, s1), (r2, s2) in zip(one, got, strict=True):
        np.testing.assert_array_equal(r1, r2)
        assert s1.tobytes() == s2.tobytes()
    # why the flat month is searched one query per call: FAISS's batch and lone-query kernels round
    # differently there (if this ever stops holding, batching flat months may become possible)
    flat = shards.indexes[0]
    lone = np.stack([flat.search(q[i:i + 1], 9)[0][0] for i in range(len(q))])
    assert not np.array_equal(lone, flat.search(q, 9)[0])


def test_search_many_equals_search_with_the_onnx_encoder(micro_index):
    """The default encoder (ONNX, int8-static): each query is embedded alone, as `search` embeds it, so
    mixed lengths (whose padded batch would round otherwise) give the same vectors and hits."""
    rng = random.Random(3)
    with Searcher.open(micro_index) as s:
        first, last = s.first_day, s.last_day
        words = [h.title.split()[0] for h in quiet(s.search, "the market", last, k=50, mode="bm25") if h.title]
        pairs = [(" ".join(rng.choices(words, k=rng.choice([1, 3, 9, 30]))),
                  first + timedelta(days=rng.randint(-3, (last - first).days + 3))) for _ in range(45)]
        for mode in MODES:
            ref = [quiet(s.search, q, d, k=8, mode=mode) for q, d in pairs]
            got = quiet(s.search_many, [q for q, _ in pairs], [d for _, d in pairs], k=8, mode=mode)
            assert all(same(g, r) for g, r in zip(got, ref, strict=True)), mode


def test_search_many_refuses_misaligned_arguments(store):
    root, cfg = store
    with Searcher.open(root, cfg) as s:
        with pytest.raises(QueryError, match="one date per query"):
            s.search_many(["oil", "gas"], [START])
        with pytest.raises(QueryError, match="list of queries"):
            s.search_many("oil", [START])
        with pytest.raises(QueryError, match="empty search query"):
            s.search_many(["oil", " "], [START, START])
        assert s.search_many([], []) == []


# ------------------------------------------------------------------ threads


def run_threads(n: int, work) -> list:
    """`work(i)` on n threads started together; their results (an exception fails the test)."""
    barrier = threading.Barrier(n)
    out: list = [None] * n
    errors: list = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            out[i] = work(i)
        except BaseException as exc:  # collected, re-raised on the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def test_threads_sharing_one_fresh_searcher_get_the_single_threaded_hits(store):
    """Many threads on one just-opened Searcher (encoder, text shards and pools opened lazily, raced
    for) with a query cache of 2 vectors (its LRU evicts on almost every query): every search, batched
    search and opened article is what one thread alone gets."""
    root, cfg = store
    cfg = corpus_config(float16=cfg["embed"]["float16"], cache=2)
    pairs = queries(60, seed=9)
    ref = {mode: reference(root, cfg, pairs, 6, mode) for mode in MODES}
    with Searcher.open(root, cfg) as s:
        assert s.embedder.query_cache_size == 2
    with Searcher.open(root, cfg) as s:  # nothing opened yet: the threads race to open it
        def work(t: int) -> list:
            rng = random.Random(t)
            order = list(range(len(pairs)))
            rng.shuffle(order)
            bad = []
            for n, i in enumerate(order):
                mode = MODES[(i + t) % 3]
                q, d = pairs[i]
                if n % 5 == 0:  # a batched call among the single ones
                    js = [i, (i + 1) % len(pairs), (i + 7) % len(pairs)]
                    got = quiet(s.search_many, [pairs[j][0] for j in js], [pairs[j][1] for j in js], k=6, mode=mode)
                    bad += [(j, mode) for j, g in zip(js, got) if not same(g, ref[mode][j])]
                else:
                    if not same(quiet(s.search, q, d, k=6, mode=mode), ref[mode][i]):
                        bad.append((i, mode))
                for h in ref[mode][i][:1]:
                    if s.open_article(h.doc_id, d).doc_id != h.doc_id:
                        bad.append((i, "open"))
            return bad

        assert run_threads(THREADS, work) == [[]] * THREADS


def test_query_cache_lru_hammered_by_threads_returns_the_vectors_of_one_thread():
    """An Embedder with a 3-entry query cache, many threads asking overlapping queries: no KeyError from
    a race between move_to_end and popitem, and every vector equals the one computed alone."""
    texts = [" ".join(VOCAB[i:i + 1 + i % 5]) for i in range(30)]
    alone = Embedder(backend="static", query_cache_size=0)
    ref = {t: alone.encode_queries([t])[0] for t in texts}
    shared = Embedder(backend="static", query_cache_size=3)

    def work(t: int) -> int:
        rng = random.Random(t)
        bad = 0
        for _ in range(300):
            batch = rng.sample(texts, rng.choice([1, 1, 2, 4]))
            vecs = shared.encode_queries(batch)
            bad += sum(not np.array_equal(v, ref[b]) for v, b in zip(vecs, batch))
        assert len(shared._query_cache) <= 3
        return bad

    assert run_threads(THREADS, work) == [0] * THREADS


def test_static_word_cache_replaced_under_threads_gives_the_same_token_ids(monkeypatch):
    """The static encoder's word-piece cache overflows constantly (limit 4 words): threads tokenizing
    at once never miss a word and always get the tokenizer's ids."""
    enc = Embedder(backend="static", query_cache_size=0).model
    texts = [" ".join(random.Random(i).choices(VOCAB, k=6)) + f" word{i}" for i in range(40)]
    ref = {t: enc.token_ids(t) for t in texts}
    monkeypatch.setattr(static_encoder, "WORD_CACHE_MAX", 4)
    enc._pieces = {}

    def work(t: int) -> int:
        rng = random.Random(t)
        return sum(enc.token_ids(x) != ref[x] for x in rng.choices(texts, k=400))

    assert run_threads(THREADS, work) == [0] * THREADS


# ------------------------------------------------------------------ the batcher


def test_batched_searcher_answers_threads_with_their_own_hits(store):
    root, cfg = store
    pairs = queries(48, seed=4)
    ref = reference(root, cfg, pairs, 5, "hybrid")
    with BatchedSearcher(Searcher.open(root, cfg)) as b:
        def work(t: int) -> list[int]:
            return [i for i in range(t, len(pairs), THREADS)
                    if not same(quiet(b.search, pairs[i][0], pairs[i][1], k=5), ref[i])]

        assert run_threads(THREADS, work) == [[]] * THREADS
        assert b.requests == len(pairs) and b.batches <= len(pairs)
        assert b.hidden == b.searcher.hidden  # everything else is the searcher's


class GatedSearcher:
    """A Searcher whose first `search_many` waits for the test: requests arriving meanwhile queue."""

    def __init__(self, searcher: Searcher) -> None:
        self.inner = searcher
        self.entered, self.release = threading.Event(), threading.Event()
        self.sizes: list[int] = []

    def search_many(self, queries, days, k=10, mode="hybrid"):
        self.sizes.append(len(queries))
        self.entered.set()
        self.release.wait()
        return self.inner.search_many(queries, days, k=k, mode=mode)

    def search(self, *a, **kw):
        return self.inner.search(*a, **kw)

    def close(self) -> None:
        self.inner.close()


def test_requests_that_queue_while_the_worker_is_busy_are_answered_by_one_batch(store):
    root, cfg = store
    pairs = queries(30, seed=6)
    ref = reference(root, cfg, pairs, 4, "dense")
    gated = GatedSearcher(Searcher.open(root, cfg))
    b = BatchedSearcher(gated, max_batch=64)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = b.submit(pairs[0][0], pairs[0][1], k=4, mode="dense")
            assert gated.entered.wait(60)  # the worker holds request 0: the others queue behind it
            rest = [b.submit(q, d, k=4, mode="dense") for q, d in pairs[1:]]
            gated.release.set()
            got = [f.result(60) for f in [first, *rest]]
    finally:
        gated.release.set()
        b.close()
    assert gated.sizes == [1, len(pairs) - 1]
    assert all(same(g, r) for g, r in zip(got, ref, strict=True))


def test_a_bad_request_in_a_batch_fails_alone(store):
    root, cfg = store
    gated = GatedSearcher(Searcher.open(root, cfg))
    gated.release.set()
    with BatchedSearcher(gated) as b:
        with pytest.raises(QueryError):
            b.search("  ", START)
        assert quiet(b.search, "oil price", START + timedelta(days=60), k=3, mode="bm25")
