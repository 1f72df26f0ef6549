"""Shared fixtures: the `micro` sample world, built once per test session, stage by stage.

Each fixture calls the public API of one stage, so a test of a later stage exercises the real
outputs of the earlier ones (synth -> corpus -> index -> events).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def micro_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated `micro` sample world (WARC files, Polymarket JSON, truth.json)."""
    from forecast_env.synth import synthesize

    out = tmp_path_factory.mktemp("micro_world")
    synthesize(out, preset="micro", seed=0, progress=False)
    return out


@pytest.fixture(scope="session")
def micro_truth(micro_world: Path) -> dict:
    import json

    return json.loads((micro_world / "truth.json").read_text())


@pytest.fixture(scope="session")
def micro_corpus(micro_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace holding the corpus built from the micro world's WARC files."""
    from forecast_env.corpus_build.pipeline import build_corpus

    ws = tmp_path_factory.mktemp("micro_ws")
    build_corpus(sorted((micro_world / "news").glob("*.warc.gz")), ws, workers=1, progress=False)
    return ws


@pytest.fixture(scope="session")
def micro_index(micro_corpus: Path) -> Path:
    """The micro workspace with its dense and BM25 indices."""
    from forecast_env.corpus_build.index import build_index

    build_index(micro_corpus, progress=False)
    return micro_corpus


@pytest.fixture(scope="session")
def micro_events(micro_index: Path, micro_world: Path) -> Path:
    """The micro workspace with its events, beliefs and schedules."""
    from forecast_env.envs.events.build import build_events

    build_events(micro_world / "polymarket", micro_index, progress=False)
    return micro_index


#: the world of the one-world gate: seed 1 writes its evidence with bank b, the phrasing written apart from
#: the scenario pools; the reader was designed on bank-a worlds only (benchmarks/RESULTS.md, acceptance), so
#: this world confirms it, never tuned it
GATE_SEED = 1


@pytest.fixture(scope="session")
def gate_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `gate` world of GATE_SEED, built once per session: the acceptance gate's world, shared by its
    episode-mode check (test_acceptance.py) and its world-mode check (test_world.py). With
    FORECAST_ENV_ACCEPTANCE_DIR set it is reused across runs (keyed by the builders' code)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import bench_acceptance

    cache = os.environ.get("FORECAST_ENV_ACCEPTANCE_DIR")
    root = Path(cache) / bench_acceptance.builder_hash() if cache else tmp_path_factory.mktemp("gate")
    return bench_acceptance.build_world(root / f"gate-seed{GATE_SEED}", "gate", GATE_SEED, workers=1)


@pytest.fixture(scope="session")
def gate_episode_forecasts(gate_events: Path):
    """The forecasts of one episode-mode run of uniform and retrieval over every split of the gate world,
    played once per session: the acceptance gate's figures and the world-mode check's episode side."""
    import bench_acceptance  # on sys.path through gate_events

    return bench_acceptance.run_agents(gate_events, "all", workers=1, agents=["uniform", "retrieval"],
                                       run_id="gate-episode")


#: Skips that CI expects: what CI cannot have (a local model server needs a model build of 10+ minutes,
#: `make llm-local`). Every other skip in CI (FORECAST_ENV_CI=1, set by .ci/run) is a missing tool or
#: extra that CI must have (.ci/required-tools, the Makefile's extras), so it fails the run.
EXPECTED_CI_SKIP_MARKERS = ("llm_local",)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if not (os.environ.get("FORECAST_ENV_CI") and report.skipped):
        return
    if any(item.get_closest_marker(m) for m in EXPECTED_CI_SKIP_MARKERS):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = (f"skipped in CI, where every test must run: {reason} "
                       "(install what it needs: .ci/required-tools, or mark it as an expected skip in tests/conftest.py)")


@pytest.fixture()
def served_world(micro_world: Path):
    """The micro world served on 127.0.0.1 (port 0) in the Common Crawl layout (synth/serve.py): a fresh
    server per test, so planted faults and request counts start empty. `server.url` is the base URL."""
    from forecast_env.synth.serve import WorldServer

    with WorldServer(micro_world) as server:
        yield server


def _required_tool_tests() -> list[str]:
    """The test files .ci/required-tools names (its third column starts with the file)."""
    path = Path(__file__).resolve().parents[1] / ".ci" / "required-tools"
    if not path.exists():
        return []
    files = []
    for line in path.read_text().splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and not line.startswith("#"):
            files.append(parts[2].split(":")[0])
    return files


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """In CI, name the outcome of every test that needs a required tool (the browser, the sandbox)."""
    if not os.environ.get("FORECAST_ENV_CI"):
        return
    files = _required_tool_tests()
    lines = []
    for outcome in ("passed", "failed", "skipped", "error"):
        for rep in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(rep, "nodeid", "")
            if getattr(rep, "when", "call") in ("call", "setup") and any(nodeid.startswith(f) for f in files):
                if outcome == "passed" and rep.when != "call":
                    continue
                lines.append(f"{outcome.upper():8} {nodeid}")
    terminalreporter.write_sep("-", "tests of the required tools (.ci/required-tools)")
    for line in sorted(set(lines)) or ["none collected"]:
        terminalreporter.write_line(line)
