"""The agent protocol, the registry of agents, and small driver loops over one episode.

An agent sees the environment's observation (a JSON string) and `info` (the same content,
structured, plus `tool_specs`) and returns one action per env step: `{"tool": name, "args": {...}}`,
optionally with `"telemetry"` (prompt/completion tokens, latency, cost) that the environment
records on the tool-call row. `reset(seed=...)` is called at every episode start.

An agent that raises `EndpointError` (an LLM endpoint down after retries) does not get a uniform
forecast for that date: the driver calls `env.unwrapped.skip_date(reason)` and the date's report is
*missing* (recorded, never scored).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from forecast_env.crashpoints import crash_point
from forecast_env.errors import EndpointError, ForecastEnvError

#: The keys of an observation (docs/design.md §5).
OBS_KEYS = ("question", "description", "options", "forecast_date", "step", "steps_total", "tool_result",
            "error", "notebook", "budget_left")
#: The keys of a world-mode observation (docs/design.md §5 "World mode").
WORLD_OBS_KEYS = ("date", "day", "days_total", "questions", "questions_page", "standing", "tool_result", "error",
                  "notebook", "budget_left", "message")


@runtime_checkable
class Agent(Protocol):
    """A synchronous agent: one action per env step."""

    name: str

    def reset(self, *, seed: int | None = None) -> None: ...

    def act(self, observation: str, info: dict) -> dict: ...


@runtime_checkable
class AsyncAgent(Protocol):
    """An agent whose `aact` awaits (LLM calls), so many episodes can run concurrently."""

    name: str

    def reset(self, *, seed: int | None = None) -> None: ...

    async def aact(self, observation: str, info: dict) -> dict: ...


def parse_observation(observation: str | Mapping[str, Any], info: Mapping[str, Any] | None = None) -> dict:
    """The observation as a dict; the structured fields of `info` win over the (capped) text."""
    out: dict[str, Any] = {}
    if isinstance(observation, Mapping):
        out.update(observation)
    elif isinstance(observation, str):
        try:
            parsed = json.loads(observation)
        except (json.JSONDecodeError, ValueError):
            parsed = None
        if isinstance(parsed, dict):
            out.update(parsed)
    for key in (*OBS_KEYS, *WORLD_OBS_KEYS):
        if info and key in info:
            out[key] = info[key]
    out.setdefault("options", [])
    out.setdefault("notebook", [])
    return out


def forecast_action(probabilities: Mapping[str, float] | list[float]) -> dict:
    """The `forecast` action for a probability mapping (or a list aligned with the options)."""
    probs = dict(probabilities) if isinstance(probabilities, Mapping) else list(probabilities)
    return {"tool": "forecast", "args": {"probabilities": probs}}


def uniform_probabilities(options: list[str]) -> dict[str, float]:
    """The uniform forecast over `options` (empty when there are none)."""
    return {o: 1.0 / len(options) for o in options} if options else {}


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------

def _skip(env: Any, reason: str) -> tuple[Any, float, bool, bool, dict]:
    """Mark the current date missing; returns the env's next transition (an error when it gives none)."""
    out = env.unwrapped.skip_date(reason)
    if isinstance(out, tuple) and len(out) == 5:
        return out
    if isinstance(out, tuple) and len(out) == 2:
        obs, info = out
        return obs, 0.0, bool(info.get("terminated", False)), False, info
    raise ForecastEnvError(
        "env.unwrapped.skip_date returned no transition; expected (obs, reward, terminated, truncated, info)"
    )


class _Episode:
    """The bookkeeping shared by the sync and async driver loops: reset, apply one action (or a
    failed agent call), and the summary at the end."""

    def __init__(self, env: Any, agent: Any, seed: int | None, event_id: str | None, max_actions: int,
                 rollout: int | None = None) -> None:
        agent.reset(seed=seed)
        options: dict[str, Any] = {} if event_id is None else {"event_id": event_id}
        if rollout is not None:
            options["rollout"] = int(rollout)
        self.env, self.event_id, self.max_actions = env, event_id, max_actions
        self.obs, self.info = env.reset(seed=seed, options=options or None)
        self.rewards: list[float] = []
        self.skipped: list[str] = []
        self.actions = 0
        self.done = False

    @property
    def running(self) -> bool:
        return not self.done and self.actions < self.max_actions

    def apply(self, action: Any = None, failure: EndpointError | None = None) -> None:
        """Step the env with `action`, or mark the date missing when the agent's endpoint failed."""
        if failure is not None:
            self.skipped.append(str(parse_observation(self.obs, self.info).get("forecast_date")))
            self.obs, reward, terminated, truncated, self.info = _skip(self.env, str(failure))
        else:
            self.obs, reward, terminated, truncated, self.info = self.env.step(action)
            self.actions += 1
        self.rewards.append(float(reward))
        self.done = bool(terminated or truncated)

    def summary(self) -> dict:
        return {
            "event_id": self.info.get("event_id", self.event_id),
            "return": float(sum(self.rewards)),
            "n_actions": self.actions,
            "skipped": self.skipped,
            "scores": self.info.get("scores"),
            "final_info": self.info,
        }


def run_episode(env: Any, agent: Any, seed: int | None = None, event_id: str | None = None,
                max_actions: int = 100_000, rollout: int | None = None) -> dict:
    """Play one episode with a sync agent; an `EndpointError` marks that date missing and goes on.
    `rollout` numbers the episode's rows (passed to the env's `reset` options; None: the env keeps its own)."""
    ep = _Episode(env, agent, seed, event_id, max_actions, rollout)
    while ep.running:
        try:
            action = agent.act(ep.obs, ep.info)
        except EndpointError as exc:
            ep.apply(failure=exc)
        else:
            ep.apply(action)
        crash_point("run.step")
    return ep.summary()


async def arun_episode(env: Any, agent: Any, seed: int | None = None, event_id: str | None = None,
                       max_actions: int = 100_000, rollout: int | None = None) -> dict:
    """Play one episode with an async agent (`aact`), else a sync one (`act`); `rollout` as for `run_episode`."""
    ep = _Episode(env, agent, seed, event_id, max_actions, rollout)
    has_aact = hasattr(agent, "aact")
    while ep.running:
        try:
            action = await agent.aact(ep.obs, ep.info) if has_aact else agent.act(ep.obs, ep.info)
        except EndpointError as exc:
            ep.apply(failure=exc)
        else:
            ep.apply(action)
    return ep.summary()
