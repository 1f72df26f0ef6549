"""Approximate month shards (docs/design.md §3.ann): IVF indexes that stay time-consistent.

Which rows: the first `index.ann_min_rows` rows of the corpus (rows are numbered in (day, doc_id)
order) are always searched exactly; every later row is served by the IVF index of its month. A
month that starts before that row and ends after it (the first approximate month) gets an IVF over
its rows from that row on, and keeps its earlier rows exact. The rule reads only row numbers, which
a later article never changes for an earlier row: whenever a row past the cut-off is visible, every
row before it is visible too, so whether a visible row is searched exactly or approximately never
depends on articles after the search date (a rule on a month's own size would: its later articles
could switch it).

How: an inverted-file index (`IndexIVFScalarQuantizer`, 8-bit codes, or with `index.ann_codes: pq4fs`
`IndexIVFPQFastScan`, 4-bit product codes; inner product) over the month's covered rows minus the
mean vector of the training sample (centred: the lists then split what tells articles apart; a
query's approximate scores shift by the constant q.mean, so their order is that of q.x and the
searcher needs no mean). Its centroids, quantizer ranges and mean are trained on a fixed, evenly
spaced sample of the rows *before* the first row it covers (earlier months, and for the first
approximate month its own rows before the cut-off), so which list an article falls in never depends
on later articles; graph indexes (HNSW) would, and are not used. A search probes `nprobe` lists under
the same row range (and hidden-row) selector as an exact search, takes `candidates` rows by
approximate score and re-ranks them exactly with the month's stored float vectors, so scores equal
exact scores. `nprobe` and `candidates` are search-time settings (auto: 256 lists, and 100 (sq8) or
1,000 (pq4fs) candidates); changing them does not rebuild an index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from forecast_env.errors import ConfigError, WorkspaceError

REBUILD = "forecast-env index build --workspace WS"

DEFAULTS = {"ann_min_rows": 2_000_000, "ann_nlist": None, "ann_nprobe": 0, "ann_candidates": 0,
            "ann_train_per_list": 64, "ann_codes": "sq8"}
TRAIN_SEED = 1234
#: Codes of the approximate scan: 8-bit scalar quantization (d bytes per vector) or 4-bit product
#: quantization scanned with faiss's fast-scan kernels (d / 8 bytes per vector, several times faster
#: per probed list, coarser, so it re-ranks more candidates).
CODES = ("sq8", "pq4fs")
#: Candidates re-ranked exactly per month when `ann_candidates` is 0 (auto), per kind of codes.
AUTO_CANDIDATES = {"sq8": 100, "pq4fs": 1000}
#: Lists probed when `ann_nprobe` is 0 (auto; all of them when a month has fewer). Measured on a
#: 1M-row month of the 10M benchmark (static vectors, short queries, one thread, warm;
#: benchmarks/log/2026-11-30-ivf-months-and-10m.md): 256 probed lists reach recall@10 0.955 against exact with 8,192 lists in
#: 2.5 ms, 0.944 with 4,096 in 3.7 ms, 0.967 with 1,024 in 14 ms (finer lists scan fewer rows).
AUTO_NPROBE = 256
#: Largest automatic number of lists, and the fewest training rows per list.
MAX_AUTO_NLIST = 8192
MIN_POINTS_PER_LIST = 8


def _get(cfg: dict[str, Any], key: str) -> Any:
    value = cfg.get(key)
    return DEFAULTS[key] if value is None else value


def auto_nlist(train_pool: int) -> int:
    """Lists for an approximate month: the power of two nearest 8 x sqrt(rows before it), in
    [16, MAX_AUTO_NLIST], and at most one list per MIN_POINTS_PER_LIST rows before it. (A month's own
    size cannot decide: its later articles would change its lists.)"""
    n = 2 ** round(math.log2(max(1.0, 8.0 * math.sqrt(train_pool))))
    while n > 16 and n * MIN_POINTS_PER_LIST > train_pool:
        n //= 2
    return int(min(MAX_AUTO_NLIST, max(16, n)))


def auto_nprobe(nlist: int) -> int:
    """Lists probed when `ann_nprobe` is 0: AUTO_NPROBE, or every list of a month with fewer."""
    return int(min(nlist, AUTO_NPROBE))


def ann_plan(month_rows: Sequence[int], cfg: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Per month (in order): None when it is served exactly, else its IVF parameters.

    `start` is the month's first row (local) the IVF covers: 0, or in the month holding global row
    `ann_min_rows`, that row; the training sample is drawn from every row before it."""
    min_rows = cfg.get("ann_min_rows", DEFAULTS["ann_min_rows"])
    cut = int(min_rows) if min_rows is not None and int(min_rows) > 0 else None
    plan: list[dict[str, Any] | None] = []
    offset = 0
    for rows in month_rows:
        rows = int(rows)
        if cut is None or offset + rows <= cut:
            plan.append(None)
        else:
            start = max(0, cut - offset)
            pool = offset + start
            nlist = int(cfg.get("ann_nlist") or auto_nlist(pool))
            train = int(min(pool, int(_get(cfg, "ann_train_per_list")) * nlist))
            codes = str(_get(cfg, "ann_codes"))
            if codes not in CODES:
                raise ConfigError(f"index.ann_codes = {codes!r} is not known; choose one of {', '.join(CODES)}")
            nprobe = int(_get(cfg, "ann_nprobe")) or auto_nprobe(nlist)
            candidates = int(_get(cfg, "ann_candidates")) or AUTO_CANDIDATES[codes]
            params = {"nlist": nlist, "nprobe": nprobe, "candidates": candidates,
                      "train_rows": max(train, min(nlist, pool)), "centre": True, "codes": codes}
            if start:  # only the first approximate month keeps rows exact (and so has this key)
                params["start"] = start
            plan.append(params)
        offset += rows
    return plan


def read_index(path: Path) -> faiss.Index:
    """Open a month shard memory-mapped and read-only (falls back to reading it whole)."""
    if not Path(path).exists():
        raise WorkspaceError(f"{path}: missing dense index shard; rebuild with `{REBUILD}`")
    # IO_FLAG_MMAP_IFC maps the codes of flat indices (IO_FLAG_MMAP alone maps only inverted lists)
    flags = getattr(faiss, "IO_FLAG_MMAP_IFC", faiss.IO_FLAG_MMAP) | faiss.IO_FLAG_READ_ONLY
    try:
        return faiss.read_index(str(path), flags)
    except RuntimeError:
        try:
            return faiss.read_index(str(path))
        except RuntimeError as exc:
            raise WorkspaceError(f"{path}: corrupt dense index shard ({exc}); rebuild with `{REBUILD}`") from exc


def training_sample(train_paths: Sequence[Path], n: int, end: int | None = None) -> np.ndarray:
    """`n` vectors taken at evenly spaced rows among the first `end` rows (default: all) of the shards."""
    indexes = [read_index(p) for p in train_paths]
    sizes = np.array([ix.ntotal for ix in indexes], dtype=np.int64)
    total = int(sizes.sum()) if end is None else min(int(end), int(sizes.sum()))
    rows = np.unique(np.linspace(0, total - 1, num=min(n, total)).astype(np.int64))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    parts = []
    for i, ix in enumerate(indexes):
        local = rows[(rows >= starts[i]) & (rows < starts[i + 1])] - starts[i]
        if len(local):
            parts.append(ix.reconstruct_batch(local))
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def build_ivf(out: Path, shards: Sequence[Path], params: dict[str, Any]) -> dict[str, Any]:
    """The IVF of the month whose exact shard is `shards[-1]` (`shards`: every month up to it, in
    order): trained on every row before the first one it covers (the earlier months, and the month's
    own rows before `params["start"]`), the covered rows added in order (ids = local rows); written to
    `out`; returns the manifest entry."""
    from forecast_env.retrieval.layout import write_faiss_index

    flat = read_index(shards[-1])
    d = flat.d
    start = int(params.get("start", 0))
    before = sum(read_index(p).ntotal for p in shards[:-1]) + start
    train = training_sample(shards, int(params["train_rows"]), before)
    nlist = int(min(params["nlist"], len(train)))
    # centred: lists partition what tells articles apart, not the direction every vector shares
    # (static vectors have a common component of norm ~0.7); raw queries score q.(x - mean) =
    # q.x - q.mean, the same order as q.x, so the searcher needs no mean
    mean = train.mean(0, keepdims=True) if params.get("centre", True) else np.zeros((1, d), np.float32)
    quantizer = faiss.IndexFlatIP(d)
    codes = params.get("codes", "sq8")
    ivf: faiss.Index
    if codes == "pq4fs" and d % 4 == 0:  # 4 dimensions per 4-bit sub-quantizer
        ivf = faiss.IndexIVFPQFastScan(quantizer, d, nlist, d // 4, 4, faiss.METRIC_INNER_PRODUCT)
    else:
        codes = "sq8"
        ivf = faiss.IndexIVFScalarQuantizer(quantizer, d, nlist, faiss.ScalarQuantizer.QT_8bit,
                                            faiss.METRIC_INNER_PRODUCT)
    ivf.cp.seed = TRAIN_SEED
    ivf.cp.min_points_per_centroid = min(ivf.cp.min_points_per_centroid, MIN_POINTS_PER_LIST)
    ivf.train(np.ascontiguousarray(train - mean))
    step = 1 << 16
    for a in range(start, flat.ntotal, step):
        z = min(flat.ntotal, a + step)
        ivf.add_with_ids(np.ascontiguousarray(flat.reconstruct_n(a, z - a) - mean), np.arange(a, z, dtype=np.int64))
    write_faiss_index(ivf, out)  # through a Python file: a full disk raises
    entry = {"kind": "ivf", "nlist": nlist, "nprobe": int(params["nprobe"]), "candidates": int(params["candidates"]),
             "train_rows": len(train), "codes": codes}
    return entry | ({"start": start} if start else {})


#: Unit roundoff of float32, and the most a stored vector's norm may exceed 1 (stored vectors are unit
#: vectors; float16 shards round each component by at most 2^-11 relative).
U32 = 2.0 ** -24
NORM_MAX = 1.01
#: Fixed-point bits of the deterministic score: each product x_i * q_i (exact in float64) is floored to
#: a multiple of 2^-FIXED_BITS and the integers are summed exactly (int64), so the score is one number
#: whatever the summation order, threads, SIMD level or BLAS kernel; it is within d * 2^-40 (3.5e-10
#: at d = 384) of the exact inner product, 170 times finer than a float32 score's last bit near 1.
FIXED_BITS = 40


def fixed_dot(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Deterministic inner products of rows `x` with `q` (see FIXED_BITS; `q` one vector or one per
    row): float64, exactly sum(floor(x_i * q_i * 2^40)) / 2^40, for |x| * |q| below 2^12."""
    # x_i * (q_i * 2^40) in float64 is exact (24-bit by 24-bit mantissas, a power-of-two scale)
    p = np.multiply(np.asarray(x, np.float32), np.ldexp(np.asarray(q, np.float32).astype(np.float64), FIXED_BITS))
    np.floor(p, out=p)
    # integers whose partial sums stay below 2^53 add exactly in float64, in any order (|x| * |q| below
    # 2^12 keeps them below 2^52); converting to int64 first would cost most of the time
    if p.size and max(float(p.max()), -float(p.min())) * p.shape[-1] >= 2.0 ** 53:
        return np.ldexp(p.astype(np.int64).sum(axis=-1).astype(np.float64), -FIXED_BITS)
    return np.ldexp(p.sum(axis=-1), -FIXED_BITS)


def score_margin(q: np.ndarray, norm_bound: float = NORM_MAX) -> float:
    """The most a FAISS float32 inner product of `q` with a row of norm <= norm_bound can differ from
    the exact one, whatever its kernel (any summation order, FMA or not, then rounded to float32)."""
    d = len(q)
    gamma = d * U32 / (1 - d * U32) + U32
    return float(gamma * float(np.linalg.norm(np.asarray(q, np.float64))) * norm_bound * (1 + 1e-6))


def exact_top(index: faiss.Index, queries: np.ndarray, k: int, eligible: int, params: Any = None,
              norm_bound: float = NORM_MAX) -> tuple[np.ndarray, np.ndarray]:
    """Per query the top-k eligible rows of `index` by `fixed_dot` score, ties by row: (scores, rows)
    of shape (nq, k), padded with -inf / -1 where fewer rows qualify.

    FAISS proposes candidates (its top kc, any kernel); they are rescored with `fixed_dot`. A row
    FAISS did not return scores at most its kc-th score t plus `score_margin`, so when the k-th rescored
    candidate is above t + margin no other row can reach or tie it and the answer is the exact top-k;
    otherwise kc grows (x4) until it is, or until every eligible row is a candidate."""
    nq = len(queries)
    out_s = np.full((nq, k), -np.inf, dtype=np.float64)
    out_r = np.full((nq, k), -1, dtype=np.int64)
    if params is None and eligible == index.ntotal and eligible * index.d <= RESCORE_CHUNK:
        # few rows, none filtered out (an IVF's centroids): every row is a candidate, FAISS is not asked
        every = np.broadcast_to(np.arange(eligible, dtype=np.int64), (nq, eligible))
        score, rows = top_rows(every, fixed_scores(index, every, queries), k)
        out_s[:, : score.shape[1]], out_r[:, : rows.shape[1]] = score, rows
        return out_s, out_r
    margins = np.array([score_margin(q, norm_bound) for q in queries], dtype=np.float64)
    todo = np.arange(nq)
    kc = int(min(eligible, max(2 * k, k + 16)))
    while len(todo):
        qs = np.ascontiguousarray(queries[todo])
        dist, ids = index.search(qs, kc) if params is None else index.search(qs, kc, params=params)
        valid = ids >= 0
        count = valid.sum(axis=1)
        score, rows = top_rows(ids, fixed_scores(index, ids, qs), k)
        complete = (kc >= eligible) | (count < kc)  # every eligible row is a candidate
        # the last candidate's FAISS score (only read where every candidate is valid, i.e. not complete)
        last = np.asarray(dist[:, -1], dtype=np.float64) if kc else np.zeros(len(todo))
        kth = score[:, k - 1] if score.shape[1] == k else np.full(len(todo), -np.inf)
        again = ~complete & ((np.minimum(count, k) < k) | ~(kth > last + margins[todo]))
        done = ~again
        out_r[todo[done], : rows.shape[1]] = rows[done]
        out_s[todo[done], : score.shape[1]] = score[done]
        todo = todo[again]
        kc = int(min(eligible, kc * 4))
    return out_s, out_r


#: Candidate floats rescored at once by `fixed_scores`: its float64 temporaries stay in the cache (2 MB).
RESCORE_CHUNK = 1 << 18


def fixed_scores(index: faiss.Index, ids: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """`fixed_dot` scores of each query's candidate rows `ids` (nq, kc; -1 = none) of `index`, all
    queries at once: (nq, kc) float64, -inf where there is no candidate."""
    ids = np.asarray(ids, dtype=np.int64)
    nq, kc = ids.shape
    out = np.empty(ids.shape, dtype=np.float64)
    valid = ids >= 0
    full = bool(valid.all())
    if not full:
        if not valid.any():
            out.fill(-np.inf)
            return out
        # a missing candidate is scored as some valid row (then masked): every query keeps kc rows
        ids = np.where(valid, ids, ids[valid][0])
    qs = np.asarray(queries, dtype=np.float32)
    d = index.d
    per = max(1, RESCORE_CHUNK // (kc * d))
    for a in range(0, nq, per):
        z = min(nq, a + per)
        out[a:z] = fixed_dot(index.reconstruct_batch(ids[a:z].ravel()).reshape(z - a, kc, d), qs[a:z, None, :])
    if not full:
        out[~valid] = -np.inf
    return out


def top_rows(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query the best k candidates by (score descending, row ascending), -1 ids left out:
    (scores, rows) of shape (nq, min(k, kc)), padded with -inf / -1 where fewer are valid."""
    ids = np.asarray(ids, dtype=np.int64)
    valid = ids >= 0
    full = bool(valid.all())
    key = ids if full else np.where(valid, ids, np.iinfo(np.int64).max)  # padding sorts after every candidate
    order = np.lexsort((key, -scores), axis=-1)[:, :k]
    pick = (np.arange(len(ids))[:, None], order)
    rows, top = key[pick], scores[pick]
    if full:
        return top, rows
    filled = np.arange(order.shape[1]) < np.minimum(valid.sum(axis=1), k)[:, None]
    return np.where(filled, top, -np.inf), np.where(filled, rows, -1)


def centroid_norm(ivf: Any) -> float:
    """The largest norm of an IVF's list centroids (bounds its coarse scores' rounding)."""
    q = faiss.downcast_index(ivf.quantizer)
    c = q.reconstruct_n(0, q.ntotal)
    return float(np.sqrt((c.astype(np.float64) ** 2).sum(1)).max()) if len(c) else 1.0


def search_ivf(ivf: Any, flat: faiss.Index, queries: np.ndarray, k: int, sel: Any, nprobe: int,
               candidates: int, eligible: int, exact: bool = False,
               cnorm: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (local rows, exact scores) per query: IVF candidates under `sel`, re-ranked exactly.

    With `exact` the probed lists are the top `nprobe` by `fixed_dot` score against the centroids
    (ties by list number; `cnorm` bounds the centroids' norms), and candidates are re-ranked by
    `fixed_dot` (no BLAS): the same lists and scores on any machine. Returns arrays of shape (nq, k')
    padded with -1 / -inf where fewer rows qualify."""
    params = faiss.SearchParametersIVF()
    params.nprobe = int(nprobe)
    if sel is not None:
        params.sel = sel
    kc = int(min(max(k, candidates), eligible))
    if exact:
        quantizer = faiss.downcast_index(ivf.quantizer)
        probe = int(min(nprobe, quantizer.ntotal))
        dq, iq = exact_top(quantizer, queries, probe, int(quantizer.ntotal), None,
                           (cnorm if cnorm is not None else centroid_norm(ivf)) * NORM_MAX)
        params.nprobe = probe
        x = np.ascontiguousarray(queries, dtype=np.float32)
        iq, dq32 = np.ascontiguousarray(iq), np.ascontiguousarray(dq, dtype=np.float32)
        dist = np.empty((len(x), kc), dtype=np.float32)
        cand = np.empty((len(x), kc), dtype=np.int64)
        # the SWIG call: faiss's Python wrapper of search_preassigned refuses search parameters
        ivf.search_preassigned_c(len(x), faiss.swig_ptr(x), kc, faiss.swig_ptr(iq), faiss.swig_ptr(dq32),
                                 faiss.swig_ptr(dist), faiss.swig_ptr(cand), False, params)
    else:
        _, cand = ivf.search(queries, kc, params=params)
    kk = min(k, kc)
    if exact:
        return top_rows(cand, fixed_scores(flat, cand, np.asarray(queries, np.float32)), kk)
    rows = np.full((len(queries), kk), -1, dtype=np.int64)
    scores = np.full((len(queries), kk), -np.inf, dtype=np.float32)
    for i, ids in enumerate(cand):
        ids = ids[ids >= 0]
        if not len(ids):
            continue
        vecs = flat.reconstruct_batch(ids)
        score = vecs @ queries[i]  # FAISS's float32 scoring (not exact): one BLAS product per query
        order = np.lexsort((ids, -score))[:kk]
        rows[i, : len(order)] = ids[order]
        scores[i, : len(order)] = score[order]
    return scores, rows
