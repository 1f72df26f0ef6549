"""`forecast-env verify WS`: recheck every manifest of a workspace."""

from __future__ import annotations

import argparse

from forecast_env.cli.common import add_common
from forecast_env.errors import WorkspaceError
from forecast_env.store import verify_workspace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="recheck every manifest (checksums, sizes) of a workspace")
    p.add_argument("workspace", help="workspace folder")
    add_common(p, ())
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results = verify_workspace(args.workspace)
    if not results:
        raise WorkspaceError(f"{args.workspace}: no manifests found (nothing has been built here yet)")
    bad = 0
    for artifact, problems in results.items():
        status = "ok" if not problems else f"{len(problems)} problem(s)"
        print(f"{artifact:30s} {status}")
        for p in problems:
            print(f"  - {p}")
        bad += len(problems)
    if bad:
        raise WorkspaceError(f"{bad} problem(s) found; rebuild the artifacts named above")
    print(f"all {len(results)} manifest(s) verified")
    return 0
