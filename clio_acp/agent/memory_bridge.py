"""Bridge from the agent loop's memory port to the memory middleware.

Owns ``MiddlewareHooks``, the ``MemoryHooks`` implementation (``memory_port``) that
the session core gets from ``memory_adapter.create``: it translates the loop's hook
calls and ``ToolObservation`` into ``clio_acp.memory.middleware`` calls and the
middleware's effects back into the port's effect classes; it confirms a restore
offer (§12.6) when the loop drains reminders right before a model request; and it
builds the LLM tier's client from the session's model router (``context.memory``
route; none → rules tier only). It holds no memory policy of its own, and it is the
only place where the agent layer and the memory middleware meet (memory must not
import the agent layer).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clio_acp.agent import memory_port as port
from clio_acp.memory import middleware as mw
from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.promotion import make_auto_proposal_hook
from clio_acp.memory.spend import fold_spend_file, format_spend
from clio_acp.memory.store import MemoryStore
from clio_acp.memory.telemetry import MemoryTrace, TelemetrySink
from clio_acp.paths import Paths
from clio_acp.settings import MemorySettings, Settings

__all__ = ["MiddlewareHooks", "RouterMemoryClient", "create_hooks"]

log = logging.getLogger(__name__)


class RouterMemoryClient:
    """``MemoryCompletionClient`` (``clio_acp.memory.policy``) over the models
    router's ``memory_complete``. Router errors propagate unchanged; the policy
    classifies them (busy endpoint, timeout, client error). Each attempt's usage is
    reported under its own target/model; the answer carries the route that answered
    and its decoding mode (``grammar`` when the envelope grammar was sent, else
    ``free``) for the step's telemetry row (MEMORY_SPEC §5, §12.9)."""

    def __init__(self, router: Any) -> None:
        self._router = router

    async def complete(
        self,
        system: str,
        user: str,
        max_tokens: int,
        *,
        abort: asyncio.Event,
        on_usage: Callable[[Any], None],
    ) -> Any:
        from clio_acp.memory.policy import CompletionAnswer, CompletionUsage

        def usage_cb(target_id: str, model: str | None, usage: Any) -> None:
            # One report per attempt, each under its own route (§5 usage rows).
            on_usage(
                CompletionUsage(
                    usage.input_tokens, usage.output_tokens, target_id=target_id, model_id=model
                )
            )

        answer = await self._router.memory_complete(system, user, max_tokens, on_usage=usage_cb)
        usage = None
        if answer.usage is not None:
            usage = CompletionUsage(
                answer.usage.input_tokens,
                answer.usage.output_tokens,
                target_id=answer.target_id,
                model_id=answer.model,
            )
        if answer.fell_back:
            log.info("memory step answered by the chat route %s", answer.target_id)
        return CompletionAnswer(
            answer.text,
            usage,
            target_id=answer.target_id,
            model_id=answer.model,
            # §12.9: the router sends the envelope grammar when the route takes one.
            decoding="grammar" if answer.constrained else "free",
        )


def _convert(effects: list[mw.Effect]) -> list[port.MemoryEffect]:
    out: list[port.MemoryEffect] = []
    for effect in effects:
        if isinstance(effect, mw.AnnotateToolResult):
            out.append(
                port.AnnotateToolResult(effect.text, effect.cited, effect.trigger, effect.severity)
            )
        elif isinstance(effect, mw.InjectReminder):
            out.append(
                port.InjectReminder(effect.text, effect.cited, effect.trigger, effect.channel)
            )
        elif isinstance(effect, mw.StopTurn):
            out.append(port.StopTurn(effect.notice))
    return out


class MiddlewareHooks:
    """``MemoryHooks`` over one ``MemoryMiddleware`` (MEMORY_SPEC §4, §10, §12).

    The loop's turn is a user prompt; ``take_deferred`` runs right before each
    model request, so a restore offer handed out earlier is confirmed there."""

    def __init__(self, middleware: mw.MemoryMiddleware, settings: Callable[[], Settings]) -> None:
        self.middleware = middleware
        self._settings = settings
        self._offers: list[str] = []
        self._on_dispose: Callable[[], None] | None = None

    def _track(self, effects: list[mw.Effect]) -> list[port.MemoryEffect]:
        for effect in effects:
            if isinstance(effect, mw.InjectReminder) and effect.offer_id:
                self._offers.append(effect.offer_id)
        return _convert(effects)

    def turn_start(self, session_id: str, turn_id: str, text: str) -> list[port.MemoryEffect]:
        return self._track(self.middleware.turn_start(turn_id, text, session_id=session_id))

    def before_tool(
        self, session_id: str, tool_call_id: str, tool_name: str, arguments: dict[str, Any]
    ) -> list[port.MemoryEffect]:
        call = mw.ToolCall(tool_name, arguments, tool_call_id)
        return self._track(self.middleware.before_tool(call, session_id=session_id))

    def after_tool(
        self, session_id: str, observation: port.ToolObservation
    ) -> list[port.MemoryEffect]:
        kind = "edit" if observation.category == "edit" else None
        call = mw.ToolCall(
            observation.tool_name, observation.arguments, observation.tool_call_id, kind
        )
        outcome = mw.ToolOutcome(
            output=observation.output,
            is_error=not observation.ok,
            exit_code=observation.exit_code,
            digest=None if observation.ok else (observation.digest or None),
        )
        return self._track(self.middleware.after_tool(call, outcome, session_id=session_id))

    def turn_end(self, session_id: str, turn_id: str) -> list[port.MemoryEffect]:
        return self._track(self.middleware.turn_end(turn_id, session_id=session_id))

    def evaluate_turn_end(self, session_id: str, turn_id: str) -> None:
        self.middleware.evaluate_detached(turn_id, session_id=session_id)

    def take_deferred(self) -> list[port.InjectReminder]:
        offers, self._offers = self._offers, []
        for offer_id in offers:  # the request carrying them is about to be sent
            self.middleware.confirm_delivery(offer_id)
        return [
            e
            for e in _convert(list(self.middleware.take_deferred()))
            if isinstance(e, port.InjectReminder)
        ]

    def discard_deferred(self) -> None:
        self._offers = []  # not delivered: the offer stays pending (§12.6)
        self.middleware.discard_deferred()

    def on_compaction(self, session_id: str, metadata: dict[str, Any]) -> list[port.MemoryEffect]:
        stage = metadata.get("stage") if isinstance(metadata, dict) else None
        return self._track(
            self.middleware.on_compaction(stage, offer_now=True, session_id=session_id)
        )

    def signal_loop(self) -> None:
        self.middleware.signal_loop()

    def note_workspace_change(self) -> None:
        self.middleware.note_workspace_change()

    def bank_status(self) -> str | None:
        status = self.middleware.bank.status
        return status.content if status is not None else None

    def task_bank(self) -> TaskMemoryBank:
        return self.middleware.bank

    def snapshot(self) -> dict[str, Any] | None:
        return self.middleware.bank.snapshot()

    def counters(self) -> dict[str, Any] | None:
        return self.middleware.export_state()

    def restore(
        self, snapshot: dict[str, Any] | None, counters: dict[str, Any] | None
    ) -> list[port.MemoryEffect]:
        if snapshot:
            self.middleware.bank.restore(snapshot)
        memory_counters = {k: v for k, v in (counters or {}).items() if k != "progressGuard"}
        if memory_counters.get("version") == 1:
            try:
                self.middleware.import_state(memory_counters)
            except ValueError:
                log.warning("memory counters not restored", exc_info=True)
        if not snapshot:
            return []
        return self._track(self.middleware.offer_restore_after_resume())

    def board(self) -> dict[str, Any]:
        board = self.middleware.board()
        bank = dict(board.get("bank") or {})
        bank.pop("status", None)  # the board's bank view is status-free (session.board)
        board["bank"] = bank
        telemetry = self.middleware.telemetry
        spend = fold_spend_file(telemetry.path) if telemetry.path else None
        board["spend"] = spend.to_dict() if spend else None
        board["spendLine"] = format_spend(spend) if spend else ""
        return board

    def reset(self) -> None:
        self._offers = []
        self.middleware.reset()

    def dispose(self) -> None:
        self._offers = []
        self.middleware.dispose()
        if self._on_dispose is not None:
            self._on_dispose()


def create_hooks(
    *,
    session_id: str,
    cwd: Path,
    settings: Callable[[], Settings],
    delivers_reminders: bool,
    paths: Paths,
    router_factory: Callable[[Settings], Any] | None = None,
    on_proposed: Callable[[list[Any]], Any] | None = None,
) -> MiddlewareHooks:
    """The memory registration of one session: a ``MemoryMiddleware`` writing
    telemetry to ``<state>/memory/steps.jsonl`` and usage rows to
    ``<state>/usage/out-of-turn.jsonl``, tracing to ``CLIO_ACP_MEMORY_TRACE`` when set,
    with an LLM tier only when ``context.memory.target`` names a route."""

    cache: dict[str, Any] = {}

    def client_factory(memory: MemorySettings) -> Any:
        if not memory.target:
            return None
        key = f"{memory.target}\0{memory.model}"
        if cache.get("key") != key:
            old = cache.pop("router", None)
            if old is not None:
                _close_later(old)
            make = router_factory
            if make is None:
                from clio_acp.models.routing import Router

                def make(s: Settings) -> Any:
                    return Router(s, paths=paths)

            cache["router"], cache["key"] = make(settings()), key
        router = cache["router"]
        if getattr(router, "memory_route", None) is None:
            return None
        return RouterMemoryClient(router)

    holder: list[mw.MemoryMiddleware] = []
    # §6 auto-proposal: cited entries of an LLM-tier injection become unapproved,
    # repo-scoped durable records (the middleware never calls this for rules-tier
    # reminders or a stale generation).
    propose = make_auto_proposal_hook(
        MemoryStore(paths.records_file),
        bank=lambda: holder[0].bank if holder else None,
        session_id=lambda: session_id,
        cwd=lambda: cwd,
        on_proposed=on_proposed,
    )
    middleware = mw.MemoryMiddleware(
        settings,
        on_injected_entries=propose,
        telemetry=TelemetrySink(paths.steps_file),
        trace=MemoryTrace.from_env(),
        client_factory=client_factory,
        delivers_reminders=delivers_reminders,
        usage_path=paths.usage_file,
        session_id=session_id,
        workspace_root=cwd,
    )
    holder.append(middleware)
    hooks = MiddlewareHooks(middleware, settings)
    hooks._on_dispose = lambda: _close_later(cache.pop("router", None))
    return hooks


def _close_later(router: Any) -> None:
    """Close a router's HTTP clients without blocking the caller."""
    if router is None or not hasattr(router, "aclose"):
        return
    try:
        asyncio.get_running_loop().create_task(router.aclose())
    except RuntimeError:
        pass  # no loop: the process is ending and its clients go with it
