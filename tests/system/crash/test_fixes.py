"""What the crash harness found, held by fast in-process tests, and the crash-point hook itself."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from forecast_env.config import load_config
from tests.support.retrieval_data import make_rows, write_store

START = date(2025, 3, 1)


def _index_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "index").rglob("*")) if p.is_file() and p.name != "manifest.json"}


def test_an_update_killed_before_the_global_arrays_redoes_them(tmp_path: Path, monkeypatch) -> None:
    """An index update killed after its months were rebuilt (markers written) but before the global
    BM25 postings and row arrays: the rerun finds every month current, and must still rebuild the global
    files from the new months (they were left from the old corpus)."""
    from forecast_env.corpus_build import index as index_mod

    cfg = load_config("corpus")
    cfg["embed"].update(backend="static")
    old, new = make_rows(120, start=START, days=60, seed=3), make_rows(160, start=START, days=60, seed=4)
    fresh = write_store(tmp_path / "fresh", new)
    index_mod.build_index(fresh.root, cfg, progress=False)
    ws = write_store(tmp_path / "ws", old)
    index_mod.build_index(ws.root, cfg, progress=False)
    write_store(ws.root, new)  # the corpus changed: every month shard is another

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # where a kill after the months' markers stops the update

    with monkeypatch.context() as m:
        m.setattr(index_mod, "build_global", killed)
        with pytest.raises(KeyboardInterrupt):
            index_mod.build_index(ws.root, cfg, progress=False)
    again = index_mod.build_index(ws.root, cfg, progress=False)
    assert again["rebuilt"] == []  # the months were done before the kill
    assert _index_files(ws.root) == _index_files(fresh.root)


def test_temporaries_of_killed_writes_are_removed_where_a_command_starts(tmp_path: Path) -> None:
    from forecast_env.store import remove_temporaries

    (tmp_path / "a" / "b").mkdir(parents=True)
    left = [tmp_path / "a" / ".x.parquet.k2j3.tmp", tmp_path / "a" / "b" / ".manifest.json.99.tmp"]
    for p in left:
        p.write_bytes(b"half")
    kept = tmp_path / "a" / "x.parquet"
    kept.write_bytes(b"whole")
    assert remove_temporaries(tmp_path) == 2
    assert not any(p.exists() for p in left) and kept.exists()
    assert remove_temporaries(tmp_path / "missing") == 0


def _hook(env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60, check=False)


def test_the_crash_hook_counts_and_kills_at_the_named_crossing(tmp_path: Path) -> None:
    code = ("from forecast_env.crashpoints import crash_point\n"
            "for i in range(3):\n"
            "    crash_point('a'); crash_point('b'); print(i, flush=True)\n")
    counted = tmp_path / "count.txt"
    proc = _hook({"FORECAST_ENV_CRASH_COUNT": str(counted)}, code)
    assert proc.returncode == 0 and [x.split()[1] for x in counted.read_text().splitlines()] == ["a", "b"] * 3
    proc = _hook({"FORECAST_ENV_CRASH_AT": "b:2"}, code)
    assert proc.returncode == -9 and proc.stdout.split() == ["0"]
    proc = _hook({"FORECAST_ENV_CRASH_AT": "*:5"}, code)
    assert proc.returncode == -9 and proc.stdout.split() == ["0", "1"]
    proc = _hook({}, code)  # unset: no effect
    assert proc.returncode == 0 and proc.stdout.split() == ["0", "1", "2"]


def test_a_kill_inside_an_atomic_write_leaves_only_a_half_temporary(tmp_path: Path) -> None:
    """`write.temp` kills with the temporary file cut to half (as a kill during the write leaves it): the
    final name never appears, and a rerun's writer removes the temporary."""
    target = tmp_path / "out" / "t.json"
    code = (f"from forecast_env.store import atomic_write_json\n"
            f"atomic_write_json({str(target)!r}, {{'rows': list(range(1000))}})\n")
    proc = _hook({"FORECAST_ENV_CRASH_AT": "write.temp:1"}, code)
    assert proc.returncode == -9
    temps = list(target.parent.glob(".t.json.*.tmp"))
    assert not target.exists() and len(temps) == 1 and temps[0].stat().st_size > 0
    with pytest.raises(ValueError):  # cut in half: not a JSON document
        json.loads(temps[0].read_text())
    from forecast_env.store import remove_temporaries

    assert remove_temporaries(target.parent) == 1


def test_an_interrupt_stops_the_worker_pool_at_once(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM while a pool of workers is busy stops the workers (their tasks never finish), so
    the command ends now and not after every queued item."""
    from forecast_env.executor import map_unordered
    from tests.system.crash._crash_workload import task

    items = [(str(tmp_path), 0.0)] + [(str(tmp_path), 120.0)] * 3
    results = map_unordered(task, items, workers=2, threads=1)
    assert next(results) == str(tmp_path)  # the quick task
    with pytest.raises(KeyboardInterrupt):
        results.throw(KeyboardInterrupt())  # where the signal lands: the parent waiting on its workers
    assert len(list(tmp_path.glob("done-*"))) == 1  # the slow tasks were stopped, not waited for
