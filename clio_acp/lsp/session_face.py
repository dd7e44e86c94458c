"""One editor window's view of the core: the current session, its turn, its memory.

Owns the LSP face's state (the session bound to this window, the running turn, recent
reminders, pending proposals, usage totals, the pending resume offer) and its
translation work: core events become ``clio/sessionUpdate`` notifications, ``$/progress``
reports, ``clio-memory`` diagnostics and the memory document; a handoff offer becomes a
``window/showMessageRequest``; a permission request becomes one too. Every session
change (commands, a removed workspace folder, ``clio/sessionChanged``, shutdown) goes
through ``change_session``/``leave_session``, which cancel the turn, close the old
session (its bank is cleared by the core) and clear every memory diagnostic before the
new session can be observed (ARCHITECTURE.md invariant 1).

It must not hold agent or memory logic: sessions, banks, seeding, handoffs and durable
records are the core's (``clio_acp.session``, ``clio_acp.memory``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from clio_acp.lsp import translate
from clio_acp.lsp.memory_doc import memory_doc_path, render_memory_document, write_atomically
from clio_acp.session import (
    CommandError,
    HandoffOffer,
    MemoryCleared,
    MemoryProposal,
    MemoryReminder,
    TurnEnded,
    UsageTotals,
    UsageUpdate,
    commands,
)

if TYPE_CHECKING:
    from clio_acp.lsp.server import ClioLanguageServer

logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 10.0
"""How long a cancelled turn may take to wind down before its task is cancelled, s."""
PROGRESS_CREATE_TIMEOUT_S = 5.0
"""How long ``window/workDoneProgress/create`` may take before the turn runs without
progress, seconds."""
RECENT_REMINDERS = 10
"""Reminders listed in the memory document."""
REQUEST_FAILED = types.LSPErrorCodes.RequestFailed.value  # -32803, LSP 3.17


class FaceError(JsonRpcException):
    """A command that cannot be done as asked (``RequestFailed``, -32803)."""

    CODE = REQUEST_FAILED


@dataclass
class _Turn:
    session: Any
    task: asyncio.Task[str]
    request: asyncio.Task[Any] | None = None
    """The ``clio.prompt`` request task waiting for this turn (answered before
    anything that stopped the turn goes on)."""
    progress_token: str | int | None = None
    last_progress: str | None = None
    reminders: list[MemoryReminder] = field(default_factory=list)


class SessionFace:
    """The LSP face's session state. ``server`` sends notifications and requests."""

    def __init__(self, server: ClioLanguageServer):
        self.ls = server
        self.manager: Any = None
        self.session: Any = None
        self._unsubscribe: Callable[[], None] | None = None
        self._turns: dict[str, _Turn] = {}
        self._lock = asyncio.Lock()
        self.reminders: list[MemoryReminder] = []
        self.proposals: dict[str, MemoryProposal] = {}
        self.usage = UsageTotals()
        self._offer: asyncio.Task[None] | None = None
        self._offered: set[str] = set()
        self._doc_task: asyncio.Task[None] | None = None
        self._doc_dirty = False
        self._closed = False
        self._records_stamp: tuple[int, int] | None = None

    # -- the core ---------------------------------------------------------------------

    def _ensure_manager(self) -> Any:
        if self.manager is None:
            from clio_acp.session import SessionManager

            self.manager = SessionManager(
                paths=self.ls.paths,
                settings=self.ls.settings_reader,
                delivers_reminders=True,
            )
        return self.manager

    @property
    def workspace_root(self) -> Path:
        return self.ls.workspace_root

    # -- session changes ----------------------------------------------------------------

    async def change_session(self, open_session: Callable[[Any], Awaitable[Any]]) -> Any:
        """Bind the session ``open_session(manager)`` returns, leaving the current one.

        The new session is opened first, so a failure (unknown id, bad folder) raises
        and changes nothing; reopening the current session is no change. Otherwise the
        old session's turn is stopped, it is closed and its diagnostics are cleared
        before the new one is bound (ARCHITECTURE.md invariant 1)."""
        async with self._lock:
            manager = self._ensure_manager()
            session = await open_session(manager)
            if self.session is not None and session is self.session:
                return session
            await self._leave_locked()
            self._bind(session)
        await self.refresh_proposals()
        return session

    async def leave_session(self, reason: str) -> None:
        """End the binding to the current session (its bank is cleared by closing it)."""
        async with self._lock:
            if self.session is not None:
                logger.info("Leaving session %s: %s", self.session.id, reason)
            await self._leave_locked()
        await self.refresh_proposals()

    async def _leave_locked(self) -> None:
        if self._offer is not None:
            self._offer.cancel()
            self._offer = None
        # Stop turns while still subscribed: the client sees their turn_ended.
        for turn in list(self._turns.values()):
            await self._stop_turn(turn)
        self._turns.clear()
        session, self.session = self.session, None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.reminders.clear()
        self.usage = UsageTotals()
        self.ls.diagnostics.clear(translate.MEMORY_SOURCE)
        if session is not None and self.manager is not None:
            try:
                await self.manager.close_session(session.id)
            except Exception:
                logger.exception("Closing session %s failed", session.id)

    def _bind(self, session: Any) -> None:
        self.session = session
        self._unsubscribe = session.subscribe(self._on_event)
        session.set_permission_handler(self._ask_permission)

    async def current_or_new(self, session_id: str | None) -> Any:
        """The session a prompt runs in: ``session_id`` (resumed if it is not the
        current one), else the current session, else a new one in the workspace."""
        if session_id is not None:
            if self.session is not None and self.session.id == session_id:
                return self.session
            return await self.change_session(lambda m: m.resume_session(session_id))
        if self.session is not None:
            return self.session
        mode = self.ls.options.permission_mode
        return await self.change_session(lambda m: m.new_session(self.workspace_root, mode=mode))

    def require_session(self, session_id: str | None = None) -> Any:
        if self.session is None or (session_id is not None and self.session.id != session_id):
            raise FaceError(
                "no live session" if session_id is None else f"session {session_id} is not open"
            )
        return self.session

    # -- turns ------------------------------------------------------------------------

    async def prompt(self, text: str, session_id: str | None) -> dict[str, Any]:
        """Run one turn; returns ``{sessionId, stopReason}``. Cancelling the calling
        task ($/cancelRequest) cancels the turn in the core and waits for it to end."""
        session = await self.current_or_new(session_id)
        running = self._turns.get(session.id)
        if running is not None and not running.task.done():
            raise FaceError(f"a turn is already running in session {session.id}")
        task = asyncio.create_task(session.prompt(text), name=f"clio-turn-{session.id}")
        turn = _Turn(session=session, task=task, request=asyncio.current_task())
        self._turns[session.id] = turn
        await self._begin_progress(turn, text)
        stop_reason = "cancelled"
        try:
            stop_reason = await asyncio.shield(task)
        except asyncio.CancelledError:
            await self._stop_turn(turn)
            raise
        finally:
            if self._turns.get(session.id) is turn:
                del self._turns[session.id]
            self._end_progress(turn, stop_reason)
            self.schedule_document()
        return {"sessionId": session.id, "stopReason": stop_reason}

    async def cancel(self, session_id: str | None) -> bool:
        """Cancel the running turn (of ``session_id``, else any); True if one ran."""
        stopped = False
        for sid, turn in list(self._turns.items()):
            if session_id is None or sid == session_id:
                await self._stop_turn(turn)
                stopped = True
        return stopped

    async def _stop_turn(self, turn: _Turn) -> None:
        """Cancel the turn in the core, wait for it to end (bounded), then for its
        ``clio.prompt`` request to be answered."""
        if not turn.task.done():
            try:
                await turn.session.cancel()
            except Exception:
                logger.exception("Session cancel failed")
            try:
                await asyncio.wait_for(asyncio.shield(turn.task), CANCEL_GRACE_S)
            except TimeoutError:
                logger.warning("Turn did not stop within %ss; cancelling it", CANCEL_GRACE_S)
                turn.task.cancel()
                with contextlib.suppress(BaseException):
                    await turn.task
            except BaseException:
                pass
        request = turn.request
        if request is not None and request is not asyncio.current_task() and not request.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(request), CANCEL_GRACE_S)

    # -- progress ---------------------------------------------------------------------

    async def _begin_progress(self, turn: _Turn, text: str) -> None:
        if not self.ls.options.progress:
            return
        from clio_acp.lsp.protocol import current_command

        params = current_command.get()
        token = params.work_done_token if params is not None else None
        if token is None and self.ls.client_supports("window.work_done_progress"):
            token = f"clio-turn-{uuid.uuid4()}"
            try:
                await self.ls.protocol.request(
                    types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                    types.WorkDoneProgressCreateParams(token=token),
                    timeout_s=PROGRESS_CREATE_TIMEOUT_S,
                )
            except (TimeoutError, JsonRpcException):
                return
        if token is None:
            return
        turn.progress_token = token
        cancel_future: Future[Any] = Future()
        self.ls.protocol.progress.tokens[token] = cancel_future

        def on_cancel(fut: Future[Any]) -> None:
            if fut.cancelled() and not turn.task.done():
                self.ls.protocol.spawn(self._stop_turn(turn))

        cancel_future.add_done_callback(on_cancel)
        self.ls.protocol.progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title="clio", message=translate._clip(text, 80), cancellable=True
            ),
        )

    def _report_progress(self, turn: _Turn, event: Any) -> None:
        if turn.progress_token is None:
            return
        message = translate.progress_message(event)
        if message is None or message == turn.last_progress:
            return
        turn.last_progress = message
        self.ls.protocol.progress.report(
            turn.progress_token, types.WorkDoneProgressReport(message=message)
        )

    def _end_progress(self, turn: _Turn, stop_reason: str) -> None:
        token = turn.progress_token
        if token is None:
            return
        turn.progress_token = None
        future = self.ls.protocol.progress.tokens.pop(token, None)
        if future is not None and not future.done():
            future.set_result(None)
        if not self._closed:
            self.ls.protocol.progress.end(token, types.WorkDoneProgressEnd(message=stop_reason))

    # -- events -----------------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        if self._closed or self.session is None or event.session_id != self.session.id:
            return
        options = self.ls.options
        if options.session_updates:
            self.ls.protocol.notify(translate.SESSION_UPDATE, translate.session_update(event))
        turn = self._turns.get(event.session_id)
        if turn is not None:
            self._report_progress(turn, event)
        if isinstance(event, MemoryReminder):
            self._show_reminder(event)
        elif isinstance(event, MemoryProposal):
            self._add_proposal(event)
        elif isinstance(event, MemoryCleared):
            self.reminders.clear()
            self.ls.diagnostics.clear(translate.MEMORY_SOURCE)
            self.schedule_document()
        elif isinstance(event, HandoffOffer):
            self.offer_resume(event)
        elif isinstance(event, UsageUpdate):
            self.usage.add(event)
        elif isinstance(event, TurnEnded):
            self.schedule_document()

    def replay(self, events: list[Any]) -> None:
        """Send a loaded session's history as ``clio/sessionUpdate`` with ``replay``."""
        for event in events:
            if isinstance(event, HandoffOffer):
                self.offer_resume(event)
                continue
            if self.ls.options.session_updates:
                self.ls.protocol.notify(
                    translate.SESSION_UPDATE, translate.session_update(event, replay=True)
                )

    @property
    def memory_doc(self) -> Path:
        return memory_doc_path(self.workspace_root)

    def _show_reminder(self, reminder: MemoryReminder) -> None:
        self.reminders = [*self.reminders, reminder][-RECENT_REMINDERS:]
        self.schedule_document()
        options = self.ls.options.diagnostics
        if not options.enabled:
            return
        proposal_id = reminder.proposal_id or next(
            (p.record_id for p in self.proposals.values() if p.entry_id in reminder.cited_entries),
            None,
        )
        rendered = self._render()
        doc_line = rendered.reminder_lines[-1] if rendered.reminder_lines else 0
        for uri, line in translate.reminder_targets(reminder, self.memory_doc, doc_line):
            diagnostic = translate.reminder_diagnostic(
                reminder, line, severity=options.severity, proposal_id=proposal_id
            )
            self.ls.diagnostics.add(
                translate.MEMORY_SOURCE, uri, diagnostic, keep_last=options.max_per_file
            )

    def _add_proposal(self, proposal: MemoryProposal) -> None:
        self.proposals[proposal.record_id] = proposal
        self.schedule_document()
        options = self.ls.options.diagnostics
        if not options.enabled:
            return

        def link(uri: str, diagnostic: types.Diagnostic) -> types.Diagnostic:
            data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
            cited = data.get("citedEntries") or []
            if proposal.entry_id and proposal.entry_id in cited and not data.get("proposalId"):
                diagnostic = types.Diagnostic(
                    range=diagnostic.range,
                    message=diagnostic.message,
                    severity=diagnostic.severity,
                    source=diagnostic.source,
                    code=diagnostic.code,
                    data={**data, "proposalId": proposal.record_id},
                )
            return diagnostic

        self.ls.diagnostics.update(translate.MEMORY_SOURCE, link)
        self._publish_proposal_diagnostics()

    def _publish_proposal_diagnostics(self) -> None:
        options = self.ls.options.diagnostics
        if not options.enabled:
            return
        rendered = self._render()
        uri = self.memory_doc.as_uri()
        keep = [
            d
            for d in self.ls.diagnostics.get(uri, translate.MEMORY_SOURCE)
            if not (isinstance(d.data, dict) and d.data.get("kind") == "proposal")
        ]
        for record_id, proposal in self.proposals.items():
            line = rendered.proposal_lines.get(record_id, 0)
            keep.append(translate.proposal_diagnostic(proposal, line, severity=options.severity))
        self.ls.diagnostics.set(translate.MEMORY_SOURCE, uri, keep)

    async def refresh_proposals(self, *, only_if_changed: bool = False) -> None:
        """Reload pending proposals (unapproved, unrejected durable records) from the
        store, show each on its line of the memory document, and rewrite the document.
        With ``only_if_changed``, nothing happens unless records.json changed since the
        last load (code actions ask often). A store that cannot be read is logged; the
        proposals seen in events remain."""
        try:
            stamp: tuple[int, int] | None = _stamp(self.ls.paths.records_file)
        except OSError:
            stamp = None
        if only_if_changed and stamp == self._records_stamp:
            return
        self._records_stamp = stamp
        try:
            pending = await commands.pending_proposals(self.ls.paths)
        except CommandError as exc:
            logger.warning("Cannot read durable memory records: %s", exc)
        else:
            self.proposals = {p.record_id: p for p in pending}
        # The document first, so a diagnostic's line is already in the file it names.
        await self.write_document_now()
        self._publish_proposal_diagnostics()

    def resolve_proposal(self, record_id: str) -> None:
        """Forget a proposal that was approved or rejected; drop it from diagnostics."""
        self.proposals.pop(record_id, None)

        def unlink(uri: str, diagnostic: types.Diagnostic) -> types.Diagnostic | None:
            data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
            if data.get("proposalId") != record_id:
                return diagnostic
            if data.get("kind") == "proposal":
                return None
            rest = {k: v for k, v in data.items() if k != "proposalId"}
            return types.Diagnostic(
                range=diagnostic.range,
                message=diagnostic.message,
                severity=diagnostic.severity,
                source=diagnostic.source,
                code=diagnostic.code,
                data=rest,
            )

        self.ls.diagnostics.update(translate.MEMORY_SOURCE, unlink)
        self.schedule_document()

    # -- the resume offer -----------------------------------------------------------------

    def offer_resume(self, offer: HandoffOffer) -> None:
        """Ask (``window/showMessageRequest``) whether to seed from the handoff. A late,
        failed or cancelled answer never raises; an answer for a session that is no
        longer current is ignored."""
        if not self.ls.options.resume_offer or offer.session_id in self._offered:
            return
        self._offered.add(offer.session_id)
        if self._offer is not None:
            self._offer.cancel()
        self._offer = asyncio.create_task(self._run_offer(offer))

    async def _run_offer(self, offer: HandoffOffer) -> None:
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Info,
            message=(
                f"clio: a handoff ({offer.source}, {offer.count} memory entries) can seed "
                "this session's task memory."
            ),
            actions=[
                types.MessageActionItem(title="Seed"),
                types.MessageActionItem(title="Dismiss"),
            ],
        )
        try:
            answer = await self.ls.protocol.request(types.WINDOW_SHOW_MESSAGE_REQUEST, params)
        except asyncio.CancelledError:
            return
        except Exception as exc:
            logger.info("Resume offer got no answer: %s", exc)
            return
        title = getattr(answer, "title", None)
        if title != "Seed":
            return
        session = self.session
        if session is None or session.id != offer.session_id:
            logger.info("Ignoring a seed answer for a session that is no longer current")
            return
        try:
            result = await session.seed()
        except Exception:
            logger.exception("Seeding from the handoff failed")
            return
        self.ls.show_message(f"clio: memory seed: {_describe_seed(result)}")
        self.schedule_document()

    # -- permissions --------------------------------------------------------------------

    async def _ask_permission(self, request: Any) -> Any:
        from clio_acp.session import PermissionDecision

        titles = {option.name: option.option_id for option in request.options}
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning,
            message=f"clio wants to run {request.tool_name}: {request.title}",
            actions=[types.MessageActionItem(title=name) for name in titles],
        )
        timeout_s = self.ls.options.permission_timeout_ms / 1000
        try:
            answer = await self.ls.protocol.request(
                types.WINDOW_SHOW_MESSAGE_REQUEST, params, timeout_s=timeout_s
            )
        except asyncio.CancelledError:
            return PermissionDecision(outcome="cancelled")
        except Exception:
            return PermissionDecision(outcome="reject_once")
        outcome = titles.get(getattr(answer, "title", None) or "", "reject_once")
        return PermissionDecision(outcome=outcome)

    # -- the memory document --------------------------------------------------------------

    def board(self) -> dict[str, Any] | None:
        if self.session is None:
            return None
        try:
            return self.session.board()
        except Exception:
            logger.exception("Reading the memory board failed")
            return None

    def _render(self) -> Any:
        return render_memory_document(
            session_id=self.session.id if self.session is not None else None,
            board=self.board(),
            reminders=self.reminders,
            proposals=list(self.proposals.values()),
        )

    def schedule_document(self) -> None:
        """Rewrite the memory document soon (coalesced; never blocks the loop)."""
        if not self.ls.options.memory_document or self._closed:
            return
        self._doc_dirty = True
        if self._doc_task is None or self._doc_task.done():
            self._doc_task = asyncio.create_task(self._write_document())

    async def _write_document(self) -> None:
        while self._doc_dirty:
            self._doc_dirty = False
            text = self._render().text
            try:
                await asyncio.to_thread(write_atomically, self.memory_doc, text)
            except OSError as exc:
                logger.warning("Cannot write the memory document: %s", exc)
                return

    async def write_document_now(self) -> None:
        """Write the memory document and wait for it (commands that show the board)."""
        if not self.ls.options.memory_document:
            return
        self._doc_dirty = True
        if self._doc_task is not None and not self._doc_task.done():
            await self._doc_task
        self._doc_task = asyncio.create_task(self._write_document())
        await self._doc_task

    # -- the end ------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """LSP ``shutdown``: stop turns, close the session, clear diagnostics; the
        client is still connected, so the empty diagnostics are published."""
        await self.leave_session("shutdown")
        if self._doc_task is not None:
            with contextlib.suppress(Exception):
                await self._doc_task
        await self._close_manager()

    async def aclose(self) -> None:
        """Process end (after ``exit``, end of input or editor death): the client may
        be gone, so nothing more is sent."""
        self._closed = True
        for turn in list(self._turns.values()):
            await self._stop_turn(turn)
        if self._offer is not None:
            self._offer.cancel()
        await self._close_manager()

    async def _close_manager(self) -> None:
        manager, self.manager = self.manager, None
        self.session = None
        if manager is not None:
            try:
                await manager.aclose()
            except Exception:
                logger.exception("Closing the session manager failed")


def _stamp(path: Path) -> tuple[int, int]:
    """(mtime ns, size) of ``path``; raises ``OSError`` when it does not exist."""
    info = path.stat()
    return info.st_mtime_ns, info.st_size


def _describe_seed(result: Any) -> str:
    if isinstance(result, dict):
        if "seeded" in result:
            text = f"{result.get('seeded', 0)} seeded, {result.get('skipped', 0)} skipped"
            rejected = result.get("rejected") or []
            if rejected:
                text += f"; left out as invalid: {'; '.join(map(str, rejected))}"
            return text
        return str(result.get("status") or result)
    return str(result)
