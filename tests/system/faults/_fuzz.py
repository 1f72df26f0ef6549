"""What the fuzzers share: the hypothesis settings (seeded, no database) and tallies of what they saw."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, settings

#: `FORECAST_ENV_FUZZ_SCALE` multiplies every fuzzer's number of inputs (default 1).
SCALE = float(os.environ.get("FORECAST_ENV_FUZZ_SCALE", "1"))


def fuzz_settings(examples: int) -> settings:
    """Seeded (derandomized), no example database, no deadline: the same inputs on every run."""
    return settings(max_examples=max(1, int(examples * SCALE)), derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck), print_blob=False)


class Tally:
    """Counts by key over one fuzz test; written as JSON where `FORECAST_ENV_FUZZ_REPORT` names a folder."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: Counter[str] = Counter()

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] += n

    def dump(self) -> None:
        folder = os.environ.get("FORECAST_ENV_FUZZ_REPORT")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / f"{self.name}.json").write_text(json.dumps(dict(sorted(self.counts.items())), indent=1))
