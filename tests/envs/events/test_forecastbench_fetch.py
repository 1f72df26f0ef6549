"""`fetch_forecastbench` and `events fetch-forecastbench` against a local HTTP server that serves a GitHub-like
contents listing and raw files built from the real fixture (tests/fixtures/forecastbench/datasets)."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from forecast_env.cli.main import main
from forecast_env.envs.events.forecastbench import read_rounds
from forecast_env.envs.events.forecastbench_fetch import (
    GitHubRateLimitError,
    fetch_forecastbench,
    git_blob_sha,
)
from forecast_env.errors import FetchError
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "forecastbench"
FOLDERS = ("datasets/question_sets", "datasets/resolution_sets")
LFS_POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
               b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")
TOKEN = "ghp_SECRET_test_token_0123456789"


def round_files(root: Path) -> dict[str, bytes]:
    """The round files under `root` (what the reader reads), by repository path."""
    out = {}
    for folder in FOLDERS:
        for p in sorted((root / folder).glob("*")):
            if p.name.endswith(("-llm.json", "_resolution_set.json")) and not p.name.startswith("latest"):
                out[f"{folder}/{p.name}"] = p.read_bytes()
    return out


class FakeGitHub:
    """The contents API (`/api/contents/<folder>?ref=main`) and raw files (`/raw/<path>`) of a tree.

    `script[path]` holds actions for the next requests of a repository path or a listing folder (then normal
    service): "503", "429" (Retry-After: 0), "429:<s>", "403rate", "403", "404", "drop" (connection closed), "lfs",
    "extra" (body + 5 bytes), "short" (body minus 5), "flip" (one byte changed). `listing_override[path]` replaces
    fields of a listing entry.
    """

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.lock = threading.Lock()
        self.log: list[tuple[str, dict[str, str], dict[str, str]]] = []  # (path, query, headers)
        self.script: dict[str, list[str]] = {}
        self.listing_override: dict[str, dict[str, Any]] = {}
        self.url = ""

    def action(self, key: str) -> str:
        with self.lock:
            queue = self.script.get(key)
            return queue.pop(0) if queue else "ok"

    def requests(self, prefix: str) -> list[tuple[str, dict[str, str], dict[str, str]]]:
        with self.lock:
            return [r for r in self.log if r[0].startswith(prefix)]

    def listing(self, folder: str) -> list[dict[str, Any]]:
        entries = []
        for p in sorted((self.tree / folder).iterdir()):
            data = p.read_bytes()
            path = f"{folder}/{p.name}"
            entry = {"name": p.name, "path": path, "size": len(data), "sha": git_blob_sha(data),
                     "type": "file", "download_url": f"{self.url}/raw/{path}",
                     "url": f"{self.url}/api/contents/{path}?ref=main"}
            entry.update(self.listing_override.get(path, {}))
            entries.append(entry)
        entries.append({"name": "archive", "path": f"{folder}/archive", "type": "dir", "size": 0,
                        "sha": "0" * 40, "download_url": None})
        return entries


class Handler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        fake: FakeGitHub = self.server.fake
        parsed = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        with fake.lock:
            fake.log.append((parsed.path, query, {k.lower(): v for k, v in self.headers.items()}))
        if parsed.path.startswith("/api/contents/"):
            key = parsed.path.removeprefix("/api/contents/")
            if query.get("ref") != "main" or not (fake.tree / key).is_dir():
                return self._send(404, b'{"message": "Not Found"}')
            body = json.dumps(fake.listing(key)).encode()
        elif parsed.path.startswith("/raw/"):
            key = parsed.path.removeprefix("/raw/")
            if not (fake.tree / key).is_file():
                return self._send(404, b"404: Not Found")
            body = (fake.tree / key).read_bytes()
        else:
            return self._send(404, b"no such route")
        act = fake.action(key)
        try:
            if act.startswith("429"):
                self._send(429, b"429: Too Many Requests", {"Retry-After": act.partition(":")[2] or "0"})
            elif act == "503":
                self._send(503, b"Service Unavailable")
            elif act == "404":
                self._send(404, b"404: Not Found")
            elif act == "403":
                self._send(403, b'{"message": "Resource not accessible"}')
            elif act == "403rate":
                reset = str(int(time.time()) + 1800)
                self._send(403, b'{"message": "API rate limit exceeded for 127.0.0.1. (But here\'s the good news: '
                           b'Authenticated requests get a higher rate limit.)"}',
                           {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset})
            elif act == "drop":
                self.close_connection = True  # no response at all: a connection error for the client
            elif act == "lfs":
                self._send(200, LFS_POINTER)
            elif act == "extra":
                self._send(200, body + b"extra")
            elif act == "short":
                self._send(200, body[:-5])
            elif act == "flip":
                self._send(200, body[:-2] + bytes([body[-2] ^ 1]) + body[-1:])
            else:
                self._send(200, body)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The served repository: a copy of the fixture, plus a human set the fetcher must skip."""
    root = tmp_path / "remote"
    shutil.copytree(FIXTURE / "datasets", root / "datasets")
    (root / "datasets/question_sets/2026-03-01-human.json").write_text('{"questions": []}\n')
    (root / "datasets/resolution_sets/README.md").write_text("resolution sets\n")
    return root


@pytest.fixture
def fake(tree: Path):
    fake = FakeGitHub(tree)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.fake = fake  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)


def cfg(fake: FakeGitHub, **over: Any) -> dict[str, Any]:
    return {"repo_api_url": f"{fake.url}/api", "raw_url": f"{fake.url}/raw", "max_retries": 3,
            "backoff_seconds": 0.0, "requests_per_second": 0.0, "timeout_seconds": 5.0, **over}


def fetch(fake: FakeGitHub, out: Path, rounds: str | None = None, sleeps: list[float] | None = None,
          **over: Any) -> dict[str, Any]:
    record = sleeps if sleeps is not None else []
    return fetch_forecastbench(out, rounds, config=cfg(fake, **over), progress=False, sleep=record.append)


def cli_args(fake: FakeGitHub, out: Path, *extra: str) -> list[str]:
    sets = [x for k, v in cfg(fake).items() for x in ("--set", f"forecastbench.{k}={v}")]
    return ["events", "fetch-forecastbench", "--out", str(out), "--no-progress", *sets, *extra]


def no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]


EXPECTED = round_files(FIXTURE)  # the 9 round files of the fixture


# --------------------------------------------------------------------------------------------


def test_git_blob_sha_is_gits() -> None:
    assert git_blob_sha(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # `git hash-object /dev/null`
    assert git_blob_sha(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert git_blob_sha(b"x") == hashlib.sha1(b"blob 1\0x").hexdigest()


def test_fetch_mirrors_the_fixture_and_reads_the_same_rounds(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "out"
    s = fetch(fake, out)
    assert len(EXPECTED) == 9
    assert (s["files"], s["fetched"], s["up_to_date"], s["failed"], s["updated"]) == (9, 9, 0, 0, 0)
    assert round_files(out) == EXPECTED  # byte-identical
    assert s["bytes"] == sum(len(b) for b in EXPECTED.values())
    assert sorted(s["fetched_files"]) == sorted(EXPECTED)
    assert s["requests"] == 2 + 9  # two listings, one GET per file
    # the pointer file, the human set, the README and the sub-folder are not fetched
    on_disk = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert on_disk == sorted(EXPECTED)
    assert fake.requests("/api/contents/datasets/question_sets")[0][1] == {"ref": "main"}
    assert read_rounds(out) == read_rounds(FIXTURE)
    assert [r.due_date for r in read_rounds(out)] == ["2025-08-31", "2026-03-01", "2026-03-15", "2026-07-19",
                                                        "2026-08-02"]


def test_rerun_fetches_nothing(fake: FakeGitHub, tmp_path: Path) -> None:
    out = tmp_path / "out"
    fetch(fake, out)
    before = len(fake.requests("/raw/"))
    s = fetch(fake, out)
    assert (s["fetched"], s["up_to_date"], s["failed"], s["bytes"]) == (0, 9, 0, 0)
    assert len(fake.requests("/raw/")) == before  # no file downloaded again
    assert s["requests"] == 2  # the listings only


def test_changed_resolution_set_is_refetched(fake: FakeGitHub, tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    fetch(fake, out)
    changed = "datasets/resolution_sets/2026-03-15_resolution_set.json"
    doc = json.loads((tree / changed).read_text())
    doc["resolutions"][0]["resolved"] = not doc["resolutions"][0]["resolved"]
    (tree / changed).write_text(json.dumps(doc, indent=2))  # a new sha (and size) on the server
    tampered = "datasets/question_sets/2026-03-01-llm.json"
    data = bytearray((out / tampered).read_bytes())
    data[-2] ^= 1  # same size, other content: only the sha tells
    (out / tampered).write_bytes(bytes(data))
    s = fetch(fake, out)
    assert sorted(s["fetched_files"]) == sorted([changed, tampered])
    assert (s["fetched"], s["updated"], s["up_to_date"]) == (2, 2, 7)
    assert (out / changed).read_bytes() == (tree / changed).read_bytes()
    assert (out / tampered).read_bytes() == EXPECTED[tampered]


def test_503_once_then_200_is_retried(fake: FakeGitHub, tmp_path: Path) -> None:
    path = "datasets/question_sets/2026-07-19-llm.json"
    fake.script[path] = ["503"]
    fake.script["datasets/resolution_sets"] = ["503", "drop"]  # the listing too, and a dropped connection
    sleeps: list[float] = []
    s = fetch(fake, tmp_path / "out", sleeps=sleeps, backoff_seconds=0.5)
    assert (s["fetched"], s["failed"]) == (9, 0)
    assert len(fake.requests(f"/raw/{path}")) == 2
    assert len(fake.requests("/api/contents/datasets/resolution_sets")) == 3
    assert len(sleeps) == 3 and all(x >= 0.5 for x in sleeps)  # backoff between attempts
    assert (tmp_path / "out" / path).read_bytes() == EXPECTED[path]


def test_429_honours_retry_after(fake: FakeGitHub, tmp_path: Path) -> None:
    first = "datasets/question_sets/2026-03-01-llm.json"
    second = "datasets/resolution_sets/2026-03-01_resolution_set.json"
    fake.script[first] = ["429"]  # Retry-After: 0
    fake.script[second] = ["429:7"]
    sleeps: list[float] = []
    s = fetch(fake, tmp_path / "out", sleeps=sleeps)
    assert (s["fetched"], s["failed"]) == (9, 0)
    assert len(fake.requests(f"/raw/{first}")) == 2 and len(fake.requests(f"/raw/{second}")) == 2
    assert sorted(sleeps) == [0.0, 7.0]  # backoff_seconds 0: the wait is Retry-After's


def test_retries_exhausted_is_a_failed_file(fake: FakeGitHub, tmp_path: Path) -> None:
    path = "datasets/resolution_sets/2026-08-02_resolution_set.json"
    fake.script[path] = ["503"] * 4
    s = fetch(fake, tmp_path / "out", max_retries=3)
    assert s["failed"] == 1 and s["failures"][0]["file"] == path
    assert "failed after 4 attempt(s), last: HTTP 503" in s["failures"][0]["error"]
    assert not (tmp_path / "out" / path).exists() and s["fetched"] == 8


@pytest.mark.parametrize(
    "action, reason",
    [("lfs", "Git LFS pointer"), ("extra", "size mismatch: got more than"), ("short", "size mismatch: got"),
     ("flip", "sha mismatch")],
)
def test_bad_body_is_reported_not_written_and_retried_next_run(
    fake: FakeGitHub, tmp_path: Path, action: str, reason: str
) -> None:
    path = "datasets/resolution_sets/2026-07-19_resolution_set.json"
    if action == "lfs":  # the listing describes the pointer, as GitHub's does for an LFS file
        fake.listing_override[path] = {"size": len(LFS_POINTER), "sha": git_blob_sha(LFS_POINTER)}
    fake.script[path] = [action]
    out = tmp_path / "out"
    s = fetch(fake, out)
    assert (s["fetched"], s["failed"]) == (8, 1)
    assert s["failures"][0]["file"] == path and reason in s["failures"][0]["error"]
    assert len(fake.requests(f"/raw/{path}")) == 1  # not retried within the run
    assert not (out / path).exists() and no_temp_files(out)
    assert any("2026-07-19_resolution_set.json: file missing" in e for e in read_rounds(out)[3].errors)
    fake.listing_override.clear()
    s = fetch(fake, out)  # the next run retries it
    assert (s["fetched_files"], s["up_to_date"], s["failed"]) == ([path], 8, 0)
    assert round_files(out) == EXPECTED


def test_bad_body_keeps_an_older_copy(fake: FakeGitHub, tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    fetch(fake, out)
    path = "datasets/resolution_sets/2026-03-01_resolution_set.json"
    (tree / path).write_bytes((tree / path).read_bytes() + b"\n")
    fake.script[path] = ["short"]
    s = fetch(fake, out)
    assert s["failed"] == 1 and (out / path).read_bytes() == EXPECTED[path]


def test_403_rate_limit_is_a_clear_error(fake: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fake.script["datasets/question_sets"] = ["403rate"]
    with pytest.raises(GitHubRateLimitError) as exc:
        fetch(fake, tmp_path / "out")
    msg = str(exc.value)
    assert "rate limit exceeded" in msg and "60 unauthenticated API requests an hour" in msg
    assert "GITHUB_TOKEN" in msg and "resets at" in msg
    assert len(fake.requests("/api/")) == 1  # not retried
    assert not (tmp_path / "out").exists()
    fake.script["datasets/question_sets"] = ["403rate"]
    assert main(cli_args(fake, tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: GET ") and "Set the environment variable GITHUB_TOKEN" in err
    assert "Traceback" not in err


def test_other_403_and_404_listing_are_not_retried(fake: FakeGitHub, tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="HTTP 404.*check events.forecastbench.repo_api_url and ref"):
        fetch(fake, tmp_path / "out", ref="no-such-branch")
    assert len(fake.requests("/api/")) == 1
    fake.script["datasets/question_sets"] = ["403"]
    with pytest.raises(FetchError, match="HTTP 403 .*Resource not accessible.*not retried") as exc:
        fetch(fake, tmp_path / "out")
    assert not isinstance(exc.value, GitHubRateLimitError)
    assert len(fake.requests("/api/")) == 2


@pytest.mark.parametrize(
    "rounds, expected",
    [
        ("2026-07-19..2026-08-02", ["2026-07-19", "2026-08-02"]),
        ("2026-03-15", ["2026-03-15"]),
        ("..2025-12-31", ["2025-08-31"]),
        ("2026-03-02..", ["2026-03-15", "2026-07-19", "2026-08-02"]),
    ],
)
def test_rounds_limit_the_files(fake: FakeGitHub, tmp_path: Path, rounds: str, expected: list[str]) -> None:
    out = tmp_path / "out"
    s = fetch(fake, out, rounds)
    want = sorted(p for p in EXPECTED if any(d in p for d in expected))
    assert sorted(s["fetched_files"]) == want and s["files"] == len(want)
    assert sorted(round_files(out)) == want
    assert len(fake.requests("/raw/")) == len(want)
    assert [r.due_date for r in read_rounds(out)] == expected


def test_bad_rounds_fail_before_any_request(fake: FakeGitHub, tmp_path: Path) -> None:
    from forecast_env.errors import EventsError

    with pytest.raises(EventsError, match="expected A..B"):
        fetch(fake, tmp_path / "out", "March")
    assert fake.requests("/") == []


def test_missing_download_url_uses_raw_url(fake: FakeGitHub, tmp_path: Path) -> None:
    path = "datasets/question_sets/2026-03-15-llm.json"
    fake.listing_override[path] = {"download_url": None}
    sub = "elsewhere"
    s = fetch(fake, tmp_path / "out", raw_url=f"{fake.url}/raw/")
    assert s["failed"] == 0 and (tmp_path / "out" / path).read_bytes() == EXPECTED[path]
    assert len(fake.requests(f"/raw/{path}")) == 1
    fake.listing_override[path] = {"download_url": None}
    s = fetch(fake, tmp_path / "out2", raw_url=f"{fake.url}/raw/{sub}")
    assert [f["file"] for f in s["failures"]] == [path] and "HTTP 404" in s["failures"][0]["error"]


def test_cli_prints_the_summary_and_exits_1_on_a_failed_file(
    fake: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    path = "datasets/question_sets/2026-08-02-llm.json"
    fake.script[path] = ["404"]
    assert main(cli_args(fake, out, "--rounds", "2026-07-19..")) == 1
    text = capsys.readouterr().out
    assert "forecastbench rounds 2026-07-19..: 4 file(s): 3 fetched (0 updated), 0 up to date, 1 failed" in text
    assert f"  failed {path}: GET {fake.url}/raw/{path}: HTTP 404" in text
    assert "1 file(s) failed and were not written; rerun the same command to retry them" in text
    assert "(unauthenticated)" in text
    assert main(cli_args(fake, out, "--rounds", "2026-07-19..")) == 0
    text = capsys.readouterr().out
    assert "4 file(s): 1 fetched (0 updated), 3 up to date, 0 failed" in text
    assert f"next: forecast-env events import --forecastbench {out}" in text


def test_token_is_sent_to_the_api_only_and_never_printed(
    fake: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch(fake, tmp_path / "plain", "2026-03-15")
    assert all("authorization" not in h for _, _, h in fake.log)
    fake.log.clear()
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    fake.script["datasets/question_sets/2026-03-15-llm.json"] = ["404"]
    assert main(cli_args(fake, tmp_path / "out", "--rounds", "2026-03-15", "--debug")) == 1
    api, raw = fake.requests("/api/"), fake.requests("/raw/")
    assert len(api) == 2 and all(h.get("authorization") == f"Bearer {TOKEN}" for _, _, h in api)
    assert len(raw) == 2 and all("authorization" not in h for _, _, h in raw)  # never to download_url hosts
    fake.script["datasets/question_sets"] = ["403rate"]
    assert main(cli_args(fake, tmp_path / "out", "--debug")) == 2
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "(with a GitHub token)" in text and "the token in $GITHUB_TOKEN has used its 60 requests" in text
    assert TOKEN not in text and "ghp_" not in text
    assert not any(TOKEN.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def test_config_defaults_and_set_overrides() -> None:
    from forecast_env.config import load_config
    from forecast_env.envs.events.forecastbench_fetch import forecastbench_config

    section = load_config("events")["forecastbench"]
    assert section["repo_api_url"] == "https://api.github.com/repos/forecastingresearch/forecastbench-datasets"
    assert section["raw_url"] == "https://raw.githubusercontent.com/forecastingresearch/forecastbench-datasets/main"
    assert (section["ref"], section["token_env"]) == ("main", "GITHUB_TOKEN")
    assert forecastbench_config({"raw_url": "http://x"})["raw_url"] == "http://x"
    assert forecastbench_config(load_config("events", overrides=["forecastbench.max_retries=1"]))["max_retries"] == 1
    from forecast_env.errors import ConfigError

    with pytest.raises(ConfigError):
        forecastbench_config({"max_retries": -1})


def test_an_interrupted_write_leaves_no_partial_file(
    fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from forecast_env.errors import DiskFullError

    out = tmp_path / "out"
    real = Path.write_bytes

    def half_then_full_disk(self: Path, data: Any) -> int:
        real(self, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(Path, "write_bytes", half_then_full_disk)
        with pytest.raises(DiskFullError):
            fetch(fake, out, "2026-03-15")
    assert not [p for p in out.rglob("*") if p.is_file()]  # neither a half file nor a temp file
    s = fetch(fake, out, "2026-03-15")
    assert s["fetched"] == 2 and round_files(out) == {k: v for k, v in EXPECTED.items() if "2026-03-15" in k}
