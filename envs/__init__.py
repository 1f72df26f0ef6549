"""Events and the Gymnasium environment of forecast-env.

Importing this package registers `ForecastEnv-v0` with Gymnasium, so that
`gymnasium.make("forecast_env.envs:ForecastEnv-v0", workspace=WS, split="eval")` works without an
explicit import. `ForecastEnv` is imported lazily (the event-building modules do not need it).
"""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import register, registry

ENV_ID = "ForecastEnv-v0"

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="forecast_env.envs.forecast_env:ForecastEnv")

__all__ = ["ENV_ID", "ForecastEnv"]


def __getattr__(name: str) -> Any:
    if name == "ForecastEnv":
        from forecast_env.envs.forecast_env import ForecastEnv

        return ForecastEnv
    raise AttributeError(f"module 'forecast_env.envs' has no attribute {name!r}")
