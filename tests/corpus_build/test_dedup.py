"""Dedup (docs/design.md §2): URL/title keys, MinHash equal to datasketch, the time-consistent rule."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import datasketch
import numpy as np
import polars as pl
import pytest

from forecast_env.config import load_config
from forecast_env.corpus_build.dedup import (
    MinHasher,
    find_duplicates,
    normalize_title,
    normalize_url,
    shingle_words,
)

CFG = load_config("corpus")["dedup"]
T0 = datetime(2025, 4, 1, 12, tzinfo=UTC)
WORDS = [f"w{i}" for i in range(3000)]


def _body(seed: int, n: int = 200) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _arts(rows: list[dict]) -> pl.DataFrame:
    out = []
    for i, r in enumerate(rows):
        t = T0 + timedelta(days=r.get("day", 0), hours=r.get("hour", 0))
        out.append({
            "doc_id": r.get("doc_id", f"d{i:03d}"), "url": r.get("url", f"https://site{i}.com/p/{i}"),
            "canonical_url": r.get("canonical"), "title": r.get("title", f"unique title {i}"),
            "body": r.get("body", _body(1000 + i)), "t": t, "t_crawl": r.get("crawl", t),
        })
    return pl.DataFrame(out, schema={"doc_id": pl.Utf8, "url": pl.Utf8, "canonical_url": pl.Utf8, "title": pl.Utf8,
                                     "body": pl.Utf8, "t": pl.Datetime("us", "UTC"), "t_crawl": pl.Datetime("us", "UTC")})


def _dups(df: pl.DataFrame, cfg: dict | None = None) -> dict[str, tuple[str, str]]:
    res = find_duplicates(df, cfg or CFG)
    return {d: (r, o) for d, r, o in res.iter_rows()}


def test_normalize_url() -> None:
    assert normalize_url("https://WWW.Example.com/News/a/?utm_source=x&b=2&a=1&fbclid=z#top") == \
        "example.com/News/a?a=1&b=2"
    assert normalize_url("http://example.com/News/a?b=2&a=1&gclid=1&ref=home") == "example.com/News/a?a=1&b=2"
    assert normalize_url("https://example.com:443/x/") == "example.com/x"
    assert normalize_url(None) is None and normalize_url("") is None


def test_normalize_title() -> None:
    assert normalize_title("  Breaking:  Council APPROVES the budget!! ") == "breaking council approves the budget"


@pytest.mark.parametrize("scheme", ["legacy", "affine32"])
@pytest.mark.parametrize("hash_name", ["fast", "sha1"])
def test_minhash_equals_datasketch(scheme: str, hash_name: str) -> None:
    hasher = MinHasher(num_perm=128, seed=CFG["seed"], scheme=scheme, shingle_hash=hash_name)
    texts = [_body(s, n) for s, n in ((1, 400), (2, 7), (3, 5), (4, 3), (5, 1200))]
    texts.append("Punctuation, Case and   spacing: 'are' ignored; only words count here!")
    for text in texts:
        words = shingle_words(text)
        k = min(5, len(words))
        shingles = [" ".join(words[i : i + k]).encode() for i in range(len(words) - k + 1)]
        ref = datasketch.MinHash(num_perm=128, seed=CFG["seed"], hashfunc=hasher.hashfunc(), scheme=scheme)
        ref.update_batch(shingles)
        assert np.array_equal(ref.hashvalues.astype(np.uint64), hasher.signature(text))
    assert hasher.signature("") is None


def test_canonical_url_pairs_both_ways() -> None:
    df = _arts([
        {"url": "https://www.news.com/a?utm_source=tw", "day": 0},
        {"url": "https://m.news.com/a-mobile", "canonical": "https://news.com/a", "day": 1},
        {"url": "http://news.com/a/", "day": 2},
        {"url": "https://other.com/b", "canonical": "https://news.com/c", "day": 0},
        {"url": "https://news.com/c", "day": 3},  # its URL is an earlier page's canonical
    ])
    assert _dups(df) == {"d001": ("dup_canonical_url", "d000"), "d002": ("dup_canonical_url", "d000"),
                         "d004": ("dup_canonical_url", "d003")}


def test_title_window_and_min_words() -> None:
    title = "Council approves the new river bridge budget"
    df = _arts([
        {"title": title, "day": 0},
        {"title": title.upper() + "!", "day": 6},
        {"title": title, "day": 20},          # 14 days after the previous member: not within 7
        {"title": "Morning Briefing", "day": 0},
        {"title": "Morning Briefing", "day": 1},  # generic short titles never pair
    ])
    assert _dups(df) == {"d001": ("dup_title", "d000")}


def test_minhash_near_duplicate_and_stage_order() -> None:
    base = _body(7, 300)
    near = base.rsplit(" ", 1)[0] + " extra"
    df = _arts([
        {"body": base, "day": 0},
        {"body": near, "day": 1},
        {"body": base, "day": 2, "title": "unique title 0"},  # title needs >= 6 words: minhash fires
        {"body": base, "day": 3, "url": "https://site0.com/p/0"},  # canonical comes first
    ])
    assert _dups(df) == {"d001": ("dup_minhash", "d000"), "d002": ("dup_minhash", "d000"),
                         "d003": ("dup_canonical_url", "d000")}


def test_ties_by_crawl_time_then_doc_id() -> None:
    body = _body(9)
    same_t = {"body": body, "day": 0}
    df = _arts([
        {**same_t, "doc_id": "b", "crawl": T0 + timedelta(hours=1)},
        {**same_t, "doc_id": "a", "crawl": T0 + timedelta(hours=2)},
        {**same_t, "doc_id": "c", "crawl": T0 + timedelta(hours=1)},
    ])
    # b and c crawled first (tie broken by doc id: b < c); a crawled last
    assert _dups(df) == {"c": ("dup_minhash", "b"), "a": ("dup_minhash", "b")}


def test_chain_keeps_earliest_and_later_never_removes_earlier() -> None:
    a, b = _body(11, 300), _body(12, 300)
    # x resembles both a and b (shares a canonical with a, a body with b): only x goes
    df = _arts([
        {"body": a, "day": 0, "url": "https://a.com/1"},
        {"body": b, "day": 1, "url": "https://b.com/2"},
        {"body": b, "day": 2, "canonical": "https://a.com/1"},
    ])
    assert _dups(df) == {"d002": ("dup_canonical_url", "d000")}
    # chain by titles: each within 7 days of the previous; all but the first go
    title = "Storm closes the coastal road for a week"
    chain = _arts([{"title": title, "day": d} for d in (0, 5, 10, 15)])
    assert {k: v[0] for k, v in _dups(chain).items()} == {"d001": "dup_title", "d002": "dup_title",
                                                           "d003": "dup_title"}


def test_time_consistency_random() -> None:
    """The dedup of the articles up to day D equals the full dedup restricted to day D."""
    rng = random.Random(5)
    bodies = [_body(100 + i, 150) for i in range(6)]
    titles = ["The council approves the river bridge plan today", "Morning Briefing", None]
    rows = []
    for i in range(120):
        rows.append({
            "doc_id": f"{rng.randrange(16**6):06x}", "day": rng.randrange(0, 30), "hour": rng.randrange(24),
            "body": rng.choice(bodies) if rng.random() < 0.5 else _body(5000 + i, 150),
            "title": rng.choice(titles) or f"t {i}",
            "url": f"https://s{rng.randrange(8)}.com/{rng.randrange(40)}",
            "canonical": rng.choice([None, f"https://s0.com/{rng.randrange(40)}"]),
        })
    df = _arts(rows)
    full = find_duplicates(df, CFG)
    assert full.height > 10
    for day in (3, 10, 17, 25):
        cut = T0.replace(hour=0) + timedelta(days=day + 1)
        sub = df.filter(pl.col("t") < cut)
        part = find_duplicates(sub, CFG)
        expect = full.filter(pl.col("doc_id").is_in(sub["doc_id"].to_list()))
        assert part.sort("doc_id").equals(expect.sort("doc_id"))


def test_order_is_by_visibility_time_not_publication_time() -> None:
    # a: published first but modified (visible) three days later; b: a copy visible in between.
    # By visibility b came first, so a (as crawled, the modified page) is the duplicate.
    body = _body(7)
    df = _arts([{"doc_id": "a", "body": body}, {"doc_id": "b", "body": body, "day": 1}])
    df = df.with_columns(pl.Series("visible_at", [T0 + timedelta(days=3), T0 + timedelta(days=1)],
                                   dtype=pl.Datetime("us", "UTC")))
    assert _dups(df) == {"a": ("dup_minhash", "b")}
    # the title window is measured in visibility time too: 8 days apart by v, 1 day by t
    title = "Council approves the new city budget for next year"
    df = _arts([{"doc_id": "a", "title": title}, {"doc_id": "b", "title": title, "day": 1}])
    df = df.with_columns(pl.Series("visible_at", [T0, T0 + timedelta(days=8)], dtype=pl.Datetime("us", "UTC")))
    assert _dups(df) == {}
    assert _dups(df.drop("visible_at")) == {"b": ("dup_title", "a")}
