"""The merge itself: keys, order, pairs and store in turn, on the core executor, locally or on Ray nodes.

`merge_parts` runs the four steps (`keys`, `order`, `pairs`, `store`) and returns what the funnel
report needs. Each task of the keys, pairs and store steps is a work item run through
`forecast_env.workspace.task.NodeTask`: in this process or a worker that shares the workspace's disk,
or, for a workspace on object storage built with `--engine ray`, in a node's own scratch between
fetching its inputs from the bucket and publishing its outputs there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from forecast_env import schema
from forecast_env.corpus_build.merge.frames import frame
from forecast_env.corpus_build.merge.keys import KeysTask, PartFiles, write_part_keys
from forecast_env.corpus_build.merge.order import Order, read_order
from forecast_env.corpus_build.merge.pairs import ROWS_PER_TASK, collect_hits, pair_tasks, run_pair_task
from forecast_env.corpus_build.merge.profiles import add_differences
from forecast_env.corpus_build.merge.store import DroppedTask, MonthTask, month_tasks, run_store_task
from forecast_env.corpus_build.quality import active_profile
from forecast_env.corpus_build.report import ArticleTally, combine_tallies, dropped_counts
from forecast_env.crashpoints import crash_point
from forecast_env.errors import CorpusError
from forecast_env.executor import map_unordered
from forecast_env.store import Workspace, atomic_save_npy, atomic_write_json, conform
from forecast_env.workspace.task import NodeTask, StagedWorkspace, relative_to


@dataclass
class MergeResult:
    """What the merge wrote and what the funnel report needs (no article text)."""

    written: dict[str, list[str]]
    dropped: pa.Table            # (stage, reason, n): dropped rows counted per stage and reason, dedup included
    articles: ArticleTally       # the funnel's counts of the kept articles (one tally per month, summed)
    timings: dict[str, float]
    #: per other quality profile: what it would have kept of this profile's quality drops and dropped of
    #: what this profile passed, per reason (`profile_differences`)
    quality_profiles: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


def _root(remote: StagedWorkspace | None) -> str:
    # the work items' paths: relative to the driver's staged copy for nodes over object storage, else
    # local paths as they are (a merge's parts may lie outside its workspace)
    return remote.root if remote is not None else ""


def _task(step: Callable[[Any], Any], remote: StagedWorkspace | None) -> NodeTask:
    return remote.task(step) if remote is not None else NodeTask(step)


def _map(fn: Callable[[Any], Any], items: list, engine: str, workers: int, ray_address: str | None,
         desc: str, progress: bool) -> list:
    from tqdm import tqdm

    out = []
    with tqdm(total=len(items), desc=desc, unit="task", disable=not progress) as bar:
        for res in map_unordered(fn, items, engine=engine, workers=workers, threads=1 if engine == "ray" else None,
                                 ray_address=ray_address, error=CorpusError,
                                 broken_advice="Rerun the build: finished parts and keys are kept."):
            out.append(res)
            bar.update(1)
    return out


def compute_keys(parts: Sequence[PartFiles], cfg: dict[str, Any], engine: str = "local", workers: int = 1,
                 ray_address: str | None = None, progress: bool = False,
                 remote: StagedWorkspace | None = None) -> int:
    """Write the keys sidecar of every part that lacks one; returns how many were computed. With
    `remote` (Ray nodes over object storage) each runs on a node (`NodeTask`) and the driver
    fetches the sidecars it published."""
    dedup_cfg = cfg.get("dedup") or {}
    root = _root(remote)
    todo = [KeysTask(root=root, articles=relative_to(root, p.articles), out=relative_to(root, p.keys), dedup=dedup_cfg)
            for p in parts if not p.keys.exists()]
    if todo:
        if remote is not None:
            remote.ensure_published([t.articles for t in todo])
        _map(_task(write_part_keys, remote), todo, engine, workers, ray_address, "dedup keys", progress)
        if remote is not None:
            remote.fetch([t.out for t in todo])
    return len(todo)


def merge_parts(ws: Workspace, parts: Sequence[PartFiles], cfg: dict[str, Any], engine: str = "local",
                workers: int = 1, ray_address: str | None = None, progress: bool = False,
                rows_per_task: int = ROWS_PER_TASK, on_phase: Callable[[str], None] | None = None,
                remote: StagedWorkspace | None = None) -> MergeResult:
    """Dedup every part's articles and write the store (month shards, dropped tables), out of core.

    Keys are computed on the executor (`workers` processes or Ray); the pair and store tasks run in
    this process for `engine="local"` (one task's memory at a time) and on Ray for `engine="ray"`
    (one Ray session for the three phases). `on_phase(name)` is called after each phase ("keys",
    "pairs", "store"), e.g. to sample memory. `remote`: the workspace is on object storage and `ws` is
    the driver's staged copy; on Ray every task then runs on whichever node, reading its inputs from
    the bucket and publishing its outputs there (`NodeTask`), so no node needs the driver's disk.
    """
    remote = remote if engine == "ray" else None
    if engine == "ray":
        from forecast_env.executor import ray_session

        with ray_session(ray_address, workers, CorpusError):
            return _merge(ws, parts, cfg, engine, workers, ray_address, progress, rows_per_task, on_phase, remote)
    return _merge(ws, parts, cfg, engine, workers, ray_address, progress, rows_per_task, on_phase, remote)


def find_duplicate_pairs(keys: Sequence[Path], dedup_cfg: dict[str, Any], work: Path, engine: str = "local",
                         workers: int = 1, ray_address: str | None = None, progress: bool = False,
                         rows_per_task: int = ROWS_PER_TASK,
                         on_phase: Callable[[str], None] | None = None, dropped: Sequence[Path] | None = None,
                         profile: str | None = None,
                         remote: StagedWorkspace | None = None) -> tuple[Order, pl.DataFrame]:
    """The dedup passes over keys sidecars: (the visibility order, (rank, partner, reason) per suppressed
    article). `work` holds the ranks file the pair tasks read; `on_phase("order")` after the order;
    `dropped`, `profile`: the parts' dropped tables and the active quality profile (`read_order`);
    `remote`: the pair tasks run on nodes over object storage (`NodeTask`), the ranks file published
    for them first."""
    order = read_order(keys, dropped, profile)
    if on_phase:
        on_phase("order")
    work.mkdir(parents=True, exist_ok=True)
    for tmp in work.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    ranks_path = work / "ranks.npy"
    atomic_save_npy(ranks_path, order.ranks)  # chunked Python writes: a full disk raises with its errno
    tasks = pair_tasks(keys, ranks_path, order, dedup_cfg, rows_per_task, root=_root(remote))
    task_workers = workers if engine == "ray" else 1
    if remote is not None:
        remote.ensure_published(keys)
        remote.publish([ranks_path])
    hits = collect_hits(_map(_task(run_pair_task, remote), tasks, engine, task_workers, ray_address,
                             "dedup pairs", progress))
    ranks_path.unlink(missing_ok=True)
    return order, hits


def _stat(path: Path) -> tuple[int, int] | None:
    return (path.stat().st_size, path.stat().st_mtime_ns) if path.exists() else None


def _dedup_drops(parts: Sequence[PartFiles], order: Order, hits: pl.DataFrame, keep_text: bool = False) -> pa.Table:
    """The rows of stage dedup: suppressed articles with their earliest partner, and records read twice
    (`keep_text`: with the first `schema.DROPPED_TEXT_CHARS` characters of the body, `corpus build
    --keep-dropped-text`)."""
    ids = order.ranked.select("rank", "gid", "doc_id")
    dups = (hits.join(ids, on="rank")
            .join(ids.select(pl.col("rank").alias("partner"), pl.col("doc_id").alias("dup_of")), on="partner")
            .sort("rank").select("gid", "reason", pl.lit(None, dtype=pl.Utf8).alias("detail"), "dup_of"))
    reps = order.repeats.select("gid", pl.lit("dup_canonical_url").alias("reason"),
                                pl.lit("same record").alias("detail"), pl.col("doc_id").alias("dup_of"))
    wanted = pl.concat([dups, reps])
    if wanted.height == 0:
        return schema.DROPPED.empty_table()
    # the URL and position of each dropped row, read from its part (only those rows)
    part_of = np.searchsorted(order.offsets, wanted["gid"].to_numpy(), side="right") - 1
    wanted = wanted.with_columns(pl.Series("part", part_of, dtype=pl.Int64), pl.Series("seq", np.arange(wanted.height)))
    rows = []
    for (p,), sub in wanted.group_by(["part"]):
        local = (sub["gid"] - int(order.offsets[p])).to_numpy()
        cols = ["doc_id", "url", "warc_file", "warc_offset"] + (["body"] if keep_text else [])
        t = pq.read_table(parts[p].articles, columns=cols).take(pa.array(local, pa.int64()))
        found = frame(t).with_columns(sub["seq"].alias("seq"))
        if keep_text:
            found = found.with_columns(pl.col("body").str.slice(0, schema.DROPPED_TEXT_CHARS).alias("text_head")).drop("body")
        rows.append(found)
    info = pl.concat(rows).sort("seq")
    out = pl.concat([info.drop("seq"), wanted.sort("seq").select(
        pl.lit("dedup").alias("stage"), "reason", "detail", "dup_of")], how="horizontal")
    return conform(out.select(["doc_id", "url", "warc_file", "warc_offset", "stage", "reason", "detail",
                               "dup_of"] + (["text_head"] if keep_text else [])).to_arrow(), schema.DROPPED)


def _merge(ws: Workspace, parts: Sequence[PartFiles], cfg: dict[str, Any], engine: str, workers: int,
           ray_address: str | None, progress: bool, rows_per_task: int,
           on_phase: Callable[[str], None] | None, remote: StagedWorkspace | None = None) -> MergeResult:
    phase = on_phase or (lambda name: None)
    t0 = time.perf_counter()
    dedup_cfg = dict(cfg.get("dedup") or {})
    compute_keys(parts, cfg, engine, workers, ray_address, progress, remote)
    t_keys = time.perf_counter()
    phase("keys")

    work = ws.corpus_dir / "merge"
    profile = active_profile(cfg.get("quality"))
    order, hits = find_duplicate_pairs([p.keys for p in parts], dedup_cfg, work, engine, workers, ray_address,
                                       progress, rows_per_task, phase, [p.dropped for p in parts], profile, remote)
    task_workers = workers if engine == "ray" else 1
    t_pairs = time.perf_counter()
    phase("pairs")

    dedup_rows = _dedup_drops(parts, order, hits, keep_text=bool(cfg.get("keep_dropped_text")))
    plans_path = work / "months.json"
    try:
        recorded = json.loads(plans_path.read_text()) if plans_path.exists() else {}
    except json.JSONDecodeError:
        recorded = {}
    root = _root(remote)
    store_tasks: list[MonthTask | DroppedTask] = list(month_tasks(ws, parts, order, hits, recorded, root))
    plans = {t.month: t.plan for t in store_tasks if isinstance(t, MonthTask)}
    months = [t.month for t in store_tasks if isinstance(t, MonthTask)]  # only month tasks so far
    store_tasks += [DroppedTask(root=root, stage=s, sources=tuple(relative_to(root, p.dropped) for p in parts),
                                extra=dedup_rows if s == "dedup" else None,
                                out=relative_to(root, ws.dropped_dir / f"{s}.parquet"), profile=profile)
                    for s in schema.CORPUS_STAGES]
    del order
    written: dict[str, list[str]] = {"articles": [], "dropped": [], "removed": []}
    reports: dict[str, ArticleTally] = {}
    stage_counts: list[pa.Table] = []
    shards: dict[str, dict] = {}
    differences: dict[str, dict[str, dict[str, int]]] = {}
    if remote is not None:
        remote.ensure_published([f for t in store_tasks for f in t.inputs()])
        # the nodes publish month shards and dropped tables one by one: the corpus's own marker goes
        # first, so no reader takes a half-new store as a generation (`remote.pull_workspace`)
        remote.bucket().unpublish("corpus")
    task_of = {("articles" if isinstance(t, MonthTask) else "dropped", t.name): t for t in store_tasks}
    stat_before = {key: _stat(t.path(t.out)) for key, t in task_of.items()} if remote is not None else {}
    for kind, name, did_write, report, stat in _map(_task(run_store_task, remote), store_tasks, engine,
                                                    task_workers, ray_address, "store", progress):
        crash_point("merge.store")
        if remote is not None:  # a node wrote it: bring it here; written = the driver's copy changed
            task = task_of[(kind, name)]
            did_write = remote.fetch([task.out], [stat_before[(kind, name)]])[0]
            if kind == "articles":
                stat = _stat(task.path(task.out))
        if did_write:
            written[kind].append(name)
        if isinstance(report, ArticleTally):
            reports[name] = report
            shards[name] = {"plan": plans[name], "size": stat[0], "mtime_ns": stat[1]}
        else:
            stage_counts.append(report)
            add_differences(differences, stat)
    written["articles"].sort()
    written["dropped"] = [s for s in schema.CORPUS_STAGES if s in written["dropped"]]
    for old in sorted(ws.articles_dir.glob("????-??.parquet")):
        if old.stem not in months:
            old.unlink()
            written["removed"].append(old.name)
    crash_point("merge.plans")
    atomic_write_json(plans_path, dict(sorted(shards.items())))

    # counted while the dropped tables were written: the report needs (stage, reason) counts only
    dropped = dropped_counts(pa.concat_tables(stage_counts))
    articles = combine_tallies([reports[m] for m in sorted(reports)])
    t_end = time.perf_counter()
    phase("store")
    timings = {"keys_s": round(t_keys - t0, 3), "pairs_s": round(t_pairs - t_keys, 3),
               "store_s": round(t_end - t_pairs, 3)}
    quality_profiles = {name: {side: dict(sorted(v.items())) for side, v in sides.items()}
                        for name, sides in sorted(differences.items())}
    return MergeResult(written=written, dropped=dropped, articles=articles, timings=timings,
                       quality_profiles=quality_profiles)
