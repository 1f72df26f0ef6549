"""The command line's shared options: one `--set SECTION.KEY=VALUE` syntax that every command honours or
refuses (never ignores), one `--no-progress` flag, choices where a value is from a fixed set."""

from __future__ import annotations

import argparse
import json

import pytest

from forecast_env.cli.common import section_config
from forecast_env.cli.main import build_parser, main
from forecast_env.config import ALLOWED, SECTIONS, route_overrides
from forecast_env.errors import ConfigError


def _subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (command path, parser) of the CLI, nested groups included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _subparsers(sub, (*path, name))


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_set_reaches_every_section_a_command_reads():
    args = build_parser().parse_args(["run", "--workspace", "ws", "--set", "env.memory=false",
                                      "--set", "benchmark.rollouts=3", "--set", "max_calls_per_date=5"])
    env, bench = section_config(args, "env"), section_config(args, "benchmark")
    assert env["memory"] is False and env["max_calls_per_date"] == 5  # bare key: only env has it
    assert bench["rollouts"] == 3


@pytest.mark.parametrize("argv, fragment", [
    (["run", "--workspace", "WS", "--set", "env.memroy=false"], "unknown key env.'memroy'"),
    (["run", "--workspace", "WS", "--set", "env.memory=maybe"], "env.memory must be bool"),
    (["run", "--workspace", "WS", "--set", "split=eval"], "several sections (benchmark, env)"),
    (["run", "--workspace", "WS", "--set", "nonsense=1"], "unknown key 'nonsense'"),
    (["run", "--workspace", "WS", "--set", "memory"], "expected key=value"),
    (["index", "build", "--workspace", "WS", "--set", "env.memory=false"], "does not read the 'env' section"),
    (["events", "build", "--polymarket", "PM", "--workspace", "WS", "--set", "corpus.dedup.bands=4"],
     "it reads events"),
    (["play", "--workspace", "WS", "--set", "benchmark.rollouts=2"], "does not read the 'benchmark' section"),
])
def test_bad_overrides_exit_2_naming_the_key(argv, fragment, capsys, tmp_path):
    argv = [str(tmp_path / a) if a in ("WS", "PM") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --set") and fragment in err, err
    assert "Traceback" not in err


def test_unknown_key_lists_what_is_allowed(capsys, tmp_path):
    assert main(["index", "build", "--workspace", str(tmp_path), "--set", "embed.bogus=1"]) == 2
    err = capsys.readouterr().err
    assert "corpus.'embed.bogus'" in err and "batch_size" in err  # the keys allowed under embed


def test_route_overrides_prefixes_bare_keys():
    routed = route_overrides(["memory=false", "env.search_k=3", "rollouts=2"], ("benchmark", "env"))
    assert routed == {"benchmark": ["benchmark.rollouts=2"], "env": ["env.memory=false", "env.search_k=3"]}
    with pytest.raises(ConfigError, match="name a key inside the section"):
        route_overrides(["env=1"], ("env",))


def test_commands_without_configuration_refuse_set():
    for argv in (["synth", "--out", "x", "--set", "a=1"], ["verify", "ws", "--set", "a=1"],
                 ["export", "--workspace", "w", "--split", "eval", "--out", "o", "--set", "a=1"]):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(argv)
        assert exc.value.code == 2


def test_one_progress_flag_everywhere():
    parsers = dict(_subparsers(build_parser()))
    for path, p in parsers.items():
        assert "--quiet" not in _options(p), f"{' '.join(path)}: use --no-progress"
    for path in (("corpus", "build"), ("index", "build"), ("events", "build"), ("events", "import"),
                 ("events", "fetch"), ("run",), ("export",), ("synth",)):
        assert "--no-progress" in _options(parsers[path]), path


def test_every_command_declares_the_sections_it_reads():
    """A command built with add_common(parser) and no sections would accept --set for any section."""
    for path, p in _subparsers(build_parser()):
        if "--set" in _options(p):
            reads = p.get_default("config_sections")
            assert (reads and set(reads) < set(SECTIONS)) or path == ("demo",), (path, reads)


def test_search_mode_has_choices(tmp_path):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["search", "--workspace", str(tmp_path), "--as-of", "2026-01-01",
                                   "--query", "q", "--mode", "semantic"])
    assert exc.value.code == 2
    ok = build_parser().parse_args(["search", "--workspace", "w", "--as-of", "2026-01-01", "--query", "q",
                                    "--mode", "bm25"])
    assert ok.mode in ALLOWED["env"]["search_mode"]


@pytest.mark.slow
def test_run_applies_env_overrides(micro_events, capsys):
    """`run --set env.KEY=...` changes the environment the episodes run in (it used to be ignored)."""
    import polars as pl

    event = pl.read_parquet(micro_events / "events" / "events.parquet").filter(pl.col("split") == "eval")["event_id"][0]
    code = main(["run", "--workspace", str(micro_events), "--agents", "uniform", "--split", "eval", "--events", event,
                 "--run-id", "cli-set", "--workers", "1", "--no-progress", "--set", "env.max_calls_per_date=3",
                 "--set", "env.memory=false"])
    assert code == 0, capsys.readouterr().err
    rec = json.loads((micro_events / "runs" / "cli-set" / "run.json").read_text())
    assert rec["config"]["env"]["max_calls_per_date"] == 3 and rec["config"]["env"]["memory"] is False


def test_index_prepare_builds_the_configured_backend(capsys):
    """`index prepare` (run by `make venv`) loads the configured embedding backend, building its cached
    model files when they are missing, and names what it prepared; a bad backend is exit status 2."""
    assert main(["index", "prepare", "--set", "embed.backend=static"]) == 0
    out = capsys.readouterr().out
    assert "embedding backend ready" in out and "[static]" in out and "dim 256" in out
    assert main(["index", "prepare", "--set", "embed.backend=nope"]) == 2
