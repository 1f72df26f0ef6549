"""Date-restricted retrieval over the indexed corpus (docs/design.md §3): BM25 as of a date, dense search
over month shards (exact, or IVF with exact re-ranking), hybrid reciprocal-rank fusion, and
`open_article` with a date recheck. The index files are the contract in `layout`; the embedding
backends live in `dense` (Embedder), `onnx_encoder` and `static_encoder`.

The names below are loaded on first use, so importing an embedding module does not load faiss.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MODES", "Article", "Hit", "QueryError", "Searcher"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from forecast_env.retrieval import searcher

        return getattr(searcher, name)
    raise AttributeError(f"module 'forecast_env.retrieval' has no attribute {name!r}")
