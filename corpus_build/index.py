"""Build the search indices of a workspace (docs/design.md §2.10, §3): dense month shards, BM25, text copies.

The files and their meaning are the public contract in `forecast_env.retrieval.layout`. Per month
(redone only when the article shard's sha256 or the embedding identity changed; a finished month
leaves a marker `WS/index/months/YYYY-MM.json`, so a killed build resumes per month):
    text copy, BM25 month postings, exact dense shard (one embedding pass over the month).
Months holding rows past `index.ann_min_rows` (see `forecast_env.retrieval.ann`) also get an IVF
index over those rows whose centroids are trained on the rows before them only. Global files (BM25 postings with
global rows, per-row arrays) are merged from the month files whenever any month changed.

Month shards are embedded through `forecast_env.executor`: in this process (`engine="local"`, the
embedding backend already uses every core), or on Ray actors (`engine="ray"`, GPU actors when
`embed.device` is cuda). Each month is a pure function of its shard and the embedding identity, so
both engines write the same files. A month is an `IndexMonthTask` run through
`forecast_env.workspace.task.NodeTask` (on a node's own scratch when the workspace is on object storage).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forecast_env import schema
from forecast_env.config import config_hash, load_config
from forecast_env.corpus_build.embed import article_texts, embed_articles
from forecast_env.crashpoints import crash_point
from forecast_env.errors import CorpusError, WorkspaceError
from forecast_env.executor import map_unordered
from forecast_env.retrieval.ann import ann_plan, build_ivf
from forecast_env.retrieval.bm25 import (
    build_global_postings,
    build_month_postings,
    write_month_postings,
)
from forecast_env.retrieval.dense import Embedder, make_index
from forecast_env.retrieval.layout import (
    EPOCH,
    INDEX_VERSION,
    TEXT_COLUMNS,
    IndexLayout,
    doc_hash,
    embedding_identity,
    save_npy,
    write_faiss_index,
)
from forecast_env.store import (
    Workspace,
    atomic_path,
    atomic_write_json,
    read_manifest,
    read_table,
    remove_temporaries,
    sha256_file,
    write_manifest,
)
from forecast_env.workspace.remote import is_remote, staged
from forecast_env.workspace.task import NodeTask, StagedWorkspace, WorkItem, relative_to

#: Articles embedded per call inside a month (the progress bar advances per chunk).
EMBED_CHUNK = 512

_WORKER: dict[str, Any] = {}


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
    write_faiss_index(make_index(vectors, float16), path)


def _identity(embed: dict[str, Any], embedder: Any) -> dict[str, Any]:
    """The embedding identity recorded in the manifest (a custom encoder is known by its name only)."""
    if embedder is None or isinstance(embedder, Embedder):
        source = embedder.identity() if embedder is not None else embed
        return embedding_identity(source) | {"float16": bool(embed.get("float16"))}
    return {"model": getattr(embedder, "name", type(embedder).__name__), "backend": "custom",
            "float16": bool(embed.get("float16"))}


# ---------------------------------------------------------------------------------------------
# one month (runs in this process, a pool worker or a Ray actor)
# ---------------------------------------------------------------------------------------------


def _setup_worker(embed: dict[str, Any], embedder: Any = None) -> None:
    """Load the embedding model once per worker (a given encoder object is used as it is)."""
    key = json.dumps(embed, sort_keys=True, default=str)
    if embedder is not None:
        _WORKER.update(key=None, embedder=embedder)
    elif _WORKER.get("key") != key:
        _WORKER.update(key=key, embedder=Embedder.from_config(embed))


@dataclass(frozen=True)
class IndexMonthTask(WorkItem):
    """One month's text copy, BM25 postings and exact dense shard, from its article shard (paths under
    `root`)."""

    kind: ClassVar[str] = "index.month"
    month: str
    shard: str                    # the month's article shard
    sha: str                      # the shard's sha256 (recorded in the month's marker)
    embed_hash: str               # the embedding identity's hash
    float16: bool
    rows: int
    dim: int | None = None        # the vector dimension of the months already built (None: this month's)
    index_dir: str = "index"

    @property
    def name(self) -> str:
        """The month, YYYY-MM."""
        return self.month

    def inputs(self) -> tuple[str, ...]:
        """The month's article shard."""
        return (self.shard,)

    def outputs(self, result: Any) -> tuple[str, ...]:
        """The month's files and its marker (last)."""
        layout = IndexLayout(self.index_dir)
        return (layout.text(self.month).as_posix(), layout.dense(self.month).as_posix(),
                f"{layout.bm25_month(self.month).as_posix()}/", _marker_path(layout, self.month).as_posix())


def index_month(task: IndexMonthTask) -> dict[str, Any]:
    """Write one month's text copy, BM25 postings and exact dense shard, then its marker; return the marker."""
    layout = IndexLayout(task.path(task.index_dir))
    month = task.month
    shard = task.path(task.shard)
    table = read_month(shard)
    write_text_copy(layout.text(month), table)
    crash_point("index.month")
    texts = article_texts(table)
    write_month_postings(layout.bm25_month(month), build_month_postings(texts))
    crash_point("index.month")
    embedder = _WORKER["embedder"]
    on_rows = _WORKER.get("on_rows")
    parts = []
    for start in range(0, table.num_rows, EMBED_CHUNK):
        parts.append(embed_articles(table.slice(start, EMBED_CHUNK), embedder))
        if on_rows is not None:
            on_rows(len(parts[-1]))
    dim = int(task.dim or 0) or (int(parts[0].shape[1]) if parts else int(embedder.dim))
    vectors = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
    if vectors.shape[1] != dim:
        raise WorkspaceError(f"{shard}: vectors of dimension {vectors.shape[1]}, other months have {dim}")
    write_dense_shard(layout.dense(month), vectors, bool(task.float16))
    crash_point("index.month")
    marker = {"month": month, "rows": table.num_rows, "shard": shard.name,
              "shard_sha256": task.sha, "embed_hash": task.embed_hash, "dim": int(vectors.shape[1])}
    atomic_write_json(_marker_path(layout, month), marker)
    return marker


def _marker_path(layout: IndexLayout, month: str) -> Path:
    return layout.root / "months" / f"{month}.json"


def _read_marker(layout: IndexLayout, month: str) -> dict[str, Any] | None:
    try:
        return json.loads((layout.root / "months" / f"{month}.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _outputs(layout: IndexLayout, month: str) -> tuple[Path, ...]:
    return layout.text(month), layout.dense(month), layout.bm25_month(month) / "rows.npy"


# ---------------------------------------------------------------------------------------------
# the build
# ---------------------------------------------------------------------------------------------


def build_index(
    workspace: str | Path,
    config: dict[str, Any] | None = None,
    progress: bool = True,
    *,
    embedder: Any = None,
    engine: str | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Build or update the dense, BM25 and text indices of `workspace`; return a summary.

    `embedder` (optional) is any object with `encode_documents(texts, progress) -> (n, d) array` and
    `encode_queries(texts)`, used instead of the configured model (tests build shards from
    deterministic vectors: the dense side depends on the model only through the vectors).
    `engine` (default `execution.engine`): `local` embeds in this process, `ray` on Ray actors.
    """
    if not is_remote(workspace):
        return _build_index(workspace, None, config, progress, embedder, engine, ray_address, workers)
    # an object-store workspace: build in node-local scratch, publish from there
    with staged(workspace, pull=("corpus/", "index/"), skip=("corpus/parts/",),
                publish=("index/",), publish_on_failure=("index/months/",)) as local:
        # with engine ray each month runs on a node: it fetches its shard from the bucket and publishes
        # the month (`NodeTask`); the driver fetches it, then builds the IVF and global files here
        nodes = StagedWorkspace(url=str(workspace).rstrip("/"), root=str(Path(local).resolve()))
        return _build_index(local, nodes, config, progress, embedder, engine, ray_address, workers)


def _build_index(workspace: str | Path, nodes: StagedWorkspace | None, config: dict[str, Any] | None,
                 progress: bool, embedder: Any, engine: str | None, ray_address: str | None,
                 workers: int | None) -> dict[str, Any]:
    """`build_index` in a local folder (`nodes`: the object-store workspace it is the staged copy of,
    whose months run on Ray nodes that share no disk with this one)."""
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
    exec_cfg = cfg.get("execution") or {}
    engine = engine or exec_cfg.get("engine") or "local"
    embed_cfg = dict(cfg["embed"])
    identity = _identity(embed_cfg, embedder)
    embed_hash = config_hash(identity)
    layout = IndexLayout(ws.index_dir)
    remove_temporaries(layout.root)  # a killed build's writes in flight
    try:
        previous = read_manifest(layout.root) if layout.manifest.exists() else {}
    except WorkspaceError:
        previous = {}
    if previous.get("index_version") != INDEX_VERSION:
        previous = {}
        shutil.rmtree(layout.root / "months", ignore_errors=True)
    prev_months = {m["month"] for m in previous.get("months", [])}

    # which months are unchanged (marker, shard checksum, embedding identity, outputs all agree)
    markers: dict[str, dict[str, Any]] = {}
    todo: list[IndexMonthTask] = []
    dims = set()
    for shard in shards:
        month, sha = shard.stem, sha256_file(shard)
        marker = _read_marker(layout, month)
        if (marker and marker.get("shard_sha256") == sha and marker.get("embed_hash") == embed_hash
                and all(p.exists() for p in _outputs(layout, month))):
            markers[month] = marker
            dims.add(int(marker["dim"]))
        else:
            todo.append(IndexMonthTask(root=str(ws.root), month=month, shard=relative_to(ws.root, shard), sha=sha,
                                       embed_hash=embed_hash, float16=bool(embed_cfg.get("float16")),
                                       rows=pq.ParquetFile(shard).metadata.num_rows,
                                       index_dir=relative_to(ws.root, layout.root)))
    if len(dims) > 1:
        raise WorkspaceError(f"{layout.dense_dir}: month shards of different dimensions {sorted(dims)}; rebuild with "
                             "`forecast-env index build` after deleting the index folder")
    todo = [dataclasses.replace(task, dim=next(iter(dims)) if dims else None) for task in todo]
    rebuilt = _embed_months(todo, embed_cfg, embedder, engine, ray_address, workers, progress, exec_cfg, nodes)
    markers.update({m["month"]: m for m in rebuilt})
    months = [markers[s.stem] for s in shards]
    dims = {int(m["dim"]) for m in months}
    if len(dims) > 1:
        raise WorkspaceError(f"{layout.dense_dir}: month shards of different dimensions {sorted(dims)}; delete "
                             f"{layout.root} and rebuild")
    dim = dims.pop() if dims else None

    # months whose shard disappeared lose their outputs
    current = {m["month"] for m in months}
    for stale in sorted(prev_months - current):
        for p in (layout.text(stale), layout.dense(stale), layout.ivf(stale), layout.root / "months" / f"{stale}.json"):
            p.unlink(missing_ok=True)
        shutil.rmtree(layout.bm25_month(stale), ignore_errors=True)

    ann_months = _build_ann(layout, months, cfg.get("index") or {}, embed_hash, previous, progress)
    # a month rebuilt by a killed earlier build counts as changed: the manifest (written last) still has the old shard
    indexed = [(m.get("month"), m.get("shard_sha256")) for m in previous.get("months", [])]
    changed = bool(rebuilt) or indexed != [(m["month"], m["shard_sha256"]) for m in months] or not previous
    stats = build_global(ws, months, changed)
    if not stats:  # nothing changed: keep the global statistics of the previous build
        stats = {k: previous.get(k) for k in ("first_day", "last_day", "bm25_terms", "bm25_postings")}
    snapshot_id = _snapshot_id(ws, months)
    n_articles = int(sum(m["rows"] for m in months))
    month_rows = [{k: m[k] for k in ("month", "rows", "shard", "shard_sha256")} | ann_months.get(m["month"], {})
                  for m in months]
    write_manifest(
        layout.root, "index", config={"embed": embed_cfg, "retrieval": cfg["retrieval"], "index": cfg.get("index")},
        extra={
            "index_version": INDEX_VERSION, "months": month_rows, "model": identity["model"], "dim": dim,
            "embedding": identity, "embed": embed_cfg | {"model": identity["model"]}, "embed_hash": embed_hash,
            "snapshot_id": snapshot_id, "n_articles": n_articles, **stats,
        },
    )
    return {
        "workspace": str(ws.root), "index_dir": str(layout.root), "months": len(months),
        "rebuilt": sorted(m["month"] for m in rebuilt), "kept": sorted(current - {m["month"] for m in rebuilt}),
        "approximate": sorted(m for m, a in ann_months.items() if a.get("kind") == "ivf"),
        "articles": n_articles, "dim": dim, "model": identity["model"], "backend": identity["backend"],
        "engine": engine, "snapshot_id": snapshot_id, "seconds": round(time.perf_counter() - t0, 2), **stats,
    }


def _embed_months(todo: list[IndexMonthTask], embed_cfg: dict[str, Any], embedder: Any, engine: str,
                  ray_address: str | None, workers: int | None, progress: bool,
                  exec_cfg: dict[str, Any], nodes: StagedWorkspace | None = None) -> list[dict[str, Any]]:
    """Run `index_month` over the months to redo, with one progress bar over their articles (`nodes`:
    on Ray nodes over object storage, each month fetched here once a node published it)."""
    if not todo:
        return []
    from tqdm.auto import tqdm

    bar = tqdm(total=sum(t.rows for t in todo), desc="index: embed months", unit="article", disable=not progress)
    gpu = str(embed_cfg.get("device", "cpu")).startswith("cuda")
    in_process = engine == "local"
    if in_process:
        _WORKER["on_rows"] = bar.update
    done = []
    try:
        n_workers = int(workers or exec_cfg.get("workers") or os.cpu_count() or 1) if not in_process else 1
        nodes = nodes if not in_process else None
        task_fn = nodes.task(index_month) if nodes is not None else NodeTask(index_month)
        if nodes is not None:  # nodes publish months one by one: the index's own marker first (`pull_workspace`)
            nodes.bucket().unpublish("index")
        results = map_unordered(
            task_fn, todo, engine=engine, workers=n_workers, setup=_setup_worker,
            setup_args=(embed_cfg, embedder), threads=None if in_process else 1,
            ray_address=ray_address or exec_cfg.get("ray_address"), num_gpus=1.0 if gpu and engine == "ray" else 0.0,
            error=CorpusError, broken_advice="Rerun the index build: finished months are kept.")
        by_month = {t.month: t for t in todo}
        for marker in results:
            if nodes is not None:
                nodes.fetch_outputs(by_month[marker["month"]], marker)
            done.append(marker)
            if not in_process:
                bar.update(int(marker["rows"]))
    finally:
        _WORKER.pop("on_rows", None)
        bar.close()
    return done


def _build_ann(layout: IndexLayout, months: list[dict[str, Any]], index_cfg: dict[str, Any], embed_hash: str,
               previous: dict[str, Any], progress: bool) -> dict[str, dict[str, Any]]:
    """IVF indexes of the months that `ann_plan` serves approximately (kept when their inputs are unchanged)."""
    prev = {m["month"]: m for m in previous.get("months", [])}
    out: dict[str, dict[str, Any]] = {}
    plan = ann_plan([int(m["rows"]) for m in months], index_cfg)
    todo = [i for i, p in enumerate(plan) if p is not None]
    from tqdm.auto import tqdm

    for i in tqdm(todo, desc="index: train IVF months", unit="month", disable=not progress or not todo):
        month, params = months[i]["month"], plan[i]
        # the IVF of a month depends on the earlier months only (and its own rows, added unchanged);
        # nprobe and candidates are search-time settings: changing them rebuilds nothing
        built_by = {k: v for k, v in params.items() if k not in ("nprobe", "candidates")}
        key_src = [embed_hash, json.dumps(built_by, sort_keys=True)] + [m["shard_sha256"] for m in months[: i + 1]]
        key = hashlib.sha256("|".join(key_src).encode()).hexdigest()[:16]
        old = prev.get(month, {})
        if old.get("kind") == "ivf" and old.get("ivf_key") == key and layout.ivf(month).exists():
            out[month] = {k: old[k] for k in ("kind", "ivf_key", "nlist", "train_rows", "codes", "start")
                          if k in old} | {"nprobe": params["nprobe"], "candidates": params["candidates"]}
            continue
        info = build_ivf(layout.ivf(month), [layout.dense(m["month"]) for m in months[: i + 1]], params)
        out[month] = {"kind": "ivf", "ivf_key": key, **info}
    for m in months:
        if m["month"] not in out:
            layout.ivf(m["month"]).unlink(missing_ok=True)
            out[m["month"]] = {"kind": "exact"}
    return out


def build_global(ws: Workspace, months: list[dict[str, Any]], changed: bool = True) -> dict[str, Any]:
    """Merge month outputs into the global BM25 postings and the per-row arrays."""
    layout = IndexLayout(ws.index_dir)
    rows_dir = layout.rows_dir
    if not changed and (rows_dir / "days.npy").exists() and (layout.bm25_dir / "indptr.npy").exists():
        return {}
    days, leak, quote, hashes = [], [], [], []
    for m in months:
        table = pa.ipc.open_file(pa.memory_map(str(layout.text(m["month"])))).read_all()
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
    save_npy(rows_dir / "days.npy", all_days)
    save_npy(rows_dir / "leak.npy", np.concatenate(leak) if leak else np.zeros(0, bool))
    save_npy(rows_dir / "market_quote.npy", np.concatenate(quote) if quote else np.zeros(0, bool))
    save_npy(rows_dir / "doc_hash.npy", all_hash[order])
    save_npy(rows_dir / "doc_row.npy", order.astype(np.int64))
    # month folders, read one at a time: the merge never holds the whole corpus's postings
    postings = build_global_postings(layout.bm25_dir, [layout.bm25_month(m["month"]) for m in months])
    first = EPOCH.toordinal()
    from datetime import date

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
