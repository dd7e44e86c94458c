"""The one seam between the agent loop / session and task memory (MEMORY_SPEC §4, §6,
§7, §10, §12).

Owns ``MemoryHooks``, the protocol the loop calls around a turn and every tool call
and the session calls for everything else it needs from memory (the ``/memory``
board, save and restore, handoff, workspace changes, proposals, activity); one do-
nothing implementation (``NullMemory``, memory off); and ``MiddlewareHooks``, the
implementation over ``clio_acp.memory.middleware.MemoryMiddleware``. Effects are the
middleware's own types (``AnnotateToolResult``, ``InjectReminder``, ``StopTurn``),
passed through unchanged, so ``tool_call_id``, ``offer_id`` and ``paths`` reach the
loop and the faces. The loop never calls a memory model: it appends
``AnnotateToolResult`` text to that tool's result, delivers ``InjectReminder`` text
as a ``<system-reminder>`` block and ends the turn on ``StopTurn`` (§12.4).

It also builds the LLM tier's completion client over the models router
(``RouterMemoryClient``, mapping the models layer's busy error to memory's own
``EndpointBusy``), the approved durable-memory prompt section (§6), the handoff
offer for a resumed workspace and the ``/handoff`` facts from journal rows (§12.8).
Memory must not import the agent layer: this module is where the two meet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from clio_acp.agent import history
from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.middleware import (
    AnnotateToolResult,
    Effect,
    InjectReminder,
    MemoryMiddleware,
    StopTurn,
    ToolCall,
    ToolOutcome,
)
from clio_acp.memory.policy import CompletionAnswer, CompletionUsage, EndpointBusy
from clio_acp.memory.promotion import make_auto_proposal_hook
from clio_acp.memory.spend import fold_spend_file, format_spend
from clio_acp.memory.store import MemoryStore
from clio_acp.memory.telemetry import MemoryTrace, TelemetrySink
from clio_acp.paths import Paths
from clio_acp.settings import MemorySettings, Settings

__all__ = [
    "AnnotateToolResult",
    "InjectReminder",
    "MemoryEffect",
    "MemoryHooks",
    "MiddlewareHooks",
    "NullMemory",
    "ProposalSink",
    "RouterMemoryClient",
    "StopTurn",
    "ToolObservation",
    "create_hooks",
    "durable_prompt_section",
    "find_handoff_offer",
    "handoff_facts",
]

log = logging.getLogger(__name__)

MemoryEffect = Effect
"""What a hook returns: ``AnnotateToolResult | InjectReminder | StopTurn``."""

ProposalSink = Callable[[list[Any]], None]
"""Receives the durable records (``MemoryRecord``) the memory step auto-proposed (§6)."""


@dataclass(frozen=True)
class ToolObservation:
    """What the loop tells memory about one finished tool call. ``ok`` is the tool's
    verdict; ``digest`` its disposition digest; ``category`` the permission category
    (read, edit — state-changing — or execute); ``output`` the full result text."""

    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    ok: bool
    digest: str
    exit_code: int | None = None
    category: str = "read"
    output: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


class MemoryHooks(Protocol):
    """One registration per live session. Every method is exception-safe (a failure
    yields no effects) and never blocks the turn. The bodies here are the memory-off
    behaviour ``NullMemory`` inherits; ``MiddlewareHooks`` implements every method
    itself (a missing one is an error there, never a silent no-op)."""

    def turn_start(self, session_id: str, turn_id: str, text: str) -> list[MemoryEffect]:
        """A prompt turn starts (§4 turn_start): the restore offer and deferred reminders."""
        return []

    def before_tool(
        self, session_id: str, tool_call_id: str, tool_name: str, arguments: dict[str, Any]
    ) -> list[MemoryEffect]:
        """A tool call is about to run (§4)."""
        return []

    def after_tool(self, session_id: str, observation: ToolObservation) -> list[MemoryEffect]:
        """A tool call finished (§4, §12.1–12.4): annotations and the loop stop."""
        return []

    def turn_end(self, session_id: str, turn_id: str) -> list[MemoryEffect]:
        """The turn ended (§4 turn_end)."""
        return []

    def evaluate_turn_end(self, session_id: str, turn_id: str) -> None:
        """Start the detached LLM-tier step if due (never awaited by the turn)."""
        return None

    def completion_check(self, session_id: str, turn_id: str) -> list[MemoryEffect]:
        """The model answered without tool calls (§13.6): at most once per task, a
        reminder listing the captured requirements; the loop then lets the model
        continue once."""
        return []

    def take_deferred(self) -> list[InjectReminder]:
        """Drain reminders buffered for the next request (confirms restore offers
        handed out earlier: the request carrying them is about to be sent, §12.6)."""
        return []

    def discard_deferred(self) -> None:
        """Drop buffered reminders (their turn was aborted); a restore offer stays."""
        return None

    def on_compaction(self, session_id: str, metadata: dict[str, Any]) -> list[MemoryEffect]:
        """A compaction happened; may return the restore reminder for the next request."""
        return []

    def signal_loop(self) -> None:
        """The loop guard fired (§4 ``loop_signal`` trigger)."""
        return None

    def note_workspace_change(self) -> None:
        """The file watcher saw the workspace change: repeat counts restart (§12.1)."""
        return None

    def unresolved_failures(self) -> list[str]:
        """One line per failure whose latest outcome is still an error (§12.8)."""
        return []

    def activity(self) -> list[dict[str, Any]]:
        """The activity ring, newest first (§4): the loop journals new items."""
        return []

    def set_proposal_sink(self, sink: ProposalSink | None) -> None:
        """Where auto-proposed durable records go (the session's event stream, §6)."""
        return None

    def step_in_flight(self) -> bool:
        """True while a detached memory step runs."""
        return False

    async def wait_idle(self) -> None:
        """Wait for the in-flight memory step, if any (eval, replay, tests)."""
        return None

    def bank_status(self) -> str | None:
        """The bank's status text, for progress reminders (§12.10)."""
        return None

    def snapshot(self) -> dict[str, Any] | None:
        """Bank snapshot to save in the journal (§12.7)."""
        return None

    def counters(self) -> dict[str, Any] | None:
        """Counters that survive compaction and resume (§12.4)."""
        return None

    def restore(
        self, snapshot: dict[str, Any] | None, counters: dict[str, Any] | None
    ) -> list[MemoryEffect]:
        """Restore a saved session's bank; may return a restore reminder (§12.6)."""
        return []

    def board(self) -> dict[str, Any]:
        """The ``/memory`` board: enabled, tier, size, last decision, bank, activity."""
        return {
            "enabled": False,
            "tier": "off",
            "size": 0,
            "lastDecision": None,
            "bank": None,
            "activity": [],
        }

    def task_bank(self) -> TaskMemoryBank | None:
        """The live task bank (handoff, seed), or None when memory is off."""
        return None

    def reset(self) -> None:
        """Clear the bank and all state (a session change, invariant 1)."""
        return None

    def dispose(self) -> None:
        """Reset and refuse all future work."""
        return None


class NullMemory(MemoryHooks):
    """Memory off: every hook does nothing and the board says ``enabled: false``."""


class RouterMemoryClient:
    """``MemoryCompletionClient`` (``clio_acp.memory.policy``) over the models
    router's ``memory_complete``. A busy endpoint (the models layer's
    ``EndpointBusyError``) is raised as memory's own ``EndpointBusy``; other router
    errors propagate unchanged and the policy classifies them (timeout, client
    error). Each attempt's usage is reported under its own target/model; the answer
    carries the route that answered and its decoding mode (``grammar`` when the
    envelope grammar was sent, else ``free``) for the step's telemetry row
    (MEMORY_SPEC §5, §12.9)."""

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
    ) -> CompletionAnswer:
        """One memory completion (``max_tokens`` output cap). Raises
        ``EndpointBusy`` for a busy endpoint, any other router error as is."""
        from clio_acp.models.errors import EndpointBusyError

        def usage_cb(target_id: str, model: str | None, usage: Any) -> None:
            # One report per attempt, each under its own route (§5 usage rows).
            on_usage(
                CompletionUsage(
                    usage.input_tokens, usage.output_tokens, target_id=target_id, model_id=model
                )
            )

        try:
            answer = await self._router.memory_complete(system, user, max_tokens, on_usage=usage_cb)
        except EndpointBusyError as exc:
            raise EndpointBusy(str(exc)) from exc
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
            **_grammar_limits(answer.constrained, max_tokens),
        )


def _grammar_limits(constrained: bool, max_tokens: int) -> dict[str, int]:
    """The grammar's content and reminder bounds for a constrained answer (a string
    that long was cut by the grammar: the policy drops it, MEMORY_SPEC §14)."""
    if not constrained:
        return {}
    from clio_acp.models.grammar import envelope_bounds_for_budget

    _ops, content, reminder = envelope_bounds_for_budget(max_tokens)
    return {"content_limit": content, "reminder_limit": reminder}


class MiddlewareHooks:
    """``MemoryHooks`` over one ``MemoryMiddleware`` (MEMORY_SPEC §4, §10, §12).

    The loop's turn is a user prompt; ``take_deferred`` runs right before each
    model request, so a restore offer handed out earlier is confirmed there."""

    def __init__(self, middleware: MemoryMiddleware) -> None:
        self.middleware = middleware
        self._offers: list[str] = []
        self._proposal_sink: ProposalSink | None = None
        self._on_dispose: Callable[[], None] | None = None

    def _track(self, effects: list[Effect]) -> list[MemoryEffect]:
        for effect in effects:
            if isinstance(effect, InjectReminder) and effect.offer_id:
                self._offers.append(effect.offer_id)
        return effects

    def relay_proposals(self, records: list[Any]) -> None:
        """Forward auto-proposed durable records to the sink, if one is set (records
        proposed before that are only in records.json)."""
        if self._proposal_sink is not None:
            self._proposal_sink(records)

    def set_proposal_sink(self, sink: ProposalSink | None) -> None:
        """Auto-proposed records go to ``sink`` from now on (None: nowhere)."""
        self._proposal_sink = sink

    def turn_start(self, session_id: str, turn_id: str, text: str) -> list[MemoryEffect]:
        """``MemoryMiddleware.turn_start``; restore offers it returns are tracked."""
        return self._track(self.middleware.turn_start(turn_id, text, session_id=session_id))

    def before_tool(
        self, session_id: str, tool_call_id: str, tool_name: str, arguments: dict[str, Any]
    ) -> list[MemoryEffect]:
        """``MemoryMiddleware.before_tool`` for this call."""
        call = ToolCall(tool_name, arguments, tool_call_id)
        return self._track(self.middleware.before_tool(call, session_id=session_id))

    def after_tool(self, session_id: str, observation: ToolObservation) -> list[MemoryEffect]:
        """``MemoryMiddleware.after_tool``: the observation as ``ToolCall`` +
        ``ToolOutcome`` (an edit-category call is state-changing; the digest
        counts only for a failure)."""
        kind = "edit" if observation.category == "edit" else None
        call = ToolCall(
            observation.tool_name, observation.arguments, observation.tool_call_id, kind
        )
        outcome = ToolOutcome(
            output=observation.output,
            is_error=not observation.ok,
            exit_code=observation.exit_code,
            digest=None if observation.ok else (observation.digest or None),
        )
        return self._track(self.middleware.after_tool(call, outcome, session_id=session_id))

    def turn_end(self, session_id: str, turn_id: str) -> list[MemoryEffect]:
        """``MemoryMiddleware.turn_end``."""
        return self._track(self.middleware.turn_end(turn_id, session_id=session_id))

    def evaluate_turn_end(self, session_id: str, turn_id: str) -> None:
        """``MemoryMiddleware.evaluate_detached``: maybe start the LLM step."""
        self.middleware.evaluate_detached(turn_id, session_id=session_id)

    def completion_check(self, session_id: str, turn_id: str) -> list[MemoryEffect]:
        """``MemoryMiddleware.completion_check``."""
        return self._track(self.middleware.completion_check(turn_id, session_id=session_id))

    def take_deferred(self) -> list[InjectReminder]:
        """Confirm the tracked restore offers (§12.6), then drain the deferred
        reminders."""
        offers, self._offers = self._offers, []
        for offer_id in offers:  # the request carrying them is about to be sent
            self.middleware.confirm_delivery(offer_id)
        return self.middleware.take_deferred()

    def discard_deferred(self) -> None:
        """Forget the tracked offers (they stay pending) and drop the deferred
        reminders."""
        self._offers = []  # not delivered: the offer stays pending (§12.6)
        self.middleware.discard_deferred()

    def on_compaction(self, session_id: str, metadata: dict[str, Any]) -> list[MemoryEffect]:
        """``MemoryMiddleware.on_compaction`` with the restore offered at once."""
        stage = metadata.get("stage") if isinstance(metadata, dict) else None
        return self._track(
            self.middleware.on_compaction(stage, offer_now=True, session_id=session_id)
        )

    def signal_loop(self) -> None:
        """``MemoryMiddleware.signal_loop``."""
        self.middleware.signal_loop()

    def note_workspace_change(self) -> None:
        """``MemoryMiddleware.note_workspace_change``."""
        self.middleware.note_workspace_change()

    def unresolved_failures(self) -> list[str]:
        """``MemoryMiddleware.unresolved_failures``."""
        return self.middleware.unresolved_failures()

    def activity(self) -> list[dict[str, Any]]:
        """``MemoryMiddleware.activity`` (newest first)."""
        return self.middleware.activity

    def step_in_flight(self) -> bool:
        """``MemoryMiddleware.step_in_flight``."""
        return self.middleware.step_in_flight

    async def wait_idle(self) -> None:
        """``MemoryMiddleware.wait_idle``."""
        await self.middleware.wait_idle()

    def bank_status(self) -> str | None:
        """The status entry's content (brought up to date first, §13.5), or None."""
        self.middleware.sync_status()
        status = self.middleware.bank.status
        return status.content if status is not None else None

    def task_bank(self) -> TaskMemoryBank:
        """The middleware's live bank."""
        return self.middleware.bank

    def snapshot(self) -> dict[str, Any] | None:
        """``TaskMemoryBank.snapshot`` of the live bank (rules status synced first)."""
        self.middleware.sync_status()
        return self.middleware.bank.snapshot()

    def counters(self) -> dict[str, Any] | None:
        """``MemoryMiddleware.export_state``."""
        return self.middleware.export_state()

    def restore(
        self, snapshot: dict[str, Any] | None, counters: dict[str, Any] | None
    ) -> list[MemoryEffect]:
        """Restore the bank, then the counters (a malformed counter snapshot is
        logged and skipped), then offer the restore after resume."""
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
        """The middleware board with a status-free bank view and the spend figures
        from steps.jsonl."""
        self.middleware.sync_status()
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
        """Forget tracked offers and reset the middleware."""
        self._offers = []
        self.middleware.reset()

    def dispose(self) -> None:
        """Dispose the middleware and close its router."""
        self._offers = []
        self.middleware.dispose()
        if self._on_dispose is not None:
            self._on_dispose()


def _router_client_factory(
    settings: Callable[[], Settings],
    paths: Paths,
    router_factory: Callable[[Settings], Any] | None,
) -> tuple[Callable[[MemorySettings], Any], Callable[[], None]]:
    """(client factory for the middleware, closer of the cached router). The router
    is rebuilt when the memory target or model changes; no target → rules tier."""
    cache: dict[str, Any] = {}

    def make(s: Settings) -> Any:
        if router_factory is not None:
            return router_factory(s)
        from clio_acp.models.routing import Router

        return Router(s, paths=paths)

    def client_factory(memory: MemorySettings) -> Any:
        if not memory.target:
            return None
        key = f"{memory.target}\0{memory.model}"
        if cache.get("key") != key:
            _close_later(cache.pop("router", None))
            cache["router"], cache["key"] = make(settings()), key
        router = cache["router"]
        if getattr(router, "memory_route", None) is None:
            return None
        return RouterMemoryClient(router)

    return client_factory, lambda: _close_later(cache.pop("router", None))


def create_hooks(
    *,
    session_id: str,
    cwd: Path,
    settings: Callable[[], Settings],
    delivers_reminders: bool,
    paths: Paths,
    router_factory: Callable[[Settings], Any] | None = None,
) -> MiddlewareHooks:
    """The memory registration of one session (the caller resets it before use): a
    ``MemoryMiddleware`` writing telemetry to ``<state>/memory/steps.jsonl`` and
    usage rows to ``<state>/usage/out-of-turn.jsonl``, tracing to
    ``CLIO_ACP_MEMORY_TRACE`` when set, with an LLM tier only when
    ``context.memory.target`` names a route (``router_factory`` replaces the models
    router, for tests). Cited entries of an LLM-tier injection become unapproved,
    repository-scoped durable records (§6), relayed to ``set_proposal_sink``."""
    client_factory, close_router = _router_client_factory(settings, paths, router_factory)
    holder: list[MiddlewareHooks] = []
    propose = make_auto_proposal_hook(
        MemoryStore(paths.records_file),
        bank=lambda: holder[0].middleware.bank if holder else None,
        session_id=lambda: session_id,
        cwd=lambda: cwd,
        on_proposed=lambda records: holder[0].relay_proposals(records) if holder else None,
    )
    middleware = MemoryMiddleware(
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
    hooks = MiddlewareHooks(middleware)
    hooks._on_dispose = close_router
    holder.append(hooks)
    return hooks


def _close_later(router: Any) -> None:
    """Close a router's HTTP clients without blocking the caller."""
    if router is None or not hasattr(router, "aclose"):
        return
    try:
        asyncio.get_running_loop().create_task(router.aclose())
    except RuntimeError:
        pass  # no loop: the process is ending and its clients go with it


def durable_prompt_section(cwd: Path, settings: Settings, paths: Paths) -> str:
    """The approved durable-memory prompt section for ``cwd`` (MEMORY_SPEC §6), or ""
    when memory is off, the store is missing or unreadable (logged). Blocking: call
    it in a worker thread."""
    if not settings.context.memory.enabled:
        return ""
    from clio_acp.memory.identity import canonical_repository_identity
    from clio_acp.memory.retrieval import ActiveIdentity, build_prompt_section
    from clio_acp.memory.store import MemoryStoreError

    if not paths.records_file.exists():
        return ""
    try:
        records = MemoryStore(paths.records_file).load()
    except MemoryStoreError as exc:
        log.warning("durable memory not used: %s", exc)
        return ""
    active = ActiveIdentity(repository=canonical_repository_identity(str(cwd)))
    return build_prompt_section(records, active).text


def find_handoff_offer(cwd: Path, bank: Any = None) -> tuple[str, int] | None:
    """(basename, entry count) of the newest valid handoff in ``cwd`` (§7), or None.
    With ``bank``, the count is of the entries seeding would add to it, and None when
    it would add nothing (a resumed session already holds them). Blocking: call it in
    a worker thread."""
    from clio_acp.memory.handoff import read_newest_handoff
    from clio_acp.memory.handoff.seed import additions

    artifact = read_newest_handoff(cwd)
    if artifact is None:
        return None
    if bank is None:
        return artifact.path.name, artifact.snapshot.count
    count = len(additions(bank, artifact.snapshot))
    return (artifact.path.name, count) if count else None


def handoff_facts(rows: Sequence[Any]) -> dict[str, Any]:
    """Facts for the handoff artifact (§12.8) from a session's journal rows
    (``JournalEntry``: ``type``, ``data``): ``task`` (first prompt),
    ``latest_instruction`` (last prompt), ``files_touched`` (paths written or edited
    successfully, in order) and ``commands`` (``(command, exit code or None)``)."""
    prompts = [r.data.get("text", "") for r in rows if r.type == history.ROW_PROMPT]
    calls = {r.data.get("tool_call_id"): r.data for r in rows if r.type == history.ROW_TOOL_CALL}
    files: list[str] = []
    commands: list[tuple[str, int | None]] = []
    for row in rows:
        if row.type != history.ROW_TOOL_RESULT:
            continue
        call = calls.get(row.data.get("tool_call_id")) or {}
        name = call.get("name") or row.data.get("name")
        args = call.get("arguments") or {}
        if name in ("write_file", "edit_file") and row.data.get("status") == "completed":
            path = row.data.get("path") or args.get("path")
            if path:
                files.append(str(path))
        elif name == "run_command" and args.get("command"):
            commands.append((str(args["command"]), row.data.get("exit_code")))
    return {
        "task": prompts[0] if prompts else "",
        "latest_instruction": prompts[-1] if prompts else "",
        "files_touched": files,
        "commands": commands,
    }
