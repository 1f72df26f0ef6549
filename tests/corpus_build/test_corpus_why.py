"""`forecast-env corpus why URL`: planted kept, dropped, duplicate and never-seen URLs in a real build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forecast_env.cli.main import main as cli_main
from forecast_env.config import load_config
from forecast_env.corpus_build.pipeline import build_corpus
from forecast_env.corpus_build.why import NEVER_SEEN_EXIT, explain_url, render_why
from tests.support.warc_data import Page, english_body, write_warc


@pytest.fixture(scope="module")
def why_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("why_world")
    shared = english_body(900)
    warc = write_warc(root / "w.warc.gz", [
        Page("https://www.news.example.com/kept-story?utm_source=feed", title="Council approves the budget plan",
             body=english_body(901), published="2025-04-02T08:00:00Z"),
        Page("https://news.example.com/first", title="Bridge repairs start in the northern valley region",
             body=shared, published="2025-04-01T08:00:00Z"),
        Page("https://news.example.com/second", title="Bridge repairs begin this week in the valley",
             body=shared, published="2025-04-03T08:00:00Z", crawl="2025-04-04T10:00:00Z"),  # later copy
        Page("https://news.example.com/short", title="Brief", body="Too short to keep.",
             published="2025-04-02T08:00:00Z"),
        Page("https://news.example.com/old", title="An old story about the harbour plan",
             body=english_body(902), published="2024-11-02T08:00:00Z"),
        # the same URL crawled twice: one record kept (April), one too old (before corpus_start)
        Page("https://news.example.com/twice", title="The airport plan is approved by the region",
             body=english_body(903), published="2025-04-05T08:00:00Z"),
        Page("https://news.example.com/twice", title="The airport plan is discussed by the region",
             body=english_body(904), published="2024-12-01T08:00:00Z", crawl="2025-04-06T10:00:00Z"),
    ])
    ws = root / "ws"
    build_corpus([warc], ws, workers=1, progress=False)
    return ws


def test_kept_url_matches_after_normalisation(why_ws: Path) -> None:
    ans = explain_url(why_ws, "http://news.example.com/kept-story/")  # no www, no utm, slash, http
    assert [r.status for r in ans.records] == ["kept"]
    rec = ans.records[0]
    assert rec.day == "2025-04-02" and rec.visible_source == "pub" and rec.t_rule
    assert "kept" in render_why(ans) and "2025-04-02" in render_why(ans)


def test_dropped_and_duplicate(why_ws: Path) -> None:
    short = explain_url(why_ws, "https://news.example.com/short")
    assert [(r.status, r.stage, r.reason) for r in short.records] == [("dropped", "quality", "gopher_short_doc")]
    old = explain_url(why_ws, "https://news.example.com/old")
    assert [(r.stage, r.reason, r.detail) for r in old.records] == [("time", "before_corpus_start", "2024-11-02")]
    dup = explain_url(why_ws, "https://news.example.com/second")
    assert [r.status for r in dup.records] == ["duplicate"]
    rec = dup.records[0]
    first = explain_url(why_ws, "https://news.example.com/first").records[0]
    assert first.status == "kept" and rec.dup_of == first.doc_id
    assert rec.dup_of_url == "https://news.example.com/first" and rec.dup_of_day == "2025-04-01"
    assert rec.reason.startswith("dup_")


def test_every_record_of_a_url_is_listed(why_ws: Path) -> None:
    ans = explain_url(why_ws, "https://news.example.com/twice")
    assert sorted((r.status, r.reason) for r in ans.records) == [("dropped", "before_corpus_start"), ("kept", None)]


def test_cli_exit_codes_and_json(why_ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["corpus", "why", "--workspace", str(why_ws), "https://news.example.com/short", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seen"] and out["records"][0]["reason"] == "gopher_short_doc"
    code = cli_main(["corpus", "why", "--workspace", str(why_ws), "https://elsewhere.example.org/never"])
    assert code == NEVER_SEEN_EXIT
    assert "never seen" in capsys.readouterr().out
    assert cli_main(["corpus", "why", "--workspace", str(why_ws.parent / "nothing"), "https://x.org/a"]) == 2


@pytest.fixture(scope="module")
def keep_text_ws(why_ws: Path) -> Path:
    """The same WARC built with `--keep-dropped-text` (through the CLI) into its own workspace."""
    ws = why_ws.parent / "ws_text"
    assert cli_main(["corpus", "build", "--warc", str(why_ws.parent / "w.warc.gz"), "--workspace", str(ws),
                     "--workers", "1", "--no-progress", "--keep-dropped-text"]) == 0
    return ws


def _manifest(ws: Path) -> dict:
    return json.loads((ws / "corpus" / "manifest.json").read_text())


def test_keep_dropped_text_stores_and_shows_the_head(why_ws: Path, keep_text_ws: Path) -> None:
    old = explain_url(keep_text_ws, "https://news.example.com/old").records
    assert [(r.stage, r.reason) for r in old] == [("time", "before_corpus_start")]
    # the planted body's opening words, after the headline trafilatura's body starts with
    expected = " ".join(english_body(902).split()[:6])
    assert old[0].text_head and expected in " ".join(old[0].text_head.split()[:20]) and len(old[0].text_head) <= 500
    assert len(english_body(902)) > 500 and len(old[0].text_head) == 500
    short = explain_url(keep_text_ws, "https://news.example.com/short").records[0]
    assert short.text_head and "Too short to keep." in short.text_head
    shown = render_why(explain_url(keep_text_ws, "https://news.example.com/short"))
    assert "text: " in shown and "Too short to keep." in shown.split("text: ", 1)[1]
    dup = explain_url(keep_text_ws, "https://news.example.com/second").records[0]  # dedup's rows too
    assert dup.status == "duplicate" and dup.text_head and len(dup.text_head) == 500
    assert " ".join(english_body(900).split()[:6]) in " ".join(dup.text_head.split()[:20])
    # without the flag: the column is there and null, nothing is shown
    assert explain_url(why_ws, "https://news.example.com/second").records[0].text_head is None
    plain = explain_url(why_ws, "https://news.example.com/old").records[0]
    assert plain.text_head is None and "text:" not in render_why(explain_url(why_ws, "https://news.example.com/old"))
    import polars as pl

    assert pl.read_parquet(why_ws / "corpus" / "dropped" / "time.parquet")["text_head"].null_count() >= 1
    # a different part, the same corpus
    assert _manifest(keep_text_ws)["snapshot_id"] == _manifest(why_ws)["snapshot_id"]
    assert {p.name for p in (keep_text_ws / "corpus" / "parts").glob("*.json")} != {
        p.name for p in (why_ws / "corpus" / "parts").glob("*.json")}


def test_what_the_other_profile_decides(tmp_path: Path) -> None:
    """A paper build: `why` says, per record that reached the quality stage, whether news would keep it
    (read from the part, which holds both profiles' verdicts)."""
    from tests.corpus_build.test_quality_profiles import SCORES

    warc = write_warc(tmp_path / "w.warc.gz", [
        Page("https://news.example.com/scores", title="Premier League results and table", body=SCORES,
             published="2025-04-12T20:00:00Z"),
        Page("https://news.example.com/short", title="Short",
             body="The council met on Tuesday evening and approved the new budget plan for the coming year.",
             published="2025-04-12T20:00:00Z"),
        Page("https://news.example.com/plain", title="Council approves the budget plan", body=english_body(77),
             published="2025-04-12T09:00:00Z"),
    ])
    ws = tmp_path / "ws"
    build_corpus([warc], ws, config=load_config("corpus", overrides=["quality.profile=paper"]), workers=1,
                 progress=False)  # paper, for replication (the default is news)
    scores = explain_url(ws, "https://news.example.com/scores").records[0]
    assert (scores.stage, scores.reason) == ("quality", "gopher_alpha_words")
    assert scores.other_profiles == {"news": None}  # news passes it
    assert "the news profile passes its quality filters" in render_why(explain_url(ws, "https://news.example.com/scores"))
    short = explain_url(ws, "https://news.example.com/short").records[0]
    assert short.reason == "gopher_short_doc" and short.other_profiles["news"].startswith("gopher_short_doc")
    kept = explain_url(ws, "https://news.example.com/plain").records[0]
    assert kept.status == "kept" and kept.other_profiles == {"news": None}
    out = json.loads(_cli_json(ws, "https://news.example.com/short"))
    assert out["records"][0]["other_profiles"]["news"].startswith("gopher_short_doc")
    # the part gone: the store still answers, without the other profile's verdict
    for part in (ws / "corpus" / "parts").glob("*.dropped.parquet"):
        part.unlink()
    assert explain_url(ws, "https://news.example.com/scores").records[0].other_profiles is None


def _cli_json(ws: Path, url: str) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli_main(["corpus", "why", "--workspace", str(ws), url, "--json"]) == 0
    return buf.getvalue()
