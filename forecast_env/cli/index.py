"""`forecast-env index build` and `forecast-env search`: build the indices, search as of a date."""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from forecast_env.cli.common import add_common, section_config
from forecast_env.config import ALLOWED


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build the dense + BM25 search indices of a workspace")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION")
    b = isub.add_parser("build", help="build or update the indices (only changed months are redone)")
    b.add_argument("--workspace", required=True, help="workspace folder holding corpus/articles")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.add_argument("--engine", choices=ALLOWED["corpus"]["execution.engine"], default=None,
                   help="where month shards are embedded: local (this process) or ray (actors; GPU actors when "
                   "embed.device is cuda); default execution.engine")
    b.add_argument("--ray-address", default=None, help="an existing Ray cluster (default execution.ray_address; "
                   "none: start a local Ray and shut it down after the build)")
    b.add_argument("--workers", type=int, default=None, help="Ray actors (default execution.workers or the cores)")
    add_common(b, ["corpus"])
    b.set_defaults(func=run_build)
    r = isub.add_parser("prepare", help="build the configured embedding backend's model files once per machine "
                        "(the ONNX export and its calibrated int8 graph, or the distilled static model); "
                        "`make venv` runs it, so the first index build does not")
    add_common(r, ["corpus"])
    r.set_defaults(func=run_prepare)
    p.set_defaults(func=lambda args: p.print_help() or 2)

    s = sub.add_parser("search", help="search the corpus as of a date")
    s.add_argument("--workspace", required=True, help="indexed workspace folder")
    s.add_argument("--as-of", required=True, help="forecast date YYYY-MM-DD: only articles up to it")
    s.add_argument("--query", required=True, help="search text")
    s.add_argument("--k", type=int, default=10, help="number of hits (default 10)")
    s.add_argument("--mode", default="hybrid", choices=ALLOWED["env"]["search_mode"], help="default hybrid")
    s.add_argument("--show-hidden", action="store_true",
                   help="include the hidden articles (leak-flagged, market quotes)")
    s.add_argument("--json", action="store_true", help="print a JSON list of hits")
    add_common(s, ["corpus"])
    s.set_defaults(func=run_search)


def run_build(args: argparse.Namespace) -> int:
    from forecast_env.corpus_build.index import build_index

    cfg = section_config(args, "corpus")
    summary = build_index(args.workspace, cfg, progress=not args.no_progress, engine=args.engine,
                          ray_address=args.ray_address, workers=args.workers)
    approx = f", {len(summary['approximate'])} approximate (IVF)" if summary["approximate"] else ""
    print(f"indexed {summary['articles']} articles in {summary['months']} month(s) "
          f"(rebuilt {len(summary['rebuilt'])}, unchanged {len(summary['kept'])}{approx}) with {summary['model']} "
          f"[{summary['backend']}] (dim {summary['dim']}, engine {summary['engine']}) in {summary['seconds']} s "
          f"-> {summary['index_dir']}")
    return 0


def run_prepare(args: argparse.Namespace) -> int:
    import time

    from forecast_env.retrieval.dense import Embedder

    embed = section_config(args, "corpus")["embed"]
    t0 = time.perf_counter()
    embedder = Embedder.from_config(embed)
    vecs = embedder.encode_documents(["Prepared once per machine."])  # loads (and if needed builds) the model
    print(f"embedding backend ready: {embedder.name} [{embedder.backend}"
          f"{', ' + str(embedder.quantize) if embedder.backend == 'onnx' and embedder.quantize else ''}] "
          f"(dim {vecs.shape[1]}) in {time.perf_counter() - t0:.1f} s")
    return 0


def run_search(args: argparse.Namespace) -> int:
    from forecast_env.retrieval import Searcher

    cfg = section_config(args, "corpus")
    searcher = Searcher.open(args.workspace, cfg, hide=False if args.show_hidden else None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hits = searcher.search(args.query, args.as_of, k=args.k, mode=args.mode)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print("no hits")
        return 0
    print(f"{'rank':>4}  {'score':>8}  {'day':10}  {'doc_id':16}  title")
    for h in hits:
        print(f"{h.rank:>4}  {h.score:8.4f}  {h.day.isoformat():10}  {h.doc_id:16}  {h.title[:80]}")
    return 0
