"""The agent loop's view of a chat model (issue 6 item 1).

Owns the small protocol the loop and compaction call — ``stream`` (one streamed chat
completion with tools; text and reasoning pieces go to callbacks; returns the whole
assistant turn with tool calls and usage) and ``complete`` (one plain completion, for
the compaction summary) — and the shapes they return. The real client lives in
``clio_acp.models`` (issue 5); :class:`RouterChatModel` adapts its ``Router`` chat
route. ``ModelError`` is the models package's (every typed model failure). It knows
nothing about memory or sessions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from clio_acp.context.tokens import CHARS_PER_TOKEN, estimate_messages
from clio_acp.models import ChatRequest, Done, ReasoningDelta, Router, TextDelta
from clio_acp.models.errors import ContextOverflowError, ModelError
from clio_acp.paths import Paths
from clio_acp.settings import CONTEXT_WINDOW_DEFAULT, Settings

__all__ = [
    "ChatModel",
    "ContextOverflowError",
    "ModelError",
    "ModelToolCall",
    "ModelTurn",
    "ModelUsage",
    "RouterChatModel",
    "resolve_chat_model",
]

log = logging.getLogger(__name__)

MIN_TOKEN_SCALE, MAX_TOKEN_SCALE = 0.5, 4.0
"""Bounds of the estimate correction (a bad usage report must not shrink the window
to nothing nor blow it up)."""

TextCallback = Callable[[str], Awaitable[None] | None]


@dataclass(frozen=True)
class ModelUsage:
    """Tokens of one model call (``cached_tokens`` is part of ``input_tokens``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        """``{input_tokens, output_tokens, cached_tokens}`` (tokens) as journaled on assistant
        rows."""
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
    stop_detail: str | None = None
    """Why the answer was ended early (``finish_reason`` ``repetition``)."""
    continuation: dict[str, Any] | None = None
    """The route's reasoning state for replay, as JSON (``models/continuation.py``)."""


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
    ) -> ModelTurn:
        """Send one chat request (OpenAI ``messages`` and ``tools``) and stream it:
        text pieces to ``on_text``, reasoning to ``on_reasoning``;
        ``max_tokens`` caps the completion (None: the server's). Returns the
        whole turn (text, tool calls, finish reason, usage). Raises
        ``ModelError`` for an unusable route or a failed request; cancellation
        aborts the request."""

    async def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        """One
        non-tool
        completion
        of
        ``system``
        + ``user``
        (the
        compaction
        summary);
        returns the
        answer
        text.
        Raises
        ``ModelError``."""

    async def aclose(self) -> None:
        """Close the model's connections (idempotent)."""


async def _call(cb: TextCallback | None, text: str) -> None:
    if cb is None or not text:
        return
    result = cb(text)
    if result is not None:
        await result


class RouterChatModel:
    """:class:`ChatModel` over the session's ``clio_acp.models.Router`` chat route.

    ``context_window`` is in the loop's *estimated* tokens (``context.compaction``'s
    chars/4): the real window — declared (``contextWindow``), else discovered from the
    server before the first request (``Router.chat_window``), else the default —
    divided by how far the server's ``usage.prompt_tokens`` exceeded our estimate of
    the last request (issue 20 item 4). So compaction triggers in time for a model
    whose tokenizer counts more tokens than the estimate says."""

    def __init__(
        self, router: Router, *, context_window: int, discover_window: bool = False
    ) -> None:
        self.router = router
        route = router.chat_route
        self.name = (
            (route.model or route.target.default_model or route.target.id) if route else "none"
        )
        self.window_tokens = context_window
        """The real window, server tokens."""
        self.token_scale = 1.0
        """Server prompt tokens per estimated token, from the last answer's usage."""
        self._discover = discover_window

    @property
    def context_window(self) -> int:
        """The model window the loop plans with, tokens: the configured or discovered window
        divided by the learned token scale (at least 1)."""
        return max(1, int(self.window_tokens / self.token_scale))

    @property
    def route_note(self) -> str | None:
        """What a session's first turn tells the user about a chat route they did not
        choose (the embedded model, taken because no target is configured), else None."""
        if not self.router.table.implicit_chat:
            return None
        return (
            f"Chat runs on the embedded model ({self.name}) because no chat target is "
            "configured. It shows the pipeline working but cannot do real agent work: "
            "add a target to settings.yaml (clio-acp settings path; docs/configuration.md)."
        )

    def learn_window(self, window: int) -> None:
        """Take ``window`` (tokens, e.g. from a context-overflow error) as the real one."""
        self.window_tokens = min(self.window_tokens, window)
        self._discover = False

    async def _discover_window(self) -> None:
        self._discover = False
        try:
            window = await self.router.chat_window()
        except ModelError as exc:
            log.debug("context window not discovered: %s", exc)
            return
        if window:
            self.window_tokens = window

    def _learn_scale(self, estimate: int, usage: Any) -> None:
        if usage is None or usage.input_tokens <= 0 or estimate <= 0:
            return
        self.token_scale = min(MAX_TOKEN_SCALE, max(MIN_TOKEN_SCALE, usage.input_tokens / estimate))

    async def aclose(self) -> None:
        """Close the router's HTTP clients (idempotent)."""
        await self.router.aclose()

    async def stream(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        on_text: TextCallback | None = None,
        on_reasoning: TextCallback | None = None,
        max_tokens: int | None = None,
    ) -> ModelTurn:
        """``ChatModel.stream`` over the session's chat route (``Router.stream_chat``):
        discovers the server's window on first use, maps the stream events to callbacks and
        returns the ``ModelTurn``. Raises ``ModelError`` (no chat route, HTTP or connection
        failure, malformed stream)."""
        if self._discover:
            await self._discover_window()
        request = ChatRequest(
            messages=list(messages), tools=list(tools) or None, max_tokens=max_tokens
        )
        estimate = estimate_messages(messages) + (
            len(json.dumps(list(tools), separators=(",", ":"))) // CHARS_PER_TOKEN
        )
        completion = None
        async with contextlib.aclosing(self.router.stream_chat(request)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    await _call(on_text, event.text)
                elif isinstance(event, ReasoningDelta):
                    await _call(on_reasoning, event.text)
                elif isinstance(event, Done):
                    completion = event.completion
        if completion is None:
            raise ModelError("the chat stream ended without an answer")
        usage = completion.usage
        self._learn_scale(estimate, usage)
        return ModelTurn(
            text=completion.text,
            reasoning=completion.reasoning,
            tool_calls=[
                # Some servers send no (or repeated) ids; the journal needs unique ones.
                ModelToolCall(c.id or f"call_{uuid.uuid4().hex[:12]}", c.name, c.arguments)
                for c in completion.tool_calls
            ],
            finish_reason=completion.finish_reason,
            stop_detail=completion.stop_detail,
            continuation=completion.continuation.to_json() if completion.continuation else None,
            usage=ModelUsage(usage.input_tokens, usage.output_tokens, usage.cached_tokens or 0)
            if usage
            else ModelUsage(),
        )

    async def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        """``ChatModel.complete`` as a tool-less streamed request on the chat route; returns
        the text. Raises ``ModelError``."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        turn = await self.stream(messages, (), max_tokens=max_tokens)
        return turn.text


def resolve_chat_model(
    settings: Settings,
    *,
    paths: Paths | None = None,
    target: str | None = None,
    model: str | None = None,
) -> ChatModel:
    """The chat route of ``settings`` (``target``/``model`` override ``chat.*``), as a
    :class:`ChatModel`. No error here when no route is configured: the first request
    raises ``RouteError`` (a ``ModelError``), which the turn reports as a notice."""
    if target is not None or model is not None:
        chat = settings.chat.model_copy(
            update={
                "target": target or settings.chat.target,
                "model": model if model is not None else (None if target else settings.chat.model),
            }
        )
        settings = settings.model_copy(update={"chat": chat})
    router = Router(settings, paths=paths)
    declared = None
    route = router.chat_route
    if route is not None:
        spec = settings.target(route.target.id)
        declared = getattr(spec, "context_window", None)
    return RouterChatModel(
        router,
        context_window=declared or CONTEXT_WINDOW_DEFAULT,
        discover_window=route is not None and declared is None,
    )
