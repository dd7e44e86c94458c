"""The agent loop's view of a chat model (issue 6 item 1).

Owns the small protocol the loop and compaction call — ``stream`` (one streamed chat
completion with tools; text and reasoning pieces go to callbacks; returns the whole
assistant turn with tool calls and usage) and ``complete`` (one plain completion, for
the compaction summary) — and the shapes they return. The real client lives in
``clio_acp.models`` (issue 5); :func:`resolve_chat_model` adapts it, and until it is
present a minimal OpenAI-compatible streaming client here keeps the loop usable.
It knows nothing about memory or sessions.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from httpx_sse import aconnect_sse

from clio_acp.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_WINDOW = 32_768
"""Model window in tokens when neither the target nor the server says otherwise."""

TextCallback = Callable[[str], Awaitable[None] | None]


@dataclass(frozen=True)
class ModelUsage:
    """Tokens of one model call (``cached_tokens`` is part of ``input_tokens``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
        }


@dataclass(frozen=True)
class ModelToolCall:
    id: str
    name: str
    arguments: str
    """The raw JSON text the model produced (may be invalid; the loop reports that)."""


@dataclass
class ModelTurn:
    """One whole assistant answer."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ModelToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: ModelUsage = field(default_factory=ModelUsage)


class ModelError(RuntimeError):
    """A model call failed (connection, HTTP status, malformed stream, no route)."""


class ChatModel(Protocol):
    """What the loop needs from a chat route. Cancellation is task cancellation: the
    stream must be closed promptly when the awaiting task is cancelled."""

    name: str
    context_window: int
    """Model window, tokens."""

    async def stream(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        on_text: TextCallback | None = None,
        on_reasoning: TextCallback | None = None,
        max_tokens: int | None = None,
    ) -> ModelTurn: ...

    async def complete(self, system: str, user: str, *, max_tokens: int) -> str: ...

    async def aclose(self) -> None: ...


async def _call(cb: TextCallback | None, text: str) -> None:
    if cb is None or not text:
        return
    result = cb(text)
    if result is not None:
        await result


class OpenAICompatModel:
    """A minimal OpenAI-compatible ``/chat/completions`` streaming client (httpx +
    httpx-sse). Used only when ``clio_acp.models`` offers no client."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        extra_body: dict[str, Any] | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.name = model
        self.context_window = context_window
        self._extra = dict(extra_body or {})
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=10.0)
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        on_text: TextCallback | None = None,
        on_reasoning: TextCallback | None = None,
        max_tokens: int | None = None,
    ) -> ModelTurn:
        body: dict[str, Any] = {
            "model": self.name,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            **self._extra,
        }
        if tools:
            body["tools"] = list(tools)
        if max_tokens:
            body["max_tokens"] = max_tokens
        turn = ModelTurn()
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        try:
            async with aconnect_sse(
                self._client, "POST", f"{self.base_url}/chat/completions", json=body
            ) as source:
                if source.response.status_code != 200:
                    await source.response.aread()
                    raise ModelError(
                        f"model {self.name}: HTTP {source.response.status_code}: "
                        f"{source.response.text[:300]}"
                    )
                async for sse in source.aiter_sse():
                    if sse.data.strip() == "[DONE]":
                        break
                    try:
                        chunk = json.loads(sse.data)
                    except ValueError as exc:
                        raise ModelError(f"malformed stream chunk: {sse.data[:200]!r}") from exc
                    usage = chunk.get("usage")
                    if usage:
                        details = usage.get("prompt_tokens_details") or {}
                        turn.usage = ModelUsage(
                            int(usage.get("prompt_tokens") or 0),
                            int(usage.get("completion_tokens") or 0),
                            int(details.get("cached_tokens") or 0),
                        )
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        if delta.get("reasoning_content"):
                            reasoning.append(delta["reasoning_content"])
                            await _call(on_reasoning, delta["reasoning_content"])
                        if delta.get("content"):
                            text.append(delta["content"])
                            await _call(on_text, delta["content"])
                        for tc in delta.get("tool_calls") or ():
                            slot = calls.setdefault(
                                int(tc.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                            )
                            if tc.get("id"):
                                slot["id"] = tc["id"]
                            fn = tc.get("function") or {}
                            if fn.get("name"):
                                slot["name"] += fn["name"]
                            if fn.get("arguments"):
                                slot["arguments"] += fn["arguments"]
                        if choice.get("finish_reason"):
                            turn.finish_reason = choice["finish_reason"]
        except httpx.HTTPError as exc:
            raise ModelError(f"model {self.name} at {self.base_url}: {exc!r}") from exc
        turn.text = "".join(text)
        turn.reasoning = "".join(reasoning)
        turn.tool_calls = [
            ModelToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
            for i, c in sorted(calls.items())
        ]
        return turn

    async def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        turn = await self.stream(messages, (), max_tokens=max_tokens)
        return turn.text


def resolve_chat_model(
    settings: Settings, *, target: str | None = None, model: str | None = None
) -> ChatModel:
    """The chat route of ``settings`` (or the given target/model overrides).

    Raises :class:`ModelError` when no target is configured or the target is unknown.
    """
    try:  # issue 5's client, when present
        from clio_acp.models import chat_model_for  # type: ignore[attr-defined]
    except ImportError:
        chat_model_for = None
    if chat_model_for is not None:
        return chat_model_for(settings, target=target, model=model)
    target_id = target or settings.chat.target
    if target_id is None and len(settings.targets) == 1:
        target_id = settings.targets[0].id
    spec = settings.target(target_id)
    if spec is None:
        raise ModelError(
            "no chat model configured: set chat.target in settings.yaml (or pass --target)"
            if target_id is None
            else f"unknown target {target_id!r}"
        )
    if not spec.url:
        raise ModelError(f"target {target_id!r} ({spec.runtime}) has no url")
    url = spec.url.rstrip("/")
    if not url.endswith("/v1") and "/v1/" not in url + "/":
        url += "/v1"
    name = model or (settings.chat.model if target is None else None) or spec.default_model
    return OpenAICompatModel(
        base_url=url,
        model=name or "default",
        api_key=os.environ.get(spec.api_key_env) if spec.api_key_env else None,
        timeout_s=spec.request_timeout_ms / 1000,
    )
