"""What agents may see (docs/design.md §3.hiding, §5): one env key per article flag, market quotes hidden by
default like leak-flagged articles, showing them a recorded ablation that is never pooled with default runs.

Built on the micro sample world, whose corpus holds leak-flagged articles and articles quoting market odds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from forecast_env.config import load_config, route_overrides
from forecast_env.envs.forecast_env import ForecastEnv
from forecast_env.envs.records import ablations
from forecast_env.envs.tools import HIDE_KEYS, hidden_set
from forecast_env.errors import ConfigError, RunError
from forecast_env.retrieval import Searcher
from forecast_env.retrieval.searcher import HIDE_FLAGS
from forecast_env.store import Workspace

UNKNOWN = "ffffffffffffffff"


@pytest.fixture(scope="module")
def ws(micro_events: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the micro workspace (the runs written here stay out of the shared one)."""
    dst = tmp_path_factory.mktemp("hide") / "ws"
    shutil.copytree(micro_events, dst, ignore=shutil.ignore_patterns("runs", "audit", "exports"))
    return dst


@pytest.fixture(scope="module")
def store(ws: Path) -> pl.DataFrame:
    cols = ["doc_id", "day", "title", "leak_flag", "market_quote"]
    return pl.concat([pl.read_parquet(p, columns=cols) for p in Workspace.at(ws).article_shards()]).sort("day")


@pytest.fixture(scope="module")
def late_event(ws: Path, store: pl.DataFrame) -> str:
    """An event whose first forecast date comes after every flagged article is visible."""
    flagged = store.filter(pl.col("leak_flag") | pl.col("market_quote"))
    assert flagged.filter(pl.col("market_quote")).height >= 1 and flagged.filter(pl.col("leak_flag")).height >= 1
    sched = pl.read_parquet(Path(ws) / "events" / "schedule.parquet")
    first = sched.group_by("event_id").agg(pl.col("forecast_date").min()).filter(
        pl.col("forecast_date") > flagged["day"].max()).sort("event_id")
    assert first.height, "the micro world needs an event dated after its flagged articles"
    return first["event_id"][0]


def env_at(ws: Path, event_id: str, **overrides) -> ForecastEnv:
    env = ForecastEnv(ws, split="all", max_calls_per_date=10_000, **overrides)
    env.reset(options={"event_id": event_id})
    return env


def refusal(env: ForecastEnv, doc_id: str) -> str:
    _, _, _, _, info = env.step({"tool": "open_article", "args": {"doc_id": doc_id}})
    assert info["tool_result"] is None and info["error_kind"] == "invalid_action"
    return info["error"].replace(doc_id, "<id>")


# ---------------------------------------------------------------------------------------------
# configuration: one key per flag, the corpus key removed with a message naming them
# ---------------------------------------------------------------------------------------------


def test_every_article_flag_has_one_env_key_and_all_are_hidden_by_default():
    assert set(HIDE_KEYS) == set(HIDE_FLAGS)
    cfg = load_config("env")
    assert all(cfg[key] is True for key in HIDE_KEYS.values())
    assert hidden_set(cfg) == ("leak_flag", "market_quote") and ablations(cfg) == []
    assert hidden_set(load_config("env", overrides={"hide_market_quotes": False})) == ("leak_flag",)
    assert hidden_set(load_config("env", overrides={"hide_leak_flagged": False, "hide_market_quotes": False})) == ()
    # a record from before the market-quote key had one switch for both flags
    assert hidden_set({"hide_leak_flagged": False}) == ()
    assert hidden_set({"hide_leak_flagged": True}) == ("leak_flag", "market_quote")


def test_the_corpus_hide_key_is_removed_with_a_message_naming_the_env_keys(tmp_path: Path):
    f = tmp_path / "corpus.yaml"
    f.write_text("retrieval:\n  hide: [leak_flag]\n")
    calls = [lambda: load_config("corpus", overrides=["retrieval.hide=[leak_flag]"]),
             lambda: load_config("corpus", [f]),
             lambda: route_overrides(["corpus.retrieval.hide=[]"], ["corpus"]),
             lambda: route_overrides(["retrieval.hide=[]"], ["benchmark", "env"])]
    for call in calls:
        with pytest.raises(ConfigError, match=r"retrieval\.hide was removed.*env\.hide_market_quotes"):
            call()
    assert "hide" not in load_config("corpus")["retrieval"]


def test_a_searcher_passed_in_must_hide_what_the_config_says(ws: Path):
    with Searcher.open(ws) as everything:  # the Searcher's default hides every flag
        ForecastEnv(ws, split="all", searcher=everything).close()
        with pytest.raises(ConfigError, match=r"hide_market_quotes=false.*Searcher\.open"):
            ForecastEnv(ws, split="all", searcher=everything, hide_market_quotes=False)
    with Searcher.open(ws, hide=["leak_flag"]) as ablation:
        ForecastEnv(ws, split="all", searcher=ablation, hide_market_quotes=False).close()


# ---------------------------------------------------------------------------------------------
# the default: flagged articles never show, refused with the one message
# ---------------------------------------------------------------------------------------------


def test_flagged_articles_never_show_in_search_and_are_refused_like_unknown_ids(ws, store, late_event):
    env = env_at(ws, late_event)
    flagged = store.filter(pl.col("leak_flag") | pl.col("market_quote"))
    hidden_ids = set(flagged["doc_id"].to_list())
    questions = pl.read_parquet(Path(ws) / "events" / "events.parquet")["question"].to_list()
    for query in flagged["title"].to_list() + questions:
        for mode in ("bm25", "dense", "hybrid"):
            _, _, _, _, info = env.step({"tool": "search", "args": {"query": query, "k": 50, "mode": mode}})
            assert info["error"] is None
            shown = {h["doc_id"] for h in info["tool_result"]["hits"]}
            assert shown and not shown & hidden_ids, (query, mode, shown & hidden_ids)
    unknown = refusal(env, UNKNOWN)
    for doc in hidden_ids:
        assert refusal(env, doc) == unknown
    env.close()
    # the same message for an article that is merely not visible yet
    early = pl.read_parquet(Path(ws) / "events" / "schedule.parquet").sort("forecast_date").row(0, named=True)
    later = store.filter(~pl.col("leak_flag") & ~pl.col("market_quote") & (pl.col("day") > early["forecast_date"]))
    env = env_at(ws, early["event_id"])
    assert refusal(env, later["doc_id"][0]) == refusal(env, UNKNOWN) == refusal(env, sorted(hidden_ids)[0])
    env.close()


def test_showing_market_quotes_is_an_ablation_recorded_on_every_row(ws, store, late_event):
    quote = store.filter(pl.col("market_quote") & ~pl.col("leak_flag")).row(0, named=True)
    leak = store.filter(pl.col("leak_flag")).row(0, named=True)
    rows = {}
    for name, overrides in (("default", {}), ("ablation", {"hide_market_quotes": False})):
        env = env_at(ws, late_event, **overrides)
        _, _, _, _, info = env.step({"tool": "search", "args": {"query": quote["title"], "k": 10, "mode": "bm25"}})
        found = quote["doc_id"] in {h["doc_id"] for h in info["tool_result"]["hits"]}
        _, _, _, _, opened = env.step({"tool": "open_article", "args": {"doc_id": quote["doc_id"]}})
        assert found == (name == "ablation") and (opened["error"] is None) == (name == "ablation")
        assert refusal(env, leak["doc_id"]) == refusal(env, UNKNOWN)  # leak-flagged stay hidden in both
        env.step({"tool": "forecast", "args": {"probabilities": [1.0] * len(info["options"])}})
        rows[name] = env.unwrapped.episode_log()["forecasts"]
        env.close()
    assert all(r["hidden_flags"] == ["leak_flag", "market_quote"] for r in rows["default"])
    assert all(r["hidden_flags"] == ["leak_flag"] for r in rows["ablation"]) and rows["ablation"]


# ---------------------------------------------------------------------------------------------
# runs: the ablation is recorded, labelled in the report, and never pooled with default runs
# ---------------------------------------------------------------------------------------------


def test_an_ablation_run_is_recorded_labelled_and_not_pooled(ws: Path):
    from forecast_env.eval.report.render import build_report
    from forecast_env.eval.runs.runner import run_benchmark

    events = sorted(pl.read_parquet(Path(ws) / "events" / "events.parquet").filter(
        pl.col("split") == "eval")["event_id"].to_list())[:2]
    runs = {name: run_benchmark(ws, ["uniform"], split="eval", run_id=f"hide-{name}", workers=1, progress=False,
                                event_ids=events, env_config=cfg)
            for name, cfg in (("default", None), ("ablation", {"hide_market_quotes": False}))}
    for name, run_dir in runs.items():
        rec = json.loads((run_dir / "run.json").read_text())
        assert rec["config"]["env"]["hide_market_quotes"] is (name == "default")
        assert rec["config"]["env"]["hide_leak_flagged"] is True
        hidden = pl.read_parquet(run_dir / "forecasts.parquet")["hidden_flags"].to_list()
        want = ["leak_flag", "market_quote"] if name == "default" else ["leak_flag"]
        assert rec["hidden_flags"] == want and bool(rec["ablations"]) == (name == "ablation")
        assert hidden and all(h == want for h in hidden)
        md = Path(build_report(run_dir, plots=False)["markdown"]).read_text()
        labelled = "(ablation)" in md.splitlines()[0] and "**Ablation run**" in md and "hide_market_quotes=false" in md
        assert labelled == (name == "ablation")
    # resuming the default run with the ablation's settings is refused: its episodes would be pooled
    with pytest.raises(RunError, match="other agents, events, seed or configs"):
        run_benchmark(ws, ["uniform"], split="eval", run_id="hide-default", workers=1, progress=False,
                      event_ids=events, env_config={"hide_market_quotes": False})
