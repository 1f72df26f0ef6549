"""The base of every environment mode (docs/design.md §5): the searcher behind the retrieval tools,
and `step()` / `skip_date()` as template methods, so that a mode adds its tools and nothing else.

What `step(action)` does, in every mode: refuse a step after the end; count the call; parse the
action against the mode's tools (`TOOL_NAMES`) and check its arguments; run the tool (`_run_tool`);
turn an invalid action, a refused tool call or an internal error into an error observation (never an
exception, `info["error_kind"]` one of `ERROR_KINDS`); record the call's row; let the mode charge
the call budget (`_spend_budget`: a spent budget ends the date or the day); observe; at the end of
the episode, the final reward and the mode's final info. `skip_date(reason)` records the call,
lets the mode mark what was due missing (`_skip`), and observes the same way.

The hooks a mode implements:

    _finished() -> bool                       no episode in progress (step() refuses)
    _check_args(parsed) -> dict               (optional) the arguments checked; default: `tools.check_args`
    _call_step() -> int                       the step number a call's row carries
    _row_id() -> str                          the id rows carry (the event id, the world id)
    _run_tool(tool, args) -> (result, reward, message)
    _spend_budget(tool, ok, reward, message) -> (reward, message)   after every call
    _skip(reason) -> (reward, message)
    _observe(result, error, message, kind) -> (obs, info)
    _final_info() -> dict                     merged into the last step's info

and the state they share: `config`, `rollout`, `_calls`, `_call_index`, `_done`, `_forecasts`,
`_tool_calls`, `_steps`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
import numpy as np

from forecast_env.config import load_config
from forecast_env.envs import tools
from forecast_env.envs.notebook import NotebookError
from forecast_env.envs.records import jsonable, tool_call_row
from forecast_env.errors import ConfigError, ForecastEnvError

if TYPE_CHECKING:
    from forecast_env.retrieval import Searcher

log = logging.getLogger(__name__)

#: `info["error_kind"]` values: the agent sent something invalid, a tool refused a valid request
#: (an error of this project's hierarchy), or the environment itself failed (a bug: never expected).
ERROR_KINDS = ("invalid_action", "tool_failed", "internal")

Transition = tuple[str, float, bool, bool, dict]


class BaseEnv(gym.Env):
    """The shared machinery of the environments (see the module docstring).

    The searcher is opened at the first search with the hide set of the env config (`hidden`) and
    closed by `close()`. A searcher passed in belongs to the caller and must hide exactly that set (a
    ConfigError names both otherwise), so the configuration a run records is what its agents saw.
    """

    #: The tools this mode accepts (`tools.TOOL_NAMES`, `tools.WORLD_TOOL_NAMES`, ...).
    TOOL_NAMES: ClassVar[tuple[str, ...]] = tools.TOOL_NAMES
    #: Whether the arguments follow world mode's specs (`tools.WORLD_ARGS`).
    WORLD_ARGS: ClassVar[bool] = False
    #: The error a step after the end gets.
    OVER_MESSAGE: ClassVar[str] = "the episode is over; call reset() to start the next one"

    workspace: Path
    split: str
    config: dict[str, Any]
    rollout: int = 0
    hidden: tuple[str, ...] = ()
    _searcher: Searcher | None = None
    _owns_searcher: bool = False
    _calls: int
    _call_index: int
    _done: bool
    _forecasts: list[dict[str, Any]]
    _tool_calls: list[dict[str, Any]]
    _steps: list[dict[str, Any]]

    # -- construction -----------------------------------------------------------------------------

    def _configure(self, workspace: str | Path, split: str | None, config: Mapping[str, Any] | None,
                   overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Load the env config (`config`, then `overrides`, then `split`) and check what every mode needs."""
        merged = dict(config or {})
        merged.update(overrides)
        if split is not None:
            merged["split"] = split
        self.config = cfg = load_config("env", overrides=merged)
        if cfg["max_observation_chars"] < 1000:
            raise ForecastEnvError(f"env.max_observation_chars = {cfg['max_observation_chars']} is too small; "
                                   "use at least 1000")
        self.workspace = Path(workspace)
        self.split = cfg["split"]
        return cfg

    def _hold_searcher(self, searcher: Searcher | None) -> None:
        """Take the caller's searcher (checked against the config's hide set), or none yet."""
        self.hidden = tools.hidden_set(self.config)
        if searcher is not None and set(searcher.hidden) != set(self.hidden):
            keys = ", ".join(f"env.{key}={str(bool(self.config[key])).lower()}" for key in tools.HIDE_KEYS.values())
            raise ConfigError(
                f"the searcher passed in hides {list(searcher.hidden)}, but {keys} hide {list(self.hidden)}; "
                f"open it with Searcher.open(workspace, hide={list(self.hidden)}), or pass no searcher")
        self._searcher, self._owns_searcher = searcher, False

    @property
    def searcher(self) -> Searcher:
        """The retrieval backend (opened on first use, hiding `hidden`)."""
        if self._searcher is None:
            from forecast_env.retrieval import Searcher

            self._searcher = Searcher.open(self.workspace, hide=self.hidden)
            self._owns_searcher = True
        return self._searcher

    def close(self) -> None:
        """Close the searcher this environment opened (a searcher passed in belongs to the caller)."""
        if self._owns_searcher and self._searcher is not None:
            self._searcher.close()
            self._searcher = None
        super().close()

    # -- the template methods ---------------------------------------------------------------------

    def step(self, action: Any) -> Transition:
        if self._finished():
            return self._over()
        started = time.perf_counter()
        self._calls += 1
        self._call_index += 1
        call_step = self._call_step()  # a call may end the date: its row belongs to the one it was made on
        result, error, kind, tool, args, telemetry = None, None, None, None, None, {}
        reward, message = 0.0, None
        try:
            parsed = tools.parse_action(action, self.config["max_action_chars"], self.TOOL_NAMES)
            tool, telemetry, args = parsed.tool, parsed.telemetry, parsed.args
            args = self._check_args(parsed)
            result, reward, message = self._run_tool(tool, args)
        except (tools.ActionError, NotebookError) as exc:
            error, kind = str(exc), "invalid_action"
        except ForecastEnvError as exc:
            error, kind = f"{tool or 'action'} failed: {exc}", "tool_failed"
        except Exception as exc:  # a bug: the agent still gets an observation, info says "internal"
            log.error("tool %s raised on agent input", tool, exc_info=True)
            error = f"{tool or 'action'} failed: internal error {type(exc).__name__}: {str(exc)[:200]}"
            kind = "internal"
        self._record_call(tool, args, result, error, (time.perf_counter() - started) * 1000.0, telemetry,
                          step=call_step)
        reward, message = self._spend_budget(tool, error is None, reward, message)
        return self._transition(jsonable(action, self.config["max_action_chars"]), result, error, message, kind,
                                reward)

    def skip_date(self, reason: str) -> Transition:
        """Record what is due now as *missing* (the player's infrastructure failed; never scored) and move on:
        the current forecast date in episode mode, today in world mode."""
        if self._finished():
            return self._over()
        reason = str(reason)[:1000]
        self._call_index += 1
        self._record_call("skip_date", {"reason": reason}, None, reason, 0.0, {})
        reward, message = self._skip(reason)
        return self._transition({"skip_date": reason}, None, None, message, None, reward)

    def _over(self) -> Transition:
        obs, info = self._observe(None, self.OVER_MESSAGE, None, "invalid_action")
        return obs, 0.0, self._done, False, info

    def _transition(self, action: Any, result: Any, error: str | None, message: str | None, kind: str | None,
                    reward: float) -> Transition:
        """Observe, close the episode when it is over (final reward and info), and record the step."""
        obs, info = self._observe(result, error, message, kind)
        if self._done:
            reward = self._final_reward(reward)
            info.update(self._final_info())
        self._steps.append({"observation": obs, "action": action, "reward": reward, "terminated": self._done})
        return obs, reward, self._done, False, info

    def _record_call(self, tool: str | None, args: Any, result: Any, error: str | None, elapsed_ms: float,
                     telemetry: Mapping[str, float | None], step: int | None = None) -> None:
        self._tool_calls.append(tool_call_row(
            event_id=self._row_id(), rollout=self.rollout, step=self._call_step() if step is None else step,
            call_index=self._call_index, tool=tool, args=args, result=result, error=error,
            elapsed_ms=elapsed_ms, telemetry=telemetry))

    def _final_reward(self, step_reward: float) -> float:
        """The last step's reward: the step-mode reward, or minus the mean Brier of the scored rows."""
        if self.config["reward_mode"] == "step":
            return step_reward
        briers = [r["brier"] for r in self._forecasts if not r["missing"]]
        return -float(np.mean(briers)) if briers else 0.0

    # -- the hooks --------------------------------------------------------------------------------

    def _check_args(self, parsed: tools.ParsedAction) -> dict[str, Any]:
        """The checked, completed arguments of a parsed call (ActionError when they do not fit its spec)."""
        return tools.check_args(parsed, self.config["max_k"], self.config["search_k"], self.config["search_mode"],
                                world=self.WORLD_ARGS)

    def _finished(self) -> bool:
        raise NotImplementedError

    def _call_step(self) -> int:
        raise NotImplementedError

    def _row_id(self) -> str:
        raise NotImplementedError

    def _run_tool(self, tool: str, args: dict[str, Any]) -> tuple[Any, float, str | None]:
        raise NotImplementedError

    def _spend_budget(self, tool: str | None, ok: bool, reward: float, message: str | None) -> tuple[float, str | None]:
        raise NotImplementedError

    def _skip(self, reason: str) -> tuple[float, str | None]:
        raise NotImplementedError

    def _observe(self, result: Any, error: str | None, message: str | None, kind: str | None) -> tuple[str, dict]:
        raise NotImplementedError

    def _final_info(self) -> dict[str, Any]:
        raise NotImplementedError
