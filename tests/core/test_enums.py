"""Each enumeration is defined once (forecast_env/enums.py), and naming the choices loads no heavy backend."""

from __future__ import annotations

import subprocess
import sys

from forecast_env import config, enums, executor
from forecast_env.envs import tools
from forecast_env.eval.report import modes
from forecast_env.eval.runs import store as runs
from forecast_env.retrieval import searcher


def test_the_cli_config_loads_no_backend():
    code = ("import sys, forecast_env.config, forecast_env.enums, forecast_env.cli.main\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('faiss', 'torch', 'ray'))\n"
            "assert not heavy, heavy\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_consumers_use_the_one_definition():
    assert executor.ENGINES is enums.ENGINES and runs.ENGINES is enums.ENGINES
    assert config.ALLOWED["benchmark"]["engine"] is enums.ENGINES
    assert config.ALLOWED["corpus"]["execution.engine"] is enums.ENGINES
    assert tools.SEARCH_MODES is enums.SEARCH_MODES and searcher.MODES is enums.SEARCH_MODES
    assert config.ALLOWED["env"]["search_mode"] is enums.SEARCH_MODES
    assert config.ALLOWED["env"]["split"] is enums.SPLITS and modes.MODES is enums.PLAY_MODES
    spec = next(s for s in tools.tool_specs() if s["function"]["name"] == "search")
    assert spec["function"]["parameters"]["properties"]["mode"]["enum"] == list(enums.SEARCH_MODES)
