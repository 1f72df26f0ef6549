"""The long commands the crash harness kills, each on a small world, and their extra state checks."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from tests.support.warc_data import Page, english_body, write_warc
from tests.system.crash._crash_harness import Command

#: Rows per row group of the merge in the harness's corpus builds: the small months then take the
#: spill path of a month larger than one row group (`merge._write_month_streamed`).
SPILL_ROWS = "2"
#: Bytes per read of a download in the harness's fetches: many chunks per file, so many kill points.
FETCH_CHUNK = 16384


def small_warcs(root: Path) -> list[Path]:
    """Three small WARC files: 14 records over three months, a near-duplicate pair, a bad status."""
    root.mkdir(parents=True, exist_ok=True)
    shared = english_body(500)

    def page(slug: str, day: str, seed: int, **kw) -> Page:
        return Page(f"https://news{seed % 3}.example.com/{slug}", title=kw.pop("title", f"Story {slug} of the week"),
                    body=kw.pop("body", english_body(seed)), published=f"{day}T08:00:00Z", **kw)

    return [
        write_warc(root / "w1.warc.gz", [page("a1", "2025-04-01", 1, body=shared), page("a2", "2025-04-02", 2, body=shared),
                                         page("m1", "2025-03-10", 3), page("m2", "2025-03-12", 11),
                                         Page("https://news0.example.com/missing", status=404),
                                         page("a3", "2025-04-09", 12)]),
        write_warc(root / "w2.warc.gz", [page("late1", "2025-03-05", 8, crawl="2025-04-20T00:00:00Z"),
                                         page("late2", "2025-03-31", 9, body=shared, crawl="2025-04-20T00:00:00Z"),
                                         page("a4", "2025-04-11", 13)]),
        write_warc(root / "w3.warc.gz", [page("may1", "2025-05-02", 10, crawl="2025-05-03T00:00:00Z"),
                                         page("may2", "2025-05-04", 14, crawl="2025-05-05T00:00:00Z"),
                                         page("may3", "2025-05-06", 15, crawl="2025-05-07T00:00:00Z"),
                                         page("may4", "2025-05-08", 16, crawl="2025-05-09T00:00:00Z")]),
    ]


def corpus_command(warc_dir: Path, ws: Path) -> Command:
    """`corpus build` over the small WARCs, one worker, the merge's spill path on."""
    return Command("corpus build", ["corpus", "build", "--warc", str(warc_dir / "*.warc.gz"), "--workspace", str(ws),
                                    "--workers", "1", "--no-progress"], [ws / "corpus"],
                   env={"CRASH_TEST_ROW_GROUP_ROWS": SPILL_ROWS})


def check_parts(cmd: Command) -> list[str]:
    """A part's marker names two tables that are there and hold the rows it counts."""
    parts = cmd.roots[0] / "parts"
    problems = []
    for marker in parts.glob("*.json"):
        if marker.name.endswith(".failed.json"):
            continue
        base = marker.name[: -len(".json")]
        counters = json.loads(marker.read_text())
        for kind, key in (("articles", "kept"), ("dropped", "dropped")):
            table = parts / f"{base}.{kind}.parquet"
            if not table.exists():
                problems.append(f"part {marker.name} is marked done without {table.name}")
            elif pq.ParquetFile(table).metadata.num_rows != counters[key]:
                problems.append(f"part {table.name}: rows differ from its marker's {key}")
    return problems


def index_command(ws: Path) -> Command:
    """`index build` with the static embedding backend (fast, deterministic)."""
    return Command("index build", ["index", "build", "--workspace", str(ws), "--no-progress",
                                   "--set", "embed.backend=static"], [ws / "index"])


def check_months(cmd: Command) -> list[str]:
    """A month's marker names outputs that are there, with the rows it counts."""
    import faiss

    from forecast_env.retrieval.layout import IndexLayout

    layout = IndexLayout(cmd.roots[0])
    problems = []
    for marker in (cmd.roots[0] / "months").glob("*.json"):
        m = json.loads(marker.read_text())
        month = m["month"]
        for p in (layout.text(month), layout.dense(month), layout.bm25_month(month) / "rows.npy"):
            if not p.exists():
                problems.append(f"month {month} is marked done without {p.name}")
        if layout.dense(month).exists() and faiss.read_index(str(layout.dense(month))).ntotal != m["rows"]:
            problems.append(f"month {month}: the dense shard's rows differ from its marker")
    return problems


def events_command(polymarket: Path, ws: Path) -> Command:
    """`events build` from the micro world's Polymarket cache."""
    return Command("events build", ["events", "build", "--polymarket", str(polymarket), "--workspace", str(ws),
                                    "--no-progress"], [ws / "events"])


def run_command_for(ws: Path, run_id: str = "crash") -> Command:
    """`run` of the uniform and the news-reading agent over every event (one worker)."""
    return Command("run", ["run", "--workspace", str(ws), "--agents", "uniform,retrieval", "--split", "all",
                           "--workers", "1", "--run-id", run_id, "--no-progress"], [ws / "runs" / run_id], base=ws)


def fetch_command(base_url: str, out: Path, months: str) -> Command:
    """`corpus fetch` of the served world's CC-NEWS months, small reads."""
    return Command("corpus fetch", ["corpus", "fetch", "--cc-news", months, "--out", str(out), "--workers", "1",
                                    "--no-progress", "--set", f"corpus.source.base_url={base_url}",
                                    "--set", "corpus.source.requests_per_second=1000",
                                    "--set", f"corpus.source.chunk_bytes={FETCH_CHUNK}",
                                    "--set", "corpus.source.backoff_base_s=0.001",
                                    "--set", "corpus.source.backoff_max_s=0.002"], [out],
                   progress=("manifest.json",))


def check_mirror(served_files: dict[str, Path]) -> Callable[[Command], list[str]]:
    """A check that every finished file of the mirror (and every one its manifest names) is the served one."""
    def check(cmd: Command) -> list[str]:
        out = cmd.roots[0]
        problems = []
        for cc, src in served_files.items():
            dest = out / cc
            if dest.exists() and dest.read_bytes() != src.read_bytes():
                problems.append(f"{cc}: a finished file of the mirror differs from the served file")
        mpath = out / "manifest.json"
        if mpath.exists():
            for rec in json.loads(mpath.read_text()).get("files", {}).values():
                named = out / rec["path"]
                if not named.exists() or named.stat().st_size != rec["size"]:
                    problems.append(f"the mirror's manifest names {rec['path']}, which is not there whole")
        return problems
    return check


def fresh_copy(src: Path, dest: Path, drop: tuple[str, ...] = ()) -> Path:
    """A copy of a workspace without the named folders (the stage under test starts from nothing)."""
    if dest.exists():
        shutil.rmtree(dest)
    temporary = shutil.ignore_patterns(".*.tmp")

    def ignore(folder: str, names: list[str]) -> set[str]:
        # the dropped folders are never read: in the shared micro workspace other tests write runs/ meanwhile
        return set(temporary(folder, names)) | ({n for n in names if n in drop} if Path(folder) == src else set())

    shutil.copytree(src, dest, ignore=ignore)
    return dest
