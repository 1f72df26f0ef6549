"""Measured rates of the corpus merge (`corpus_build/merge.py`), for the build planner's estimates.

Every figure comes from `benchmarks/bench_merge.py` (benchmarks/RESULTS.md, section "Corpus merge out
of core (issue 21)"): synthetic parts of 250k and 1M articles with bodies of about 3,600
characters and 13% planted duplicates, merged on the project's 2-core machine. CPU figures are
CPU seconds (one core), measured while other work shared the machine, so wall time there was
several times longer; memory figures are the merging process's peak resident memory (VmHWM).
"""

from __future__ import annotations

from typing import Any

#: CPU seconds per million articles, per merge phase. keys: MinHash signatures, URL and title keys of
#: every part (parallel over parts, cached: an incremental build pays it for new parts only); pairs:
#: the visibility order and the three stages' joins; store: the month shards and dropped tables
#: (zstd). The in-memory merge it replaced spent about the same CPU, on one core.
MERGE_SECONDS_PER_MILLION: dict[str, float] = {"keys": 276.0, "pairs": 14.0, "store": 45.0}

#: Bytes per article. driver: the merging process's state while it finds pairs (order columns,
#: ranks, one band's keys), on top of MERGE_BASE_BYTES; month: extra peak while a month shard is
#: assembled, per article of that month; keys_disk: the keys sidecars; store_disk: the month shards
#: and dropped tables; in_memory: the in-memory merge's peak, for comparison (not used by the planner).
MERGE_BYTES_PER_ARTICLE: dict[str, float] = {
    "driver": 1108.0, "month": 2000.0, "keys_disk": 526.0, "store_disk": 1370.0, "in_memory": 12290.0,
}

#: The merging process before it reads a part (interpreter, polars, pyarrow).
MERGE_BASE_BYTES = 142 * 2**20


def merge_estimate(articles: int, largest_month: int | None = None, workers: int = 1,
                   rows_per_task: int | None = None) -> dict[str, Any]:
    """Estimated CPU hours, wall hours on `workers` cores, peak memory and disk of one merge.

    `largest_month` defaults to a fifteenth of the articles (the paper's 15 months). Pair tasks are
    split into partitions of `rows_per_task` rows, so the driver's state is bounded by that, not by
    the corpus (the order columns excepted: about 80 bytes per article stay).
    """
    if rows_per_task is None:
        from forecast_env.corpus_build.merge import ROWS_PER_TASK

        rows_per_task = ROWS_PER_TASK
    n = max(0, int(articles))
    month = int(largest_month if largest_month is not None else -(-n // 15))
    rates = MERGE_SECONDS_PER_MILLION
    cpu_s = {phase: rate * n / 1e6 for phase, rate in rates.items()}
    # only the keys pass runs on several workers locally; pairs and store run one task at a time
    wall_s = cpu_s["keys"] / max(1, workers) + cpu_s["pairs"] + cpu_s["store"]
    per_task = min(n, max(1, rows_per_task))
    driver = MERGE_BASE_BYTES + MERGE_BYTES_PER_ARTICLE["driver"] * per_task + 80 * max(0, n - per_task)
    peak = max(driver, MERGE_BASE_BYTES + 80 * n + MERGE_BYTES_PER_ARTICLE["month"] * month)
    return {
        "cpu_hours": round(sum(cpu_s.values()) / 3600, 3),
        "cpu_hours_per_phase": {k: round(v / 3600, 3) for k, v in cpu_s.items()},
        "wall_hours": round(wall_s / 3600, 3),
        "peak_memory_bytes": int(peak),
        "disk_bytes": int((MERGE_BYTES_PER_ARTICLE["keys_disk"] + MERGE_BYTES_PER_ARTICLE["store_disk"]) * n),
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
