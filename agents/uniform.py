"""The uniform agent: forecasts 1/K over the offered options at once (the skill anchor)."""

from __future__ import annotations

from collections.abc import Generator

from forecast_env.agents.base import forecast_action, parse_observation, uniform_probabilities


class UniformAgent:
    """Reports the uniform distribution over the offered options, with no tool calls."""

    name = "uniform"
    world_refresh = False  # in world mode one forecast per question stands

    def question_plan(self, view: dict) -> Generator[dict, dict, None]:
        """World mode: the uniform forecast for one question."""
        yield forecast_action(uniform_probabilities(list(view["options"])))

    def reset(self, *, seed: int | None = None) -> None:
        return None

    def act(self, observation: str, info: dict) -> dict:
        obs = parse_observation(observation, info)
        return forecast_action(uniform_probabilities(list(obs["options"])))

    async def aact(self, observation: str, info: dict) -> dict:
        return self.act(observation, info)
