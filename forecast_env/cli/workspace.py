"""`forecast-env workspace pull|push|ls`: a workspace on object storage (forecast_env/workspace/remote.py)."""

from __future__ import annotations

import argparse
import time

from forecast_env.cli.common import add_common
from forecast_env.errors import WorkspaceError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workspace", help="pull, push or list a workspace at an fsspec URL (s3://bucket/prefix)")
    cmds = p.add_subparsers(dest="workspace_cmd", metavar="COMMAND")
    pull = cmds.add_parser("pull", help="copy the published corpus, index and events to a local folder (for search)")
    pull.add_argument("url", help="workspace URL, e.g. s3://bucket/ws")
    pull.add_argument("dest", nargs="?", default=None,
                      help="local folder (default: the URL's scratch folder under FORECAST_ENV_SCRATCH)")
    pull.add_argument("--with-parts", action="store_true", help="also pull corpus/parts/ (build state)")
    add_common(pull, ())
    pull.set_defaults(func=run_pull)
    push = cmds.add_parser("push", help="publish a local workspace's corpus, index and events to a URL")
    push.add_argument("src", help="local workspace folder")
    push.add_argument("url", help="workspace URL, e.g. s3://bucket/ws")
    add_common(push, ())
    push.set_defaults(func=run_push)
    ls = cmds.add_parser("ls", help="list the published units of a workspace URL")
    ls.add_argument("url", help="workspace URL")
    add_common(ls, ())
    ls.set_defaults(func=run_ls)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _remote(url: str) -> None:
    from forecast_env.workspace.remote import is_remote

    if not is_remote(url):
        raise WorkspaceError(f"{url}: not a workspace URL; give one such as s3://bucket/ws")


def run_pull(args: argparse.Namespace) -> int:
    from forecast_env.workspace.remote import RemoteWorkspace, pull_workspace

    _remote(args.url)
    t0 = time.perf_counter()
    prefixes = ("corpus/", "index/", "events/")
    dest = pull_workspace(args.url, args.dest, prefixes)
    if args.with_parts:
        RemoteWorkspace.at(args.url).pull(dest, "corpus/parts/")
    print(f"pulled {args.url} -> {dest} in {time.perf_counter() - t0:.1f} s")
    return 0


def run_push(args: argparse.Namespace) -> int:
    from forecast_env.workspace.remote import push_workspace

    _remote(args.url)
    units = push_workspace(args.src, args.url)
    print(f"published {len(units)} unit(s) to {args.url}")
    return 0


def run_ls(args: argparse.Namespace) -> int:
    from forecast_env.workspace.remote import RemoteWorkspace

    _remote(args.url)
    units = RemoteWorkspace.at(args.url).published(refresh=True)
    for unit, marker in sorted(units.items()):
        files = marker["files"]
        print(f"{unit:40s} {len(files):6d} file(s) {sum(e['bytes'] for e in files.values()):14,d} bytes")
    if not units:
        raise WorkspaceError(f"{args.url}: nothing published yet; build it with `forecast-env corpus build --workspace {args.url} ...`")
    return 0
