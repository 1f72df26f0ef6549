"""`forecast-env build --recipe NAME|FILE --workspace WS [--dry-run]`: a whole benchmark from one recipe.

The stages (events fetch, corpus, index, events, the optional forecastbench and questions, audit, release) and their
"already done" records
live in `forecast_env.recipe`; this module is the shell. Exit statuses (docs/recipes.md):
0 built (audit PASS or INCONCLUSIVE), 1 internal error, 2 bad input, 3 the audit FAILED (no
release written), 4 some files or Polymarket items could not be fetched (rerun, or --allow-failed).
"""

from __future__ import annotations

import argparse
import json
import sys

from forecast_env.cli.common import add_common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="build a whole benchmark from a recipe: events fetch, corpus, index, events, audit, release",
        description="Run every stage of a recipe that is not already done (a second run does nothing; a killed "
        "run resumes). Packaged recipes: dojo (the paper's 15 months), small (2 files/month over 3 months). "
        "Exit status: 0 built, 2 bad input, 3 audit FAILED (no release), 4 items failed to download.",
    )
    p.add_argument("--recipe", required=True, metavar="NAME|FILE", help="a packaged recipe (dojo, small) or a YAML file")
    p.add_argument("--workspace", required=True, metavar="WS", help="workspace folder (created if missing)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (files per month, bytes, core-hours, memory, disk per stage); build nothing")
    p.add_argument("--offline", action="store_true", help="with --dry-run: read no listing or HEAD (all estimates)")
    p.add_argument("--json", action="store_true", help="with --dry-run: print the plan as JSON")
    p.add_argument("--allow-failed", action="store_true",
                   help="exit 0 even when some files or items could not be fetched (they stay listed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_common(p, ["corpus", "events", "env", "questions"])
    p.epilog = "--set recipe.KEY=VALUE changes a recipe key, e.g. --set recipe.news.files_per_month=1"
    p.set_defaults(func=build_cmd)


def build_cmd(args: argparse.Namespace) -> int:
    from forecast_env.recipe import load_recipe, plan_recipe, render_outcome, render_plan, run_recipe

    if args.config:
        from forecast_env.errors import ConfigError

        raise ConfigError("build takes its settings from the recipe: put corpus/events/env keys in the recipe "
                          "file (or use --set), not --config")
    recipe = load_recipe(args.recipe, overrides=args.overrides or [])
    if args.dry_run:
        plan = plan_recipe(recipe, args.workspace, offline=args.offline)
        print(json.dumps(plan.to_dict(), indent=1) if args.json else render_plan(plan))
        return 0
    outcome = run_recipe(recipe, args.workspace, progress=not args.no_progress, allow_failed=args.allow_failed,
                         say=lambda s: print(s, file=sys.stderr, flush=True))
    print(render_outcome(outcome))
    return outcome.exit_status
