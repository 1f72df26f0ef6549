"""Regenerate every golden file and every figure the docs copy from a run, in one command.

    .venv/bin/python tests/golden/regenerate.py            # goldens + dry-run plan blocks + the demo table
    .venv/bin/python tests/golden/regenerate.py --no-demo  # the fast part only (seconds)

1. The Markdown goldens of hand-made runs (tests/golden/report.md, report_modes.md) and the `dojo`
   dry-run plan shown in README.md and docs/recipes.md: their tests rerun with UPDATE_GOLDEN=1, which
   rewrites them (tests/eval/report/test_report.py, tests/eval/report/test_report_modes.py,
   tests/recipe/test_plan_rates.py). They do not depend on the corpus build, so a change of the quality
   profile or its thresholds leaves the report goldens as they are; the plan moves with PLAN_RATES.
2. The README's demo results table (and its count of eval events): `forecast-env demo` in a fresh
   workspace (default `demo_ws`, removed first; about a minute idle on 2 cores), then the table is
   rewritten from the run's report.json. The table depends on the corpus (quality profile, thresholds,
   body path), so rerun this after any change to them.

Review the diff (`git diff`) afterwards: a golden changed on purpose only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOLDEN_TESTS = ["tests/eval/report/test_report.py", "tests/eval/report/test_report_modes.py",
                "tests/recipe/test_plan_rates.py",
                "tests/questions/test_real_model.py"]
#: the README's demo table: its rows, in the README's order
DEMO_AGENTS = ("uniform", "base_rate", "retrieval", "retrieval-deep", "retrieval-skim", "market")
TABLE_HEAD = "| agent | Brier [95% CI] | accuracy | log vs market (day mean) |\n|---|---|---|---|\n"


def regenerate_goldens() -> None:
    """Rerun the golden tests with UPDATE_GOLDEN=1 (they rewrite their files, then check them)."""
    env = {**os.environ, "UPDATE_GOLDEN": "1"}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *GOLDEN_TESTS],
                   cwd=REPO, env=env, check=True)


def demo_table(report: dict) -> str:
    """The README's results table from a run's report.json."""
    rows = {a["agent"]: a for a in report["agents"]}
    lines = []
    for name in DEMO_AGENTS:
        a = rows[name]
        b, log = a["brier"], a.get("log_vs_market")
        log_s = "-" if not log or log.get("value") is None else f"{log['value']:.3f}"
        lines.append(f"| {name} | {b['value']:.3f} [{b['lo']:.3f}, {b['hi']:.3f}] | {a['accuracy']['value']:.3f} | {log_s} |")
    return TABLE_HEAD + "\n".join(lines) + "\n"


def update_readme(report: dict, readme: Path = REPO / "README.md") -> bool:
    """Rewrite the demo table and its count of eval events in README.md; True when it changed."""
    text = readme.read_text()
    start = text.index(TABLE_HEAD)
    end = text.index("\n\n", start) + 1
    events = {a["n_events"] for a in report["agents"]}
    new = text[:start] + demo_table(report) + text[end:]
    if len(events) == 1:
        new = re.sub(r"on the \d+ eval events", f"on the {events.pop()} eval events", new, count=1)
    readme.write_text(new)
    return new != text


def run_demo(workspace: Path) -> dict:
    """`forecast-env demo` in a fresh workspace; the run's report.json."""
    shutil.rmtree(workspace, ignore_errors=True)
    subprocess.run([str(REPO / ".venv" / "bin" / "forecast-env"), "demo", "--workspace", str(workspace)],
                   cwd=REPO, check=True)
    runs = sorted((workspace / "runs").glob("demo-*/report.json"))
    return json.loads(runs[-1].read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-demo", action="store_true", help="skip the demo (the README's results table)")
    ap.add_argument("--demo-ws", type=Path, default=REPO / "demo_ws", help="the demo's workspace (removed first)")
    args = ap.parse_args(argv)
    regenerate_goldens()
    if not args.no_demo:
        changed = update_readme(run_demo(args.demo_ws))
        print(f"README.md demo table {'updated' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
