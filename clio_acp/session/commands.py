"""The session's verbs, protocol-neutral: what ``/memory``, ``/usage``, ``/handoff``,
``/compact`` and ``/workspace`` (ACP slash commands) and ``clio.memory.*``,
``clio.usage``, ``clio.handoff``, ``clio.workspace`` (LSP ``workspace/executeCommand``)
do (MEMORY_SPEC §6, §7, §10, §12 item 8; issue 19).

Owns the one definition of each verb both faces call: which durable records are
*pending*, how a bank entry is promoted, how usage events are totalled, and the one
error each verb raises for bad input (:class:`CommandError`, same text in both faces).
A face only parses its protocol's arguments, calls a function here, and renders the
result. It decides no memory policy: scope validation, redaction, idempotent ids and
the acknowledgement rule for global scope live in ``memory/promotion.py``; approval is
only ever an explicit operator call (ARCHITECTURE invariant 3).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clio_acp.events import MemoryProposal, UsageUpdate
from clio_acp.memory.durable import DurableMemory
from clio_acp.memory.promotion import PromotionError
from clio_acp.memory.store import MemoryStoreError, RecordNotFound
from clio_acp.paths import Paths
from clio_acp.session import evidence
from clio_acp.session import workspace_values as views

if TYPE_CHECKING:
    from clio_acp.session.manager import Session

log = logging.getLogger(__name__)

BOARD_PROPOSALS = 20
"""Pending proposals listed on the ``/memory`` board (newest first)."""

Scope = Literal["repo", "global"]


class CommandError(Exception):
    """A verb that cannot be done as asked; ``str()`` is the message to show the user.

    Both faces show it as it is: ACP as the slash command's reply text, LSP as a
    ``RequestFailed`` (-32803) error message. The session goes on."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "command failed"


# -- durable proposals (MEMORY_SPEC §6) ----------------------------------------------


async def pending_proposals(paths: Paths, *, workspace: Path | None = None) -> list[MemoryProposal]:
    """Every *pending* proposal: a durable record neither approved nor rejected (§6
    ``status == "proposed"``), in records.json order, as ``MemoryProposal`` events
    (``record_id``, ``scope``, ``content`` = the lesson, ``entry_id`` and
    ``session_id`` from its provenance, ``""`` when unknown). With ``workspace``,
    repo-scoped records of other repositories are left out (§6 identity).

    Raises :class:`CommandError` when records.json cannot be read (corrupt, locked)."""
    try:
        records = await DurableMemory.from_paths(paths).list_records()
    except MemoryStoreError as exc:
        raise CommandError(f"durable memory unreadable: {exc}") from None
    repository = None
    if workspace is not None:
        from clio_acp.memory.identity import canonical_repository_identity

        repository = await asyncio.to_thread(canonical_repository_identity, str(workspace))
    pending = []
    for record in records:
        if record.status != "proposed":
            continue
        key = record.repository.key if record.repository is not None else None
        if workspace is not None and record.scope == "repo" and key != repository:
            continue
        provenance = record.provenance
        pending.append(
            MemoryProposal(
                session_id=getattr(provenance, "source_session_id", None) or "",
                record_id=record.id,
                scope=record.scope,
                content=record.lesson,
                entry_id=getattr(provenance, "source_entry_id", None),
            )
        )
    return pending


def newest_first(proposals: list[MemoryProposal], limit: int = BOARD_PROPOSALS) -> list[Any]:
    """At most ``limit`` proposals, the last written first (records.json appends)."""
    return list(reversed(proposals))[:limit]


@dataclass(frozen=True)
class RecordOutcome:
    """A durable record after ``approve`` / ``reject``: its id and new §6 status."""

    record_id: str
    status: str


async def approve(paths: Paths, record_id: str) -> RecordOutcome:
    """Approve durable record ``record_id`` (``/memory approve``, ``clio.memory.approve``).

    Raises :class:`CommandError` for an unknown id or an unwritable store."""
    return await _decide(paths, record_id, approve=True)


async def reject(paths: Paths, record_id: str) -> RecordOutcome:
    """Reject durable record ``record_id`` (``/memory reject``, ``clio.memory.reject``).

    Raises :class:`CommandError` for an unknown id or an unwritable store."""
    return await _decide(paths, record_id, approve=False)


async def _decide(paths: Paths, record_id: str, *, approve: bool) -> RecordOutcome:
    durable = DurableMemory.from_paths(paths)
    try:
        record = await (durable.approve(record_id) if approve else durable.reject(record_id))
    except RecordNotFound:
        raise CommandError(f"no durable memory record {record_id!r}") from None
    except MemoryStoreError as exc:
        raise CommandError(str(exc)) from None
    return RecordOutcome(record_id=record.id, status=record.status)


@dataclass(frozen=True)
class PromoteOutcome:
    """What ``promote`` did. ``status`` is ``"needs_acknowledgement"`` (global scope
    without acknowledgement: nothing written) or ``"proposed"`` (``record_id`` is the
    unapproved durable record; ``created`` False when it already existed)."""

    status: Literal["needs_acknowledgement", "proposed"]
    record_id: str | None = None
    created: bool = False

    def to_wire(self) -> dict[str, Any]:
        """``_clio/memory/propose`` result shape (MEMORY_SPEC §10): ``{"status"}`` or
        ``{"status", "recordId", "created"}``."""
        if self.status == "needs_acknowledgement":
            return {"status": self.status}
        return {"status": self.status, "recordId": self.record_id, "created": self.created}


async def promote(
    session: Session,
    paths: Paths,
    entry_id: str,
    scope: str,
    *,
    acknowledge_global: bool = False,
) -> PromoteOutcome:
    """Propose task-bank entry ``entry_id`` of ``session`` as an unapproved durable
    record with ``scope`` ``"repo"`` or ``"global"`` (``/memory promote``,
    ``_clio/memory/propose``, ``clio.memory.promote``; MEMORY_SPEC §6).

    Raises :class:`CommandError` when memory is off, the entry is unknown or is the
    status entry, the scope is not repo/global, repo scope has no canonical repository,
    or the store cannot be written."""
    if scope not in ("repo", "global"):
        raise CommandError(f"scope must be repo or global, not {scope!r}")
    bank = session.memory.task_bank()
    if bank is None:
        raise CommandError("memory is off for this session: nothing to promote")
    entry = bank.get(entry_id)
    if entry is None or entry.kind not in ("knowledge", "procedural"):
        raise CommandError(f"no knowledge or procedural entry {entry_id!r} in this session's bank")
    try:
        result = await DurableMemory.from_paths(paths).propose_entry(
            bank,
            session_id=session.id,
            entry_id=entry_id,
            scope=scope,  # type: ignore[arg-type]
            cwd=session.cwd,
            acknowledge_global=acknowledge_global,
        )
    except (PromotionError, MemoryStoreError) as exc:
        raise CommandError(str(exc)) from None
    if result.get("status") == "needs_acknowledgement":
        return PromoteOutcome(status="needs_acknowledgement")
    return PromoteOutcome(
        status="proposed", record_id=result["recordId"], created=bool(result["created"])
    )


# -- the task bank and handoffs (MEMORY_SPEC §7, §12 item 8) -------------------------


def board(session: Session | None) -> dict[str, Any] | None:
    """The ``/memory`` board of ``session`` (tier, last decision, bank without status,
    activity, spend; ``Session.board``), or None without a session."""
    return session.board() if session is not None else None


async def memory_board(session: Session, paths: Paths) -> dict[str, Any]:
    """The board plus ``"proposals"``: the newest :data:`BOARD_PROPOSALS` pending
    proposals as ``{"id", "scope", "content"}``; an unreadable records.json is listed
    as one ``{"id": "?", "scope": "?", "content": "unreadable: …"}`` row (shown, not
    fatal)."""
    shown = dict(session.board())
    try:
        pending = newest_first(await pending_proposals(paths))
    except CommandError as exc:
        shown["proposals"] = [{"id": "?", "scope": "?", "content": f"unreadable: {exc}"}]
        return shown
    shown["proposals"] = [
        {"id": p.record_id, "scope": p.scope, "content": p.content} for p in pending
    ]
    return shown


async def seed(session: Session) -> dict[str, Any]:
    """``/memory seed``: import the newest handoff snapshot into the bank (§7). Returns
    ``{"status"}`` or ``{"status", "seeded", "skipped", "source"}``
    (``Session.seed``). Raises :class:`CommandError` when the handoff cannot be read."""
    try:
        return await session.seed()
    except (OSError, ValueError) as exc:
        raise CommandError(f"seed failed: {exc}") from None


async def handoff(session: Session) -> Path:
    """Write the handoff artifact (``<cwd>/.clio-coder/handoffs/handoff-<UTC>.md``, no
    model; §12 item 8) and return its path. Raises :class:`CommandError` when memory is
    off or the folder cannot be written."""
    try:
        return await session.handoff()
    except (RuntimeError, OSError) as exc:
        raise CommandError(str(exc)) from None


async def compact(session: Session) -> None:
    """Compact the conversation now (``/compact``); waits for a running turn. A failure
    or nothing to compact is reported by the session as a ``Notice`` event."""
    await session.compact()


# -- usage -----------------------------------------------------------------------------


@dataclass
class UsageTotals:
    """Chat token totals of one session's ``UsageUpdate`` events, as a face saw them.

    ``requests`` counts model requests (one event each); token counts are summed;
    ``context_used`` / ``context_size`` (tokens) are the latest reported values."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    context_used: int | None = None
    context_size: int | None = None

    def add(self, event: UsageUpdate) -> None:
        """Count one ``UsageUpdate`` event."""
        self.requests += 1
        self.input_tokens += event.input_tokens
        self.output_tokens += event.output_tokens
        self.cached_tokens += event.cached_tokens
        if event.context_used is not None:
            self.context_used = event.context_used
        if event.context_size is not None:
            self.context_size = event.context_size

    def as_dict(self) -> dict[str, Any]:
        """camelCase JSON: ``inputTokens``, ``outputTokens``, ``cachedTokens``,
        ``contextUsed``, ``contextSize`` (None until reported) and ``updates``
        (= requests)."""
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cachedTokens": self.cached_tokens,
            "contextUsed": self.context_used,
            "contextSize": self.context_size,
            "updates": self.requests,
        }


def usage(session: Session | None, totals: UsageTotals) -> dict[str, Any]:
    """``/usage``, ``clio.usage``: ``{"sessionId", "session": totals.as_dict(),
    "memory": the board's spend (None without memory), "spendLine": str | None}``."""
    shown = board(session) or {}
    return {
        "sessionId": session.id if session is not None else None,
        "session": totals.as_dict(),
        "memory": shown.get("spend"),
        "spendLine": shown.get("spendLine"),
    }


# -- proposals from evidence (MEMORY_SPEC §6; issue 19 item 3) --------------------------


async def propose_event(
    session: Session,
    paths: Paths,
    event: str,
    scope: str,
    *,
    acknowledge_global: bool = False,
    content: str | None = None,
) -> dict[str, Any]:
    """Propose an unapproved durable record whose evidence is one journal event
    (``/memory propose-event``, ``clio.memory.proposeEvent``): ``event`` is ``SEQ`` (an
    event of ``session``) or ``SESSION:SEQ``; the lesson is ``content`` or the event's
    own text. Returns ``{"status": "needs_acknowledgement"}`` (global without
    acknowledgement: nothing written) or ``{"status": "proposed", "recordId",
    "created", "scope", "lesson", "evidenceRef", "eventType"}``.

    Raises :class:`CommandError` for a malformed reference, an unknown session or
    event, a scope that cannot apply, an event with no text and no ``content``, or a
    store that cannot be written."""
    try:
        return await evidence.propose_event(
            session.journal,
            paths,
            event,
            scope,
            acknowledge_global=acknowledge_global,
            content=content,
            default_session=session.id,
        )
    except (ValueError, LookupError, MemoryStoreError) as exc:  # PromotionError is a ValueError
        raise CommandError(str(exc)) from None


# -- the named text workspace (issue 19 item 1) -----------------------------------------


async def workspace(
    session: Session,
    key: str | None = None,
    *,
    offset: int = 0,
    cursor: str | None = None,
    max_chars: int | None = None,
) -> dict[str, Any]:
    """The named text values ``session``'s model kept (``/workspace``, ``clio.workspace``).

    Without ``key``: one page of keys, ``{"sessionId", "values": [{"key", "chars",
    "updatedAt"}], "nextCursor"}`` (100 per page, key order). With ``key``: ``{"sessionId",
    "key", "offset", "text", "totalChars", "nextOffset"}`` (at most 32,768 characters
    from ``offset``; ``nextOffset`` None at the end). Raises :class:`CommandError` for
    an unknown key, an offset outside the value or a bad cursor."""
    try:
        if key is None:
            return await views.list_values(session.journal, session.id, cursor=cursor)
        return await views.read_value(
            session.journal,
            session.id,
            key,
            offset=offset,
            max_chars=max_chars or views.READ_MAX_CHARS,
        )
    except views.WorkspaceViewError as exc:
        raise CommandError(str(exc)) from None
