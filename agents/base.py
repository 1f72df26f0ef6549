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

import inspect
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

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

KNOWN_AGENTS = ("uniform", "base_rate", "retrieval", "llm")


def make_agent(name: str, workspace: str | Path | None = None, config: dict | None = None, *,
               split: str | None = None, world: bool = False, **kwargs: Any):
    """Build an agent by name: uniform, base_rate (needs `workspace`), retrieval, llm.

    `config` is the benchmark config (or just its `llm` / `retrieval` section); `kwargs` override
    single keys of the agent's section (e.g. `model=...`, `base_url=...`). `split` is the split the
    agent will be evaluated on (None: eval); base_rate fits on the other one and refuses `all`.
    `world=True` builds the agent for `ForecastWorldEnv`: an agent that researches one question at
    a time (`question_plan`: the baselines) plays inside a `WorldPlayer`; the others (the LLM agent,
    your own) play world mode themselves.
    """
    agent = _build_agent(name, workspace, config, split, **kwargs)
    if world and hasattr(agent, "question_plan"):
        from forecast_env.agents.world import WorldPlayer

        return WorldPlayer(agent)
    return agent


def _build_agent(name: str, workspace: str | Path | None, config: dict | None, split: str | None, **kwargs: Any):
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
    cls = agent_class(name)
    accepted = inspect.signature(cls).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    offered = {"workspace": workspace, "config": config, "split": split}
    extra = {k: v for k, v in offered.items() if takes_any or k in accepted}
    try:
        agent = cls(**extra, **kwargs)
    except TypeError as exc:
        raise ForecastEnvError(f"agent {name!r}: its constructor refused the arguments "
                               f"{sorted({*extra, *kwargs})}: {exc}") from exc
    if not getattr(agent, "name", None):
        agent.name = name
    return agent


#: Entry-point group under which installed packages register agents (`name = "package.module:Class"`).
ENTRY_POINT_GROUP = "forecast_env.agents"


def agent_class(name: str) -> type:
    """The class behind an agent that is not built in: `package.module:Class`, or an entry point of the
    `forecast_env.agents` group. It must follow the Agent or AsyncAgent protocol (`reset`, and `act` or
    `aact`); anything else is a ForecastEnvError saying what is missing."""
    from importlib import import_module
    from importlib.metadata import entry_points

    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            module = import_module(module_name)
        except ImportError as exc:
            raise ForecastEnvError(f"agent {name!r}: cannot import module {module_name!r} ({exc}); is it on "
                                   "PYTHONPATH or installed?") from exc
        cls = getattr(module, attr, None)
        if cls is None:
            raise ForecastEnvError(f"agent {name!r}: module {module_name!r} has no attribute {attr!r}")
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            installed = sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
            raise ForecastEnvError(f"unknown agent {name!r}; built in: {', '.join(KNOWN_AGENTS)}"
                                   + (f"; installed: {', '.join(installed)}" if installed else "")
                                   + "; or give your own as package.module:Class")
        cls = found[0].load()
    if not isinstance(cls, type):
        raise ForecastEnvError(f"agent {name!r} is a {type(cls).__name__}, not a class")
    missing = [m for m in ("reset",) if not callable(getattr(cls, m, None))]
    if not (callable(getattr(cls, "act", None)) or callable(getattr(cls, "aact", None))):
        missing.append("act (or async aact)")
    if missing:
        raise ForecastEnvError(f"agent {name!r} does not follow the agent protocol: it lacks "
                               f"{' and '.join(missing)} (see forecast_env.agents.base.Agent)")
    return cls


def is_async_agent(name: str) -> bool:
    """Whether agents built by this name await their actions (they run as asyncio tasks in the runner)."""
    if name in KNOWN_AGENTS:
        return name == "llm"
    cls = agent_class(name)
    return callable(getattr(cls, "aact", None)) and not callable(getattr(cls, "act", None))


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
