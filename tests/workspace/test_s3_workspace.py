"""A workspace on object storage (forecast_env/workspace/remote.py) over a real S3 server (moto, tests/support/s3server.py):
the micro world's corpus, index and events built into s3://... equal a local build byte for byte, readers
never see a half-published unit, and a failed publish or build resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_env.errors import WorkspaceError
from forecast_env.workspace.remote import RemoteWorkspace, is_remote, pull_workspace, traffic, unit_of
from forecast_env.workspace.tasklog import TASK_LOG

#: reader-visible files that hold build times or paths (compared through their snapshot ids instead)
VOLATILE = ("manifest.json", "report.json", "report.md", "months.json")


def _content_files(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if (not p.is_file() or rel.startswith(("corpus/parts/", "runs/")) or p.name in VOLATILE
                or any(s.startswith(".") for s in rel.split("/"))):
            continue
        out[rel] = p.read_bytes()
    return out


@pytest.fixture(scope="module")
def s3_world(s3_server: str, micro_world: Path, micro_events: Path, tmp_path_factory: pytest.TempPathFactory):
    """The micro world built into a fresh bucket through the public API, and its pulled copy."""
    import boto3

    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events

    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="world")
    url = "s3://world/ws"
    corpus = build_corpus(sorted((micro_world / "news").glob("*.warc.gz")), url, workers=1, progress=False)
    index = build_index(url, progress=False)
    build_events(micro_world / "polymarket", url, progress=False)
    pulled = pull_workspace(url, tmp_path_factory.mktemp("pulled"))
    return {"url": url, "corpus": corpus, "index": index, "pulled": pulled, "local": micro_events}


def test_s3_build_equals_local_build(s3_world) -> None:
    local, pulled = s3_world["local"], s3_world["pulled"]
    want, got = _content_files(local), _content_files(pulled)
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []
    for artifact in ("corpus", "index"):
        mine = json.loads((pulled / artifact / "manifest.json").read_text())
        theirs = json.loads((local / artifact / "manifest.json").read_text())
        assert mine["snapshot_id"] == theirs["snapshot_id"]
        assert {k: v["sha256"] for k, v in mine["files"].items()} == {
            k: v["sha256"] for k, v in theirs["files"].items() if k.split("/")[-1] not in VOLATILE
        } | {k: v["sha256"] for k, v in mine["files"].items() if k.split("/")[-1] in VOLATILE}
    assert s3_world["corpus"]["snapshot_id"] == json.loads((local / "corpus/manifest.json").read_text())["snapshot_id"]


def test_units_and_markers(s3_world) -> None:
    remote = RemoteWorkspace.at(s3_world["url"])
    units = remote.published(refresh=True)
    assert {"corpus", "index", "events"} <= set(units)
    assert any(u.startswith("corpus/parts/") for u in units) and any(u.startswith("index/months/") for u in units)
    # every listed object exists with the size its marker gives
    for marker in units.values():
        for rel, entry in marker["files"].items():
            assert remote.fs.size(remote.key(rel)) == entry["bytes"]


def test_search_through_s3_url(s3_world) -> None:
    from forecast_env.retrieval.searcher import Searcher

    local = Searcher.open(s3_world["local"])
    remote = Searcher.open(s3_world["url"])
    day = local.last_day
    a = [h.doc_id for h in local.search("election results", as_of=day, k=5)]
    b = [h.doc_id for h in remote.search("election results", as_of=day, k=5)]
    assert a and a == b


def test_reader_sees_only_published_units(s3_bucket: str, tmp_path: Path) -> None:
    """Data objects without their marker (a publish killed between the two) are invisible; the unit's
    previous version stays readable until the new marker lands; a rerun publishes it."""
    src = tmp_path / "src"
    (src / "index" / "dense").mkdir(parents=True)
    (src / "index" / "dense" / "2024-01.faiss").write_bytes(b"v1" * 100)
    (src / "index" / "manifest.json").write_text('{"v": 1}')
    url = f"{s3_bucket}/ws"
    remote = RemoteWorkspace.at(url)
    remote.publish(src, prefix="index/")
    # a second publish killed after its data objects: a child process dies at the crash point
    (src / "index" / "dense" / "2024-02.faiss").write_bytes(b"new" * 50)
    code = ("import sys; from forecast_env.workspace.remote import RemoteWorkspace; "
            "RemoteWorkspace.at(sys.argv[1]).publish(sys.argv[2], prefix='index/')")
    env = {**os.environ, "FORECAST_ENV_CRASH_AT": "wsio.data:1"}
    proc = subprocess.run([sys.executable, "-c", code, url, str(src)], env=env, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert remote.fs.exists(remote.key("index/dense/2024-02.faiss"))  # the data object is there ...
    fresh = RemoteWorkspace.at(url)
    assert "index/months/2024-02" not in fresh.published(refresh=True)  # ... but not published
    # the artifact's own marker went first: no reader takes a generation that is being changed
    assert "index" not in fresh.published() and "index/months/2024-01" in fresh.published()
    with pytest.raises(WorkspaceError, match="interrupted or is running"):
        pull_workspace(url, tmp_path / "mid", prefixes=("index/",))
    out = tmp_path / "out"
    fresh.pull(out)
    assert not (out / "index/dense/2024-02.faiss").exists()
    assert (out / "index/dense/2024-01.faiss").read_bytes() == b"v1" * 100
    # resume: the rerun publishes the unit, the reader then sees it
    assert RemoteWorkspace.at(url).publish(src, prefix="index/") == ["index/months/2024-02", "index"]
    RemoteWorkspace.at(url).pull(out)
    assert (out / "index/dense/2024-02.faiss").read_bytes() == b"new" * 50


def test_reader_rejects_bytes_its_marker_does_not_list(s3_bucket: str, tmp_path: Path) -> None:
    """An object changed under a live marker (a writer that broke the protocol, or a republish in flight)
    is never handed to the reader: its sha256 is checked while it downloads."""
    src = tmp_path / "src"
    (src / "events").mkdir(parents=True)
    (src / "events" / "events.parquet").write_bytes(b"a" * 64)
    remote = RemoteWorkspace.at(f"{s3_bucket}/ws")
    remote.publish(src, prefix="events/")
    remote.fs.pipe_file(remote.key("events/events.parquet"), b"b" * 64)  # same size, other bytes
    with pytest.raises(WorkspaceError, match="keeps changing under its marker"):
        RemoteWorkspace.at(f"{s3_bucket}/ws").pull(tmp_path / "out")
    assert not (tmp_path / "out" / "events" / "events.parquet").exists()


def test_republish_unpublishes_before_changing(s3_bucket: str, tmp_path: Path) -> None:
    """Replacing a listed file deletes the unit's marker before the new bytes go up, and a file gone
    locally leaves the unit."""
    src = tmp_path / "src"
    (src / "corpus").mkdir(parents=True)
    (src / "corpus" / "report.json").write_bytes(b"1")
    (src / "corpus" / "report.md").write_bytes(b"2")
    remote = RemoteWorkspace.at(f"{s3_bucket}/ws")
    remote.publish(src, prefix="corpus/")
    (src / "corpus" / "report.json").write_bytes(b"one")
    (src / "corpus" / "report.md").unlink()
    seen = []
    real_put = remote.fs.put_file

    def spy(lpath: str, rpath: str, **kw):
        seen.append(remote.fs.exists(remote.marker_key("corpus")))
        return real_put(lpath, rpath, **kw)

    remote.fs.put_file = spy
    try:
        remote.publish(src, prefix="corpus/")
    finally:
        del remote.fs.put_file
    assert seen == [False]
    files = RemoteWorkspace.at(f"{s3_bucket}/ws").published(refresh=True)["corpus"]["files"]
    assert sorted(files) == ["corpus/report.json"]
    assert not remote.fs.exists(remote.key("corpus/report.md"))


def test_failed_corpus_build_resumes_from_published_parts(s3_bucket: str, micro_world: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that fails after some parts publishes the finished parts only; a rerun from a fresh
    scratch folder (another node) redoes just the rest and publishes the corpus."""
    from forecast_env.corpus_build import pipeline

    warcs = sorted((micro_world / "news").glob("*.warc.gz"))[:2]  # two parts: as many as three show it
    url = f"{s3_bucket}/ws"
    monkeypatch.setenv("FORECAST_ENV_SCRATCH", str(tmp_path / "node-a"))
    calls = []
    real = pipeline.merge_parts

    def boom(*a, **kw):
        calls.append(1)
        raise RuntimeError("node lost in the merge")

    monkeypatch.setattr(pipeline, "merge_parts", boom)
    with pytest.raises(RuntimeError, match="node lost"):
        pipeline.build_corpus(warcs, url, workers=1, progress=False)
    remote = RemoteWorkspace.at(url)
    units = remote.published(refresh=True)
    assert "corpus" not in units and len([u for u in units if u.startswith("corpus/parts/")]) == len(warcs)
    monkeypatch.setattr(pipeline, "merge_parts", real)
    monkeypatch.setenv("FORECAST_ENV_SCRATCH", str(tmp_path / "node-b"))  # nothing local: all from the bucket
    summary = pipeline.build_corpus(warcs, url, workers=1, progress=False)
    assert summary["counts"]["files_processed"] == 0  # every part came from its marker
    assert "corpus" in RemoteWorkspace.at(url).published(refresh=True)


def test_url_helpers() -> None:
    assert is_remote("s3://b/p") and is_remote("memory://x")
    assert not is_remote("/tmp/ws") and not is_remote("file:///tmp/ws") and not is_remote("ws")
    assert unit_of("corpus/parts/CC-NEWS-1-abc.keys-12.parquet") == "corpus/parts/CC-NEWS-1-abc"
    assert unit_of("index/bm25/2025-05/rows.npy") == "index/months/2025-05"
    assert unit_of("index/manifest.json") == "index"
    assert unit_of("corpus/articles/2025-05.parquet") == "corpus/articles/2025-05"
    assert unit_of("corpus/dropped/quality.parquet") == "corpus/dropped/quality"
    assert unit_of("corpus/merge/ranks.npy") == "corpus/merge"
    assert unit_of("corpus/manifest.json") == "corpus"
    assert unit_of("events/events.parquet") == "events"


def test_cli_build_ls_pull(s3_world, s3_bucket: str, micro_world: Path, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI takes the URL (`corpus build --workspace s3://...`), lists units, pulls a searchable copy;
    a command that needs local files says how to get them (exit 2)."""
    from forecast_env.cli.main import main

    warc = sorted((micro_world / "news").glob("*.warc.gz"))[0]
    url = f"{s3_bucket}/cli"
    assert main(["corpus", "build", "--warc", str(warc), "--workspace", url, "--workers", "1", "--no-progress"]) == 0
    assert main(["workspace", "ls", url]) == 0
    assert "corpus " in capsys.readouterr().out
    dest = tmp_path / "copy"
    assert main(["workspace", "pull", s3_world["url"], str(dest)]) == 0
    assert _content_files(dest) == _content_files(s3_world["local"])
    assert main(["corpus", "report", "--workspace", url]) == 2
    assert "forecast-env workspace pull" in capsys.readouterr().err


def test_the_whole_corpus_build_on_two_nodes_without_the_drivers_disk(s3_bucket: str, micro_world: Path,
                                                                     micro_events: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`--engine ray` over S3 with every task (per-WARC part, dedup keys, pairs, month shard, dropped
    table) run by an executor that alternates between two "nodes", each a scratch folder of its own (the
    task sees only it and the bucket): each task fetches its inputs from the bucket and publishes what it
    wrote as its own unit, the driver fetches them, and the store equals the local build byte for byte.
    While the nodes publish the store, the corpus's own marker is down (no reader takes a half-new store).
    The real multi-node Ray run of the same path is tests/system/cluster/test_cluster_build.py."""
    import contextlib

    from forecast_env import executor
    from forecast_env.corpus_build import merge, pipeline

    url = f"{s3_bucket}/ws"
    driver, nodes = tmp_path / "driver", [tmp_path / "node-1", tmp_path / "node-2"]
    monkeypatch.setenv("FORECAST_ENV_SCRATCH", str(driver))
    monkeypatch.setenv(TASK_LOG, "{scratch}/tasks.jsonl")  # each node's own record of its tasks
    seen: list[tuple[str, str, bool]] = []
    own_reads: list[int] = []

    def two_nodes(fn, items, **kw):
        for i, item in enumerate(items):
            node = nodes[i % 2]
            monkeypatch.setenv("FORECAST_ENV_SCRATCH", str(node))
            try:
                before = traffic()["marker_reads"]
                # the one node-task mechanism, labelled by its item's step (a part or a merge task)
                # whether the corpus marker is up: one GET of that marker (`markers_of`), not a listing
                # and read of every marker of the bucket per task
                seen.append((f"{type(fn).__name__}/{item.kind.split('.')[0]}", node.name,
                             "corpus" in RemoteWorkspace.at(url).markers_of(["corpus"])))
                own_reads.append(traffic()["marker_reads"] - before)  # the test's own look, not the build's
                yield fn(item)
            finally:
                monkeypatch.setenv("FORECAST_ENV_SCRATCH", str(driver))

    monkeypatch.setattr(executor, "ray_session", lambda *a, **k: contextlib.nullcontext())
    monkeypatch.setattr(pipeline, "map_unordered", two_nodes)
    monkeypatch.setattr(merge.run, "map_unordered", two_nodes)
    warcs = sorted((micro_world / "news").glob("*.warc.gz"))
    reads_before = traffic()["marker_reads"]
    summary = pipeline.build_corpus(warcs, url, workers=2, engine="ray", progress=False)
    marker_reads = traffic()["marker_reads"] - reads_before - sum(own_reads)
    kinds = {k for k, _, _ in seen}
    assert kinds == {"NodeTask/part", "NodeTask/merge"}, kinds
    # keys, pairs and store tasks all ran on the nodes (each keys task on its part's node)
    store = [s for s in seen if s[0] == "NodeTask/merge"]
    assert len(store) > len(warcs) and {n for _, n, _ in store} == {"node-1", "node-2"}
    for node in nodes:
        assert list(node.rglob("corpus/articles/*.parquet")), f"{node.name} wrote no month shard"
    # the task log: every task on its node, with its peak memory and what it moved
    logged = [json.loads(line) for node in nodes for line in (node / "tasks.jsonl").read_text().splitlines()]
    assert len(logged) == len(seen) and {r["node"] for r in logged} == {str(n) for n in nodes}
    assert {r["kind"] for r in logged} >= {"part", "merge.pairs", "merge.month", "merge.dropped"}
    assert all(r["peak_rss_mb"] > 0 and r["error"] is None for r in logged)
    months = [r for r in logged if r["kind"] == "merge.month"]
    assert all(r["published_bytes"] > 0 and r["published_files"] == 1 for r in months)
    parts = [r for r in logged if r["kind"] == "part"]
    assert all(r["fetched_bytes"] == 0 and r["published_files"] >= 3 for r in parts)
    # a node reads each part once: later tasks on it find the verified copy in its scratch
    fetched = sum(r["fetched_files"] for r in logged)
    assert 0 < fetched <= 2 * 3 * len(warcs) + 2 * len(nodes) * (1 + 10)
    got = _content_files(pull_workspace(url, tmp_path / "pulled", prefixes=("corpus/",)))
    want = {k: v for k, v in _content_files(micro_events).items() if k.startswith("corpus/")}
    assert sorted(got) == sorted(want) and [k for k in want if got[k] != want[k]] == []
    assert summary["snapshot_id"] == json.loads((micro_events / "corpus/manifest.json").read_text())["snapshot_id"]
    units = RemoteWorkspace.at(url).published(refresh=True)
    assert {u for u in units if u.startswith("corpus/articles/")} == {
        f"corpus/articles/{p.stem}" for p in (micro_events / "corpus/articles").glob("*.parquet")}
    assert "corpus/merge" in units and not any(r.endswith("ranks.npy") for r in units["corpus/merge"]["files"])
    # each fetch and publish reads the markers of its own units, not every marker: linear in the tasks
    # (listing every marker per task read tasks x units markers, ~1,400 here)
    print("marker reads", marker_reads, "tasks", len(seen), "units", len(units))
    assert marker_reads <= 6 * len(seen) + 3 * len(units), (marker_reads, len(seen), len(units))

    # a rebuild that changes nothing: the nodes republish nothing, the corpus comes back, the same bytes
    seen.clear()
    again = pipeline.build_corpus(warcs, url, workers=2, engine="ray", progress=False)
    assert again["counts"]["files_processed"] == 0 and again["snapshot_id"] == summary["snapshot_id"]
    assert summary["written"]["articles"] and again["written"] == {"articles": [], "dropped": [], "removed": []}
    assert "corpus" in RemoteWorkspace.at(url).published(refresh=True)
    # the store tasks of the rebuild ran while the corpus marker was down
    assert seen and not any(up for kind, _, up in seen[-3:])
