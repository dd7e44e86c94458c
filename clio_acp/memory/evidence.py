"""Durable-record proposals from evidence: a journal event, not a bank entry (MEMORY_SPEC §6,
seed 003 ``proposeMemoryFromEvidence``; issue 19 item 3).

Owns turning one piece of evidence — a session's journal event (a tool result, a
failure, a user message …) named ``event:<sessionId>:<seq>`` — into an unapproved
``MemoryRecord`` through the same rules as a promotion (``promotion.py``): an explicit
scope (repo needs an already-canonical repository key, global an explicit
acknowledgement; runtime and agent scopes are not offered, an event carries no such
identity), the lesson redacted with markers preserved and whitespace collapsed, cut
after redaction to 1,200 characters, redaction facts in provenance, and an idempotent
id. Provenance is ``{sourceKind: "evidence", evidenceId, sourceSessionId, redaction}``
(no entry fields, §6 coupling); ``evidenceRefs`` is ``[evidenceId]``.

The id is ``mem-`` + the first 16 hex chars of sha256 of the compact JSON of
``{sourceKind, evidenceId, evidenceRefs (unique, sorted), lesson, scopeKey}`` — the
promotion formula with the evidence id in place of the entry: proposing the same
event with the same lesson and scope again returns ``created: false``, while a
different operator text or scope is a different proposal (the reference's
``sha256(evidenceId)`` alone would silently drop a corrected lesson).

It never approves (ARCHITECTURE invariant 3) and never reads the journal: the
session layer finds the event and its text.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from clio_acp.memory.promotion import (
    PROMOTION_CONFIDENCE,
    PromotionError,
    PromotionResult,
    ScopeSelection,
    validate_scope,
)
from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.redact import RedactionTally, cut_redacted, redact_secrets_text
from clio_acp.memory.store import MemoryStore
from clio_acp.timestamps import format_timestamp

__all__ = [
    "LESSON_MAX_CHARS",
    "EvidenceSource",
    "apropose_from_evidence",
    "event_evidence_id",
    "evidence_record_id",
    "propose_from_evidence",
    "record_from_evidence",
]

LESSON_MAX_CHARS = 1_200
"""A lesson from evidence is cut (after redaction) to a bank entry's size (§1: 1,200)."""
_SOURCE_VALUE_MAX_CHARS = 1_024  # §6: source values are 1–1024 chars


def event_evidence_id(session_id: str, seq: int) -> str:
    """``event:<sessionId>:<seq>``: the evidence id (and ref) of one journal event."""
    return f"event:{session_id}:{seq}"


@dataclass(frozen=True)
class EvidenceSource:
    """One piece of evidence: its id, the session it belongs to, and the text the
    lesson is made from (the operator's words, or the event's own text)."""

    evidence_id: str
    session_id: str
    text: str


@dataclass(frozen=True)
class _NoIdentities:
    runtime_ids: tuple[str, ...] = ()
    agent_ids: tuple[str, ...] = ()


def _valid_source_value(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= _SOURCE_VALUE_MAX_CHARS
        and value.strip() == value
        and not any(ch in value for ch in "\x00\r\n")
        and redact_secrets_text(value) == value
    )


def evidence_record_id(
    *, evidence_id: str, evidence_refs: list[str], lesson: str, scope_key: str
) -> str:
    """``mem-`` + sha256(compact JSON)[:16] over exactly these keys in this order."""
    payload = {
        "sourceKind": "evidence",
        "evidenceId": evidence_id,
        "evidenceRefs": sorted(set(evidence_refs)),
        "lesson": lesson,
        "scopeKey": scope_key,
    }
    compact = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return "mem-" + hashlib.sha256(compact.encode("utf-8")).hexdigest()[:16]


def record_from_evidence(
    source: EvidenceSource, selection: ScopeSelection, now: datetime | None = None
) -> MemoryRecord:
    """Build (and validate) the unapproved record for ``source`` under ``selection``.

    Raises ``NeedsAcknowledgement`` (global without acknowledgement) and
    ``PromotionError`` (runtime/agent scope, a repo key that is not canonical, an
    invalid or secret-shaped evidence or session id, an empty lesson). Never writes.
    """
    if selection.scope not in ("repo", "global"):
        raise PromotionError("a proposal from evidence takes repo or global scope")
    if not _valid_source_value(source.evidence_id):
        raise PromotionError("a proposal from evidence needs a valid evidence id")
    if not _valid_source_value(source.session_id):
        raise PromotionError("a proposal from evidence needs a valid source session id")
    selection = validate_scope(selection, _NoIdentities())  # type: ignore[arg-type]
    tally = RedactionTally()
    lesson = " ".join(cut_redacted(" ".join(source.text.split()), LESSON_MAX_CHARS, tally).split())
    if not lesson:
        raise PromotionError("the evidence has no text to make a lesson from; give one")
    refs = [source.evidence_id]
    data: dict[str, Any] = {
        "id": evidence_record_id(
            evidence_id=source.evidence_id,
            evidence_refs=refs,
            lesson=lesson,
            scope_key=selection.scope_key,
        ),
        "scope": selection.scope,
        "key": f"promotion:evidence:{source.evidence_id}",
        "lesson": lesson,
        "evidenceRefs": refs,
        "appliesWhen": (
            [f"repository:canonical-path:{selection.key}"] if selection.scope == "repo" else []
        ),
        "avoidWhen": [],
        "confidence": PROMOTION_CONFIDENCE,
        "createdAt": format_timestamp(now or datetime.now(UTC)),
        "approved": False,
        "provenance": {
            "sourceKind": "evidence",
            "evidenceId": source.evidence_id,
            "sourceSessionId": source.session_id,
            "redaction": {
                "appliedBeforePersistence": True,
                "replacementCount": tally.count,
                "sourceFields": ["content"] if lesson != " ".join(source.text.split()) else [],
            },
        },
    }
    if selection.scope == "repo":
        data["repository"] = {"kind": "canonical-path", "key": selection.key}
    try:
        return MemoryRecord.model_validate(data)
    except ValueError as exc:  # pydantic.ValidationError is a ValueError
        raise PromotionError(f"proposed memory record invalid: {exc}") from exc


def propose_from_evidence(
    store: MemoryStore,
    source: EvidenceSource,
    selection: ScopeSelection,
    now: datetime | None = None,
) -> PromotionResult:
    """Write one unapproved proposal. Idempotent: an existing id returns
    ``created=False`` and the stored record. Raises as :func:`record_from_evidence`
    and the store's errors (corrupt file, cap)."""
    record = record_from_evidence(source, selection, now)
    stored, created = store.add_if_absent(record)
    return PromotionResult(stored, created)


async def apropose_from_evidence(
    store: MemoryStore,
    source: EvidenceSource,
    selection: ScopeSelection,
    now: datetime | None = None,
) -> PromotionResult:
    """:func:`propose_from_evidence` with the file work in a worker thread."""
    return await asyncio.to_thread(propose_from_evidence, store, source, selection, now)
