"""Measured rates of the corpus merge (`corpus_build/merge.py`), for the build planner's estimates.

Every figure comes from `benchmarks/bench_merge.py` (benchmarks/RESULTS.md, section "Corpus merge out
of core (issue 21)"): synthetic parts of 250k, 1M and 5M articles with bodies of about 3,600
characters and 13% planted duplicates, merged on the project's 2-core machine, and the dedup passes
alone on keys of 250k, 1M and 5M articles. CPU figures are
CPU seconds (one core), measured while other work shared the machine, so wall time there was
several times longer; memory figures are the merging process's peak resident memory (VmHWM).
"""

from __future__ import annotations

from typing import Any

#: CPU seconds per million articles, per merge phase (the 1M run; the 5M run: 361.7 / 26.4 / 78.5
#: with the store written by row group, on a machine the tests shared). keys: MinHash signatures, URL and
#: title keys of every part (parallel over parts, cached: an incremental build pays it for new parts
#: only); pairs: the visibility order and the three stages' joins; store: the month shards and
#: dropped tables (zstd). The in-memory merge it replaced spent about the same CPU, on one core.
MERGE_SECONDS_PER_MILLION: dict[str, float] = {"keys": 334.5, "pairs": 14.4, "store": 45.7}

#: Bytes of the merging process's peak memory, per unit. order: per article of the corpus, while the
#: visibility order is computed (the largest dedup step: 1,258 MB at 5M articles); state: per article,
#: kept through the later phases (ranks, ids); pair_task_row: per article of one pair task (at most
#: ROWS_PER_TASK); store_state: per article, what the store phase holds besides the row group it
#: writes (the dedup state, the kept rows' plan per month and part: 1,601 MB peak at 5M articles with
#: one 16,384-row group of about 230 MB); month_row: per row of the row group being written (its rows
#: about 4x: read, sorted copy, compressed bytes); dropped_row: per row of a dropped table's row group;
#: keys_disk / store_disk: the keys sidecars / the store (shards and dropped tables, two dropped rows
#: per article) on disk; in_memory: the in-memory merge's peak (3,214 MB at 250k; 1M passed 8 GB),
#: for comparison only.
MERGE_BYTES_PER_ARTICLE: dict[str, float] = {
    "order": 200.0, "state": 80.0, "pair_task_row": 600.0, "store_state": 260.0, "month_row": 14_000.0,
    "dropped_row": 450.0, "keys_disk": 526.0, "store_disk": 1363.0, "in_memory": 12_290.0,
}

#: The merging process before it reads a part (interpreter, polars, pyarrow).
MERGE_BASE_BYTES = 143 * 2**20


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
        "source": "benchmarks/RESULTS.md: Corpus merge out of core (issue 21)",
    }


#: The merge's cost as linear rates, for planners that scale by kept articles: CPU seconds per article
#: (all phases) and peak bytes per article at the paper's scale (20M articles, 15 months; the peak
#: grows slower than the corpus, so this over-estimates smaller builds' memory per article).
MERGE_COST: dict[str, float] = {
    "core_s_per_article": sum(MERGE_SECONDS_PER_MILLION.values()) / 1e6,
    "bytes_per_article": merge_estimate(20_000_000)["peak_memory_bytes"] / 20_000_000,
}


__all__ = [
    "MERGE_BASE_BYTES",
    "MERGE_BYTES_PER_ARTICLE",
    "MERGE_COST",
    "MERGE_SECONDS_PER_MILLION",
    "merge_estimate",
]
