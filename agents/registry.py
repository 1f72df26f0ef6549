"""Agents by name: the built-in ones (uniform, base_rate, retrieval, llm), `package.module:Class`, or an
entry point of the `forecast_env.agents` group; the protocol they must follow is in `base.py`."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forecast_env.errors import ForecastEnvError

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
