"""Recipes: what a build makes, read from a packaged recipe or a YAML file and validated (docs/recipes.md).

A recipe names the Polymarket window, the CC-NEWS months (or local WARC paths), the splits, the audit
and the release, plus any `corpus` / `events` / `env` settings, and optionally a `forecastbench` block
(ForecastBench rounds imported as events from a local copy of forecastbench-datasets, off by default) and a
`questions` block (questions generated from the news, off by default). Its keys are checked by the config validator
(`forecast_env.config.merge_settings`) with the recipe's `Schema`; its section settings by those
sections' own schemas when the sections are loaded (`questions.config` by the `questions` section's).
Packaged recipes: `dojo` (the paper's 15 months) and `small` (2 files per month over 3 months), in
`forecast_env/recipe/recipes/`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from forecast_env.config import (
    Schema,
    default_config,
    flatten_keys,
    load_config,
    merge_settings,
    nest_keys,
    parse_override,
    route_overrides,
    section_schema,
)
from forecast_env.enums import ENGINES, SPLITS
from forecast_env.errors import ConfigError

#: The config sections a recipe holds settings of (and routes `--set` items to).
SECTIONS = ("corpus", "events", "env")
#: The optional questions stage's section: its settings are the recipe key `questions.config`, and `--set
#: questions.KEY=VALUE` items go to it.
QUESTIONS_SECTION = "questions"
_SPLIT_EDGES = tuple((split, edge) for split in ("train", "eval") for edge in ("start", "end"))

#: Every recipe key with its default; the splits have none (every recipe states them).
RECIPE_DEFAULTS: dict[str, Any] = {
    "name": "", "description": "",
    "polymarket": {"cache": "polymarket", "closed_since": None, "closed_before": None, "max_pages": None},
    "news": {"cc_news": None, "files_per_month": None, "sample": None, "warc": [], "workers": None,
             "engine": "local"},
    "splits": {split: {"start": None, "end": None} for split in ("train", "eval")},
    "audit": {"split": "eval", "checks": [], "settings": {}},
    "release": {"split": "eval", "name": None, "out": "release"},
    # ForecastBench rounds imported as events (docs/forecastbench.md): off unless a recipe enables them
    "forecastbench": {"enabled": False, "repo": None, "rounds": None},
    # questions generated from the news (docs/questions.md): off unless a recipe enables them
    "questions": {"enabled": False, "dates": None, "config": {}},
    "corpus": {}, "events": {}, "env": {},
}

_NONE = type(None)
#: The types each recipe key's value may have, its choices, dates and lists; `corpus`, `events`, `env`
#: are mappings of those sections' settings.
RECIPE = Schema(
    name="recipe",
    types={
        "name": (str,),
        "description": (str,),
        "polymarket.cache": (str,),
        "polymarket.closed_since": (str, date, _NONE),
        "polymarket.closed_before": (str, date, _NONE),
        "polymarket.max_pages": (int, _NONE),
        "news.cc_news": (str, _NONE),
        "news.files_per_month": (int, _NONE),
        "news.sample": (float, int, _NONE),
        "news.warc": (list,),
        "news.workers": (int, _NONE),
        "news.engine": (str,),
        **{f"splits.{split}.{edge}": (str, date) for split, edge in _SPLIT_EDGES},
        "audit.split": (str,),
        "audit.checks": (list,),
        "audit.settings": (dict,),
        "release.split": (str,),
        "release.name": (str, _NONE),
        "release.out": (str,),
        "questions.dates": (str, _NONE),
        "forecastbench.repo": (str, _NONE),
        "forecastbench.rounds": (str, date, _NONE),  # one round may be written as a bare date
    },
    choices={"news.engine": ENGINES, "audit.split": SPLITS, "release.split": ("train", "eval")},
    dates=frozenset({"polymarket.closed_since", "polymarket.closed_before",
                     *(f"splits.{split}.{edge}" for split, edge in _SPLIT_EDGES)}),
    text_lists={"news.warc": "paths, globs or URLs"},
    sections=(*SECTIONS, "questions.config"),
    subject="recipe key {path!r}",
    unknown="unknown recipe key {leaf!r}; allowed here: {allowed}",
)
#: The `questions` section's schema, naming a key as the recipe writes it (`questions.config.seeds.per_date`).
QUESTIONS_CONFIG = dataclasses.replace(section_schema(QUESTIONS_SECTION), subject="recipe key 'questions.config.{path}'",
                                       unknown="unknown recipe key 'questions.config.{leaf}'; allowed here: {allowed}")


def recipe_names() -> list[str]:
    """The packaged recipes (`forecast_env/recipe/recipes/*.yaml`)."""
    folder = resources.files("forecast_env.recipe").joinpath("recipes")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


@dataclass
class Recipe:
    """A validated recipe and the section configs it implies (splits inside `events`)."""

    values: dict[str, Any]
    corpus: dict[str, Any]
    events: dict[str, Any]
    env: dict[str, Any]
    source: str  # the recipe's name or file
    #: the `questions` section (its defaults, `questions.config`, then `--set questions.*`); used when enabled
    questions: dict[str, Any] = field(default_factory=dict)

    @property
    def questions_enabled(self) -> bool:
        """Whether the build runs the questions stage (`questions.enabled`)."""
        return bool(self.values["questions"]["enabled"])

    @property
    def forecastbench_enabled(self) -> bool:
        """Whether the build runs the forecastbench stage (`forecastbench.enabled`)."""
        return bool(self.values["forecastbench"]["enabled"])

    @property
    def forecastbench_repo(self) -> Path | None:
        """The `forecastbench.repo` folder as an absolute path (relative: to the current folder); None when unset."""
        repo = self.values["forecastbench"]["repo"]
        return Path(repo).expanduser().resolve() if repo else None

    @property
    def name(self) -> str:
        """The recipe's `name`, or its file's stem."""
        return str(self.values.get("name") or Path(self.source).stem)

    def get(self, dotted: str) -> Any:
        """The value of one recipe key (`news.cc_news`)."""
        cur: Any = self.values
        for part in dotted.split("."):
            cur = cur[part]
        return cur

    def date(self, dotted: str) -> date | None:
        """The value of a date key as a date (None when it is null)."""
        value = self.get(dotted)
        return None if value is None else date.fromisoformat(str(value))


def _read_recipe(name_or_file: str | Path) -> tuple[dict[str, Any], str]:
    """The recipe's YAML as a mapping, and how errors name it."""
    path = Path(name_or_file)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ConfigError(f"recipe file {path} does not exist; give a file or one of: {', '.join(recipe_names())}")
        text, where = path.read_text(), str(path)
    else:
        if str(name_or_file) not in recipe_names():
            raise ConfigError(f"no recipe {str(name_or_file)!r}; packaged recipes: {', '.join(recipe_names())} "
                              "(or give a YAML file)")
        text = resources.files("forecast_env.recipe").joinpath("recipes", f"{name_or_file}.yaml").read_text()
        where = f"recipe {name_or_file}"
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a mapping of recipe keys")
    return data, where


def load_recipe(name_or_file: str | Path, overrides: Sequence[str] = ()) -> Recipe:
    """A packaged recipe by name, or a recipe YAML file, with `--set` overrides; validated.

    An override `recipe.KEY=VALUE` sets a recipe key (`recipe.news.files_per_month=3`); any other is
    routed to the corpus, events or env section as the other commands route theirs, or to the questions
    stage's section (`questions.seeds.per_date=8`, after the recipe's `questions.config`).
    """
    data, where = _read_recipe(name_or_file)
    values = copy.deepcopy(RECIPE_DEFAULTS)
    merge_settings(RECIPE, values, nest_keys(data), where)  # a dotted key (`news.workers: 2`) is a nested one
    _check_questions_config(nest_keys(data), where)
    mine: list[tuple[str, Any, str]] = []
    theirs: list[tuple[str, Any, str]] = []
    for item in overrides:
        key, value = parse_override(item)
        (mine if key.startswith("recipe.") else theirs).append((key, value, item))
    for key, value, item in mine:
        update = nest_keys({key[len("recipe."):]: value})
        merge_settings(RECIPE, values, update, f"--set {item}")
        _check_questions_config(update, f"--set {item}")
    missing = [f"splits.{split}.{edge}" for split, edge in _SPLIT_EDGES if values["splits"][split][edge] is None]
    if len(missing) == len(_SPLIT_EDGES):
        raise ConfigError(f"{where}: a recipe must state its splits: splits: {{train: {{start, end}}, "
                          "eval: {start, end}} (dates, end exclusive)")
    if missing:
        raise ConfigError(f"{where}: {missing[0]} is missing")
    news = values["news"]
    if not news["cc_news"] and not news["warc"]:
        raise ConfigError(f"{where}: the recipe names no news: set news.cc_news (e.g. 2025-03..2025-05) or "
                          "news.warc (paths, globs or URLs)")
    if news["cc_news"]:
        from forecast_env.corpus_build.source import parse_months

        parse_months(news["cc_news"])  # a bad month is bad input now, not after the Polymarket fetch
    routed = route_overrides([item for _, _, item in theirs], (*SECTIONS, QUESTIONS_SECTION))
    sections = {}
    for section in SECTIONS:
        given = flatten_keys(values[section])
        if section == "events":
            given.update({f"splits.{s}.{e}": values["splits"][s][e] for s, e in _SPLIT_EDGES})
        given.update(dict(parse_override(o) for o in routed[section]))  # --set after the recipe's own
        sections[section] = load_config(section, overrides=given)
    questions = _questions_section(values["questions"], routed[QUESTIONS_SECTION], where)
    _check_forecastbench(values["forecastbench"], where)
    return Recipe(values, sections["corpus"], sections["events"], sections["env"], str(name_or_file), questions)


def _check_questions_config(update: dict[str, Any], where: str) -> None:
    """Check the `questions.config` keys of one recipe update against the `questions` section's schema."""
    block = update.get("questions")
    config = block.get("config") if isinstance(block, dict) else None
    if config:  # merge_settings(RECIPE) has made sure it is a mapping
        merge_settings(QUESTIONS_CONFIG, copy.deepcopy(default_config(QUESTIONS_SECTION)), config, where)


def _check_forecastbench(block: dict[str, Any], where: str) -> None:
    """An enabled `forecastbench` block names a local forecastbench-datasets copy (`repo`, a folder with
    datasets/) and, optionally, rounds `A..B` (due dates) that select at least one round there."""
    if not block["enabled"]:
        return
    if not block["repo"]:
        raise ConfigError(f"{where}: forecastbench.repo is missing: the forecastbench stage reads a local copy of "
                          "the forecastbench-datasets repository (forecastbench.repo: PATH; git clone "
                          "https://github.com/forecastingresearch/forecastbench-datasets)")
    repo = Path(block["repo"]).expanduser()
    if not (repo / "datasets").is_dir():
        what = "does not exist" if not repo.exists() else "has no datasets/ folder"
        raise ConfigError(f"{where}: recipe key 'forecastbench.repo' = {block['repo']!r} {what}: give a local copy "
                          "of the forecastbench-datasets repository (a folder with datasets/question_sets and "
                          "datasets/resolution_sets)")
    from forecast_env.envs.events.forecastbench import due_dates
    from forecast_env.envs.events.forecastbench_import import parse_rounds
    from forecast_env.errors import EventsError

    rounds = block["rounds"]
    try:
        first, last = parse_rounds(rounds)
    except EventsError as exc:
        raise ConfigError(f"{where}: recipe key 'forecastbench.rounds' = {rounds!r} is not A..B, A.., ..B or A "
                          "(due dates YYYY-MM-DD, the first not after the last; e.g. 2026-03-01..2026-03-15)") from exc
    found = due_dates(repo)
    if not any((first is None or d >= first) and (last is None or d <= last) for d in found):
        have = f"due dates there: {found[0]}..{found[-1]}" if found else "it holds no round file"
        raise ConfigError(f"{where}: recipe key 'forecastbench.rounds' = {rounds!r} selects no round of "
                          f"{repo / 'datasets'} ({have})")


def _questions_section(block: dict[str, Any], overrides: Sequence[str], where: str) -> dict[str, Any]:
    """The `questions` section of a recipe's `questions` block (an enabled block must name its dates and a model)."""
    # every key written `questions.KEY`: load_config passes over a bare key named like a section (e.g. `events`)
    given = {f"{QUESTIONS_SECTION}.{k}": v for k, v in flatten_keys(block["config"]).items()}
    given.update(dict(parse_override(o) for o in overrides))  # --set questions.KEY=VALUE after the recipe's own
    cfg = load_config(QUESTIONS_SECTION, overrides=given)
    if not block["enabled"]:
        return cfg
    if not block["dates"]:
        raise ConfigError(f"{where}: questions.dates is missing: the question dates of the questions stage, "
                          "A..B (e.g. questions.dates: 2026-03-01..2026-05-15)")
    from forecast_env.errors import QuestionsError
    from forecast_env.questions.generate import parse_dates

    try:
        first, last = parse_dates(block["dates"])
    except QuestionsError as exc:
        raise ConfigError(f"{where}: recipe key 'questions.dates' = {block['dates']!r} is not A..B with ISO days, "
                          "e.g. 2026-03-01..2026-05-15") from exc
    if last < first:
        raise ConfigError(f"{where}: recipe key 'questions.dates' = {block['dates']!r}: the end is before the start")
    if not cfg["llm"]["model"] and cfg["replay"] != "only":
        raise ConfigError(f"{where}: questions.config.llm.model is not set: the questions stage needs a model "
                          "(questions.config: {llm: {model: ..., base_url: ...}}, or --set questions.llm.model=...)")
    return cfg
