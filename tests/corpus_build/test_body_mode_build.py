"""`corpus.extract.body_mode` in a real build: the chosen body path, its own parts, its own snapshot id."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from forecast_env.config import load_config
from forecast_env.corpus_build.extract import extract_page
from forecast_env.corpus_build.pipeline import build_corpus, per_file_config_hash, snapshot_config_hash
from forecast_env.corpus_build.quality import apply_filters, build_filters
from forecast_env.errors import ConfigError, CorpusError
from tests.support.warc_data import Page, english_body, write_warc

URL = "https://news.example.com/port-strike"


def _cfg(mode: str | None) -> dict:
    cfg = load_config("corpus")
    if mode is not None:
        cfg["extract"] = {"body_mode": mode}
    return cfg


def _stored(body: str) -> str:
    """The body as the store keeps it: after the quality stage's own rewrite (C4's line handling)."""
    res = apply_filters(body, build_filters(load_config("corpus")["quality"]))
    assert res.keep
    return res.text if res.text is not None else body


def test_body_mode_build_uses_its_body_and_never_reuses_parts(tmp_path: Path) -> None:
    page = Page(URL, title="Port strike talks resume after a long pause", body=english_body(950),
                published="2025-04-02T08:00:00Z")
    # a small results table in the story: trafilatura reads it as rows, our blocks leave out short cells
    table = ("<table><tr><td>Harbour</td><td>12</td></tr><tr><td>Riverside</td><td>9</td></tr>"
             "<tr><td>Old town</td><td>4</td></tr></table>")
    html = page.payload().decode("utf-8").replace("</article>", table + "</article>")
    page = Page(URL, raw=html.encode("utf-8"))
    warc = write_warc(tmp_path / "w.warc.gz", [page])
    own_body = _stored(extract_page(html, URL, body_mode="own").body)
    traf_body = _stored(extract_page(html, URL, body_mode="trafilatura").body)
    assert own_body != traf_body and "Riverside" in traf_body and "Riverside" not in own_body
    assert _stored(extract_page(html, URL).body) == traf_body  # the default path is trafilatura's

    ws = tmp_path / "ws"
    traf = build_corpus([warc], ws, config=_cfg("trafilatura"), workers=1, progress=False)
    bodies = pl.read_parquet(sorted((ws / "corpus" / "articles").glob("*.parquet")))["body"].to_list()
    assert bodies == [traf_body]

    own = build_corpus([warc], ws, config=_cfg("own"), workers=1, progress=False)
    assert own["counts"]["files_processed"] == 1  # the trafilatura part is not reused
    assert own["snapshot_id"] != traf["snapshot_id"]
    bodies = pl.read_parquet(sorted((ws / "corpus" / "articles").glob("*.parquet")))["body"].to_list()
    assert bodies == [own_body]
    assert len(list((ws / "corpus" / "parts").glob("*.articles.parquet"))) == 2


def test_body_mode_hashes_and_validation() -> None:
    assert per_file_config_hash(_cfg("trafilatura")) != per_file_config_hash(_cfg("own"))
    assert per_file_config_hash(_cfg("longer")) != per_file_config_hash(_cfg("trafilatura"))
    assert snapshot_config_hash(_cfg("trafilatura")) != snapshot_config_hash(_cfg("own"))
    no_section = _cfg(None)
    no_section.pop("extract", None)  # the default spelled out or left off: the same corpus
    assert snapshot_config_hash(no_section) == snapshot_config_hash(_cfg("trafilatura"))
    assert per_file_config_hash(no_section) == per_file_config_hash(_cfg("trafilatura"))
    assert load_config("corpus")["extract"]["body_mode"] == "trafilatura"
    with pytest.raises(ConfigError):
        load_config("corpus", overrides=["extract.body_mode=readability"])
    with pytest.raises(CorpusError):
        per_file_config_hash(_cfg("readability"))
