"""`forecast-env audit`: the six leak checks on a built workspace (docs/design.md §8).

Writes `audit.md` and `audit.json` (default: `WS/audit/`), prints one verdict line, and exits 0 on
PASS or INCONCLUSIVE, 1 when a check FAILs (naming it), 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from forecast_env.cli.common import add_common
from forecast_env.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="check that the environment leaks nothing but the news (six checks); "
                                     "exit 1 when a check fails")
    p.add_argument("--workspace", required=True, help="workspace with corpus, index and events")
    p.add_argument("--split", default="eval", choices=["train", "eval", "all"], help="split to audit (default: eval)")
    p.add_argument("--checks", default=None,
                   help="comma-separated subset of: schedule, structure, retrieval, text, replay, siblings "
                        "(default: all)")
    p.add_argument("--polymarket", default=None,
                   help="the Polymarket cache the events were built from: labels the excluded events in the "
                        "inclusion-bias report and recomputes d_known from raw prices")
    p.add_argument("--out", default=None, help="output folder for audit.md / audit.json (default: WS/audit)")
    p.add_argument("--audit-set", dest="audit_overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="change one audit setting, e.g. --audit-set probes=500 or encoder=true "
                        "(fields of forecast_env.eval.audit.run.AuditSettings)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_common(p, ())  # reads no config section: its settings come through --audit-set
    p.set_defaults(func=audit_cmd)


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--audit-set {item!r}: expected KEY=VALUE, e.g. probes=500")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def audit_cmd(args: argparse.Namespace) -> int:
    from forecast_env.eval.audit.run import FAIL, run_audit

    checks = [c.strip() for c in args.checks.split(",") if c.strip()] if args.checks else None
    report = run_audit(args.workspace, split=args.split, checks=checks, settings=_overrides(args.audit_overrides),
                       polymarket=args.polymarket, progress=not args.no_progress)
    out = Path(args.out) if args.out else Path(report.workspace) / "audit"
    paths = report.write(out)
    for c in report.checks:
        print(f"  {c.verdict:<12} {c.title}: {c.reason}")
    print(f"report: {paths['md']} (+ {paths['json'].name})")
    print(report.verdict_line())
    if report.verdict == FAIL:
        print(f"error: audit failed: {', '.join(report.failed)}", file=sys.stderr)
        return 1
    return 0
