"""The model behind the question pipeline: one chat client whose every request is recorded, keyed by the request.

`RecordedModel.chat(payload)` answers a chat-completions request from the workspace's recording when the
exact request (canonical JSON: model, messages, tools, response_format, sampling settings) was made
before, else from the endpoint, and records the pair. With `replay: only` a request that was never
recorded raises `QuestionsError` and no endpoint is needed, so generation and resolution rerun to the
same bytes. `ask_json` asks for an object that follows a JSON schema: through the endpoint's
`response_format` where it has one (`structured`: `json_schema`, OpenAI's; `json_object`, llama.cpp's
grammar from a schema), and in any case validates the reply and, when it fails, sends one corrective
turn (as the llm agent does) before giving up with None.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from forecast_env.chat import ChatClient
from forecast_env.errors import ConfigError, QuestionsError
from forecast_env.store import atomic_write_text

REPLAY_MODES = ("auto", "only", "off")
STRUCTURED = ("json_schema", "json_object", "none")
CORRECTIVE = ("Your reply could not be used: {error}. Reply again with only one JSON object that follows this "
              "schema, and nothing else:\n{schema}")


def request_key(payload: Mapping[str, Any]) -> str:
    """The recording key of a request: the sha256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode("utf-8")).hexdigest()


@dataclass
class Usage:
    """Model calls and tokens, per purpose (propose, verify:quality, resolve, ...)."""

    calls: Counter[str] = field(default_factory=Counter)
    prompt_tokens: Counter[str] = field(default_factory=Counter)
    completion_tokens: Counter[str] = field(default_factory=Counter)
    live: int = 0  # answered by the endpoint
    replayed: int = 0  # answered from the recording

    def add(self, purpose: str, prompt: int, completion: int) -> None:
        self.calls[purpose] += 1
        self.prompt_tokens[purpose] += prompt
        self.completion_tokens[purpose] += completion

    def total_tokens(self) -> int:
        return sum(self.prompt_tokens.values()) + sum(self.completion_tokens.values())

    def to_dict(self) -> dict[str, Any]:
        return {"calls": dict(sorted(self.calls.items())), "prompt_tokens": dict(sorted(self.prompt_tokens.items())),
                "completion_tokens": dict(sorted(self.completion_tokens.items())), "total_tokens": self.total_tokens()}


def _extract_json(text: str) -> Any:
    """The first JSON object in a reply (a fenced block, or the outermost braces)."""
    text = text.strip()
    m = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if m:
        text = m.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in the reply")
    obj, _ = json.JSONDecoder().raw_decode(text[start:])
    return obj


class RecordedModel:
    """A chat-completions model behind a request-keyed recording (`path`, JSON lines)."""

    def __init__(self, llm: Mapping[str, Any], recording: str | Path, replay: str = "auto") -> None:
        if replay not in REPLAY_MODES:
            raise ConfigError(f"questions.replay: {replay!r} is not one of {', '.join(REPLAY_MODES)}")
        structured = str(llm.get("structured") or "none")
        if structured not in STRUCTURED:
            raise ConfigError(f"questions.llm.structured: {structured!r} is not one of {', '.join(STRUCTURED)}")
        self.llm = dict(llm)
        self.model = str(llm.get("model") or "")
        self.structured = structured
        self.replay = replay
        self.path = Path(recording)
        self.usage = Usage()
        self._recorded: dict[str, dict[str, Any]] = {}
        self._order: list[str] = []
        if self.path.exists():
            for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    self._recorded[rec["key"]] = rec
                    self._order.append(rec["key"])
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise QuestionsError(f"{self.path} line {n}: not a recording line ({exc}); "
                                         "delete the file to record again") from None
        if not self.model and replay != "only":
            raise ConfigError("questions.llm.model is not set: give the model name, e.g. --model gpt-4o-mini "
                              "(and --base-url for a local server), or --llm FILE, or --set questions.llm.model=...")
        self._client: ChatClient | None = None
        self._dirty = False

    @property
    def client(self) -> ChatClient:
        if self._client is None:
            api_key = os.environ.get(str(self.llm.get("api_key_env") or ""), "") or None
            self._client = ChatClient(str(self.llm["base_url"]), api_key, float(self.llm["timeout_seconds"]),
                                      int(self.llm["max_retries"]), float(self.llm.get("backoff_seconds", 1.0)),
                                      float(self.llm.get("max_backoff_seconds", 30.0)))
        return self._client

    def payload(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                schema: Mapping[str, Any] | None = None, name: str = "answer", temperature: float | None = None,
                seed: int | None = None, model: str | None = None, max_tokens: int | None = None) -> dict[str, Any]:
        """The request body: the configured sampling settings, the tools or the response format."""
        body: dict[str, Any] = {
            "model": model or self.model, "messages": list(messages),  # a copy: the caller's list grows after the call
            "temperature": float(self.llm["temperature"] if temperature is None else temperature),
            "max_tokens": int(self.llm["max_tokens"] if max_tokens is None else max_tokens),
            "seed": int(self.llm.get("seed") or 0) if seed is None else int(seed),
        }
        if tools:
            body["tools"] = tools
        if schema is not None and self.structured == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": name, "schema": dict(schema), "strict": True}}
        elif schema is not None and self.structured == "json_object":
            body["response_format"] = {"type": "json_object", "schema": dict(schema)}
        return body

    def chat(self, body: dict[str, Any], purpose: str) -> dict[str, Any]:
        """The assistant message for `body`, from the recording or the endpoint (then recorded)."""
        key = request_key(body)
        rec = self._recorded.get(key) if self.replay != "off" else None
        if rec is None:
            if self.replay == "only":
                raise QuestionsError(
                    f"replay only: the recording {self.path} has no answer for this {purpose} request "
                    f"(key {key[:16]}); run with replay=auto and an endpoint to record it")
            res = self.client.complete(body)
            rec = {"key": key, "purpose": purpose, "request": body, "message": res.message,
                   "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens}
            if key not in self._recorded:
                self._order.append(key)
            self._recorded[key] = rec
            self._dirty = True
            self.usage.live += 1
        else:
            self.usage.replayed += 1
        self.usage.add(purpose, int(rec.get("prompt_tokens") or 0), int(rec.get("completion_tokens") or 0))
        return dict(rec["message"])

    def ask_json(self, messages: list[dict[str, Any]], schema: Mapping[str, Any], purpose: str,
                 **kw: Any) -> tuple[Any, list[dict[str, Any]]]:
        """A reply that validates against `schema` (None when even the corrective turn fails), and the transcript."""
        convo = list(messages)
        for attempt in range(2):
            msg = self.chat(self.payload(convo, schema=schema, name=purpose.split(":")[0], **kw), purpose)
            content = msg.get("content") or ""
            convo.append({"role": "assistant", "content": content})
            try:
                obj = _extract_json(content)
                jsonschema.validate(obj, schema)
                return obj, convo
            except (ValueError, jsonschema.ValidationError) as exc:
                error = exc.message if isinstance(exc, jsonschema.ValidationError) else str(exc)
                if attempt == 0:
                    convo.append({"role": "user", "content": CORRECTIVE.format(
                        error=error[:300], schema=json.dumps(schema, sort_keys=True))})
        return None, convo

    def save(self) -> None:
        """Write the recording (every request in first-seen order), when something new was recorded."""
        if not self._dirty:
            return
        lines = [json.dumps(self._recorded[k], sort_keys=True, ensure_ascii=False) for k in self._order]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, "\n".join(lines) + "\n")
        self._dirty = False

    def close(self) -> None:
        self.save()
        if self._client is not None:
            self._client.close()
