"""Crash anywhere: each long command is killed (SIGKILL) at seeded named points, stopped by SIGTERM or
Ctrl-C's SIGINT at another, rerun to the end, and compared byte for byte with an uninterrupted run.

The share in `make test` kills each command at one seeded point and stops it with a signal at
another; `test_crash_benchmark` (benchmark-marked) chains many kills per command and writes the
figures to `$CRASH_RESULTS` when set. See tests/system/crash/_crash_harness.py for what is checked.
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.crash._crash_harness import (
    Command,
    Outcome,
    count_points,
    kill_chain,
    run_command,
    scan_state,
    schedule,
    seeded_chain,
)
from tests.system.crash._crash_stages import (
    check_mirror,
    check_months,
    check_parts,
    corpus_command,
    events_command,
    fetch_command,
    fresh_copy,
    index_command,
    run_command_for,
    small_warcs,
)

SEED = 31


# ---------------------------------------------------------------------------------------------
# the worlds (built in this process; the commands under test run as subprocesses)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def warc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crash_warcs")
    small_warcs(root)
    return root


@pytest.fixture(scope="module")
def small_corpus(warc_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace holding the corpus of the small WARCs (the index stage's input)."""
    from forecast_env.corpus_build.pipeline import build_corpus

    ws = tmp_path_factory.mktemp("crash_small") / "ws"
    build_corpus(sorted(warc_dir.glob("*.warc.gz")), ws, workers=1, progress=False)
    return ws


@pytest.fixture(scope="module")
def indexed_ws(micro_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The micro corpus with a static-backend index (no events, no runs)."""
    from forecast_env.config import load_config
    from forecast_env.corpus_build.index import build_index

    ws = fresh_copy(micro_corpus, tmp_path_factory.mktemp("crash_indexed") / "ws", drop=("index", "events", "runs"))
    build_index(ws, load_config("corpus", overrides={"embed.backend": "static"}), progress=False)
    return ws


@pytest.fixture(scope="module")
def events_ws(indexed_ws: Path, micro_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from forecast_env.envs.events.build import build_events

    ws = fresh_copy(indexed_ws, tmp_path_factory.mktemp("crash_events") / "ws")
    build_events(micro_world / "polymarket", ws, progress=False)
    return ws


@pytest.fixture()
def served(served_world) -> Iterator:
    yield served_world


def _months(server) -> str:
    months = sorted({cc.split("/")[2] + "-" + cc.split("/")[3] for cc in server.files})
    return f"{months[0]}..{months[-1]}"


# ---------------------------------------------------------------------------------------------
# one stage: a reference run (which counts the points), kills, a signal, the final rerun
# ---------------------------------------------------------------------------------------------


def _reference(cmd: Command, tmp: Path) -> tuple[dict, list[str]]:
    from tests.system.crash._crash_harness import artefacts

    labels = count_points(cmd, tmp / f"count-{cmd.stage.replace(' ', '-')}.txt")
    return artefacts(cmd), labels


def _signal_run(cmd: Command, point: str, sig: str, reference: dict) -> list[str]:
    """Stop `cmd` at `point` with SIGTERM or SIGINT: one stderr line, exit 143 / 130, a clean state."""
    before = {t for root in cmd.roots for t in root.rglob(".*.tmp")}  # left by earlier SIGKILLs, not by this stop
    proc = run_command(cmd, crash=point, sig=sig)
    if proc.returncode == 0:
        return []  # it had finished before the point (a resumed run with little left)
    problems = []
    want = 143 if sig == "TERM" else 130
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    if proc.returncode != want:
        problems.append(f"SIG{sig} at {point}: exit {proc.returncode}, not {want}: {proc.stderr[-1500:]}")
    if len(lines) != 1 or not lines[0].startswith("interrupted: forecast-env ") or "rerun" not in lines[0]:
        problems.append(f"SIG{sig} at {point}: stderr is not one interrupted line: {proc.stderr[-1500:]!r}")
    problems += scan_state(cmd, reference)
    for root in cmd.roots:  # the interrupted run removed the temporary files of its writes in flight
        problems += [f"{p}: a temporary file left by SIG{sig}" for p in root.rglob(".*.tmp") if p not in before]
    return problems


def _stage(cmd_ref: Command, cmd: Command, tmp: Path, kills: int, sig: str | None, check=None,
           seed: int = SEED, chains: int = 1, reset=None, seeded: bool = False) -> Outcome:
    """Reference run, then `chains` chains of `kills` seeded SIGKILLs (+ one signal stop) each, reruns."""
    reference, labels = _reference(cmd_ref, tmp)
    assert labels, f"{cmd.stage}: the command crossed no crash point"
    rng = random.Random(f"{seed}:{cmd.stage}")
    out = Outcome(cmd.stage)
    for chain in range(chains):
        if chain and reset is not None:
            reset()
        if seeded:  # the benchmark: points drawn as the chain goes, then a signal stop of the resumed run
            def stop(point: str = schedule(labels, 1, rng)[0]) -> None:
                out.problems.extend(_signal_run(cmd, point, sig, reference))
                out.kills[f"SIG{sig}"] += 1

            seeded_chain(cmd, len(labels), kills, rng, reference, tmp / "count-chain.txt", check, outcome=out,
                         before_final=stop if sig else None)
            continue
        points = schedule(labels, kills + (1 if sig else 0), rng)
        stop = points.pop() if sig else None
        half = len(points) // 2
        kill_chain(cmd, points[:half], reference, check, outcome=out, final=False)
        if stop:
            problems = _signal_run(cmd, stop, sig, reference)
            out.problems += problems
            out.kills[f"SIG{sig}"] += 1
        kill_chain(cmd, points[half:], reference, check, outcome=out)
    return out


def _assert_clean(out: Outcome) -> None:
    assert not out.problems, "\n".join(out.problems[:20])
    assert out.total >= 1, f"{out.stage}: no kill point was hit"


# ---------------------------------------------------------------------------------------------
# the make-test share: one SIGKILL per command, a SIGTERM stop on one (all five in the benchmark, SIGINT too)
# ---------------------------------------------------------------------------------------------


def test_corpus_build_survives_kills(warc_dir: Path, tmp_path: Path) -> None:
    out = _stage(corpus_command(warc_dir, tmp_path / "ref"), corpus_command(warc_dir, tmp_path / "ws"), tmp_path,
                 kills=1, sig=None, check=check_parts)
    _assert_clean(out)
    assert out.total == 1


def test_index_build_survives_kills(small_corpus: Path, tmp_path: Path) -> None:
    ref = fresh_copy(small_corpus, tmp_path / "ref")
    ws = fresh_copy(small_corpus, tmp_path / "ws")
    out = _stage(index_command(ref), index_command(ws), tmp_path, kills=1, sig="TERM", check=check_months)
    _assert_clean(out)


def test_events_build_survives_kills(indexed_ws: Path, micro_world: Path, tmp_path: Path) -> None:
    ref = fresh_copy(indexed_ws, tmp_path / "ref")
    ws = fresh_copy(indexed_ws, tmp_path / "ws")
    pm = micro_world / "polymarket"
    out = _stage(events_command(pm, ref), events_command(pm, ws), tmp_path, kills=1, sig=None)
    _assert_clean(out)


def test_run_survives_kills(events_ws: Path, tmp_path: Path) -> None:
    ref = fresh_copy(events_ws, tmp_path / "ref")
    ws = fresh_copy(events_ws, tmp_path / "ws")
    out = _stage(run_command_for(ref), run_command_for(ws), tmp_path, kills=1, sig=None)
    _assert_clean(out)


def test_corpus_fetch_survives_kills(served, tmp_path: Path) -> None:
    months = _months(served)
    out = _stage(fetch_command(served.url, tmp_path / "ref" / "mirror", months),
                 fetch_command(served.url, tmp_path / "ws" / "mirror", months), tmp_path, kills=1, sig=None,
                 check=check_mirror(served.files))
    _assert_clean(out)


def test_an_interrupted_fetch_keeps_its_part_and_resumes_with_range(served, tmp_path: Path) -> None:
    """Ctrl-C mid-download: the download stops at its next chunk and keeps `NAME.part` with what the server
    said (`NAME.part.json`); the rerun asks for the rest with a Range request and ends with the served bytes."""
    cmd = fetch_command(served.url, tmp_path / "mirror", _months(served))
    proc = run_command(cmd, crash="fetch.chunk:3", sig="INT")
    assert proc.returncode == 130, proc.stderr[-2000:]
    parts = list(cmd.roots[0].rglob("*.part"))
    assert len(parts) == 1 and parts[0].with_name(parts[0].name + ".json").exists()
    kept = parts[0].stat().st_size
    served.clear()
    assert run_command(cmd).returncode == 0
    name = parts[0].name.removesuffix(".part")
    assert [r for _, p, r, _ in served.log if p.endswith(name)] == [f"bytes={kept}-"]
    assert check_mirror(served.files)(cmd) == [] and not list(cmd.roots[0].rglob("*.part*"))


# ---------------------------------------------------------------------------------------------
# the benchmark variant: many chained kills per command; figures to $CRASH_RESULTS
# ---------------------------------------------------------------------------------------------


@pytest.mark.benchmark
@pytest.mark.timeout(5400)  # about 300 runs of the commands: 15-25 minutes on 2 cores
def test_crash_benchmark(warc_dir: Path, indexed_ws: Path, events_ws: Path, micro_world: Path, served,
                         tmp_path: Path) -> None:
    chains = int(os.environ.get("CRASH_CHAINS", "4"))
    kills = int(os.environ.get("CRASH_KILLS", "14"))
    outcomes = []
    outcomes.append(_stage(corpus_command(warc_dir, tmp_path / "c_ref"), corpus_command(warc_dir, tmp_path / "c_ws"),
                           tmp_path, kills, "INT", check_parts, chains=chains, seeded=True,
                           reset=lambda: fresh_copy(tmp_path / "c_ref", tmp_path / "c_ws", drop=("corpus",))))
    ref = fresh_copy(indexed_ws, tmp_path / "i_ref", drop=("index",))
    ws = fresh_copy(indexed_ws, tmp_path / "i_ws", drop=("index",))
    outcomes.append(_stage(index_command(ref), index_command(ws), tmp_path, kills, "TERM", check_months,
                           chains=chains, seeded=True, reset=lambda: fresh_copy(indexed_ws, ws, drop=("index",))))
    ref = fresh_copy(indexed_ws, tmp_path / "e_ref")
    ws = fresh_copy(indexed_ws, tmp_path / "e_ws")
    pm = micro_world / "polymarket"
    outcomes.append(_stage(events_command(pm, ref), events_command(pm, ws), tmp_path, kills, "INT",
                           chains=chains, seeded=True, reset=lambda: fresh_copy(indexed_ws, ws)))
    ref = fresh_copy(events_ws, tmp_path / "r_ref")
    ws = fresh_copy(events_ws, tmp_path / "r_ws")
    outcomes.append(_stage(run_command_for(ref), run_command_for(ws), tmp_path, kills, "TERM",
                           chains=chains, seeded=True, reset=lambda: fresh_copy(events_ws, ws)))
    months = _months(served)
    mirror = tmp_path / "f_ws" / "mirror"
    outcomes.append(_stage(fetch_command(served.url, tmp_path / "f_ref" / "mirror", months),
                           fetch_command(served.url, mirror, months), tmp_path, kills, "TERM",
                           check_mirror(served.files), chains=chains, seeded=True,
                           reset=lambda: fresh_copy(tmp_path / "f_ref", tmp_path / "f_ws", drop=("mirror",))))
    figures = {o.stage: {"kill_points": dict(sorted(o.kills.items())), "sigkills": o.total - sum(
        v for k, v in o.kills.items() if k.startswith("SIG")), "finished_before_the_point": o.finished_before_the_point,
        "mismatches": len(o.problems), "problems": o.problems[:20]} for o in outcomes}
    if os.environ.get("CRASH_RESULTS"):
        Path(os.environ["CRASH_RESULTS"]).write_text(json.dumps(figures, indent=2) + "\n")
    for o in outcomes:
        _assert_clean(o)
    assert sum(f["sigkills"] for f in figures.values()) >= 200 or chains * kills * 5 < 200


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, id="SIGINT"),
                                 pytest.param(signal.SIGTERM, id="SIGTERM", marks=pytest.mark.benchmark)])
def test_a_signal_from_outside_stops_a_build_with_one_line(sig: int, warc_dir: Path, small_corpus: Path,
                                                          tmp_path: Path) -> None:
    """A real Ctrl-C / SIGTERM sent by another process (the command parks itself at a named point with
    SIGSTOP; the test signals it and lets it go on): one line, 130 / 143, and the rerun completes the
    same corpus as an uninterrupted build."""
    import subprocess
    import sys

    from forecast_env.crashpoints import CRASH_AT_VAR, CRASH_SIGNAL_VAR
    from tests.system.crash._crash_harness import DRIVER, artefacts, compare

    ws = tmp_path / "ws"
    cmd = corpus_command(warc_dir, ws)
    cmd.env.pop("CRASH_TEST_ROW_GROUP_ROWS")  # the default store, as `small_corpus` was built
    env = {**os.environ, CRASH_AT_VAR: "part.tables:2", CRASH_SIGNAL_VAR: "STOP"}
    proc = subprocess.Popen([sys.executable, str(DRIVER), *cmd.argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _, status = os.waitpid(proc.pid, os.WUNTRACED)  # blocks until it stops itself at the point
        assert os.WIFSTOPPED(status), f"the build ended before the point: {status}"
        proc.send_signal(sig)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: forecast-env corpus build stopped by "
                                                   f"{signal.Signals(sig).name}; "), err
    assert len(list((ws / "corpus" / "parts").glob("*.json"))) == 1  # the finished part is kept
    assert not list(ws.rglob(".*.tmp"))
    again = run_command(cmd)
    assert again.returncode == 0, again.stderr
    want = artefacts(Command("ref", [], [small_corpus / "corpus"]))
    assert compare(artefacts(cmd), want) == []


@pytest.mark.benchmark
@pytest.mark.timeout(1800)
def test_build_recipe_stops_on_sigterm_with_one_line_and_resumes(micro_world: Path, tmp_path: Path) -> None:
    """`build --recipe` stopped by SIGTERM in its corpus stage: one line, exit 143, the finished
    stages recorded; the rerun resumes (does not redo the events fetch) and ends with status 0."""
    import yaml

    from forecast_env.recipe import read_record
    from forecast_env.synth.serve import WorldServer

    with WorldServer(micro_world) as server:
        folders = list(server.months())
        months = [f"{f[-7:-3]}-{f[-2:]}" for f in folders]
        splits = json.loads((micro_world / "truth.json").read_text())["splits"]
        recipe = tmp_path / "served.yaml"
        recipe.write_text(yaml.safe_dump({
            "name": "served-micro", "description": "the micro sample world, served",
            "news": {"cc_news": f"{months[0]}..{months[-1]}", "workers": 1},
            "splits": {s: {"start": splits[s][0], "end": splits[s][1]} for s in ("train", "eval")},
            "audit": {"split": "eval"}, "release": {"split": "eval", "out": "release"}}))
        sets = [a for s in [*server.client_settings(), "events.polymarket.requests_per_second=0",
                            "corpus.embed.backend=static"] for a in ("--set", s)]
        ws = tmp_path / "ws"
        cmd = Command("build --recipe", ["build", "--recipe", str(recipe), "--workspace", str(ws), "--no-progress",
                                         *sets], [ws])
        proc = run_command(cmd, crash="part.tables:1", sig="TERM")
        lines = [x for x in proc.stderr.splitlines() if x.strip() and not x.startswith("[")]
        assert proc.returncode == 143, proc.stderr[-2000:]
        assert len(lines) == 1 and lines[0].startswith("interrupted: forecast-env build stopped by SIGTERM"), \
            proc.stderr[-2000:]
        assert read_record(ws, "fetch") is not None and read_record(ws, "corpus") is None
        assert not list(ws.rglob(".*.tmp"))
        again = run_command(cmd)
        assert again.returncode == 0, again.stderr[-2000:]
        assert "[fetch] already done" in again.stderr and read_record(ws, "release") is not None


def test_signal_names() -> None:
    """The documented exit statuses are the shell's 128 + signal number."""
    from forecast_env.cli.interrupts import SIGINT_EXIT, SIGTERM_EXIT

    assert (SIGINT_EXIT, SIGTERM_EXIT) == (128 + signal.SIGINT, 128 + signal.SIGTERM)
