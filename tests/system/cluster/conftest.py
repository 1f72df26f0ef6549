"""Fixtures for the multi-node tests: a real Ray cluster of bwrap-confined worker nodes on this host."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.s3server import s3_bucket, s3_server  # noqa: F401  (the moto S3 server, tests/support/s3server.py)
from tests.system.cluster._cluster import DRIVER_ENV, LocalRayCluster, bwrap_works


@pytest.fixture()
def make_cluster() -> Iterator[Callable[..., LocalRayCluster]]:
    """A factory of started clusters (`make_cluster(workers=2, worker_env={1: {...}})`; `background=True`:
    starting, `cluster.ready()` waits), each stopped after the test; the test fails if any of its
    processes outlive `stop()`."""
    pytest.importorskip("ray")
    if not bwrap_works():
        pytest.skip("bubblewrap (bwrap) cannot make a mount namespace here: the nodes' private disks need it")
    saved = {k: os.environ.get(k) for k in DRIVER_ENV}
    os.environ.update(DRIVER_ENV)
    clusters: list[LocalRayCluster] = []
    roots: list[Path] = []

    def make(background: bool = False, **kwargs: object) -> LocalRayCluster:
        # short: a node's sockets live under its temp dir, and AF_UNIX paths stop at 107 bytes
        root = Path(tempfile.mkdtemp(prefix="rayc-", dir="/tmp"))
        roots.append(root)
        cluster = LocalRayCluster(root, **kwargs)  # type: ignore[arg-type]
        clusters.append(cluster)
        return cluster.start_in_background() if background else cluster.start()

    try:
        yield make
    finally:
        left = []
        for cluster in clusters:
            cluster.stop()
            left += [p.pid for p in cluster.leftovers()]
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
        assert not left, f"Ray processes outlived the cluster: {left}"
