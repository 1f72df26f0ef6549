"""The workspace on disk: where each artifact lives, manifests, atomic writes, verification.

Layout of a workspace `WS`:

    WS/corpus/articles/YYYY-MM.parquet   kept articles, sorted by (day, doc_id)   (schema.ARTICLES)
    WS/corpus/dropped/*.parquet          every dropped record with stage + reason (schema.DROPPED)
    WS/corpus/parts/                     per-WARC outputs of the parallel stage (resumable build state)
    WS/corpus/report.{json,md}           the funnel
    WS/corpus/manifest.json
    WS/index/dense/YYYY-MM.faiss         exact inner-product index per month, rows = article order
    WS/index/bm25/YYYY-MM/...            as-of-date BM25 postings per month
    WS/index/manifest.json
    WS/events/*.parquet                  events, legs, beliefs, trades, schedule, screen, excluded
    WS/events/report.{json,md}, manifest.json
    WS/runs/<run_id>/                    forecasts, tool calls, notebooks, trajectories, report
    WS/exports/<name>/                   training data

Every artifact directory has a `manifest.json` (row counts, config hash, package versions, sha256 of
every file) that `forecast-env verify WS` rechecks. Writes are atomic: temp name, fsync, rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from forecast_env import schema
from forecast_env.config import config_hash
from forecast_env.crashpoints import crash_point
from forecast_env.errors import DiskFullError, ForecastEnvError, WorkspaceError, disk_full_errno

MANIFEST = "manifest.json"

#: The tables of `WS/events/` and their schemas.
EVENT_TABLES = {
    "events": schema.EVENTS,
    "legs": schema.LEGS,
    "beliefs": schema.BELIEFS,
    "trades_daily": schema.TRADES_DAILY,
    "schedule": schema.SCHEDULE,
    "screen": schema.SCREEN,
    "excluded": schema.EXCLUDED,
}

#: Packages whose versions are recorded in every manifest.
TRACKED_PACKAGES = (
    "forecast-env", "pyarrow", "polars", "numpy", "faiss-cpu", "sentence-transformers", "torch",
    "warcio", "trafilatura", "fasttext-predict", "datasketch", "gymnasium", "datasets",
)


@dataclass(frozen=True)
class Workspace:
    """Paths of every artifact inside one workspace folder."""

    root: Path

    @classmethod
    def at(cls, root: str | os.PathLike[str], create: bool = False) -> Workspace:
        if "://" in os.fspath(root) and not os.fspath(root).startswith("file://"):
            raise WorkspaceError(f"{os.fspath(root)}: a workspace URL is read here only from a local copy; "
                                 "`corpus build`, `index build`, `events build` and search take the URL, other "
                                 f"commands a pulled folder: forecast-env workspace pull {os.fspath(root)} DIR")
        path = Path(root).expanduser().resolve()
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    # corpus
    @property
    def corpus_dir(self) -> Path:
        return self.root / "corpus"

    @property
    def articles_dir(self) -> Path:
        return self.corpus_dir / "articles"

    @property
    def dropped_dir(self) -> Path:
        return self.corpus_dir / "dropped"

    @property
    def parts_dir(self) -> Path:
        return self.corpus_dir / "parts"

    # index
    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def dense_dir(self) -> Path:
        return self.index_dir / "dense"

    @property
    def bm25_dir(self) -> Path:
        return self.index_dir / "bm25"

    # events, runs, exports
    @property
    def events_dir(self) -> Path:
        return self.root / "events"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def exports_dir(self) -> Path:
        return self.root / "exports"

    def events_table(self, name: str) -> Path:
        """Path of one events table (`events`, `legs`, `beliefs`, `trades_daily`, `schedule`,
        `screen`, `excluded`): `WS/events/<name>.parquet`."""
        if name not in EVENT_TABLES:
            raise WorkspaceError(f"unknown events table {name!r}; known: {', '.join(EVENT_TABLES)}")
        return self.events_dir / f"{name}.parquet"

    def article_shards(self) -> list[Path]:
        """Month shards of the article store, in month order."""
        return sorted(self.articles_dir.glob("????-??.parquet"))

    def require(self, path: Path, what: str, command: str) -> Path:
        """Return `path` if it exists, else raise an error naming the command that builds it."""
        if not path.exists():
            raise WorkspaceError(f"{self.root}: no {what} at {path}; build it with `{command}`")
        return path


# ---------------------------------------------------------------------------------------------
# atomic writes
# ---------------------------------------------------------------------------------------------


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync it and rename it over `path`."""
    final = Path(path)
    with naming_full_disk(final):
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
        os.close(fd)
    tmp = Path(tmp_name)
    try:
        with naming_full_disk(final):
            yield tmp
            commit_temp(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def naming_full_disk(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn a write that fails for lack of space inside this block into a `DiskFullError` naming `path`."""
    try:
        yield
    except ForecastEnvError:
        raise
    except Exception as exc:
        code = disk_full_errno(exc)
        if code is None:
            raise
        raise DiskFullError.at(path, exc, code) from exc


def reserve_space(path: str | os.PathLike[str], name: str | os.PathLike[str] | None = None) -> None:
    """Allocate every block of `path` now, so writes through a memory map of it cannot find the disk
    full later (a full tmpfs answers those with SIGBUS, not an error): ENOSPC here becomes a
    `DiskFullError` naming `name` (default `path`; the final name of a temporary file)."""
    with naming_full_disk(name or path), open(path, "rb+") as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            if size:
                os.posix_fallocate(fh.fileno(), 0, size)
        except OSError as exc:
            if disk_full_errno(exc) is not None:
                raise
            # a file system without allocation (EINVAL, EOPNOTSUPP): the writes go on as before


def temp_beside(path: str | os.PathLike[str]) -> Path:
    """A new empty temporary file in `path`'s folder (for `commit_temp`), named after `path`."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    return Path(tmp_name)


def commit_temp(tmp: Path, final: str | os.PathLike[str]) -> None:
    """fsync `tmp` and rename it over `final` (the last step of every atomic write here)."""
    crash_point("write.temp", tmp)
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    crash_point("write.renamed")
    _fsync_dir(Path(final).parent)


def remove_temporaries(directory: str | os.PathLike[str]) -> int:
    """Delete the temporary files (`.NAME.*.tmp`) that a killed process's atomic writes left below
    `directory` (never read: every reader takes only final names); returns how many. Call it where a
    command starts, before it writes there."""
    root = Path(directory)
    n = 0
    if root.is_dir():
        for tmp in root.rglob(".*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()
                n += 1
    return n


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 `text` to `path` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write `obj` as indented, sorted JSON atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


class _StreamWriter:
    """A file that numpy writes chunk by chunk through Python, so a short write raises OSError with its
    errno (numpy's own fwrite path for real files raises one without it: 'N requested and M written')."""

    def __init__(self, fh: Any) -> None:
        self.write = fh.write


def atomic_save_npy(path: str | os.PathLike[str], arr: Any) -> Path:
    """Write an array as `.npy` atomically (the bytes of `np.save`); a full disk raises `DiskFullError`."""
    import numpy as np

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.lib.format.write_array(_StreamWriter(fh), np.asanyarray(arr), allow_pickle=False)
    return Path(path)


def atomic_write_table(
    path: str | os.PathLike[str], table: pa.Table, schema: pa.Schema | None = None, **kwargs: Any
) -> Path:
    """Write an Arrow table as Parquet atomically (cast to `schema` when given)."""
    if schema is not None:
        table = conform(table, schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **{"compression": "zstd", **kwargs})
    return Path(path)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and cast `table`'s columns to `schema` (missing nullable columns become nulls)."""
    cols = []
    for field in schema:
        if field.name in table.column_names:
            cols.append(table[field.name].cast(field.type))
        else:
            cols.append(pa.nulls(table.num_rows, type=field.type))
    return pa.Table.from_arrays(cols, schema=schema)


def read_table(path: str | os.PathLike[str], schema: pa.Schema | None = None) -> pa.Table:
    """Read a Parquet file, naming the file when it is unreadable."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise WorkspaceError(f"{path}: unreadable Parquet file ({exc}); rebuild this artifact") from exc
    return conform(table, schema) if schema is not None else table


# ---------------------------------------------------------------------------------------------
# manifests
# ---------------------------------------------------------------------------------------------


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """sha256 hex digest of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that determine an artifact's content."""
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _parquet_rows(path: Path) -> int | None:
    if path.suffix != ".parquet":
        return None
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (OSError, pa.ArrowException):
        return None


def write_manifest(
    directory: str | os.PathLike[str],
    artifact: str,
    files: list[Path] | None = None,
    config: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write `directory/manifest.json` describing `files` (default: every file below `directory`)."""
    root = Path(directory)
    if files is None:
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST and ".tmp" not in p.name)
    entries: dict[str, Any] = {}
    total_rows = 0
    for f in sorted(files):
        rel = f.relative_to(root).as_posix()
        rows = _parquet_rows(f)
        entries[rel] = {"sha256": sha256_file(f), "bytes": f.stat().st_size}
        if rows is not None:
            entries[rel]["rows"] = rows
            total_rows += rows
    manifest = {
        "artifact": artifact,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": entries,
        "rows": total_rows,
        "config": dict(config) if config is not None else None,
        "config_hash": config_hash(config) if config is not None else None,
        "versions": package_versions(),
        **(dict(extra) if extra else {}),
    }
    atomic_write_json(root / MANIFEST, manifest)
    return manifest


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Read `directory/manifest.json`."""
    path = Path(directory) / MANIFEST
    if not path.exists():
        raise WorkspaceError(f"no manifest at {path}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise WorkspaceError(f"{path}: corrupt manifest ({exc})") from exc


def verify_manifest(directory: str | os.PathLike[str]) -> list[str]:
    """Recheck every file of one manifest; return the problems found (empty when all is well)."""
    root = Path(directory)
    try:
        manifest = read_manifest(root)
    except WorkspaceError as exc:
        return [str(exc)]
    problems = []
    for rel, info in manifest.get("files", {}).items():
        path = root / rel
        if not path.exists():
            problems.append(f"{path}: missing")
            continue
        if path.stat().st_size != info.get("bytes"):
            problems.append(f"{path}: size {path.stat().st_size} != {info.get('bytes')} in manifest")
            continue
        if sha256_file(path) != info.get("sha256"):
            problems.append(f"{path}: sha256 differs from the manifest")
    return problems


def verify_workspace(root: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Recheck every manifest below a workspace: {manifest dir: problems}."""
    base = Path(root)
    if not base.is_dir():
        raise WorkspaceError(f"{base} is not a workspace folder")
    results = {}
    for mpath in sorted(base.rglob(MANIFEST)):
        results[str(mpath.parent.relative_to(base)) or "."] = verify_manifest(mpath.parent)
    return results


def drop_keys(obj: Any, keys: frozenset[str] | set[str]) -> Any:
    """`obj` (JSON-like) without the entries of mappings whose key is in `keys`, recursively."""
    # the one way two runs' records are compared without what differs by design (times, durations, ids)
    if isinstance(obj, Mapping):
        return {k: drop_keys(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [drop_keys(v, keys) for v in obj]
    return obj
