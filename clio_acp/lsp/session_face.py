"""One editor window's view of the core: the bound session, its turns, its features.

Owns the session bound to this window (opened through ``SessionManager``), the
running turns (``clio.prompt``, ``clio.cancel``), and the fan-out of the session's
events to the features (``lsp/features/``: ``clio/sessionUpdate``, ``$/progress``,
memory diagnostics, proposals, the memory document, the resume offer, permission
questions, usage). Every session change (commands, a removed workspace folder,
``clio/sessionChanged``, shutdown) goes through ``change_session``/``leave_session``,
which stop the turns, close the old session (its bank is cleared by the core) and
reset every feature before the new session can be observed (ARCHITECTURE.md
invariant 1).

It must not hold agent or memory logic: sessions, banks, seeding, handoffs and durable
records are the core's (``clio_acp.session``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from clio_acp.lsp.features import Feature
from clio_acp.lsp.features.document import MemoryDocument
from clio_acp.lsp.features.permissions import Permissions
from clio_acp.lsp.features.progress import Progress
from clio_acp.lsp.features.proposals import Proposals
from clio_acp.lsp.features.reminders import Reminders
from clio_acp.lsp.features.resume_offer import ResumeOffer
from clio_acp.lsp.features.session_updates import SessionUpdates
from clio_acp.lsp.features.status import Status
from clio_acp.lsp.features.usage import Usage

if TYPE_CHECKING:
    from clio_acp.lsp.server import ClioLanguageServer
    from clio_acp.session import Session, SessionEvent, SessionManager

logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 10.0
"""How long a cancelled turn may take to wind down before its task is cancelled, s."""
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


class SessionFace:
    """The LSP face's session state. ``server`` sends notifications and requests."""

    def __init__(self, server: ClioLanguageServer):
        self.ls = server
        self.manager: SessionManager | None = None
        self.session: Session | None = None
        self.closed = False
        self._unsubscribe: Callable[[], None] | None = None
        self._turns: dict[str, _Turn] = {}
        self._lock = asyncio.Lock()
        self.session_updates = SessionUpdates(self)
        self.progress = Progress(self)
        self.proposals = Proposals(self)
        self.reminders = Reminders(self)
        self.document = MemoryDocument(self)
        self.resume_offer = ResumeOffer(self)
        self.permissions = Permissions(self)
        self.usage = Usage(self)
        self.status = Status(self)
        self.features: tuple[Feature, ...] = (
            self.session_updates,
            self.progress,
            self.reminders,
            self.proposals,
            self.resume_offer,
            self.usage,
            self.document,
            self.permissions,
            self.status,
        )

    def ensure_manager(self) -> SessionManager:
        """The session manager (made on first use)."""
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
        """The editor's workspace root (a new session's folder)."""
        return self.ls.workspace_root

    def board(self) -> dict[str, Any] | None:
        """The bound session's ``/memory`` board, or None (no session, or it failed)."""
        if self.session is None:
            return None
        try:
            return self.session.board()
        except Exception:
            logger.exception("Reading the memory board failed")
            return None

    # -- session changes ----------------------------------------------------------------

    async def change_session(self, open_session: Callable[[Any], Awaitable[Any]]) -> Any:
        """Bind the session ``open_session(manager)`` returns, leaving the current one.

        The new session is opened first, so a failure (unknown id, bad folder) raises
        and changes nothing; reopening the current session is no change. Otherwise the
        old session's turn is stopped, it is closed and every feature is reset before
        the new one is bound (ARCHITECTURE.md invariant 1)."""
        async with self._lock:
            manager = self.ensure_manager()
            session = await open_session(manager)
            if self.session is not None and session is self.session:
                return session
            await self._leave_locked()
            self._bind(session)
        await self.proposals.refresh()
        return session

    async def leave_session(self, reason: str) -> None:
        """End the binding to the current session (its bank is cleared by closing it)."""
        async with self._lock:
            if self.session is not None:
                logger.info("Leaving session %s: %s", self.session.id, reason)
            await self._leave_locked()
        await self.proposals.refresh()

    async def _leave_locked(self) -> None:
        # Stop turns while still subscribed: the client sees their turn_ended.
        for turn in list(self._turns.values()):
            await self._stop_turn(turn)
        self._turns.clear()
        self.status.working = False
        session, self.session = self.session, None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for feature in self.features:
            feature.session_changed(None)
        if session is not None and self.manager is not None:
            try:
                await self.manager.close_session(session.id)
            except Exception:
                logger.exception("Closing session %s failed", session.id)

    def _bind(self, session: Session) -> None:
        self.session = session
        self._unsubscribe = session.subscribe(self._on_event)
        for feature in self.features:
            feature.session_changed(session)

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
        """The bound session (that one, when ``session_id`` is given); ``FaceError``
        when there is none or another one is bound."""
        if self.session is None or (session_id is not None and self.session.id != session_id):
            raise FaceError(
                "no live session" if session_id is None else f"session {session_id} is not open"
            )
        return self.session

    # -- events -----------------------------------------------------------------------

    def _on_event(self, event: SessionEvent) -> None:
        if self.closed or self.session is None or event.session_id != self.session.id:
            return
        for feature in self.features:
            feature.on_event(event)

    def replay(self, events: list[Any]) -> None:
        """Hand a loaded session's history to the features (``clio/sessionUpdate``
        with ``replay``; a trailing handoff offer is asked)."""
        for event in events:
            for feature in self.features:
                feature.on_replay(event)

    # -- turns ------------------------------------------------------------------------

    async def prompt(self, text: str, session_id: str | None) -> dict[str, Any]:
        """Run one turn; returns ``{sessionId, stopReason}``. Cancelling the calling
        task ($/cancelRequest) cancels the turn in the core and waits for it to end."""
        self.document.arm()  # the user asked: the workspace may be written from now on
        session = await self.current_or_new(session_id)
        running = self._turns.get(session.id)
        if running is not None and not running.task.done():
            raise FaceError(f"a turn is already running in session {session.id}")
        task = asyncio.create_task(session.prompt(text), name=f"clio-turn-{session.id}")
        turn = _Turn(session=session, task=task, request=asyncio.current_task())
        self._turns[session.id] = turn
        self.status.set_working(True)
        await self.progress.begin(session.id, text, lambda: self._stop_turn(turn))
        stop_reason = "cancelled"
        try:
            stop_reason = await asyncio.shield(task)
        except asyncio.CancelledError:
            await self._stop_turn(turn)
            raise
        finally:
            if self._turns.get(session.id) is turn:
                del self._turns[session.id]
            self.status.set_working(bool(self._turns))
            self.progress.end(session.id, stop_reason)
            self.document.schedule()
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

    # -- the end ------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """LSP ``shutdown``: stop turns, close the session, clear diagnostics; the
        client is still connected, so the empty diagnostics are published."""
        await self.leave_session("shutdown")
        for feature in self.features:
            await feature.shutdown()
        await self._close_manager()

    async def aclose(self) -> None:
        """Process end (after ``exit``, end of input or editor death): the client may
        be gone, so nothing more is sent."""
        self.closed = True
        for turn in list(self._turns.values()):
            await self._stop_turn(turn)
        await self.resume_offer.shutdown()
        await self._close_manager()

    async def _close_manager(self) -> None:
        manager, self.manager = self.manager, None
        self.session = None
        if manager is not None:
            try:
                await manager.aclose()
            except Exception:
                logger.exception("Closing the session manager failed")
