"""Your own agent: `--agents package.module:Class` (and the `forecast_env.agents` entry-point group)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from forecast_env.agents.registry import agent_class, is_async_agent, make_agent
from forecast_env.cli.main import main
from forecast_env.errors import ForecastEnvError

AGENTS = textwrap.dedent('''
    """Custom agents for the test: a 15-line agent as the README shows it."""
    from forecast_env.agents.base import forecast_action, parse_observation


    class FirstOption:
        """Searches once per date, then puts 0.6 on the first option."""

        name = "first_option"

        def reset(self, *, seed=None):
            self.searched = False

        def act(self, observation, info):
            obs = parse_observation(observation, info)
            if not self.searched:
                self.searched = True
                return {"tool": "search", "args": {"query": obs["question"]}}
            self.searched = False
            rest = (1 - 0.6) / (len(obs["options"]) - 1)
            return forecast_action([0.6] + [rest] * (len(obs["options"]) - 1))


    class AsyncUniform:
        name = "async_uniform"

        def reset(self, *, seed=None):
            pass

        async def aact(self, observation, info):
            obs = parse_observation(observation, info)
            return forecast_action([1.0] * len(obs["options"]))


    class NoAct:
        def reset(self, *, seed=None):
            pass


    not_a_class = 3
''')


@pytest.fixture()
def agents_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"my_agents_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(AGENTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_protocol_checks_say_what_is_missing(agents_module: str) -> None:
    assert agent_class(f"{agents_module}:FirstOption").__name__ == "FirstOption"
    assert is_async_agent(f"{agents_module}:AsyncUniform") and not is_async_agent(f"{agents_module}:FirstOption")
    with pytest.raises(ForecastEnvError, match="lacks act"):
        agent_class(f"{agents_module}:NoAct")
    with pytest.raises(ForecastEnvError, match="not a class"):
        agent_class(f"{agents_module}:not_a_class")
    with pytest.raises(ForecastEnvError, match="has no attribute 'Missing'"):
        agent_class(f"{agents_module}:Missing")
    with pytest.raises(ForecastEnvError, match="cannot import module 'no_such_pkg.agents'"):
        agent_class("no_such_pkg.agents:Agent")
    with pytest.raises(ForecastEnvError, match="unknown agent 'nonesuch'.*package.module:Class"):
        agent_class("nonesuch")
    agent = make_agent(f"{agents_module}:FirstOption")
    assert agent.name == "first_option"


def test_cli_refuses_a_bad_agent_in_one_line(agents_module: str, micro_events: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for spec, says in ((f"{agents_module}:NoAct", "lacks act"), ("no_such_pkg.x:Y", "cannot import module")):
        code = main(["run", "--workspace", str(micro_events), "--agents", spec, "--no-progress"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        assert len(err) == 1 and says in err[0], err


@pytest.mark.slow
def test_custom_agents_run_and_are_scored(agents_module: str, micro_events: Path) -> None:
    from forecast_env.envs import ForecastEnv
    from forecast_env.eval.runs.runner import run_benchmark

    events = ForecastEnv(micro_events, split="eval").event_ids[:2]
    sync, asyn = f"{agents_module}:FirstOption", f"{agents_module}:AsyncUniform"
    run_dir = run_benchmark(micro_events, [sync, asyn], workers=1, progress=False, event_ids=events,
                            run_id="custom-agents")
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    assert set(forecasts["agent"].unique().to_list()) == {sync, asyn}
    assert forecasts["brier"].null_count() == 0
    first = forecasts.filter(pl.col("agent") == sync)
    assert all(p[0] == pytest.approx(0.6) for p in first["probs"].to_list())
    calls = pl.read_parquet(run_dir / "tool_calls.parquet").filter(pl.col("agent") == sync)
    assert (calls["tool"] == "search").sum() == first.height  # one search per date: a fresh agent per date works
