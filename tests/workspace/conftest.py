"""Fixtures of the object-storage tests: the moto S3 server (tests/support/s3server.py)."""

from tests.support.s3server import s3_bucket, s3_server  # noqa: F401  (pytest fixtures)
