"""Searcher behaviour: as-of restriction in every mode, open_article, errors, incremental builds."""

from __future__ import annotations

import shutil
import warnings
from datetime import date, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast_env.corpus_build.index import build_index
from forecast_env.errors import (
    ArticleUnavailableError,
    ConfigError,
    ForecastEnvError,
    FutureArticleError,
    IndexMissingError,
    WorkspaceError,
)
from forecast_env.retrieval import Hit, QueryError, Searcher
from forecast_env.retrieval.hybrid import rrf
from tests.support.retrieval_data import VOCAB, HashEmbedder, make_rows, write_store

START = date(2025, 3, 1)
EMB = HashEmbedder(16)


def hidden(r: dict) -> bool:
    return bool(r["leak_flag"] or r.get("market_quote"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    rows = make_rows(300, start=START, days=90, seed=3)
    for i, r in enumerate(rows):  # every 9th article quotes market odds
        r["market_quote"] = i % 9 == 4
    ws = write_store(tmp_path_factory.mktemp("search_ws"), rows)
    build_index(ws.root, progress=False, embedder=EMB)
    return ws.root, sorted(rows, key=lambda r: (r["day"], r["doc_id"]))


def quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(-5, 95), words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4),
       mode=st.sampled_from(["hybrid", "dense", "bm25"]), k=st.integers(1, 30))
def test_no_hit_after_as_of_and_future_articles_refused(built, offset, words, mode, k):
    root, rows = built
    s = Searcher.open(root, embedder=EMB)
    as_of = START + timedelta(days=offset)
    hits = quiet(s.search, " ".join(words), as_of, k=k, mode=mode)
    assert len(hits) <= k
    assert all(h.day <= as_of for h in hits)
    keys = [(-h.score, h.day, h.doc_id) for h in hits]
    assert keys == sorted(keys)
    for r in rows[::7]:
        if hidden(r):
            continue
        if r["day"] > as_of:
            with pytest.raises(FutureArticleError):
                s.open_article(r["doc_id"], as_of)
        else:
            assert s.open_article(r["doc_id"], as_of).day == r["day"]


def test_hybrid_is_rrf_of_dense_and_bm25(built):
    root, _ = built
    s = Searcher.open(root, embedder=EMB)
    q, d = "senate election vote", "2025-04-20"
    dense = [h.doc_id for h in s.search(q, d, k=10, mode="dense")]
    bm25 = [h.doc_id for h in s.search(q, d, k=10, mode="bm25")]
    fused: dict[str, float] = {}
    for lst in (dense, bm25):
        for rank, doc in enumerate(lst, 1):
            fused[doc] = fused.get(doc, 0) + 1 / (60 + rank)
    hits = s.search(q, d, k=10)
    assert len(hits) == 10
    assert {h.doc_id: round(h.score, 12) for h in hits} == {
        doc: round(fused[doc], 12) for doc in [h.doc_id for h in hits]}
    assert min(h.score for h in hits) >= sorted(fused.values(), reverse=True)[9] - 1e-12
    rows, _ = rrf([np.array([5, 1]), np.array([1, 7])], 3)
    assert rows.tolist() == [1, 5, 7]


def test_results_do_not_depend_on_later_articles(built, tmp_path):
    root, rows = built
    cut = START + timedelta(days=40)
    trunc = write_store(tmp_path / "trunc", [r for r in rows if r["day"] <= cut])
    build_index(trunc.root, progress=False, embedder=EMB)
    full, part = Searcher.open(root, embedder=EMB), Searcher.open(trunc.root, embedder=EMB)
    for day in (cut - timedelta(days=20), cut - timedelta(days=3), cut):
        for mode in ("bm25", "dense", "hybrid"):
            for q in ("oil price", "senate vote court", "storm"):
                a = [h.to_dict() for h in full.search(q, day, k=15, mode=mode)]
                b = [h.to_dict() for h in part.search(q, day, k=15, mode=mode)]
                assert a == b
        ev_a = full.evidence_set(["oil price", "storm"], START, day)
        ev_b = part.evidence_set(["oil price", "storm"], START, day)
        assert [h.to_dict() for h in ev_a] == [h.to_dict() for h in ev_b]


def test_evidence_set_window_and_size(built):
    root, _ = built
    s = Searcher.open(root, embedder=EMB)
    start, end = date(2025, 3, 20), date(2025, 4, 10)
    ev = s.evidence_set(["oil price", "senate vote", "storm flood"], start, end)
    assert 0 < len(ev) <= 15 and len({h.doc_id for h in ev}) == len(ev)
    assert all(start <= h.day <= end for h in ev)
    assert s.evidence_set(["oil"], "2025-04-10", "2025-04-01") == []


def test_hit_and_article_dicts(built):
    root, _ = built
    s = Searcher.open(root, embedder=EMB)
    h = s.search("oil", "2025-05-01", k=1, mode="bm25")[0]
    assert isinstance(h, Hit) and h.to_dict()["day"] == h.day.isoformat() and h.rank == 1
    art = s.open_article(h.doc_id, "2025-05-01")
    d = art.to_dict()
    assert d["doc_id"] == h.doc_id and d["day"] == h.day.isoformat() and "oil" in d["body"]


def test_day_counts_and_range(built):
    root, rows = built
    s = Searcher.open(root, embedder=EMB)
    visible = [r for r in rows if not hidden(r)]
    counts = s.day_counts()
    assert sum(counts.values()) == len(visible) == len(s)
    assert s.first_day == visible[0]["day"] and s.last_day == visible[-1]["day"]
    assert s.snapshot_id
    assert sum(Searcher.open(root, hide=False).day_counts().values()) == len(rows)
    assert sum(Searcher.open(root, hide=["leak_flag"]).day_counts().values()) == sum(not r["leak_flag"] for r in rows)


def test_refusals_are_identical_whatever_the_reason(built):
    """Unknown, not yet visible, leak-flagged and market-quoting ids: one type, one message."""
    root, rows = built
    s = Searcher.open(root, embedder=EMB)
    as_of = START + timedelta(days=45)
    future = next(r for r in rows if r["day"] > as_of and not hidden(r))
    leak = next(r for r in rows if r["leak_flag"] and r["day"] <= as_of)
    quote = next(r for r in rows if r["market_quote"] and not r["leak_flag"] and r["day"] <= as_of)
    answers = set()
    for doc_id in ("0123456789abcdef", future["doc_id"], leak["doc_id"], quote["doc_id"], ""):
        with pytest.raises(ArticleUnavailableError) as err:
            s.open_article(doc_id, as_of)
        answers.add((type(err.value), str(err.value).replace(repr(doc_id), "ID")))
    assert len(answers) == 1
    assert FutureArticleError is ArticleUnavailableError
    # shown on request: the same ids open
    assert Searcher.open(root, hide=False).open_article(leak["doc_id"], as_of).leak_flag
    assert Searcher.open(root, hide=["leak_flag"]).open_article(quote["doc_id"], as_of).market_quote


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_hidden_articles_never_show_in_search(built, mode):
    root, rows = built
    s = Searcher.open(root, embedder=EMB)
    assert s.hidden == ("leak_flag", "market_quote") and not s.shows_market_quotes
    seen = set()
    for r in [r for r in rows if hidden(r)][:12]:
        query = r["body"] or r["title"]
        seen |= {h.doc_id for h in quiet(s.search, query, "2026-01-01", k=300, mode=mode)}
    assert seen and not seen & {r["doc_id"] for r in rows if hidden(r)}
    # the recorded ablation shows market quotes, still not leak-flagged articles
    ablation = Searcher.open(root, embedder=EMB, hide=["leak_flag"])
    assert ablation.shows_market_quotes
    quote = next(r for r in rows if r["market_quote"] and not r["leak_flag"] and r["body"])
    ids = {h.doc_id for h in quiet(ablation.search, quote["body"], "2026-01-01", k=300, mode=mode)}
    assert quote["doc_id"] in ids and not ids & {r["doc_id"] for r in rows if r["leak_flag"]}


def test_hidden_articles_are_out_of_the_statistics(built, tmp_path):
    """Hiding happens before ranking: the scores are those of a corpus without the hidden articles."""
    root, rows = built
    ws = write_store(tmp_path / "visible_only", [r for r in rows if not hidden(r)])
    build_index(ws.root, progress=False, embedder=EMB)
    full, only = Searcher.open(root, embedder=EMB), Searcher.open(ws.root, embedder=EMB)
    for mode in ("bm25", "dense", "hybrid"):
        for q in ("oil price", "senate vote court", "storm"):
            for day in ("2025-03-20", "2025-05-01"):
                assert [h.to_dict() for h in full.search(q, day, k=20, mode=mode)] == \
                       [h.to_dict() for h in only.search(q, day, k=20, mode=mode)]


def test_hide_switch_errors_and_close(built):
    root, _ = built
    with pytest.raises(ConfigError, match="market_quote"):
        Searcher.open(root, hide=["leak_flags"])
    with pytest.raises(ConfigError, match="list"):
        Searcher.open(root, hide="leak_flag")
    with Searcher.open(root, embedder=EMB) as s:
        assert s.search("oil", "2025-05-01", mode="bm25")
    with pytest.raises(WorkspaceError, match="closed"):
        s.search("oil", "2025-05-01", mode="bm25")


def test_bad_requests_give_clear_errors(built):
    root, _ = built
    s = Searcher.open(root, embedder=EMB)
    with pytest.raises(QueryError, match="not a date"):
        s.search("oil", "yesterday")
    with pytest.raises(QueryError, match="empty"):
        s.search("   ", "2025-04-01")
    with pytest.raises(QueryError, match="hybrid, dense, bm25"):
        s.search("oil", "2025-04-01", mode="sparse")
    with pytest.raises(QueryError):
        s.search("oil", "2025-04-01", k=0)
    with pytest.raises(ArticleUnavailableError):
        s.open_article("nope", "2025-04-01")
    assert issubclass(QueryError, ForecastEnvError)
    with pytest.warns(UserWarning, match="before the corpus"):
        assert s.search("oil", "2020-01-01") == []
    with pytest.warns(UserWarning, match="after the corpus"):
        assert s.search("oil", "2030-01-01", mode="bm25")
    with pytest.warns(UserWarning, match="max_query_chars"):
        s.search("oil " * 1000, "2025-04-01", mode="bm25")


def test_missing_and_corrupt_index(built, tmp_path):
    with pytest.raises(IndexMissingError, match="forecast-env index build --workspace"):
        Searcher.open(tmp_path)
    root, _ = built
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    shard = min((copy / "index" / "dense").glob("*.faiss"))
    shard.write_bytes(b"garbage")
    with pytest.raises(WorkspaceError, match=shard.name) as err:
        Searcher.open(copy)
    assert "index build" in str(err.value)


def test_incremental_build_redoes_only_changed_months(tmp_path):
    rows = make_rows(120, start=START, days=60, seed=5)
    ws = write_store(tmp_path / "ws", rows)
    first = build_index(ws.root, progress=False, embedder=EMB)
    assert len(first["rebuilt"]) == first["months"] == 2
    again = build_index(ws.root, progress=False, embedder=EMB)
    assert again["rebuilt"] == [] and again["articles"] == 120
    late = make_rows(10, start=START, days=20, seed=6)  # late-arriving articles of the first month
    write_store(ws.root, rows + late)
    upd = build_index(ws.root, progress=False, embedder=EMB)
    assert upd["rebuilt"] == ["2025-03"] and upd["articles"] == 130
    fresh = write_store(tmp_path / "fresh", rows + late)
    build_index(fresh.root, progress=False, embedder=EMB)
    a, b = Searcher.open(ws.root, embedder=EMB), Searcher.open(fresh.root, embedder=EMB)
    for mode in ("bm25", "dense", "hybrid"):
        assert [h.to_dict() for h in a.search("oil price", "2025-04-15", mode=mode)] == \
               [h.to_dict() for h in b.search("oil price", "2025-04-15", mode=mode)]


def test_searcher_opens_in_many_processes(built):
    import multiprocessing as mp

    root, _ = built
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        out = pool.starmap(_bm25_ids, [(str(root), "oil price")] * 2)
    assert out[0] == out[1] == _bm25_ids(str(root), "oil price")


def _bm25_ids(root: str, q: str) -> list[str]:
    return [h.doc_id for h in Searcher.open(root).search(q, "2025-04-15", mode="bm25")]


def test_index_build_on_an_empty_corpus_says_why(tmp_path):
    """A corpus whose every record was dropped: the message points at the funnel, not at `corpus build`."""
    from forecast_env.corpus_build.index import build_index
    from forecast_env.errors import CorpusError

    with pytest.raises(CorpusError, match="corpus build"):
        build_index(tmp_path, progress=False)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "report.md").write_text("# funnel\n")
    with pytest.raises(CorpusError, match="holds no articles"):
        build_index(tmp_path, progress=False)


@pytest.mark.slow
def test_micro_world_market_quotes_hidden_by_default(micro_index, micro_truth):
    """A market-quoting article of the sample world never shows in search and cannot be opened, unless
    the recorded ablation shows it."""
    quotes = [(u, w) for u, w in micro_truth["articles"].items() if w.get("market_quote") and w["expect"] == "keep"]
    assert quotes
    s, ablation = Searcher.open(micro_index), Searcher.open(micro_index, hide=["leak_flag"])
    for url, want in quotes:
        as_of = date.fromisoformat(want["day"]) + timedelta(days=3)
        query = want["title"]
        for mode in ("bm25", "hybrid"):
            assert url not in {h.url for h in quiet(s.search, query, as_of, k=50, mode=mode)}
        shown = {h.url: h.doc_id for h in quiet(ablation.search, query, as_of, k=50, mode="bm25")}
        assert url in shown
        with pytest.raises(ArticleUnavailableError):
            s.open_article(shown[url], as_of)
        assert ablation.open_article(shown[url], as_of).market_quote


def test_date_prefix_search_keeps_the_day_array_dtype(built, monkeypatch):
    """Every binary search on the day array (the as-of prefix, an evidence window's start) uses a key
    of the array's own dtype: with a Python int numpy converts the whole array on every call (18 ms a
    search at 10M articles)."""
    root, _ = built
    s = Searcher.open(root, embedder=EMB)
    keys = []
    real = np.searchsorted

    def spy(a, v, *args, **kw):
        if a is s.days:
            keys.append(v)
        return real(a, v, *args, **kw)

    monkeypatch.setattr(np, "searchsorted", spy)
    quiet(s.search, "election", "2025-03-15", k=3, mode="bm25")
    quiet(s.evidence_set, ["election"], "2025-03-01", "2025-03-15")
    assert len(keys) >= 3 and all(getattr(v, "dtype", None) == s.days.dtype for v in keys)
