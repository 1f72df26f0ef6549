"""Downloading ForecastBench rounds into a folder laid out as the forecastbench-datasets repository.

`fetch_forecastbench(out_dir, rounds)` lists `datasets/question_sets` and `datasets/resolution_sets` of
github.com/forecastingresearch/forecastbench-datasets (Forecasting Research Institute, CC BY-SA 4.0) with
GitHub's contents API (`{repo_api_url}/contents/{folder}?ref={ref}`: two API requests per run), and
downloads each round file (`YYYY-MM-DD-llm.json`, `YYYY-MM-DD_resolution_set.json`; never `latest-llm.json` or
the `-human.json` sets) of the rounds asked for from its `download_url` (raw.githubusercontent.com; `raw_url`
+ path when the listing gives none) into `out_dir/datasets/...`, so that `events import --forecastbench out_dir`
reads it (`forecast_env.envs.events.forecastbench`).

Resume: a file already in `out_dir` whose size and git blob sha (sha1 of `b"blob <len>\\0" + content`) are the
listing's is not downloaded again; a rerun downloads only what is missing or changed (resolution sets change as
questions resolve). Files are written atomically, after their body was checked: a Git LFS pointer, or a body
whose size or sha is not the listing's, is a failure for that file (nothing written; an older copy stays),
listed in the summary and retried by the next run. raw.githubusercontent.com caches files for a few minutes, so
a file changed minutes ago may fail its sha check once.

HTTP: the retry policy of the Polymarket downloader (`polymarket.client`: its `TokenBucket`, Retry-After
parsing and `HTTPStatusFailure`): 429, 5xx, timeouts and connection errors are retried with exponential backoff
(at least Retry-After), other 4xx are not. GitHub's API allows 60 unauthenticated requests an hour per IP
address: a 403/429 with `X-RateLimit-Remaining: 0` raises `GitHubRateLimitError`, which says so and names the
env var (`forecastbench.token_env`, default GITHUB_TOKEN) whose token, when set, is sent as an Authorization
header on the listing requests only (never to download_url hosts), and is never printed or stored.

A listing that cannot be fetched raises `FetchError` (nothing is downloaded); a file that cannot is a failure
in the summary and the run goes on.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import httpx

from forecast_env.config import load_config
from forecast_env.envs.events.forecastbench import (
    _LFS_HEADER,
    _QUESTION_FILE,
    _RESOLUTION_FILE,
    QUESTION_SETS,
    RESOLUTION_SETS,
)
from forecast_env.envs.events.forecastbench_import import parse_rounds
from forecast_env.envs.events.polymarket.client import HTTPStatusFailure, PolymarketClient, TokenBucket
from forecast_env.errors import ConfigError, FetchError
from forecast_env.store import atomic_write_bytes

#: The two folders fetched, with the file names that are rounds (group 1: the due date).
FOLDERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (QUESTION_SETS, _QUESTION_FILE),
    (RESOLUTION_SETS, _RESOLUTION_FILE),
)
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
#: The body of an error response kept for a message.
_ERROR_BODY = 2000


class GitHubRateLimitError(FetchError):
    """GitHub's API refused a request for its rate limit (not retried: the limit resets within the hour)."""


class _BadBody(FetchError):
    """A downloaded body that is not the file the listing describes (LFS pointer, size or sha)."""


def git_blob_sha(data: bytes) -> str:
    """The git blob id of `data` (what GitHub's contents API gives as `sha`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def file_blob_sha(path: Path) -> str:
    """`git_blob_sha` of a file's content, read in chunks."""
    h = hashlib.sha1(b"blob %d\0" % path.stat().st_size, usedforsecurity=False)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def forecastbench_config(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The validated `forecastbench` config section: defaults updated by `config`.

    `config` may be a whole `events` config (its `forecastbench` key is used) or the section itself, possibly
    partial (e.g. `{"raw_url": "http://127.0.0.1:8000"}`).
    """
    section: Mapping[str, Any] = {}
    if config is not None:
        section = (
            config["forecastbench"] if isinstance(config.get("forecastbench"), Mapping) else config
        )
    cfg = load_config("events", overrides={f"forecastbench.{k}": v for k, v in section.items()})["forecastbench"]
    if cfg["max_retries"] < 0:
        raise ConfigError(f"events.forecastbench.max_retries must be >= 0, got {cfg['max_retries']!r}")
    if cfg["timeout_seconds"] <= 0:
        raise ConfigError(f"events.forecastbench.timeout_seconds must be > 0, got {cfg['timeout_seconds']!r}")
    return cfg


@dataclass(frozen=True)
class RemoteFile:
    """One round file of a listing."""

    path: str  # datasets/question_sets/2026-03-01-llm.json (where it goes under out_dir)
    due_date: str
    size: int
    sha: str  # git blob sha
    url: str


class ForecastBenchFetcher:
    """HTTP access to the forecastbench-datasets repository: listings and checked file bodies."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        token: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = forecastbench_config(config)
        cfg = self.config
        self._token = token if token is not None else (os.environ.get(cfg["token_env"]) or None)
        self._sleep = sleep
        self._http = httpx.Client(
            timeout=httpx.Timeout(float(cfg["timeout_seconds"])),
            headers={"User-Agent": "forecast-env forecastbench downloader"},
            follow_redirects=True,  # httpx drops the Authorization header on a redirect to another origin
            transport=transport,
        )
        self._bucket = TokenBucket(cfg["requests_per_second"], sleep=sleep)
        self._rng = random.Random(0)
        #: HTTP attempts made (retries included).
        self.requests = 0

    @property
    def authenticated(self) -> bool:
        return self._token is not None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP ----------------------------------------------------------------------------------
    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """The Polymarket downloader's backoff: base x 2^attempt (+0..10%), capped, at least Retry-After."""
        cfg = self.config
        delay = min(cfg["backoff_seconds"] * (2**attempt) * (1.0 + 0.1 * self._rng.random()),
                    cfg["max_backoff_seconds"])
        if retry_after is not None:
            delay = max(delay, min(retry_after, 600.0))
        return max(0.0, delay)

    def _rate_limit(self, url: str, response: httpx.Response, body: bytes) -> GitHubRateLimitError | None:
        """The error for a GitHub rate-limit answer (primary limit exhausted), None for any other answer."""
        if response.status_code not in (403, 429):
            return None
        remaining = response.headers.get("X-RateLimit-Remaining")
        if remaining != "0" and b"rate limit" not in body.lower():
            return None
        if response.headers.get("Retry-After") is not None and remaining != "0":
            return None  # a secondary rate limit that says when to retry: retried
        when = ""
        reset = response.headers.get("X-RateLimit-Reset")
        if reset and reset.isdigit():
            at = datetime.fromtimestamp(int(reset), UTC)
            minutes = max(0, round((at - datetime.now(UTC)).total_seconds() / 60))
            when = f" It resets at {at:%H:%M} UTC (in about {minutes} min)."
        env = self.config["token_env"]
        limit = response.headers.get("X-RateLimit-Limit")
        if remaining != "0":
            advice = ("GitHub's secondary rate limit (too many requests in a short time); wait a few minutes and "
                      "rerun: files already fetched are kept.")
        elif self.authenticated:
            advice = (f"the token in ${env} has used its {limit or '5000'} requests this hour.{when} Rerun then: "
                      "files already fetched are kept.")
        else:
            advice = (f"GitHub allows {limit or '60'} unauthenticated API requests an hour per IP address, and "
                      f"this address has used them.{when} Set the environment variable {env} to a GitHub token "
                      "(a fine-grained token with no permissions is enough for this public repository; "
                      "5000 requests an hour) and rerun: files already fetched are kept.")
        return GitHubRateLimitError(f"GET {url}: HTTP {response.status_code}, GitHub API rate limit exceeded: "
                                    f"{advice}")

    def get(self, url: str, *, api: bool = False, limit: int | None = None) -> bytes:
        """The body of a 200 answer to GET `url`, retrying transient failures; FetchError after max_retries.

        `api`: a listing request (GitHub API headers and the token). `limit`: read at most limit + 1 bytes
        (a longer body is cut there: the caller's size check fails it).
        """
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"} if api else {}
        if api and self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        attempts = self.config["max_retries"] + 1
        cause = "no attempt"
        for attempt in range(attempts):
            self._bucket.acquire()
            self.requests += 1
            retry_after = None
            try:
                with self._http.stream("GET", url, headers=headers) as response:
                    status = response.status_code
                    if status == 200:
                        return _read(response, limit)
                    body = _read(response, _ERROR_BODY)
                    limited = self._rate_limit(url, response, body)
                    if limited is not None:
                        raise limited
                    retry_after = PolymarketClient._retry_after(response)
                    if status == 429 or status >= 500 or (status == 403 and retry_after is not None):
                        cause = f"HTTP {status}"
                    else:
                        failure = HTTPStatusFailure(url, status, body.decode("utf-8", "replace"))
                        if status == 401 and self.authenticated:
                            failure.args = (f"{failure}; GitHub refused the token in ${self.config['token_env']}: "
                                            "check it or unset the variable",)
                        raise failure
            except httpx.TimeoutException:
                cause = f"timed out after {self.config['timeout_seconds']}s"
            except httpx.TransportError as exc:  # refused or dropped connections, bodies cut short
                cause = f"{type(exc).__name__}: {exc}"
            if attempt + 1 < attempts:
                self._sleep(self._backoff(attempt, retry_after))
        raise FetchError(f"GET {url}: failed after {attempts} attempt(s), last: {cause}; "
                         "rerun later (files already fetched are kept)")

    # -- the repository ------------------------------------------------------------------------
    def listing(self, folder: str) -> list[Any]:
        """The contents API's entries of one folder of the repository (FetchError when not a JSON list)."""
        url = str(httpx.URL(f"{self.config['repo_api_url'].rstrip('/')}/contents/{folder}",
                            params={"ref": self.config["ref"]}))
        try:
            body = self.get(url, api=True)
        except HTTPStatusFailure as exc:
            if exc.status == 404:
                raise FetchError(f"{exc}; check events.forecastbench.repo_api_url and ref "
                                 f"({self.config['repo_api_url']}, {self.config['ref']})") from exc
            raise
        try:
            entries = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FetchError(f"GET {url}: not JSON ({len(body)} bytes); is events.forecastbench.repo_api_url "
                             "the repository's API URL?") from exc
        if not isinstance(entries, list):
            raise FetchError(f"GET {url}: expected the JSON list of a folder, got {type(entries).__name__}: "
                             f"{str(entries)[:200]!r}")
        return entries

    def plan(self, first: str | None, last: str | None) -> tuple[list[RemoteFile], list[dict[str, str]], int]:
        """The round files of both folders in [first, last], the entries that cannot be fetched (failures),
        and how many entries were not round files (pointer file, human sets, READMEs)."""
        files: list[RemoteFile] = []
        bad: list[dict[str, str]] = []
        other = 0
        raw = self.config["raw_url"].rstrip("/")
        for folder, pattern in FOLDERS:
            for entry in self.listing(folder):
                name = entry.get("name") if isinstance(entry, dict) else None
                match = pattern.match(name) if isinstance(name, str) else None
                if not isinstance(entry, dict) or match is None or entry.get("type", "file") != "file":
                    other += 1
                    continue
                due = match.group(1)
                if (first is not None and due < first) or (last is not None and due > last):
                    continue
                path = f"{folder}/{name}"
                size, sha, url = entry.get("size"), entry.get("sha"), entry.get("download_url")
                if not isinstance(size, int) or isinstance(size, bool) or size < 0 \
                        or not isinstance(sha, str) or not _SHA1.match(sha):
                    bad.append({"file": path, "error": f"the listing gives no usable size and sha "
                                                       f"(size {size!r}, sha {sha!r})"})
                    continue
                if not (isinstance(url, str) and url.startswith(("http://", "https://"))):
                    url = f"{raw}/{path}"
                files.append(RemoteFile(path, due, size, sha, url))
        files.sort(key=lambda f: (f.due_date, f.path))
        return files, bad, other

    def download(self, f: RemoteFile) -> bytes:
        """The body of `f`, checked against the listing (`_BadBody` when it is not that file)."""
        body = self.get(f.url, limit=f.size)
        if body.startswith(_LFS_HEADER):
            raise _BadBody(f"got a Git LFS pointer, not the data ({len(body)} bytes from {f.url}); the "
                           "repository stores this file in LFS: fetch it with git lfs")
        if len(body) != f.size:
            got = f"more than {f.size}" if len(body) > f.size else str(len(body))
            raise _BadBody(f"size mismatch: got {got} bytes, the listing says {f.size} (truncated, or changed "
                           "since it was listed); rerun to retry")
        sha = git_blob_sha(body)
        if sha != f.sha:
            raise _BadBody(f"sha mismatch: the body's git blob sha is {sha}, the listing's {f.sha} (changed since "
                           "it was listed, or a cached old copy); rerun later to retry")
        return body


def _read(response: httpx.Response, limit: int | None) -> bytes:
    chunks: list[bytes] = []
    n = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        n += len(chunk)
        if limit is not None and n > limit:
            break
    data = b"".join(chunks)
    return data if limit is None else data[: limit + 1]


def _up_to_date(path: Path, f: RemoteFile) -> bool:
    try:
        return path.is_file() and path.stat().st_size == f.size and file_blob_sha(path) == f.sha
    except OSError:
        return False


def fetch_forecastbench(
    out_dir: str | os.PathLike[str],
    rounds: str | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    repo_api_url: str | None = None,
    raw_url: str | None = None,
    token: str | None = None,
    progress: bool = True,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Download the question sets and resolution sets of the rounds `rounds` (`A..B`, `A..`, `..B`, `A`;
    None: all) into `out_dir` (the repository's layout); returns a summary.

    `config`: the `events` config or its `forecastbench` section (defaults from configs/events.yaml);
    `repo_api_url` and `raw_url` override its keys. `token`: a GitHub token (default: the env var
    `forecastbench.token_env`). Raises FetchError when a listing cannot be fetched (GitHubRateLimitError for
    the rate limit); a file that cannot be fetched is in `failures` and the run goes on.

    Summary keys: out_dir, rounds, files (round files listed in the range), fetched (downloaded and written),
    updated (of those, replacing an older copy), up_to_date, failed, failures ([{file, error}]), fetched_files,
    bytes (written), requests, authenticated, seconds.
    """
    from tqdm.auto import tqdm

    first, last = parse_rounds(rounds)
    cfg: dict[str, Any] = dict(forecastbench_config(config))
    if repo_api_url is not None:
        cfg["repo_api_url"] = repo_api_url
    if raw_url is not None:
        cfg["raw_url"] = raw_url
    out = Path(out_dir)
    t0 = time.monotonic()
    summary: dict[str, Any] = {
        "out_dir": str(out),
        "rounds": f"{first or ''}..{last or ''}" if (first or last) else "all",
        "files": 0,
        "fetched": 0,
        "updated": 0,
        "up_to_date": 0,
        "failed": 0,
        "failures": [],
        "fetched_files": [],
        "bytes": 0,
        "requests": 0,
        "authenticated": False,
        "seconds": 0.0,
    }
    with ForecastBenchFetcher(cfg, token=token, transport=transport, sleep=sleep) as fetcher:
        summary["authenticated"] = fetcher.authenticated
        files, bad, _ = fetcher.plan(first, last)
        summary["files"] = len(files) + len(bad)
        summary["failures"].extend(bad)
        stopped: str | None = None
        for f in tqdm(files, desc="forecastbench", unit="file", disable=not progress, leave=False):
            path = out / f.path
            if _up_to_date(path, f):
                summary["up_to_date"] += 1
                continue
            if stopped is not None:
                summary["failures"].append({"file": f.path, "error": f"not tried: {stopped}"})
                continue
            try:
                body = fetcher.download(f)
            except GitHubRateLimitError as exc:
                stopped = "GitHub's rate limit (see the first failure)"
                summary["failures"].append({"file": f.path, "error": str(exc)})
                continue
            except FetchError as exc:
                summary["failures"].append({"file": f.path, "error": str(exc)})
                continue
            existed = path.exists()
            atomic_write_bytes(path, body)
            summary["fetched"] += 1
            summary["updated"] += int(existed)
            summary["bytes"] += len(body)
            summary["fetched_files"].append(f.path)
        summary["requests"] = fetcher.requests
    summary["failed"] = len(summary["failures"])
    summary["seconds"] = round(time.monotonic() - t0, 3)
    return summary


def format_summary(summary: Mapping[str, Any]) -> str:
    """A short report of a `fetch_forecastbench` summary (the token itself is never in it)."""
    lines = [
        f"forecastbench rounds {summary['rounds']}: {summary['files']} file(s): {summary['fetched']} fetched "
        f"({summary['updated']} updated), {summary['up_to_date']} up to date, {summary['failed']} failed",
    ]
    if not summary["files"]:
        lines.append("  no round file of these rounds in the repository's listing")
    for failure in summary["failures"]:
        lines.append(f"  failed {failure['file']}: {failure['error']}")
    auth = "with a GitHub token" if summary["authenticated"] else "unauthenticated"
    lines.append(f"{summary['bytes']} bytes written, {summary['requests']} request(s) ({auth}) in "
                 f"{summary['seconds']:.1f}s; out: {summary['out_dir']}")
    if summary["failed"]:
        lines.append(f"{summary['failed']} file(s) failed and were not written; rerun the same command to retry them")
    else:
        lines.append(f"next: forecast-env events import --forecastbench {summary['out_dir']} --workspace WS")
    return "\n".join(lines)
