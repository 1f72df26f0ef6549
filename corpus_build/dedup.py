"""Time-consistent duplicate suppression over the whole corpus (docs/design.md §2).

Three stages, in order: canonical URL, same normalized title within a window, MinHash-LSH over
lower-cased word 5-grams. Articles are ordered by visibility time (`visible_at`, docs/design.md
§2.timestamps), then crawl time, then doc id; an article is suppressed when any stage pairs it with
an article *earlier* in that order, whether that earlier one was kept or not. So an article's fate
depends only on articles visible before it, and the corpus as of day D equals the full corpus
restricted to day D (docs/design.md §2.dedup).

Every stage is a group-by over (key, article rank): the first member of a key group is the earliest
article holding that key, so "has an earlier partner" is `min(rank) over the group < own rank`.
Written with polars over columns, so the same grouping can run on a distributed engine.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np
import polars as pl
import pyarrow as pa

from forecast_env.errors import ConfigError

MERSENNE_PRIME = np.uint64((1 << 61) - 1)
MAX_HASH = np.uint64((1 << 32) - 1)
_FMIX32 = (np.uint32(16), np.uint32(0x85EBCA6B), np.uint32(13), np.uint32(0xC2B2AE35), np.uint32(16))
_MIX_MULT = np.uint64(0x9E3779B97F4A7C15)
_M64 = (1 << 64) - 1

#: Query parameters that only track the visit (removed before URL comparison).
TRACKING_PARAMS = {
    "fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "ref", "ref_src", "ref_url", "cmpid",
    "ocid", "igshid", "yclid", "_ga", "_gl", "mkt_tok", "spm", "share", "smid", "sr_share", "cmp",
    "ito", "itm_source", "itm_medium", "itm_campaign", "src", "source", "via", "ns_mchannel",
    "ns_source", "ns_campaign", "ns_linkname", "ns_fee", "taid", "guccounter", "guce_referrer",
    "guce_referrer_sig", "soc_src", "soc_trk", "__twitter_impression", "wt.mc_id", "wt_mc_id",
}
_WORD = re.compile(r"\w+", re.UNICODE)
_PUNCT = re.compile(r"[^\w\s]+", re.UNICODE)
_SPACE = re.compile(r"\s+")

DEDUP_REASONS = ("dup_canonical_url", "dup_title", "dup_minhash")


# ---------------------------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------------------------


def normalize_url(url: str | None) -> str | None:
    """The comparison key of a URL: no scheme, lower-case host without `www.`, no fragment, no
    tracking parameters, remaining parameters sorted, no trailing slash."""
    if not url or not isinstance(url, str):
        return None
    text = url.strip()
    if not text:
        return None
    if "://" not in text:
        text = "http://" + text.lstrip("/")
    try:
        parts = urlsplit(text)
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port
    except ValueError:
        return text.lower()
    host = host.removeprefix("www.")
    if port and port not in (80, 443):
        host = f"{host}:{port}"
    params = [
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not (k.lower().startswith("utm_") or k.lower() in TRACKING_PARAMS)
    ]
    query = urlencode(sorted(params))
    path = parts.path.rstrip("/")
    return f"{host}{path}" + (f"?{query}" if query else "")


def normalize_title(title: str | None) -> str:
    """Lower-case, punctuation stripped, whitespace collapsed (NFKC first)."""
    if not title:
        return ""
    text = unicodedata.normalize("NFKC", title).lower()
    text = _PUNCT.sub(" ", text)
    return _SPACE.sub(" ", text).strip()


# ---------------------------------------------------------------------------------------------
# MinHash
# ---------------------------------------------------------------------------------------------


def shingle_words(text: str | None) -> list[str]:
    """The lower-cased words a document's shingles are built from."""
    return _WORD.findall(text.lower()) if text else []


def _mix64(h: np.ndarray) -> np.ndarray:
    # splitmix64 finalizer: spreads the polynomial combination over all bits
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def fast_shingle_hashes(words: Sequence[str], k: int = 5) -> np.ndarray:
    """32-bit hashes of the word k-grams of `words` (crc32 per word, combined in uint64).

    A document with fewer than k words is one shingle of all its words; no words: no shingles.
    """
    if not words:
        return np.empty(0, dtype=np.uint64)
    crc = np.fromiter((zlib.crc32(w.encode("utf-8")) for w in words), dtype=np.uint64, count=len(words))
    crc += np.uint64(1)
    n = len(words)
    kk = min(k, n)
    m = n - kk + 1
    with np.errstate(over="ignore"):
        h = np.zeros(m, dtype=np.uint64)
        for j in range(kk):
            h = h * _MIX_MULT + crc[j : j + m]
        return _mix64(h) >> np.uint64(32)


def fast_shingle_hash(shingle: bytes | str) -> int:
    """The scalar twin of `fast_shingle_hashes` for one shingle (words joined by spaces); pass it
    to `datasketch.MinHash(hashfunc=...)` to get identical signatures."""
    text = shingle.decode("utf-8") if isinstance(shingle, bytes) else shingle
    h = 0
    for w in text.split(" "):
        h = (h * 0x9E3779B97F4A7C15 + zlib.crc32(w.encode("utf-8")) + 1) & _M64
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & _M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & _M64
    h ^= h >> 31
    return h >> 32


def sha1_shingle_hashes(words: Sequence[str], k: int = 5) -> np.ndarray:
    """datasketch's default hashing (`sha1_hash32`) of each space-joined shingle (slow, exact)."""
    from datasketch.hashfunc import sha1_hash32

    if not words:
        return np.empty(0, dtype=np.uint64)
    kk = min(k, len(words))
    shingles = [" ".join(words[i : i + kk]).encode("utf-8") for i in range(len(words) - kk + 1)]
    return np.fromiter((sha1_hash32(s) for s in shingles), dtype=np.uint64, count=len(shingles))


class MinHasher:
    """Vectorized MinHash signatures, bit-identical to `datasketch.MinHash` given the same hash.

    scheme "legacy": `(a * h + b) % (2^61 - 1) & (2^32 - 1)` (datasketch < 2.0 and its `legacy`);
    scheme "affine32": fmix32 pre-mix then `a * h + b` in uint32 (datasketch 2.x default).
    """

    def __init__(self, num_perm: int = 128, seed: int = 1, scheme: str = "affine32",
                 shingle_hash: str = "fast", k: int = 5) -> None:
        if scheme not in ("legacy", "affine32"):
            raise ConfigError(f"dedup.minhash_scheme = {scheme!r}; choose legacy or affine32")
        if shingle_hash not in ("fast", "sha1"):
            raise ConfigError(f"dedup.shingle_hash = {shingle_hash!r}; choose fast or sha1")
        self.num_perm, self.seed, self.scheme, self.k = num_perm, seed, scheme, k
        self.shingle_hash = shingle_hash
        gen = np.random.RandomState(seed)
        if scheme == "legacy":
            perms = np.array(
                [(gen.randint(1, MERSENNE_PRIME, dtype=np.uint64), gen.randint(0, MERSENNE_PRIME, dtype=np.uint64))
                 for _ in range(num_perm)], dtype=np.uint64,
            ).T
            self.a, self.b = perms[0].copy(), perms[1].copy()
        else:
            self.a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
            self.b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)

    def hashfunc(self):
        """The per-shingle hash function to hand to datasketch for an equal signature."""
        if self.shingle_hash == "fast":
            return fast_shingle_hash
        from datasketch.hashfunc import sha1_hash32

        return sha1_hash32

    def shingle_hashes(self, text: str | None) -> np.ndarray:
        words = shingle_words(text)
        if self.shingle_hash == "fast":
            return fast_shingle_hashes(words, self.k)
        return sha1_shingle_hashes(words, self.k)

    def _permute_min(self, hv: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            if self.scheme == "legacy":
                x = hv[:, None] * self.a[None, :]
                x += self.b[None, :]
                # x mod (2^61 - 1) without a division: fold the top 3 bits onto the low 61; the
                # result is < 2p, and subtracting p once only adds 1 to the low 32 bits we keep
                y = x >> np.uint64(61)
                x &= MERSENNE_PRIME
                x += y
                x += x >= MERSENNE_PRIME
                x &= MAX_HASH
                return x.min(axis=0)
            h = hv.astype(np.uint32)
            s1, m1, s2, m2, s3 = _FMIX32
            h = h ^ (h >> s1)
            h = h * m1
            h = h ^ (h >> s2)
            h = h * m2
            h = h ^ (h >> s3)
            phv = h[:, None] * self.a[None, :]
            phv += self.b[None, :]
            return phv.min(axis=0).astype(np.uint64)

    def signature(self, text: str | None) -> np.ndarray | None:
        """The signature of one text (uint64 values < 2^32), None when it has no words."""
        hv = self.shingle_hashes(text)
        if hv.size == 0:
            return None
        # small blocks keep the (shingles x perms) temporaries in cache
        step = max(1, 32768 // self.num_perm)
        out = self._permute_min(hv[:step])
        for i in range(step, hv.size, step):
            np.minimum(out, self._permute_min(hv[i : i + step]), out=out)
        return out

    def signatures(self, texts: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray]:
        """Signatures of many texts: (n x num_perm uint32 matrix, bool mask of texts with words)."""
        sig = np.zeros((len(texts), self.num_perm), dtype=np.uint32)
        ok = np.zeros(len(texts), dtype=bool)
        for i, text in enumerate(texts):
            s = self.signature(text)
            if s is not None:
                sig[i] = s
                ok[i] = True
        return sig, ok


def band_keys(sig: np.ndarray, bands: int, rows: int) -> list[np.ndarray]:
    """Per band, the bytes of each row's band slice (exact LSH bucket keys)."""
    if bands * rows != sig.shape[1]:
        raise ConfigError(f"dedup.bands x dedup.rows = {bands} x {rows} must equal num_perm {sig.shape[1]}")
    sig = np.ascontiguousarray(sig, dtype=np.uint32)
    out = []
    for b in range(bands):
        block = np.ascontiguousarray(sig[:, b * rows : (b + 1) * rows])
        out.append(block.view(np.dtype((np.void, 4 * rows))).ravel())
    return out


# ---------------------------------------------------------------------------------------------
# the time-consistent rule
# ---------------------------------------------------------------------------------------------


def _earliest_partner(pairs: pl.DataFrame) -> pl.DataFrame:
    """pairs (rank, key) -> (rank, partner): the earliest rank sharing a key with an earlier member."""
    if pairs.height == 0:
        return pl.DataFrame({"rank": [], "partner": []}, schema={"rank": pl.Int64, "partner": pl.Int64})
    first = pairs.group_by("key").agg(pl.col("rank").min().alias("first"))
    return (
        pairs.join(first, on="key")
        .filter(pl.col("first") < pl.col("rank"))
        .group_by("rank")
        .agg(pl.col("first").min().alias("partner"))
    )


def order_articles(df: pl.DataFrame) -> pl.DataFrame:
    """Sort by (v, t_crawl, doc_id) and number the rows: `rank` is the visibility order.

    v is `visible_at`; a table without it (written before visibility times) falls back to `t`.
    """
    v = pl.coalesce("visible_at", "t") if "visible_at" in df.columns else pl.col("t")
    return df.with_columns(v.alias("v")).sort(["v", "t_crawl", "doc_id"], nulls_last=True).with_row_index(
        "rank").with_columns(pl.col("rank").cast(pl.Int64))


def url_pairs(ranks: pl.Series | np.ndarray, canonical_keys: Sequence[str | None] | pl.Series,
              url_keys: Sequence[str | None] | pl.Series) -> pl.DataFrame:
    """(rank, key) for stage (a): each article holds its canonical key and its own URL key."""
    ranks = pl.Series("rank", ranks, dtype=pl.Int64)
    return pl.DataFrame({
        "rank": pl.concat([ranks, ranks]),
        "key": pl.concat([pl.Series(canonical_keys, dtype=pl.Utf8), pl.Series(url_keys, dtype=pl.Utf8)]),
    }).drop_nulls("key").unique()


def url_partners(pairs: pl.DataFrame) -> pl.DataFrame:
    """Stage (a): (rank, partner) for every article sharing a URL key with an earlier one."""
    return _earliest_partner(pairs)


def title_partners(titles: pl.DataFrame, cfg: Mapping[str, Any]) -> pl.DataFrame:
    """Stage (b) over (rank, v, key = normalized title): (rank, partner), the partner being the
    previous member of the title group when it is within the window of visibility times."""
    window_us = int(cfg.get("title_window_days", 7)) * 86_400 * 1_000_000
    tdf = titles.select(["rank", "v", "key"]).filter(
        pl.col("key").str.split(" ").list.len() >= int(cfg.get("min_title_words", 6))
    )
    tdf = tdf.filter(pl.col("key") != "").sort("rank").with_columns(
        pl.col("v").cast(pl.Int64).alias("t_us"),
    )
    tdf = tdf.with_columns(
        pl.col("rank").shift(1).over("key").alias("prev_rank"),
        pl.col("t_us").shift(1).over("key").alias("prev_t"),
    )
    hits = tdf.filter(pl.col("prev_rank").is_not_null() & (pl.col("t_us") - pl.col("prev_t") <= window_us))
    return hits.select([pl.col("rank").cast(pl.Int64), pl.col("prev_rank").cast(pl.Int64).alias("partner")])


def make_hasher(cfg: Mapping[str, Any]) -> MinHasher:
    """The MinHasher the `dedup` config section describes."""
    return MinHasher(num_perm=int(cfg.get("num_perm", 128)), seed=int(cfg.get("seed", 1)),
                     scheme=str(cfg.get("minhash_scheme", "affine32")),
                     shingle_hash=str(cfg.get("shingle_hash", "fast")), k=int(cfg.get("shingle_words", 5)))


def combine_partners(canon: pl.DataFrame, title: pl.DataFrame, lsh: pl.DataFrame) -> pl.DataFrame:
    """(rank, partner, reason) per suppressed article: the first stage, in stage order, that pairs it."""
    stages = [(canon, "dup_canonical_url"), (title, "dup_title"), (lsh, "dup_minhash")]
    found = [s.with_columns(pl.lit(reason).alias("reason"), pl.lit(i).alias("stage_order"))
             for i, (s, reason) in enumerate(stages) if s.height]
    if not found:
        return pl.DataFrame(schema={"rank": pl.Int64, "partner": pl.Int64, "reason": pl.Utf8})
    hits = pl.concat([f.select(["rank", "partner", "reason", "stage_order"]) for f in found])
    hits = hits.sort(["rank", "stage_order"]).group_by("rank", maintain_order=True).first()
    return hits.select(["rank", "partner", "reason"])


def find_duplicates(articles: pa.Table | pl.DataFrame, cfg: Mapping[str, Any]) -> pl.DataFrame:
    """Apply the three stages; returns (doc_id, reason, dup_of) for every suppressed article.

    `cfg` is the `dedup` section of the corpus config. The out-of-core merge
    (`corpus_build/merge/`) runs the same stage functions over keys computed per part.
    """
    # a pyarrow table gives a DataFrame (pyarrow is untyped here, so polars' overloads cannot tell)
    df = articles if isinstance(articles, pl.DataFrame) else cast(pl.DataFrame, pl.from_arrow(articles))
    empty = pl.DataFrame(schema={"doc_id": pl.Utf8, "reason": pl.Utf8, "dup_of": pl.Utf8})
    if df.height == 0:
        return empty
    cols = ["doc_id", "url", "canonical_url", "title", "body", "t", "t_crawl"]
    df = order_articles(df.select(cols + (["visible_at"] if "visible_at" in df.columns else [])))
    ranks = df["rank"]

    # (a) canonical URL: each article holds its canonical key and its own URL key
    canon = url_partners(url_pairs(ranks, [normalize_url(u) for u in df["canonical_url"].to_list()],
                                   [normalize_url(u) for u in df["url"].to_list()]))

    # (b) same normalized title of >= min_title_words words within the window of visibility times
    titles = [normalize_title(t) for t in df["title"].to_list()]
    title = title_partners(df.select(["rank", "v"]).with_columns(pl.Series("key", titles, dtype=pl.Utf8)), cfg)

    # (c) MinHash-LSH: sharing one full band with an earlier article
    sig, ok = make_hasher(cfg).signatures(df["body"].to_list())
    lsh = lsh_partners(sig[ok], df["rank"].to_numpy()[ok], int(cfg.get("bands", 8)), int(cfg.get("rows", 16)))

    hits = combine_partners(canon, title, lsh)
    if hits.height == 0:
        return empty
    ids = df.select(["rank", "doc_id"])
    return (
        hits.join(ids, on="rank")
        .join(ids.rename({"rank": "partner", "doc_id": "dup_of"}), on="partner")
        .sort("rank")
        .select(["doc_id", "reason", "dup_of"])
    )


def band_partners(ranks: np.ndarray, bkeys: pa.Array | pa.ChunkedArray) -> pl.DataFrame:
    """(rank, partner) for one band: the earliest rank holding the same exact band bytes."""
    if len(ranks) == 0:
        return pl.DataFrame(schema={"rank": pl.Int64, "partner": pl.Int64})
    if pa.types.is_fixed_size_binary(bkeys.type):
        bkeys = bkeys.cast(pa.binary())
    pairs = pl.DataFrame({"rank": np.asarray(ranks, dtype=np.int64), "bkey": pl.from_arrow(bkeys)})
    # group on the exact bytes: no false bucket collisions
    first = pairs.group_by("bkey").agg(pl.col("rank").min().alias("first"))
    return (
        pairs.join(first, on="bkey")
        .filter(pl.col("first") < pl.col("rank"))
        .select(["rank", pl.col("first").alias("partner")])
    )


def min_partner(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Union of (rank, partner) frames, keeping the earliest partner per rank."""
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame(schema={"rank": pl.Int64, "partner": pl.Int64})
    return pl.concat(frames).group_by("rank").agg(pl.col("partner").min())


def band_arrays(sig: np.ndarray, bands: int, rows: int) -> list[pa.FixedSizeBinaryArray]:
    """Per band, each signature's band slice as a fixed-size binary array (the exact bucket key)."""
    n = sig.shape[0]
    out = []
    for k in band_keys(sig, bands, rows):
        width = k.dtype.itemsize
        out.append(pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(k.tobytes())]))
    return out


def lsh_partners(sig: np.ndarray, ranks: np.ndarray, bands: int, rows: int) -> pl.DataFrame:
    """(rank, partner) for every signature sharing a full band with an earlier-ranked one."""
    if sig.shape[0] == 0:
        return pl.DataFrame(schema={"rank": pl.Int64, "partner": pl.Int64})
    # the earliest partner over all bands is the minimum of each band's earliest partner
    return min_partner([band_partners(ranks, arr) for arr in band_arrays(sig, bands, rows)])
