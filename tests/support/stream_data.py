"""Helpers for the streaming tests and benchmark: a fake clock whose sleep advances it, a config for a served
world, and real WARC files built streamed and from disk."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class StreamedAndLocal:
    """Two corpus builds of the same WARC files: streamed from a served CC-NEWS layout, and read from disk."""

    streamed: dict[str, Any]
    local: dict[str, Any]
    streamed_ws: Path
    local_ws: Path


def build_streamed_and_local(files: Sequence[Path], tmp: Path) -> StreamedAndLocal:
    """Build `files` streamed through a `WorldServer` (the CC-NEWS layout) and from disk, under `tmp`."""
    from forecast_env.config import load_config
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.corpus_build.source import Source
    from forecast_env.synth.serve import WorldServer

    streamed_ws, local_ws = tmp / "streamed", tmp / "local"
    with WorldServer(tmp / "empty-world") as server:
        sources = [Source(p.name, server.url + server.add_file(p, f"crawl-data/CC-NEWS/2025/03/{p.name}"),
                          f"crawl-data/CC-NEWS/2025/03/{p.name}") for p in files]
        cfg = load_config("corpus", overrides={"source.base_url": server.url, "corpus_start": "2000-01-01"})
        streamed = build_corpus(sources, streamed_ws, config=cfg, workers=1, progress=False)
    local = build_corpus(list(files), local_ws, config=cfg, workers=1, progress=False)
    return StreamedAndLocal(streamed, local, streamed_ws, local_ws)
