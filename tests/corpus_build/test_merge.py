"""The out-of-core merge (corpus_build/merge/) writes the store of the in-memory merge, byte for byte:
on the micro world, on a second sample world, and on hand-made parts with every kind of duplicate
(and records read twice, ties in visibility, hash partitions); the dedup passes never read a body."""

from __future__ import annotations

import inspect
import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forecast_env import schema
from forecast_env.config import load_config
from forecast_env.corpus_build import merge
from forecast_env.corpus_build.merge import PartFiles, compute_keys, keys_path, merge_parts
from forecast_env.corpus_build.report import build_report
from forecast_env.store import Workspace
from tests.support.merge_oracle import merge_in_memory
from tests.support.warc_data import english_body

CFG = load_config("corpus")


def _parts(parts_dir: Path, cfg: dict = CFG) -> list[PartFiles]:
    arts = sorted(parts_dir.glob("*.articles.parquet"))
    return [PartFiles(articles=a, dropped=a.with_name(a.name.replace(".articles.", ".dropped.")),
                      keys=keys_path(a, cfg["dedup"])) for a in arts]


def _store(ws: Path) -> dict[str, bytes]:
    corpus = ws / "corpus"
    files = sorted(corpus.glob("articles/*.parquet")) + sorted(corpus.glob("dropped/*.parquet"))
    return {p.relative_to(corpus).as_posix(): p.read_bytes() for p in files}


def _reference(parts: list[PartFiles], out: Path, cfg: dict = CFG) -> tuple[dict[str, bytes], dict]:
    ws = Workspace.at(out, create=True)
    for d in (ws.articles_dir, ws.dropped_dir):
        d.mkdir(parents=True, exist_ok=True)
    written, dropped, articles, differences = merge_in_memory(ws, parts, cfg)
    markers = [p.articles.with_name(p.articles.name.replace(".articles.parquet", ".json")) for p in parts]
    counters = [json.loads(m.read_text()) for m in markers if m.exists()]
    return _store(out), build_report(counters, dropped, articles, [], differences)


def _out_of_core(parts: list[PartFiles], out: Path, cfg: dict = CFG, **kw) -> tuple[dict[str, bytes], merge.MergeResult]:
    ws = Workspace.at(out, create=True)
    for d in (ws.articles_dir, ws.dropped_dir):
        d.mkdir(parents=True, exist_ok=True)
    res = merge_parts(ws, parts, cfg, **kw)
    return _store(out), res


def _assert_same(a: dict[str, bytes], b: dict[str, bytes]) -> None:
    assert sorted(a) == sorted(b)
    differ = [name for name in a if a[name] != b[name]]
    assert not differ, differ


# ---------------------------------------------------------------------------------------------
# sample worlds
# ---------------------------------------------------------------------------------------------


def test_micro_world_equals_in_memory_merge(micro_corpus: Path, tmp_path: Path) -> None:
    parts = _parts(micro_corpus / "corpus" / "parts")
    ref, ref_report = _reference(parts, tmp_path / "ref")
    # the micro corpus itself was built by build_corpus, which now merges out of core
    _assert_same(_store(micro_corpus), ref)
    report = json.loads((micro_corpus / "corpus" / "report.json").read_text())
    assert report["dedup"] == ref_report["dedup"] and sum(report["dedup"].values()) > 0
    # the funnel from the out-of-core inputs equals the in-memory one (the build adds its own keys)
    assert {k: report[k] for k in ref_report if k != "file_errors"} == \
        {k: v for k, v in ref_report.items() if k != "file_errors"}
    # and a fresh out-of-core merge of the same parts, with partitions, writes the same bytes again
    again, res = _out_of_core(parts, tmp_path / "ooc", rows_per_task=40)
    _assert_same(again, ref)
    assert res.written["articles"] == sorted(p.stem for p in (tmp_path / "ooc/corpus/articles").glob("*.parquet"))


@pytest.fixture(scope="module")
def second_world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Another generated world (other seed): its own planted duplicates and late arrivals."""
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.synth import synthesize

    out = tmp_path_factory.mktemp("second_world")
    synthesize(out, preset="micro", seed=7, progress=False)
    ws = tmp_path_factory.mktemp("second_ws")
    summary = build_corpus(sorted((out / "news").glob("*.warc.gz")), ws, workers=1, progress=False)
    return ws, summary


def test_second_world_equals_in_memory_merge(second_world: tuple[Path, dict], tmp_path: Path) -> None:
    ws, summary = second_world
    parts = _parts(ws / "corpus" / "parts")
    ref, ref_report = _reference(parts, tmp_path / "ref")
    _assert_same(_store(ws), ref)
    assert summary["report"]["dedup"] == ref_report["dedup"] and ref_report["dedup"]["dup_minhash"] > 0
    assert summary["report"]["kept"] == ref_report["kept"]
    manifest = json.loads((ws / "corpus" / "manifest.json").read_text())
    assert manifest["snapshot_id"] == summary["snapshot_id"]


# ---------------------------------------------------------------------------------------------
# hand-made parts: every kind of duplicate, ties, a record read twice, several months
# ---------------------------------------------------------------------------------------------

T0 = datetime(2025, 3, 30, 12, tzinfo=UTC)


def _row(doc: str, file: str, offset: int, hours: float, *, url: str | None = None, canonical: str | None = None,
         title: str | None = None, body: str | None = None, crawl_hours: float | None = None,
         visible: bool = True) -> dict:
    t = T0 + timedelta(hours=hours)
    crawl = T0 + timedelta(hours=crawl_hours if crawl_hours is not None else hours + 30)
    return {
        "doc_id": doc, "url": url or f"https://news.example.com/{doc}", "canonical_url": canonical,
        "title": title or f"A distinct title for story {doc} here", "summary": None,
        "body": body if body is not None else english_body(abs(hash(doc)) % 10_000),
        "t_pub": t, "t_mod": None, "t_crawl": crawl, "t": t, "t_source": "pub", "t_rule": "jsonld",
        "t_pub_rule": "jsonld", "t_mod_rule": None, "visible_at": t if visible else None,
        "visible_source": "pub", "visible_moves": [], "day": t.date(), "lang_score": 0.99, "leak_flag": False,
        "leak_reason": None, "market_quote": False, "warc_file": file, "warc_offset": offset,
    }


def _drop(file: str, offset: int, stage: str, reason: str, doc: str | None = None) -> dict:
    return {"doc_id": doc, "url": f"https://news.example.com/d{offset}", "warc_file": file, "warc_offset": offset,
            "stage": stage, "reason": reason, "detail": None, "dup_of": None}


def _write_parts(root: Path) -> list[PartFiles]:
    shared = english_body(77)
    same_title = "Council approves the new city budget after long debate"
    files = {
        "a.warc.gz": [
            _row("d01", "a.warc.gz", 10, 0, body=shared),                       # earliest of the minhash chain
            _row("d02", "a.warc.gz", 20, 5, canonical="https://news.example.com/canon/1"),
            _row("d03", "a.warc.gz", 30, 10, title=same_title),
            _row("d04", "a.warc.gz", 40, 48, title=same_title),                 # title dup of d03 (in window)
            _row("d05", "a.warc.gz", 50, 24 * 12, title=same_title),            # outside the window of d04
            _row("d06", "a.warc.gz", 60, 3, body=""),                           # no words: no signature
            _row("d07", "a.warc.gz", 70, 100, visible=False),                   # v falls back to t
        ],
        "b.warc.gz": [
            _row("d11", "b.warc.gz", 10, 6, body=shared),                       # minhash dup of d01
            _row("d12", "b.warc.gz", 20, 7, url="https://www.news.example.com/canon/1/?utm_source=x"),  # url dup
            _row("d13", "b.warc.gz", 30, 5, crawl_hours=1, body=english_body(9001)),   # tie in v with d02
            _row("d14", "b.warc.gz", 40, 5, crawl_hours=1, body=english_body(9001)),   # same crawl: doc id decides
            _row("d15", "b.warc.gz", 50, 24 * 40, body=shared),                 # May: later chain member
            _row("d16", "b.warc.gz", 60, 24 * 41),                              # May
        ],
        # the same WARC records under another name: read twice
        "c.warc.gz": [
            _row("d12", "c.warc.gz", 20, 7, url="https://www.news.example.com/canon/1/?utm_source=x"),
            _row("d21", "c.warc.gz", 30, 24 * 5),
        ],
    }
    drops = {"a.warc.gz": [_drop("a.warc.gz", 5, "read", "http_status"), _drop("a.warc.gz", 15, "lang", "not_english",
                                                                                  "x1")],
             "b.warc.gz": [_drop("b.warc.gz", 5, "quality", "gopher_short_doc", "x2")],
             "c.warc.gz": []}
    parts = []
    for name, rows in files.items():
        stem = name.removesuffix(".warc.gz")
        art = root / f"{stem}-0000.articles.parquet"
        dro = root / f"{stem}-0000.dropped.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=schema.ARTICLES), art, compression="zstd")
        pq.write_table(pa.Table.from_pylist(drops[name], schema=schema.DROPPED), dro, compression="zstd")
        parts.append(PartFiles(articles=art, dropped=dro, keys=keys_path(art, CFG["dedup"])))
    return parts


@pytest.fixture()
def planted(tmp_path: Path) -> list[PartFiles]:
    (tmp_path / "parts").mkdir()
    return _write_parts(tmp_path / "parts")


@pytest.mark.parametrize("rows_per_task", [merge.ROWS_PER_TASK, 3])
def test_planted_parts_equal_in_memory_merge(planted: list[PartFiles], tmp_path: Path, rows_per_task: int) -> None:
    ref, ref_report = _reference(planted, tmp_path / "ref")
    got, res = _out_of_core(planted, tmp_path / "ooc", rows_per_task=rows_per_task)
    _assert_same(got, ref)
    dedup = pq.read_table(tmp_path / "ooc/corpus/dropped/dedup.parquet").to_pylist()
    reasons = {(r["doc_id"], r["warc_file"]): (r["reason"], r["dup_of"], r["detail"]) for r in dedup}
    assert reasons == {
        ("d11", "b.warc.gz"): ("dup_minhash", "d01", None),
        ("d15", "b.warc.gz"): ("dup_minhash", "d01", None),
        ("d04", "a.warc.gz"): ("dup_title", "d03", None),
        ("d12", "b.warc.gz"): ("dup_canonical_url", "d02", None),
        ("d12", "c.warc.gz"): ("dup_canonical_url", "d12", "same record"),
        ("d14", "b.warc.gz"): ("dup_minhash", "d13", None),
    }
    assert sorted(res.written["articles"]) == ["2025-03", "2025-04", "2025-05"]
    report = build_report([], res.dropped, res.articles, [])
    assert {k: v for k, v in report.items()} == {k: v for k, v in ref_report.items()}


@pytest.mark.parametrize("group_rows", [1, 2, 3])
def test_row_group_streaming_writes_the_same_bytes(planted: list[PartFiles], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, group_rows: int) -> None:
    """Month shards and dropped tables of more than one row group are written one group at a time
    (spilled by group, parts read once) and still equal the in-memory merge's bytes; rewriting with
    the same rows reports nothing written and leaves no spill or temporary file behind."""
    monkeypatch.setattr(merge.store, "ROW_GROUP_ROWS", group_rows)
    streamed: list[str] = []
    real = merge.store._write_month_streamed
    monkeypatch.setattr(merge.store, "_write_month_streamed", lambda task, out: streamed.append(task.month) or real(task, out))
    ref, ref_report = _reference(planted, tmp_path / "ref")
    got, res = _out_of_core(planted, tmp_path / "ooc")
    _assert_same(got, ref)
    assert streamed  # some month had more than one group
    groups = {name: pq.ParquetFile(tmp_path / "ooc/corpus" / name).metadata.num_row_groups for name in got}
    rows = {name: pq.ParquetFile(tmp_path / "ooc/corpus" / name).metadata.num_rows for name in got}
    for name in got:
        assert groups[name] == max(1, -(-rows[name] // group_rows)), name
    assert build_report([], res.dropped, res.articles, []) == ref_report
    (tmp_path / "ooc/corpus/merge/months.json").unlink()  # forget the recorded plans: rebuild, same bytes
    again, res = _out_of_core(planted, tmp_path / "ooc")
    _assert_same(again, ref)
    assert res.written == {"articles": [], "dropped": [], "removed": []}
    leftovers = [p.name for p in (tmp_path / "ooc/corpus").rglob(".*")]
    assert leftovers == []


def test_micro_world_streamed_by_row_group(micro_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = _parts(micro_corpus / "corpus" / "parts")
    monkeypatch.setattr(merge.store, "ROW_GROUP_ROWS", 4)
    ref, _ = _reference(parts, tmp_path / "ref")
    got, _ = _out_of_core(parts, tmp_path / "ooc")
    _assert_same(got, ref)
    assert max(pq.ParquetFile(tmp_path / "ooc/corpus" / n).metadata.num_row_groups for n in got) > 1


def test_row_group_writer_equals_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of any sizes give the bytes of one `write_if_changed`; an exception leaves `path` alone."""
    import random

    monkeypatch.setattr(merge.store, "ROW_GROUP_ROWS", 7)
    rows = [_drop(f"f{i % 3}.warc.gz", i, "quality", "gopher_short_doc") for i in range(40)]
    table = pa.Table.from_pylist(rows, schema=schema.DROPPED)
    merge.write_if_changed(tmp_path / "whole.parquet", table)
    rng = random.Random(5)
    for trial in range(5):
        cuts = sorted(rng.sample(range(1, 40), rng.randint(0, 8)))
        with merge.RowGroupWriter(tmp_path / f"p{trial}.parquet", schema.DROPPED) as w:
            for a, b in zip([0, *cuts], [*cuts, 40]):
                w.add(table.slice(a, b - a))
            assert w.close() is True
        assert (tmp_path / f"p{trial}.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    with merge.RowGroupWriter(tmp_path / "whole.parquet", schema.DROPPED) as w:
        w.add(table)
        assert w.close() is False  # same bytes: not rewritten
    before = (tmp_path / "whole.parquet").read_bytes()
    with pytest.raises(RuntimeError), merge.RowGroupWriter(tmp_path / "whole.parquet", schema.DROPPED) as w:
        w.add(table.slice(0, 20))
        raise RuntimeError("killed")
    assert (tmp_path / "whole.parquet").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p0.parquet", "p1.parquet", "p2.parquet", "p3.parquet",
                                                         "p4.parquet", "whole.parquet"]
    with merge.RowGroupWriter(tmp_path / "empty.parquet", schema.DROPPED) as w:
        w.close()
    merge.write_if_changed(tmp_path / "empty2.parquet", schema.DROPPED.empty_table())
    assert (tmp_path / "empty.parquet").read_bytes() == (tmp_path / "empty2.parquet").read_bytes()


def test_unchanged_months_are_not_rewritten_and_keys_are_reused(planted: list[PartFiles], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    first, res = _out_of_core(planted[:2], tmp_path / "ws")
    assert compute_keys(planted, CFG) == 1  # only the new part's keys
    again, res = _out_of_core(planted, tmp_path / "ws")
    # c adds d21 (April) and a second copy of d12: March and May are unchanged
    assert res.written["articles"] == ["2025-04"] and res.written["dropped"] == ["dedup"]
    ref, _ = _reference(planted, tmp_path / "ref")
    _assert_same(again, ref)
    built: list[str] = []
    real = merge.store.month_table
    monkeypatch.setattr(merge.store, "month_table", lambda task: built.append(task.month) or real(task))
    _, res = _out_of_core(planted, tmp_path / "ws")
    assert res.written == {"articles": [], "dropped": [], "removed": []}
    assert built == []  # every month's plan is recorded and its shard untouched: no part is read again
    shard = tmp_path / "ws/corpus/articles/2025-04.parquet"
    shard.write_bytes(b"tampered")
    again, res = _out_of_core(planted, tmp_path / "ws")
    assert built == ["2025-04"] and res.written["articles"] == ["2025-04"]
    _assert_same(again, ref)
    # dropping the last part removes nothing but its rows; a month left empty is removed
    _, res = _out_of_core([planted[0]], tmp_path / "ws")
    assert res.written["removed"] == ["2025-05.parquet"]


def test_key_settings_name_their_sidecar(planted: list[PartFiles]) -> None:
    other = {**CFG["dedup"], "bands": 16, "rows": 8}
    assert keys_path(planted[0].articles, other) != planted[0].keys
    assert keys_path(planted[0].articles, {**CFG["dedup"], "title_window_days": 3}) == planted[0].keys


@pytest.mark.parametrize("group_rows", [merge.ROW_GROUP_ROWS, 1])
def test_dedup_passes_never_read_a_body(planted: list[PartFiles], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, group_rows: int) -> None:
    """Only the keys pass (one part at a time) and the month shards read article text; a shard
    written by row group reads its sort columns first, then each part once."""
    monkeypatch.setattr(merge.store, "ROW_GROUP_ROWS", group_rows)
    real = pq.read_table
    reads: list[tuple[str, str, tuple | None]] = []

    def spy(source, *args, columns=None, **kwargs):
        # the nearest named function up the frames (inspect.stack() would read every frame's source lines)
        frame = inspect.currentframe().f_back
        while frame.f_code.co_name.startswith("<"):
            frame = frame.f_back
        caller = frame.f_code.co_name
        reads.append((caller, Path(source).name, tuple(columns) if columns is not None else None))
        return real(source, *args, columns=columns, **kwargs)

    monkeypatch.setattr(merge.store.pq, "read_table", spy)
    _out_of_core(planted, tmp_path / "ooc", rows_per_task=4)
    text = {"body", "title", "summary"}
    by_caller: dict[str, set] = {}
    for caller, name, cols in reads:
        by_caller.setdefault(caller, set()).add((name.split(".", 1)[1], cols))
    # keys: one read per part, of the key source columns only
    assert by_caller["write_part_keys"] == {("articles.parquet", merge.KEY_SOURCE_COLUMNS)}
    # order and pairs read only the keys sidecars, and never their text-derived columns together
    for caller in ("read_order", "find_pairs"):
        for name, cols in by_caller[caller]:
            assert name.startswith("keys-") and cols is not None and not (set(cols) & text), (caller, cols)
    assert {c for _, c in by_caller["read_order"]} == {("warc_file",), merge.ORDER_COLUMNS}
    # the dedup drops read only the position columns of the parts
    assert by_caller["_dedup_drops"] == {("articles.parquet", ("doc_id", "url", "warc_file", "warc_offset"))}
    readers_of_text = {caller for caller, name, cols in reads if name.endswith(".articles.parquet")
                       and (cols is None or set(cols) & text)}
    if group_rows == 1:
        # months of one row still go through month_table
        assert "_month_spill" in readers_of_text and readers_of_text <= {"write_part_keys", "_month_spill", "month_table"}
        assert {c for _, c in by_caller["_month_order"]} == {tuple(merge.store._SORT_SHARD)}
        # a streamed month reads each of its parts once for its rows (after once for the sort columns)
        spills = [name for caller, name, _ in reads if caller == "_month_spill"]
        assert len(spills) == len([1 for caller, _, _ in reads if caller == "_month_order"])
    else:
        assert readers_of_text == {"write_part_keys", "month_table"}


@pytest.mark.ray
def test_ray_engine_equals_in_memory_merge(planted: list[PartFiles], tmp_path: Path) -> None:
    pytest.importorskip("ray")
    ref, _ = _reference(planted, tmp_path / "ref")
    got, _ = _out_of_core(planted, tmp_path / "ray", engine="ray", workers=2, rows_per_task=4)
    _assert_same(got, ref)
    import ray

    assert not ray.is_initialized()


def test_empty_parts(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    art, dro = tmp_path / "parts/e-0.articles.parquet", tmp_path / "parts/e-0.dropped.parquet"
    pq.write_table(schema.ARTICLES.empty_table(), art)
    pq.write_table(pa.Table.from_pylist([_drop("e.warc.gz", 1, "read", "http_status")], schema=schema.DROPPED), dro)
    parts = [PartFiles(art, dro, keys_path(art, CFG["dedup"]))]
    ref, _ = _reference(parts, tmp_path / "ref")
    got, res = _out_of_core(parts, tmp_path / "ooc")
    _assert_same(got, ref)
    assert res.articles.articles == 0 and res.dropped.to_pylist() == [{"stage": "read", "reason": "http_status", "n": 1}]


def test_merge_estimate_is_bounded_by_the_task_size() -> None:
    from forecast_env.corpus_build.rates import MERGE_SECONDS_PER_MILLION, merge_estimate

    small, big = merge_estimate(1_000_000), merge_estimate(20_000_000, workers=16)
    assert small["estimate"] and "RESULTS.md" in small["source"]
    assert small["cpu_hours"] == round(sum(MERGE_SECONDS_PER_MILLION.values()) / 3600, 3)
    assert big["cpu_hours"] == pytest.approx(20 * small["cpu_hours"], rel=1e-2)
    assert big["wall_hours"] < big["cpu_hours"] and big["disk_bytes"] == 20 * small["disk_bytes"]
    # the pair tasks are bounded by their partition: 20x the articles, far less than 20x their peak
    pairs = [e["peak_memory_bytes_per_phase"]["pairs"] for e in (small, big)]
    assert pairs[1] < 6 * pairs[0]
    # the store writes one row group at a time: a larger month costs nothing more
    months = [merge_estimate(1_000_000, largest_month=m, dropped_largest_stage=m) for m in (100_000, 1_300_000)]
    assert months[0]["peak_memory_bytes_per_phase"]["store"] == months[1]["peak_memory_bytes_per_phase"]["store"]
    same_month = [merge_estimate(n, largest_month=100_000, dropped_largest_stage=100_000) for n in (1_000_000, 20_000_000)]
    stores = [e["peak_memory_bytes_per_phase"]["store"] for e in same_month]
    assert stores[1] - stores[0] == pytest.approx(19_000_000 * 260, rel=1e-6)  # the per-article state only


def test_article_tallies_add_up_and_count_what_the_rows_hold(micro_corpus: Path) -> None:
    """The funnel's tally of kept articles: the tallies of any split of the rows combine into the
    tally of all of them, and its figures are the rows' own counts."""
    import polars as pl

    from forecast_env.corpus_build.report import combine_tallies, tally_articles, visibility_moves

    rows = pa.concat_tables([pq.read_table(p, columns=list(merge.REPORT_COLUMNS))
                             for p in sorted((micro_corpus / "corpus/articles").glob("*.parquet"))])
    whole = build_report([], schema.DROPPED.empty_table(), rows, [])
    cuts = [0, 7, 100, rows.num_rows // 2, rows.num_rows]
    parts = [tally_articles(rows.slice(a, b - a)) for a, b in itertools.pairwise(cuts)]
    assert build_report([], schema.DROPPED.empty_table(), combine_tallies(parts), []) == whole
    df = pl.from_arrow(rows)
    assert whole["kept"] == rows.num_rows
    assert whole["leak_flags"] == int(df["leak_flag"].sum()) and whole["market_quotes"] == int(df["market_quote"].sum())
    months = df.group_by(pl.col("day").dt.strftime("%Y-%m").alias("m")).len()
    assert whole["months"] == {m: n for m, n in sorted(zip(months["m"].to_list(), months["len"].to_list()))}
    assert whole["timestamps"]["source_counts"]["pub"] == df.filter(pl.col("t_source") == "pub").height
    moved = sum(1 for moves in df["visible_moves"].to_list() if sum(m["days"] for m in moves or []) != 0)
    assert moved and visibility_moves(rows)["articles_moved"] == moved
    per_rule: dict[str, int] = {}
    for moves in df["visible_moves"].to_list():
        for m in moves or []:
            per_rule[m["rule"]] = per_rule.get(m["rule"], 0) + 1
    assert {r: v["articles"] for r, v in whole["visibility"]["rules"].items()} == per_rule
