"""forecast-env's plugin name for verifiers: verifiers imports a taskset (or harness) id as a top-level module,
so `--env.taskset.id forecast-env-verifiers` finds the environment of `forecast_env.adapters.verifiers` here."""

from forecast_env.adapters.verifiers import ForecastHarness, ForecastTaskset, ForecastVerifiersEnv

__all__ = ["ForecastHarness", "ForecastTaskset", "ForecastVerifiersEnv"]
