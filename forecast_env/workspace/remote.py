"""Workspace I/O on object storage: the one place that reads and writes a workspace at an fsspec URL.

A workspace is a local folder or any fsspec URL (`s3://bucket/prefix` with the `[s3]` extra, `memory://`,
`gs://`, ...). Objects keep the local layout (`corpus/parts/...`, `corpus/articles/YYYY-MM.parquet`,
`index/...`, `events/...`), so a pulled copy is an ordinary local workspace.

Object stores have no atomic rename (s3fs's `mv` is copy then delete), so files are published in
**units** (`unit_of`): the data objects first, then one marker object `<root>/_published/<unit>.json`
listing every file of the unit with its size and sha256. Readers read only what a marker lists and
check size and sha256 of every byte they download; a mismatch means a republish is in flight (its
marker is deleted before any listed object changes), so the reader rereads the markers and retries.
Resume is as on a local disk: a unit with a marker is done, one without is redone.

Stages compute in a node-local scratch folder (`staged`) and publish from there; a Ray task on a node
without the shared disk fetches its inputs (`RemoteWorkspace.fetch`) and publishes its outputs
(`RemoteWorkspace.publish`) through `task.NodeTask`, which also writes its line of the task log
(`tasklog.py`). The endpoint and credentials come from the environment (`storage_options`,
`worker_env` for Ray's `runtime_env`). Nothing else in the code base calls fsspec for a workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_env.errors import WorkspaceError

#: Folder (below the workspace root) of the marker objects.
MARKERS = "_published"
#: Marker format version.
MARKER_VERSION = 1
#: Bytes per read or hash block: a download or upload holds at most this much of a file in memory.
BLOCK = 8 << 20
#: Environment variables that carry the endpoint and credentials to other processes (Ray workers).
ENV_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE",
            "FORECAST_ENV_STORAGE_OPTIONS", "FORECAST_ENV_SCRATCH", "FORECAST_ENV_TASK_LOG")
#: The file (in a local copy) of the hashes this node verified, by size and mtime (never published).
HASHES = ".wsio-hashes.json"
#: How many times a reader retries a unit whose bytes do not match its marker (a republish in flight).
READ_RETRIES = 3

#: Bytes this process moved to and from object storage (`traffic()`): data objects only, markers apart.
_TRAFFIC = {"fetched_bytes": 0, "published_bytes": 0, "fetched_files": 0, "published_files": 0,
            "marker_reads": 0, "marker_writes": 0}

_MONTH = re.compile(r"(?<!\d)(\d{4}-\d{2})(?!\d)")
#: Top-level artifact units, published after every finer unit below them (so their marker is last).
ARTIFACTS = ("corpus", "index", "events")


def is_remote(workspace: str | os.PathLike[str]) -> bool:
    """True when `workspace` is a URL with a scheme other than `file` (e.g. `s3://bucket/prefix`)."""
    text = os.fspath(workspace)
    if "://" not in text:
        return False
    return text.split("://", 1)[0].lower() not in ("file", "local")


def unit_of(relpath: str) -> str:
    """The unit a workspace file belongs to (the files published together under one marker).

    `corpus/parts/<name>`: the part `<name up to its first '.'>` (its tables, counters and keys files);
    a store file: `corpus/articles/YYYY-MM` (one month shard) or `corpus/dropped/<stage>`; the merge's
    work files: `corpus/merge`; an `index/` file whose path holds a month: `index/months/YYYY-MM`;
    other files: their artifact (`corpus`, `index`, `events`), `runs/<id>`, `exports/<name>`, or the
    top-level name. Each merge task (a node's month shard, a dropped table) is its own unit, so nodes
    publish them independently; a reader takes one generation of the store by the artifact's own
    unit (`pull_workspace`)."""
    parts = relpath.strip("/").split("/")
    top = parts[0]
    if top == "corpus" and len(parts) >= 3 and parts[1] == "parts":
        return f"corpus/parts/{parts[2].split('.', 1)[0]}"
    if top == "corpus" and len(parts) == 3 and parts[1] in ("articles", "dropped"):
        return f"corpus/{parts[1]}/{parts[2].split('.', 1)[0]}"
    if top == "corpus" and len(parts) >= 3 and parts[1] == "merge":
        return "corpus/merge"
    if top == "index" and len(parts) >= 2:
        m = _MONTH.search("/".join(parts[1:]))
        if m:
            return f"index/months/{m.group(1)}"
        return "index"
    if top in ("runs", "exports") and len(parts) >= 3:
        return f"{top}/{parts[1]}"
    return top


def _publish_order(unit: str) -> tuple[int, str]:
    # finer units (parts, months, runs) first; an artifact's own unit (its manifest) last
    return (1 if unit in ARTIFACTS else 0, unit)


def storage_options(url: str = "s3://") -> dict[str, Any]:
    """fsspec options for `url` from the environment: `FORECAST_ENV_STORAGE_OPTIONS` (JSON) and, for
    s3, the endpoint `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (credentials: botocore's own chain)."""
    opts: dict[str, Any] = {}
    raw = os.environ.get("FORECAST_ENV_STORAGE_OPTIONS")
    if raw:
        try:
            opts.update(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise WorkspaceError(f"FORECAST_ENV_STORAGE_OPTIONS is not JSON ({exc}); set it to an object "
                                 'such as {"anon": false}') from exc
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("s3", "s3a"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_url" not in opts and "endpoint_url" not in opts.get("client_kwargs", {}):
            opts["endpoint_url"] = endpoint
        opts.setdefault("use_listings_cache", False)  # markers change under us: never serve a stale listing
    return opts


def worker_env() -> dict[str, str]:
    """The endpoint/credential variables set here, for Ray's `runtime_env={"env_vars": worker_env()}`."""
    return {k: os.environ[k] for k in ENV_VARS if os.environ.get(k)}


def sha256_local(path: Path) -> str:
    """sha256 hex digest of a local file, read in `BLOCK`s."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(BLOCK):
            h.update(block)
    return h.hexdigest()


def _local_files(root: Path, prefix: str) -> list[str]:
    base = root / prefix if prefix else root
    if base.is_file():
        return [prefix]
    if not base.is_dir():
        return []
    out = []
    for p in base.rglob("*"):
        rel = p.relative_to(root).as_posix()
        # temporaries of atomic writes, progress files and spill folders are never published
        if not p.is_file() or any(s.startswith(".") for s in rel.split("/")) or rel.startswith(MARKERS):
            continue
        out.append(rel)
    return sorted(out)


@dataclass
class RemoteWorkspace:
    """A workspace at an fsspec URL: published units, verified downloads, marker-last uploads."""

    url: str
    fs: Any
    root: str
    _markers: dict[str, dict[str, Any]] | None = field(default=None, repr=False)
    _hashes: dict[tuple[str, int, int], str] = field(default_factory=dict, repr=False)

    @classmethod
    def at(cls, url: str) -> RemoteWorkspace:
        """Open the workspace at `url` (nothing is created until something is published)."""
        try:
            from fsspec.core import url_to_fs
        except ImportError as exc:  # pragma: no cover - fsspec comes with datasets
            raise WorkspaceError(f"{url}: a workspace URL needs fsspec; pip install 'forecast-env[s3]'") from exc
        url = url.rstrip("/")
        try:
            fs, root = url_to_fs(url, **storage_options(url))
        except (ImportError, ValueError) as exc:
            raise WorkspaceError(f"{url}: no fsspec backend for this URL ({exc}); for s3:// install "
                                 "the s3 extra: pip install 'forecast-env[s3]'") from exc
        return cls(url=url, fs=fs, root=root.rstrip("/"))

    # -- paths --------------------------------------------------------------------------------
    def key(self, relpath: str) -> str:
        """The object path of a workspace file."""
        return f"{self.root}/{relpath}"

    def marker_key(self, unit: str) -> str:
        """The object path of a unit's marker."""
        return f"{self.root}/{MARKERS}/{unit}.json"

    # -- reading ------------------------------------------------------------------------------
    def published(self, prefix: str = "", refresh: bool = False) -> dict[str, dict[str, Any]]:
        """Every published unit whose name starts with `prefix`: {unit: marker}."""
        if self._markers is None or refresh:
            self._markers = self._load_markers()
        return {u: m for u, m in self._markers.items() if u.startswith(prefix)}

    def _load_markers(self) -> dict[str, dict[str, Any]]:
        base = f"{self.root}/{MARKERS}"
        with contextlib.suppress(AttributeError):
            self.fs.invalidate_cache()
        try:
            keys = [k for k in self.fs.find(base) if k.endswith(".json")]
        except FileNotFoundError:
            return {}
        return {m["unit"]: m for m in self._read_markers(keys).values()}

    def _read_markers(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        # {key: marker} of the marker objects at `keys` that exist and parse (one concurrent `cat`)
        if not keys:
            return {}
        try:
            blobs = self.fs.cat(list(keys), on_error="omit")
        except FileNotFoundError:
            blobs = {}
        _TRAFFIC["marker_reads"] += len(keys)
        out = {}
        for k, blob in blobs.items():
            if not isinstance(blob, bytes | bytearray):
                continue
            try:
                marker = json.loads(blob)
            except json.JSONDecodeError:
                continue  # a marker is one PUT: an unreadable one is not ours; ignore it
            if isinstance(marker, dict) and "unit" in marker:
                out[k] = marker
        return out

    def markers_of(self, units: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The live markers of `units`, read afresh (one GET per unit, not a listing of every marker):
        {unit: marker} for those published. The cache `published()` serves is updated with them."""
        wanted = sorted(set(units))
        out = {m["unit"]: m for m in self._read_markers([self.marker_key(u) for u in wanted]).values()
               if m["unit"] in wanted}
        if self._markers is not None:
            for unit in wanted:
                if unit in out:
                    self._markers[unit] = out[unit]
                else:
                    self._markers.pop(unit, None)
        return out

    def files(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every published file under `prefix` (a path prefix, e.g. `corpus/parts/`): {relpath: entry}."""
        out = {}
        for marker in self.published(refresh=False).values():
            for rel, entry in marker["files"].items():
                if rel.startswith(prefix):
                    out[rel] = entry
        return out

    def _local_sha(self, path: Path) -> str:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in self._hashes:
            self._hashes[key] = sha256_local(path)
        return self._hashes[key]

    def _download(self, rel: str, entry: Mapping[str, Any], local_root: Path) -> Path:
        dest = local_root / rel
        if dest.is_file() and dest.stat().st_size == entry["bytes"] and self._local_sha(dest) == entry["sha256"]:
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        tmp = Path(tmp_name)
        h, n = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as out, self.fs.open(self.key(rel), "rb", block_size=BLOCK) as src:
                while block := src.read(BLOCK):
                    h.update(block)
                    n += len(block)
                    out.write(block)
            if n != entry["bytes"] or h.hexdigest() != entry["sha256"]:
                raise _Mismatch(rel)
            os.replace(tmp, dest)
            _TRAFFIC["fetched_bytes"] += n
            _TRAFFIC["fetched_files"] += 1
            st = dest.stat()
            self._hashes[(str(dest), st.st_size, st.st_mtime_ns)] = entry["sha256"]
        except FileNotFoundError as exc:
            raise _Mismatch(rel) from exc
        finally:
            if tmp.exists():
                tmp.unlink()
        return dest

    def _load_hashes(self, root: Path) -> None:
        # hashes of files this node already verified (`.wsio-hashes.json`, keyed by size and mtime), so
        # reopening a pulled copy does not reread every byte
        with contextlib.suppress(OSError, ValueError, TypeError):
            for rel, (size, mtime, sha) in json.loads((root / HASHES).read_text()).items():
                self._hashes.setdefault((str(root / rel), int(size), int(mtime)), str(sha))

    def _save_hashes(self, root: Path, rels: Iterable[str]) -> None:
        table = {}
        for rel in rels:
            path = root / rel
            with contextlib.suppress(OSError):
                st = path.stat()
                sha = self._hashes.get((str(path), st.st_size, st.st_mtime_ns))
                if sha:
                    table[rel] = [st.st_size, st.st_mtime_ns, sha]
        with contextlib.suppress(OSError):
            old = json.loads((root / HASHES).read_text()) if (root / HASHES).exists() else {}
            tmp = root / f".{HASHES}.tmp"
            tmp.write_text(json.dumps({**old, **table}))
            os.replace(tmp, root / HASHES)

    def fetch(self, relpaths: Iterable[str], local_root: str | os.PathLike[str]) -> list[Path]:
        """Download published files to `local_root/<relpath>` (verified; files already equal are kept)."""
        root = Path(local_root)
        wanted = list(relpaths)
        self._load_hashes(root)
        got = self._fetch(wanted, root)
        self._save_hashes(root, wanted)
        return got

    def _fetch(self, wanted: list[str], root: Path) -> list[Path]:
        for attempt in range(READ_RETRIES + 1):
            # only the markers of the units asked for (a node fetching one part's file reads one marker)
            listing = {rel: entry for marker in self.markers_of(unit_of(r) for r in wanted).values()
                       for rel, entry in marker["files"].items()}
            missing = [r for r in wanted if r not in listing]
            if missing:
                raise WorkspaceError(f"{self.url}: {len(missing)} file(s) not published, e.g. {missing[0]}; "
                                     "build the stage that writes them first")
            try:
                return [self._download(r, listing[r], root) for r in wanted]
            except _Mismatch as exc:
                if attempt == READ_RETRIES:
                    raise WorkspaceError(f"{self.url}: {exc.rel} keeps changing under its marker (a "
                                         "publish in flight?); rerun when the writer has finished") from None
        raise AssertionError("unreachable")

    def pull(self, local_root: str | os.PathLike[str], prefix: str = "") -> list[Path]:
        """Download every published file under path `prefix` into `local_root` (a local workspace)."""
        self.published(refresh=True)
        return self.fetch(sorted(self.files(prefix)), local_root)

    # -- writing ------------------------------------------------------------------------------
    def unpublish(self, unit: str) -> None:
        """Delete a unit's marker (its objects stay until the next publish replaces or removes them)."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self.marker_key(unit))
        if self._markers is not None:
            self._markers.pop(unit, None)

    def publish(self, local_root: str | os.PathLike[str], relpaths: Sequence[str] | None = None,
                prefix: str = "") -> list[str]:
        """Upload the changed files of a local workspace and publish their units (marker last).

        With `relpaths`, those files are added to (or replaced in) their units; without, every file
        under path `prefix` is published and each unit touched holds exactly the local files (a file
        gone locally leaves the unit). Returns the units (re)published."""
        from forecast_env.crashpoints import crash_point

        root = Path(local_root)
        whole = relpaths is None
        rels = _local_files(root, prefix) if relpaths is None else list(relpaths)
        by_unit: dict[str, dict[str, dict[str, Any]]] = {}
        for rel in rels:
            path = root / rel
            if not path.is_file():
                raise WorkspaceError(f"{path}: no such file to publish to {self.url}")
            by_unit.setdefault(unit_of(rel), {})[rel] = {"bytes": path.stat().st_size, "sha256": self._local_sha(path)}
        current = self.markers_of(by_unit)  # afresh: another node may have published since
        done = []
        artifact = prefix.strip("/").split("/", 1)[0] if whole and prefix else ""
        if artifact in ARTIFACTS:
            # one generation at a time (`pull_workspace`): if anything under the artifact changes, its own
            # marker goes first and comes back last, after the finer units and the stale ones' removal
            stale = self._stale_units(prefix, set(by_unit))
            if stale or any(self._unit_plan(u, by_unit[u], current, whole, prefix)[0] != current.get(u, {}).get("files")
                            for u in by_unit if u != artifact):
                self.unpublish(artifact)
                current.pop(artifact, None)
            done += self._drop_units(stale)
        for unit in sorted(by_unit, key=_publish_order):
            new, old = self._unit_plan(unit, by_unit[unit], current, whole, prefix)
            if new == old and unit in current:
                continue
            changed = [r for r, e in old.items() if new.get(r) != e]
            if changed and unit in current:
                self.unpublish(unit)  # no reader may follow a marker to bytes it does not list
            for rel, entry in sorted(new.items()):
                if old.get(rel) == entry and not changed:
                    continue  # the object is there, listed by the live marker
                if old.get(rel) == entry and self._object_matches(rel, entry):
                    continue
                self.fs.put_file(str(root / rel), self.key(rel))
                _TRAFFIC["published_bytes"] += int(entry["bytes"])
                _TRAFFIC["published_files"] += 1
            crash_point("wsio.data")  # every data object in place, the marker not yet
            marker = {"unit": unit, "version": MARKER_VERSION, "files": dict(sorted(new.items()))}
            self.fs.pipe_file(self.marker_key(unit), (json.dumps(marker, indent=1, sort_keys=True) + "\n").encode())
            _TRAFFIC["marker_writes"] += 1
            for rel in sorted(set(old) - set(new)):
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(self.key(rel))
            if self._markers is not None:
                self._markers[unit] = marker
            done.append(unit)
        return done

    @staticmethod
    def _unit_plan(unit: str, local: dict[str, dict[str, Any]], current: Mapping[str, dict[str, Any]], whole: bool,
                   prefix: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        # (the unit's files after this publish, its files now)
        old = current.get(unit, {}).get("files", {})
        new = dict(local) if whole else {**old, **local}
        if whole and prefix and not unit.startswith(prefix.rstrip("/")):
            # a unit wider than the prefix (e.g. `corpus` under prefix corpus/articles): keep its other files
            new = {**{r: e for r, e in old.items() if not r.startswith(prefix)}, **new}
        return new, old

    def _stale_units(self, prefix: str, live: set[str]) -> list[str]:
        # a whole publish of an artifact's prefix replaces its store units: a month shard, dropped table
        # or index month gone locally leaves the workspace (parts are build state and never dropped here)
        out = []
        for unit, marker in sorted(self.published(refresh=True).items()):
            if unit in live or unit in ARTIFACTS or unit.startswith("corpus/parts/") or not unit.startswith(prefix.rstrip("/")):
                continue
            if all(r.startswith(prefix) for r in marker["files"]):
                out.append(unit)
        return out

    def _drop_units(self, units: Sequence[str]) -> list[str]:
        for unit in units:
            files = (self.published().get(unit) or {}).get("files", {})
            self.unpublish(unit)
            for rel in sorted(files):
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(self.key(rel))
        return list(units)

    def _object_matches(self, rel: str, entry: Mapping[str, Any]) -> bool:
        try:
            return int(self.fs.size(self.key(rel))) == entry["bytes"]
        except FileNotFoundError:
            return False


class _Mismatch(Exception):
    """A downloaded object differs from its marker (or vanished): a republish is in flight."""

    def __init__(self, rel: str) -> None:
        super().__init__(rel)
        self.rel = rel


def traffic() -> dict[str, int]:
    """What this process has moved to and from object storage so far (a copy of the counters)."""
    return dict(_TRAFFIC)


def scratch_for(url: str) -> Path:
    """The node-local scratch folder of a workspace URL: `$FORECAST_ENV_SCRATCH/<sha16(url)>`
    (default `~/.cache/forecast-env/scratch/`)."""
    base = os.environ.get("FORECAST_ENV_SCRATCH") or os.path.join(
        os.environ.get("FORECAST_ENV_CACHE") or os.path.expanduser("~/.cache/forecast-env"), "scratch")
    return Path(base) / hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]


@contextlib.contextmanager
def staged(workspace: str | os.PathLike[str], pull: Sequence[str] = (), publish: Sequence[str] = (),
           publish_on_failure: Sequence[str] = ("corpus/parts/",), skip: Sequence[str] = ()) -> Iterator[Path]:
    """A local folder to run a stage in: `workspace` itself when local; for a URL, its node-local
    scratch folder with the published files under the `pull` prefixes (less those under `skip`)
    pulled first. On success the
    files under the `publish` prefixes are published (finer units first, each artifact's own unit
    last); on failure only those under `publish_on_failure` (finished parts), so a rerun anywhere
    resumes from them."""
    if not is_remote(workspace):
        yield Path(workspace)
        return
    remote = RemoteWorkspace.at(os.fspath(workspace))
    local = scratch_for(remote.url)
    local.mkdir(parents=True, exist_ok=True)
    remote.published(refresh=True)
    for prefix in pull:
        remote.fetch(sorted(r for r in remote.files(prefix) if not r.startswith(tuple(skip))), local)
    try:
        yield local
    except BaseException:
        for prefix in publish_on_failure:
            with contextlib.suppress(Exception):
                remote.publish(local, relpaths=finished_files(local, prefix))
        raise
    for prefix in publish:
        remote.publish(local, prefix=prefix)


def publisher(workspace: str | os.PathLike[str], local: Path, prefix: str = "corpus/parts") -> Any:
    """A callback publishing the finished files under `prefix` of `local` to `workspace` (None when
    the workspace is local): the per-WARC stage calls it after each part, so a kill loses one part."""
    if not is_remote(workspace):
        return None
    remote = RemoteWorkspace.at(os.fspath(workspace))

    def publish_done(*_: Any) -> None:
        remote.publish(local, relpaths=_finished_parts(local, prefix))

    return publish_done


def _finished_parts(local: Path, prefix: str) -> list[str]:
    # a part is finished when its counters JSON (written last, `pipeline.part_paths`) exists
    files = _local_files(local, prefix)
    done = {unit_of(r) for r in files if r.endswith(".json") and not r.endswith(".failed.json")}
    return [r for r in files if unit_of(r) in done]


def finished_files(local: Path, what: str) -> list[str]:
    """The files of the finished units of `what` in a local workspace: `corpus/parts/` (parts with
    their counters JSON) or `index/months/` (months with their marker `index/months/YYYY-MM.json`)."""
    if what.startswith("corpus/parts"):
        return _finished_parts(local, "corpus/parts/")
    if what.startswith("index/months"):
        done = {f"index/months/{p.stem}" for p in (local / "index" / "months").glob("????-??.json")}
        return [r for r in _local_files(local, "index/") if unit_of(r) in done]
    raise WorkspaceError(f"no rule for the finished units of {what!r}; use corpus/parts/ or index/months/")


def pull_workspace(url: str, dest: str | os.PathLike[str] | None = None,
                   prefixes: Sequence[str] = ("corpus/", "index/", "events/")) -> Path:
    """Pull a workspace's published corpus, index and events into `dest` (default: its scratch
    folder) for searching; files already equal are kept. Returns the local workspace folder.

    One generation of each artifact: an artifact's files are pulled only while its own marker
    (`corpus`, `index`, `events`: published last by a build, deleted first by a rebuild) is live and
    unchanged from before the pull to after it; if a rebuild republished it meanwhile, the pull is
    redone (at most `READ_RETRIES` times). An artifact with no live marker (never built, or a
    rebuild in flight) is not pulled."""
    remote = RemoteWorkspace.at(url)
    local = Path(dest) if dest is not None else scratch_for(remote.url)
    local.mkdir(parents=True, exist_ok=True)
    artifacts = [p.strip("/").split("/", 1)[0] for p in prefixes]
    for attempt in range(READ_RETRIES + 1):
        remote.published(refresh=True)
        before = remote.markers_of(artifacts)
        for prefix, artifact in zip(prefixes, artifacts):
            if artifact in ARTIFACTS and artifact not in before:
                if any(u.startswith(f"{artifact}/") and not u.startswith("corpus/parts/") for u in remote.published()):
                    raise WorkspaceError(f"{url}: no finished {artifact} published (a build was interrupted or "
                                         "is running: rerun it to publish)")
                continue  # never built: nothing of it to pull
            rels = remote.files(prefix)
            if prefix == "corpus/":  # parts are build state, not needed to search
                rels = {r: e for r, e in rels.items() if not r.startswith("corpus/parts/")}
            remote.fetch(sorted(rels), local)
        if remote.markers_of(artifacts) == before:
            break
        if attempt == READ_RETRIES:
            raise WorkspaceError(f"{url}: its artifacts were republished during each of {attempt + 1} pulls "
                                 "(a build writing it?); pull again when the build has finished")
    if not before:
        raise WorkspaceError(f"{url}: no finished {', '.join(artifacts)} published; build it first")
    return local


def push_workspace(local: str | os.PathLike[str], url: str, prefixes: Sequence[str] = ARTIFACTS) -> list[str]:
    """Publish a local workspace's artifacts to `url` (data first, each unit's marker last)."""
    root = Path(local)
    if not root.is_dir():
        raise WorkspaceError(f"{root} is not a workspace folder")
    remote = RemoteWorkspace.at(url)
    units: list[str] = []
    for prefix in prefixes:
        units += remote.publish(root, prefix=prefix)
    return units


def local_for_reading(workspace: str | os.PathLike[str]) -> Path:
    """A local folder to read `workspace` from: itself, or (a URL) its pulled copy (`pull_workspace`)."""
    if not is_remote(workspace):
        return Path(workspace)
    return pull_workspace(os.fspath(workspace))


def pulled_prefix(url: str, prefix: str) -> Path:
    """Pull the published files under path `prefix` of `url` into its scratch folder; return that folder."""
    remote = RemoteWorkspace.at(url)
    local = scratch_for(remote.url)
    local.mkdir(parents=True, exist_ok=True)
    remote.pull(local, prefix)
    return local

