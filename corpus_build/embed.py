"""Embedding of articles (docs/design.md §2.9): title + summary + body, L2-normalized float32 vectors.

The model wrapper lives in `forecast_env.retrieval.dense.Embedder` because the Searcher (core) embeds
queries with the same model; this module turns article tables into the texts and vectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from forecast_env.retrieval.dense import Embedder, document_text, normalize

__all__ = ["Embedder", "article_texts", "embed_articles"]


def article_texts(table: pa.Table, max_chars: int | None = None) -> list[str]:
    """The embedded text of each article row (title, summary, body)."""
    titles = table.column("title").to_pylist()
    summaries = table.column("summary").to_pylist()
    bodies = table.column("body").to_pylist()
    return [document_text(t, s, b, max_chars) for t, s, b in zip(titles, summaries, bodies)]


def embed_articles(table: pa.Table, embedder: Any, progress: bool = False) -> np.ndarray:
    """Vectors of every row of an article table, in row order (L2-normalized float32)."""
    vecs = embedder.encode_documents(article_texts(table), progress=progress)
    vecs = normalize(np.asarray(vecs, dtype=np.float32))
    if len(vecs) != table.num_rows:
        raise ValueError(f"embedder returned {len(vecs)} vectors for {table.num_rows} articles")
    return vecs
