"""The corpus build end to end: funnel, store layout, resume after SIGKILL, incremental builds with
late arrivals, parallel and Ray executors, CLI, and the micro world's planted truth."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from forecast_env import schema
from forecast_env.corpus_build.pipeline import build_corpus, process_warc
from tests.support.warc_data import Page, english_body, write_warc

FRENCH = ("Le conseil municipal a approuvé hier soir le nouveau budget de la ville après un long débat. "
          "Les habitants du quartier attendent depuis des mois la rénovation de la place centrale. "
          "Selon le maire, les travaux commenceront au printemps et dureront environ deux ans. "
          "Plusieurs associations ont salué cette décision tout en demandant plus de transparence. ") * 3


def _page(slug: str, day: str, seed: int, **kw) -> Page:
    return Page(f"https://news{seed % 3}.example.com/{slug}", title=kw.pop("title", f"Story {slug} of the week"),
                body=kw.pop("body", english_body(seed)), published=f"{day}T08:00:00Z", **kw)


def _world(root: Path) -> list[Path]:
    shared = english_body(500)
    f1 = write_warc(root / "w1.warc.gz", [
        _page("a1", "2025-04-01", 1, body=shared),
        _page("a2", "2025-04-02", 2, body=shared),                      # dup of a1 (minhash)
        _page("m1", "2025-03-10", 3),
        _page("old", "2024-12-01", 4),                                   # before corpus_start
        _page("fr", "2025-04-03", 5, body=FRENCH),                       # not English
        _page("short", "2025-04-03", 6, body="Too short to keep."),      # quality
        Page("https://news0.example.com/missing", status=404),
        _page("leak", "2025-04-05", 7, body=english_body(7) + "\n\nUpdated: April 20, 2025."),
    ], with_request=True)
    f2 = write_warc(root / "w2.warc.gz", [
        _page("late1", "2025-03-05", 8, crawl="2025-04-20T00:00:00Z"),   # late arrival in March
        _page("late2", "2025-03-31", 9, body=shared, crawl="2025-04-20T00:00:00Z"),  # earlier than a1
    ])
    f3 = write_warc(root / "w3.warc.gz", [_page("may1", "2025-05-02", 10, crawl="2025-05-03T00:00:00Z")])
    return [f1, f2, f3]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _world(tmp_path_factory.mktemp("pipe_world"))


@pytest.fixture(scope="module")
def full_ws(world: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("full_ws")
    build_corpus(world, ws, workers=1, progress=False)
    return ws


def _outputs(ws: Path) -> dict[str, bytes]:
    corpus = ws / "corpus"
    files = sorted(corpus.glob("articles/*.parquet")) + sorted(corpus.glob("dropped/*.parquet")) + [
        corpus / "report.json", corpus / "file_errors.parquet"]
    return {p.relative_to(corpus).as_posix(): p.read_bytes() for p in files}


def _by_url(ws: Path) -> tuple[dict, dict]:
    arts = pl.read_parquet(ws / "corpus" / "articles" / "*.parquet")
    drops = pl.read_parquet(ws / "corpus" / "dropped" / "*.parquet")
    return ({r["url"]: r for r in arts.iter_rows(named=True)}, {r["url"]: r for r in drops.iter_rows(named=True)})


def test_funnel_and_store(full_ws: Path) -> None:
    kept, dropped = _by_url(full_ws)
    u = "https://news{}.example.com/{}".format
    assert set(kept) == {u(0, "m1"), u(1, "leak"), u(2, "late1"), u(0, "late2"), u(1, "may1")}
    expect = {u(1, "a1"): ("dedup", "dup_minhash"), u(2, "a2"): ("dedup", "dup_minhash"),
              u(1, "old"): ("time", "before_corpus_start"), u(2, "fr"): ("lang", "not_english_page"),
              u(0, "short"): ("quality", "gopher_short_doc"), u(0, "missing"): ("read", "http_status")}
    assert {k: (v["stage"], v["reason"]) for k, v in dropped.items()} == expect
    late2 = kept[u(0, "late2")]["doc_id"]
    assert dropped[u(1, "a1")]["dup_of"] == late2 and dropped[u(2, "a2")]["dup_of"] == late2
    assert kept[u(1, "leak")]["leak_flag"] and kept[u(0, "m1")]["leak_flag"] is False
    # month shards sorted by (day, doc_id), exact schema
    shards = sorted((full_ws / "corpus" / "articles").glob("*.parquet"))
    assert [p.stem for p in shards] == ["2025-03", "2025-04", "2025-05"]
    for shard in shards:
        t = pq.read_table(shard)
        assert t.schema.equals(schema.ARTICLES)
        keys = list(zip(t["day"].to_pylist(), t["doc_id"].to_pylist()))
        assert keys == sorted(keys)
    report = json.loads((full_ws / "corpus" / "report.json").read_text())
    assert report["records_in"] == 11 and report["kept"] == 5 and report["consistent"]
    assert report["dedup"] == {"dup_canonical_url": 0, "dup_title": 0, "dup_minhash": 2}
    assert report["timestamps"]["source_counts"]["pub"] == 5 and report["leak_flags"] == 1
    manifest = json.loads((full_ws / "corpus" / "manifest.json").read_text())
    assert len(manifest["snapshot_id"]) == 16 and manifest["counts"]["kept"] == 5
    assert "articles/2025-04.parquet" in manifest["files"]


def test_process_warc_is_pure(world: list[Path]) -> None:
    a1, d1, c1, e1 = process_warc(world[0])
    a2, d2, _, e2 = process_warc(world[0])
    assert a1.equals(a2) and d1.equals(d2) and e1 == e2 == []
    assert c1["records_in"] == 8 and c1["non_response_skipped"] == 9
    assert a1.schema.equals(schema.ARTICLES) and d1.schema.equals(schema.DROPPED)


def test_incremental_with_late_arrivals_equals_from_scratch(world: list[Path], full_ws: Path, tmp_path: Path) -> None:
    ws = tmp_path / "inc"
    first = build_corpus(world[:1], ws, workers=1, progress=False)
    kept, _ = _by_url(ws)
    assert "https://news1.example.com/a1" in kept  # no earlier copy yet
    second = build_corpus(world[:2], ws, workers=1, progress=False)
    assert second["counts"]["files_processed"] == 1
    assert set(second["written"]["articles"]) == {"2025-03", "2025-04"}  # late arrivals rewrote both
    may_before = None
    shards = {p.stem: p.stat().st_mtime_ns for p in (ws / "corpus" / "articles").glob("*.parquet")}
    third = build_corpus(world, ws, workers=1, progress=False)
    assert third["written"]["articles"] == ["2025-05"] and may_before is None
    after = {p.stem: p.stat().st_mtime_ns for p in (ws / "corpus" / "articles").glob("*.parquet")}
    assert after["2025-03"] == shards["2025-03"] and after["2025-04"] == shards["2025-04"]
    assert _outputs(ws) == _outputs(full_ws)
    assert third["snapshot_id"] == json.loads((full_ws / "corpus" / "manifest.json").read_text())["snapshot_id"]
    assert first["snapshot_id"] != third["snapshot_id"]
    again = build_corpus(world, ws, workers=1, progress=False)
    assert again["counts"]["files_processed"] == 0 and again["written"]["articles"] == []


def test_resume_after_sigkill(world: list[Path], full_ws: Path, tmp_path: Path) -> None:
    ws = tmp_path / "killed"
    script = (
        "import os, signal, sys\n"
        "from forecast_env.corpus_build.pipeline import build_corpus\n"
        "def die(path):\n"
        "    if path.endswith('w2.warc.gz'): os.kill(os.getpid(), signal.SIGKILL)\n"
        f"build_corpus({[str(p) for p in world]!r}, {str(ws)!r}, workers=1, progress=False, on_file_done=die)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300, check=False)
    assert proc.returncode == -9
    parts = ws / "corpus" / "parts"
    done = sorted(p.name for p in parts.glob("*.json"))
    assert len(done) == 2 and not (ws / "corpus" / "articles" / "2025-03.parquet").exists()
    # also leave what a kill inside an atomic write or between a part's files leaves behind
    (ws / "corpus" / "articles" / ".2025-04.parquet.abc123.tmp").write_bytes(b"half a parquet")
    part_w3 = parts / "w3-deadbeefdeadbeef.articles.parquet"
    part_w3.write_bytes(b"orphan")
    marks = {p.name: p.stat().st_mtime_ns for p in parts.glob("*.json")}
    summary = build_corpus(world, ws, workers=1, progress=False)
    assert summary["counts"]["files_processed"] == 1
    assert {p.name: p.stat().st_mtime_ns for p in parts.glob("*.json") if p.name in marks} == marks
    assert _outputs(ws) == _outputs(full_ws)
    assert not list((ws / "corpus" / "articles").glob(".*.tmp"))


def test_two_workers_equal_one(world: list[Path], full_ws: Path, tmp_path: Path) -> None:
    ws = tmp_path / "par"
    build_corpus(world, ws, workers=2, progress=False)
    assert _outputs(ws) == _outputs(full_ws)


def test_bad_files_are_reported_not_fatal(tmp_path: Path) -> None:
    good = write_warc(tmp_path / "g.warc.gz", [_page(f"x{i}", f"2025-04-0{i + 1}", 40 + i) for i in range(4)])
    cut = write_warc(tmp_path / "cut.warc.gz", [_page(f"c{i}", f"2025-04-0{i + 1}", 60 + i) for i in range(6)])
    data = cut.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.7)])
    junk = tmp_path / "junk.warc.gz"
    junk.write_bytes(b"not a warc file at all")
    s = build_corpus([good, cut, junk], tmp_path / "ws", workers=1, progress=False)
    errors = {e["warc_file"]: e for e in s["report"]["file_errors"]}
    assert set(errors) == {"cut.warc.gz", "junk.warc.gz"}
    assert 1 <= errors["cut.warc.gz"]["records_read"] < 13  # warcinfo + 6 requests + 6 responses
    assert s["counts"]["kept"] >= 5
    fe = pq.read_table(tmp_path / "ws" / "corpus" / "file_errors.parquet")
    assert fe.schema.equals(schema.FILE_ERRORS) and fe.num_rows == 2


def test_cli_build_and_report(world: list[Path], full_ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from forecast_env.cli.main import main

    ws = tmp_path / "cli"
    pattern = str(world[0].parent / "w*.warc.gz")
    assert main(["corpus", "build", "--warc", pattern, "--workspace", str(ws), "--workers", "1",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "5 articles kept of 11 records" in out and "dup_minhash 2" in out
    assert _outputs(ws) == _outputs(full_ws)
    assert main(["corpus", "report", "--workspace", str(ws)]) == 0
    assert "| quality | gopher_short_doc | 1 |" in capsys.readouterr().out
    assert main(["corpus", "build", "--warc", str(tmp_path / "none*.warc.gz"), "--workspace", str(ws)]) == 2
    assert main(["corpus", "build", "--warc", pattern, "--workspace", str(ws), "--set", "dedup.bands=oops"]) == 2
    assert "matches no file" in capsys.readouterr().err


@pytest.mark.ray
def test_ray_engine_equals_local(world: list[Path], full_ws: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    ws = tmp_path / "ray"
    build_corpus(world, ws, workers=2, engine="ray", progress=False)
    assert _outputs(ws) == _outputs(full_ws)
    import ray

    assert not ray.is_initialized()  # the core executor shuts down a Ray it started


def _pid_and_threads(_: int) -> tuple[int, str]:
    import os

    return os.getpid(), os.environ.get("OMP_NUM_THREADS", "")


def _die(_: int) -> None:
    import os

    os._exit(3)


def test_executor_pool_shares_threads_and_reports_a_dead_worker() -> None:
    from forecast_env.errors import CorpusError
    from forecast_env.executor import map_unordered

    out = list(map_unordered(_pid_and_threads, range(6), workers=2, threads=1))
    assert len(out) == 6 and len({pid for pid, _ in out}) <= 2 and {t for _, t in out} == {"1"}
    assert next(map_unordered(_pid_and_threads, [0], workers=4))[0] == __import__("os").getpid()  # one item: here
    with pytest.raises(CorpusError, match="worker process died after 0 of 2 items.*finished files are kept"):
        list(map_unordered(_die, range(2), workers=2, error=CorpusError, broken_advice="finished files are kept"))
    with pytest.raises(CorpusError, match="engine 'spark' is not known"):
        list(map_unordered(_die, range(2), engine="spark", error=CorpusError))


@pytest.mark.slow
def test_micro_world_truth(micro_corpus: Path, micro_truth: dict) -> None:
    """Every planted case of the micro world lands where truth.json says (under the default profile: a
    planted quality page that profile keeps, `kept_by`, must be kept)."""
    from forecast_env.config import load_config
    from forecast_env.corpus_build.quality import active_profile

    profile = active_profile(load_config("corpus")["quality"])
    entries = micro_truth.get("pages") or micro_truth.get("articles") or micro_truth
    kept, dropped = _by_url(micro_corpus)
    id_to_url = {r["doc_id"]: u for u, r in kept.items()} | {r["doc_id"]: u for u, r in dropped.items() if r["doc_id"]}
    report = json.loads((micro_corpus / "corpus" / "report.json").read_text())
    bad_files = {Path(e["warc_file"]).name for e in report.get("file_errors", [])}
    truncated = {f for f, v in micro_truth.get("files", {}).items() if v.get("truncated")}
    assert truncated and truncated <= bad_files
    wrong = []
    for url, want in entries.items():
        if not isinstance(want, dict) or "expect" not in want:
            continue
        if want["expect"] == "keep" or profile in want.get("kept_by", []):
            row = kept.get(url)
            if row is None:
                wrong.append((url, "missing", dropped.get(url, {}).get("reason")))
                continue
            for key in ("t_source", "t_rule"):
                if want.get(key) is not None and row[key] != want[key]:
                    wrong.append((url, key, row[key], want[key]))
            if want.get("day") is not None and str(row["day"]) != str(want["day"]):
                wrong.append((url, "day", row["day"], want["day"]))
            if want.get("leak") is not None and bool(row["leak_flag"]) != bool(want["leak"]):
                wrong.append((url, "leak", row["leak_flag"], want["leak"]))
        elif want.get("kind") == "broken" and want.get("reason") is None:
            # a record cut inside its own headers never reaches a stage: its file must be reported
            if url in kept:
                wrong.append((url, "kept a record of a truncated file", want.get("warc_file")))
            if want.get("warc_file") not in bad_files:
                wrong.append((url, "file not reported", want.get("warc_file")))
        else:
            row = dropped.get(url)
            if row is None:
                wrong.append((url, "not dropped", want.get("reason")))
                continue
            accepted = {want.get("reason"), *(want.get("reason_alt") or [])}
            if row["stage"] != want.get("stage") or (want.get("reason") is not None and row["reason"] not in accepted):
                wrong.append((url, row["stage"], row["reason"], want.get("stage"), want.get("reason")))
            if want.get("dup_of") and id_to_url.get(row["dup_of"]) != want["dup_of"]:
                wrong.append((url, "dup_of", id_to_url.get(row["dup_of"]), want["dup_of"]))
    assert not wrong, wrong[:20]


def test_snapshot_id_ignores_index_and_search_settings():
    """The corpus snapshot id names the articles: embedding, IVF and search settings (read only by
    the index build and the searcher) leave it alone; a setting of the corpus stages changes it."""
    from forecast_env.config import load_config
    from forecast_env.corpus_build.pipeline import snapshot_config_hash

    base = load_config("corpus")
    search = load_config("corpus")
    search["retrieval"].update(rrf_k=10, search_threads=2)
    search["index"].update(ann_nprobe=7)
    search["embed"].update(backend="static")
    search["execution"].update(workers=3)
    assert snapshot_config_hash(search) == snapshot_config_hash(base)
    corpus = load_config("corpus")
    corpus["corpus_end"] = "2025-01-31"
    assert snapshot_config_hash(corpus) != snapshot_config_hash(base)
