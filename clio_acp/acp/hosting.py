"""The sessions this ACP connection has open: subscription, update queue, turn state.

Owns, per hosted session, the subscription to its events (translated by
``updates.event_to_updates`` and written in order by one pump task as
``session/update``), the running ``session/prompt`` turn and its cancellation, the
usage totals ``/usage`` shows, and ``session/request_permission`` for its tool calls.
Releasing a session cancels its turn, flushes its updates and unsubscribes. It must
not decide what the core does: turns, banks and permissions are the session's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp.connection import Connection
from acp.schema import RequestPermissionResponse
from pydantic import ValidationError

from clio_acp import session as core  # names resolve on first use: a fast initialize
from clio_acp.acp import updates
from clio_acp.acp.errors import not_found
from clio_acp.acp.requests import uncancel_current
from clio_acp.acp.transport import CURRENT_REQUEST_ID, LineTransport

if TYPE_CHECKING:
    from clio_acp.session import PermissionRequest, Session, SessionEvent, UsageTotals

log = logging.getLogger(__name__)

STREAM_CAP_CHARS = 64 * 1024
"""Streamed output of one tool call the client is sent, characters; the rest is cut
(the finished result carries the spill reference to the whole output)."""
STREAM_CUT_NOTE = "\n… (streamed output cut here; the result keeps the whole output)\n"

RELEASE_FLUSH_S = 5.0
"""How long releasing a session waits for its queued updates to be written, seconds."""


@dataclass(frozen=True)
class ClientTools:
    """The client's tool capabilities from ``initialize`` (``fs.readTextFile``,
    ``fs.writeTextFile``, ``terminal``)."""

    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False

    @property
    def any(self) -> bool:
        """Whether the client offers any of them (then tools go through it)."""
        return self.read_text_file or self.write_text_file or self.terminal


@dataclass
class Hosted:
    """One session the client has open in this process."""

    session: Session
    unsubscribe: Callable[[], None] | None = None
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)
    pump: asyncio.Task[None] | None = None
    turn: asyncio.Task[Any] | None = None
    cancelling: bool = False
    streamed: dict[str, int] = field(default_factory=dict)
    """Characters of streamed output sent per running tool call (capped)."""
    notices: list[str] = field(default_factory=list)
    """Problems to show once the session's answer is out (an MCP server that failed)."""
    in_command: bool = False
    """The running turn is one of our slash commands (cancelled by cancelling its task)."""
    mcp: Any = None
    """The session's MCP servers (``McpAttachment``), stopped when it is released."""
    usage: UsageTotals = field(default_factory=lambda: core.UsageTotals())
    """Chat usage seen on this connection (its ``UsageUpdate`` events) for ``/usage``."""

    def enqueue(self, update: dict[str, Any]) -> None:
        """Queue one ``session/update`` ``update`` object for the pump."""
        self.queue.put_nowait(update)

    async def flush(self) -> None:
        """Wait until every queued update has been written (at once when the pump is
        gone: a released session's updates are dropped, its answers are not)."""
        if self.pump is None or self.pump.done():
            return
        joined = asyncio.ensure_future(self.queue.join())
        try:
            await asyncio.wait({joined, self.pump}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            joined.cancel()

    async def wait_turn(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s`` s) until the running turn has answered."""
        turn = self.turn
        if turn is not None and not turn.done() and turn is not asyncio.current_task():
            await asyncio.wait({turn}, timeout=timeout_s)

    @property
    def turn_running(self) -> bool:
        """Whether a ``session/prompt`` turn of this session is running."""
        return self.turn is not None and not self.turn.done()


class Hosting:
    """The hosted sessions of one connection, keyed by session id."""

    def __init__(self) -> None:
        self._hosted: dict[str, Hosted] = {}
        self.conn: Connection | None = None
        self.transport: LineTransport | None = None
        self.presentation = updates.Presentation()

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._hosted

    def ids(self) -> list[str]:
        """The hosted session ids."""
        return list(self._hosted)

    def get(self, session_id: str) -> Hosted:
        """The hosted session; ``-32002`` when this connection has not opened it."""
        hosted = self._hosted.get(session_id)
        if hosted is None:
            raise not_found(session_id)
        return hosted

    def find(self, session_id: str) -> Hosted | None:
        """The hosted session or None."""
        return self._hosted.get(session_id)

    def host(self, session: Session) -> Hosted:
        """Subscribe to ``session`` (replacing an earlier hosting of the same id)."""
        old = self._hosted.pop(session.id, None)
        if old is not None:
            if old.unsubscribe:
                old.unsubscribe()
            if old.pump:
                old.pump.cancel()
        hosted = Hosted(session=session)
        hosted.pump = asyncio.get_running_loop().create_task(self._pump(session.id, hosted))
        hosted.unsubscribe = session.subscribe(lambda e: self.enqueue_event(hosted, e))
        with contextlib.suppress(AttributeError):
            session.set_permission_handler(lambda r: self._ask_permission(hosted, r))
        self._hosted[session.id] = hosted
        return hosted

    async def release(self, session_id: str, *, cancel: bool) -> None:
        """Stop hosting ``session_id``: cancel its turn (``cancel``), flush, unsubscribe."""
        hosted = self._hosted.pop(session_id, None)
        if hosted is None:
            return
        if cancel and hosted.turn_running:
            with contextlib.suppress(Exception):
                await cancel_turn(hosted)
            # The turn's prompt is answered (cancelled) before the session goes away.
            await hosted.wait_turn(RELEASE_FLUSH_S * 2)
        if hosted.unsubscribe:
            hosted.unsubscribe()
        if hosted.mcp is not None:
            with contextlib.suppress(Exception):
                await hosted.mcp.aclose()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(hosted.flush(), timeout=RELEASE_FLUSH_S)
        if hosted.pump:
            hosted.pump.cancel()

    def enqueue_event(self, hosted: Hosted, event: SessionEvent) -> None:
        """Translate one session event into queued ``session/update`` objects."""
        if isinstance(event, core.UsageUpdate):
            hosted.usage.add(event)
        elif isinstance(event, core.ToolCallUpdated) and event.output:
            event = capped(hosted, event)
            if event is None:
                return
        elif isinstance(event, core.ToolCallFinished):
            hosted.streamed.pop(event.tool_call_id, None)
        try:
            for update in updates.event_to_updates(event, self.presentation):
                hosted.enqueue(update)
        except Exception:
            log.exception("could not translate %s", type(event).__name__)

    async def attach_mcp(self, hosted: Hosted, entries: list[Any] | None) -> None:
        """Start the request's MCP servers for ``hosted`` (tools offered from the first
        prompt on); entries we cannot serve and servers that fail become notices, sent
        after the answer."""
        from clio_acp.acp.mcp import server_specs

        specs, problems = server_specs(entries)
        if specs and hosted.mcp is None:
            hosted.mcp = await core.attach_mcp_servers(hosted.session, specs)
            problems += hosted.mcp.problems
        hosted.notices.extend(problems)

    def after_response(self, session_id: str, then: Callable[[Hosted], None] | None = None) -> None:
        """Send ``available_commands_update`` once the current response is out, then
        call ``then(hosted)`` (more updates that must follow the response)."""

        def send() -> None:
            hosted = self._hosted.get(session_id)
            if hosted is not None:
                hosted.enqueue(updates.available_commands_update())
                notices, hosted.notices = hosted.notices, []
                for text in notices:
                    event = core.Notice(session_id=session_id, level="warning", text=text)
                    self.enqueue_event(hosted, event)
                if then is not None:
                    then(hosted)

        if self.transport is not None:
            self.transport.after_response(CURRENT_REQUEST_ID.get(), send)
        else:
            asyncio.get_running_loop().call_soon(send)

    async def _pump(self, session_id: str, hosted: Hosted) -> None:
        while True:
            update = await hosted.queue.get()
            try:
                if update is not None and self.conn is not None:
                    await self.conn.send_notification(
                        "session/update", {"sessionId": session_id, "update": update}
                    )
            except ConnectionError:
                log.debug("session/update after the connection closed dropped")
            except Exception:
                log.exception("session/update failed")
            finally:
                hosted.queue.task_done()

    async def _ask_permission(self, hosted: Hosted, request: PermissionRequest) -> Any:
        """``session/request_permission`` for one tool call (issue 7 item 6)."""
        await hosted.flush()  # the tool_call update precedes the question
        assert self.conn is not None
        raw = await self.conn.send_request(
            "session/request_permission", permission_params(hosted.session.id, request)
        )
        try:
            outcome = RequestPermissionResponse.model_validate(raw).outcome
        except ValidationError:
            log.warning("malformed session/request_permission answer: %r", raw)
            return core.PermissionDecision(outcome="reject_once")
        if outcome.outcome == "cancelled":
            hosted.cancelling = True
            return core.PermissionDecision(outcome="cancelled")
        chosen = getattr(outcome, "option_id", None)
        if chosen not in {o.option_id for o in request.options}:
            log.warning("permission answer names unknown option %r; rejecting", chosen)
            return core.PermissionDecision(outcome="reject_once")
        return core.PermissionDecision(outcome=chosen)


def capped(hosted: Hosted, event: Any) -> Any:
    """``event`` (streamed tool output) within the call's :data:`STREAM_CAP_CHARS`:
    cut with a note when it crosses the cap, None once the cap was reached."""
    sent = hosted.streamed.get(event.tool_call_id, 0)
    if sent >= STREAM_CAP_CHARS:
        return None
    room = STREAM_CAP_CHARS - sent
    output = event.output
    if len(output) > room:
        output = output[:room] + STREAM_CUT_NOTE
        hosted.streamed[event.tool_call_id] = STREAM_CAP_CHARS
        return event.model_copy(update={"output": output})
    hosted.streamed[event.tool_call_id] = sent + len(output)
    return event


def permission_params(session_id: str, request: PermissionRequest) -> dict[str, Any]:
    """``session/request_permission`` params for a core ``PermissionRequest``."""
    tool_call: dict[str, Any] = {
        "toolCallId": request.tool_call_id,
        "title": request.title,
        "kind": request.kind,
        "status": "pending",
    }
    if request.arguments:
        tool_call["rawInput"] = request.arguments
    if request.locations:
        tool_call["locations"] = [{"path": p} for p in request.locations]
    return {
        "sessionId": session_id,
        "toolCall": tool_call,
        "options": [
            {"optionId": o.option_id, "name": o.name, "kind": o.kind} for o in request.options
        ],
    }


async def run_turn(hosted: Hosted, text: str) -> str:
    """Run one model turn of ``hosted``; its stop reason. A turn that fails or is
    cancelled while ``hosted.cancelling`` (``session/cancel``) ends ``cancelled``; a
    journal that cannot be written (disk full, read-only) is said in a message and
    the turn ends ``end_turn``."""
    try:
        return await hosted.session.prompt(text)
    except asyncio.CancelledError:
        if not hosted.cancelling:
            raise
        uncancel_current()
        return "cancelled"
    except core.JournalUnavailable as exc:  # disk full / read-only: say so
        log.warning("%s", exc)
        hosted.enqueue(updates.message_update(f"clio: {exc}\n", uuid.uuid4().hex))
        return "end_turn"
    except Exception:
        if not hosted.cancelling:
            raise
        log.debug("turn failed while cancelling", exc_info=True)
        return "cancelled"


async def cancel_turn(hosted: Hosted) -> None:
    """``session/cancel``: cancel the running turn (model stream, running command; a
    slash command such as ``/compact`` by cancelling its task)."""
    if not hosted.turn_running:
        return
    hosted.cancelling = True
    if hosted.in_command and hosted.turn is not None:
        hosted.turn.cancel()
        return
    await hosted.session.cancel()
