"""The `questions` sample world (outcome reports after each event closes) built once per test run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.shared_fixture import shared_folder


def _build(root: Path) -> None:
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events
    from forecast_env.synth import synthesize

    # the same steps as benchmarks/questions/local_model.py: its recording replays on this workspace
    synthesize(root / "world", preset="questions", seed=0, progress=False)
    build_corpus(sorted((root / "world" / "news").glob("*.warc.gz")), root / "ws", workers=1, progress=False)
    build_index(root / "ws", progress=False)
    build_events(root / "world" / "polymarket", root / "ws", progress=False)


@pytest.fixture(scope="session")
def questions_world(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A folder with `world/` (the questions preset, seed 0) and `ws/` (its corpus, index and Polymarket events);
    read only: tests copy `ws` before writing."""
    return shared_folder(tmp_path_factory, worker_id, "questions_world", _build)
