"""Run the `forecast-env` CLI as the crash harness does: `python _driver.py ARGS...`.

`CRASH_TEST_ROW_GROUP_ROWS` (a test setting, not a user one) shrinks the merge's row groups so the
tiny worlds' month shards take the spill path of a large month."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    rows = os.environ.get("CRASH_TEST_ROW_GROUP_ROWS")
    if rows:
        from forecast_env.corpus_build.merge import store

        store.ROW_GROUP_ROWS = int(rows)
    from forecast_env.cli.main import main

    sys.exit(main(sys.argv[1:]))
