"""The crash harness: run a long CLI command, kill it with SIGKILL at seeded points, rerun it to the end.

A command is first run once in counting mode (`forecast_env.crashpoints`): the labels it crosses, in
order, are the kill points it has. A seeded schedule picks crossings from that list; each becomes
`FORECAST_ENV_CRASH_AT=label:k` for one run of the command, which dies there (SIGKILL). Kills are
chained on one workspace (each run resumes what the killed ones left), and after each kill the
workspace is scanned: every file a reader would take (not hidden, not a download's `.part`) must
read whole, and must equal the uninterrupted build's file where that build has one (timing fields
aside). The last run goes to the end; its artefacts must equal the uninterrupted build's byte for
byte (manifests, reports and run records compared without their times and durations).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from forecast_env.crashpoints import CRASH_AT_VAR, CRASH_COUNT_VAR, CRASH_SIGNAL_VAR
from forecast_env.store import drop_keys

DRIVER = Path(__file__).with_name("_driver.py")
#: Fields that hold a time or a duration, or count what one invocation did (a resumed run does less):
#: they differ between any two runs, so they are left out.
VOLATILE_KEYS = frozenset({"created", "seconds", "timings", "latency_ms", "mtime_ns", "started", "finished",
                           "updated", "elapsed_s", "wall_s", "files_processed", "episodes_run_now"})
#: Build state that is neither an artefact nor read as one (plans keyed by mtimes and paths), root-relative.
SKIP_FILES = frozenset({"merge/months.json"})
#: Seconds one run of a command may take before the harness gives up on it.
RUN_TIMEOUT_S = 300


@dataclass
class Command:
    """One long CLI command of a stage, run in `cwd` (argv without the program)."""

    stage: str
    argv: list[str]
    roots: list[Path]                       # the folders it writes (compared and scanned)
    env: dict[str, str] = field(default_factory=dict)
    progress: tuple[str, ...] = ()          # files rewritten as it goes (records of the work so far), root-relative
    base: Path | None = None                # the workspace: its path is replaced in compared text (default: the
    #                                         first root's parent)

    @property
    def workspace(self) -> Path:
        return self.base or self.roots[0].parent

    def files(self) -> list[tuple[str, Path, Path]]:
        """(key, file, root) of every file a reader may take, the key root-relative with the root's number."""
        return [(f"{i}:{p.relative_to(root).as_posix()}", p, root) for i, root in enumerate(self.roots)
                for p in _reader_files(root) if p.relative_to(root).as_posix() not in SKIP_FILES]


@dataclass
class Outcome:
    """What a chain of kills did: kill points hit (by label), runs that ended early, mismatches."""

    stage: str
    kills: Counter = field(default_factory=Counter)
    finished_before_the_point: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.kills.values())


def run_command(cmd: Command, crash: str | None = None, count_file: Path | None = None,
                sig: str | None = None) -> subprocess.CompletedProcess:
    """Run the command once (optionally dying at `crash`, or counting its crossings into `count_file`)."""
    env = {k: v for k, v in os.environ.items() if k not in (CRASH_AT_VAR, CRASH_COUNT_VAR, CRASH_SIGNAL_VAR)}
    env.update(cmd.env)
    if crash:
        env[CRASH_AT_VAR] = crash
    if count_file is not None:
        env[CRASH_COUNT_VAR] = str(count_file)
    if sig:
        env[CRASH_SIGNAL_VAR] = sig
    return subprocess.run([sys.executable, str(DRIVER), *cmd.argv], env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, check=False)


def count_points(cmd: Command, count_file: Path) -> list[str]:
    """The labels an uninterrupted run of `cmd` crosses, in order (it runs the command to the end)."""
    count_file.unlink(missing_ok=True)
    proc = run_command(cmd, count_file=count_file)
    assert proc.returncode == 0, f"{cmd.stage}: counting run failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return [line.split(" ", 1)[1] for line in count_file.read_text().splitlines()] if count_file.exists() else []


def schedule(labels: Sequence[str], n: int, rng: random.Random) -> list[str]:
    """`n` kill points `label:k` drawn from the crossings of a counting run (each crossing equally likely)."""
    seen: Counter = Counter()
    points = []
    for label in labels:
        seen[label] += 1
        points.append(f"{label}:{seen[label]}")
    return [points[i] for i in sorted(rng.sample(range(len(points)), min(n, len(points))), key=lambda _: rng.random())]


def kill_chain(cmd: Command, points: Sequence[str], reference: dict[str, Any],
               check: Callable[[Command], list[str]] | None = None, outcome: Outcome | None = None,
               final: bool = True) -> Outcome:
    """Kill `cmd` at each of `points` in turn (each run resuming the last), then (`final`) run it to the end.

    After each kill the state is scanned (`scan_state` and `check`); at the end the artefacts are
    compared with `reference` (`artefacts` of an uninterrupted run)."""
    out = outcome or Outcome(cmd.stage)
    for point in points:
        proc = run_command(cmd, crash=point)
        if proc.returncode == -signal.SIGKILL:
            out.kills[point.rsplit(":", 1)[0]] += 1
        elif proc.returncode == 0:
            out.finished_before_the_point += 1  # the resumed run had less left to do than the point
        else:
            out.problems.append(f"{cmd.stage} at {point}: exit {proc.returncode}: {proc.stderr.strip()[-1500:]}")
            return out
        problems = scan_state(cmd, reference) + (check(cmd) if check else [])
        out.problems += [f"{cmd.stage} after a kill at {point}: {p}" for p in problems]
    if not final:
        return out
    proc = run_command(cmd)
    if proc.returncode != 0:
        out.problems.append(f"{cmd.stage}: the final rerun failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
        return out
    out.problems += [f"{cmd.stage} final: {p}" for p in compare(artefacts(cmd), reference)]
    for root in cmd.roots:  # what the kills left half done is gone once the rerun has finished
        out.problems += [f"{cmd.stage} final: {p.relative_to(root)} left behind" for p in root.rglob(".*")
                         if p.name.endswith(".tmp") or p.name.endswith(".spill")]
    return out


def seeded_chain(cmd: Command, n_full: int, kills: int, rng: random.Random, reference: dict[str, Any],
                 count_file: Path, check: Callable[[Command], list[str]] | None = None,
                 outcome: Outcome | None = None, before_final: Callable[[], None] | None = None) -> Outcome:
    """Like `kill_chain`, the points drawn as the chain goes: the next kill is at crossing k (any label) of
    the next run, k uniform over what is left of the `n_full` crossings of an uninterrupted run (what the
    killed runs crossed counts as done), so resumed runs, which do less, are still killed mid-way. The
    chain stops early once a run finishes before its point; then the final rerun and the comparison."""
    out = outcome or Outcome(cmd.stage)
    done = 0
    for _ in range(kills):
        k = rng.randint(1, max(1, n_full - done))
        count_file.unlink(missing_ok=True)
        proc = run_command(cmd, crash=f"*:{k}", count_file=count_file)
        if proc.returncode == 0:
            out.finished_before_the_point += 1
            break
        if proc.returncode != -signal.SIGKILL:
            out.problems.append(f"{cmd.stage} at *:{k}: exit {proc.returncode}: {proc.stderr.strip()[-1500:]}")
            return out
        crossed = count_file.read_text().splitlines() if count_file.exists() else []
        out.kills[crossed[-1].split(" ", 1)[1] if crossed else "?"] += 1
        done += len(crossed)
        problems = scan_state(cmd, reference) + (check(cmd) if check else [])
        out.problems += [f"{cmd.stage} after a kill at *:{k}: {p}" for p in problems]
    if before_final is not None:  # e.g. a signal stop of a resumed run
        before_final()
    return kill_chain(cmd, [], reference, check, outcome=out)


# ---------------------------------------------------------------------------------------------
# artefacts, normalized
# ---------------------------------------------------------------------------------------------


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def _reader_files(root: Path) -> list[Path]:
    """Files under `root` a reader may take: not hidden (temporaries, spills, progress), not a `.part`."""
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and not _hidden(p.relative_to(root))
                  and not p.name.endswith((".part", ".part.json")))


def normalized(path: Path, root: Path, base: Path) -> Any:
    """A file's content as compared: bytes, or for JSON, JSONL and Parquet holding times, the data without
    them (the workspace's own path replaced, so two workspaces compare)."""
    name = path.name
    if name.endswith((".json", ".jsonl")):
        text = path.read_text(encoding="utf-8").replace(str(base), "<WS>")
        if name.endswith(".jsonl"):
            return [drop_keys(json.loads(line), VOLATILE_KEYS) for line in text.splitlines() if line.strip()]
        obj = drop_keys(json.loads(text), VOLATILE_KEYS)
        if name == "manifest.json" and isinstance(obj, dict) and isinstance(obj.get("files"), dict):
            # a file holding times has another sha256 in each run: the file itself is compared without them
            obj["files"] = {rel: info if not _volatile_file(root / rel) else "(compared without times)"
                            for rel, info in obj["files"].items()}
        return obj
    if name.endswith(".parquet"):
        data = path.read_bytes()
        table = pq.read_table(path)
        gone = [c for c in table.column_names if c in VOLATILE_KEYS or c == "run_id"]
        return table.drop_columns(gone).to_pylist() if gone else data
    return path.read_bytes()


def _volatile_file(path: Path) -> bool:
    if path.name.endswith((".json", ".jsonl")):
        return True  # records and reports: compared with their times removed
    if path.suffix == ".parquet" and path.exists():
        names = pq.read_schema(path).names
        return any(c in VOLATILE_KEYS or c == "run_id" for c in names)
    return False


def artefacts(cmd: Command) -> dict[str, Any]:
    """Every reader-visible file the command wrote, normalized: {root name/relative path: content}."""
    return {key: normalized(p, root, cmd.workspace) for key, p, root in cmd.files()}


def compare(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Differences between two artefact sets (missing, extra, different files)."""
    problems = [f"{k}: missing" for k in sorted(set(want) - set(got))]
    problems += [f"{k}: not in the uninterrupted build" for k in sorted(set(got) - set(want))]
    problems += [f"{k}: differs from the uninterrupted build" for k in sorted(set(got) & set(want))
                 if got[k] != want[k]]
    return problems


# ---------------------------------------------------------------------------------------------
# the state a kill leaves
# ---------------------------------------------------------------------------------------------


def read_whole(path: Path) -> str | None:
    """None when a reader would take `path` whole; else why it could not (a half-written file)."""
    try:
        name = path.name
        if name.endswith(".parquet"):
            pq.read_table(path)
        elif name.endswith(".jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                json.loads(line)
        elif name.endswith(".json"):
            json.loads(path.read_text(encoding="utf-8"))
        elif name.endswith(".npy"):
            np.load(path, allow_pickle=False)
        elif name.endswith(".arrow"):
            with pa.memory_map(str(path)) as src:
                pa.ipc.open_file(src).read_all()
        elif name.endswith(".faiss"):
            import faiss

            faiss.read_index(str(path))
        elif name.endswith(".paths.gz"):  # a listing (a WARC may be cut on purpose: compared with its source)
            import gzip

            with gzip.open(path) as fh:
                while fh.read(1 << 20):
                    pass
        elif name.endswith((".md", ".txt")):
            path.read_text(encoding="utf-8")
    except Exception as exc:  # any failure to read is the finding
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


def scan_state(cmd: Command, reference: dict[str, Any]) -> list[str]:
    """After a kill: every reader-visible file reads whole and, where the uninterrupted build has it
    and it is a finished artefact, equals it; manifests name only files that match them."""
    from forecast_env.store import verify_manifest

    problems = []
    got = {}
    for key, p, root in cmd.files():
        why = read_whole(p)
        if why is not None:
            problems.append(f"{key}: a reader would take a half-written file ({why})")
            continue
        if key in reference and not _progress_file(key, cmd):
            got[key] = normalized(p, root, cmd.workspace)
    for root in cmd.roots:
        for m in root.rglob("manifest.json"):
            if not _hidden(m.relative_to(root)) and m.parent != root.parent and _is_store_manifest(m):
                problems += [f"manifest {m.relative_to(root.parent)}: {p}" for p in verify_manifest(m.parent)]
    problems += [f"{k}: present after the kill but not the finished file" for k in sorted(got)
                 if got[k] != reference[k]]
    return problems


def _progress_file(key: str, cmd: Command) -> bool:
    """Files rewritten as a command goes (records of the work so far), not finished artefacts."""
    rel = key.split(":", 1)[1]
    return rel in ("run.json", "failures.jsonl") or rel in cmd.progress


def _is_store_manifest(path: Path) -> bool:
    """A manifest in the `store.write_manifest` format (files with sha256)."""
    try:
        files = json.loads(path.read_text()).get("files")
    except (OSError, ValueError):
        return True  # unreadable: verify_manifest reports it
    return isinstance(files, dict) and all(isinstance(v, dict) and {"sha256", "bytes"} <= set(v)
                                           for v in files.values())
