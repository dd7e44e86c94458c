"""Propose a durable record from a journal event (issue 19 item 3; MEMORY_SPEC §6).

Owns the protocol-neutral verb the CLI (``clio-acp memory propose --from-evidence
SESSION:EVENT``), ACP (``/memory propose-event``) and LSP (``clio.memory.proposeEvent``)
share: parse the event reference, find the event in the session journal, make the
lesson source (the operator's ``content``, else the event's own text: a user message,
a tool result with its command and outcome, a reminder, a notice, an answer), choose
the scope's identity (repo: the canonical identity of the session's folder) and hand
it to ``clio_acp.memory.evidence``, which applies the promotion rules. The record
starts unapproved; approval stays an operator's separate act.
"""

from __future__ import annotations

import re
from typing import Any

from clio_acp.agent import history
from clio_acp.memory.evidence import EvidenceSource, apropose_from_evidence, event_evidence_id
from clio_acp.memory.identity import canonical_repository_identity
from clio_acp.memory.promotion import NeedsAcknowledgement, PromotionError, ScopeSelection
from clio_acp.memory.store import MemoryStore
from clio_acp.paths import Paths
from clio_acp.session.journal import Journal, JournalEntry

__all__ = ["EvidenceNotFound", "event_text", "parse_event_ref", "propose_event"]

_REF = re.compile(r"^(?:event:)?(?:(?P<session>[^\s:]+):)?(?P<seq>[0-9]+)$")


class EvidenceNotFound(LookupError):
    """The session or the event does not exist (the message names which)."""


def parse_event_ref(text: str, *, default_session: str | None = None) -> tuple[str, int]:
    """``(session_id, seq)`` of ``SESSION:EVENT``, ``event:SESSION:EVENT`` or, with a
    ``default_session``, a bare ``EVENT`` (the seq ``clio-acp events`` prints).
    Raises ``ValueError`` for anything else."""
    match = _REF.match((text or "").strip())
    session = match.group("session") if match else None
    session = session or default_session
    if match is None or not session or int(match.group("seq")) < 1:
        raise ValueError(
            f"not an event reference: {text!r} (expected SESSION:EVENT, e.g. sess_1a2b:12)"
        )
    return session, int(match.group("seq"))


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def event_text(row: JournalEntry, call: JournalEntry | None = None) -> str:
    """The text a lesson is made from for one journal row ('' when the row carries no
    text: a turn end, a mode change, a memory step). ``call`` is the ``tool_call`` row
    of a ``tool_result``."""
    data = row.data
    if row.type == history.ROW_TOOL_RESULT:
        title = str((call.data if call else {}).get("title") or data.get("name") or "tool call")
        disposition = data.get("disposition") or {}
        if data.get("status") != "completed":
            return f"{title} failed: {disposition.get('digest') or _first_line(str(data.get('output', '')))}"
        return f"{title}: {_first_line(str(data.get('output', '')))}"
    if row.type == history.ROW_TOOL_CALL:
        return str(data.get("title") or data.get("name") or "")
    if row.type == history.ROW_COMPACTION:
        return str(data.get("summary") or "")
    if row.type in (
        history.ROW_PROMPT,
        history.ROW_ASSISTANT,
        history.ROW_REMINDER,
        history.ROW_NOTICE,
    ):
        return str(data.get("text") or "")
    return ""


async def _find(journal: Journal, session_id: str, seq: int) -> tuple[JournalEntry, str]:
    rows = await journal.events(session_id, after=seq - 1, limit=1)
    if not rows or rows[0].seq != seq:
        raise EvidenceNotFound(f"session {session_id} has no event {seq}")
    row, call = rows[0], None
    if row.type == history.ROW_TOOL_RESULT:
        call_id = row.data.get("tool_call_id")
        calls = await journal.events(session_id, types=[history.ROW_TOOL_CALL])
        call = next((c for c in calls if c.data.get("tool_call_id") == call_id), None)
    return row, event_text(row, call)


async def propose_event(
    journal: Journal,
    paths: Paths,
    ref: str,
    scope: str,
    *,
    acknowledge_global: bool = False,
    content: str | None = None,
    default_session: str | None = None,
) -> dict[str, Any]:
    """Propose an unapproved durable record from the journal event ``ref``.

    Returns ``{"status": "needs_acknowledgement"}`` for global scope without
    acknowledgement (nothing written), else ``{"status": "proposed", "recordId",
    "created", "scope", "lesson", "evidenceRef", "eventType"}``. Raises ``ValueError``
    for a malformed reference or scope (``PromotionError`` for a scope that cannot
    apply, e.g. repo outside an absolute folder, or an event with no text and no
    ``content``) and :class:`EvidenceNotFound` for an unknown session or event; the
    store's errors (corrupt file, cap) pass through.
    """
    session_id, seq = parse_event_ref(ref, default_session=default_session)
    record = await journal.get_session(session_id)
    if record is None:
        raise EvidenceNotFound(f"session not found: {session_id}")
    row, text = await _find(journal, session_id, seq)
    if content is not None and content.strip():
        text = content
    if scope == "repo":
        key = canonical_repository_identity(record.cwd)
        if key is None:
            raise PromotionError(f"no repository identity for {record.cwd}")
        selection = ScopeSelection.repo(key)
    elif scope == "global":
        selection = ScopeSelection.global_(acknowledge_global=acknowledge_global)
    else:
        raise PromotionError(f"scope must be repo or global, not {scope!r}")
    source = EvidenceSource(event_evidence_id(session_id, seq), session_id, text)
    try:
        result = await apropose_from_evidence(MemoryStore(paths.records_file), source, selection)
    except NeedsAcknowledgement:
        return {"status": "needs_acknowledgement"}
    stored = result.record
    return {
        "status": "proposed",
        "recordId": stored.id,
        "created": result.created,
        "scope": stored.scope,
        "lesson": stored.lesson,
        "evidenceRef": source.evidence_id,
        "eventType": row.type,
    }
