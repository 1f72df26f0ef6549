"""A whole benchmark from one recipe: events fetch, corpus, index, events, forecastbench (optional), questions
(optional), audit, release.

The build orchestration, above every stage: `load` reads and validates a recipe (a packaged one,
`dojo` or `small`, or a YAML file), `run` runs its stages in order and skips those already done, and
`plan` is the dry run (files, bytes and the cost of every stage, from measured rates).

Python API:

    from forecast_env.recipe import load_recipe, plan_recipe, render_plan, run_recipe
    recipe = load_recipe("small", overrides=["recipe.news.files_per_month=1"])
    outcome = run_recipe(recipe, "ws")          # outcome.exit_status: see EXIT_*
    print(render_plan(plan_recipe(recipe, "ws")))
"""

from __future__ import annotations

from forecast_env.recipe.load import RECIPE, Recipe, load_recipe, recipe_names
from forecast_env.recipe.plan import PLAN_RATES, MonthPlan, Plan, plan_recipe, profile_switch, render_plan
from forecast_env.recipe.run import (
    EXIT_AUDIT_FAIL,
    EXIT_BAD_INPUT,
    EXIT_DISK_FULL,
    EXIT_INTERNAL,
    EXIT_ITEMS_FAILED,
    EXIT_OK,
    STAGES,
    BuildOutcome,
    StageResult,
    build_dir,
    read_record,
    render_outcome,
    run_recipe,
)

__all__ = [
    "EXIT_AUDIT_FAIL",
    "EXIT_BAD_INPUT",
    "EXIT_DISK_FULL",
    "EXIT_INTERNAL",
    "EXIT_ITEMS_FAILED",
    "EXIT_OK",
    "PLAN_RATES",
    "RECIPE",
    "STAGES",
    "BuildOutcome",
    "MonthPlan",
    "Plan",
    "Recipe",
    "StageResult",
    "build_dir",
    "load_recipe",
    "plan_recipe",
    "profile_switch",
    "read_record",
    "recipe_names",
    "render_outcome",
    "render_plan",
    "run_recipe",
]
