"""The benchmarks that measure the planner's rates record them (`--record`, benchmarks/recording.py): each
script's results -> rates mapping gives the committed figures of forecast_env/rates.json from the numbers
its logs report, and each `--record` path writes its keys (into a copy of the file; the measuring itself
replaced by those numbers)."""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks import recording
from benchmarks.recording import Measurement, Recording, add_record_arguments, record_rates, run_command
from forecast_env.rates import RATES_FILE, read_rates

COMMITTED = read_rates()
MIB = 2**20


@pytest.fixture
def rates_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the shipped data file that every `--record` in the test writes instead."""
    path = tmp_path / "rates.json"
    shutil.copyfile(RATES_FILE, path)
    monkeypatch.setattr(recording, "RATES_FILE", path)
    monkeypatch.setattr(recording.os, "getloadavg", lambda: (0.42, 0.5, 0.6))
    monkeypatch.setattr(recording.os, "cpu_count", lambda: 2)
    return path


def changed(path: Path) -> dict[str, Any]:
    """The rates of `path` that differ from the shipped file's."""
    return {k: r for k, r in read_rates(path).items() if r != COMMITTED[k]}


# -- the recording itself ----------------------------------------------------------------------


def test_the_recorded_command_is_the_run_without_its_recording_flags() -> None:
    argv = ["all", "--root", "/tmp/m b", "--record", "--state", "idle", "--record-command=x", "--record-section", "L",
            "--sizes", "250000,1000000"]
    assert run_command("benchmarks.corpus.merge", argv, ["OMP_NUM_THREADS=2"]) == (
        "OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.corpus.merge all --root '/tmp/m b' --sizes 250000,1000000")


@pytest.mark.parametrize("load,flags,state", [(0.42, [], "idle"), (2.5, [], "loaded"), (0.1, ["--state", "loaded"],
                                                                                          "loaded")])
def test_the_machine_state_comes_from_the_load_before_the_run_unless_given(
        monkeypatch: pytest.MonkeyPatch, load: float, flags: list[str], state: str) -> None:
    monkeypatch.setattr(recording.os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(recording.os, "cpu_count", lambda: 2)
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int)
    add_record_arguments(ap)
    assert recording.start_recording(ap.parse_args(["--n", "3"]), "benchmarks.x.y", ["--n", "3"]) is None
    argv = ["--n", "3", "--record", *flags]
    rec = recording.start_recording(ap.parse_args(argv), "benchmarks.x.y", argv)
    assert rec == Recording(".venv/bin/python -m benchmarks.x.y --n 3", state, load, 2)
    given = ["--record", "--record-command", "cd DATA && taskset -c 1 .venv/bin/python -m benchmarks.x.y --n 3"]
    assert recording.start_recording(ap.parse_args(given), "benchmarks.x.y", given).command == given[-1]
    with pytest.raises(SystemExit, match="no script"):  # before the run, not after it
        recording.start_recording(ap.parse_args(["--record", "--record-command", "make bench"]), "benchmarks.x.y", [])


def test_record_rates_writes_each_rate_with_the_run(rates_copy: Path) -> None:
    rec = Recording(".venv/bin/python -m benchmarks.retrieval.embedding_backends --paths default", "idle", 0.42, 2,
                    section="benchmarks/log/2027-01-02-embed.md")
    assert record_rates(None, {"embed": Measurement(40.0, "x")}) == []  # a run without --record writes nothing
    assert record_rates(rec, {}) == []
    assert rates_copy.read_text() == RATES_FILE.read_text()
    [rate] = record_rates(rec, {"embed": Measurement(40.0, "300 texts", measured_on="generated texts")})
    assert changed(rates_copy) == {"embed": rate}
    assert (rate.value, rate.command, rate.state, rate.section, rate.measured_on, rate.unit) == (
        40.0, rec.command, "idle", rec.section, "generated texts", COMMITTED["embed"].unit)
    assert rate.note == "300 texts (1-minute load 0.42 on 2 CPUs before the run)"


# -- each script: results -> rates, from the numbers of its logs ------------------------------------


def test_warc_stage_speed_rates_are_the_table_figures_of_the_variants_run() -> None:
    from benchmarks.corpus.warc_stage_speed import rates_from

    # benchmarks/log/2026-12-04-issue30-idle-rates.md: 743 pages, best CPU s of 2
    best = {"default": (743, 463, 19.40), "news": (743, 459, 9.67), "paper": (743, 407, 9.83),
            "longer": (743, 460, 20.66), "body=lean": (743, 0, 743 / 43.9), "body=cascade": (743, 0, 743 / 54.3)}
    rates = rates_from(best, 2)
    assert {k: m.value for k, m in rates.items()} == {k: COMMITTED[k].value for k in (
        "extract.trafilatura", "extract.own", "extract.longer", "extract.lean", "extract.cascade")}
    assert "variant `default`" in rates["extract.trafilatura"].note and "best of 2" in rates["extract.own"].note
    assert set(rates_from({"paper": (743, 407, 9.83)}, 1)) == set()  # only the variants a rate names


def test_embedding_backends_rate_is_the_default_paths_median() -> None:
    from benchmarks.retrieval.embedding_backends import PathsRun, rates_from

    # benchmarks/log/2026-12-04-issue30-idle-rates.md: 26.57 CPU ms per article, 37.6 (best round 37.9)
    results = {"default": {"cpu_ms_per_article": 26.57, "articles_per_core_s": 37.6, "articles_per_core_s_best": 37.9},
               "max_seq_length=128": {"cpu_ms_per_article": 11.70, "articles_per_core_s": 85.4}}
    run = PathsRun(300, "articles of workspace realmix_ws", False, 1, 3, results)
    assert {k: m.value for k, m in rates_from(run).items()} == {"embed": COMMITTED["embed"].value}
    assert rates_from(run)["embed"].measured_on is None  # keeps "real articles"
    generated = PathsRun(300, "generated texts", True, 1, 3, results)
    assert rates_from(generated)["embed"].measured_on == "generated texts"
    assert rates_from(PathsRun(300, "", False, 1, 3, {"max_seq_length=128": results["max_seq_length=128"]})) == {}


def test_quality_profile_keep_rates_are_the_held_out_articles_kept() -> None:
    from benchmarks.corpus.quality_profile_keep import rates_from

    # benchmarks/log/2026-12-03-issue30-page-rule.md: 357 and 454 of the 471 held-out articles
    totals = {("held out", "article"): Counter(pages=500, reach=471, keep_paper=357, keep_news=454),
              ("held out", "non-article"): Counter(pages=90, reach=80, keep_paper=60, keep_news=20),
              ("tuned", "article"): Counter(pages=950, reach=946, keep_paper=700, keep_news=921)}
    rates = rates_from(totals)
    assert {k: m.value for k, m in rates.items()} == {k: COMMITTED[k].value for k in ("keep.paper", "keep.news")}
    assert rates["keep.news"].note.startswith("454 of the 471 held-out")
    assert rates_from({}) == {}


def test_index_at_scale_rates_of_a_build_and_a_query(tmp_path: Path) -> None:
    from benchmarks.retrieval.index_at_scale import IVF_STAGE, Timings, rates_from_build, rates_from_query

    # benchmarks/log/2026-11-30-ivf-months-and-10m.md: the 10 IVF months of 10M articles retrained in 781 s on
    # 2 threads; 22.0 GB on disk; 164 MB private after the searches
    months = [f"2024-{m:02d}" for m in range(1, 11)]
    result = {"summary": {"articles": 10_000_000, "approximate": months}, "disk_mb": {"total": 22_000.0}}
    timings = Timings(tmp_path / "timings.json")
    for _ in months:
        timings.add(IVF_STAGE, 78.1)
    rates = rates_from_build(result, timings, threads=2)
    assert rates["ivf"].value == COMMITTED["ivf"].value
    # the script's MB are MiB (2**20 bytes); the committed 2,200 and 164e6 read them as 10**6
    assert rates["index.disk"].value == round(22_000 * MIB / 10_000_000) == 2307
    assert json.loads((tmp_path / "timings.json").read_text()) == {IVF_STAGE: 781.0}  # the file is as before
    resumed = Timings(tmp_path / "resumed.json")
    resumed.add(IVF_STAGE, 200.0)  # one month of ten: no per-article IVF rate
    assert set(rates_from_build(result, resumed, 2)) == {"index.disk"}
    assert rates_from_build({"generated": 10, "timings_s": {}}, resumed, 2) == {}
    query = {"articles": 10_000_000, "memory_mb": {"after_searches": {"anonymous": 164.0}}}
    assert rates_from_query(query)["index.search_memory"].value == 164 * MIB


def test_build_speed_rate_is_the_largest_workers_peak() -> None:
    from benchmarks.corpus.build_speed import rates_from

    # benchmarks/log/2026-11-29-corpus-build.md: largest worker 554 MB (ru_maxrss / 1024: MiB)
    rate = rates_from(554 * 1024, "small")["corpus.worker_peak"]
    assert rate.value == 554 * MIB and rate.measured_on == COMMITTED["corpus.worker_peak"].measured_on
    assert rates_from(554 * 1024, "2000")["corpus.worker_peak"].measured_on == "2000 generated pages"


#: benchmarks/log/2026-12-01-corpus-merge.md: the 1M out-of-core run of `all` (CPU s 334.5 / 14.4 / 45.7 per
#: phase; keys 526 and store 1,363 bytes per article) and the 250k in-memory run (3,214 MB); the 1M in-memory
#: run did not fit
MERGE_ALL = [
    {"mode": "ooc", "fits": True, "n": 250_000, "articles": 250_000, "keys_bytes": 1, "store_bytes": 1,
     "cpu_s_cumulative_after_phase": {"keys": 90.0, "order": 91.0, "pairs": 94.0, "store": 105.0},
     "driver_peak_mb_per_phase": {"keys": 142, "order": 300, "pairs": 419, "store": 549}, "largest_month_rows": 16_900},
    {"mode": "memory", "fits": True, "n": 250_000, "articles": 250_000, "driver_peak_mb": 3214},
    {"mode": "ooc", "fits": True, "n": 1_000_000, "articles": 1_000_000, "keys_bytes": 526_000_000,
     "store_bytes": 1_363_000_000, "cpu_s_cumulative_after_phase": {"keys": 334.5, "order": 338.0, "pairs": 348.9,
                                                                   "store": 394.6},
     "driver_peak_mb_per_phase": {"keys": 144, "order": 470, "pairs": 792, "store": 1182}, "largest_month_rows": 67_584},
    {"fits": False, "killed_at_gb": 8.15, "returncode": -9, "args": []},
]
#: the same log, second session: the 5M run with the keys cached, the store by row group (1,601 MB peak)
MERGE_5M_CACHED = {"mode": "ooc", "articles": 5_000_000, "keys_bytes": 2_630_000_000, "store_bytes": 6_880_000_000,
                   "cpu_s_cumulative_after_phase": {"keys": 0.0, "order": 31.8, "pairs": 183.4, "store": 639.0},
                   "driver_peak_mb_per_phase": {"keys": 130, "order": 1272, "pairs": 2026, "store": 1601},
                   "largest_month_rows": 329_599}
#: the dedup passes alone at 5M (order peak 1,258 MB); the log does not give the run's base, 143 MiB is
#: merge.base_bytes
MERGE_PAIRS_5M = {"mode": "pairs", "articles": 5_000_000, "base_mb": 143,
                  "driver_peak_mb_per_phase": {"order": 1258, "pairs": 1719}}


def test_merge_rates_of_all_run_and_pairs() -> None:
    from benchmarks.corpus.merge import rates_from_all, rates_from_merge, rates_from_pairs

    base, month_row = COMMITTED["merge.base_bytes"].value, COMMITTED["merge.bytes.month_row"].value
    rates = {k: m.value for k, m in rates_from_all(MERGE_ALL, base, month_row).items()}
    same = ("merge.cpu.keys", "merge.cpu.pairs", "merge.cpu.store", "merge.bytes.keys_disk", "merge.bytes.store_disk")
    assert {k: rates[k] for k in same} == {k: COMMITTED[k].value for k in same}
    assert set(rates) == {*same, "merge.bytes.store_state", "merge.bytes.in_memory"}
    # the committed 12,290 is not what 3,214 MiB less the base over 250k articles gives
    assert rates["merge.bytes.in_memory"] == round((3214 * MIB - base) / 250_000) == 12_881
    cached = {k: m.value for k, m in rates_from_merge(MERGE_5M_CACHED, False, base, month_row).items()}
    assert "merge.cpu.keys" not in cached  # keys cached: their CPU is not this run's
    assert cached["merge.bytes.store_state"] == COMMITTED["merge.bytes.store_state"].value  # 260
    assert cached["merge.bytes.keys_disk"] == COMMITTED["merge.bytes.keys_disk"].value
    pairs = {k: m.value for k, m in rates_from_pairs(MERGE_PAIRS_5M).items()}
    assert pairs["merge.base_bytes"] == COMMITTED["merge.base_bytes"].value
    # (1,258 - 143) MiB over 5M articles; the committed 200 is the slope of the order peak from 1M to 5M
    assert pairs["merge.bytes.order"] == 234


# -- each script's --record path writes its keys ----------------------------------------------------


def test_warc_stage_speed_records_the_variants_it_ran(rates_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.corpus import extract_quality, warc_stage_speed

    figures = {"news": (743, 459, 9.67), "default": (743, 463, 19.40), "paper": (743, 407, 9.83)}
    monkeypatch.setattr(extract_quality, "detect_loader", lambda root, name: lambda r: [object()])
    monkeypatch.setattr(warc_stage_speed, "write_pages_warc", lambda path, pages: path.write_bytes(b"w") and 1)
    monkeypatch.setattr(warc_stage_speed, "run_variant", lambda warc, variant: figures[variant])
    argv = ["--set", "aeb=/data/aeb", "--variants", "default,paper", "--repeat", "1", "--record"]
    warc_stage_speed.main(argv)
    [(key, rate)] = changed(rates_copy).items()
    assert (key, rate.value, rate.state) == ("extract.trafilatura", 38.3, "idle")
    assert rate.command == (".venv/bin/python -m benchmarks.corpus.warc_stage_speed --set aeb=/data/aeb "
                            "--variants default,paper --repeat 1")
    warc_stage_speed.main(argv[:-1])  # without --record nothing is written
    assert list(changed(rates_copy)) == ["extract.trafilatura"]


def test_embedding_backends_records_embed(rates_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.retrieval import embedding_backends as eb

    run = eb.PathsRun(300, "articles of workspace ws", False, 1, 3, {"default": {"articles_per_core_s": 41.2}})
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # main sets it: restored after the test
    monkeypatch.setattr(eb, "compare_paths", lambda args, threads: run)
    eb.main(["--paths", "default", "--threads", "1", "--record", "--state", "loaded"])
    assert {k: (r.value, r.state) for k, r in changed(rates_copy).items()} == {"embed": (41.2, "loaded")}
    with pytest.raises(SystemExit, match="--paths"):
        eb.main(["--record"])


def test_index_at_scale_records_build_and_query(rates_copy: Path, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    from benchmarks.retrieval import index_at_scale as ias

    def build(root: Path, rows: int, months: int, upto: Any, stage: str, timings: Any) -> dict[str, Any]:
        for _ in range(months):
            timings.add(ias.IVF_STAGE, 10.0)
        return {"summary": {"articles": rows, "approximate": list(range(months))}, "disk_mb": {"total": 2.0}}

    monkeypatch.setattr(ias, "build", build)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    ias.main(["build", "--root", str(tmp_path), "--rows", "1000", "--months", "2", "--record"])
    got = changed(rates_copy)
    assert {k: r.value for k, r in got.items()} == {"ivf": 0.04, "index.disk": round(2 * MIB / 1000)}
    assert got["ivf"].command == f"OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.retrieval.index_at_scale build " \
                                 f"--root {tmp_path} --rows 1000 --months 2"
    answer = {"articles": 1000, "memory_mb": {"after_searches": {"anonymous": 100.0}}}
    monkeypatch.setattr(ias.subprocess, "run", lambda cmd, **kw: SimpleNamespace(
        returncode=0, stdout=json.dumps(answer) + "\n", stderr="", cmd=cmd))
    ias.main(["query", "--root", str(tmp_path), "--record"])
    assert changed(rates_copy)["index.search_memory"].value == 100 * MIB


def test_merge_records_from_all_run_and_pairs(rates_copy: Path, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    from benchmarks.corpus import merge

    monkeypatch.setattr(merge, "run_all", lambda *a: MERGE_ALL)
    merge.main(["all", "--root", str(tmp_path), "--record"])
    assert set(changed(rates_copy)) == {"merge.cpu.keys", "merge.cpu.pairs", "merge.cpu.store", "merge.bytes.keys_disk",
                                        "merge.bytes.store_disk", "merge.bytes.store_state", "merge.bytes.in_memory"}
    assert changed(rates_copy)["merge.bytes.in_memory"].value == 12_881
    monkeypatch.setattr(merge, "run_pairs", lambda keys, rows: MERGE_PAIRS_5M)
    merge.main(["pairs", "--keys", str(tmp_path), "--record", "--state", "loaded"])
    assert changed(rates_copy)["merge.bytes.order"].value == 234
    monkeypatch.setattr(merge, "run", lambda *a: MERGE_5M_CACHED)
    merge.main(["run", "--parts", str(tmp_path), "--ws", str(tmp_path / "ws"), "--record"])
    assert changed(rates_copy)["merge.bytes.store_state"].value == 260
    assert changed(rates_copy)["merge.cpu.store"].value == 91.1  # 455.6 CPU s over 5M articles


def test_build_speed_records_the_worker_peak(rates_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.corpus import build_speed

    summary = {"timings": {"process_s": 1.0, "dedup_s": 0.1, "store_s": 0.1}, "counts": {"kept": 3}}
    def process_warc(path: Path) -> tuple[None, None, dict[str, int]]:
        sum(range(20_000))  # some CPU time: the script divides by it
        return None, None, {"records_in": 5}

    def world(size: str, out: Path) -> list[Path]:
        out.mkdir(parents=True)
        (out / "a.warc.gz").write_bytes(b"w")
        return [out / "a.warc.gz"]

    monkeypatch.setattr(build_speed, "_world", world)
    monkeypatch.setattr(build_speed, "process_warc", process_warc)
    monkeypatch.setattr(build_speed, "build_corpus", lambda *a, **kw: summary)
    monkeypatch.setattr(build_speed.resource, "getrusage", lambda who: SimpleNamespace(ru_maxrss=600 * 1024))
    build_speed.main(["small", "--record"])
    rate = changed(rates_copy)["corpus.worker_peak"]
    assert (rate.value, rate.command) == (600 * MIB, ".venv/bin/python -m benchmarks.corpus.build_speed small")


def test_question_pipeline_rates_are_the_runs_tokens_and_time_per_seed() -> None:
    from benchmarks.questions.pipeline_cost import rates_from

    out = {"preset": "questions_large", "seeds": 400, "accepted": 20, "tokens_per_seed": 350.5,
           "tokens_per_accepted": 7010.0, "seconds": {"pipeline": 40.0}}
    rates = rates_from(out)
    assert {k: m.value for k, m in rates.items()} == {"questions.tokens_per_seed": 350.5,
                                                      "questions.tokens_per_accepted": 7010.0,
                                                      "questions.pipeline_seconds_per_seed": 0.1}
    assert all("scripted model" in (m.measured_on or "") for m in rates.values())
    assert set(rates_from({**out, "accepted": 0})) == {"questions.tokens_per_seed", "questions.pipeline_seconds_per_seed"}
    assert rates_from({**out, "seeds": 0, "accepted": 0}) == {}
