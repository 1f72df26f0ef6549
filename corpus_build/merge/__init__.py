"""The merge after the per-WARC parts, out of core: dedup over keys, then the store month by month.

The per-WARC stages leave one *part* per input (`WS/corpus/parts/`). The merge turns the parts into
the store (docs/design.md §2.dedup, §2.10) without ever holding the corpus's bodies in one process,
in four steps, one module each:

1. **Keys** (`keys.py`), per part (in parallel on the core executor, cached next to the part): the
   columns the dedup rule compares. A part's body is read here and nowhere else before the shards
   are written.
2. **Order** (`order.py`): the order columns of every part (no keys, no bodies) give the records read
   twice (same doc id) and each article's rank in visibility order (`dedup.order_articles`' order).
3. **Pairs** (`pairs.py`): the three stages of `dedup` over key columns read per stage (one band at a
   time), split into partitions by key hash so that a task's memory is bounded; each task returns
   only the (rank, earlier partner) pairs it found. `--engine ray` runs these tasks on Ray.
4. **Store** (`store.py`): each month shard is assembled from only the kept rows of the parts that
   hold that month, and each dropped-stage table from only that stage's rows; a file is rewritten
   only when its bytes change. These tasks run on Ray too with `--engine ray`.

`run.py` runs the steps (`merge_parts`); `profiles.py` gives one quality profile's view of a part.
Each task is a work item run through `forecast_env.workspace.task.NodeTask`, so steps 3 and 4 on Ray
read the parts from a workspace every node sees (a shared folder), or, for a workspace on object
storage, from the bucket. The result is the store of the in-memory merge kept for tests and
benchmarks (`tests/support/merge_oracle.py`), byte for byte.
"""

from forecast_env.corpus_build.merge.keys import (
    KEY_SOURCE_COLUMNS,
    PartFiles,
    keys_path,
    keys_schema,
    part_keys,
)
from forecast_env.corpus_build.merge.order import ORDER_COLUMNS, read_order
from forecast_env.corpus_build.merge.pairs import ROWS_PER_TASK, find_pairs
from forecast_env.corpus_build.merge.profiles import part_dropped, profile_differences, profile_view
from forecast_env.corpus_build.merge.run import MergeResult, compute_keys, find_duplicate_pairs, merge_parts
from forecast_env.corpus_build.merge.store import (
    REPORT_COLUMNS,
    ROW_GROUP_ROWS,
    RowGroupWriter,
    write_file_errors,
    write_if_changed,
)

__all__ = [
    "KEY_SOURCE_COLUMNS",
    "ORDER_COLUMNS",
    "REPORT_COLUMNS",
    "ROWS_PER_TASK",
    "ROW_GROUP_ROWS",
    "MergeResult",
    "PartFiles",
    "RowGroupWriter",
    "compute_keys",
    "find_duplicate_pairs",
    "find_pairs",
    "keys_path",
    "keys_schema",
    "merge_parts",
    "part_dropped",
    "part_keys",
    "profile_differences",
    "profile_view",
    "read_order",
    "write_file_errors",
    "write_if_changed",
]
