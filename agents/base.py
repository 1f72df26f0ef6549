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
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from forecast_env.errors import EndpointError, ForecastEnvError

#: The keys of an observation (docs/design.md §5).
OBS_KEYS = ("question", "description", "options", "forecast_date", "step", "steps_total", "tool_result",
            "error", "notebook", "budget_left")


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
    for key in OBS_KEYS:
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

KNOWN_AGENTS = ("uniform", "base_rate", "retrieval", "llm")


def make_agent(name: str, workspace: str | Path | None = None, config: dict | None = None, *,
               split: str | None = None, **kwargs: Any):
    """Build an agent by name: uniform, base_rate (needs `workspace`), retrieval, llm.

    `config` is the benchmark config (or just its `llm` / `retrieval` section); `kwargs` override
    single keys of the agent's section (e.g. `model=...`, `base_url=...`). `split` is the split the
    agent will be evaluated on (None: eval); base_rate fits on the other one and refuses `all`.
    """
    if name == "uniform":
        from forecast_env.agents.uniform import UniformAgent

        return UniformAgent()
    if name == "base_rate":
        from forecast_env.agents.base_rate import BaseRateAgent

        if workspace is None:
            raise ForecastEnvError("agent 'base_rate' needs a workspace (its train events give the rates); "
                                   "pass workspace=WS")
        return BaseRateAgent.from_workspace(workspace, split)
    if name == "retrieval":
        from forecast_env.agents.retrieval import RetrievalAgent

        return RetrievalAgent(config=_section(config, "retrieval"), **kwargs)
    if name == "llm":
        from forecast_env.agents.llm import LLMAgent

        return LLMAgent(config=_section(config, "llm"), **kwargs)
    raise ForecastEnvError(f"unknown agent {name!r}; known agents: {', '.join(KNOWN_AGENTS)}")


def _section(config: Mapping[str, Any] | None, section: str) -> dict[str, Any] | None:
    if config is None:
        return None
    if section in config and isinstance(config[section], Mapping):
        return dict(config[section])
    return dict(config)


# ---------------------------------------------------------------------------------------------
# driver loops
# ---------------------------------------------------------------------------------------------


def _skip(env: Any, reason: str) -> tuple[Any, float, bool, bool, dict] | None:
    """Mark the current date missing; returns the env's next transition when it gives one."""
    out = env.unwrapped.skip_date(reason)
    if isinstance(out, tuple) and len(out) == 5:
        return out  # type: ignore[return-value]
    if isinstance(out, tuple) and len(out) == 2:
        obs, info = out
        return obs, 0.0, bool(info.get("terminated", False)), False, info
    raise ForecastEnvError(
        "env.unwrapped.skip_date returned no transition; expected (obs, reward, terminated, truncated, info)"
    )


class _Episode:
    """The bookkeeping shared by the sync and async driver loops: reset, apply one action (or a
    failed agent call), and the summary at the end."""

    def __init__(self, env: Any, agent: Any, seed: int | None, event_id: str | None, max_actions: int) -> None:
        agent.reset(seed=seed)
        options = {"event_id": event_id} if event_id is not None else None
        self.env, self.event_id, self.max_actions = env, event_id, max_actions
        self.obs, self.info = env.reset(seed=seed, options=options)
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
                max_actions: int = 100_000) -> dict:
    """Play one episode with a sync agent; an `EndpointError` marks that date missing and goes on."""
    ep = _Episode(env, agent, seed, event_id, max_actions)
    while ep.running:
        try:
            action = agent.act(ep.obs, ep.info)
        except EndpointError as exc:
            ep.apply(failure=exc)
        else:
            ep.apply(action)
    return ep.summary()


async def arun_episode(env: Any, agent: Any, seed: int | None = None, event_id: str | None = None,
                       max_actions: int = 100_000) -> dict:
    """Play one episode with an async agent (`aact`), else a sync one (`act`)."""
    ep = _Episode(env, agent, seed, event_id, max_actions)
    has_aact = hasattr(agent, "aact")
    while ep.running:
        try:
            action = await agent.aact(ep.obs, ep.info) if has_aact else agent.act(ep.obs, ep.info)
        except EndpointError as exc:
            ep.apply(failure=exc)
        else:
            ep.apply(action)
    return ep.summary()
