"""Agents that play `ForecastEnv`: uniform, base_rate, retrieval (non-LLM baselines) and llm.

    from forecast_env.agents import make_agent, run_episode
    agent = make_agent("retrieval")
    result = run_episode(env, agent, seed=0, event_id="pm-123")
"""

from forecast_env.agents.base import Agent, AsyncAgent, arun_episode, parse_observation, run_episode
from forecast_env.agents.registry import KNOWN_AGENTS, make_agent

__all__ = ["KNOWN_AGENTS", "Agent", "AsyncAgent", "arun_episode", "make_agent", "parse_observation", "run_episode"]
