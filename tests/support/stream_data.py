"""Helpers for the streaming tests: a fake clock whose sleep advances it, and a config for a served world."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any


class FakeClock:
    """`sleep` records the wait and advances `now` (nothing waits); `now` is the limiter's clock."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


def served_config(base_url: str, **source: Any) -> dict:
    """The corpus config pointed at a served world, with fast retries (the sleeps are injected anyway)."""
    from forecast_env.config import load_config

    sets = {"base_url": base_url, "requests_per_second": 1000.0, "backoff_base_s": 0.001, "backoff_max_s": 0.01,
            "retries": 4, "timeout_s": 10.0, "chunk_bytes": 16384, **source}
    return load_config("corpus", overrides={f"source.{k}": v for k, v in sets.items()})


def store_digest(ws: Path) -> dict[str, str]:
    """sha256 of every file of the store (not the parts, reports or manifest)."""
    out = {}
    for p in sorted((Path(ws) / "corpus").rglob("*.parquet")):
        if "parts" in p.relative_to(ws).parts:
            continue
        out[str(p.relative_to(ws))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out
