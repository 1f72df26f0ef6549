"""ForecastBench import on the published rounds: the reader against a bare `json.load`, and the whole import.

    .venv/bin/python -m benchmarks.forecastbench.import_rounds --repo /tmp/fb_repo \
        --mirror /work/.mirror/forecastingresearch+forecastbench-datasets/repo [--workspace demo_ws] \
        [--rounds 2026-03-01..2026-05-10] [--screen | --no-screen] [--repeat 3] [--out bench_out/forecastbench_import.json]

`--mirror` first extracts `datasets/question_sets/` and `datasets/resolution_sets/` of a bare git mirror of the
forecastbench-datasets repository into `--repo` (`git cat-file blob` per file); blobs the mirror lacks are
skipped, listed and counted (the reader then reports those files as missing, as it would for any snapshot).

What is measured, each in a fresh child interpreter that has already imported everything it needs, so that
neither the interpreter's start nor the imports count:

(a) **the reader**: `envs.events.forecastbench.read_rounds(root)` over EVERY round of `--repo` (`--rounds` does
    not apply), against the floor of the same files through `json.loads(path.read_bytes())`, once keeping
    nothing (`json_each`: the peak is the largest file's) and once keeping every document (`json_all`: what
    holding the raw rounds would cost). Best wall time of `--repeat` runs, and the largest peak.
(b) **the whole import**: `envs.events.build.import_forecastbench(repo, WS, rounds)` into a fresh copy of
    `--workspace` (its runs/, exports/, audit/ left out; the copy is not timed), with the corpus screen on
    (`--screen`, the default: the config's judge, `offline` by default) or off (`--no-screen`:
    `config={"screen": {"enabled": False}}`). Wall time, peak memory, events in / kept, the funnel's
    exclusions, items by kind and status, file problems, and the time per stage (the build's stage functions
    wrapped with a timer; `other` is the rest of the total).

Memory is the real peak resident set of the child (`VmHWM` of /proc/self/status, after resetting it through
/proc/self/clear_refs right before the measured call), so memory that polars, pyarrow and the JSON parser
allocate outside Python's allocator counts; tracemalloc would miss it. `peak_growth_mb` is that peak less the
resident set just before the call; `peak_mb` the peak itself (interpreter and imports included).

The script prints a Markdown table and writes the figures as JSON to `--out` (bench_out/ is not committed),
with the 1-minute load average before and after and `forecast_env.rates.machine_state`: figures taken on a
loaded machine are slower than the machine is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import REPO, child_env, module_command

MODULE = "benchmarks.forecastbench.import_rounds"
FOLDERS = ("datasets/question_sets", "datasets/resolution_sets")
WS_SKIP = ("runs", "exports", "audit")


# ---------------------------------------------------------------------------------------------
# the mirror
# ---------------------------------------------------------------------------------------------


def extract_mirror(git_dir: Path, repo: Path, ref: str = "HEAD") -> dict[str, Any]:
    """Write the question and resolution sets of a bare mirror into `repo`; blobs the mirror lacks are skipped
    (and a stale copy of such a file removed, so `repo` holds what the mirror holds)."""
    env = {**os.environ, "GIT_DIR": str(git_dir)}
    listing = subprocess.run(["git", "ls-tree", "-r", ref, *FOLDERS], env=env, check=True, capture_output=True,
                             text=True).stdout
    written, missing, size = [], [], 0
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        _mode, kind, sha = meta.split()
        if kind != "blob":
            continue
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        blob = subprocess.run(["git", "cat-file", "blob", sha], env=env, capture_output=True)
        if blob.returncode != 0:
            missing.append(path)
            target.unlink(missing_ok=True)
            continue
        target.write_bytes(blob.stdout)
        written.append(path)
        size += len(blob.stdout)
    commit = subprocess.run(["git", "rev-parse", ref], env=env, capture_output=True, text=True).stdout.strip()
    return {"git_dir": str(git_dir), "commit": commit, "files_written": len(written), "bytes_written": size,
            "blobs_missing": len(missing), "missing": missing}


# ---------------------------------------------------------------------------------------------
# the child: one measurement
# ---------------------------------------------------------------------------------------------


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key + ":"))


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current resident set
        return True
    except OSError:
        return False


def _round_files(root: Path) -> list[Path]:
    from forecast_env.envs.events.forecastbench import QUESTION_SETS, RESOLUTION_SETS, due_dates

    out = []
    for d in due_dates(root):
        for p in (root / QUESTION_SETS / f"{d}-llm.json", root / RESOLUTION_SETS / f"{d}_resolution_set.json"):
            if p.is_file():
                out.append(p)
    return out


_STAGES = {  # (module, function) -> stage name; functions missing from a module are skipped
    ("forecast_env.envs.events.forecastbench", "read_rounds"): "read",
    ("forecast_env.envs.events.forecastbench_import", "polymarket_conditions"): "pm_conditions",
    ("forecast_env.envs.events.forecastbench_import", "import_rounds"): "candidates",
    ("forecast_env.envs.events.build", "daily_beliefs"): "beliefs",
    ("forecast_env.envs.events.build", "_market_filters"): "market_filters",
    ("forecast_env.envs.events.build", "_open_searcher"): "open_index",
    ("forecast_env.envs.events.build", "_schedule_all"): "schedule",
    ("forecast_env.envs.events.build", "record_market_quotes"): "market_quotes",
    ("forecast_env.envs.events.build", "_screen_all"): "screen",
    ("forecast_env.envs.events.build", "cut_exposed"): "exposure",
    ("forecast_env.envs.events.build", "assemble_tables"): "assemble",
    ("forecast_env.envs.events.build", "write_tables"): "write_tables",
    ("forecast_env.envs.events.build", "recut_stored"): "recut_stored",
    ("forecast_env.envs.events.build", "write_report"): "write_report",
    ("forecast_env.envs.events.forecastbench_import", "write_items"): "write_items",
}


def _time_stages(stages: dict[str, float]) -> None:
    import functools
    import importlib

    for (mod_name, fn_name), stage in _STAGES.items():
        mod = importlib.import_module(mod_name)
        fn = getattr(mod, fn_name, None)
        if fn is None:
            continue

        def timed(*a: Any, _fn: Any = fn, _stage: str = stage, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return _fn(*a, **kw)
            finally:
                stages[_stage] = stages.get(_stage, 0.0) + time.perf_counter() - t

        setattr(mod, fn_name, functools.wraps(fn)(timed))


def _import_summary(ws: Path, report: dict[str, Any]) -> dict[str, Any]:
    import polars as pl

    from forecast_env.envs.events.forecastbench_import import read_items

    items = read_items(ws)
    by_kind_status = {f"{k}/{s}": n for k, s, n in items.group_by("kind", "status").len().sort("kind", "status")
                      .iter_rows()}
    by_source_status = {f"{k}/{s}": n for k, s, n in items.group_by("source", "status").len()
                        .sort("source", "status").iter_rows()}
    excluded = report.get("excluded") or {}
    return {
        "events_in": report.get("events_in"), "kept": report.get("kept"), "by_split": report.get("by_split"),
        "excluded": excluded, "screened": report.get("screened"), "screen_verdicts": report.get("screen_verdicts"),
        "screen_leaks": report.get("screen_leaks"), "schedule_rows": report.get("schedule_rows"),
        "report_seconds": report.get("seconds"), "counts": report.get("counts"),
        "rounds": len(report.get("rounds") or []), "file_problems": len(report.get("file_problems") or []),
        "file_problem_lines": report.get("file_problems") or [],
        "items": items.height, "items_by_kind_status": by_kind_status, "items_by_source_status": by_source_status,
        "items_scored": int(items.filter(pl.col("status") == "scored").height),
    }


def child(what: str, repo: Path, ws: Path | None, rounds: str | None, screen: bool) -> dict[str, Any]:
    """One measurement in this (fresh) process: everything imported first, then the peak reset and the call."""
    import gc
    import logging

    import polars  # noqa: F401  (imported before the measurement, like the build's own modules)
    import pyarrow  # noqa: F401

    from forecast_env.envs.events import build, forecastbench, forecastbench_import  # noqa: F401
    from forecast_env.envs.events import screen as _screen  # noqa: F401

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    files = _round_files(repo)
    stages: dict[str, float] = {}
    result: Any = None
    out: dict[str, Any] = {"what": what}
    if what == "import":
        from forecast_env.retrieval import Searcher  # noqa: F401  (the screen's index reader)

        _time_stages(stages)
    gc.collect()
    rss0 = _status_kib("VmRSS")
    reset = _reset_peak()
    t0 = time.perf_counter()
    if what == "reader":
        result = forecastbench.read_rounds(repo)
    elif what == "json_each":
        for p in files:
            json.loads(p.read_bytes())
    elif what == "json_all":
        result = [json.loads(p.read_bytes()) for p in files]
    elif what == "import":
        assert ws is not None
        config = None if screen else {"screen": {"enabled": False}}
        result = build.import_forecastbench(repo, ws, rounds=rounds, config=config, progress=False)
    else:
        raise SystemExit(f"unknown measurement {what!r}")
    wall = time.perf_counter() - t0
    peak = _status_kib("VmHWM")
    out.update(wall_s=round(wall, 3), rss_before_mb=round(rss0 / 1024, 1), peak_mb=round(peak / 1024, 1),
               peak_growth_mb=round((peak - rss0) / 1024, 1), peak_reset=reset,
               files=len(files), bytes=sum(p.stat().st_size for p in files))
    if what == "reader":
        out.update(rounds=len(result), questions=sum(len(r.questions) for r in result),
                   resolution_rows=sum(len(r.resolutions) for r in result),
                   file_problems=sum(len(r.errors) for r in result))
    elif what == "import":
        out["stages_s"] = {k: round(v, 3) for k, v in sorted(stages.items(), key=lambda kv: -kv[1])}
        out["stages_s"]["other"] = round(wall - sum(stages.values()), 3)
        assert ws is not None
        out.update(_import_summary(ws, result))
    return out


def run_child(what: str, repo: Path, ws: Path | None, rounds: str | None, screen: bool,
              timeout: float | None = None) -> dict[str, Any]:
    args = ["--child", what, "--repo", str(repo), "--screen" if screen else "--no-screen"]
    if ws is not None:
        args += ["--workspace", str(ws)]
    if rounds:
        args += ["--rounds", rounds]
    proc = subprocess.run(module_command(MODULE, *args), env=child_env(), cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-6000:])
        return {"what": what, "crashed": True, "returncode": proc.returncode, "stderr_tail": proc.stderr[-4000:]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["stderr_lines"] = len(proc.stderr.splitlines())
    return res


# ---------------------------------------------------------------------------------------------
# the parent
# ---------------------------------------------------------------------------------------------


def copy_workspace(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, ignore=lambda d, names: [n for n in names if Path(d) == src and n in WS_SKIP])


def bench_reader(repo: Path, repeat: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"reader": [], "json_each": [], "json_all": []}
    for _ in range(repeat):
        for what in runs:
            runs[what].append(run_child(what, repo, None, None, False))
    out: dict[str, Any] = {}
    for what, rs in runs.items():
        ok = [r for r in rs if not r.get("crashed")]
        if not ok:
            out[what] = rs[0]
            continue
        best = dict(min(ok, key=lambda r: r["wall_s"]))
        best["wall_s_runs"] = [r["wall_s"] for r in ok]
        best["peak_growth_mb"] = max(r["peak_growth_mb"] for r in ok)
        best["peak_mb"] = max(r["peak_mb"] for r in ok)
        out[what] = best
    return out


def bench_import(repo: Path, workspace: Path, rounds: str | None, screen: bool, keep: Path | None,
                 timeout: float | None) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="fb_import_ws_"))
    ws = tmp / "ws"
    try:
        t = time.perf_counter()
        copy_workspace(workspace, ws)
        copy_s = time.perf_counter() - t
        res = run_child("import", repo, ws, rounds, screen, timeout)
        res["workspace_copy_s"] = round(copy_s, 2)
        res["screen"] = screen
        res["rounds_spec"] = rounds or "all"
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.move(str(ws), str(keep))
            res["kept_workspace"] = str(keep)
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _mb(v: Any) -> str:
    return "-" if v is None else f"{v:.0f}"


def markdown(res: dict[str, Any]) -> str:
    lines = [f"Machine: {res['machine']['state']} (load {res['machine']['load_before']:.2f} before, "
             f"{res['machine']['load_after']:.2f} after, {res['machine']['cpus']} CPUs)", ""]
    if res.get("mirror"):
        m = res["mirror"]
        lines += [f"Mirror {m['commit'][:10]}: {m['files_written']} files ({m['bytes_written'] / 1e6:.1f} MB) "
                  f"extracted, {m['blobs_missing']} blobs missing: " + ", ".join(Path(p).name for p in m["missing"]),
                  ""]
    rd = res.get("reader") or {}
    if rd:
        r = rd.get("reader", {})
        lines += [f"Reader over every round: {r.get('rounds')} rounds, {r.get('files')} files "
                  f"({(r.get('bytes') or 0) / 1e6:.1f} MB), {r.get('questions')} questions, "
                  f"{r.get('resolution_rows')} resolution rows, {r.get('file_problems')} file problems.", "",
                  "| measurement | wall s (best) | runs | peak growth MB | peak MB |", "|---|---:|---|---:|---:|"]
        for what in ("reader", "json_each", "json_all"):
            x = rd.get(what) or {}
            if x.get("crashed"):
                lines.append(f"| {what} | crashed (rc {x.get('returncode')}) | | | |")
                continue
            lines.append(f"| {what} | {x.get('wall_s')} | {x.get('wall_s_runs')} | {_mb(x.get('peak_growth_mb'))} | "
                         f"{_mb(x.get('peak_mb'))} |")
        lines.append("")
    im = res.get("import") or {}
    if im:
        if im.get("crashed"):
            lines += [f"Import CRASHED (rc {im.get('returncode')}):", "", "```", im.get("stderr_tail", ""), "```"]
            return "\n".join(lines)
        lines += [f"Import of rounds {im['rounds_spec']} ({im['rounds']} rounds), screen "
                  f"{'on' if im['screen'] else 'off'}:", "",
                  "| figure | value |", "|---|---|",
                  f"| wall s | {im['wall_s']} (report's seconds {im['report_seconds']}) |",
                  f"| peak growth MB / peak MB | {_mb(im['peak_growth_mb'])} / {_mb(im['peak_mb'])} |",
                  f"| events in / kept | {im['events_in']} / {im['kept']} |",
                  f"| kept by split | {im['by_split']} |",
                  f"| screened / verdicts | {im['screened']} / {im['screen_verdicts']} |",
                  f"| excluded | {im['excluded']} |",
                  f"| items | {im['items']} ({im['items_scored']} scored) |",
                  f"| items by kind/status | {im['items_by_kind_status']} |",
                  f"| file problems | {im['file_problems']} |",
                  f"| stages s | {im['stages_s']} |", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="a local copy of forecastbench-datasets (datasets/...)")
    ap.add_argument("--mirror", type=Path, default=None, help="a bare git mirror to extract into --repo first")
    ap.add_argument("--workspace", type=Path, default=REPO / "demo_ws",
                    help="the workspace copied (read only) for the import (default demo_ws)")
    ap.add_argument("--rounds", default=None, help="due dates A..B of the import (default: all)")
    ap.add_argument("--screen", action=argparse.BooleanOptionalAction, default=True,
                    help="the corpus screen on (default) or off during the import")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each reader measurement (best wall time)")
    ap.add_argument("--skip-reader", action="store_true", help="measure the import only")
    ap.add_argument("--skip-import", action="store_true", help="measure the reader only")
    ap.add_argument("--keep-workspace", type=Path, default=None,
                    help="move the imported workspace copy here (to inspect its tables) instead of deleting it")
    ap.add_argument("--timeout", type=float, default=None, help="seconds before the import child is killed")
    ap.add_argument("--out", type=Path, default=REPO / "bench_out" / "forecastbench_import.json")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        ws = args.workspace if args.child == "import" else None
        print(json.dumps(child(args.child, args.repo, ws, args.rounds, args.screen), default=str))
        return

    from forecast_env.rates import machine_state

    load_before = os.getloadavg()[0]
    res: dict[str, Any] = {"command": " ".join([".venv/bin/python", "-m", MODULE, *(argv or sys.argv[1:])]),
                           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    if args.mirror is not None:
        res["mirror"] = extract_mirror(args.mirror, args.repo)
    if not args.skip_reader:
        res["reader"] = bench_reader(args.repo, args.repeat)
    if not args.skip_import:
        res["import"] = bench_import(args.repo, args.workspace, args.rounds, args.screen, args.keep_workspace,
                                     args.timeout)
    load_after = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    res["machine"] = {"load_before": load_before, "load_after": load_after, "cpus": cpus,
                      "state": machine_state(max(load_before, load_after), cpus),
                      "memory": "VmHWM after /proc/self/clear_refs (real peak resident set, child per measurement)"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(markdown(res))
    print(f"\nfigures: {args.out}")
    if (res.get("import") or {}).get("crashed"):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
