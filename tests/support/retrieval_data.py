"""Hand-made article stores for the retrieval tests (no dependency on the corpus builder)."""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from forecast_env import schema
from forecast_env.retrieval.dense import normalize
from forecast_env.store import Workspace, atomic_write_table

#: A small deterministic vocabulary (stop words included, so that they must be dropped).
VOCAB = ["election", "vote", "senate", "court", "ruling", "market", "price", "oil", "gas", "inflation", "rate", "bank", "central", "storm", "hurricane", "flood", "fire", "rocket", "launch", "moon", "mars", "team", "final", "match", "goal", "player", "coach", "merger", "deal", "stock", "shares", "profit", "loss", "tariff", "trade", "china", "india", "brazil", "summit", "treaty", "the", "of", "and", "to", "in", "is"]


def make_rows(n: int, start: date = date(2025, 3, 1), days: int = 120, seed: int = 0,
              leak_share: float = 0.1) -> list[dict]:
    """`n` synthetic article rows over `days` days, with a Zipfian draw of VOCAB words."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(VOCAB) + 1)
    weights /= weights.sum()
    rows = []
    for i in range(n):
        day = start + timedelta(days=int(rng.integers(0, days)))
        words = rng.choice(VOCAB, size=int(rng.integers(0, 30)), p=weights)
        title_words = rng.choice(VOCAB, size=int(rng.integers(1, 5)), p=weights)
        t = datetime(day.year, day.month, day.day, int(rng.integers(0, 24)), tzinfo=UTC)
        rows.append({
            "doc_id": hashlib.sha1(f"{seed}-{i}".encode()).hexdigest()[:16],
            "url": f"https://news.example/{i}", "title": " ".join(title_words).capitalize(),
            "summary": f"Summary {i}", "body": " ".join(words), "t": t, "t_crawl": t, "t_source": "crawl",
            "day": day, "leak_flag": bool(rng.random() < leak_share), "lang_score": 0.99,
        })
    return rows


def write_store(ws: Path, rows: list[dict]) -> Workspace:
    """Write `rows` as month shards sorted by (day, doc_id)."""
    w = Workspace.at(ws, create=True)
    rows = sorted(rows, key=lambda r: (r["day"], r["doc_id"]))
    months: dict[str, list[dict]] = {}
    for r in rows:
        months.setdefault(r["day"].strftime("%Y-%m"), []).append(r)
    for month, mrows in months.items():
        atomic_write_table(w.articles_dir / f"{month}.parquet", pa.Table.from_pylist(mrows), schema.ARTICLES)
    return w


class HashEmbedder:
    """A deterministic bag-of-words embedder (fixed random vector per token, summed, normalized).

    Used to build dense shards without the real model: the dense index depends on the model only
    through its vectors. Texts without tokens get a fixed random direction of their own.
    """

    name = "test-hash-embedder"

    def __init__(self, dim: int = 16):
        self.dim = dim

    def _vec(self, token: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        return np.random.default_rng(seed).standard_normal(self.dim)

    def encode_documents(self, texts, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            toks = text.lower().split() or [f"<empty>{text}"]
            out[i] = sum(self._vec(t) for t in toks)
        return normalize(out)

    def encode_queries(self, texts) -> np.ndarray:
        return self.encode_documents(texts)
