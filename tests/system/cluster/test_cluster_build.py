"""The whole build on a real multi-node Ray cluster (tests/system/cluster/_cluster.py), nodes killed mid-build.

The chain: `corpus build --cc-news` on the served sample world (the worker nodes stream the WARC files
over HTTP), the merge, `index build` and `events build`, with the workspace on storage that the nodes
do not share with the driver's disk. The result is compared with a one-process local build of the same
sources: the store, the index and the snapshot ids are equal byte for byte.

A node is killed at an exact moment: its workers carry `FORECAST_ENV_CRASH_AT=<label>:1` with
`FORECAST_ENV_CRASH_SIGNAL=STOP`, so the first task of that node to cross the crash point freezes
itself there (mid-part, mid-merge-task or mid-month) and records the crossing in its scratch; the test
sees the record and kills the node's raylet by PID and every process of the node. The frozen task is
then certainly in flight on the dead node, and the build must finish it elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.stream_data import store_digest
from tests.system.cluster._cluster import LocalRayCluster, Node

pytestmark = [pytest.mark.ray, pytest.mark.slow]

MONTHS = "2025-03..2026-05"
STATIC = ["--set", "embed.backend=static"]


def _served_sets(url: str) -> list[str]:
    return ["--set", f"corpus.source.base_url={url}", "--set", "corpus.source.requests_per_second=1000",
            "--set", "corpus.source.backoff_base_s=0.001", "--set", "corpus.source.backoff_max_s=0.01"]


def index_digest(ws: Path) -> dict[str, str]:
    """sha256 of every index file except its manifest (which records times and the engine)."""
    return {str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((ws / "index").rglob("*")) if p.is_file() and p.name != "manifest.json"}


def events_digest(ws: Path) -> dict[str, str]:
    """sha256 of every events table."""
    return {str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((ws / "events").rglob("*.parquet"))}


def snapshot_ids(ws: Path) -> tuple[str, str]:
    """The corpus's and the index's snapshot ids."""
    corpus = json.loads((ws / "corpus" / "manifest.json").read_text())["snapshot_id"]
    index = json.loads((ws / "index" / "manifest.json").read_text())["snapshot_id"]
    return corpus, index


def build_chain(ws: Path | str, url: str, polymarket: Path, engine: list[str]) -> None:
    """corpus build (streamed from the served world), index build, events build, through the CLI."""
    from forecast_env.cli.main import main

    assert main(["corpus", "build", "--cc-news", MONTHS, "--workspace", str(ws), "--no-progress",
                 *engine, *_served_sets(url)]) == 0
    assert main(["index", "build", "--workspace", str(ws), "--no-progress", *engine, *STATIC]) == 0
    assert main(["events", "build", "--polymarket", str(polymarket), "--workspace", str(ws),
                 "--no-progress"]) == 0


def freeze_env(label: str) -> dict[str, str]:
    """A node's environment that stops (SIGSTOP) its first task to cross `label`, recording the crossing
    in the node's scratch."""
    return {"FORECAST_ENV_CRASH_AT": f"{label}:1", "FORECAST_ENV_CRASH_SIGNAL": "STOP",
            "FORECAST_ENV_CRASH_COUNT": "{scratch}/crossings.txt"}


class NodeKiller(threading.Thread):
    """Kill `node` as soon as one of its tasks has crossed (and frozen at) `label`."""

    def __init__(self, cluster: LocalRayCluster, node: Node, label: str, timeout_s: float = 240.0) -> None:
        super().__init__(daemon=True, name=f"kill-{node.name}")
        self.cluster, self.node, self.label, self.timeout_s = cluster, node, label, timeout_s
        self.killed_pid: int | None = None
        self.frozen_pid: int | None = None

    def crossed(self) -> int | None:
        path = self.node.scratch / "crossings.txt"
        if not path.exists():
            return None
        for line in path.read_text().splitlines():
            pid, _, label = line.partition(" ")
            if label == self.label:
                return int(pid)
        return None

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            pid = self.crossed()
            if pid is not None:
                self.frozen_pid = pid
                self.killed_pid = self.cluster.kill(self.node)
                return
            time.sleep(0.05)  # polling the node's crossing record, written by its frozen task


def local_reference(tmp_path_factory: pytest.TempPathFactory, url: str, polymarket: Path) -> Path:
    """The one-process local build of the same chain."""
    ws = tmp_path_factory.mktemp("local_ws")
    build_chain(ws, url, polymarket, ["--workers", "1"])
    return ws


def assert_same_build(ws: Path, ref: Path) -> None:
    """Store, index, events and snapshot ids equal; no part lost or duplicated; no temporaries left."""
    assert store_digest(ws) == store_digest(ref)
    assert index_digest(ws) == index_digest(ref)
    assert events_digest(ws) == events_digest(ref)
    assert snapshot_ids(ws) == snapshot_ids(ref)
    done = sorted(p.name for p in (ws / "corpus" / "parts").glob("*.json"))
    assert done == sorted(p.name for p in (ref / "corpus" / "parts").glob("*.json"))
    assert not list((ws / "corpus").rglob(".*.tmp"))


def pulled(url: str, dest: Path) -> Path:
    """The published workspace at `url`, pulled into `dest` with its parts (`forecast-env workspace pull`)."""
    from forecast_env.cli.main import main

    assert main(["workspace", "pull", url, str(dest), "--with-parts"]) == 0
    return dest


def test_chain_on_three_nodes_over_s3_with_a_worker_node_killed_mid_part(make_cluster, s3_bucket, served_world,
                                                                         micro_world, tmp_path, tmp_path_factory):
    """The chain on a head and two worker nodes with the workspace on the S3 server: the nodes share no
    disk with the driver or each other (each writes its parts and index months in its own scratch and
    publishes them); worker 1 is killed while it writes a part, its file is redone on worker 2, the
    months run on worker 2, and the store, index,
    events and snapshot ids equal the local one-process build byte for byte.

    First the shared-storage guard on the same cluster: nodes on one host share an address, so it keys
    them by node id and names both worker nodes that do not see the driver's folder (keyed by address
    they collapsed into the head's entry and the check passed); object storage needs no check."""
    from forecast_env.corpus_build.pipeline import check_shared_storage
    from forecast_env.errors import CorpusError
    from forecast_env.retrieval.model_cache import cache_root

    t0 = time.perf_counter()
    # the nodes see none of the driver's test folders (the reference build, the driver's scratch) and
    # only the machine's model cache (as a node image holds it); they start while the reference builds
    cluster = make_cluster(workers=2, hidden=(tmp_path_factory.getbasetemp(),), shared=(cache_root(),),
                           worker_env={1: freeze_env("part.chunk")}, background=True)
    ref = local_reference(tmp_path_factory, served_world.url, micro_world / "polymarket")
    t_ref = time.perf_counter()
    cluster.ready()
    t_up = time.perf_counter()
    assert _driver_on_head()
    with pytest.raises(CorpusError, match=r"2 of 3 Ray nodes cannot see") as err:
        check_shared_storage(ref / "corpus" / "parts")
    assert "s3://" in str(err.value) and "object storage" in str(err.value)
    check_shared_storage(f"{s3_bucket}/ws/corpus/parts")

    killer = NodeKiller(cluster, cluster.workers[0], "part.chunk")
    killer.start()
    url = f"{s3_bucket}/ws"
    build_chain(url, served_world.url, micro_world / "polymarket", ["--engine", "ray", "--ray-address",
                                                                   cluster.address])
    t_built = time.perf_counter()
    print(f"timings: reference {t_ref - t0:.1f} s, cluster up {t_up - t_ref:.1f} s, "
          f"cluster chain {t_built - t_up:.1f} s")
    killer.join(timeout=1)
    assert killer.killed_pid is not None, "worker 1 never crossed part.chunk: no node was killed"
    assert len(cluster.alive_nodes()) == 2
    assert_same_build(pulled(url, tmp_path / "pulled"), ref)
    survivor = cluster.workers[1].scratch
    assert list(survivor.rglob("*.articles.parquet")), "worker 2 wrote no part in its own scratch"
    # the merge's tasks ran on the surviving worker: its month shards and dropped tables, in its scratch
    shards = sorted(p.name for p in (tmp_path / "pulled" / "corpus" / "articles").glob("*.parquet"))
    assert shards and sorted(p.name for p in survivor.rglob("corpus/articles/*.parquet")) == shards
    assert list(survivor.rglob("corpus/dropped/*.parquet"))
    # the index months ran on the surviving worker node too (each fetched its shard, published its month)
    months = sorted(p.name for p in (tmp_path / "pulled" / "index" / "dense").glob("*.faiss")
                    if not p.name.endswith(".ivf.faiss"))
    on_node = sorted(p.name for p in survivor.rglob("index/dense/*.faiss"))
    assert months and on_node == months, (on_node, months)


def _driver_on_head() -> bool:
    """Whether this driver is attached to the head node (several raylets share this host's address)."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    return any(n["NodeID"] == here and "node:__internal_head__" in n.get("Resources", {}) for n in ray.nodes())


@pytest.mark.benchmark
@pytest.mark.parametrize("label", ["part.chunk", "merge.task", "index.month"])
def test_a_worker_node_killed_in_each_stage(make_cluster, served_world, micro_world, tmp_path, tmp_path_factory,
                                            label):
    """Worker 1 killed while it holds a per-WARC part (`part.chunk`), a merge keys/pair/store task
    (`merge.task`) or an index month (`index.month`): the build finishes on worker 2, same bytes."""
    from forecast_env.retrieval.model_cache import cache_root

    shared = tmp_path / "shared"
    shared.mkdir()
    cluster = make_cluster(workers=2, hidden=(tmp_path_factory.getbasetemp(),), shared=(shared, cache_root()),
                           worker_env={1: freeze_env(label)}, background=True)
    ref = local_reference(tmp_path_factory, served_world.url, micro_world / "polymarket")
    cluster.ready()
    assert _driver_on_head()
    killer = NodeKiller(cluster, cluster.workers[0], label)
    killer.start()
    ws = shared / "ws"
    build_chain(ws, served_world.url, micro_world / "polymarket", ["--engine", "ray", "--ray-address",
                                                                  cluster.address])
    killer.join(timeout=1)
    assert killer.killed_pid is not None, f"worker 1 never crossed {label}: no node was killed"
    assert_same_build(ws, ref)


@pytest.mark.benchmark
def test_driver_killed_mid_merge_then_a_rerun_resumes(make_cluster, served_world, micro_world, tmp_path,
                                                      tmp_path_factory):
    """The driver (a `forecast-env corpus build` process) is SIGKILLed in the merge's store loop; its
    Ray tasks die with it (their owner is gone), the nodes stay up; a rerun keeps the finished parts
    (no file is streamed again) and ends with the same bytes as the local build."""
    import os
    import subprocess

    from forecast_env.retrieval.model_cache import cache_root

    shared = tmp_path / "shared"
    shared.mkdir()
    cluster = make_cluster(workers=2, hidden=(tmp_path_factory.getbasetemp(),), shared=(shared, cache_root()),
                           background=True)
    ref = local_reference(tmp_path_factory, served_world.url, micro_world / "polymarket")
    cluster.ready()
    ws = shared / "ws"
    args = ["corpus", "build", "--cc-news", MONTHS, "--workspace", str(ws), "--no-progress", "--engine", "ray",
            "--ray-address", cluster.address, *_served_sets(served_world.url)]
    env = dict(os.environ, FORECAST_ENV_CRASH_AT="merge.store:1")
    proc = subprocess.run([sys.executable, "-m", "forecast_env.cli.main", *args], env=env, capture_output=True,
                          timeout=600)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    parts = sorted(p.name for p in (ws / "corpus" / "parts").glob("*.json"))
    assert len(parts) == 4 and not (ws / "corpus" / "manifest.json").exists()
    served_before = len(served_world.log)
    build_chain(ws, served_world.url, micro_world / "polymarket", ["--engine", "ray", "--ray-address",
                                                                  cluster.address])
    streamed = [entry for entry in served_world.log[served_before:] if ".warc" in str(entry)]
    assert not streamed, f"the rerun streamed finished files again: {streamed[:3]}"
    assert len(cluster.alive_nodes()) == 3
    assert_same_build(ws, ref)


@pytest.mark.benchmark
@pytest.mark.parametrize("label", ["merge.task", "index.month"])
def test_a_worker_node_killed_mid_merge_or_month_over_s3(make_cluster, s3_bucket, served_world, micro_world,
                                                        tmp_path, tmp_path_factory, label):
    """The workspace on the S3 server, worker 1 killed while it runs a merge task (keys, pairs or a store
    shard: `merge.task`) or builds an index month (`index.month`) in its own scratch (nothing of that
    task published yet): the task is redone on worker 2, which publishes it, and the build equals the
    local one byte for byte."""
    from forecast_env.retrieval.model_cache import cache_root

    cluster = make_cluster(workers=2, hidden=(tmp_path_factory.getbasetemp(),), shared=(cache_root(),),
                           worker_env={1: freeze_env(label)}, background=True)
    ref = local_reference(tmp_path_factory, served_world.url, micro_world / "polymarket")
    cluster.ready()
    assert _driver_on_head()
    killer = NodeKiller(cluster, cluster.workers[0], label)
    killer.start()
    url = f"{s3_bucket}/ws"
    build_chain(url, served_world.url, micro_world / "polymarket", ["--engine", "ray", "--ray-address",
                                                                   cluster.address])
    killer.join(timeout=1)
    assert killer.killed_pid is not None, f"worker 1 never crossed {label}: no node was killed"
    assert_same_build(pulled(url, tmp_path / "pulled"), ref)
    survivor = cluster.workers[1].scratch
    assert list(survivor.rglob("index/dense/*.faiss")), "worker 2 built no month"
    assert list(survivor.rglob("corpus/articles/*.parquet")), "worker 2 wrote no month shard"


@pytest.mark.benchmark
def test_driver_killed_mid_merge_over_s3_then_a_rerun_resumes(make_cluster, s3_bucket, served_world, micro_world,
                                                              tmp_path, tmp_path_factory):
    """The workspace on the S3 server; the driver (a `forecast-env corpus build` process) is SIGKILLed in
    the merge's store loop while the nodes publish month shards: the bucket keeps every part, shows no
    finished corpus (its marker is down, so `workspace pull` refuses a half-new store), and a rerun from a
    fresh driver folder streams no file again and ends with the local build's bytes."""
    import os
    import subprocess

    from forecast_env.cli.main import main
    from forecast_env.retrieval.model_cache import cache_root
    from forecast_env.workspace.remote import RemoteWorkspace, pull_workspace

    cluster = make_cluster(workers=2, hidden=(tmp_path_factory.getbasetemp(),), shared=(cache_root(),),
                           background=True)
    ref = local_reference(tmp_path_factory, served_world.url, micro_world / "polymarket")
    cluster.ready()
    url = f"{s3_bucket}/ws"
    args = ["corpus", "build", "--cc-news", MONTHS, "--workspace", url, "--no-progress", "--engine", "ray",
            "--ray-address", cluster.address, *_served_sets(served_world.url)]
    env = dict(os.environ, FORECAST_ENV_CRASH_AT="merge.store:2", FORECAST_ENV_SCRATCH=str(tmp_path / "driver-1"))
    proc = subprocess.run([sys.executable, "-m", "forecast_env.cli.main", *args], env=env, capture_output=True,
                          timeout=600)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    units = RemoteWorkspace.at(url).published(refresh=True)
    assert len([u for u in units if u.startswith("corpus/parts/")]) == 4 and "corpus" not in units
    assert any(u.startswith(("corpus/articles/", "corpus/dropped/")) for u in units)  # nodes had published some
    with pytest.raises(Exception, match="interrupted or is running"):
        pull_workspace(url, tmp_path / "mid", prefixes=("corpus/",))
    served_before = len(served_world.log)
    saved = os.environ.get("FORECAST_ENV_SCRATCH")
    os.environ["FORECAST_ENV_SCRATCH"] = str(tmp_path / "driver-2")  # another machine: nothing local
    try:
        build_chain(url, served_world.url, micro_world / "polymarket", ["--engine", "ray", "--ray-address",
                                                                       cluster.address])
    finally:
        if saved is None:
            os.environ.pop("FORECAST_ENV_SCRATCH", None)
        else:
            os.environ["FORECAST_ENV_SCRATCH"] = saved
    streamed = [entry for entry in served_world.log[served_before:] if ".warc" in str(entry)]
    assert not streamed, f"the rerun streamed finished files again: {streamed[:3]}"
    assert main(["workspace", "ls", url]) == 0
    assert_same_build(pulled(url, tmp_path / "pulled"), ref)
