"""A real S3-compatible server for tests: moto's server mode on a free localhost port (as s3fs's own
suite runs it), started by the fixture and stopped after; endpoint and credentials reach every client
(and every Ray worker started from the test process) through the environment."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

#: what the fixtures set while the server runs (moto accepts any credentials)
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
          "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1:<free port> for one test module; yields its endpoint URL and sets
    AWS_ENDPOINT_URL, test credentials and FORECAST_ENV_SCRATCH (a fresh folder) meanwhile, so no
    other module's test ever sees them."""
    server_mod = pytest.importorskip("moto.server", reason="moto[server] (the dev extra) runs the S3 server")
    pytest.importorskip("s3fs", reason="the s3 extra (s3fs) reads and writes s3:// workspaces")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as mp:
        for k, v in S3_ENV.items():
            mp.setenv(k, v)
        mp.setenv("AWS_ENDPOINT_URL", endpoint)
        mp.setenv("FORECAST_ENV_SCRATCH", str(tmp_path_factory.mktemp("s3_scratch")))
        try:
            yield endpoint
        finally:
            server.stop()


@pytest.fixture()
def s3_bucket(s3_server: str) -> Iterator[str]:
    """A fresh, empty bucket on the session's server; yields `s3://<bucket>`."""
    import boto3

    name = f"ws-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_server)
    client.create_bucket(Bucket=name)
    yield f"s3://{name}"


def scratch_root() -> Path:
    """The module's scratch folder (FORECAST_ENV_SCRATCH, set by `s3_server`)."""
    return Path(os.environ["FORECAST_ENV_SCRATCH"])
