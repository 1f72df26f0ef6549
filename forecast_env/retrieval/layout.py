"""The on-disk layout of a workspace's search index: the contract between the index build
(`forecast_env.corpus_build.index`) and the `Searcher` (docs/design.md §2.10, §3).

    WS/index/manifest.json            INDEX_VERSION, months (rows, shard sha256, kind exact|ivf), the
                                      embedding identity (model, backend, quantize...), dim, snapshot id
    WS/index/text/YYYY-MM.arrow       uncompressed Arrow IPC copy of the month, TEXT_COLUMNS, rows =
                                      article order (day, doc_id)
    WS/index/dense/YYYY-MM.faiss      exact inner-product shard, rows = article order
    WS/index/dense/YYYY-MM.ivf.faiss  months served approximately: an IVF index over the same rows
                                      whose centroids were trained on earlier months only
    WS/index/bm25/YYYY-MM/            the month's postings; WS/index/bm25/*.npy the global ones
    WS/index/rows/*.npy               per global row: days (int32 days since EPOCH), one bool array
                                      per article flag, doc_hash (sorted) and doc_row for doc id lookup

Everything here is public: the build writes these paths and values, the searcher reads them.
"""

from __future__ import annotations

import hashlib
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from forecast_env.errors import ConfigError

#: Bump when the layout changes; a build over an index of another version redoes every month.
#: 3: the embedding identity (backend, quantize) in the manifest; approximate (IVF) months.
INDEX_VERSION = 3
#: Columns kept in the text copy (everything Hit and Article need).
TEXT_COLUMNS = ("doc_id", "day", "title", "url", "summary", "body", "t", "t_source", "leak_flag", "market_quote")
#: Day numbers in rows/days.npy count days since this date.
EPOCH = date(1970, 1, 1)
REBUILD = "forecast-env index build --workspace WS"
#: Embedding settings that change the vectors: an index answers queries only with exactly these.
IDENTITY_KEYS = ("model", "backend", "quantize", "query_prompt", "max_seq_length", "truncate_dim", "static_dims")


class IndexLayout:
    """Paths of one workspace's index files."""

    def __init__(self, index_dir: str | Path):
        self.root = Path(index_dir)

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def dense_dir(self) -> Path:
        return self.root / "dense"

    @property
    def bm25_dir(self) -> Path:
        return self.root / "bm25"

    @property
    def rows_dir(self) -> Path:
        return self.root / "rows"

    def text(self, month: str) -> Path:
        return self.root / "text" / f"{month}.arrow"

    def dense(self, month: str) -> Path:
        return self.dense_dir / f"{month}.faiss"

    def ivf(self, month: str) -> Path:
        return self.dense_dir / f"{month}.ivf.faiss"

    def bm25_month(self, month: str) -> Path:
        return self.bm25_dir / month


def doc_hash(doc_id: str) -> int:
    """Stable 64-bit hash of a doc id (blake2b), used for the doc id -> row lookup."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "little")


def day_number(d: date) -> int:
    """Days since EPOCH (the unit of rows/days.npy)."""
    return (d - EPOCH).days


def save_npy(path: Path, arr: np.ndarray) -> None:
    """Write one index array atomically."""
    from forecast_env.store import atomic_save_npy

    atomic_save_npy(path, np.ascontiguousarray(arr))


def write_faiss_index(index: Any, path: Path) -> None:
    """Write a FAISS index atomically through a Python file, so a failed write raises.

    `faiss.write_index(index, filename)` only prints a close error when the last buffer cannot be
    written (a full disk) and leaves a short file that would be renamed into place as complete.
    """
    import faiss

    from forecast_env.store import atomic_path

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        faiss.write_index(index, faiss.PyCallbackIOWriter(fh.write))  # type: ignore[attr-defined]


def embedding_identity(embed: dict[str, Any]) -> dict[str, Any]:
    """The identity of an `embed` config section (backend-specific keys only where they apply)."""
    ident = {k: embed.get(k) for k in IDENTITY_KEYS}
    backend = ident.get("backend") or "torch"
    ident["backend"] = backend
    if backend != "onnx":
        ident["quantize"] = None
    if backend != "static":
        ident["static_dims"] = None
    return ident


def query_embedding(index_dir: Path, built: dict[str, Any] | None, requested: dict[str, Any],
                    default: dict[str, Any]) -> dict[str, Any]:
    """The `embed` settings to embed queries with: the index's own identity, the rest (device, batch
    size, cache) from the config.

    A config that asks for another identity than the index's is a ConfigError naming both; a config
    that leaves the embedding at its defaults asks for nothing and gets the index's identity.
    `built` is the manifest's identity; keys it does not record are not compared.
    """
    if not built:
        raise ConfigError(f"{index_dir}: the index records no embedding model (built by an older version); "
                          f"rebuild it with `{REBUILD}`")
    want = embedding_identity(requested)
    diff = [k for k in IDENTITY_KEYS if k in built and built.get(k) != want.get(k)]
    if diff and want != embedding_identity(default):
        have = ", ".join(f"{k}={built.get(k)!r}" for k in diff)
        asked = ", ".join(f"{k}={want.get(k)!r}" for k in diff)
        raise ConfigError(
            f"{index_dir}: the index was built with embed {have}, the config asks for embed {asked}; queries must "
            "be embedded exactly as the documents were. Either set the config back (e.g. --set "
            f"embed.{diff[0]}={built.get(diff[0])}) or rebuild the index with the new setting (`{REBUILD}`)")
    if built.get("backend") == "custom":
        raise ConfigError(f"{index_dir}: the index was built with a custom encoder ({built.get('model')!r}); "
                          "open it with Searcher.open(workspace, embedder=<that encoder>)")
    return dict(requested) | {k: built[k] for k in IDENTITY_KEYS if k in built}
