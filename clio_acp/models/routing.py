"""Routes: which target and model serve ``chat`` and the memory step, and how.

Owns role resolution (MEMORY_SPEC §10): a role's target that names nothing resets
to none, a model with no target is cleared, a target with no model uses the
target's ``defaultModel``; memory unset means the rules tier only; a memory route
equal to the chat target+model on a model that always reasons is refused. With no
target configured and the embedded model installed, ``chat`` defaults to the
``embedded`` target (issue 5 item 6); the id ``embedded`` names the local model
whenever no configured target claims it. The memory route is opt-in (MEMORY_SPEC
§10, §14.1): nothing chooses it implicitly — not the embedded model, not the chat
route — so with ``context.memory.target`` unset the LLM tier is off.

``Router`` is a session's routing snapshot (settings read once at creation; a
running session keeps it, new sessions take the new default). It owns the clients,
counts occupancy in the process-wide ``CapacityTracker``, streams chat with a
foreground lease, and runs a memory completion: a background lease or
``EndpointBusyError``, thinking off, the envelope grammar where the runtime takes
one, and exactly one chat-route fallback after a dedicated-route client error,
within the same deadline — never after a timeout, cancellation, malformed answer or
busy endpoint. Each attempt's usage is reported under its own target. It must not
know about memory policy, banks or sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import clio_acp.models.tool_calling as tool_calling
from clio_acp.models.capacity import DEFAULT_TRACKER, Capacity, CapacityTracker, Lease
from clio_acp.models.client import (
    ChatRequest,
    Completion,
    Done,
    ModelClient,
    StreamEvent,
    TextDelta,
    Usage,
)
from clio_acp.models.errors import ModelClientError, ModelTimeoutError, RouteError
from clio_acp.models.grammar import envelope_grammar_for_budget
from clio_acp.models.local import MODEL_ALIAS, LocalModelManager, embedded_installed, local_manager
from clio_acp.models.targets import Target
from clio_acp.paths import Paths, resolve_paths
from clio_acp.settings import (
    CHAT_MAX_OUTPUT_TOKENS_DEFAULT,
    EMBEDDED_CHAT_MAX_OUTPUT_TOKENS_DEFAULT,
    Settings,
)

log = logging.getLogger(__name__)

Role = Literal["chat", "memory"]
EMBEDDED_TARGET_ID = "embedded"


@dataclass(frozen=True)
class Route:
    """A role's resolved route: target and model (None: the server's default)."""

    role: Role
    target: Target
    model: str | None

    @property
    def key(self) -> tuple[str, str | None]:
        """``(target id, model)``: what identifies a route for capacity and continuations."""
        return (self.target.id, self.model)


@dataclass(frozen=True)
class RouteTable:
    """Both roles' routes (None: unset) and the notes explaining any reset."""

    chat: Route | None
    memory: Route | None
    targets: dict[str, Target] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    implicit_chat: bool = False
    """Chat fell to the embedded model because no target is configured (the one
    route chosen without the user; the first turn says so)."""


def embedded_target() -> Target:
    """The implicit ``embedded`` target (its URL is known once the server starts)."""
    return Target(
        id=EMBEDDED_TARGET_ID,
        runtime="embedded",
        base_url=None,
        default_model=MODEL_ALIAS,
        tool_calling="constrained",
    )


def resolve_routes(settings: Settings, *, embedded_installed: bool) -> RouteTable:
    """Resolve ``chat`` and ``context.memory`` against ``settings.targets`` by the
    rules of MEMORY_SPEC §10 (see module docstring). Pure; never raises."""
    targets = {t.id: Target.from_settings(t) for t in settings.targets}
    notes: list[str] = []
    implicit_embedded = embedded_installed and EMBEDDED_TARGET_ID not in targets
    if implicit_embedded:
        targets[EMBEDDED_TARGET_ID] = embedded_target()
    no_targets = not settings.targets

    def role(name: Role, target_id: str | None, model: str | None) -> Route | None:
        label = "chat" if name == "chat" else "context.memory"
        if name == "chat" and target_id is None and no_targets and implicit_embedded:
            target_id = EMBEDDED_TARGET_ID  # never for memory: the LLM tier is opt-in
        if target_id is None:
            if model is not None:
                notes.append(f"{label}.model {model!r} ignored: no target")
            return None
        target = targets.get(target_id)
        if target is None:
            notes.append(f"{label}.target {target_id!r} names no target: role unset")
            return None
        return Route(name, target, model or target.default_model)

    chat = role("chat", settings.chat.target, settings.chat.model)
    memory_settings = settings.context.memory
    memory = role("memory", memory_settings.target, memory_settings.model)
    if (
        memory is not None
        and chat is not None
        and memory.key == chat.key
        and memory.model is not None
        and memory.model in memory.target.always_reasoning_models
    ):
        notes.append(
            f"context.memory shares chat's always-reasoning model {memory.model!r}: LLM tier off"
        )
        memory = None
    implicit = chat is not None and settings.chat.target is None
    return RouteTable(
        chat=chat, memory=memory, targets=targets, notes=tuple(notes), implicit_chat=implicit
    )


@dataclass
class MemoryAnswer:
    """A memory completion: ``text`` and ``usage`` of the attempt that answered,
    ``target_id``/``model`` it ran on, ``constrained`` (grammar sent),
    ``fell_back`` (the chat route answered after the memory route failed)."""

    text: str
    usage: Usage | None
    target_id: str
    model: str | None
    constrained: bool
    fell_back: bool = False
    latency_ms: float = 0.0
    completion: Completion | None = None


UsageCallback = Callable[[str, str | None, Usage], None]
"""``(target_id, model, usage)`` — called once per attempt that reported usage."""


class Router:
    """A session's routing snapshot. Create per session; ``await aclose()`` at the
    end (closes its HTTP clients; the embedded server is process-wide)."""

    def __init__(
        self,
        settings: Settings,
        *,
        paths: Paths | None = None,
        tracker: CapacityTracker = DEFAULT_TRACKER,
        local: LocalModelManager | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.paths = paths or resolve_paths()
        self.settings = settings
        self.tracker = tracker
        self._local = local
        self._env = env
        installed = local is not None or embedded_installed(self.paths)
        self.table = resolve_routes(settings, embedded_installed=installed)
        self._clients: dict[tuple[str, str], ModelClient] = {}
        self._live_targets: dict[str, Target] = {}
        for note in self.table.notes:
            log.warning("routing: %s", note)

    @property
    def chat_route(self) -> Route | None:
        """The chat role's route, or None when no chat target is configured."""
        return self.table.chat

    @property
    def memory_route(self) -> Route | None:
        """The memory role's route, or None (rules tier only)."""
        return self.table.memory

    async def aclose(self) -> None:
        """Close every model client the router opened (idempotent)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    # -- targets and clients --------------------------------------------------
    async def live_target(self, target: Target) -> Target:
        """``target`` with a URL: an ``embedded`` target starts the local server
        (declared capacity = its slots). Raises ``RouteError``."""
        if target.base_url is not None:
            return target
        cached = self._live_targets.get(target.id)
        if cached is not None:
            return cached
        manager = self._local or local_manager(self.paths)
        url = await manager.ensure_started()
        live = replace(
            target.with_base_url(url),
            declared_capacity=manager.slots,
            api_key_value=manager.api_key,
        )
        self._live_targets[target.id] = live
        return live

    async def client(self, target: Target) -> ModelClient:
        """The (shared) client of ``target``, starting the embedded server if needed."""
        live = await self.live_target(target)
        key = (live.id, live.base_url or "")
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = ModelClient(live)
        return client

    async def capacity(self, target: Target) -> tuple[Target, Capacity]:
        """The live target and its resolved capacity (discovery at most once)."""
        live = await self.live_target(target)
        client = await self.client(live)
        return live, await self.tracker.resolve(live, client.discover_slots)

    def route(self, role: Role) -> Route:
        """The route of ``role``; ``RouteError`` when unset."""
        route = self.table.chat if role == "chat" else self.table.memory
        if route is None:
            raise RouteError(f"no {role} route configured (set {role} target in settings)")
        return route

    # -- chat -----------------------------------------------------------------
    async def chat_window(self) -> int | None:
        """The chat route's context window as its server reports it, tokens
        (``ModelClient.discover_window``; starts the embedded server), or None.
        Raises ``RouteError`` when no chat route is set or the target cannot start."""
        route = self.route("chat")
        client = await self.client(route.target)
        return await client.discover_window(route.model)

    def chat_max_tokens(self, target: Target) -> int:
        """The chat output cap: ``chat.maxOutputTokens``, else the runtime's default
        (small on the embedded model)."""
        if self.settings.chat.max_output_tokens is not None:
            return self.settings.chat.max_output_tokens
        if target.runtime == "embedded":
            return EMBEDDED_CHAT_MAX_OUTPUT_TOKENS_DEFAULT
        return CHAT_MAX_OUTPUT_TOKENS_DEFAULT

    async def stream_chat(
        self, request: ChatRequest, *, timeout_ms: int | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Stream a chat answer on the chat route (the route's model unless the
        request names one), counting a foreground lease while it streams. The answer
        is capped (``chat_max_tokens`` unless the request sets ``max_tokens``) and
        guarded against loops (finish reason ``repetition``). On a ``constrained``
        tool-calling target that takes a grammar, a request with tools goes through
        ``models/tool_calling.py``: the call phase yields no text deltas and one
        tool call. Raises ``RouteError`` and the client's typed errors."""
        route = self.route("chat")
        live = await self.live_target(route.target)
        client = await self.client(live)
        request = replace(
            request,
            model=request.model or route.model,
            max_tokens=request.max_tokens or self.chat_max_tokens(live),
            seed=request.seed if request.seed is not None else self.settings.chat.seed,
            repetition_guard=True,
        )
        tools = list(request.tools or [])
        calling = bool(tools) and live.tool_calling == "constrained"
        if calling and not live.dialect.supports_grammar:
            calling = False  # native tools; the route note says why
        call_phase = calling and tool_calling.wants_tool_call(request.messages)
        if calling:
            request = (
                tool_calling.call_request(request)
                if call_phase
                else tool_calling.answer_request(request)
            )
        with self.tracker.foreground(live.endpoint_key):
            async with contextlib.aclosing(
                client.stream(request, timeout_ms=timeout_ms or live.request_timeout_ms)
            ) as events:
                async for event in events:
                    if call_phase and isinstance(event, TextDelta):
                        continue  # the call's JSON is not an answer to show
                    if call_phase and isinstance(event, Done):
                        event = Done(tool_calling.completion_as_tool_call(event.completion, tools))
                    yield event

    # -- memory ---------------------------------------------------------------
    async def memory_complete(
        self,
        system: str,
        user: str,
        max_tokens: int,
        *,
        timeout_ms: int | None = None,
        on_usage: UsageCallback | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> MemoryAnswer:
        """One memory-step completion (MEMORY_SPEC §3, §10, §12.9).

        Thinking off; the envelope grammar sized to ``max_tokens``
        (``envelope_grammar_for_budget``) when ``context.memory.constrainedDecoding``
        and the runtime supports it. ``timeout_ms`` (default
        ``context.memory.timeoutMs``) bounds both attempts together. Raises
        ``RouteError`` (no memory route), ``EndpointBusyError`` (no free slot: skip
        the step), ``ModelTimeoutError``, ``MalformedStreamError``, or the
        ``ModelClientError`` of the last attempt.
        """
        memory = self.route("memory")
        budget_ms = timeout_ms or self.settings.context.memory.timeout_ms
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget_ms / 1000
        try:
            return await self._memory_attempt(
                memory, system, user, max_tokens, deadline, budget_ms, on_usage, extra, False
            )
        except ModelClientError as first:
            chat = self.table.chat
            if chat is None or chat.target.id == memory.target.id:
                raise
            left_ms = int((deadline - loop.time()) * 1000)
            if left_ms <= 0:
                raise ModelTimeoutError(
                    f"memory step deadline spent before the fallback ({budget_ms} ms)",
                    target_id=chat.target.id,
                    timeout_ms=budget_ms,
                ) from first
            log.info(
                "memory route %s failed (%s); one fallback to chat route", memory.target.id, first
            )
            return await self._memory_attempt(
                chat, system, user, max_tokens, deadline, budget_ms, on_usage, extra, True
            )

    async def _memory_attempt(
        self,
        route: Route,
        system: str,
        user: str,
        max_tokens: int,
        deadline: float,
        budget_ms: int,
        on_usage: UsageCallback | None,
        extra: Mapping[str, object] | None,
        fell_back: bool,
    ) -> MemoryAnswer:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                live, capacity = await self.capacity(route.target)
        except TimeoutError:
            raise ModelTimeoutError(
                f"memory step: target {route.target.id!r} not ready within {budget_ms} ms",
                target_id=route.target.id,
                timeout_ms=budget_ms,
            ) from None
        lease: Lease = self.tracker.try_background(live.endpoint_key, capacity, target_id=live.id)
        with lease:
            client = await self.client(live)
            grammar = (
                envelope_grammar_for_budget(max_tokens)
                if self.settings.context.memory.constrained_decoding
                and live.dialect.supports_grammar
                else None
            )
            request = ChatRequest(
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                model=route.model,
                max_tokens=max_tokens,
                thinking=False,
                grammar=grammar,
                extra=dict(extra or {}),
            )
            left_ms = max(1, int((deadline - loop.time()) * 1000))
            completion = await client.complete(request, timeout_ms=left_ms)
        if completion.usage is not None and on_usage is not None:
            try:
                on_usage(live.id, completion.model or route.model, completion.usage)
            except Exception:  # accounting must never break the step (MEMORY_SPEC §3)
                log.exception("usage callback failed")
        return MemoryAnswer(
            text=completion.text,
            usage=completion.usage,
            target_id=live.id,
            model=route.model or completion.model,
            constrained=completion.constrained,
            fell_back=fell_back,
            latency_ms=completion.latency_ms,
            completion=completion,
        )
