"""Report statistics on a finished run: skill intervals with lambda re-estimated in every bootstrap
draw against the obvious alternative (lambda held at its full-data value), the averaging order
(dates within rollouts first, against rollouts per date first), and the report's build time.

    python -m benchmarks.eval.report_statistics --run WS/runs/RUN_ID [--draws 4000]

Prints a Markdown table (benchmarks/log/2026-11-30-report-statistics.md shows one).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, help="a run directory WS/runs/RUN_ID")
    ap.add_argument("--draws", type=int, default=4000)
    args = ap.parse_args()

    import polars as pl

    from forecast_env.eval.report import metrics
    from forecast_env.eval.report.render import build_report, load_run
    from forecast_env.eval.report.skill import date_scores, skill_leaderboard

    run = load_run(args.run)
    f = run["forecasts"]
    scores = date_scores(f)
    t0 = time.perf_counter()
    per_draw = skill_leaderboard(scores, draws=args.draws)
    t_per_draw = time.perf_counter() - t0
    t0 = time.perf_counter()
    fixed = skill_leaderboard(scores, draws=args.draws, lam=per_draw.lam)
    t_fixed = time.perf_counter() - t0
    lo, hi = per_draw.lam_range()
    print(f"lambda {per_draw.lam:.3f} (full data); 95% range over {args.draws} draws {lo:.3f} to {hi:.3f}; "
          f"min {per_draw.lam_draws.min():.3f}, max {per_draw.lam_draws.max():.3f}; "
          f"high-volume agents {', '.join(per_draw.high_volume)}")
    print(f"skill fit with intervals: lambda per draw {t_per_draw:.2f} s, fixed lambda {t_fixed:.2f} s\n")
    print("| agent | skill | 95% interval, lambda per draw | 95% interval, lambda fixed | width ratio |")
    print("|---|---:|---|---|---:|")
    fx = {r["agent"]: r for r in fixed.table.to_dicts()}
    for r in per_draw.table.to_dicts():
        q = fx[r["agent"]]
        ratio = (r["hi"] - r["lo"]) / (q["hi"] - q["lo"]) if q["hi"] > q["lo"] else float("nan")
        print(f"| {r['agent']} | {r['skill']:.3f} | [{r['lo']:.3f}, {r['hi']:.3f}] | [{q['lo']:.3f}, {q['hi']:.3f}] "
              f"| {ratio:.2f} |")

    # averaging order: dates within each rollout first (the report) vs rollouts per date first
    s = metrics.scored(f)
    print("\n| agent | Brier, dates within rollouts first | Brier, rollouts per date first |")
    print("|---|---:|---:|")
    for agent in sorted(s["agent"].unique().to_list()):
        sub = s.filter(pl.col("agent") == agent)
        a = metrics.agent_table(sub, None, metrics.Boot(draws=0))[0]["brier"]["value"]
        b = (sub.group_by(["event_id", "step"]).agg(pl.col("brier").mean())
             .group_by("event_id").agg(pl.col("brier").mean())["brier"].mean())
        print(f"| {agent} | {a:.4f} | {b:.4f} |")

    out = Path("/tmp/bench_report_out")
    t0 = time.perf_counter()
    build_report(args.run, out=out)
    print(f"\nfull report (4,000-draw intervals everywhere, 5 plots): {time.perf_counter() - t0:.1f} s -> {out}")


if __name__ == "__main__":
    main()
