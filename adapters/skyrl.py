"""The forecasting environment as a SkyRL-gym `BaseTextEnv`: whole episodes over many turns (docs/training.md).

Importing this module registers `forecast-env` with skyrl-gym, so `skyrl_gym.make("forecast-env",
env_config={"workspace": WS, "split": "train"}, extras={"event_id": ...})` (or SkyRL's trainer with
`environment.env_class=forecast-env`) builds one. An episode is one whole event, played over many turns:

- `init(prompt)` starts the event on a pooled environment (`adapters/sessions.py`; one run and one shared
  searcher per process and configuration) and returns the chat: the given prompt (e.g. the training export's
  first-date prompt) or, when it is empty, the packaged system prompt and the environment's first
  observation, followed by how to call a tool.
- `step(action)` reads the model's text: the last `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
  block (or a bare JSON tool call) is one action of the environment; text without one is the environment's
  invalid action (an error observation that counts against the date's budget). The observation goes back as
  a user message. Each `forecast` moves to the next date; the episode ends after the last date's forecast, or
  after `max_turns` turns (the dates left get the empty report, the environment's uniform fallback).
- Reward: 0 on every turn but the last, whose reward is minus the mean Brier over the event's scored dates
  (the environment's episode reward); no score appears in any observation.

Every episode is recorded as a part of one run (`engine: skyrl`, `unit: event`, `session: episode`); call
`close_runs()` when training ends to consolidate them (`forecast-env report` reads the run).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
from skyrl_gym.envs.registration import register, registry

from forecast_env.adapters.sessions import TrainingRun, UnitSession
from forecast_env.errors import RunError

#: The id this environment is registered under in skyrl-gym.
ENV_ID = "forecast-env"
#: Turns an episode may take by default (every date's tool calls and forecast).
DEFAULT_MAX_TURNS = 64

TOOL_CALL_HELP = ("Call one tool per turn, as <tool_call>{\"name\": TOOL, \"arguments\": {...}}</tool_call>. "
                  "Tools: search(query, k, mode), open_article(doc_id), notebook_add(claim, date_observed, doc_ids), "
                  "notebook_supersede(entry_id, reason), forecast(probabilities). Each forecast ends its date; the "
                  "episode ends after the last date's forecast.")
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)

_RUNS: dict[str, TrainingRun] = {}
_RUNS_LOCK = threading.Lock()


def _config(env_config: Any) -> dict[str, Any]:
    """The env_config as a plain dict (SkyRL passes an OmegaConf DictConfig; its `forecast_env` section, if
    any, holds ours)."""
    if env_config is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(env_config, DictConfig):
            env_config = OmegaConf.to_container(env_config, resolve=True)
    except ImportError:
        pass
    cfg = dict(env_config)
    return dict(cfg.get("forecast_env") or cfg)


def shared_run(env_config: Any) -> TrainingRun:
    """This process's run for an env_config (workspace, split, run_id, label, env overrides, event_ids)."""
    cfg = _config(env_config)
    if not cfg.get("workspace"):
        raise RunError("the forecast-env SkyRL environment needs env_config.workspace (the workspace to play)")
    key = json.dumps({k: cfg.get(k) for k in ("workspace", "split", "run_id", "label", "env", "event_ids")},
                     sort_keys=True, default=str)
    with _RUNS_LOCK:
        trun = _RUNS.get(key)
        if trun is None or trun._closed:
            trun = _RUNS[key] = TrainingRun(cfg["workspace"], engine="skyrl", unit="event",
                                            split=cfg.get("split", "train"), label=cfg.get("label", "skyrl"),
                                            run_id=cfg.get("run_id"), env=cfg.get("env"),
                                            event_ids=cfg.get("event_ids"))
        return trun


def close_runs() -> list[dict[str, Any]]:
    """Consolidate every run this process recorded into; returns their records."""
    with _RUNS_LOCK:
        runs = list(_RUNS.values())
        _RUNS.clear()
    return [r.close() for r in runs]


def parse_tool_call(text: str) -> Any:
    """The action in a model's turn: its last `<tool_call>` block (JSON), else the whole text (the environment
    judges it: a JSON tool call, or an invalid action)."""
    blocks = _TOOL_CALL.findall(text or "")
    payload = blocks[-1] if blocks else (text or "").strip()
    try:
        return json.loads(payload)
    except (json.JSONDecodeError, ValueError):
        return payload  # not JSON: the environment's invalid action, with its message


class ForecastTextEnv(BaseTextEnv):
    """One whole forecasting episode (an event over its forecast dates) for SkyRL-gym, over many turns."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        extras = dict(extras or {})
        info = extras.get("extra_info") or {}
        if isinstance(info, str):
            info = json.loads(info)
        self.event_id = extras.get("event_id") or info.get("event_id")
        if not self.event_id:
            raise RunError("a forecast-env SkyRL row needs extras.event_id (or extra_info.event_id)")
        self.max_turns = int(extras.get("max_turns") or info.get("max_turns") or DEFAULT_MAX_TURNS)
        self._trun = shared_run(env_config)
        self._session: UnitSession | None = None
        self.reward: float | None = None

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Start the event; returns the chat the model starts from and metadata (event, rollout, run)."""
        self._session = self._trun.open(str(self.event_id))
        if prompt:
            chat = [dict(m) for m in prompt]
            chat[-1] = {**chat[-1], "content": f"{chat[-1]['content']}\n\n{TOOL_CALL_HELP}"}
        else:
            from forecast_env.agents.llm import system_prompt

            chat = [{"role": "system", "content": system_prompt()},
                    {"role": "user", "content": f"A new forecasting episode starts. {TOOL_CALL_HELP}\n"
                                                f"{self._session.observation}"}]
        return chat, {"event_id": self.event_id, "rollout": self._session.rollout, "run_id": self._trun.run_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One turn: play the tool call in the model's text; the observation comes back as a user message."""
        session = self._session
        if session is None:
            raise RunError("step before init: SkyRL calls init(prompt) first")
        self.turns += 1
        reply = session.act(parse_tool_call(action))
        done = reply.done or self.turns >= self.max_turns
        if not done:
            return BaseTextEnvStepOutput(observations=[{"role": "user", "content": reply.observation}], reward=0.0,
                                         done=False, metadata={"error": reply.error})
        result = session.finish()
        self.reward = result.reward
        return BaseTextEnvStepOutput(observations=[], reward=result.reward, done=True,
                                     metadata={"event_id": self.event_id, "rollout": result.rollout,
                                               "turns": self.turns, "out_of_turns": not reply.done})

    def close(self) -> None:
        """An episode left before its end is recorded incomplete (its unplayed dates missing)."""
        session, self._session = self._session, None
        if session is not None and session.result is None:
            session.abandon("the SkyRL episode closed before its end")

    def get_metrics(self) -> dict[str, Any]:
        return {"turns": self.turns, "reward": self.reward if self.reward is not None else 0.0}


if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="forecast_env.adapters.skyrl:ForecastTextEnv")
