"""Recipes are validated by the config validator (`config.merge_settings` with the recipe's schema): each
bad key or value is one ConfigError naming where it came from, the key and what is allowed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from forecast_env.errors import ConfigError
from forecast_env.recipe import load_recipe, recipe_names

SPLITS = {"train": {"start": "2025-03-01", "end": "2025-04-01"}, "eval": {"start": "2025-04-01", "end": "2025-05-01"}}


def _recipe(tmp_path: Path, **keys: object) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"name": "r", "news": {"cc_news": "2025-03..2025-04"}, "splits": SPLITS, **keys}))
    return path


def test_packaged_recipes_load() -> None:
    assert recipe_names() == ["dojo", "small"]
    small = load_recipe("small", ["recipe.news.files_per_month=1", "corpus.quality.profile=paper"])
    assert small.get("news.files_per_month") == 1 and small.corpus["quality"]["profile"] == "paper"
    assert small.events["splits"]["eval"] == {"start": "2026-04-15", "end": "2026-06-01"}
    assert str(small.date("polymarket.closed_since")) == "2026-03-01" and small.date("polymarket.max_pages") is None


@pytest.mark.parametrize("keys, overrides, message", [
    ({"relase": {"split": "eval"}}, [], "r.yaml: unknown recipe key 'relase.split'; allowed here: audit, corpus"),
    ({}, ["recipe.news.nope=1"], "--set recipe.news.nope=1: unknown recipe key 'news.nope'; allowed here: cc_news"),
    ({"news": {"cc_news": "2025-03", "files_per_month": True}}, [],
     "recipe key 'news.files_per_month' must be int or null, got True"),
    ({"news": {"cc_news": "2025-03", "engine": "spark"}}, [],
     "recipe key 'news.engine' = 'spark' is not allowed; choose one of local, ray"),
    ({"splits": {**SPLITS, "train": {"start": "2025-03-01", "end": "nope"}}}, [],
     "recipe key 'splits.train.end' = 'nope' is not a date (YYYY-MM-DD)"),
    ({"news": {"cc_news": "2025-03", "warc": [1]}}, [], "recipe key 'news.warc' must be a list of paths, globs or URLs"),
    ({"corpus": 3}, [], "recipe key 'corpus' must be a mapping of corpus settings"),
    ({"polymarket": None}, [], "recipe key 'polymarket' must be a mapping, got None"),
    ({"splits": {"train": SPLITS["train"]}}, [], "splits.eval.start is missing"),
    ({"splits": {}}, [], "a recipe must state its splits"),
    ({"corpus": {"quality": {"profile": "zzz"}}}, [], "corpus.quality.profile = 'zzz' is not allowed"),
])
def test_bad_recipe_keys_name_the_key(tmp_path: Path, keys: dict, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_recipe(_recipe(tmp_path, **keys), overrides)


def test_dotted_keys_and_dates_read_as_nested_keys_and_iso_text(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nnews.cc_news: 2025-03\nnews.sample: 1\nsplits:\n  train: {start: 2025-03-01, end: "
                    "2025-04-01}\n  eval: {start: 2025-04-01, end: 2025-05-01}\npolymarket: {closed_since: 2025-03-01}\n")
    recipe = load_recipe(path)
    assert recipe.get("news.cc_news") == "2025-03" and recipe.get("news.sample") == 1
    assert recipe.get("splits.train.start") == "2025-03-01" and recipe.get("polymarket.closed_since") == "2025-03-01"


def test_an_impossible_date_in_an_override_is_a_bad_input_not_a_crash():
    """YAML raises ValueError (not a YAMLError) building 2026-13-01: it must reach the user as a ConfigError."""
    from forecast_env.config import parse_override

    assert parse_override("recipe.splits.eval.end=2026-13-01") == ("recipe.splits.eval.end", "2026-13-01")
    with pytest.raises(ConfigError, match="not a date"):
        load_recipe("dojo", ["recipe.splits.eval.end=2026-13-01"])
