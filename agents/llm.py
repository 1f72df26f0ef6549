"""The LLM agent: any OpenAI-compatible chat-completions endpoint with tool calling (httpx).

One session per forecast date (docs/design.md §5): each date (each world day) starts a fresh chat
from the system prompt (`prompts/system.md`) and that date's observation as a user message; nothing
of an earlier date's chat is sent again, so what the model carries over is the notebook in the
observation (memory on) and nothing else. `self.sessions` keeps every session's transcript and
`self.messages` all of them in order (for trajectory export; each session opens with its system
message). The environment's tool specs go
out as `tools`; the model's tool calls become env actions, one per env step (several calls in one
response are queued), and each result returns as a role "tool" message with its `tool_call_id`.
A model that answers in text is read by `parse.parse_forecast`; an unreadable answer gets one
corrective user message, then the empty forecast `{}` (the env's uniform fallback).

Every action carries `telemetry` (prompt/completion tokens from `usage`, latency, cost from the
`prices_per_million` table) for the requests that produced it. Requests are retried with
exponential backoff on 429, 5xx, timeouts, connection errors and malformed responses; after
`max_retries` the agent raises `EndpointError` and the driver marks the date *missing*.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import deque
from collections.abc import Mapping
from importlib import resources
from typing import Any

from forecast_env.agents.base import forecast_action, parse_observation
from forecast_env.agents.parse import _from_value, parse_arguments, parse_forecast
from forecast_env.chat import ChatClient, ChatResult
from forecast_env.config import load_config
from forecast_env.errors import ConfigError, EndpointError

WORLD_CORRECTIVE = (
    "Act through the tools: call `forecast` with a question_id and a probability for each of its options "
    "to set a standing forecast, or `next_day` to end the day."
)
CORRECTIVE = (
    "I could not read a forecast in your reply. Call the `forecast` tool now with a probability for "
    "every offered option, or reply with only a JSON object mapping each of these labels to a "
    "probability: {options}"
)
ELIDED = "[older tool result elided to fit the context budget]"


def system_prompt() -> str:
    """The packaged system prompt (`agents/prompts/system.md`)."""
    return resources.files("forecast_env.agents.prompts").joinpath("system.md").read_text()


def _zero_telemetry() -> dict[str, Any]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "latency_ms": 0.0, "cost_usd": 0.0}


class LLMAgent:
    """A chat-completions model driving the environment's tools (sync `act`, async `aact`)."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, name: str | None = None,
                 system: str | None = None, **overrides: Any) -> None:
        cfg = dict(load_config("benchmark")["llm"])
        cfg.update(config or {})
        cfg.update(overrides)
        if not cfg.get("model"):
            raise ConfigError("llm.model is not set: give the model name, e.g. --set llm.model=gpt-4o-mini "
                              "(and llm.base_url for a local server)")
        self.cfg = cfg
        self.model = str(cfg["model"])
        self.name = name or f"llm:{self.model}"
        self.system = system if system is not None else system_prompt()
        api_key = os.environ.get(str(cfg.get("api_key_env") or ""), "") or None
        self.client = ChatClient(str(cfg["base_url"]), api_key, float(cfg["timeout_seconds"]),
                                 int(cfg["max_retries"]), float(cfg.get("backoff_seconds", 1.0)),
                                 float(cfg.get("max_backoff_seconds", 30.0)))
        price = (cfg.get("prices_per_million") or {}).get(self.model)
        self.price = price if isinstance(price, Mapping) else None
        self.tool_specs: list[dict] = []
        self.reset()

    def close(self) -> None:
        """Close the HTTP connections (the agent can still be used; they reopen on demand)."""
        self.client.close()

    async def aclose(self) -> None:
        """Close the HTTP connections, the async one on the running event loop."""
        await self.client.aclose()

    # -- state ------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None) -> None:
        self.seed = seed
        self.sessions: list[list[dict[str, Any]]] = []
        self._session: list[dict[str, Any]] = []
        self._queue: deque[tuple[str | None, dict]] = deque()
        self._awaiting: str | None = None
        self._date: Any = None
        self._options: list[str] = []
        self._world = False
        self._question_options: dict[str, list[str]] = {}
        self._corrected = False
        self._interrupted = False
        self._telemetry = _zero_telemetry()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Every session's messages, in order (each session starts with the system message)."""
        return [m for session in self.sessions for m in session]

    # -- the loop ---------------------------------------------------------------------------

    def act(self, observation: str, info: dict) -> dict:
        self._ingest(observation, info)
        try:
            while True:
                action = self._pop()
                if action is not None:
                    return action
                self._absorb(self.client.complete(self._payload()))
        except EndpointError:
            self._interrupted = True
            raise

    async def aact(self, observation: str, info: dict) -> dict:
        self._ingest(observation, info)
        try:
            while True:
                action = self._pop()
                if action is not None:
                    return action
                self._absorb(await self.client.acomplete(self._payload()))
        except EndpointError:
            self._interrupted = True
            raise

    # -- transcript -------------------------------------------------------------------------

    def _render(self, observation: str | Mapping[str, Any]) -> str:
        text = observation if isinstance(observation, str) else json.dumps(observation, default=str)
        cap = int(self.cfg.get("max_tool_result_chars", 6000))
        if len(text) > cap:
            text = text[:cap] + f"... [truncated {len(text) - cap} characters]"
        return text

    def _drop_queue(self, why: str) -> None:
        while self._queue:
            call_id, _ = self._queue.popleft()
            if call_id is not None:
                self._session.append({"role": "tool", "tool_call_id": call_id, "content": f"not executed: {why}"})

    def _ingest(self, observation: str, info: dict) -> None:
        obs = parse_observation(observation, info)
        if isinstance(info, Mapping) and info.get("tool_specs") and self.cfg.get("tools", True):
            self.tool_specs = list(info["tool_specs"])
        self._world = "questions" in obs
        if self._world:  # options per listed question, for reading loose labels in forecast calls
            self._question_options.update({str(q.get("question_id")): [str(o) for o in q.get("options") or []]
                                           for q in obs.get("questions") or [] if isinstance(q, Mapping)})
        self._options = [str(o) for o in obs.get("options") or []]
        # a forecast date of an episode, or a day of the world
        day = (obs.get("step"), obs.get("forecast_date") or obs.get("date"))
        text = self._render(observation)
        if day != self._date or not self._session:
            self._close_session(text)
            self._date = day
            opening = self._opening(obs)
            if not self.cfg.get("tools", True):  # the no-tools ablation: what the model answers from memory
                opening += (" No tools are available in this run: answer at once with only a JSON object "
                            "mapping each option to your probability.")
            self._session = [{"role": "system", "content": self.system},
                             {"role": "user", "content": f"{opening}\n{text}"}]
            self.sessions.append(self._session)
        else:
            if self._awaiting is not None:
                self._session.append({"role": "tool", "tool_call_id": self._awaiting, "content": text})
                self._awaiting = None
            else:
                self._session.append({"role": "user", "content": text})
        budget = obs.get("budget_left")
        if not self._world and isinstance(budget, int) and budget <= 1 and not (self._queue and self._queue[0][1].get("tool") == "forecast"):
            self._drop_queue("the call budget of this date is used up")
            self._session[-1]["content"] += "\n[One tool call left for this date: call forecast now.]"

    @staticmethod
    def _opening(obs: Mapping[str, Any]) -> str:
        if "questions" in obs:
            return "A new day of the forecasting world starts."
        return "A new forecast date starts." if obs.get("step") not in (None, 1) else "A new forecasting episode starts."

    def _close_session(self, text: str) -> None:
        """End the current date's chat: answer its open tool calls so its transcript stays whole."""
        self._corrected = False
        if not self._session:
            self._queue.clear()
            self._awaiting = None
            return
        if self._interrupted:
            why = "the model endpoint failed and this forecast date was skipped"
        else:
            why = "the forecast ended that date"
        if self._awaiting is not None:
            content = text if not self._interrupted else f"not executed: {why}"
            self._session.append({"role": "tool", "tool_call_id": self._awaiting, "content": content})
            self._awaiting = None
        self._drop_queue(why)
        self._interrupted = False

    def _pop(self) -> dict | None:
        if not self._queue:
            return None
        call_id, action = self._queue.popleft()
        self._awaiting = call_id
        action = dict(action)
        action["telemetry"] = self._telemetry
        self._telemetry = _zero_telemetry()
        return action

    def _payload(self) -> dict[str, Any]:
        messages = [dict(m) for m in self._session]
        budget = int(self.cfg.get("max_transcript_chars", 200_000))
        total = sum(len(str(m.get("content") or "")) for m in messages)
        for m in messages:
            if total <= budget:
                break
            if m["role"] == "tool" and m.get("content") != ELIDED:
                total -= len(str(m.get("content") or "")) - len(ELIDED)
                m["content"] = ELIDED
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": float(self.cfg["temperature"]),
            "max_tokens": int(self.cfg["max_tokens"]),
        }
        if self.tool_specs:
            payload["tools"] = self.tool_specs
            payload["tool_choice"] = "auto"
        if self.seed is not None:
            payload["seed"] = int(self.seed)
        return payload

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        if self.price is None:
            return None
        return (prompt_tokens * float(self.price.get("prompt", 0.0))
                + completion_tokens * float(self.price.get("completion", 0.0))) / 1e6

    def _absorb(self, result: ChatResult) -> None:
        tel = self._telemetry
        tel["prompt_tokens"] += result.prompt_tokens
        tel["completion_tokens"] += result.completion_tokens
        tel["latency_ms"] += result.latency_ms
        cost = self._cost(result.prompt_tokens, result.completion_tokens)
        tel["cost_usd"] = None if cost is None or tel["cost_usd"] is None else tel["cost_usd"] + cost

        msg = result.message
        content = msg.get("content")
        if not isinstance(content, str):
            content = None if content is None else json.dumps(content)
        calls = [c for c in (msg.get("tool_calls") or []) if isinstance(c, Mapping)]
        record: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            fixed: list[dict[str, Any]] = []
            for c in calls:
                raw_fn = c.get("function")
                fn: Mapping[str, Any] = raw_fn if isinstance(raw_fn, Mapping) else {}
                call_id = str(c.get("id") or f"call_{uuid.uuid4().hex[:12]}")
                raw_args = fn.get("arguments")
                fixed.append({"id": call_id, "type": "function",
                              "function": {"name": str(fn.get("name") or ""),
                                           "arguments": raw_args if isinstance(raw_args, str)
                                           else json.dumps(raw_args if raw_args is not None else {})}})
            record["tool_calls"] = fixed
            self._session.append(record)
            for c in fixed:
                self._queue.append((c["id"], self._call_to_action(c["function"]["name"], c["function"]["arguments"])))
            return
        self._session.append(record)
        if self._world:  # a text reply cannot name a question: ask once, then end the day
            if not self._corrected:
                self._corrected = True
                self._session.append({"role": "user", "content": WORLD_CORRECTIVE})
            else:
                self._queue.append((None, {"tool": "next_day", "args": {}}))
            return
        parsed = parse_forecast(content, self._options)
        if parsed:
            self._queue.append((None, forecast_action(parsed)))
        elif not self._corrected:
            self._corrected = True
            self._session.append({"role": "user", "content": CORRECTIVE.format(options=json.dumps(self._options))})
        else:
            self._queue.append((None, forecast_action({})))

    def _call_to_action(self, name: str, raw_args: str) -> dict:
        args = parse_arguments(raw_args)
        if name == "forecast" and self._world:
            if args is None or not isinstance(args.get("question_id"), str):
                # unreadable or unnamed: the env's error observation tells the model what to send
                return {"type": "function", "function": {"name": name, "arguments": raw_args}}
            options = self._question_options.get(args["question_id"], [])
            action = self._forecast(args.get("probabilities", {}), options)
            action["args"]["question_id"] = args["question_id"]
            return action
        if name == "forecast":
            if args is None:
                parsed = parse_forecast(raw_args, self._options)
                return forecast_action(parsed) if parsed else forecast_action({})
            return self._forecast(args.get("probabilities", args), self._options)
        if args is None:
            # malformed arguments: the env answers with an error observation the model can read
            return {"type": "function", "function": {"name": name, "arguments": raw_args}}
        return {"tool": name, "args": args}

    @staticmethod
    def _forecast(probs: Any, options: list[str]) -> dict:
        """The forecast action for what the model sent as probabilities (loose labels read)."""
        if isinstance(probs, str):
            probs = parse_forecast(probs, options) or {}
        elif isinstance(probs, Mapping) and not all(isinstance(k, str) and k in options for k in probs):
            probs = _from_value(probs, options) or probs
        return forecast_action(probs) if isinstance(probs, (Mapping, list)) else forecast_action({})
