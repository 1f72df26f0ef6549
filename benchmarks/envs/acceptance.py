"""Acceptance: does the `retrieval` agent beat `uniform` on Brier on sample worlds it was not built for?

    python -m benchmarks.envs.acceptance [--preset gate] [--seeds 0,1,2] [--cache DIR] [--split all]

Builds (or reuses) one workspace per world seed (synthesize -> corpus -> index -> events), runs
uniform and retrieval (and base_rate, fitted on the other split, unless the split is `all`) on the
split's events of each, and prints per seed and pooled over
the seeds: the world's phrasing bank (docs/design.md §7: even seeds write their evidence with bank a,
odd seeds with the held-out bank b), each agent's mean Brier (events weigh equally), the paired
difference retrieval - uniform (and retrieval - base_rate) with its event-clustered 95% bootstrap
interval (4,000 draws, seed 0; pooled: the events of all seeds resampled together), n events, and
the pooled figures by question type. The obvious alternatives are measured in the same run: the
blind uniform and base-rate forecasts.

Exit status 1 (so `make bench` fails) unless retrieval - uniform is negative in every world and the
pooled interval lies below 0. Worlds are cached under CACHE/<hash of the code that builds them>/
seed<s>/, so a change to the generator or the pipeline rebuilds them; agent runs are always redone.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

AGENTS = ["uniform", "base_rate", "retrieval"]
REPO = Path(__file__).resolve().parents[2]
#: the code a world and its workspace are built by (the agents and the runner are rerun every time)
#: (configs/ by its own path: rglob does not follow the link forecast_env/defaults)
BUILDERS = ("forecast_env", "corpus_build", "envs", "configs")
#: files under BUILDERS that no build reads (the shell, the LLM client, the agents' and runner's defaults, the
#: cluster launcher's file): a change to them must not throw away worlds that take many minutes to build
NOT_BUILDERS = ("forecast_env/cli", "forecast_env/chat.py", "configs/benchmark.yaml", "configs/ray-cluster-aws.yaml")
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "forecast-env-acceptance"


def builder_hash() -> str:
    """A short hash of the source of the code that builds worlds and workspaces (cache key)."""
    h = hashlib.sha256()
    for folder in BUILDERS:
        for path in sorted((REPO / folder).rglob("*")):
            rel = path.relative_to(REPO).as_posix()
            if any(rel == n or rel.startswith(n + "/") for n in NOT_BUILDERS):
                continue
            if path.suffix in (".py", ".yaml", ".txt") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(REPO)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:12]


def build_world(root: Path, preset: str, seed: int, workers: int = 1) -> Path:
    """The workspace of sample world (preset, seed) under `root`, built once and reused."""
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events
    from forecast_env.synth import synthesize

    world, ws = root / "world", root / "ws"
    if not (ws / "events" / "events.parquet").exists():
        shutil.rmtree(ws, ignore_errors=True)  # a build cut short is redone whole
        if not (world / "truth.json").exists():
            synthesize(world, preset=preset, seed=seed, progress=False)
        build_corpus(sorted((world / "news").glob("*.warc.gz")), ws, workers=workers, progress=False)
        build_index(ws, progress=False)
        build_events(world / "polymarket", ws, progress=False)
    return ws


def run_agents(ws: Path, split: str, workers: int, agents: list[str] = AGENTS, run_id: str = "acceptance") -> pl.DataFrame:
    """A fresh run of `agents` on `split` (an older run of that id is replaced: the code may have changed)."""
    from forecast_env.eval.runs.runner import run_benchmark

    shutil.rmtree(ws / "runs" / run_id, ignore_errors=True)
    run_dir = run_benchmark(ws, agents, split=split, run_id=run_id, workers=workers, progress=False)
    return pl.read_parquet(run_dir / "forecasts.parquet")


def figures(forecasts: pl.DataFrame) -> dict:
    """Mean Brier per agent and the paired differences, with event-clustered intervals."""
    from forecast_env.eval.report.bootstrap import clustered_mean
    from forecast_env.eval.report.metrics import paired_difference, scored

    out = {"n_events": forecasts["event_id"].n_unique()}
    f = scored(forecasts)
    for a in forecasts["agent"].unique().sort().to_list():
        out[a] = clustered_mean(f.filter(pl.col("agent") == a), "brier").value
    out["ret_uni"] = paired_difference(forecasts, "retrieval", "uniform")
    if "base_rate" in out:
        out["ret_br"] = paired_difference(forecasts, "retrieval", "base_rate")
    return out


def question_type(options: list[str]) -> str:
    """yes/no, two named options, or multi-option."""
    if len(options) == 2:
        return "yes/no" if {o.lower() for o in options} == {"yes", "no"} else "two named"
    return "multi"


def pooled(frames: dict[int, pl.DataFrame]) -> pl.DataFrame:
    """Forecasts of several worlds with event ids made unique per seed ("s1/pm-123")."""
    return pl.concat([f.with_columns(event_id=pl.lit(f"s{s}/") + pl.col("event_id")) for s, f in frames.items()],
                     how="diagonal_relaxed")


def verdict(rows: list[tuple[str, dict]]) -> list[str]:
    """Why the acceptance fails (empty: it passes): each world's mean difference must be negative and
    the pooled (or single world's) interval must lie below 0."""
    problems = [f"{name}: retrieval - uniform = {fig['ret_uni'].value:+.3f} is not negative"
                for name, fig in rows if fig["ret_uni"].value >= 0]
    name, fig = rows[-1]
    if fig["ret_uni"].hi >= 0:
        problems.append(f"{name}: the 95% interval of retrieval - uniform, {_ci(fig['ret_uni'])}, does not lie below 0")
    return problems


def _ci(e) -> str:
    return f"{e.value:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="gate", help="sample-world size (gate: 64 events, few distractors)")
    ap.add_argument("--seeds", default="0,1,2", help="world seeds (size argument: fewer seeds, less time)")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="worlds are built once under CACHE/<code hash>/")
    ap.add_argument("--split", default="all", help="events scored: all (no agent is fitted), eval or train")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    from forecast_env.synth.phrasing import default_bank

    root = Path(args.cache) / builder_hash()
    frames: dict[int, pl.DataFrame] = {}
    rows, times, banks = [], [], []
    for s in [int(x) for x in args.seeds.split(",") if x.strip()]:
        t0 = time.perf_counter()
        ws = build_world(root / f"{args.preset}-seed{s}", args.preset, s, workers=args.workers)
        t1 = time.perf_counter()
        agents = AGENTS if args.split != "all" else [a for a in AGENTS if a != "base_rate"]
        frames[s] = run_agents(ws, args.split, args.workers, agents=agents)
        t2 = time.perf_counter()
        rows.append((f"seed {s}", figures(frames[s])))
        times.append((t1 - t0, t2 - t1))
        banks.append(default_bank(s))
    if len(frames) > 1:
        rows.append(("pooled", figures(pooled(frames))))
        times.append((sum(t for t, _ in times), sum(t for _, t in times)))
        banks.append("+".join(sorted(set(banks))))
    print(f"preset {args.preset}, split {args.split}, worlds under {root}; Brier (multiclass, events weigh "
          "equally); differences with event-clustered 95% bootstrap CIs (4,000 draws, seed 0)\n")
    print("| world | bank | n events | uniform | base_rate | retrieval | retrieval - uniform [95% CI] "
          "| retrieval - base_rate [95% CI] | build s | run s |")
    print("|---|---|---:|---:|---:|---:|---|---|---:|---:|")
    for (name, fig), bank, (tb, tr) in zip(rows, banks, times):
        br = f"{fig['base_rate']:.3f}" if "base_rate" in fig else "-"
        ret_br = _ci(fig["ret_br"]) if "ret_br" in fig else "-"
        print(f"| {name} | {bank} | {fig['n_events']} | {fig['uniform']:.3f} | {br} "
              f"| {fig['retrieval']:.3f} | {_ci(fig['ret_uni'])} | {ret_br} | {tb:.0f} | {tr:.0f} |")
    every = pooled(frames).with_columns(qtype=pl.col("options").map_elements(question_type, return_dtype=pl.String))
    print("\nby question type (all worlds): retrieval - uniform [95% CI], n events")
    for qtype in ("yes/no", "two named", "multi"):
        part = every.filter(pl.col("qtype") == qtype)
        if part.height:
            fig = figures(part)
            print(f"  {qtype:9s}  uniform {fig['uniform']:.3f}  retrieval {fig['retrieval']:.3f}  "
                  f"{_ci(fig['ret_uni'])}  n={fig['n_events']}")
    problems = verdict(rows)
    for p in problems:
        print(f"ACCEPTANCE FAILED: {p}", file=sys.stderr)
    if not problems:
        print("\nacceptance passed: retrieval beats uniform in every world, pooled interval below 0")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
