"""Sessions and their lifecycle: new, load, resume, fork, list, close, delete (issue 6
item 7; MEMORY_SPEC §10 session changes, §12 item 7).

Owns :class:`SessionManager` (the one object a face talks to) and :class:`Session`
(one workspace, one conversation, one agent loop, one memory registration, the event
stream subscribers receive). Every session change gives the new session a freshly
reset memory registration before it can observe anything, then restores that
session's own bank from the journal (load/resume) or starts empty (new/fork). After a
load or resume, the newest handoff in the workspace produces a ``HandoffOffer``.
It does not know which protocol is speaking.

Shape (``/work/coord/INTERFACES.md`` "Session core"), with these details:

- ``host_factory(session_id, cwd) -> ToolHost``; default :class:`LocalToolHost`.
- ``model_factory(settings) -> ChatModel`` (optional; default: the ``chat`` route of
  the settings) and ``memory_factory(session_id, cwd, settings_getter,
  delivers_reminders) -> MemoryHooks`` (optional; default: the memory middleware when
  present and enabled, else nothing).
- ``load_session`` returns the replay events with a trailing ``HandoffOffer`` when one
  applies; ``resume_session`` delivers its offer to the first subscriber.
- ``Session.prompt`` serializes turns (a second call waits for the first); a model
  failure ends the turn ``end_turn`` after a ``Notice`` (level error).
- ``Session.set_model(target, model)`` swaps the session's chat route between turns
  (``SessionBusy`` during a turn); ``Session.chat_route`` is the chosen pair or None.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from clio_acp.agent import history, memory_hooks
from clio_acp.agent.loop import BASE_SYSTEM_PROMPT, AgentLoop
from clio_acp.agent.memory_hooks import InjectReminder, MemoryHooks, NullMemory
from clio_acp.agent.model_port import ChatModel, resolve_chat_model
from clio_acp.agent.permissions import PERMISSION_MODES, PermissionGate, PermissionHandler
from clio_acp.agent.tools import (
    BUILTIN_TOOLS,
    PLAN_TOOLS,
    WORKSPACE_TOOLS,
    LocalToolHost,
    ToolHost,
    ToolRegistry,
    Workspace,
)
from clio_acp.agent.transcript import Transcript
from clio_acp.agent.turn import ContextRules, TurnLimits
from clio_acp.events import (
    HandoffOffer,
    MemoryCleared,
    MemoryProposal,
    MemoryReminder,
    MessageChunk,
    Notice,
    SessionEvent,
    ThoughtChunk,
    ToolCallFinished,
    ToolCallStarted,
    TurnEnded,
    UserMessage,
)
from clio_acp.memory.store import MemoryStore
from clio_acp.paths import Paths
from clio_acp.session.journal import (
    Journal,
    JournalEntry,
    JournalError,
    JournalUnavailable,
    SessionRecord,
)
from clio_acp.session.workspace_values import all_keys
from clio_acp.settings import MAX_TURN_REQUESTS_DEFAULT, Settings
from clio_acp.timestamps import utc_now

log = logging.getLogger(__name__)

TITLE_CHARS = 80
WATCH_DEBOUNCE_MS = 800
"""Workspace watcher debounce, ms."""
WATCH_RUST_TIMEOUT_MS = 1_000
"""How long the watcher thread blocks between stop checks, ms."""
WATCH_GRACE_S = 3.0
"""Changes seen within this many seconds after a tool finished are the tool's own."""

Subscriber = Callable[[SessionEvent], Awaitable[None] | None]
HostFactory = Callable[..., ToolHost]
ModelFactory = Callable[[Settings], ChatModel]
MemoryFactory = Callable[..., MemoryHooks]


class SessionNotFound(KeyError):
    """No live (``get``) or stored (``load``/``resume``/``fork``) session with that id."""

    def __str__(self) -> str:
        return f"session not found: {self.args[0]}"


class SessionInfo(BaseModel):
    """One row of ``list_sessions`` (ACP ``session/list`` shape in snake_case)."""

    model_config = ConfigDict(frozen=True)
    session_id: str
    cwd: str
    title: str | None = None
    created_at: str
    updated_at: str
    mode: str = "ask"
    parent_id: str | None = None
    closed: bool = False


def _norm(path: Path | str) -> str:
    """Lexically normalised absolute path text (no filesystem access)."""
    return os.path.normpath(str(path))


def _info(record: SessionRecord) -> SessionInfo:
    return SessionInfo(
        session_id=record.id,
        cwd=record.cwd,
        title=record.title,
        created_at=record.created_at,
        updated_at=record.updated_at,
        mode=record.mode,
        parent_id=record.parent_id,
        closed=record.closed,
    )


def replay_events(session_id: str, rows: Sequence[JournalEntry]) -> list[SessionEvent]:
    """The event stream a face replays for a loaded session (whole history)."""
    events: list[SessionEvent] = []
    for row in rows:
        data = row.data
        if row.type == history.ROW_PROMPT:
            events.append(
                UserMessage(
                    session_id=session_id,
                    message_id=data.get("message_id") or f"msg_{row.seq}",
                    text=data.get("text", ""),
                )
            )
        elif row.type == history.ROW_ASSISTANT:
            mid = data.get("message_id") or f"msg_{row.seq}"
            if data.get("reasoning"):
                events.append(
                    ThoughtChunk(
                        session_id=session_id,
                        message_id=data.get("thought_id") or f"{mid}_thought",
                        text=data["reasoning"],
                    )
                )
            if data.get("text"):
                events.append(
                    MessageChunk(session_id=session_id, message_id=mid, text=data["text"])
                )
        elif row.type == history.ROW_TOOL_CALL:
            events.append(
                ToolCallStarted(
                    session_id=session_id,
                    tool_call_id=data["tool_call_id"],
                    tool_name=data.get("name", ""),
                    title=data.get("title") or data.get("name", ""),
                    kind=data.get("kind") or "other",
                    arguments=data.get("arguments") or {},
                    locations=data.get("locations") or [],
                )
            )
        elif row.type == history.ROW_TOOL_RESULT:
            events.append(
                ToolCallFinished(
                    session_id=session_id,
                    tool_call_id=data["tool_call_id"],
                    status="completed" if data.get("status") == "completed" else "failed",
                    output=data.get("output", ""),
                    exit_code=data.get("exit_code"),
                    diff=data.get("diff"),
                    path=data.get("path"),
                    annotation=data.get("annotation"),
                )
            )
        elif row.type == history.ROW_REMINDER:
            events.append(
                MemoryReminder(
                    session_id=session_id,
                    text=data.get("text", ""),
                    cited_entries=data.get("cited") or [],
                    channel=data.get("channel") or "reminder",
                    trigger=data.get("trigger"),
                    paths=data.get("paths") or [],
                    line=(data.get("lines") or [None])[0],
                    lines=data.get("lines") or [],
                )
            )
        elif row.type == history.ROW_NOTICE:
            events.append(
                Notice(
                    session_id=session_id,
                    level=data.get("level", "info"),
                    text=data.get("text", ""),
                )
            )
        elif row.type == history.ROW_TURN_ENDED:
            events.append(
                TurnEnded(session_id=session_id, stop_reason=data.get("stop_reason", "end_turn"))
            )
    return events


def _default_memory_factory(
    session_id: str,
    cwd: Path,
    settings: Callable[[], Settings],
    delivers_reminders: bool,
    paths: Paths,
) -> MemoryHooks:
    if not settings().context.memory.enabled:
        return NullMemory()
    try:
        return memory_hooks.create_hooks(
            session_id=session_id,
            cwd=cwd,
            settings=settings,
            delivers_reminders=delivers_reminders,
            paths=paths,
        )
    except Exception:
        log.warning("memory middleware unavailable; running without memory", exc_info=True)
        return NullMemory()


async def _close_model(model: ChatModel) -> None:
    try:
        await model.aclose()
    except Exception:
        log.debug("model close failed", exc_info=True)


class SessionBusy(RuntimeError):
    """The session is running a turn and the request must wait until it ends."""


class Session:
    """One live session. Create through :class:`SessionManager`."""

    def __init__(
        self,
        *,
        manager: SessionManager,
        record: SessionRecord,
        rows: Sequence[JournalEntry],
        host: ToolHost,
        memory: MemoryHooks,
    ) -> None:
        self._manager = manager
        self.id = record.id
        self.cwd = Path(record.cwd)
        self.extra_roots = tuple(Path(p) for p in record.extra_roots)
        self.title = record.title
        self.parent_id = record.parent_id
        self.workspace = Workspace.create(self.cwd, self.extra_roots)
        self.host = host
        self.memory = memory
        self.gate = PermissionGate(mode=record.mode if record.mode in PERMISSION_MODES else "ask")  # type: ignore[arg-type]
        self._subscribers: list[Subscriber] = []
        self._early: list[SessionEvent] = []
        self._turn_lock = asyncio.Lock()
        self._turn_task: asyncio.Task[str] | None = None
        self._closed = False
        self._route_said = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watch_task: asyncio.Task[None] | None = None
        self._watch_stop: asyncio.Event | None = None
        self._chat_route: tuple[str, str | None] | None = None
        journal = manager._journal_required()

        async def append(type_: str, data: dict[str, Any]) -> JournalEntry:
            return await journal.append(self.id, type_, data)

        self.transcript = Transcript(rows, append)

        settings = manager._settings

        def rules() -> ContextRules:
            ctx = settings().context
            return ContextRules(
                trigger_ratio=ctx.compaction_trigger_ratio,
                retain_ratio=ctx.compaction_retain_ratio,
                spill_threshold_bytes=ctx.spill_threshold_bytes,
            )

        memory.set_proposal_sink(self._on_proposed)
        self.loop = AgentLoop(
            session_id=self.id,
            workspace=self.workspace,
            host=host,
            registry=ToolRegistry((*BUILTIN_TOOLS, *WORKSPACE_TOOLS, *PLAN_TOOLS)),
            gate=self.gate,
            memory=memory,
            transcript=self.transcript,
            spill_store=journal,
            emit=self._emit,
            model_factory=lambda: manager._model_factory(self._chat_settings()),
            system_prompt=lambda: manager._system_prompt(self),
            limits=TurnLimits(max_turn_requests=manager.max_turn_requests),
            rules=rules,
            on_bank_changed=self.save_bank,
            values=journal,
        )

    # ------------------------------------------------------------------ events

    @property
    def mode(self) -> str:
        """The permission mode (``ask``, ``accept-edits``, ``plan``, ``bypass``)."""
        return self.gate.mode

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Receive every event of this session; returns the unsubscribe function.
        Events queued before the first subscriber (a resume's handoff offer) are
        delivered to it at the next emission point (``flush_early``)."""
        self._subscribers.append(callback)
        if self._early:
            early, self._early = self._early, []
            self._spawn(self._deliver_to(callback, early))

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver_to(self, callback: Subscriber, events: list[SessionEvent]) -> None:
        for event in events:
            await self._call(callback, event)

    @staticmethod
    async def _call(callback: Subscriber, event: SessionEvent) -> None:
        try:
            result = callback(event)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a face's bug must not break the turn
            log.warning("session subscriber failed on %s", event.type, exc_info=True)

    async def _emit(self, event: SessionEvent) -> None:
        if not self._subscribers:
            return
        for callback in list(self._subscribers):
            await self._call(callback, event)

    # ------------------------------------------------------------------ turns

    async def prompt(self, text: str) -> str:
        """Run one turn; returns its stop reason. Turns run one at a time."""
        if self._closed:
            raise SessionNotFound(self.id)
        async with self._turn_lock:
            if self.title is None and text.strip():
                self.title = " ".join(text.split())[:TITLE_CHARS]
                await self._manager._journal_required().update_session(self.id, title=self.title)
            await self._say_route_once()
            self._turn_task = asyncio.create_task(self.loop.run_turn(text))
            try:
                stop = await asyncio.shield(self._turn_task)
            except asyncio.CancelledError:
                # The caller went away: cancel the turn and let it finish its records.
                self._turn_task.cancel()
                with contextlib.suppress(BaseException):
                    await self._turn_task
                raise
            finally:
                self._turn_task = None
        try:  # the turn's rows are on disk before the turn is reported ended
            await self._manager._journal_required().flush()
        except JournalUnavailable:
            raise  # disk full / read-only: the face says so (as for any journal call)
        except JournalError as exc:
            log.warning("session %s: journal write failed: %s", self.id, exc)
            await self._emit(
                Notice(session_id=self.id, level="error", text=f"The session was not saved: {exc}")
            )
        await self._emit(TurnEnded(session_id=self.id, stop_reason=stop))  # type: ignore[arg-type]
        return stop

    async def _say_route_once(self) -> None:
        """Before the first turn: a notice when chat runs on a route the user did not
        configure (``RouterChatModel.route_note``; issue 20 item 5)."""
        if self._route_said:
            return
        self._route_said = True
        try:
            note = getattr(self.loop.model, "route_note", None)
        except Exception:  # an unusable route: the turn itself reports it
            return
        if isinstance(note, str) and note:
            await self._emit(Notice(session_id=self.id, level="info", text=note))

    async def cancel(self) -> None:
        """Cancel the running turn (if any): the model stream is closed and a running
        command's process group is killed; ``prompt`` returns ``cancelled``."""
        task = self._turn_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait({task}, timeout=10)

    @property
    def busy(self) -> bool:
        """Whether a turn is running."""
        return self._turn_task is not None and not self._turn_task.done()

    @property
    def chat_route(self) -> tuple[str, str | None] | None:
        """``(target, model)`` chosen with :meth:`set_model`, or None (settings' ``chat``)."""
        return self._chat_route

    def set_model(self, target: str, model: str | None = None) -> None:
        """Use ``target``/``model`` (``model`` None: the target's default) for this
        session's chat requests from the next turn on: the routing snapshot is
        swapped between turns and the previous model's clients are closed.

        Raises ``SessionBusy`` while a turn runs (cancel or wait for it first) and
        ``ValueError`` for an empty target. An unusable route is reported like any
        other model failure, as a ``Notice`` at the next turn."""
        if not target or not target.strip():
            raise ValueError("a target id is required")
        if self._turn_lock.locked() or self.busy:
            raise SessionBusy(
                f"session {self.id} is running a turn; the model can change once it "
                "ends (or after session/cancel)"
            )
        self._chat_route = (target, model or None)
        old = self.loop.detach_model()  # the next turn builds the model anew
        if old is not None:
            self._spawn(_close_model(old))

    def _chat_settings(self) -> Settings:
        settings = self._manager._settings()
        if self._chat_route is None:
            return settings
        target, model = self._chat_route
        chat = settings.chat.model_copy(update={"target": target, "model": model})
        return settings.model_copy(update={"chat": chat})

    def set_permission_handler(self, handler: PermissionHandler | None) -> None:
        """The face's handler for permission questions (None: refuse what needs asking)."""
        self.gate.handler = handler

    def set_mode(self, mode: str) -> None:
        """Raises ``ValueError`` for an unknown mode. Applies to the next tool call."""
        self.gate.set_mode(mode)
        journal = self._manager._journal_required()
        self._spawn(self._record_mode(journal, mode))

    async def _record_mode(self, journal: Journal, mode: str) -> None:
        try:
            await journal.update_session(self.id, mode=mode)
            await self.transcript.add(history.ROW_MODE, {"mode": mode})
        except Exception:
            log.warning("could not record mode change", exc_info=True)

    # ------------------------------------------------------------------ memory

    def board(self) -> dict[str, Any]:
        """The ``/memory`` board: tier, last decision, bank (no status), activity, spend."""
        try:
            return self.memory.board()
        except Exception:
            log.warning("memory board failed", exc_info=True)
            return {"enabled": False, "error": "memory board unavailable"}

    async def save_bank(self) -> None:
        """Save the bank snapshot and surviving counters in the journal (§12 item 7)."""
        counters = dict(self.memory.counters() or {})
        counters["progressGuard"] = self.loop.guard.to_dict()
        await self._manager._journal_required().save_bank(self.id, self.memory.snapshot(), counters)

    async def compact(self) -> None:
        """Compact the conversation now (``/compact``)."""
        async with self._turn_lock:
            try:
                done = await self.loop.compact()
            except Exception as exc:  # no model route, journal trouble: say so, go on
                log.warning("compaction failed for %s", self.id, exc_info=True)
                await self._emit(
                    Notice(session_id=self.id, level="error", text=f"Compaction failed: {exc}")
                )
                return
            if not done:
                await self._emit(
                    Notice(session_id=self.id, level="info", text="Nothing to compact.")
                )

    async def handoff(self) -> Path:
        """Write ``<cwd>/.clio-coder/handoffs/handoff-<UTC>.md`` deterministically, with
        no model (MEMORY_SPEC §12 item 8); returns its path. Raises ``RuntimeError``
        when memory is off (no bank) and ``OSError`` when the folder is not writable."""
        from clio_acp.memory.handoff import awrite_handoff_artifact

        bank = self.memory.task_bank()
        if bank is None:
            raise RuntimeError("memory is off for this session: no task bank to hand off")
        facts = memory_hooks.handoff_facts(self.transcript.rows)
        return await awrite_handoff_artifact(
            self.cwd,
            bank=bank,
            session_id=self.id,
            unresolved_failures=self.memory.unresolved_failures(),
            workspace_keys=await all_keys(self.journal, self.id),
            **facts,
        )

    async def seed(self) -> dict[str, Any]:
        """``/memory seed``: import the newest handoff snapshot into the bank (§7).
        Returns ``{status}`` or ``{status, seeded, skipped, source}``."""
        from clio_acp.memory.handoff import aseed_from_newest_handoff

        bank = self.memory.task_bank()
        enabled = self._manager._settings().context.memory.enabled and bank is not None
        if bank is None:
            return {"status": "disabled"}
        outcome = await aseed_from_newest_handoff(bank, self.cwd, enabled=enabled)
        await self.save_bank()
        return outcome.to_dict()

    def _on_proposed(self, records: list[Any]) -> None:
        events = []
        for record in records:
            provenance = getattr(record, "provenance", None)
            events.append(
                MemoryProposal(
                    session_id=self.id,
                    record_id=record.id,
                    scope=str(record.scope),
                    content=record.lesson,
                    entry_id=getattr(provenance, "source_entry_id", None),
                )
            )
        if events and not self._closed:
            self._spawn(self._deliver_all(events))

    async def _deliver_all(self, events: list[SessionEvent]) -> None:
        for event in events:
            await self._emit(event)

    def start_watching(self) -> None:
        """Watch the workspace roots (watchfiles) so a change made outside the agent's
        own tools restarts the middleware's repeat counts (MEMORY_SPEC §12 item 1)."""
        if self._watch_task is not None:
            return
        self._watch_stop = asyncio.Event()
        self._watch_task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        from watchfiles import DefaultFilter, awatch

        ignore = (*DefaultFilter.ignore_dirs, ".clio-coder")
        try:
            async for _changes in awatch(
                *self.workspace.roots,
                watch_filter=DefaultFilter(ignore_dirs=ignore),
                stop_event=self._watch_stop,
                debounce=WATCH_DEBOUNCE_MS,
                rust_timeout=WATCH_RUST_TIMEOUT_MS,
            ):
                loop = self.loop
                if loop.tool_running or time.monotonic() - loop.last_tool_end < WATCH_GRACE_S:
                    continue  # the agent's own tool did it; the middleware classifies those
                self.memory.note_workspace_change()
                loop.guard.note_state_change()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # too many files, permissions: memory works without it
            log.info("workspace watcher stopped for %s: %s", self.id, exc)

    def _stop_watching(self) -> None:
        if self._watch_stop is not None:
            self._watch_stop.set()
        if self._watch_task is not None:
            self._watch_task.cancel()
            self._watch_task = None

    def rows(self) -> list[JournalEntry]:
        """The journal rows of this session's transcript."""
        return list(self.transcript.rows)

    @property
    def journal(self) -> Journal:
        """The journal this session is stored in (its events, spills, workspace values)."""
        return self._manager._journal_required()

    async def _close(self) -> None:
        if self._closed:
            return
        self._stop_watching()
        await self.cancel()
        with contextlib.suppress(Exception):
            await self.save_bank()
        with contextlib.suppress(Exception):
            self.memory.dispose()
        await self.loop.aclose()
        await self._emit(MemoryCleared(session_id=self.id))
        self._closed = True
        self._subscribers.clear()


class SessionManager:
    """All sessions of one process, backed by the journal at ``paths.journal_file``."""

    def __init__(
        self,
        *,
        paths: Paths,
        settings: Callable[[], Settings],
        host_factory: HostFactory | None = None,
        delivers_reminders: bool = True,
        model_factory: ModelFactory | None = None,
        memory_factory: MemoryFactory | None = None,
        max_turn_requests: int = MAX_TURN_REQUESTS_DEFAULT,
        watch_workspaces: bool = True,
    ) -> None:
        self.paths = paths
        self._settings = settings
        self._host_factory = host_factory
        self.delivers_reminders = delivers_reminders
        self._model_factory = model_factory or (lambda s: resolve_chat_model(s, paths=paths))
        self._memory_factory = memory_factory
        self.max_turn_requests = max_turn_requests
        self.watch_workspaces = watch_workspaces
        self._journal: Journal | None = None
        self._journal_lock = asyncio.Lock()
        self._live: dict[str, Session] = {}

    # ------------------------------------------------------------------ plumbing

    async def journal(self) -> Journal:
        """The session journal (opened on first use)."""
        async with self._journal_lock:
            if self._journal is None:
                self._journal = await Journal.open(self.paths.journal_file)
                # Start of the session core: drop temp files killed writers left.
                await asyncio.to_thread(MemoryStore(self.paths.records_file).sweep)
            return self._journal

    def _journal_required(self) -> Journal:
        assert self._journal is not None, "journal not open"
        return self._journal

    async def _system_prompt(self, session: Session) -> str:
        """Base prompt plus the approved durable-memory section (MEMORY_SPEC §6)."""
        section = ""
        try:
            section = await asyncio.to_thread(
                memory_hooks.durable_prompt_section, session.cwd, self._settings(), self.paths
            )
        except Exception:
            log.warning("durable memory section failed", exc_info=True)
        return BASE_SYSTEM_PROMPT + (f"\n\n{section}" if section else "")

    def _make_host(self, session_id: str, cwd: Path) -> ToolHost:
        if self._host_factory is None:
            return LocalToolHost()
        return self._host_factory(session_id, cwd)

    def _make_memory(self, session_id: str, cwd: Path) -> MemoryHooks:
        factory = self._memory_factory
        if factory is None:
            memory = _default_memory_factory(
                session_id, cwd, self._settings, self.delivers_reminders, self.paths
            )
        else:
            memory = factory(session_id, cwd, self._settings, self.delivers_reminders)
        # MEMORY_SPEC §10: every session change resets before the session can observe.
        memory.reset()
        return memory

    def _open(self, record: SessionRecord, rows: Sequence[JournalEntry]) -> Session:
        cwd = Path(record.cwd)
        session = Session(
            manager=self,
            record=record,
            rows=rows,
            host=self._make_host(record.id, cwd),
            memory=self._make_memory(record.id, cwd),
        )
        self._live[record.id] = session
        memory_settings = self._settings().context.memory
        if (
            self.watch_workspaces
            and memory_settings.enabled
            and memory_settings.state_change_resets_repeats
        ):
            session.start_watching()
        return session

    # ------------------------------------------------------------------ lifecycle

    async def new_session(
        self, cwd: Path, *, extra_roots: Sequence[Path] = (), mode: str | None = None
    ) -> Session:
        """A new empty session in ``cwd`` (absolute, an existing folder).

        Raises ``ValueError`` for a relative or missing cwd/root or an unknown mode.
        """
        cwd = Path(cwd)
        if not cwd.is_absolute():
            raise ValueError(f"cwd must be an absolute path: {cwd}")
        if not cwd.is_dir():
            raise ValueError(f"cwd is not a folder: {cwd}")
        roots = [Path(r) for r in extra_roots]
        for root in roots:
            if not root.is_absolute():
                raise ValueError(f"extra root must be absolute: {root}")
        mode = mode or self._settings().permissions.mode
        if mode not in PERMISSION_MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(PERMISSION_MODES)}")
        journal = await self.journal()
        now = utc_now()
        record = SessionRecord(
            id="sess_" + uuid.uuid4().hex,
            cwd=_norm(cwd),
            extra_roots=[_norm(r) for r in roots],
            mode=mode,
            created_at=now,
            updated_at=now,
        )
        await journal.create_session(record)
        return self._open(record, [])

    async def _stored(self, session_id: str) -> tuple[SessionRecord, list[JournalEntry]]:
        journal = await self.journal()
        record = await journal.get_session(session_id)
        if record is None:
            raise SessionNotFound(session_id)
        rows = await journal.events(session_id)
        return record, rows

    async def _reopen(self, session_id: str) -> Session:
        live = self._live.get(session_id)
        if live is not None:
            return live  # resuming the already current session does not reset (§10)
        record, rows = await self._stored(session_id)
        if record.closed:
            await self._journal_required().update_session(session_id, closed=False)
            record = record.model_copy(update={"closed": False})
        session = self._open(record, rows)
        bank, counters = await self._journal_required().load_bank(session_id)
        counters = counters or {}
        session.loop.guard.restore(counters.get("progressGuard"))
        try:
            effects = session.memory.restore(bank, counters)
        except Exception:
            log.warning("bank restore failed for %s", session_id, exc_info=True)
            effects = []
        session.loop.pending_reminders.extend(e for e in effects if isinstance(e, InjectReminder))
        return session

    async def _handoff_offer(self, session: Session) -> HandoffOffer | None:
        if not self._settings().context.memory.enabled:
            return None
        try:
            found = await asyncio.to_thread(
                memory_hooks.find_handoff_offer, session.cwd, session.memory.task_bank()
            )
        except Exception:
            log.warning("handoff discovery failed", exc_info=True)
            return None
        if not found:
            return None
        source, count = found
        return HandoffOffer(session_id=session.id, source=source, count=count)

    async def load_session(self, session_id: str) -> tuple[Session, list[SessionEvent]]:
        """Open a stored session and return it with its whole history as events (for
        replay), plus a trailing ``HandoffOffer`` when a handoff applies.
        Raises :class:`SessionNotFound`."""
        session = await self._reopen(session_id)
        events = replay_events(session.id, session.transcript.rows)
        offer = await self._handoff_offer(session)
        if offer is not None:
            events.append(offer)
        return session, events

    async def resume_session(self, session_id: str) -> Session:
        """Open a stored session without replay; a handoff offer goes to the first
        subscriber. Raises :class:`SessionNotFound`."""
        session = await self._reopen(session_id)
        offer = await self._handoff_offer(session)
        if offer is not None:
            session._early.append(offer)
        return session

    async def fork_session(self, session_id: str) -> Session:
        """A new session with a copy of the history of ``session_id`` and an empty
        bank (MEMORY_SPEC §12 item 7). Raises :class:`SessionNotFound`."""
        record, _rows = await self._stored(session_id)
        journal = self._journal_required()
        now = utc_now()
        fork = SessionRecord(
            id="sess_" + uuid.uuid4().hex,
            cwd=record.cwd,
            extra_roots=record.extra_roots,
            mode=record.mode,
            title=f"{record.title} (fork)" if record.title else None,
            parent_id=record.id,
            created_at=now,
            updated_at=now,
        )
        await journal.create_session(fork)
        await journal.copy_history(record.id, fork.id)
        rows = await journal.events(fork.id)
        return self._open(fork, rows)

    async def list_sessions(
        self, *, cwd: Path | str | None = None, cursor: str | None = None, limit: int = 50
    ) -> tuple[list[SessionInfo], str | None]:
        """Stored sessions, most recently updated first, paged by an opaque cursor.
        Raises ``ValueError`` for a bad cursor."""
        journal = await self.journal()
        records, next_cursor = await journal.list_sessions(
            cwd=_norm(cwd) if cwd is not None else None, cursor=cursor, limit=limit
        )
        return [_info(r) for r in records], next_cursor

    def get(self, session_id: str) -> Session:
        """The live session ``session_id``; raises :class:`SessionNotFound`."""
        try:
            return self._live[session_id]
        except KeyError:
            raise SessionNotFound(session_id) from None

    @property
    def live(self) -> dict[str, Session]:
        """The open sessions by id."""
        return dict(self._live)

    async def close_session(self, session_id: str) -> None:
        """Cancel any turn, save the bank, dispose the memory registration and free
        the session. Closing an unknown or closed session does nothing."""
        session = self._live.pop(session_id, None)
        if session is None:
            return
        await session._close()
        with contextlib.suppress(Exception):
            await self._journal_required().update_session(session_id, closed=True)

    async def delete_session(self, session_id: str) -> None:
        """Close (if live) and delete a session with its history; idempotent."""
        await self.close_session(session_id)
        journal = await self.journal()
        await journal.delete_session(session_id)

    async def aclose(self) -> None:
        """Close every open session and the journal."""
        for session_id in list(self._live):
            with contextlib.suppress(Exception):
                await self.close_session(session_id)
        if self._journal is not None:
            await self._journal.aclose()
            self._journal = None
