"""One client for OpenAI-compatible chat-completions endpoints (the LLM agent and the LLM judge).

POST {base_url}/chat/completions with httpx, sync or async; transient failures (timeouts,
connection errors, 408/409/429, 5xx, malformed bodies) are retried with exponential backoff that
honours Retry-After; other 4xx fail at once. After the retries it raises `EndpointError`: callers
record the affected report or verdict as missing/error, never as a made-up answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from forecast_env.errors import EndpointError


@dataclass
class ChatResult:
    """One successful chat-completions response."""

    message: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float


class ChatClient:
    """POST {base_url}/chat/completions, sync or async, retrying transient failures."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout_seconds: float = 60.0,
                 max_retries: int = 3, backoff_seconds: float = 1.0, max_backoff_seconds: float = 30.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout_seconds
        self.max_retries = max(0, int(max_retries))
        self.backoff = backoff_seconds
        self.max_backoff = max_backoff_seconds
        self._client: httpx.Client | None = None
        self._aclient: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None

    # -- one attempt's outcome: a result, a retryable error text, or a fatal EndpointError --
    def _outcome(self, resp: httpx.Response, started: float) -> tuple[ChatResult | None, str, float | None]:
        if resp.status_code == 200:
            try:
                body = resp.json()
                message = body["choices"][0]["message"]
                if not isinstance(message, dict):
                    raise TypeError("message is not an object")
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                return None, f"malformed response body ({exc}): {resp.text[:200]!r}", None
            usage = body.get("usage") or {}
            return ChatResult(message, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                              (time.perf_counter() - started) * 1000.0), "", None
        text = f"HTTP {resp.status_code}: {resp.text[:300]!r}"
        if resp.status_code in (408, 409, 429) or resp.status_code >= 500:
            retry_after = None
            try:
                retry_after = float(resp.headers.get("retry-after", ""))
            except ValueError:
                pass
            return None, text, retry_after
        raise EndpointError(f"{self.url} refused the request ({text}); not retried: check the model name, "
                            "the API key and the request size")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        base = retry_after if retry_after is not None else self.backoff * (2 ** attempt)
        return max(0.0, min(self.max_backoff, base))

    def _fail(self, last: str) -> EndpointError:
        return EndpointError(f"{self.url} failed after {self.max_retries + 1} attempts; last error: {last}. "
                             "Check that the server is up and llm.base_url / llm.model are right")

    def complete(self, payload: Mapping[str, Any]) -> ChatResult:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        last = ""
        for attempt in range(self.max_retries + 1):
            started = time.perf_counter()
            retry_after = None
            try:
                resp = self._client.post(self.url, json=payload, headers=self.headers)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                result, last, retry_after = self._outcome(resp, started)
                if result is not None:
                    return result
            if attempt < self.max_retries:
                time.sleep(self._delay(attempt, retry_after))
        raise self._fail(last)

    async def acomplete(self, payload: Mapping[str, Any]) -> ChatResult:
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aloop is not loop:
            self._aclient = httpx.AsyncClient(timeout=self.timeout)
            self._aloop = loop
        last = ""
        for attempt in range(self.max_retries + 1):
            started = time.perf_counter()
            retry_after = None
            try:
                resp = await self._aclient.post(self.url, json=payload, headers=self.headers)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                result, last, retry_after = self._outcome(resp, started)
                if result is not None:
                    return result
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        raise self._fail(last)

    def close(self) -> None:
        """Close the sync connections; an async client is closed by `aclose` on its own event loop."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self._aclient = None  # an AsyncClient is bound to its event loop; `aclose` closes it there

    async def aclose(self) -> None:
        """Close both clients; await it on the event loop the async client was used on."""
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
        self.close()
