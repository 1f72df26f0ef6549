"""The corpus merge's cost model (`corpus_build/merge/`), for the build planner's estimates.

Its figures are rates of the data file `forecast_env/rates.json` (keys `merge.*`, each with the
benchmark command, date and machine state of its measurement): `benchmarks/corpus/merge.py` on
synthetic parts of 250k, 1M and 5M articles with bodies of about 3,600 characters and 13% planted
duplicates, merged on the project's 2-core machine, and the dedup passes alone on keys of 250k, 1M and
5M articles. CPU figures are CPU seconds (one core), measured while other work shared the machine, so
wall time there was several times longer; memory figures are the merging process's peak resident
memory (VmHWM).
"""

from __future__ import annotations

from typing import Any

from forecast_env.rates import rates_with_prefix, read_rates

#: CPU seconds per million articles, per merge phase (`merge.cpu.*`). keys: MinHash signatures, URL and
#: title keys of every part (parallel over parts, cached: an incremental build pays it for new parts
#: only); pairs: the visibility order and the three stages' joins; store: the month shards and
#: dropped tables (zstd). The in-memory merge it replaced spent about the same CPU, on one core.
MERGE_SECONDS_PER_MILLION: dict[str, float] = rates_with_prefix("merge.cpu.")

#: Bytes of the merging process's peak memory, per unit (`merge.bytes.*`). order: per article of the
#: corpus, while the visibility order is computed (the largest dedup step); state: per article, kept
#: through the later phases (ranks, ids); pair_task_row: per article of one pair task (at most
#: ROWS_PER_TASK); store_state: per article, what the store phase holds besides the row group it
#: writes; month_row: per row of the row group being written; dropped_row: per row of a dropped
#: table's row group; keys_disk / store_disk: the keys sidecars / the store on disk; in_memory: the
#: in-memory merge's peak, for comparison only.
MERGE_BYTES_PER_ARTICLE: dict[str, float] = rates_with_prefix("merge.bytes.")

#: The merging process before it reads a part (interpreter, polars, pyarrow).
MERGE_BASE_BYTES = int(read_rates()["merge.base_bytes"].value)


def merge_estimate(articles: int, largest_month: int | None = None, workers: int = 1,
                   rows_per_task: int | None = None, dropped_largest_stage: int | None = None) -> dict[str, Any]:
    """Estimated CPU hours, wall hours on `workers` cores, peak memory and disk of one merge.

    `largest_month` defaults to a fifteenth of the articles (the paper's 15 months) and
    `dropped_largest_stage` (the rows of the biggest dropped-stage table) to one per article, both
    marked as estimates; the store writes them one row group (`merge.ROW_GROUP_ROWS` rows) at a time,
    so only a group's worth counts. Pair tasks hold at most `rows_per_task` articles each.
    """
    from forecast_env.corpus_build.merge import ROW_GROUP_ROWS, ROWS_PER_TASK

    if rows_per_task is None:
        rows_per_task = ROWS_PER_TASK
    n = max(0, int(articles))
    month = int(largest_month if largest_month is not None else -(-n // 15))
    dropped = int(dropped_largest_stage if dropped_largest_stage is not None else n)
    b = MERGE_BYTES_PER_ARTICLE
    cpu_s = {phase: rate * n / 1e6 for phase, rate in MERGE_SECONDS_PER_MILLION.items()}
    # only the keys pass runs on several workers locally; pairs and store run one task at a time
    wall_s = cpu_s["keys"] / max(1, workers) + cpu_s["pairs"] + cpu_s["store"]
    per_task = min(n, -(-n // max(1, -(-n // max(1, rows_per_task))))) if n else 0
    state = MERGE_BASE_BYTES + b["state"] * n
    peaks = {
        "order": MERGE_BASE_BYTES + b["order"] * n,
        "pairs": state + b["pair_task_row"] * per_task,
        "store": MERGE_BASE_BYTES + b["store_state"] * n + max(b["month_row"] * min(month, ROW_GROUP_ROWS),
                                                               b["dropped_row"] * min(dropped, ROW_GROUP_ROWS)),
    }
    return {
        "cpu_hours": round(sum(cpu_s.values()) / 3600, 3),
        "cpu_hours_per_phase": {k: round(v / 3600, 3) for k, v in cpu_s.items()},
        "wall_hours": round(wall_s / 3600, 3),
        "peak_memory_bytes": int(max(peaks.values())),
        "peak_memory_bytes_per_phase": {k: int(v) for k, v in peaks.items()},
        "disk_bytes": int((b["keys_disk"] + b["store_disk"]) * n),
        "estimate": True,
        "source": "benchmarks/RESULTS.md (merge rows); benchmarks/log/2026-12-01-corpus-merge.md",
    }


__all__ = [
    "MERGE_BASE_BYTES",
    "MERGE_BYTES_PER_ARTICLE",
    "MERGE_SECONDS_PER_MILLION",
    "merge_estimate",
]
