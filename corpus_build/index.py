"""Build the search indices of a workspace (SPEC 2.10, 3): dense month shards, BM25, text copies.

Per month (rebuilt only when the article shard's sha256 or the embedding config changed):
    WS/index/text/YYYY-MM.arrow    uncompressed Arrow IPC copy of the month (memory-mapped row reads)
    WS/index/dense/YYYY-MM.faiss   exact inner-product index, rows = article order
    WS/index/bm25/YYYY-MM/         the month's postings (tokenization is the costly part)
Global (rebuilt whenever any month changed; a merge of month files, cheap next to embedding):
    WS/index/bm25/*.npy            postings with global rows, for as-of-date statistics
    WS/index/rows/*.npy            day and leak flag per global row, doc id -> row lookup
    WS/index/manifest.json         months, model, dim, config hash, corpus snapshot id, checksums
"""

from __future__ import annotations

import hashlib
import shutil
import time
from datetime import date
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from forecast_env.corpus_build.embed import article_texts, embed_articles

from forecast_env import schema
from forecast_env.config import config_hash, load_config
from forecast_env.errors import CorpusError, WorkspaceError
from forecast_env.retrieval.bm25 import (
    _save_npy,
    build_global_postings,
    build_month_postings,
    read_month_postings,
    write_month_postings,
)
from forecast_env.retrieval.dense import Embedder, make_index
from forecast_env.retrieval.searcher import EPOCH, doc_hash
from forecast_env.store import (
    Workspace,
    atomic_path,
    read_manifest,
    read_table,
    sha256_file,
    write_manifest,
)

#: Columns kept in the text copy (everything Hit and Article need).
TEXT_COLUMNS = ("doc_id", "day", "title", "url", "summary", "body", "t", "t_source", "leak_flag", "market_quote")
INDEX_VERSION = 2  # 2: market_quote column and rows/market_quote.npy (hidden by default)


def _progress(iterable: Any, enabled: bool, **kw: Any) -> Any:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, **kw)


def read_month(path: Path) -> pa.Table:
    """One article shard, sorted by (day, doc_id) (sorted defensively; the text copy keeps this order)."""
    table = read_table(path, schema.ARTICLES)
    if table.num_rows > 1:
        order = pc.sort_indices(table, sort_keys=[("day", "ascending"), ("doc_id", "ascending")])
        if not pc.all(pc.equal(order, pa.array(np.arange(table.num_rows)))).as_py():
            table = table.take(order)
    return table


def write_text_copy(path: Path, table: pa.Table) -> None:
    """Write the month's uncompressed Arrow IPC copy (one record batch per 64k rows)."""
    text = table.select(list(TEXT_COLUMNS)).combine_chunks()
    with atomic_path(path) as tmp, pa.ipc.new_file(str(tmp), text.schema) as writer:
        writer.write_table(text, max_chunksize=1 << 16)


def write_dense_shard(path: Path, vectors: np.ndarray, float16: bool = False) -> None:
    """Write one month's exact inner-product shard (rows = article order) from ready vectors."""
    with atomic_path(path) as tmp:
        faiss.write_index(make_index(vectors, float16), str(tmp))


def _embed_identity(embed: dict[str, Any], embedder: Any) -> dict[str, Any]:
    ident = {k: embed.get(k) for k in ("model", "query_prompt", "max_seq_length", "float16", "truncate_dim")}
    if embedder is not None and not isinstance(embedder, Embedder):
        ident["model"] = getattr(embedder, "name", type(embedder).__name__)
    return ident


def build_index(
    workspace: str | Path,
    config: dict[str, Any] | None = None,
    progress: bool = True,
    *,
    embedder: Any = None,
) -> dict[str, Any]:
    """Build or update the dense, BM25 and text indices of `workspace`; return a summary.

    `embedder` (optional) is any object with `encode_documents(texts, progress) -> (n, d) array` and
    `encode_queries(texts)`, used instead of the configured model (tests build shards from
    deterministic vectors: the dense side depends on the model only through the vectors).
    """
    t0 = time.perf_counter()
    cfg = config if config is not None else load_config("corpus")
    ws = Workspace.at(workspace)
    shards = ws.article_shards()
    if not shards:
        if (ws.corpus_dir / "report.md").exists():
            raise CorpusError(f"{ws.root}: the corpus holds no articles: every record was dropped; "
                              f"{ws.corpus_dir / 'report.md'} says at which stage and why")
        raise CorpusError(f"{ws.root}: no article store at {ws.articles_dir}; build the corpus first "
                          "(forecast-env corpus build)")
    embed_cfg = dict(cfg["embed"])
    identity = _embed_identity(embed_cfg, embedder)
    embed_hash = config_hash(identity)
    index_dir = ws.index_dir
    try:
        previous = read_manifest(index_dir) if (index_dir / "manifest.json").exists() else {}
    except WorkspaceError:
        previous = {}
    if previous.get("index_version") != INDEX_VERSION:
        previous = {}
    prev_months = {m["month"]: m for m in previous.get("months", [])}
    same_model = previous.get("embed_hash") == embed_hash
    text_dir, dense_dir, bm25_dir = index_dir / "text", ws.dense_dir, ws.bm25_dir

    if embedder is None:
        embedder = Embedder.from_config(embed_cfg)
    months: list[dict[str, Any]] = []
    rebuilt, kept = [], []
    dim = previous.get("dim") if same_model else None
    for shard in _progress(shards, progress, desc="index months", unit="month"):
        month = shard.stem
        sha = sha256_file(shard)
        prev = prev_months.get(month)
        outputs = (text_dir / f"{month}.arrow", dense_dir / f"{month}.faiss", bm25_dir / month / "rows.npy")
        if prev and prev.get("shard_sha256") == sha and same_model and all(p.exists() for p in outputs):
            months.append(prev)
            kept.append(month)
            continue
        table = read_month(shard)
        write_text_copy(outputs[0], table)
        write_month_postings(bm25_dir / month, build_month_postings(article_texts(table)))
        vectors = embed_articles(table, embedder, progress=progress)
        if table.num_rows == 0:
            vectors = np.zeros((0, dim or int(embed_cfg.get("dim") or 1)), np.float32)
        if dim is not None and vectors.shape[1] != dim:
            raise WorkspaceError(f"{shard}: vectors of dimension {vectors.shape[1]}, other months have {dim}")
        dim = int(vectors.shape[1])
        write_dense_shard(outputs[1], vectors, bool(embed_cfg.get("float16")))
        months.append({"month": month, "rows": table.num_rows, "shard": shard.name, "shard_sha256": sha})
        rebuilt.append(month)

    # months whose shard disappeared lose their outputs
    current = {m["month"] for m in months}
    for stale in sorted(set(prev_months) - current):
        (text_dir / f"{stale}.arrow").unlink(missing_ok=True)
        (dense_dir / f"{stale}.faiss").unlink(missing_ok=True)
        shutil.rmtree(bm25_dir / stale, ignore_errors=True)

    stats = build_global(ws, months, bool(rebuilt) or set(prev_months) != current or not previous)
    if not stats:  # nothing changed: keep the global statistics of the previous build
        stats = {k: previous.get(k) for k in ("first_day", "last_day", "bm25_terms", "bm25_postings")}
    snapshot_id = _snapshot_id(ws, months)
    n_articles = int(sum(m["rows"] for m in months))
    write_manifest(
        index_dir, "index", config={"embed": embed_cfg, "retrieval": cfg["retrieval"]},
        extra={
            "index_version": INDEX_VERSION, "months": months, "model": identity["model"], "dim": dim,
            "embed": embed_cfg | {"model": identity["model"]}, "embed_hash": embed_hash,
            "snapshot_id": snapshot_id, "n_articles": n_articles, **stats,
        },
    )
    summary = {
        "workspace": str(ws.root), "index_dir": str(index_dir), "months": len(months), "rebuilt": rebuilt,
        "kept": kept, "articles": n_articles, "dim": dim, "model": identity["model"],
        "snapshot_id": snapshot_id, "seconds": round(time.perf_counter() - t0, 2), **stats,
    }
    return summary


def build_global(ws: Workspace, months: list[dict[str, Any]], changed: bool = True) -> dict[str, Any]:
    """Merge month outputs into the global BM25 postings and the per-row arrays."""
    rows_dir = ws.index_dir / "rows"
    if not changed and (rows_dir / "days.npy").exists() and (ws.bm25_dir / "indptr.npy").exists():
        return {}
    days, leak, quote, hashes = [], [], [], []
    for m in months:
        table = pa.ipc.open_file(pa.memory_map(str(ws.index_dir / "text" / f"{m['month']}.arrow"))).read_all()
        days.append(table.column("day").cast(pa.int32()).to_numpy(zero_copy_only=False).astype(np.int32))
        leak.append(table.column("leak_flag").fill_null(False).to_numpy(zero_copy_only=False).astype(bool))
        quote.append(table.column("market_quote").fill_null(False).to_numpy(zero_copy_only=False).astype(bool))
        hashes.append(np.fromiter((doc_hash(d) for d in table.column("doc_id").to_pylist()),
                                  dtype=np.uint64, count=table.num_rows))
    all_days = np.concatenate(days) if days else np.zeros(0, np.int32)
    if len(all_days) > 1 and np.any(np.diff(all_days) < 0):
        raise WorkspaceError(f"{ws.articles_dir}: month shards overlap in days (a month shard holds articles "
                             "of another month); rebuild the corpus")
    all_hash = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    order = np.argsort(all_hash, kind="stable")
    _save_npy(rows_dir / "days.npy", all_days)
    _save_npy(rows_dir / "leak.npy", np.concatenate(leak) if leak else np.zeros(0, bool))
    _save_npy(rows_dir / "market_quote.npy", np.concatenate(quote) if quote else np.zeros(0, bool))
    _save_npy(rows_dir / "doc_hash.npy", all_hash[order])
    _save_npy(rows_dir / "doc_row.npy", order.astype(np.int64))
    postings = build_global_postings(ws.bm25_dir, [read_month_postings(ws.bm25_dir / m["month"]) for m in months])
    first = EPOCH.toordinal()
    return {
        "first_day": date.fromordinal(first + int(all_days[0])).isoformat() if len(all_days) else None,
        "last_day": date.fromordinal(first + int(all_days[-1])).isoformat() if len(all_days) else None,
        "bm25_terms": postings["terms"], "bm25_postings": postings["postings"],
    }


def _snapshot_id(ws: Workspace, months: list[dict[str, Any]]) -> str:
    """The corpus snapshot id (from the corpus manifest; else a hash of the indexed shards)."""
    try:
        snap = read_manifest(ws.corpus_dir).get("snapshot_id")
    except WorkspaceError:
        snap = None
    if snap:
        return str(snap)
    blob = "|".join(f"{m['month']}:{m['shard_sha256']}" for m in months)
    return "shards-" + hashlib.sha256(blob.encode()).hexdigest()[:16]

