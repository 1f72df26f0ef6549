"""Frozen releases: what a run must have been played against to be scored as a benchmark result
(docs/design.md §7, Releases).

`write_release(workspace, split, out)` freezes the event list of a split, the corpus snapshot id, the hash
of the index manifest, the events build's config hash and the environment config into `out/release.json`,
itself hashed. It holds no schedule dates: the dates were picked for market movement, so a list of future
dates would tell a forecaster when the market moved. `score_run(release, run_dir)` checks that a run (made
by the runner, over MCP or through verifiers) was played against exactly that release, then writes the
same report as `forecast-env report`; a run that differs is refused with every difference named.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecast_env.errors import RunError
from forecast_env.eval.runs.store import read_record
from forecast_env.store import Workspace, atomic_write_json, package_versions

RELEASE_VERSION = 1
#: The fields of run.json a release pins (besides the event set and the environment config).
PINNED = ("corpus_snapshot_id", "index_manifest_sha256", "events_config_hash")


@dataclass(frozen=True)
class Release:
    """A loaded release: its identifying fields and its own hash."""

    path: Path
    data: dict[str, Any]

    @property
    def release_id(self) -> str:
        return str(self.data["release_id"])

    @property
    def event_ids(self) -> list[str]:
        return list(self.data["event_ids"])


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def write_release(workspace: str | Path, split: str, out: str | Path,
                  env_config: Mapping[str, Any] | None = None, name: str | None = None) -> Path:
    """Freeze `split` of `workspace` into `out/release.json`; returns its path."""
    from forecast_env.config import load_config
    from forecast_env.eval.runs.store import run_record

    ws = Workspace.at(workspace)
    env_cfg = load_config("env", overrides=dict(env_config or {}))
    from forecast_env.envs import ForecastEnv

    ids = ForecastEnv(ws.root, split=split, config=env_cfg).event_ids
    if not ids:
        raise RunError(f"split {split!r} of {ws.root} has no events: nothing to release")
    rec = run_record(ws, "", split, sorted(ids), [], 1, 0, load_config("benchmark"), env_cfg)
    missing = [k for k in PINNED if not rec.get(k)]
    if missing:
        raise RunError(f"{ws.root} lacks {', '.join(missing)} (build the corpus, index and events first): a release "
                       "must pin them")
    body = {"version": RELEASE_VERSION, "name": name or f"{ws.root.name}-{split}", "split": split,
            "event_ids": sorted(ids), "event_set_hash": rec["event_set_hash"],
            **{k: rec[k] for k in PINNED}, "env_config": env_cfg, "versions": package_versions()}
    body["release_id"] = _digest({k: v for k, v in body.items() if k != "versions"})[:16]
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "release.json"
    atomic_write_json(path, body)
    (out_dir / "release.sha256").write_text(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  release.json\n")
    return path


def load_release(path: str | Path) -> Release:
    """Read a release (a folder or its release.json) and check its own hashes."""
    p = Path(path)
    if p.is_dir():
        p = p / "release.json"
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RunError(f"{p}: not a readable release ({exc}); make one with forecast-env release") from exc
    side = p.parent / "release.sha256"
    if side.exists() and side.read_text().split()[0] != hashlib.sha256(p.read_bytes()).hexdigest():
        raise RunError(f"{p} was changed after it was written (its sha256 no longer matches release.sha256)")
    if data.get("release_id") != _digest({k: v for k, v in data.items() if k not in ("versions", "release_id")})[:16]:
        raise RunError(f"{p}: release_id does not match its content; the release was edited")
    return Release(p, data)


def differences(release: Release, run: Mapping[str, Any]) -> list[str]:
    """Every way a run's record departs from the release (empty: it was played against the release)."""
    out = []
    if run.get("split") != release.data.get("split"):
        out.append(f"split: run {run.get('split')!r} vs release {release.data.get('split')!r}")
    want, got = set(release.event_ids), set(run.get("event_ids") or [])
    if want != got:
        out.append(f"events: the run has {len(got)} events, the release {len(want)} "
                   f"({len(want - got)} missing from the run, {len(got - want)} not in the release)")
    for key in PINNED:
        if run.get(key) != release.data.get(key):
            out.append(f"{key}: run {run.get(key)!r} vs release {release.data.get(key)!r}")
    run_env = dict((run.get("config") or {}).get("env") or {})
    rel_env = dict(release.data.get("env_config") or {})
    for key in sorted(set(run_env) | set(rel_env)):
        if run_env.get(key) != rel_env.get(key):
            out.append(f"env.{key}: run {run_env.get(key)!r} vs release {rel_env.get(key)!r}")
    return out


def score_run(release: str | Path, run_dir: str | Path, out: str | Path | None = None,
              config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check that the run was made against the release, then write its report; returns the report paths."""
    rel = load_release(release)
    run_dir = Path(run_dir)
    run = read_record(run_dir)
    diff = differences(rel, run)
    if diff:
        raise RunError(f"run {run.get('run_id')} was not made against release {rel.release_id}: " + "; ".join(diff))
    from forecast_env.eval.report.render import build_report

    paths = build_report(run_dir, out=out, config=config)
    stamp = {"release_id": rel.release_id, "release": str(rel.path), "run_id": run.get("run_id"),
             "session": run.get("session", "per_date")}
    atomic_write_json(Path(out or run_dir) / "release_check.json", stamp)
    return {**paths, "release_check": Path(out or run_dir) / "release_check.json"}
