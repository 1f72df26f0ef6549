"""Events and the Gymnasium environments of forecast-env.

Importing this package registers `ForecastEnv-v0` (one event per episode) and
`ForecastWorldEnv-v0` (world mode: every question of a split on one clock) with Gymnasium, so that
`gymnasium.make("forecast_env.envs:ForecastEnv-v0", workspace=WS, split="eval")` works without an
explicit import. The environment classes are imported lazily (the event-building modules do not
need them).
"""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import register, registry

ENV_ID = "ForecastEnv-v0"
WORLD_ENV_ID = "ForecastWorldEnv-v0"

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="forecast_env.envs.forecast_env:ForecastEnv")
if WORLD_ENV_ID not in registry:
    register(id=WORLD_ENV_ID, entry_point="forecast_env.envs.world_env:ForecastWorldEnv")

__all__ = ["ENV_ID", "WORLD_ENV_ID", "ForecastEnv", "ForecastWorldEnv"]


def __getattr__(name: str) -> Any:
    if name == "ForecastEnv":
        from forecast_env.envs.forecast_env import ForecastEnv

        return ForecastEnv
    if name == "ForecastWorldEnv":
        from forecast_env.envs.world_env import ForecastWorldEnv

        return ForecastWorldEnv
    raise AttributeError(f"module 'forecast_env.envs' has no attribute {name!r}")
