"""Audit check 3 `retrieval` (docs/design.md §8): FAIL on an index that serves articles before the store
says they existed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from forecast_env.eval.audit.run import FAIL, run_audit
from tests.support.audit_data import FAST


def test_retrieval_check_fails_when_the_index_serves_articles_early(ws_copy: Path) -> None:
    """An index whose days are 3 days early (e.g. built on publication days while the store uses
    visibility days): it serves articles before the store says they existed."""
    days_path = ws_copy / "index" / "rows" / "days.npy"
    days = np.load(days_path)
    np.save(days_path, days - 3)
    res = run_audit(ws_copy, "eval", checks=["retrieval"], settings=FAST).check("retrieval")
    assert res.verdict == FAIL
    assert res.figures["future_hits"] > 0, res.figures
    assert res.figures["prefix_bm25"] > 0
