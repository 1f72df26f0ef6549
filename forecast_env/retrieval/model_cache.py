"""Where derived embedding models live: ONNX exports and distilled static models (docs/design.md §3).

Each derived model is built once per machine from the packaged (or configured) transformer and kept
under the cache root, in a folder keyed by the source model's files and the build parameters, so a
changed model or parameter gets a new folder and never a stale artifact. Builds take a file lock, so
that worker processes starting together build it once, and write atomically, so a killed build
leaves no half-written model behind.

The cache root is `$FORECAST_ENV_CACHE`, else `$XDG_CACHE_HOME/forecast-env`, else
`~/.cache/forecast-env`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from forecast_env.errors import ConfigError


def cache_root() -> Path:
    """The folder holding derived models (see the module docstring)."""
    explicit = os.environ.get("FORECAST_ENV_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "forecast-env"


def model_fingerprint(model_dir: Path) -> str:
    """A short hash of a model folder's files (names, sizes, modification times)."""
    entries = []
    for p in sorted(Path(model_dir).rglob("*")):
        if p.is_file():
            st = p.stat()
            entries.append(f"{p.relative_to(model_dir)}|{st.st_size}|{st.st_mtime_ns}")
    if not entries:
        raise ConfigError(f"{model_dir}: the embedding model folder is empty")
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:16]


def artifact_dir(kind: str, model_name: str, model_dir: Path, params: dict[str, Any]) -> Path:
    """The cache folder of one derived model: `<root>/<kind>/<model>-<hash of files and params>`."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model_name).name or "model")[:60]
    key = hashlib.sha256((model_fingerprint(model_dir) + json.dumps(params, sort_keys=True)).encode())
    return cache_root() / kind / f"{slug}-{key.hexdigest()[:16]}"


@contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` while a derived model is built into it."""
    from filelock import FileLock

    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        yield


def read_meta(folder: Path) -> dict[str, Any] | None:
    """The `meta.json` a finished build writes last (None when the build is missing or unfinished)."""
    try:
        return json.loads((folder / "meta.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def build_once(folder: Path, build: Callable[[Path], None], rebuild: bool = False) -> Path:
    """Return `folder`, built by `build(tmp)` into a temporary sibling and moved in atomically unless a complete
    build is already there (its meta file readable) and `rebuild` is False; one builder at a time."""
    with build_lock(folder):
        if read_meta(folder) is not None and not rebuild:
            return folder
        tmp = folder.with_name(folder.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            build(tmp)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
