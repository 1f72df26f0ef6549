"""One way to run a stage's work item on whichever node the executor picks (docs/scaling.md).

A stage hands the executor (`forecast_env.executor.map_unordered`) a `NodeTask`: its step function and,
when the workspace is on object storage and the tasks run on Ray nodes that share no disk with the
driver, the workspace's URL. A work item (`WorkItem`) is a frozen dataclass that holds `root`, the
workspace folder its paths are relative to, and declares what it reads (`inputs`) and what it writes
(`outputs`), as paths relative to the workspace.

- Without a URL (a local workspace, a folder every node mounts, or the driver's staged copy when the
  tasks run on the driver), the step runs on the item as it is.
- With a URL the task runs in this node's own scratch folder for the workspace (`remote.scratch_for`):
  it fetches the inputs from the bucket (each verified against its marker's sha256; a node keeps what
  it fetched, so it reads each input once), runs the step with `root` moved there, publishes the
  outputs the step wrote (data first, marker last: a node lost mid-task leaves nothing anyone reads,
  and a retry elsewhere publishes the same bytes) and appends its line to the task log
  (`tasklog.task_log`). No file is read whole into memory to move it (`remote.BLOCK`).

The step never knows which. On the driver, `StagedWorkspace` is the other half: it publishes the
inputs that no marker lists yet before the tasks run, and fetches what they published after.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from forecast_env.errors import WorkspaceError
from forecast_env.workspace.remote import RemoteWorkspace, scratch_for, unit_of
from forecast_env.workspace.tasklog import task_log


def relative_to(root: str | Path, path: str | Path) -> str:
    """`path` relative to the workspace folder `root` when it lies under it (a POSIX path), else `path`
    as given: a file outside the workspace, which only a task that shares the driver's disk can read."""
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class WorkItem:
    """A unit of work of a stage: the workspace folder its paths are relative to, what it reads and what
    it writes there (`inputs`, `outputs`: relative paths; one ending in "/" stands for every file under
    it), and its name in the task log (`kind`, `name`). A path outside `root` stays absolute (`relative_to`):
    only a task that shares the driver's disk can run such an item."""

    root: str  # "" when every path is a local path as it is
    #: The task log's kind of this item (e.g. "part", "merge.month", "index.month").
    kind: ClassVar[str] = "task"

    @property
    def name(self) -> str:
        """The item's name in the task log (a file, a month, a stage)."""
        return ""

    def path(self, rel: str) -> Path:
        """A path of the item as a local path (`rel` under `root`; an absolute path stays as it is)."""
        return Path(self.root) / rel

    def inputs(self) -> tuple[str, ...]:
        """The workspace files the step reads (fetched from the bucket first on a node)."""
        return ()

    def outputs(self, result: Any) -> tuple[str, ...]:
        """The workspace files the step wrote, given what it returned (published from a node)."""
        return ()


Item = TypeVar("Item", bound=WorkItem)
R = TypeVar("R")


@dataclass(frozen=True)
class NodeTask(Generic[Item, R]):
    """`step` over work items, run in place, or (`url`: a workspace on object storage, nodes without
    the driver's disk) in this node's scratch between fetching the inputs and publishing the outputs."""

    step: Callable[[Item], R]
    url: str | None = None

    def __call__(self, item: Item) -> R:
        """Run the step on one item where this process is (see the module docstring)."""
        if self.url is None:
            return self.step(item)
        node = scratch_for(self.url)
        with task_log(item.kind, item.name):
            bucket = RemoteWorkspace.at(self.url)
            inputs = [_in_workspace(r) for r in item.inputs()]
            if inputs:
                bucket.fetch(inputs, node)
            result = self.step(dataclasses.replace(item, root=str(node)))
            written = [r for r in _expand(node, item.outputs(result)) if (node / r).is_file()]
            if written:
                bucket.publish(node, relpaths=written)
        return result


def _in_workspace(rel: str) -> str:
    if Path(rel).is_absolute():
        raise WorkspaceError(f"{rel}: a task's file outside the staged workspace; a workspace on object storage "
                             "holds every file its tasks read and write")
    return rel


def _expand(root: Path, rels: Sequence[str]) -> list[str]:
    # a path ending in "/" stands for every file under it in this local copy
    out: list[str] = []
    for rel in rels:
        if rel.endswith("/"):
            out += sorted(p.relative_to(root).as_posix() for p in (root / rel).rglob("*") if p.is_file())
        else:
            out.append(_in_workspace(rel))
    return out


def _stat(path: Path) -> tuple[int, int] | None:
    return (path.stat().st_size, path.stat().st_mtime_ns) if path.exists() else None


@dataclass(frozen=True)
class StagedWorkspace:
    """A workspace on object storage whose tasks run on nodes that share no disk with the driver: its URL
    and the driver's staged copy (`remote.staged`), the `root` of the driver's work items. The driver's
    half of `NodeTask`: the inputs go up before the tasks run, the outputs come down after."""

    url: str
    root: str

    def task(self, step: Callable[[Item], R]) -> NodeTask[Item, R]:
        """`step` as a task that runs in a node's scratch over this workspace."""
        return NodeTask(step, self.url)

    def relpath(self, path: str | Path) -> str:
        """A path of the driver's staged copy relative to it (an error for a file outside it)."""
        rel = relative_to(self.root, path)
        if Path(rel).is_absolute():
            raise WorkspaceError(f"{path}: a task's file outside the staged workspace {self.root}")
        return rel

    def bucket(self) -> RemoteWorkspace:
        """The workspace on object storage."""
        return RemoteWorkspace.at(self.url)

    def publish(self, paths: Iterable[str | Path]) -> None:
        """Publish files of the driver's staged copy (added to, or replaced in, their units)."""
        self.bucket().publish(Path(self.root), relpaths=[self.relpath(p) for p in paths])

    def ensure_published(self, paths: Iterable[str | Path]) -> None:
        """Publish those of the driver's files the nodes will read that no marker lists yet (the staged
        copy was pulled from the bucket, so a listed file is the driver's; e.g. parts of a workspace first
        built locally and pushed without them). Reads the markers of their units only."""
        rels = sorted({self.relpath(p) for p in paths})
        bucket = self.bucket()
        listed = {r for m in bucket.markers_of(unit_of(r) for r in rels).values() for r in m["files"]}
        missing = [r for r in rels if r not in listed]
        if missing:
            bucket.publish(Path(self.root), relpaths=missing)

    def fetch(self, paths: Sequence[str | Path], before: Sequence[tuple[int, int] | None] | None = None) -> list[bool]:
        """Bring files nodes published into the driver's staged copy; per file, whether the driver's copy
        changed since `before` (its (size, mtime_ns) before the tasks ran; default: before this fetch). A
        task that ran on the driver's own machine with the same scratch wrote the copy itself: `before`
        taken ahead of the tasks still sees that."""
        local = [Path(self.root) / self.relpath(p) for p in paths]
        was = list(before) if before is not None else [_stat(p) for p in local]
        self.bucket().fetch([self.relpath(p) for p in local], self.root)
        return [_stat(p) != b for p, b in zip(local, was)]

    def fetch_outputs(self, item: WorkItem, result: Any) -> None:
        """Bring what a node published for `item` into the driver's staged copy (a folder output: every
        file its unit's marker lists under it, one marker read)."""
        rels = list(item.outputs(result))
        folders = [r for r in rels if r.endswith("/")]
        files = [self.relpath(r) for r in rels if not r.endswith("/")]
        bucket = self.bucket()
        if folders:
            markers = bucket.markers_of(unit_of(f) for f in folders)
            for folder in folders:
                unit = markers.get(unit_of(folder))
                if unit is None:
                    raise WorkspaceError(f"{self.url}: {folder} was written on a node but is not published "
                                         f"(unit {unit_of(folder)}); rerun the build")
                files += sorted(r for r in unit["files"] if r.startswith(folder))
        if files:
            bucket.fetch(files, self.root)
