"""Typed errors of the model layer: what a caller may catch instead of raw httpx.

Owns the exception hierarchy raised by ``clio_acp.models`` (client, capacity,
routing). It must not import httpx or anything above the models floor; callers
(the agent loop, the memory policy step) branch on these types only.

    ModelError
    ├── EndpointBusyError     HTTP 429/503, or no free request slot (capacity)
    ├── ModelTimeoutError     deadline passed (also a ``TimeoutError``)
    ├── ModelClientError      the route failed: fallback-eligible (seed 000)
    │   ├── ModelConnectionError   connect/reset before any byte of the answer
    │   └── ModelHTTPError         any other non-2xx status
    ├── MalformedStreamError  the answer broke mid-way or is not OpenAI-shaped
    └── RouteError            configuration: unknown target, role unset, …

Cancellation is never wrapped: ``asyncio.CancelledError`` propagates as is.
The memory policy (MEMORY_SPEC §3 step 7) maps ``EndpointBusyError`` →
``endpoint_busy``, ``TimeoutError`` → ``timed_out``, anything else → ``client_error``.
"""

from __future__ import annotations


class ModelError(Exception):
    """Base of every model-layer error. ``target_id`` names the target (or None)."""

    def __init__(self, message: str, *, target_id: str | None = None) -> None:
        super().__init__(message)
        self.target_id = target_id


class EndpointBusyError(ModelError):
    """The endpoint has no free request slot: it answered HTTP 429/503
    (``status``), or this process's occupancy already fills its capacity
    (``status`` None). ``retry_after_s`` comes from a ``Retry-After`` header."""

    def __init__(
        self,
        message: str,
        *,
        target_id: str | None = None,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, target_id=target_id)
        self.status = status
        self.retry_after_s = retry_after_s


class ModelTimeoutError(ModelError, TimeoutError):
    """The request's deadline passed (connect, first byte or whole answer).
    ``timeout_ms`` is the deadline that was exceeded, when known."""

    def __init__(
        self, message: str, *, target_id: str | None = None, timeout_ms: int | None = None
    ) -> None:
        super().__init__(message, target_id=target_id)
        self.timeout_ms = timeout_ms


class ModelClientError(ModelError):
    """The route itself failed (not busy, not slow, not a broken answer). Only this
    class permits the one chat-route fallback (MEMORY_SPEC §10 route safety)."""


class ModelConnectionError(ModelClientError):
    """No connection, or it dropped before any byte of the answer arrived (the only
    case the client retries)."""


class ModelHTTPError(ModelClientError):
    """A non-2xx answer other than 429/503. ``status`` is the HTTP status and
    ``body`` the server's error message (cut to 2000 chars)."""

    def __init__(
        self, message: str, *, target_id: str | None = None, status: int, body: str = ""
    ) -> None:
        super().__init__(message, target_id=target_id)
        self.status = status
        self.body = body


class ContextOverflowError(ModelHTTPError):
    """The server refused the request because the prompt does not fit the model's
    window (llama.cpp ``exceed_context_size_error``, vLLM "maximum context length",
    OpenAI ``context_length_exceeded``). ``window`` is the window it reported, tokens,
    when it said. The agent compacts and retries once."""

    def __init__(
        self,
        message: str,
        *,
        target_id: str | None = None,
        status: int,
        body: str = "",
        window: int | None = None,
    ) -> None:
        super().__init__(message, target_id=target_id, status=status, body=body)
        self.window = window


class MalformedStreamError(ModelError):
    """The answer started but broke: the stream was cut, a chunk was not JSON, or
    the body is not a chat completion. Never retried, never a fallback trigger."""


class RouteError(ModelError):
    """A configuration problem: unknown target id, a role with no target, a target
    missing its API key, or the embedded model not installed."""
