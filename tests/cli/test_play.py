"""`forecast-env play`: a person's REPL over the environment, driven through stdin."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from forecast_env.cli.main import main
from forecast_env.cli.play import parse_command
from tests.support.env_data import build_workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_workspace(tmp_path_factory.mktemp("play_ws"))


def run_play(monkeypatch, capsys, argv: list[str], lines: list[str]) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    code = main(["play", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_play_full_episode_through_stdin(ws, monkeypatch, capsys):
    lines = [
        "help",
        "search senate budget vote",
        "open doc0000",
        "note The senate plans a vote | 2026-03-01 | doc0000, doc0003",
        "notebook",
        "supersede 1 turned out outdated",
        "bogus command",
        "forecast Yes=0.7 No=0.3",
        "forecast 0.8 0.2",
        'forecast "Yes"=0.9',
    ]
    code, out, err = run_play(monkeypatch, capsys, ["--workspace", str(ws), "--event", "pm-1"], lines)
    assert code == 0, err
    assert "Question: Will the senate pass the budget bill" in out
    assert "=== 2026-03-05  (date 1 of 3) ===" in out and "=== 2026-03-15  (date 3 of 3) ===" in out
    assert "search the corpus as of the forecast date" in out  # help
    assert "doc0000" in out and "Senate budget vote update 0" in out
    assert "1. The senate plans a vote (2026-03-01; doc0000, doc0003)" in out
    assert "notebook entry 1: superseded" in out
    assert "unknown command 'bogus'" in out
    assert "Episode finished" in out and "Outcome: Yes" in out
    assert "Brier 0.180" in out and "Brier 0.080" in out and "Brier 0.000" in out  # Yes=0.9 alone normalizes to 1
    assert "Final reward: -0.0867" in out


def test_play_errors_and_budget(ws, monkeypatch, capsys):
    lines = ["open doc9999", "search passed", "forecast Maybe=abc"] + ["open nope"] * 3
    code, out, err = run_play(monkeypatch, capsys, ["--workspace", str(ws), "--event", "pm-4",
                                                    "--set", "max_calls_per_date=4"], lines)
    assert code == 0, err
    assert "error: open_article: no article 'doc9999' can be read on 2026-03-09" in out
    assert "could not read the probability" in out
    assert "call budget of 4" in out and "Episode finished" in out and "(fallback: budget_exhausted)" in out


def test_play_input_ends_early_and_bad_workspace(ws, monkeypatch, capsys, tmp_path):
    code, out, _ = run_play(monkeypatch, capsys, ["--workspace", str(ws), "--seed", "1"], ["forecast 0.5 0.5"])
    assert code == 0
    assert "input ended before the episode finished" in out or "Episode finished" in out
    code, out, err = run_play(monkeypatch, capsys, ["--workspace", str(tmp_path / "none")], [])
    assert code == 2 and err.startswith("error:") and "Traceback" not in err
    code, out, err = run_play(monkeypatch, capsys, ["--workspace", str(ws), "--event", "pm-3"], [])
    assert code == 2 and "pm-3" in err  # a train event: not in the eval split


def test_parse_command():
    assert parse_command("search a b") == ({"tool": "search", "args": {"query": "a b"}}, None)
    assert parse_command('forecast "Bob Jones"=0.2 Alice=0.8')[0] == {
        "tool": "forecast", "args": {"probabilities": {"Bob Jones": 0.2, "Alice": 0.8}}}
    assert parse_command("forecast 0.2 0.8")[0]["args"]["probabilities"] == [0.2, 0.8]
    assert parse_command("note a | b")[0] is None
    assert parse_command("supersede x y")[0] is None
    assert parse_command("")[0] is None
