"""Approximate month shards (docs/design.md §3.ann): IVF indexes that stay time-consistent.

Which months: month `i` is served approximately when the months *before* it hold at least
`index.ann_min_rows` articles. The rule reads only earlier months, which are wholly visible whenever
any article of month `i` is, so whether a month is approximate never depends on articles after the
search date (a rule on the month's own size would: its later articles could switch it).

How: an inverted-file index (`IndexIVFScalarQuantizer`, 8-bit codes, or with `index.ann_codes: pq4fs`
`IndexIVFPQFastScan`, 4-bit product codes; inner product) over the month's
rows minus the mean vector of the training sample (centred: the lists then split what tells articles
apart; a query's approximate scores shift by the constant q.mean, so their order is that of q.x and
the searcher needs no mean). Its centroids, quantizer ranges and mean are trained on a fixed, evenly
spaced sample of the earlier months' vectors only, so which list an article falls in never depends on later articles;
graph indexes (HNSW) would, and are not used. A search probes `nprobe` lists under the same row
range (and hidden-row) selector as an exact search, takes `candidates` rows by approximate score and
re-ranks them exactly with the month's stored float vectors, so scores equal exact scores.
`nprobe` and `candidates` are search-time settings: by default a quarter of the lists and 100
(sq8) or 1,000 (pq4fs) candidates; changing them does not rebuild an index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from forecast_env.errors import ConfigError

DEFAULTS = {"ann_min_rows": 2_000_000, "ann_nlist": None, "ann_nprobe": 0, "ann_candidates": 0,
            "ann_train_per_list": 64, "ann_codes": "sq8"}
TRAIN_SEED = 1234
#: Codes of the approximate scan: 8-bit scalar quantization (d bytes per vector) or 4-bit product
#: quantization scanned with faiss's fast-scan kernels (d / 8 bytes per vector, several times faster
#: per probed list, coarser, so it re-ranks more candidates).
CODES = ("sq8", "pq4fs")
#: Candidates re-ranked exactly per month when `ann_candidates` is 0 (auto), per kind of codes.
AUTO_CANDIDATES = {"sq8": 100, "pq4fs": 1000}
#: Share of a month's lists probed when `ann_nprobe` is 0 (auto). Measured at 5M articles of static
#: vectors and short queries (benchmarks/RESULTS.md): 32 of 1,024 lists reached recall@10 0.87 on the
#: IVF months, 256 reached 0.98 (sq8) / 0.97 (pq4fs).
AUTO_PROBE_SHARE = 0.25


def _get(cfg: dict[str, Any], key: str) -> Any:
    value = cfg.get(key)
    return DEFAULTS[key] if value is None else value


def auto_nlist(train_pool: int) -> int:
    """Lists for an approximate month: the power of two nearest sqrt(rows before it), in [16, 4096]."""
    return int(min(4096, max(16, 2 ** round(math.log2(max(1.0, math.sqrt(train_pool)))))))


def ann_plan(month_rows: Sequence[int], cfg: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Per month (in order): None when it is served exactly, else its IVF parameters."""
    min_rows = cfg.get("ann_min_rows", DEFAULTS["ann_min_rows"])
    plan: list[dict[str, Any] | None] = []
    earlier = 0
    for rows in month_rows:
        if min_rows is None or min_rows <= 0 or earlier < int(min_rows) or earlier == 0:
            plan.append(None)
        else:
            nlist = int(cfg.get("ann_nlist") or auto_nlist(earlier))
            train = int(min(earlier, int(_get(cfg, "ann_train_per_list")) * nlist))
            codes = str(_get(cfg, "ann_codes"))
            if codes not in CODES:
                raise ConfigError(f"index.ann_codes = {codes!r} is not known; choose one of {', '.join(CODES)}")
            nprobe = int(_get(cfg, "ann_nprobe")) or max(1, round(nlist * AUTO_PROBE_SHARE))
            candidates = int(_get(cfg, "ann_candidates")) or AUTO_CANDIDATES[codes]
            plan.append({"nlist": nlist, "nprobe": nprobe, "candidates": candidates,
                         "train_rows": max(train, nlist), "centre": True, "codes": codes})
        earlier += int(rows)
    return plan


def training_sample(train_paths: Sequence[Path], n: int) -> np.ndarray:
    """`n` vectors taken at evenly spaced rows across the earlier months' exact shards."""
    from forecast_env.retrieval.dense import read_index

    indexes = [read_index(p) for p in train_paths]
    sizes = np.array([ix.ntotal for ix in indexes], dtype=np.int64)
    total = int(sizes.sum())
    rows = np.unique(np.linspace(0, total - 1, num=min(n, total)).astype(np.int64))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    parts = []
    for i, ix in enumerate(indexes):
        local = rows[(rows >= starts[i]) & (rows < starts[i + 1])] - starts[i]
        if len(local):
            parts.append(ix.reconstruct_batch(local))
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def build_ivf(out: Path, month_shard: Path, train_paths: Sequence[Path], params: dict[str, Any]) -> dict[str, Any]:
    """Train on the earlier months, add the month's rows in order, write `out`; return the manifest entry."""
    from forecast_env.retrieval.dense import read_index
    from forecast_env.store import atomic_path

    flat = read_index(month_shard)
    d = flat.d
    train = training_sample(train_paths, int(params["train_rows"]))
    nlist = int(min(params["nlist"], len(train)))
    # centred: lists partition what tells articles apart, not the direction every vector shares
    # (static vectors have a common component of norm ~0.7); raw queries score q.(x - mean) =
    # q.x - q.mean, the same order as q.x, so the searcher needs no mean
    mean = train.mean(0, keepdims=True) if params.get("centre", True) else np.zeros((1, d), np.float32)
    quantizer = faiss.IndexFlatIP(d)
    codes = params.get("codes", "sq8")
    if codes == "pq4fs" and d % 4 == 0:  # 4 dimensions per 4-bit sub-quantizer
        ivf = faiss.IndexIVFPQFastScan(quantizer, d, nlist, d // 4, 4, faiss.METRIC_INNER_PRODUCT)
    else:
        codes = "sq8"
        ivf = faiss.IndexIVFScalarQuantizer(quantizer, d, nlist, faiss.ScalarQuantizer.QT_8bit,
                                            faiss.METRIC_INNER_PRODUCT)
    ivf.cp.seed = TRAIN_SEED
    ivf.train(np.ascontiguousarray(train - mean))
    step = 1 << 16
    for start in range(0, flat.ntotal, step):
        ivf.add(np.ascontiguousarray(flat.reconstruct_n(start, min(step, flat.ntotal - start)) - mean))
    with atomic_path(out) as tmp:
        faiss.write_index(ivf, str(tmp))
    return {"kind": "ivf", "nlist": nlist, "nprobe": int(params["nprobe"]), "candidates": int(params["candidates"]),
            "train_rows": len(train), "codes": codes}


def search_ivf(ivf: faiss.Index, flat: faiss.Index, queries: np.ndarray, k: int, sel: Any, nprobe: int,
               candidates: int, eligible: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (local rows, exact scores) per query: IVF candidates under `sel`, re-ranked exactly.

    Returns arrays of shape (nq, k') padded with -1 / -inf where fewer rows qualify."""
    params = faiss.SearchParametersIVF()
    params.nprobe = int(nprobe)
    if sel is not None:
        params.sel = sel
    kc = int(min(max(k, candidates), eligible))
    _, cand = ivf.search(queries, kc, params=params)
    kk = min(k, kc)
    rows = np.full((len(queries), kk), -1, dtype=np.int64)
    scores = np.full((len(queries), kk), -np.inf, dtype=np.float32)
    for i, ids in enumerate(cand):
        ids = ids[ids >= 0]
        if not len(ids):
            continue
        exact = flat.reconstruct_batch(ids) @ queries[i]
        order = np.lexsort((ids, -exact))[:kk]
        rows[i, : len(order)] = ids[order]
        scores[i, : len(order)] = exact[order]
    return scores, rows
