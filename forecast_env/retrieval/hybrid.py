"""Reciprocal-rank fusion of ranked lists (docs/design.md §3): score = sum over lists of 1 / (rrf_k + rank)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def rrf(ranked_lists: Sequence[np.ndarray], k: int, rrf_k: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Fuse lists of global rows (each best first, rank 1-based): top-k (rows, scores), ties by row."""
    fused: dict[int, float] = {}
    for rows in ranked_lists:
        for rank, row in enumerate(np.asarray(rows).tolist(), start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (rrf_k + rank)
    if not fused or k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    rows = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
    scores = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
    order = np.lexsort((rows, -scores))[:k]
    return rows[order], scores[order]
