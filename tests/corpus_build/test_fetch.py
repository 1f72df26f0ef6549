"""`corpus fetch` (corpus_build/fetch.py): a resumable, checksummed mirror in the Common Crawl layout."""

from __future__ import annotations

import hashlib
import json

from forecast_env.corpus_build.fetch import fetch_files, read_manifest, verify_mirror
from forecast_env.corpus_build.source import SourceSpec, resolve_sources
from forecast_env.synth.serve import Fault
from tests.support.stream_data import served_config


def _args(server, out) -> list[str]:
    return ["corpus", "fetch", "--cc-news", "2025-03..2026-05", "--out", str(out), "--no-progress",
            "--set", f"corpus.source.base_url={server.url}", "--set", "corpus.source.backoff_base_s=0.001",
            "--set", "corpus.source.backoff_max_s=0.002", "--set", "corpus.source.requests_per_second=1000"]


def test_fetch_writes_a_mirror_with_a_manifest_and_skips_what_is_there(served_world, tmp_path, capsys):
    from forecast_env.cli.main import main

    out = tmp_path / "mirror"
    served_world.plant("*", Fault("reset", times=2, at=0.5))
    assert main(_args(served_world, out)) == 0
    manifest = read_manifest(out)
    assert len(manifest["files"]) == len(served_world.files) and not manifest["failed"]
    for cc, path in served_world.files.items():
        rec = manifest["files"][cc]
        assert (out / cc).read_bytes() == path.read_bytes()
        assert rec["size"] == path.stat().st_size and rec["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert verify_mirror(out) == [] and not list(out.rglob("*.part"))
    assert "fetched 4 files" in capsys.readouterr().out
    # the mirror is itself a base URL: a build can read it as it reads the server
    listed = resolve_sources(SourceSpec(cc_news="2025-03..2026-05"), served_config(str(out)), None)
    assert [s.uri for s in listed] == [str(out / cc) for cc in sorted(served_world.files)]
    served_world.clear()
    assert main(_args(served_world, out)) == 0
    assert not [p for m, p, *_ in served_world.log if p.endswith(".warc.gz")]  # nothing fetched again


def test_a_part_from_an_earlier_run_continues_with_range(served_world, tmp_path):
    cfg = served_config(served_world.url)
    sources = resolve_sources(SourceSpec(cc_news="2025-03"), cfg, None)
    src = sources[0]
    full = served_world.files[src.cc_path].read_bytes()
    dest = tmp_path / src.cc_path
    dest.parent.mkdir(parents=True)
    cut = len(full) // 3
    (dest.parent / f"{src.name}.part").write_bytes(full[:cut])
    etag = served_world.etag(src.cc_path, served_world.files[src.cc_path])
    (dest.parent / f"{src.name}.part.json").write_text(json.dumps({"etag": etag, "length": len(full)}))
    res = fetch_files(sources, tmp_path, cfg, workers=1, progress=False)
    assert res["fetched"] == 1 and dest.read_bytes() == full
    assert [r for m, p, r, _ in served_world.log if p.endswith(src.name)] == [f"bytes={cut}-"]
    assert res["bytes"] == len(full) - cut  # the part's bytes are hashed from disk, not fetched again
    assert read_manifest(tmp_path)["files"][src.cc_path]["sha256"] == hashlib.sha256(full).hexdigest()


def test_a_part_whose_etag_changed_starts_over(served_world, tmp_path):
    cfg = served_config(served_world.url)
    src = resolve_sources(SourceSpec(cc_news="2025-03"), cfg, None)[0]
    full = served_world.files[src.cc_path].read_bytes()
    dest = tmp_path / src.cc_path
    dest.parent.mkdir(parents=True)
    (dest.parent / f"{src.name}.part").write_bytes(b"\x00" * 1000)  # bytes of an older version
    (dest.parent / f"{src.name}.part.json").write_text(json.dumps({"etag": '"old"', "length": len(full)}))
    res = fetch_files([src], tmp_path, cfg, workers=1, progress=False)
    assert res["fetched"] == 1 and dest.read_bytes() == full
    ranges = [r for m, p, r, _ in served_world.log if p.endswith(src.name)]
    assert ranges == ["bytes=1000-", None]


def test_fetch_failures_exit_4_and_are_in_the_manifest(served_world, tmp_path):
    from forecast_env.cli.main import main

    name = sorted(served_world.files)[0].rsplit("/", 1)[-1]
    served_world.plant(name, Fault("404", times=-1))
    out = tmp_path / "m"
    assert main(_args(served_world, out)) == 4
    manifest = read_manifest(out)
    assert len(manifest["files"]) == len(served_world.files) - 1
    assert [v["error"].split(":")[0] for v in manifest["failed"].values()] == ["http_404"]
    assert main(_args(served_world, out) + ["--allow-failed"]) == 0
