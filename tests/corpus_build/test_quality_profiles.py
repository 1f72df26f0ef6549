"""Quality profiles (news | paper): number-heavy news survives the news profile, boilerplate pages do
not, explicit thresholds override a profile, the resolved thresholds are what is hashed, and the
ports treat blank lines, stop words and punctuation tokens as datatrove does."""

from __future__ import annotations

import pytest

from forecast_env.config import load_config
from forecast_env.corpus_build.pipeline import per_file_config_hash, snapshot_config_hash
from forecast_env.corpus_build.quality import (
    DEFAULT_PROFILE,
    PROFILES,
    FineWebFilter,
    GopherQualityFilter,
    apply_filters,
    build_filters,
    resolve_quality,
)
from forecast_env.errors import ConfigError
from tests.support.warc_data import MARKETS, SCORES

# Planted pages that are not articles, each the body a listing / tag / login / cookie / error page yields.
TAG_PAGE = "\n\n".join(
    [f"Election 2025: candidate {i} rally draws crowd\nMarch {i + 1}, 2025\nRead more" for i in range(12)])
LOGIN_PAGE = "\n".join(["Sign in", "Email address", "Password", "Remember me", "Forgot your password?",
                        "Sign in with Google", "Sign in with Apple", "New here? Create an account",
                        "By signing in you agree to our Terms of Use and Privacy Policy."])
COOKIE_PAGE = ("We value your privacy. We and our 842 partners use cookies and similar technologies to store and "
               "access information on your device. You can accept or manage your choices below.\n"
               "Accept all\nReject all\nManage preferences\nCookie policy\nPrivacy policy")
ERROR_PAGE = "Page not found\n404\nSorry, the page you were looking for does not exist.\nGo to the homepage\nSearch"
INDEX_PAGE = "\n".join(
    [section for i in range(8) for section in (f"World news {i}", f"Ceasefire talks resume in Cairo {i}",
                                                "Video", "2 hours ago", f"Markets rally on rate hopes {i}")])


def _filters(profile: str):
    return build_filters({"profile": profile})


@pytest.mark.parametrize("text", [SCORES, MARKETS], ids=["scores", "markets"])
def test_number_heavy_article_kept_under_news(text: str) -> None:
    res = apply_filters(text, _filters("news"))
    assert res.keep, f"news profile dropped a number-heavy article: {res.reason} {res.detail}"
    # the paper's thresholds lose it to the alphabetic-words rule: the reason the news profile exists
    paper = apply_filters(text, _filters("paper"))
    assert (paper.keep, paper.reason) == (False, "gopher_alpha_words")


@pytest.mark.parametrize("text", [TAG_PAGE, LOGIN_PAGE, COOKIE_PAGE, ERROR_PAGE, INDEX_PAGE],
                         ids=["tag", "login", "cookie", "error", "index"])
def test_planted_boilerplate_dropped_under_news(text: str) -> None:
    res = apply_filters(text, _filters("news"))
    assert not res.keep, "news profile kept a boilerplate page"


def test_default_profile_and_overrides() -> None:
    cfg = load_config("corpus")
    assert cfg["quality"]["profile"] == "news"  # the shipped default (issue 30); paper: replication
    assert resolve_quality(cfg["quality"])["filters"] == PROFILES["news"]
    assert resolve_quality(None)["profile"] == resolve_quality({})["profile"] == DEFAULT_PROFILE == "news"
    # the switch of the default keys no part anew (a workspace built with paper re-extracts no WARC),
    # while the snapshot id names the new default's corpus
    pinned = load_config("corpus", overrides=["quality.profile=paper"])
    assert per_file_config_hash(cfg) == per_file_config_hash(pinned)
    assert snapshot_config_hash(cfg) != snapshot_config_hash(pinned)
    news = resolve_quality(load_config("corpus", overrides=["quality.profile=news"])["quality"])
    assert news["profile"] == "news" and news["filters"] == PROFILES["news"]
    paper = resolve_quality(load_config("corpus", overrides=["quality.profile=paper"])["quality"])
    assert paper["filters"] == PROFILES["paper"]
    assert paper["filters"]["gopher_quality"]["max_non_alpha_words_ratio"] == 0.8
    over = load_config("corpus", overrides=["quality.profile=paper", "quality.c4.min_sentences=2"])
    r = resolve_quality(over["quality"])
    assert r["filters"]["c4"]["min_sentences"] == 2
    assert r["filters"]["fineweb"] == PROFILES["paper"]["fineweb"]  # the rest stays the profile's
    assert [f.min_sentences for f in build_filters(over["quality"]) if f.name == "c4"] == [2]
    with pytest.raises(ConfigError, match="not allowed"):
        load_config("corpus", overrides=["quality.profile=blog"])
    with pytest.raises(ConfigError, match="unknown threshold"):
        resolve_quality({"profile": "news", "c4": {"min_sentence": 2}})


def test_resolved_thresholds_are_hashed() -> None:
    news = load_config("corpus", overrides=["quality.profile=news"])
    same = load_config("corpus", overrides=[
        "quality.profile=news", f"quality.c4.min_sentences={PROFILES['news']['c4']['min_sentences']}"])
    paper = load_config("corpus", overrides=["quality.profile=paper"])
    spelled = load_config("corpus", overrides=[
        "quality.profile=paper",
        *(f"quality.{sec}.{k}={v}" for sec, params in PROFILES["paper"].items() for k, v in params.items()
          if not isinstance(v, list))])
    # spelling out a profile's own value does not change what is built, so not the ids either
    assert snapshot_config_hash(news) == snapshot_config_hash(same)
    assert snapshot_config_hash(paper) == snapshot_config_hash(spelled)
    assert snapshot_config_hash(news) != snapshot_config_hash(paper)
    # a part records every profile's verdicts: which profile is active does not key it ...
    assert per_file_config_hash(news) == per_file_config_hash(paper)
    # ... but an explicit threshold overrides every profile's (paper's min_sentences is 5), so it does
    assert per_file_config_hash(news) != per_file_config_hash(same)
    other = load_config("corpus", overrides=["quality.profile=news", "quality.c4.min_sentences=9"])
    assert snapshot_config_hash(other) != snapshot_config_hash(news)


def test_ports_match_datatrove_token_treatment() -> None:
    fw = FineWebFilter()
    para = SCORES.replace("\n\n", "\n")
    # datatrove drops empty lines before its line rules: paragraph spacing changes no line verdict
    lines = [s for s in SCORES.split("\n") if s.strip()]
    assert len(lines) == 9
    assert fw.filter(SCORES).reason == fw.filter(para).reason
    # ... but counts every newline for the newline ratio; the news profile counts line breaks only
    assert FineWebFilter(new_line_ratio=0.05).filter(SCORES).reason == "fineweb_newline_ratio"
    assert FineWebFilter(new_line_ratio=0.05, newlines_of_blank_lines=False).filter(SCORES).keep
    # Gopher's stop-word rule counts distinct stop words (datatrove: len(stop_words & set(words)))
    one_stop = " ".join(["the cat sat quietly near a window"] * 10)
    assert GopherQualityFilter().filter(one_stop).reason == "gopher_stop_words"
    # the alphabetic-words ratio: datatrove's denominator holds punctuation tokens ("(", "'", ";")
    # (the results round-up: 59% of its words hold a letter, far fewer of its tokens)
    g_all = GopherQualityFilter(max_non_alpha_words_ratio=0.55)
    g_words = GopherQualityFilter(max_non_alpha_words_ratio=0.55, alpha_ratio_of="words")
    assert g_all.filter(SCORES).reason == "gopher_alpha_words"
    assert g_words.filter(SCORES).keep


def test_funnel_counts_the_other_profile(tmp_path) -> None:
    from forecast_env.corpus_build.pipeline import build_corpus
    from tests.support.warc_data import Page, english_body, write_warc

    warc = write_warc(tmp_path / "w.warc.gz", [
        Page("https://news.example.com/scores", title="Premier League results and table",
             body=SCORES, published="2025-04-12T20:00:00Z"),
        Page("https://news.example.com/plain", title="Council approves the budget plan",
             body=english_body(77), published="2025-04-12T09:00:00Z"),
    ])
    cfg = load_config("corpus", overrides=["quality.profile=news"])
    summary = build_corpus([warc], tmp_path / "ws", config=cfg, workers=1, progress=False)
    assert summary["report"]["kept"] == 2  # the news profile keeps the results round-up
    other = summary["report"]["quality_profiles"]["paper"]
    assert other["would_drop"] == {"gopher_alpha_words": 1} and other["would_keep"] == {}
    md = (tmp_path / "ws" / "corpus" / "report.md").read_text()
    assert "## Quality: the paper profile" in md and "| gopher_alpha_words | 0 | 1 |" in md


def _store_bytes(ws) -> dict[str, bytes]:
    corpus = ws / "corpus"
    files = sorted(corpus.glob("articles/*.parquet")) + sorted(corpus.glob("dropped/*.parquet"))
    return {p.relative_to(corpus).as_posix(): p.read_bytes() for p in files}


def _dropped_ids(ws, stage: str) -> set[str]:
    import pyarrow.parquet as pq

    path = ws / "corpus" / "dropped" / f"{stage}.parquet"
    return set(pq.read_table(path, columns=["doc_id"])["doc_id"].to_pylist()) if path.exists() else set()


def test_switching_profile_reextracts_no_warc_and_builds_what_a_fresh_build_does(tmp_path) -> None:
    """A part records both profiles' verdicts: a second build with the other profile processes no file,
    and its store, id and funnel equal a fresh build's with that profile."""
    import shutil

    from forecast_env.corpus_build.pipeline import build_corpus
    from tests.support.warc_data import Page, english_body, write_warc

    warc = write_warc(tmp_path / "w.warc.gz", [
        Page("https://news.example.com/scores", title="Premier League results and table",
             body=SCORES, published="2025-04-12T20:00:00Z"),
        Page("https://news.example.com/plain", title="Council approves the budget plan",
             body=english_body(77), published="2025-04-12T09:00:00Z"),
        # number-heavy and before the window: news drops it at stage time, paper at stage quality
        Page("https://news.example.com/old-markets", title="Markets close higher",
             body=MARKETS, published="2024-11-02T21:00:00Z"),
    ])
    cfg = {p: load_config("corpus", overrides=[f"quality.profile={p}"]) for p in ("news", "paper")}
    ws = tmp_path / "ws"
    first = build_corpus([warc], ws, config=cfg["news"], workers=1, progress=False)
    news_store, news_quality, news_time = _store_bytes(ws), _dropped_ids(ws, "quality"), _dropped_ids(ws, "time")
    assert first["report"]["kept"] == 2 and len(news_time) == 1 and not news_quality

    switched = build_corpus([warc], ws, config=cfg["paper"], workers=1, progress=False)
    assert switched["counts"]["files_processed"] == 0  # no WARC read again
    fresh_ws = tmp_path / "fresh"
    fresh = build_corpus([warc], fresh_ws, config=cfg["paper"], workers=1, progress=False)
    assert fresh["counts"]["files_processed"] == 1
    assert _store_bytes(ws) == _store_bytes(fresh_ws)
    assert switched["snapshot_id"] == fresh["snapshot_id"] != first["snapshot_id"]
    assert {k: v for k, v in switched["report"].items() if k != "transfer"} == \
        {k: v for k, v in fresh["report"].items() if k != "transfer"}
    paper_quality = _dropped_ids(ws, "quality")
    assert switched["report"]["kept"] == 1 and len(paper_quality) == 2 and not _dropped_ids(ws, "time")
    # the funnel's other-profile counts agree with the two stores
    other = switched["report"]["quality_profiles"]["news"]
    assert sum(other["would_keep"].values()) == len(paper_quality - news_quality) == 2
    assert sum(other["would_drop"].values()) == len(news_quality - paper_quality) == 0
    assert other["would_keep"] == {"gopher_alpha_words": 2}

    # and back: the news store comes back byte for byte, still from the same part
    shutil.rmtree(ws / "corpus" / "merge", ignore_errors=True)
    back = build_corpus([warc], ws, config=cfg["news"], workers=1, progress=False)
    assert back["counts"]["files_processed"] == 0 and _store_bytes(ws) == news_store


def test_part_rows_carry_the_profiles_they_hold_for(tmp_path) -> None:
    from forecast_env.corpus_build.merge import profile_view
    from forecast_env.corpus_build.pipeline import process_warc
    from tests.support.warc_data import Page, english_body, write_warc

    warc = write_warc(tmp_path / "w.warc.gz", [
        Page("https://news.example.com/scores", title="Premier League results and table",
             body=SCORES, published="2025-04-12T20:00:00Z"),
        Page("https://news.example.com/old-markets", title="Markets close higher",
             body=MARKETS, published="2024-11-02T21:00:00Z"),
        Page("https://news.example.com/short", title="Short", body="The council met on Tuesday evening and approved the new budget plan for the coming year.",
             published="2025-04-12T20:00:00Z"),
        Page("https://news.example.com/plain", title="Council approves the budget plan",
             body=english_body(77), published="2025-04-12T09:00:00Z"),
    ])
    cfg = load_config("corpus", overrides=["quality.profile=paper"])
    arts, drops, _, _ = process_warc(warc, cfg, all_profiles=True)
    rows = {(r["url"].rsplit("/", 1)[-1], r["stage"], r["profile"]) for r in drops.to_pylist()}
    assert rows == {
        ("scores", "quality", "paper"),            # paper drops it; news keeps it: it is an article row
        ("old-markets", "quality", "paper"),       # paper drops it at quality ...
        ("old-markets", "time", "news"),           # ... news at the window
        ("short", "quality", "paper"), ("short", "quality", "news"),  # both drop it, each with its reason
    }
    assert sorted(u.rsplit("/", 1)[-1] for u in arts["url"].to_pylist()) == ["plain", "scores"]
    for profile, kept in (("paper", ["plain"]), ("news", ["plain", "scores"])):
        a, d = profile_view(arts, drops, profile)
        assert sorted(u.rsplit("/", 1)[-1] for u in a["url"].to_pylist()) == kept
        assert "profile" not in d.column_names
        # every record is accounted for once under each profile: kept or dropped at one stage
        assert sorted(d["doc_id"].to_pylist() + a["doc_id"].to_pylist()) == sorted(set(
            drops["doc_id"].to_pylist() + arts["doc_id"].to_pylist()))
    # the default view is the configured profile's
    a, d, _, _ = process_warc(warc, cfg)
    assert a["url"].to_pylist() == profile_view(arts, drops, "paper")[0]["url"].to_pylist()
    assert d.schema.names == profile_view(arts, drops, "paper")[1].schema.names


def test_profiles_must_clean_lines_alike() -> None:
    from forecast_env.corpus_build.quality import LINE_CLEANUP_KEYS, check_shared_cleanup

    resolved = {p: resolve_quality({}, p)["filters"] for p in PROFILES}
    check_shared_cleanup(resolved)  # the shipped profiles share their line cleanup
    for key in LINE_CLEANUP_KEYS:
        other = {**resolved, "x": {**resolved["paper"], "c4": {**resolved["paper"]["c4"], key: "changed"}}}
        with pytest.raises(ConfigError, match="remove different lines"):
            check_shared_cleanup(other)
