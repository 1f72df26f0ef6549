"""envs/base.py: a third mode that implements only BaseEnv's hooks gets the whole step() contract (error
ladder, call rows, budget, final reward and info, refusal after the end, skip_date)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forecast_env.envs import tools
from forecast_env.envs.base import ERROR_KINDS, BaseEnv
from forecast_env.errors import ForecastEnvError


class CountingEnv(BaseEnv):
    """Three dates; `notebook_supersede` stands in for a tool that fails (entry 1: a refusal, 2: a bug)."""

    TOOL_NAMES = ("notebook_supersede", "forecast")
    OVER_MESSAGE = "counting is over"
    BUDGET = 3

    def __init__(self, tmp: Any, reward_mode: str = "episode") -> None:
        self._configure(tmp, None, None, {"reward_mode": reward_mode})
        self._hold_searcher(None)
        self._calls, self._call_index, self._done, self._t = 0, -1, False, 0
        self._forecasts: list[dict[str, Any]] = []
        self._tool_calls: list[dict[str, Any]] = []
        self._steps: list[dict[str, Any]] = []
        self.budget_spent: list[int] = []

    def _finished(self) -> bool:
        return self._done

    def _call_step(self) -> int:
        return self._t + 1

    def _row_id(self) -> str:
        return "counting"

    def _run_tool(self, tool: str, args: dict[str, Any]) -> tuple[Any, float, str | None]:
        if tool == "notebook_supersede":
            if args["entry_id"] == 1:
                raise ForecastEnvError("entry 1 is refused")
            raise RuntimeError("a bug")
        return {"recorded": True}, self._end_date(0.25), "next date"

    def _end_date(self, brier: float | None) -> float:
        self._forecasts.append({"step": self._t + 1, "brier": brier, "missing": brier is None})
        self._t, self._calls = self._t + 1, 0
        self._done = self._t >= 3
        return -brier if brier is not None and self.config["reward_mode"] == "step" else 0.0

    def _spend_budget(self, tool: str | None, ok: bool, reward: float, message: str | None) -> tuple[float, str | None]:
        if (ok and tool == "forecast") or self._calls < self.BUDGET:
            return reward, message
        self.budget_spent.append(self._t + 1)
        return self._end_date(1.0), "budget spent"

    def _skip(self, reason: str) -> tuple[float, str | None]:
        self._end_date(None)
        return 0.0, f"skipped: {reason}"

    def _observe(self, result: Any, error: str | None, message: str | None, kind: str | None) -> tuple[str, dict]:
        content = {"t": self._t, "tool_result": result, "error": error, "message": message}
        return json.dumps(content), {**content, "error_kind": kind, "terminated": self._done}

    def _final_info(self) -> dict[str, Any]:
        return {"scores": [r["brier"] for r in self._forecasts]}


def test_the_error_ladder_and_call_rows(tmp_path):
    env = CountingEnv(tmp_path)
    kinds = [env.step(a)[4]["error_kind"] for a in (
        "not json", {"tool": "search", "args": {"query": "x"}},  # not one of this mode's tools
        {"tool": "notebook_supersede", "args": {"entry_id": 1, "reason": "r"}},
        {"tool": "notebook_supersede", "args": {"entry_id": 2, "reason": "r"}})]
    assert kinds == ["invalid_action", "invalid_action", "tool_failed", "internal"]
    assert set(kinds) <= set(ERROR_KINDS)
    # the budget (3 calls) ran out on the third call: that date got its fallback and the clock moved on
    assert env.budget_spent == [1] and env._forecasts[0]["brier"] == 1.0
    rows = env._tool_calls
    assert [r["step"] for r in rows] == [1, 1, 1, 2] and [r["call_index"] for r in rows] == [0, 1, 2, 3]
    assert {r["event_id"] for r in rows} == {"counting"} and rows[2]["error"].startswith("notebook_supersede failed")
    assert "unknown tool 'search'" in rows[1]["error"]


def test_the_end_final_reward_info_and_refusal(tmp_path):
    env = CountingEnv(tmp_path)
    out = [env.step({"tool": "forecast", "args": {"probabilities": {"a": 1}}}) for _ in range(2)]
    assert [o[2] for o in out] == [False, False] and [o[1] for o in out] == [0.0, 0.0]
    obs, reward, terminated, truncated, info = env.skip_date("endpoint down")
    assert terminated and not truncated and info["scores"] == [0.25, 0.25, None]
    assert reward == pytest.approx(-0.25)  # episode mode: minus the mean Brier of the scored rows
    assert json.loads(obs)["message"] == "skipped: endpoint down" and env._tool_calls[-1]["tool"] == "skip_date"
    assert [s["terminated"] for s in env._steps] == [False, False, True]
    assert env._steps[-1]["action"] == {"skip_date": "endpoint down"}
    again = env.step({"tool": "forecast", "args": {"probabilities": {}}})
    assert again[2] and again[4]["error"] == "counting is over" and again[4]["error_kind"] == "invalid_action"
    assert env.skip_date("late")[4]["error"] == "counting is over"
    assert len(env._tool_calls) == 3  # nothing after the end is recorded


def test_step_mode_rewards(tmp_path):
    env = CountingEnv(tmp_path, reward_mode="step")
    rewards = [env.step({"tool": "forecast", "args": {"probabilities": {}}})[1] for _ in range(3)]
    assert rewards == [-0.25, -0.25, -0.25]


def test_arguments_are_checked_through_the_hook(tmp_path):
    env = CountingEnv(tmp_path)
    info = env.step({"tool": "forecast", "args": {"probabilities": {}, "as_of": "2099-01-01"}})[4]
    assert info["error_kind"] == "invalid_action" and "cannot be changed" in info["error"]
    assert env._check_args(tools.ParsedAction("forecast", {"probabilities": [0.5]})) == {"probabilities": [0.5]}
