"""Shared fixtures: the `micro` sample world, built once per test run, stage by stage (under pytest-xdist
once for all the workers, behind a file lock: tests/support/shared_fixture.py), and the order and work units
of an xdist run.

Each fixture calls the public API of one stage, so a test of a later stage exercises the real
outputs of the earlier ones (synth -> corpus -> index -> events).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from filelock import FileLock

from tests.support.shared_fixture import run_root, shared_folder, xdist_worker

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def micro_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated `micro` sample world (WARC files, Polymarket JSON, truth.json)."""
    from forecast_env.synth import synthesize

    return shared_folder(tmp_path_factory, "micro_world",
                         lambda out: synthesize(out, preset="micro", seed=0, progress=False))


@pytest.fixture(scope="session")
def micro_truth(micro_world: Path) -> dict:
    import json

    return json.loads((micro_world / "truth.json").read_text())


#: the build stages of the micro workspace, in order
MICRO_STAGES = ("corpus", "index", "events")


def _build_micro_ws(world: Path, ws: Path, stages: tuple[str, ...]) -> None:
    """The micro workspace's build stages, in order (corpus, index, events) over `world`."""
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events

    if "corpus" in stages:
        build_corpus(sorted((world / "news").glob("*.warc.gz")), ws, workers=1, progress=False)
    if "index" in stages:
        build_index(ws, progress=False)
    if "events" in stages:
        build_events(world / "polymarket", ws, progress=False)


@pytest.fixture(scope="session")
def micro_corpus(micro_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace holding the corpus built from the micro world's WARC files."""
    if xdist_worker():
        # the workers share one workspace, so it is built whole at once: a later stage written into it while
        # another worker's test reads it would change files under that test
        return shared_folder(tmp_path_factory, "micro_ws", lambda ws: _build_micro_ws(micro_world, ws, MICRO_STAGES))
    ws = tmp_path_factory.mktemp("micro_ws")
    _build_micro_ws(micro_world, ws, ("corpus",))
    return ws


@pytest.fixture(scope="session")
def micro_index(micro_corpus: Path, micro_world: Path) -> Path:
    """The micro workspace with its dense and BM25 indices."""
    if not xdist_worker():
        _build_micro_ws(micro_world, micro_corpus, ("index",))
    return micro_corpus


@pytest.fixture(scope="session")
def micro_events(micro_index: Path, micro_world: Path) -> Path:
    """The micro workspace with its events, beliefs and schedules."""
    if not xdist_worker():
        _build_micro_ws(micro_world, micro_index, ("events",))
    return micro_index


#: the world of the one-world gate: seed 1 writes its evidence with bank b, the phrasing written apart from
#: the scenario pools; the reader was designed on bank-a worlds only (benchmarks/RESULTS.md, acceptance), so
#: this world confirms it, never tuned it
GATE_SEED = 1


@pytest.fixture(scope="session")
def gate_events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `gate` world of GATE_SEED, built once per run (the acceptance gate's world, test_acceptance.py).
    With FORECAST_ENV_ACCEPTANCE_DIR set it is reused across runs (keyed by the builders' code)."""
    from benchmarks.envs import acceptance

    cache = os.environ.get("FORECAST_ENV_ACCEPTANCE_DIR")
    if cache:
        root = Path(cache) / acceptance.builder_hash()
    elif xdist_worker():
        root = run_root(tmp_path_factory) / "gate"
    else:
        root = tmp_path_factory.mktemp("gate")
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root / f"gate-seed{GATE_SEED}.lock"):  # build_world reuses a whole build, never a half one
        return acceptance.build_world(root / f"gate-seed{GATE_SEED}", "gate", GATE_SEED, workers=1)


@pytest.fixture(scope="session")
def gate_episode_forecasts(gate_events: Path, tmp_path_factory: pytest.TempPathFactory):
    """The forecasts of one episode-mode run of uniform and retrieval over every split of the gate world,
    played once per run: the acceptance gate's figures."""
    import polars as pl

    from benchmarks.envs import acceptance

    done = run_root(tmp_path_factory) / "gate-episode.done"  # this run's: a cached world is played again
    with FileLock(gate_events.parent / "gate-episode.lock"):
        if xdist_worker() and done.exists():  # played by another worker of this run
            return pl.read_parquet(gate_events / "runs" / "gate-episode" / "forecasts.parquet")
        forecasts = acceptance.run_agents(gate_events, "all", workers=1, agents=["uniform", "retrieval"],
                                          run_id="gate-episode")
        done.touch()
        return forecasts


#: Under pytest-xdist (`make test`), the tests that start Ray run one after another on one worker: each starts
#: its own Ray instance (up to two CPUs, object store, worker processes), the cluster test three nodes.
RAY_GROUP = "ray"

#: The known-long tests and modules (a node id or its prefix), longest first: under xdist their work units start
#: first, so that no worker is left with a long one while the other has finished (seconds on 2 idle cores, one
#: worker, figures in benchmarks/RESULTS.md).
LONG = (
    "tests/eval/test_acceptance.py::test_retrieval_beats_uniform_on_one_world",  # builds and plays the gate world
    "tests/workspace/test_s3_workspace.py",
    "tests/system/crash/test_crash.py",
    "tests/adapters/test_trl.py::test_grpo_trainer_trains_on_the_environments_rewards",
    "tests/recipe/test_build_recipe.py",
    "tests/corpus_build/test_embed.py",
    "tests/retrieval/test_searcher_threads.py",
    "tests/system/faults/test_disk_full.py",
    "tests/corpus_build/test_pipeline.py",
    "tests/synth/test_synth.py",
    "tests/corpus_build/test_index.py",
    "tests/corpus_build/test_merge.py",
    "tests/adapters/test_sessions_load.py",
    "tests/eval/audit/test_audit_siblings.py",
    "tests/eval/runs/test_runner.py",
    "tests/cli/test_cli.py::test_index_prepare_builds_the_configured_backend",
    "tests/synth/test_serve_polymarket.py",
    "tests/adapters/test_verifiers.py",
    "tests/repo/test_wheel.py",
    "tests/envs/test_world.py",
)


def _work_unit(item: pytest.Item) -> str | None:
    """The xdist group of `item`, or None for a unit of its own: the Ray tests share one, and the tests that
    share a module- or class-scoped fixture (or the audit's `siblings` world) run on one worker that builds it."""
    if item.get_closest_marker("ray"):
        return RAY_GROUP
    if "siblings" in item.fixturenames:
        return "siblings"
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    if any(d[-1].scope in ("module", "class", "package") for d in defs if d):
        return item.nodeid.split("::")[0]
    return None


def _rank(item: pytest.Item) -> int:
    """Where `item`'s unit starts: the Ray group first, then LONG's order, then the other slow tests."""
    if item.get_closest_marker("ray"):
        return 0
    for i, prefix in enumerate(LONG, start=1):
        if item.nodeid.startswith(prefix):
            return i
    return len(LONG) + (1 if item.get_closest_marker("slow") else 2)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist (each worker collects; `--dist loadgroup --no-loadscope-reorder` keeps this order): the
    work units, and the long ones first. Without xdist the order and the tests stay as collected."""
    if not xdist_worker():
        return
    for item in items:
        group = _work_unit(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # a unit starts where its first test stands: every test of a unit takes the unit's best rank
    unit_rank: dict[str, int] = {}
    for item in items:
        key = _work_unit(item) or item.nodeid
        unit_rank[key] = min(unit_rank.get(key, _rank(item)), _rank(item))
    items.sort(key=lambda item: unit_rank[_work_unit(item) or item.nodeid])


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
