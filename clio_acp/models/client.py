"""The OpenAI-compatible chat client: one target, ``/v1/chat/completions`` over httpx.

Owns the wire: building the request body (dialect switches for thinking off and
grammar), streaming with httpx-sse, reassembling reasoning (``reasoning_content``
or ``reasoning``), text and tool-call deltas split across chunks, reading usage
(cached tokens included) and llama.cpp ``timings``, and turning every failure into
a typed error from ``clio_acp.models.errors`` (never a raw httpx exception).
Retries happen only for connection failures before any byte of the answer
arrived. Deadlines are absolute (``timeout_ms`` from the call) and apply to every
wait, including each chunk; cancelling the caller closes the stream at once. It
must not know about capacity, routing, sessions or memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from httpx_sse import EventSource

from clio_acp.models.continuation import (
    Continuation,
    ContinuationCollector,
    RouteIdentity,
    prepare_messages,
)
from clio_acp.models.errors import (
    ContextOverflowError,
    EndpointBusyError,
    MalformedStreamError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
)
from clio_acp.models.repetition import FINISH_REASON as REPETITION
from clio_acp.models.repetition import RepetitionGuard
from clio_acp.models.targets import Target

if TYPE_CHECKING:
    import ssl

log = logging.getLogger(__name__)

# Statuses meaning "no free slot now" (seed 000: endpoint busy).
BUSY_STATUSES = frozenset({429, 503})
# Connection retries before any byte arrived, and the pause before each (seconds).
RETRY_PAUSES_S = (0.1, 0.4)
_ERROR_BODY_MAX_CHARS = 2000


def tls_context() -> ssl.SSLContext:
    """The certificate-verifying TLS context every ``ModelClient`` shares: httpx's
    default (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else certifi), built once
    per pair of those values. Building one reads the whole CA bundle (tens of ms), and
    a session makes a client per route."""
    return _tls_context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_context_for(_cert_file: str | None, _cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()


@dataclass
class Usage:
    """Token counts of one answer. ``cached_tokens``: prompt tokens served from the
    server's prompt cache (``prompt_tokens_details.cached_tokens``, or llama.cpp
    ``timings.cache_n``); ``reasoning_tokens`` from ``completion_tokens_details``."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> Usage:
        """Read an OpenAI ``usage`` object (``prompt_tokens``, ``completion_tokens``,
        ``prompt_tokens_details.cached_tokens``,
        ``completion_tokens_details.reasoning_tokens``); missing fields are 0 or None."""
        prompt_details = data.get("prompt_tokens_details") or {}
        completion_details = data.get("completion_tokens_details") or {}
        return cls(
            input_tokens=int(data.get("prompt_tokens") or 0),
            output_tokens=int(data.get("completion_tokens") or 0),
            cached_tokens=_int_or_none(prompt_details.get("cached_tokens")),
            reasoning_tokens=_int_or_none(completion_details.get("reasoning_tokens")),
        )

    def to_dict(self) -> dict[str, Any]:
        """``{input, output, cacheRead, reasoning, totalTokens}`` (tokens), the usage row shape
        of MEMORY_SPEC §5."""
        return {
            "input": self.input_tokens,
            "output": self.output_tokens,
            "cacheRead": self.cached_tokens or 0,
            "reasoning": self.reasoning_tokens or 0,
            "totalTokens": self.total_tokens,
        }


@dataclass
class Timings:
    """llama.cpp's prefill/decode facts: tokens and milliseconds; ``cached_tokens``
    is ``cache_n`` (prompt tokens reused from the slot's cache)."""

    prompt_tokens: int | None = None
    prompt_ms: float | None = None
    predicted_tokens: int | None = None
    predicted_ms: float | None = None
    cached_tokens: int | None = None

    @classmethod
    def from_llamacpp(cls, data: dict[str, Any]) -> Timings:
        """Read llama.cpp's ``timings`` object (``prompt_n``, ``prompt_ms``, ``predicted_n``,
        ``predicted_ms``, ``cache_n``); missing or malformed fields are None."""
        return cls(
            prompt_tokens=_int_or_none(data.get("prompt_n")),
            prompt_ms=_float_or_none(data.get("prompt_ms")),
            predicted_tokens=_int_or_none(data.get("predicted_n")),
            predicted_ms=_float_or_none(data.get("predicted_ms")),
            cached_tokens=_int_or_none(data.get("cache_n")),
        )


@dataclass
class ToolCall:
    """A complete tool call: ``arguments`` is the JSON text as the model wrote it
    (not parsed here: a model may write invalid JSON and the caller decides)."""

    id: str
    name: str
    arguments: str


@dataclass
class Completion:
    """A finished answer. ``constrained``: a grammar was sent; ``latency_ms``: from
    the request to the last byte; ``target_id``/``model``: who answered."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    timings: Timings | None = None
    model: str | None = None
    target_id: str | None = None
    constrained: bool = False
    latency_ms: float = 0.0
    stop_detail: str | None = None
    """Why the client ended the answer itself (the repetition guard), else None."""
    continuation: Continuation | None = None
    """Reasoning state to send back to the same route (``models/continuation.py``)."""


@dataclass
class TextDelta:
    text: str


@dataclass
class ReasoningDelta:
    text: str


@dataclass
class ToolCallDelta:
    """A piece of tool call ``index``: ``id``/``name`` on its first piece, then
    fragments of the arguments JSON (possibly cut mid-token)."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass
class Done:
    completion: Completion


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | Done


@dataclass
class ChatRequest:
    """What to ask. ``thinking=False`` adds the runtime's thinking-off switch;
    ``grammar`` (GBNF) is sent where the runtime supports it; ``extra`` is merged
    into the body last (e.g. ``{"cache_prompt": False}``)."""

    messages: list[dict[str, Any]]
    model: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    thinking: bool = True
    grammar: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    repetition_guard: bool = False
    """Stop a streamed answer whose text loops (``models/repetition.py``): it ends
    with finish reason ``repetition`` and ``Completion.stop_detail`` says why."""


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _error_message(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text[:_ERROR_BODY_MAX_CHARS]
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])[:_ERROR_BODY_MAX_CHARS]
    if isinstance(err, str):
        return err[:_ERROR_BODY_MAX_CHARS]
    return text[:_ERROR_BODY_MAX_CHARS]


_OVERFLOW_TEXT = re.compile(
    r"exceed_context_size|context_length_exceeded|maximum context length|"
    r"exceeds? (the )?(available )?context|context (window|size) (is )?exceeded|"
    r"prompt is too long|too many tokens",
    re.IGNORECASE,
)
_WINDOW_NUMBER = re.compile(r"(?:n_ctx\"?\s*[:=]\s*|maximum context length is )(\d+)")


def context_overflow(status: int, text: str) -> tuple[bool, int | None] | None:
    """``(True, window)`` when an error answer says the prompt does not fit the
    window (``window`` in tokens when the server said it: llama.cpp ``n_ctx``, vLLM
    "maximum context length is N"), else None."""
    if status not in (400, 413, 422, 500) or not _OVERFLOW_TEXT.search(text):
        return None
    number = _WINDOW_NUMBER.search(text)
    return True, int(number.group(1)) if number else None


class _Assembler:
    """Folds chunk objects into a ``Completion`` and yields the deltas they carry."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.timings: Timings | None = None
        self.model: str | None = None
        self.stop_detail: str | None = None
        self.carry = ContinuationCollector()

    def feed(self, chunk: Any) -> list[StreamEvent]:
        if not isinstance(chunk, dict):
            raise MalformedStreamError(f"stream chunk is not an object: {str(chunk)[:200]}")
        if chunk.get("error") is not None:
            message = _error_message(json.dumps(chunk))
            err = chunk["error"]
            code = err.get("code") if isinstance(err, dict) else None
            raise ModelHTTPError(
                f"server error mid-stream: {message}",
                status=code if isinstance(code, int) else 500,
                body=message,
            )
        self.model = chunk.get("model") or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = Usage.from_openai(chunk["usage"])
        if isinstance(chunk.get("timings"), dict):
            self.timings = Timings.from_llamacpp(chunk["timings"])
        events: list[StreamEvent] = []
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise MalformedStreamError("stream chunk 'choices' is not a list")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise MalformedStreamError("stream chunk 'delta' is not an object")
            self.carry.feed_delta(delta)
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                events.append(ReasoningDelta(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                events.append(TextDelta(content))
            for position, call in enumerate(delta.get("tool_calls") or []):
                events.append(self._tool_piece(position, call))
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return events

    def _tool_piece(self, position: int, call: Any) -> ToolCallDelta:
        if not isinstance(call, dict):
            raise MalformedStreamError("tool call delta is not an object")
        index = call.get("index")
        index = index if isinstance(index, int) else position
        fn = call.get("function") or {}
        slot = self.calls.setdefault(index, {"id": None, "name": None, "args": []})
        self.carry.feed_tool_call(index, call)
        if call.get("id") and not slot["id"]:
            slot["id"] = str(call["id"])
        if fn.get("name") and not slot["name"]:
            slot["name"] = str(fn["name"])
        args = fn.get("arguments")
        if isinstance(args, dict):  # some servers send parsed arguments
            args = json.dumps(args)
        piece = args if isinstance(args, str) else ""
        slot["args"].append(piece)
        return ToolCallDelta(index, call.get("id"), fn.get("name"), piece)

    def completion(self) -> Completion:
        calls = [
            ToolCall(
                id=slot["id"] or f"call_{index}",
                name=slot["name"] or "",
                arguments="".join(slot["args"]),
            )
            for index, slot in sorted(self.calls.items())
        ]
        usage = self.usage
        if usage is not None and usage.cached_tokens is None and self.timings is not None:
            usage.cached_tokens = self.timings.cached_tokens
        return Completion(
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            tool_calls=calls,
            finish_reason=self.finish_reason,
            usage=usage,
            timings=self.timings,
            model=self.model,
            stop_detail=self.stop_detail,
        )


class ModelClient:
    """Client of one target. Create once per target and reuse (it pools
    connections); ``await aclose()`` when done. All methods raise only
    ``clio_acp.models.errors`` types (and ``asyncio.CancelledError``)."""

    def __init__(
        self,
        target: Target,
        *,
        http: httpx.AsyncClient | None = None,
        retry_pauses_s: tuple[float, ...] = RETRY_PAUSES_S,
    ) -> None:
        if target.base_url is None:
            raise ValueError(f"target {target.id!r} has no URL yet")
        self.target = target
        self._base = target.base_url
        self._retry_pauses = retry_pauses_s
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(
            verify=tls_context(),
            timeout=httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None),
            limits=httpx.Limits(max_keepalive_connections=8),
        )

    async def aclose(self) -> None:
        """Close the HTTP client when this client created it (a shared one is left open)."""
        if self._owns_http:
            await self._http.aclose()

    # -- request body ---------------------------------------------------------
    def build_body(self, request: ChatRequest, *, stream: bool) -> tuple[dict[str, Any], bool]:
        """The JSON body for ``request`` and whether a grammar was applied."""
        dialect = self.target.dialect
        model = request.model or self.target.default_model
        identity = RouteIdentity(self.target.id, self.target.runtime, model)
        messages = prepare_messages(
            request.messages, identity, replay=self.target.continuation_replay
        )
        body: dict[str, Any] = {"messages": messages, "stream": stream}
        if model:
            body["model"] = model
        if stream:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = request.tools
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.seed is not None:
            body["seed"] = request.seed
        if not request.thinking:
            dialect.apply_thinking_off(body)
        dialect.apply_prompt_cache(body)  # MEMORY_SPEC §14.4; ``extra`` may override
        constrained = bool(request.grammar) and dialect.apply_grammar(body, request.grammar or "")
        body.update(request.extra)
        return body, constrained

    def _headers(self) -> dict[str, str]:
        key = self.target.api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    # -- streaming ------------------------------------------------------------
    async def stream(self, request: ChatRequest, *, timeout_ms: int) -> AsyncIterator[StreamEvent]:
        """Stream one answer: ``ReasoningDelta``/``TextDelta``/``ToolCallDelta`` as
        they arrive, then exactly one ``Done`` with the assembled ``Completion``.

        ``timeout_ms`` bounds the whole answer. Raises ``EndpointBusyError``
        (429/503), ``ModelTimeoutError``, ``ModelConnectionError`` (after the
        retries), ``ModelHTTPError``, ``MalformedStreamError`` (cut, bad JSON, or
        ended before a finish reason without ``[DONE]``). Close the iterator (or
        cancel the task) to close the connection at once.
        """
        body, constrained = self.build_body(request, stream=True)
        started = time.monotonic()
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        async with contextlib.AsyncExitStack() as stack:
            response = await self._open(stack, body, deadline, timeout_ms)
            assembler = _Assembler()
            if "text/event-stream" not in response.headers.get("content-type", ""):
                # The server ignored "stream": take its whole JSON answer.
                data = await self._read_json(response, deadline, timeout_ms)
                events = assembler.feed(data)
                assembler.finish_reason = assembler.finish_reason or "stop"
                for event in events:
                    yield event
            else:
                saw_done = False
                guard = RepetitionGuard() if request.repetition_guard else None
                sse_iter = aiter(EventSource(response).aiter_sse())
                while guard is None or not guard.tripped:
                    try:
                        async with asyncio.timeout_at(deadline):
                            sse = await anext(sse_iter)
                    except StopAsyncIteration:
                        break
                    except TimeoutError:
                        raise self._timeout(timeout_ms) from None
                    except (httpx.TransportError, httpx.StreamError) as exc:
                        raise MalformedStreamError(
                            f"stream from target {self.target.id!r} broke: {exc!r}",
                            target_id=self.target.id,
                        ) from None
                    data = sse.data.strip()
                    if not data:
                        continue
                    if data == "[DONE]":
                        saw_done = True
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        raise MalformedStreamError(
                            f"stream chunk is not JSON: {data[:200]}", target_id=self.target.id
                        ) from None
                    try:
                        events = assembler.feed(chunk)
                    except (MalformedStreamError, ModelHTTPError) as exc:
                        exc.target_id = self.target.id
                        raise
                    for event in events:
                        if guard is not None and isinstance(event, TextDelta):
                            guard.feed(event.text)
                        yield event
                if guard is not None and guard.tripped:  # the response closes on exit
                    assembler.finish_reason, assembler.stop_detail = REPETITION, guard.why
                elif not saw_done and assembler.finish_reason is None:
                    raise MalformedStreamError(
                        f"stream from target {self.target.id!r} ended before the answer finished",
                        target_id=self.target.id,
                    )
            completion = assembler.completion()
        self._stamp(completion, assembler, body)
        completion.target_id = self.target.id
        completion.constrained = constrained
        completion.latency_ms = (time.monotonic() - started) * 1000
        yield Done(completion)

    async def complete(
        self,
        request: ChatRequest,
        *,
        timeout_ms: int,
        stream: bool = True,
        on_event: Callable[[StreamEvent], None] | None = None,
    ) -> Completion:
        """The whole answer. With ``stream`` (default) the answer is streamed and
        ``on_event`` sees each delta; otherwise one non-streaming request. Raises as
        ``stream``."""
        if not stream:
            return await self._complete_once(request, timeout_ms=timeout_ms)
        async with contextlib.aclosing(self.stream(request, timeout_ms=timeout_ms)) as events:
            async for event in events:
                if isinstance(event, Done):
                    return event.completion
                if on_event is not None:
                    on_event(event)
        raise MalformedStreamError("stream ended without an answer", target_id=self.target.id)

    async def _complete_once(self, request: ChatRequest, *, timeout_ms: int) -> Completion:
        body, constrained = self.build_body(request, stream=False)
        started = time.monotonic()
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        async with contextlib.AsyncExitStack() as stack:
            response = await self._open(stack, body, deadline, timeout_ms)
            data = await self._read_json(response, deadline, timeout_ms)
        assembler = _Assembler()
        try:
            assembler.feed(data)
        except (MalformedStreamError, ModelHTTPError) as exc:
            exc.target_id = self.target.id
            raise
        if not isinstance(data.get("choices"), list) or not data["choices"]:
            raise MalformedStreamError(
                "answer has no choices: not a chat completion", target_id=self.target.id
            )
        completion = assembler.completion()
        self._stamp(completion, assembler, body)
        completion.target_id = self.target.id
        completion.constrained = constrained
        completion.latency_ms = (time.monotonic() - started) * 1000
        return completion

    # -- plumbing -------------------------------------------------------------
    def _stamp(self, completion: Completion, assembler: _Assembler, body: dict[str, Any]) -> None:
        """Attach the answer's continuation state, keyed by this route's identity."""
        identity = RouteIdentity(self.target.id, self.target.runtime, body.get("model"))
        completion.continuation = assembler.carry.build(identity, sorted(assembler.calls))

    def _timeout(self, timeout_ms: int) -> ModelTimeoutError:
        return ModelTimeoutError(
            f"target {self.target.id!r}: no complete answer within {timeout_ms} ms",
            target_id=self.target.id,
            timeout_ms=timeout_ms,
        )

    async def _open(
        self,
        stack: contextlib.AsyncExitStack,
        body: dict[str, Any],
        deadline: float,
        timeout_ms: int,
    ) -> httpx.Response:
        """Send the request and return the response once its headers arrived and the
        status is 2xx; maps statuses and connection failures to typed errors."""
        url = f"{self._base}/chat/completions"
        headers = self._headers()
        attempt = 0
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    response = await stack.enter_async_context(
                        self._http.stream("POST", url, json=body, headers=headers)
                    )
                break
            except TimeoutError:
                raise self._timeout(timeout_ms) from None
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                # Nothing of the answer arrived: safe to retry (issue 5 item 1).
                if attempt >= len(self._retry_pauses):
                    raise ModelConnectionError(
                        f"target {self.target.id!r} unreachable at {self._base}: {exc!r}",
                        target_id=self.target.id,
                    ) from None
                pause = self._retry_pauses[attempt]
                attempt += 1
                log.debug("retrying %s after %r (attempt %d)", url, exc, attempt)
                if asyncio.get_running_loop().time() + pause >= deadline:
                    raise self._timeout(timeout_ms) from None
                await asyncio.sleep(pause)
            except httpx.HTTPError as exc:
                raise ModelConnectionError(
                    f"target {self.target.id!r}: request failed: {exc!r}", target_id=self.target.id
                ) from None
        if response.status_code >= 400:
            try:
                async with asyncio.timeout_at(deadline):
                    text = (await response.aread()).decode("utf-8", "replace")
            except (TimeoutError, httpx.HTTPError):
                text = ""
            message = _error_message(text) if text else f"HTTP {response.status_code}"
            if response.status_code in BUSY_STATUSES:
                raise EndpointBusyError(
                    f"target {self.target.id!r} busy (HTTP {response.status_code}): {message}",
                    target_id=self.target.id,
                    status=response.status_code,
                    retry_after_s=_retry_after(response.headers.get("retry-after")),
                )
            overflow = context_overflow(response.status_code, text)
            raise (ContextOverflowError if overflow else ModelHTTPError)(
                f"target {self.target.id!r}: HTTP {response.status_code}: {message}",
                target_id=self.target.id,
                status=response.status_code,
                body=message,
                **({"window": overflow[1]} if overflow else {}),
            )
        return response

    async def _read_json(self, response: httpx.Response, deadline: float, timeout_ms: int) -> Any:
        try:
            async with asyncio.timeout_at(deadline):
                raw = await response.aread()
        except TimeoutError:
            raise self._timeout(timeout_ms) from None
        except httpx.HTTPError as exc:
            raise MalformedStreamError(
                f"answer from target {self.target.id!r} broke: {exc!r}", target_id=self.target.id
            ) from None
        try:
            data = json.loads(raw)
        except ValueError:
            raise MalformedStreamError(
                f"answer is not JSON: {raw[:200]!r}", target_id=self.target.id
            ) from None
        if not isinstance(data, dict):
            raise MalformedStreamError("answer is not a JSON object", target_id=self.target.id)
        return data

    # -- discovery ------------------------------------------------------------
    async def _get_json(self, url: str, timeout_ms: int) -> Any:
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                response = await self._http.get(url, headers=self._headers())
        except TimeoutError:
            raise self._timeout(timeout_ms) from None
        except httpx.HTTPError as exc:
            raise ModelConnectionError(
                f"target {self.target.id!r} unreachable: {exc!r}", target_id=self.target.id
            ) from None
        if response.status_code >= 400:
            raise ModelHTTPError(
                f"GET {url}: HTTP {response.status_code}",
                target_id=self.target.id,
                status=response.status_code,
                body=_error_message(response.text),
            )
        try:
            return response.json()
        except ValueError:
            raise MalformedStreamError(f"GET {url}: not JSON", target_id=self.target.id) from None

    async def list_models(self, *, timeout_ms: int = 5000) -> list[str]:
        """Model ids from ``GET /v1/models``. Raises the typed errors."""
        data = await self._get_json(f"{self._base}/models", timeout_ms)
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise MalformedStreamError(
                "/models answer has no 'data' list", target_id=self.target.id
            )
        return [str(m["id"]) for m in items if isinstance(m, dict) and m.get("id")]

    async def discover_slots(self, *, timeout_ms: int = 2000) -> int | None:
        """Request slots the server reports (llama.cpp ``/props`` ``total_slots``,
        else the length of ``/slots``); None when it reports none or is not a
        runtime that does. Never raises for an unreachable server (None)."""
        if not self.target.dialect.reports_slots or self.target.root_url is None:
            return None
        root = self.target.root_url
        with contextlib.suppress(
            ModelConnectionError, ModelHTTPError, MalformedStreamError, TimeoutError
        ):
            props = await self._get_json(f"{root}/props", timeout_ms)
            slots = props.get("total_slots") if isinstance(props, dict) else None
            if isinstance(slots, int) and slots > 0:
                return slots
        with contextlib.suppress(
            ModelConnectionError, ModelHTTPError, MalformedStreamError, TimeoutError
        ):
            slots_list = await self._get_json(f"{root}/slots", timeout_ms)
            if isinstance(slots_list, list) and slots_list:
                return len(slots_list)
        return None

    async def discover_window(self, model: str | None, *, timeout_ms: int = 3000) -> int | None:
        """The context window of one request, tokens, as the server reports it:
        llama.cpp ``/props`` ``default_generation_settings.n_ctx`` (per slot), else the
        ``/v1/models`` entry of ``model`` (vLLM ``max_model_len``, or
        ``context_length`` / ``context_window`` / ``max_context_length``, or llama.cpp
        ``meta.n_ctx``). None when nothing says; never raises."""
        failures = (ModelConnectionError, ModelHTTPError, MalformedStreamError, TimeoutError)
        if self.target.dialect.reports_slots and self.target.root_url is not None:
            with contextlib.suppress(*failures):
                props = await self._get_json(f"{self.target.root_url}/props", timeout_ms)
                settings = (
                    props.get("default_generation_settings") if isinstance(props, dict) else None
                )
                n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
                if _positive(n_ctx):
                    return int(n_ctx)
        with contextlib.suppress(*failures):
            data = await self._get_json(f"{self._base}/models", timeout_ms)
            items = data.get("data") if isinstance(data, dict) else None
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and (model is None or item.get("id") == model):
                    window = _window_of(item)
                    if window:
                        return window
        return None


_WINDOW_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _window_of(item: dict[str, Any]) -> int | None:
    """A ``/v1/models`` entry's window, tokens (see ``discover_window``)."""
    for key in _WINDOW_KEYS:
        if _positive(item.get(key)):
            return int(item[key])
    meta = item.get("meta")
    if isinstance(meta, dict) and _positive(meta.get("n_ctx")):
        return int(meta["n_ctx"])
    return None
