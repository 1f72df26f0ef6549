"""The forecasting environment for TRL's `GRPOTrainer(environment_factory=...)` (docs/training.md).

TRL 1.16 builds one environment instance per concurrent rollout, pools them, and calls `reset(**row)` with
the dataset row before each rollout; every public method of the instance's class (inherited ones too), but
`reset` and `get_reward`, becomes a tool whose JSON schema TRL derives from the signature and the docstring;
after the rollout it calls `get_reward()` for the environment's own reward. So `ForecastToolEnv`:

- does not subclass `gymnasium.Env` (whose public `step`, `render`, `close` would become tools); its public
  methods are exactly the environment's tools: `search`, `open_article`, `notebook_add`,
  `notebook_supersede`, `forecast` (typed arguments, Google-style docstrings), plus `reset` and `get_reward`;
- `reset(**row)` ends the previous rollout (recorded) and starts the row's unit on a fresh session: nothing
  carries over from one rollout to the next;
- holds the forecast date: no tool takes a date, so no argument can move it;
- scores through the environment: `get_reward()` closes the unit (the empty report, i.e. the environment's
  uniform fallback, if the model never forecast) and returns minus the Brier of its date (minus the mean
  Brier of an event's scored dates for whole-event rows); tool replies never carry a score.

Rows come from the training export (`forecast_env.eval.runs.export.prompt_rows`): one per (event, forecast date),
with the chat prompt agents see, or (`unit="event"`) one per event, its first date's prompt. Every rollout is
recorded as a part of one run (`engine: trl`, `session: per_date` or `episode`) that `forecast-env report`
reads:

    envs = ForecastTRL("WS", split="train")
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=envs.dataset(),
                          environment_factory=envs)
    trainer.train()
    envs.close()          # consolidates the run: WS/runs/<envs.run_id>/
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forecast_env.adapters.sessions import TrainingRun, UnitResult, UnitSession
from forecast_env.errors import RunError


class ForecastToolEnv:
    """One TRL rollout's environment: the forecasting tools on one (event, forecast date) or one event.

    Built by `ForecastTRL` (the `environment_factory`); reset by TRL with each dataset row."""

    def __init__(self, trun: TrainingRun) -> None:
        self._trun = trun
        self._session: UnitSession | None = None
        self._result: UnitResult | None = None

    def reset(self, **row: Any) -> str | None:
        """Start the row's unit (`event_id`, and `step` for a one-date unit, or the export's `info`); the previous
        rollout, if still open, is closed and recorded first."""
        if self._session is not None:
            self._close()
        event_id, step = _unit_of(row)
        self._session = self._trun.open(event_id, step)
        self._result = None
        return None

    def get_reward(self) -> float:
        """The rollout's reward: minus the Brier of its forecast (the uniform fallback when it made none)."""
        return self._close().reward

    # -- the tools (TRL turns each into a function the model may call) ---------------------------

    def search(self, query: str, k: int | None = None, mode: str | None = None) -> str:
        """Search the news corpus. Only articles published on or before the current forecast date are searched.

        Args:
            query: What to look for, in words.
            k: How many hits to return (default: the environment's search_k).
            mode: Retrieval mode (default: the environment's). (choices: ["hybrid", "dense", "bm25"])

        Returns:
            JSON with the ranked hits (doc_id, day, title, url, summary), or an error.
        """
        return self._call("search", {k_: v for k_, v in (("query", query), ("k", k), ("mode", mode)) if v is not None})

    def open_article(self, doc_id: str) -> str:
        """Read one article (a doc_id from search hits) published on or before the forecast date.

        Args:
            doc_id: The article's doc_id, as a search hit gives it.

        Returns:
            JSON with the article (title, day, body, capped), or an error.
        """
        return self._call("open_article", {"doc_id": doc_id})

    def notebook_add(self, claim: str, date_observed: str, doc_ids: list[str]) -> str:
        """Record one piece of evidence in the notebook.

        Args:
            claim: A short factual claim.
            date_observed: The ISO date of the article the claim comes from.
            doc_ids: The doc_ids of the articles that support it.

        Returns:
            JSON with the new notebook entry, or an error.
        """
        return self._call("notebook_add", {"claim": claim, "date_observed": date_observed, "doc_ids": doc_ids})

    def notebook_supersede(self, entry_id: str, reason: str) -> str:
        """Mark an earlier notebook entry as outdated.

        Args:
            entry_id: The entry's id, as the notebook lists it.
            reason: Why it no longer holds.

        Returns:
            JSON with the superseded entry, or an error.
        """
        return self._call("notebook_supersede", {"entry_id": entry_id, "reason": reason})

    def forecast(self, probabilities: dict[str, float] | list[float]) -> str:
        """Report the forecast for the current date: a probability for every offered option. It ends the date.

        Args:
            probabilities: A mapping from each option label to its probability, or a list aligned with the
                offered options (they should sum to 1).

        Returns:
            JSON with the receipt of the recorded forecast (never its score).
        """
        return self._call("forecast", {"probabilities": probabilities})

    # -- internals --------------------------------------------------------------------------------

    def _call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        if self._session is None:
            return json.dumps({"error": "no rollout is open (reset was not called)"})
        # one-date rows: the prompt holds the question and the date's description, so a reply is the tool's
        # result alone; whole events: the full observation (each new date brings its own description)
        return self._session.call(tool, arguments, compact=self._trun.unit == "date").text

    def _close(self) -> UnitResult:
        if self._session is None:
            if self._result is None:
                raise RunError("get_reward before reset: TRL resets an environment before each rollout")
            return self._result
        session, self._session = self._session, None
        self._result = session.finish()
        return self._result


def _unit_of(row: Mapping[str, Any]) -> tuple[str, int | None]:
    """A dataset row's unit: its `event_id` and `step` columns, or the training export's `info` JSON."""
    event_id, step = row.get("event_id"), row.get("step")
    if event_id is None and row.get("info") is not None:
        info = row["info"] if isinstance(row["info"], Mapping) else json.loads(row["info"])
        event_id, step = info.get("event_id"), info.get("step")
    if not event_id:
        raise RunError("a TRL row needs an event_id (and step) column, or the training export's info; "
                       "build the dataset with ForecastTRL.dataset()")
    return str(event_id), None if step is None else int(step)


def scripted_chat(factory: ForecastTRL, row: Mapping[str, Any], agent: Any,
                  aligned: bool = False) -> list[dict[str, Any]]:
    """A scripted agent's rollout of one row as the chat TRL renders: the row's prompt, an assistant tool call and
    the tool's reply per action, and a closing assistant turn (the warm-start transcripts of docs/training.md).

    The agent (`forecast_env.agents.make_agent(...)`: uniform, base_rate, retrieval) plays through a
    `ForecastToolEnv` of `factory`, so the replies are exactly the ones a model gets, and the rollout is
    recorded in `factory`'s run like any other. `aligned=True` writes each forecast as a list aligned with the
    offered options, rounded to two decimals (the same report up to rounding, and a shorter call for a small model to learn than a mapping)."""
    env = factory()
    env.reset(**row)
    session = env._session
    assert session is not None
    agent.reset(seed=0)
    messages: list[dict[str, Any]] = [dict(m) for m in row["prompt"]]
    for _ in range(int(factory.run.env_config["max_calls_per_date"]) * 4):
        if session.done:
            break
        action = agent.act(session.observation, {})
        tool, args = str(action["tool"]), dict(action.get("args") or {})
        probs = args.get("probabilities")
        if aligned and tool == "forecast" and isinstance(probs, Mapping):
            options = json.loads(session.observation)["options"]
            args["probabilities"] = [round(float(probs.get(o, 0.0)), 2) for o in options]
        reply = getattr(env, tool)(**args) if tool in _TOOLS else env._call(tool, args)
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": args}}]})
        messages.append({"role": "tool", "name": tool, "content": reply})
    env.get_reward()
    messages.append({"role": "assistant", "content": "The forecast is recorded."})
    return messages


_TOOLS = ("search", "open_article", "notebook_add", "notebook_supersede", "forecast")


class ForecastTRL:
    """The `environment_factory` for TRL's `GRPOTrainer`: each call builds a `ForecastToolEnv` on one shared
    run (one searcher, one pool of environments); `dataset()` is the matching training set."""

    def __init__(self, workspace: str | Path, *, split: str = "train", unit: str = "date", label: str = "trl",
                 run_id: str | None = None, env: Mapping[str, Any] | None = None,
                 event_ids: Sequence[str] | None = None) -> None:
        self.workspace = Path(workspace)
        self.unit = unit
        self.run = TrainingRun(workspace, engine="trl", unit=unit, split=split, label=label, run_id=run_id,
                               env=env, event_ids=event_ids)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def run_dir(self) -> Path:
        return self.run.run_dir

    def __call__(self) -> ForecastToolEnv:
        return ForecastToolEnv(self.run)

    def rows(self) -> list[dict[str, Any]]:
        """The training rows: the export's prompt per (event, forecast date) (`unit="event"`: each event's first
        date), with `event_id` and `step` columns for `reset`. The label stays out of the rows."""
        from forecast_env.eval.runs.export import prompt_rows

        wanted = set(self.run.event_ids)
        out, seen = [], set()
        for r in prompt_rows(self.workspace, self.run.split):
            info = json.loads(r["info"])
            if info["event_id"] not in wanted:
                continue
            if self.unit == "event":
                if info["event_id"] in seen:
                    continue
                seen.add(info["event_id"])
            out.append({"prompt": r["prompt"], "event_id": info["event_id"],
                        "step": None if self.unit == "event" else int(info["step"]),
                        "forecast_date": r["forecast_date"]})
        if not out:
            raise RunError(f"no training rows: split {self.run.split!r} has no scheduled dates for these events")
        return out

    def dataset(self) -> Any:
        """`rows()` as a `datasets.Dataset` (what `GRPOTrainer(train_dataset=...)` takes)."""
        from datasets import Dataset

        return Dataset.from_list(self.rows())

    def close(self) -> dict[str, Any]:
        """Consolidate the run (every recorded rollout) and close the shared searcher; returns run.json."""
        return self.run.close()
