"""Shared fixtures: the `micro` sample world, built once per test run, stage by stage (under pytest-xdist
once for all the workers, behind a file lock: tests/support/shared_fixture.py), and the order and work units
of an xdist run.

Each fixture calls the public API of one stage, so a test of a later stage exercises the real
outputs of the earlier ones (synth -> corpus -> index -> events).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from filelock import FileLock

from tests.support.shared_fixture import run_root, shared_folder

if TYPE_CHECKING:
    from xdist.remote import Producer

    from tests.support.work_units import UnitScheduling

#: the real-browser fixtures (browser, page, page_problems) and their hooks: tests/support/browser.py
pytest_plugins = ["tests.support.browser"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def micro_world(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A generated `micro` sample world (WARC files, Polymarket JSON, truth.json)."""
    from forecast_env.synth import synthesize

    return shared_folder(tmp_path_factory, worker_id, "micro_world",
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
def micro_corpus(micro_world: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A workspace holding the corpus built from the micro world's WARC files."""
    if worker_id != "master":
        # the workers share one workspace, so it is built whole at once: a later stage written into it while
        # another worker's test reads it would change files under that test
        return shared_folder(tmp_path_factory, worker_id, "micro_ws",
                             lambda ws: _build_micro_ws(micro_world, ws, MICRO_STAGES))
    ws = tmp_path_factory.mktemp("micro_ws")
    _build_micro_ws(micro_world, ws, ("corpus",))
    return ws


@pytest.fixture(scope="session")
def micro_index(micro_corpus: Path, micro_world: Path, worker_id: str) -> Path:
    """The micro workspace with its dense and BM25 indices."""
    if worker_id == "master":  # under xdist micro_corpus built every stage
        _build_micro_ws(micro_world, micro_corpus, ("index",))
    return micro_corpus


@pytest.fixture(scope="session")
def micro_events(micro_index: Path, micro_world: Path, worker_id: str) -> Path:
    """The micro workspace with its events, beliefs and schedules."""
    if worker_id == "master":
        _build_micro_ws(micro_world, micro_index, ("events",))
    return micro_index


def _build_questions_world(root: Path) -> None:
    """The `questions` preset (outcome reports after each event closes) and its workspace: corpus, index, Polymarket
    events; the same steps as benchmarks/questions/local_model.py, whose recording replays on it."""
    from forecast_env.synth import synthesize

    synthesize(root / "world", preset="questions", seed=0, progress=False)
    _build_micro_ws(root / "world", root / "ws", MICRO_STAGES)


@pytest.fixture(scope="session")
def questions_world(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A folder with `world/` (the questions preset, seed 0) and `ws/` (its corpus, index and Polymarket events);
    read only: tests copy `ws` before writing."""
    return shared_folder(tmp_path_factory, worker_id, "questions_world", _build_questions_world)


@pytest.fixture(scope="session")
def siblings(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Path]:
    """The `siblings` world and its events built with the cross-question rule on and off ({"world", "on",
    "off"}), built once per run (tests/support/siblings.py); a test copies a workspace before it changes it."""
    from tests.support.siblings import build_siblings, siblings_paths

    return siblings_paths(shared_folder(tmp_path_factory, worker_id, "siblings", build_siblings))


#: the world of the one-world gate: seed 1 writes its evidence with bank b, the phrasing written apart from
#: the scenario pools; the reader was designed on bank-a worlds only (benchmarks/RESULTS.md, acceptance), so
#: this world confirms it, never tuned it
GATE_SEED = 1


@pytest.fixture(scope="session")
def gate_events(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The `gate` world of GATE_SEED, built once per run (the acceptance gate's world, test_acceptance.py).
    With FORECAST_ENV_ACCEPTANCE_DIR set it is reused across runs (keyed by the builders' code)."""
    from benchmarks.envs import acceptance

    cache = os.environ.get("FORECAST_ENV_ACCEPTANCE_DIR")
    if cache:
        root = Path(cache) / acceptance.builder_hash()
    elif worker_id != "master":
        root = run_root(tmp_path_factory, worker_id) / "gate"
    else:
        root = tmp_path_factory.mktemp("gate")
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root / f"gate-seed{GATE_SEED}.lock"):  # build_world reuses a whole build, never a half one
        return acceptance.build_world(root / f"gate-seed{GATE_SEED}", "gate", GATE_SEED, workers=1)


@pytest.fixture(scope="session")
def gate_episode_forecasts(gate_events: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str):
    """The forecasts of one episode-mode run of uniform and retrieval over every split of the gate world,
    played once per run: the acceptance gate's figures."""
    import polars as pl

    from benchmarks.envs import acceptance

    done = run_root(tmp_path_factory, worker_id) / "gate-episode.done"  # this run's: a cached world is replayed
    with FileLock(gate_events.parent / "gate-episode.lock"):
        if worker_id != "master" and done.exists():  # played by another worker of this run
            return pl.read_parquet(gate_events / "runs" / "gate-episode" / "forecasts.parquet")
        forecasts = acceptance.run_agents(gate_events, "all", workers=1, agents=["uniform", "retrieval"],
                                          run_id="gate-episode")
        done.touch()
        return forecasts


#: Under pytest-xdist (`make test`), the tests that start Ray run one after another on one worker: each starts
#: its own Ray instance (up to two CPUs, object store, worker processes), the cluster test three nodes.
RAY_GROUP = "ray"

#: The first test under xdist: a short one on the shared micro workspace, so that one worker builds it at once
#: while the other starts the Ray group (whose first test needs the micro world only), and no later test waits.
FIRST = "tests/envs/test_world.py::test_world_and_episode_runs_score_the_same_rows_on_a_built_world"

#: The known-long tests and modules (a node id or its prefix), longest first (`--durations` of an `-n 2` run):
#: under xdist their work units start first, so that no worker is left with a long one while the other has
#: finished. A test left out only starts later; list a new one that takes more than about 10 s.
LONG = (
    "tests/eval/test_acceptance.py::test_retrieval_beats_uniform_on_one_world",  # builds and plays the gate world
    "tests/workspace/test_s3_workspace.py",
    "tests/recipe/test_build_recipe.py",
    "tests/recipe/test_forecastbench_stage.py",
    "tests/corpus_build/test_embed.py",
    "tests/adapters/test_verifiers.py",
    "tests/system/crash/test_crash.py",
    "tests/retrieval/test_searcher_threads.py",
    "tests/adapters/test_trl.py::test_grpo_trainer_trains_on_the_environments_rewards",
    "tests/system/faults/test_disk_full.py",
    "tests/corpus_build/test_pipeline.py",
    "tests/corpus_build/test_merge.py",
    "tests/corpus_build/test_index.py",
    "tests/eval/audit/test_audit_siblings.py",
    "tests/repo/test_wheel.py",
    "tests/synth/test_synth.py::test_tiny_preset_counts",
    "tests/envs/test_world.py",
    "tests/eval/runs/test_runner.py",
    "tests/adapters/test_mcp.py",
    "tests/cli/test_cli.py::test_index_prepare_builds_the_configured_backend",
)


def _unit_keys(item: pytest.Item) -> list[str]:
    """What ties `item` to other tests on one worker: an `xdist_group` mark; the Ray group; a session fixture that
    a folder's conftest.py builds per worker (unlike this file's, shared by all workers); its module, when it
    uses a module- or class-scoped fixture (one worker builds it once)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return [str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))]
    if item.get_closest_marker("ray"):
        return [RAY_GROUP]
    info = getattr(item, "_fixtureinfo", None)
    defs = [d[-1] for d in info.name2fixturedefs.values() if d] if info is not None else []
    keys = [f"{where}.{d.argname}" for d in defs
            if d.scope == "session" and (where := getattr(d.func, "__module__", "")).endswith(".conftest")
            and where != __name__]
    if any(d.scope in ("module", "class", "package") for d in defs):
        keys.append(item.nodeid.split("::")[0])
    return keys


def _work_units(items: list[pytest.Item]) -> dict[str, str]:
    """{node id: unit} for the tests that share a key of _unit_keys with others (directly or through a chain);
    a test missing here is a unit of its own."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    keys = {item.nodeid: _unit_keys(item) for item in items}
    for ks in keys.values():
        for k in ks[1:]:
            a, b = sorted((root(ks[0]), root(k)))
            parent[b] = a
    return {nodeid: root(ks[0]) for nodeid, ks in keys.items() if ks}


def _first_driver(item: pytest.Item) -> bool:
    """Whether `item` connects to a Ray cluster of its own (tests/system/cluster): it must come before any local
    Ray in this process. After a local `ray.init()` and `ray.shutdown()`, a driver that connects to another
    cluster gets its build's named limiter actor cancelled before it starts (ActorDiedError; seen with Ray 2.60
    here, reproduced with test_runner's Ray test followed by the cluster test)."""
    return "make_cluster" in item.fixturenames


def _rank(item: pytest.Item) -> int:
    """Where `item`'s unit starts: FIRST, then the Ray group (its cluster tests first), then LONG's order, then
    the other slow tests."""
    if item.nodeid == FIRST:
        return -2
    if item.get_closest_marker("ray"):
        return -1 if _first_driver(item) else 0
    for i, prefix in enumerate(LONG, start=1):
        if item.nodeid.startswith(prefix):
            return i
    return len(LONG) + (1 if item.get_closest_marker("slow") else 2)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the work units (tests/support/work_units.py), the long ones first. Without xdist the
    tests stay in the order collected, but for the Ray cluster tests, first (_first_driver)."""
    if not hasattr(config, "workerinput"):
        items.sort(key=lambda item: not _first_driver(item))
        return
    from tests.support.work_units import write_units

    units = _work_units(items)
    # a unit starts where its first test stands: every test of a unit takes the unit's best rank
    unit_rank: dict[str, int] = {}
    for item in items:
        key = units.get(item.nodeid, item.nodeid)
        unit_rank[key] = min(unit_rank.get(key, _rank(item)), _rank(item))
    items.sort(key=lambda item: (unit_rank[units.get(item.nodeid, item.nodeid)], _rank(item)))
    write_units(config, units)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> UnitScheduling | None:
    """`--dist loadgroup` (pyproject's addopts): the work units the workers wrote; another --dist: xdist's own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.support.work_units import UnitScheduling

    return UnitScheduling(config, log)


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
