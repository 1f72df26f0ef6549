"""The source grammar (corpus_build/source.py): months, listings, spread picks, list files, bad input."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast_env.corpus_build.pipeline import build_corpus
from forecast_env.corpus_build.source import (
    Source,
    SourceSpec,
    parse_listing,
    parse_months,
    pick_files,
    read_list_file,
    resolve_sources,
    spread_order,
)
from forecast_env.errors import CorpusError
from tests.support.stream_data import build_streamed_and_local, served_config, store_digest


def _listing(paths: list[str]) -> bytes:
    return gzip.compress("".join(f"{p}\n" for p in paths).encode(), mtime=0)


def _month_paths(n: int, y: int = 2025, m: int = 3) -> list[str]:
    return [f"crawl-data/CC-NEWS/{y}/{m:02d}/CC-NEWS-{y}{m:02d}{1 + i * 28 // n:02d}000000-{i:05d}.warc.gz"
            for i in range(n)]


def test_months_grammar():
    assert parse_months("2025-03") == [(2025, 3)]
    got = parse_months("2025-11..2026-02")
    assert got == [(2025, 11), (2025, 12), (2026, 1), (2026, 2)]
    assert parse_months("2025-03..2025-04,2025-03,2026-05") == [(2025, 3), (2025, 4), (2026, 5)]
    assert len(parse_months("2025-03..2026-05")) == 15  # the paper's months
    for bad in ("2025-13", "2025-3", "March", "2025-05..2025-03", ""):
        with pytest.raises(CorpusError, match="--cc-news"):
            parse_months(bad)


@given(st.integers(1, 400))
def test_spread_order_is_a_permutation_whose_prefixes_are_nested_and_spread(n):
    order = spread_order(n)
    assert sorted(order) == list(range(n))
    for k in (2, 3, 4, 8):
        if k <= n:
            picks = sorted(order[:k])
            gaps = [b - a for a, b in itertools.pairwise(picks)] + [n - picks[-1] + picks[0]]
            assert max(gaps) <= 2 * (n / k) + 1  # no cluster: every gap within twice the even spacing


def test_files_per_month_spreads_over_the_month_and_nests():
    paths = _month_paths(100)
    two = pick_files(paths, files_per_month=2)
    assert two == [paths[0], paths[50]]  # not the first two files (both from the first day)
    for n in range(1, 30):
        assert set(pick_files(paths, files_per_month=n)) <= set(pick_files(paths, files_per_month=n + 1))
    assert pick_files(paths, files_per_month=500) == paths
    assert pick_files(paths, files_per_month=5) == pick_files(list(paths), files_per_month=5)  # deterministic
    assert pick_files(paths, files_per_month=5) == sorted(pick_files(paths, files_per_month=5))  # in time order
    assert len(pick_files(paths, sample=0.05)) == 5 and len(pick_files(paths, sample=0.001)) == 1
    assert set(pick_files(paths, sample=0.05)) <= set(pick_files(paths, sample=0.1))
    with pytest.raises(CorpusError):
        pick_files(paths, files_per_month=2, sample=0.5)
    with pytest.raises(CorpusError):
        pick_files(paths, sample=1.5)


def test_listing_lines_are_checked():
    paths = _month_paths(3)
    assert parse_listing(_listing(paths), "x", 2025, 3) == paths
    with pytest.raises(CorpusError, match="line 2") as exc:
        parse_listing(_listing([paths[0], "not a path", paths[1]]), "L", 2025, 3)
    assert "--refresh-listing" in str(exc.value)
    with pytest.raises(CorpusError, match="line 1"):  # another month's path
        parse_listing(_listing(_month_paths(1, 2025, 4)), "L", 2025, 3)
    with pytest.raises(CorpusError, match="not a gzip list"):
        parse_listing(b"<html>Welcome</html>", "L", 2025, 3)


def test_list_file_of_paths_urls_and_cc_paths(tmp_path, micro_world):
    warcs = sorted((micro_world / "news").glob("*.warc.gz"))
    lst = tmp_path / "inputs.txt"
    lst.write_text(f"# my files\n{warcs[0]}\n\nhttps://example.org/{warcs[1].name}\n"
                   "crawl-data/CC-NEWS/2025/03/CC-NEWS-20250301000000-00001.warc.gz\n")
    got = read_list_file(str(lst), "https://mirror.example/")
    assert got[0] == Source(warcs[0].name, str(warcs[0].resolve()))
    assert got[1].uri == f"https://example.org/{warcs[1].name}" and got[1].kind == "http"
    assert got[2].uri == "https://mirror.example/crawl-data/CC-NEWS/2025/03/CC-NEWS-20250301000000-00001.warc.gz"
    assert got[2].cc_path and got[2].identity == got[2].cc_path
    lst.write_text("a b.warc.gz\n")
    with pytest.raises(CorpusError, match="line 1"):
        read_list_file(str(lst), "https://x/")
    lst.write_text("missing.warc.gz\n")
    with pytest.raises(CorpusError, match="not an existing file"):
        read_list_file(str(lst), "https://x/")


def test_resolve_local_globs_and_list_files(tmp_path, micro_world):
    warcs = sorted((micro_world / "news").glob("*.warc.gz"))
    (tmp_path / "l.txt").write_text("\n".join(str(p) for p in warcs[:2]))
    got = resolve_sources([str(micro_world / "news" / "*.warc.gz"), f"@{tmp_path / 'l.txt'}"], None)
    assert [s.name for s in got] == [p.name for p in warcs] and all(s.kind == "local" for s in got)
    with pytest.raises(CorpusError, match="matches no file"):
        resolve_sources(["nothing/*.warc.gz"], None)
    with pytest.raises(CorpusError, match="no WARC files"):
        resolve_sources(SourceSpec(), None)
    with pytest.raises(CorpusError, match="--cc-news"):
        resolve_sources(SourceSpec(warc=[str(warcs[0])], files_per_month=2), None)


def test_cc_news_months_from_the_served_world_and_the_frozen_listing(served_world, tmp_path, micro_world):
    cfg = served_config(served_world.url)
    ws = tmp_path / "ws"
    got = resolve_sources(SourceSpec(cc_news="2025-03..2026-05"), cfg, ws)
    assert [s.name for s in got] == sorted(p.name for p in (micro_world / "news").glob("*.warc.gz"))
    assert all(s.uri == served_world.url + s.cc_path for s in got)
    frozen = ws / "corpus" / "sources" / "listing-2025-03.txt"
    assert frozen.read_text().strip() == got[0].cc_path
    # the month's listing grows on the server: the build keeps the frozen one until asked to refresh
    extra = tmp_path / "CC-NEWS-20250330000000-99999.warc.gz"
    extra.write_bytes((micro_world / "news" / got[0].name).read_bytes())
    served_world.add_file(extra)
    again = resolve_sources(SourceSpec(cc_news="2025-03"), cfg, ws)
    assert [s.name for s in again] == [got[0].name]
    fresh = resolve_sources(SourceSpec(cc_news="2025-03", refresh_listing=True), cfg, ws)
    assert [s.name for s in fresh] == [got[0].name, extra.name]
    assert len(frozen.read_text().split()) == 2


def test_bad_base_urls_and_missing_months(served_world, tmp_path):
    cfg = served_config(served_world.url)
    with pytest.raises(CorpusError, match="no listing for 2024-01") as exc:
        resolve_sources(SourceSpec(cc_news="2024-01"), cfg, tmp_path / "ws")
    assert "base URL" in str(exc.value)
    with pytest.raises(CorpusError, match="not a Common Crawl layout"):  # a folder without the layout
        resolve_sources(SourceSpec(cc_news="2025-03"), served_config(str(tmp_path)), None)
    with pytest.raises(CorpusError, match="base_url"):
        resolve_sources(SourceSpec(cc_news="2025-03"), served_config("ftp://example.org/"), None)
    html = tmp_path / "site" / "crawl-data" / "CC-NEWS" / "2025" / "03"
    html.mkdir(parents=True)
    (html / "warc.paths.gz").write_text("<html>hello</html>")
    with pytest.raises(CorpusError, match="not a gzip list"):
        resolve_sources(SourceSpec(cc_news="2025-03"), served_config(str(tmp_path / "site")), None)


def test_cli_bad_input_is_one_line_and_exit_2(served_world, tmp_path, capsys):
    from forecast_env.cli.main import main

    base = ["corpus", "build", "--workspace", str(tmp_path / "ws"), "--no-progress",
            "--set", f"corpus.source.base_url={served_world.url}"]
    assert main(base + ["--cc-news", "2025-13"]) == 2
    assert main(base + ["--cc-news", "2031-01"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)
    assert "not a month" in err[0] and "no listing for 2031-01" in err[1]
    assert main(base) == 2  # no source at all
    assert main(base + ["--cc-news", "2025-03", "--set", "corpus.source.max_connections=0"]) == 2


def test_snapshot_id_ignores_where_files_come_from(served_world, micro_corpus, micro_world, tmp_path):
    """Another server, other politeness: the same store and snapshot id as the local build."""
    from forecast_env.synth.serve import WorldServer

    local = json.loads((micro_corpus / "corpus" / "manifest.json").read_text())["snapshot_id"]
    with WorldServer(micro_world) as other:
        cfg = served_config(other.url, max_connections=1, requests_per_second=500.0,
                            user_agent="someone else (test)")
        ws = tmp_path / "ws"
        summary = build_corpus(resolve_sources(SourceSpec(cc_news="2025-03..2026-05"), cfg, ws), ws, config=cfg,
                               workers=1, progress=False)
    assert summary["snapshot_id"] == local
    assert store_digest(ws) == store_digest(micro_corpus)
    # a rerun from another mirror redoes nothing: parts are keyed by the Common Crawl path
    cfg2 = served_config(served_world.url)
    again = build_corpus(resolve_sources(SourceSpec(cc_news="2025-03..2026-05"), cfg2, ws), ws, config=cfg2,
                         workers=1, progress=False)
    assert again["counts"]["files_processed"] == 0 and again["snapshot_id"] == local
    assert not [p for m, p, *_ in served_world.log if p.endswith(".warc.gz")]


def test_keep_warc_keeps_the_streamed_files(served_world, tmp_path, micro_world):
    cfg = served_config(served_world.url)
    ws, keep = tmp_path / "ws", tmp_path / "kept"
    build_corpus(resolve_sources(SourceSpec(cc_news="2025-03"), cfg, ws), ws, config=cfg, workers=1,
                 progress=False, keep_warc=keep)
    name = sorted((micro_world / "news").glob("*.warc.gz"))[0].name
    assert (keep / name).read_bytes() == (micro_world / "news" / name).read_bytes()
    assert sorted(p.name for p in Path(ws).rglob("*.warc.gz")) == []  # nothing stored in the workspace


def test_s3_sources_without_the_extra_name_the_fix(monkeypatch):
    """Without s3fs (simulated: the import fails even where the extra is installed) an s3:// source is a
    CorpusError that names the extra to install, never a bare ImportError."""
    pytest.importorskip("fsspec")
    import sys

    monkeypatch.setitem(sys.modules, "s3fs", None)  # `import s3fs` now raises ImportError
    with pytest.raises(CorpusError, match=r"forecast-env\[s3\]"):
        resolve_sources(["s3://commoncrawl/crawl-data/CC-NEWS/2025/03/CC-NEWS-20250301000000-00001.warc.gz"], None)


def test_real_public_warc_samples_stream_like_disk(tmp_path):
    """Real WARC files streamed through the served layout equal the disk build: warcio's public test
    data (tests/fixtures/warc, Apache-2.0), or the folder FORECAST_ENV_REAL_WARCS names (e.g. more real
    crawls, fastwarc's test data)."""
    import os

    folder = os.environ.get("FORECAST_ENV_REAL_WARCS") or str(Path(__file__).resolve().parents[1] / "fixtures" / "warc")
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and ".warc" in p.name)
    assert len(files) >= 5, f"{folder}: expected real WARC files"
    built = build_streamed_and_local(files, tmp_path)
    streamed, local = built.streamed, built.local
    assert streamed["counts"]["records_in"] > 0 and streamed["snapshot_id"] == local["snapshot_id"]
    assert store_digest(built.streamed_ws) == store_digest(built.local_ws)
    assert streamed["report"]["file_errors"] == local["report"]["file_errors"]
