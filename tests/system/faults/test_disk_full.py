"""A full disk during each build stage and during a run (a size-limited tmpfs the test mounts).

Each stage runs through the CLI on a workspace inside the tmpfs, pre-filled to leave less space than
the stage writes; the space is then freed step by step, so one stage is stopped several times at
different points (for the corpus: in the per-WARC parts and in the merge). Every stop must print one
`error: disk full: ...` line naming a path under the workspace, exit `DISK_FULL_EXIT`, show no
traceback, leave no temporary file and damage nothing already written (every file then present is
byte-equal to the one a build that never failed writes); the final rerun must give those bytes.
Mounting needs root: CI runs as root, so there the test runs (a skip in CI fails the run).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from forecast_env.cli.main import main
from forecast_env.errors import DISK_FULL_EXIT
from forecast_env.store import drop_keys

MOUNT_BYTES = 24 << 20
PAGE = 4096
STATIC = ["--set", "embed.backend=static"]  # the index build's fast encoder: the disk is under test, not the model
# what records when or how long, not what was built: left out of the byte comparison
VOLATILE_KEYS = {"created", "seconds", "at", "started", "finished", "mtime_ns", "elapsed_s", "timings",
                 "time_s", "wall_s", "latency_ms",
                 "episodes_run_now", "workspace"}  # what this invocation played, and where: not what it built
STATE_DIRS = ("corpus/merge/",)  # the merge's own resumable state (file mtimes), not an artifact


def _mount(target: Path, size: int) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root (CI runs as root)")
    target.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size // 1024}k", "tmpfs", str(target)],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip() or proc.returncode}")


@pytest.fixture()
def disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh 24 MiB tmpfs, unmounted after the test."""
    mnt = tmp_path / "disk"
    _mount(mnt, MOUNT_BYTES)
    try:
        yield mnt
    finally:
        gc.collect()  # open handles of the stopped in-process runs
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def leave_free(mnt: Path, free: int) -> None:
    """Grow or shrink `mnt/.fill` so that `free` bytes (whole pages) stay available on `mnt`."""
    fill = mnt / ".fill"
    fill.touch()
    avail = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
    size = max(0, fill.stat().st_size + avail - free) // PAGE * PAGE
    if size < fill.stat().st_size:
        os.truncate(fill, size)
    elif size > fill.stat().st_size:
        fd = os.open(fill, os.O_WRONLY)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)


def fingerprint(path: Path) -> str:
    """The file's bytes, or for JSON its content without times and durations; for a manifest its files."""
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        if path.name == "manifest.json":  # the files it lists, less the reports and records that hold times
            data = {k: v for k, v in data.get("files", {}).items() if not k.endswith((".json", "tool_calls.parquet"))}
        return json.dumps(drop_keys(data, VOLATILE_KEYS), sort_keys=True)
    if path.name == "tool_calls.parquet":  # a tool call's latency is a time
        t = pq.read_table(path)
        return str(t.drop_columns([c for c in t.column_names if "ms" in c or "second" in c]).to_pylist())
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(ws: Path, under: tuple[str, ...]) -> dict[str, str]:
    """Fingerprints of every artifact file below `ws/<under>` (state dirs, fill and claims left out)."""
    out = {}
    for top in under:
        for p in sorted((ws / top).rglob("*")):
            rel = p.relative_to(ws).as_posix()
            if p.is_file() and not rel.startswith(STATE_DIRS) and p.suffix != ".claimed":
                out[rel] = fingerprint(p)
    return out


def page_bytes(ws: Path, under: str) -> int:
    """What the files below `ws/under` take on a tmpfs (whole pages)."""
    return sum(-(-p.stat().st_size // PAGE) * PAGE for p in (ws / under).rglob("*") if p.is_file())


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run one command in this process; its exit status and stderr."""
    capsys.readouterr()
    rc = main(argv)
    return rc, capsys.readouterr().err


def stage_argv(stage: str, world: Path, ws: Path) -> list[str]:
    """The CLI command of one stage."""
    return {
        "corpus": ["corpus", "build", "--warc", str(world / "news" / "*.warc.gz"), "--workspace", str(ws),
                   "--workers", "1", "--no-progress"],
        "index": ["index", "build", "--workspace", str(ws), "--no-progress", *STATIC],
        "events": ["events", "build", "--polymarket", str(world / "polymarket"), "--workspace", str(ws),
                   "--no-progress"],
        "run": ["run", "--workspace", str(ws), "--agents", "uniform,retrieval", "--split", "eval", "--workers", "1",
                "--run-id", "r1", "--no-progress"],
    }[stage]


STAGES = ("corpus", "index", "events", "run")
IN_PROGRESS = ("manifest.json", "runs/r1/run.json")
OUTPUT = {"corpus": "corpus", "index": "index", "events": "events", "run": "runs"}


@pytest.fixture(scope="module")
def reference(micro_world: Path, micro_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every stage built once on a roomy disk: the bytes a build that never failed writes (the corpus is the
    session's micro corpus: `corpus build --workers 1` writes the same bytes)."""
    ws = tmp_path_factory.mktemp("disk_ref")
    shutil.copytree(micro_corpus / "corpus", ws / "corpus")
    for stage in STAGES[1:]:
        assert main(stage_argv(stage, micro_world, ws)) == 0, stage
    return ws


def fill_and_resume(stage: str, world: Path, ref: Path, ws: Path, mnt: Path, steps: list[Callable[[int], int]],
                    capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Stop `stage` by a full disk once per step (a step maps the bytes the stage still has to write to the
    space it gets), then free the disk and finish it; check every stop and the final bytes. Returns the path
    each stop named (relative to `ws`)."""
    earlier = tuple(OUTPUT[s] for s in STAGES[: STAGES.index(stage)])
    before = snapshot(ws, earlier)
    final = snapshot(ref, (OUTPUT[stage],))
    need = page_bytes(ref, OUTPUT[stage])
    landed = []
    for frac, step in enumerate(steps):
        left = need - (page_bytes(ws, OUTPUT[stage]) if (ws / OUTPUT[stage]).exists() else 0)
        leave_free(mnt, step(left))
        rc, err = cli(stage_argv(stage, world, ws), capsys)
        lines = err.strip().splitlines()
        assert rc == DISK_FULL_EXIT, (stage, frac, rc, err[-2000:])
        assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
        line = lines[0]
        assert line.startswith("error: disk full: could not write ") and "no space left on device" in line
        assert "free space" in line and "rerun the same command" in line
        named = line.removeprefix("error: disk full: could not write ").split(" (")[0]
        assert named.startswith(str(ws) + "/"), line
        landed.append(Path(named).relative_to(ws).as_posix())
        gc.collect()  # a stopped in-process run's unreachable writers hold unlinked pages; a real CLI exits
        assert not [p for p in ws.rglob("*") if p.name.endswith(".tmp")], "temporary files left"
        assert snapshot(ws, earlier) == before, "an earlier stage's files changed"
        now = snapshot(ws, (OUTPUT[stage],))
        # a manifest and a run's record are rewritten when the stage finishes: the rest must be final already
        damaged = [k for k, v in now.items() if k in final and final[k] != v and not k.endswith(IN_PROGRESS)]
        assert not damaged, (frac, damaged)
        assert not set(now) - set(final), set(now) - set(final)
    leave_free(mnt, MOUNT_BYTES)
    rc, err = cli(stage_argv(stage, world, ws), capsys)
    assert rc == 0, err[-2000:]
    after = snapshot(ws, (OUTPUT[stage],))
    differ = {k: (after.get(k), final.get(k)) for k in set(after) | set(final) if after.get(k) != final.get(k)}
    assert not differ, f"not the bytes of a clean build: {differ}"
    assert snapshot(ws, earlier) == before
    if os.environ.get("FORECAST_ENV_FUZZ_REPORT"):  # the figures of the results notes: where each stop landed
        out = Path(os.environ["FORECAST_ENV_FUZZ_REPORT"]) / f"disk_full_{stage}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"stage": stage, "stops": landed, "resumed_equal": True}, indent=1))
    return landed


def _copy_stages(ref: Path, ws: Path, stages: tuple[str, ...]) -> None:
    for s in stages:
        shutil.copytree(ref / OUTPUT[s], ws / OUTPUT[s])


def test_corpus_build_stops_cleanly_in_the_parts_and_in_the_merge(micro_world, reference, disk, capsys):
    ws = disk / "ws"
    parts = page_bytes(reference, "corpus/parts")
    total = page_bytes(reference, "corpus")
    # the parts are written first (one WARC at a time), then the merge: a stop in each
    steps = [lambda left: int(0.3 * parts), lambda left: left - int(0.5 * (total - parts))]
    landed = fill_and_resume("corpus", micro_world, reference, ws, disk, steps, capsys)
    assert landed[0].startswith("corpus/parts/"), landed
    assert not landed[1].startswith("corpus/parts/"), landed


@pytest.mark.parametrize("stage", ["index", "events", "run"])
def test_later_stages_stop_cleanly_and_resume(stage, micro_world, reference, disk, capsys):
    ws = disk / "ws"
    _copy_stages(reference, ws, STAGES[: STAGES.index(stage)])
    fracs = (0.2, 0.7) if stage == "events" else (0.1, 0.5, 0.9)  # events rebuilds from scratch: slower
    steps = [lambda left, f=f: int(f * left) for f in fracs]
    landed = fill_and_resume(stage, micro_world, reference, ws, disk, steps, capsys)
    assert all(p.startswith(OUTPUT[stage] + "/") for p in landed), landed


MMAP_SCRIPT = """
import sys
from pathlib import Path
import numpy as np
from forecast_env.errors import DiskFullError
from forecast_env.retrieval.bm25 import MonthPostings, build_global_postings
n = 400_000  # 3.2 MB of rows + tfs: more than the disk holds
mp = MonthPostings(terms=["a"], indptr=np.array([0, n], np.int64), rows=np.arange(n, dtype=np.int32),
                   tfs=np.ones(n, np.float32), doclen=np.ones(n, np.int32))
out = Path(sys.argv[1]) / "bm25"
try:
    build_global_postings(out, [mp])
except DiskFullError as exc:
    print("DISKFULL", exc)
"""


def test_memory_mapped_postings_fail_with_an_error_not_sigbus(disk: Path) -> None:
    """The global BM25 postings are written through memory maps: space is reserved first, so a full disk is
    an error (in a child process: SIGBUS would kill pytest)."""
    leave_free(disk, 2 << 20)
    proc = subprocess.run([sys.executable, "-c", MMAP_SCRIPT, str(disk)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])  # -7 is SIGBUS
    assert "DISKFULL disk full: could not write " in proc.stdout and "/bm25/tfs.npy (" in proc.stdout
    assert not [p for p in disk.rglob("*") if p.name.endswith(".tmp")]


def test_a_short_faiss_write_raises(disk: Path) -> None:
    """faiss's own file writer only prints a close error when its last buffer cannot be written and leaves an
    empty file; `write_faiss_index` raises instead and leaves nothing."""
    import faiss
    import numpy as np

    from forecast_env.errors import DiskFullError
    from forecast_env.retrieval.layout import write_faiss_index

    index = faiss.IndexFlatIP(8)
    index.add(np.ones((3, 8), np.float32))
    leave_free(disk, 0)
    with pytest.raises(DiskFullError, match="disk full: could not write .*m.faiss"):
        write_faiss_index(index, disk / "m.faiss")
    assert not list(disk.glob("*m.faiss*"))
    leave_free(disk, 1 << 20)
    write_faiss_index(index, disk / "m.faiss")
    assert faiss.read_index(str(disk / "m.faiss")).ntotal == 3


def test_a_file_size_limit_is_its_own_message(tmp_path: Path) -> None:
    """EFBIG (RLIMIT_FSIZE, a file system's largest file) is not a full disk: the message says which."""
    from forecast_env.errors import DiskFullError
    from forecast_env.store import atomic_write_bytes

    script = ("import resource, signal, sys\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))\n"
              "from forecast_env.store import atomic_write_bytes\n"
              "from forecast_env.errors import DiskFullError\n"
              "try:\n    atomic_write_bytes(sys.argv[1], b'x' * (1 << 20))\n"
              "except DiskFullError as exc:\n    print(exc)\n")
    target = tmp_path / "big.bin"
    proc = subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("file too large: could not write ") and "ulimit -f" in proc.stdout
    assert not list(tmp_path.iterdir())
    with contextlib.suppress(DiskFullError):
        atomic_write_bytes(target, b"fits")
    assert target.read_bytes() == b"fits"


@pytest.mark.parametrize(("exc", "status", "start"), [
    (OSError(28, "No space left on device"), DISK_FULL_EXIT, "error: disk full: could not write "),
    (RuntimeError("parquet: underlying IO error: No space left on device (os error 28)"), DISK_FULL_EXIT,
     "error: disk full: could not write "),
    (OSError(27, "File too large"), DISK_FULL_EXIT, "error: file too large: could not write "),
    (ValueError("not a disk problem"), 1, "internal error: ValueError"),
])
def test_the_cli_maps_a_full_disk_from_any_library(exc, status, start, monkeypatch, capsys, tmp_path):
    """Writes outside the atomic helpers (polars, faiss, a plain open) still give the one line and the status;
    without a file name in the error the line names the command's workspace."""
    import argparse

    import forecast_env.cli.main as cli_main

    def parser() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser()
        p.add_argument("--workspace")

        def fail(args: argparse.Namespace) -> int:
            raise exc
        p.set_defaults(func=fail)
        return p

    monkeypatch.setattr(cli_main, "build_parser", parser)
    rc = cli_main.main(["--workspace", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == status and err.startswith(start) and len(err.strip().splitlines()) == 1
    if status == DISK_FULL_EXIT:
        assert str(tmp_path) in err and "Traceback" not in err


def test_a_user_error_that_mentions_size_is_still_bad_input(monkeypatch, capsys):
    """Only the cause of a project error decides: its own words ('too large') do not make it a full disk."""
    import argparse

    import forecast_env.cli.main as cli_main
    from forecast_env.errors import ConfigError

    def parser() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser()

        def fail(args: argparse.Namespace) -> int:
            raise ConfigError("corpus.read.max_payload_bytes: file too large a value; use at most 50000000")
        p.set_defaults(func=fail)
        return p

    monkeypatch.setattr(cli_main, "build_parser", parser)
    assert cli_main.main([]) == 2 and capsys.readouterr().err.startswith("error: corpus.read")
