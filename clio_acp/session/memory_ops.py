"""Operator memory verbs on a live session: approve, reject, propose (MEMORY_SPEC §6, §10).

Owns the protocol-neutral glue the faces share for ``/memory approve ID``,
``/memory reject ID``, ``/memory promote ENTRY repo|global`` (ACP slash commands) and
``_clio/memory/propose`` (ACP extension method; the LSP code actions can use the same
calls): it finds a bank entry in the session's memory snapshot and hands it to
``clio_acp.memory.promotion`` / ``clio_acp.memory.store``. It decides nothing itself:
scope validation, redaction, idempotent ids and the acknowledgement rule for global
scope live in ``memory/promotion.py``. Approval is only ever an explicit operator call
(ARCHITECTURE invariant 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clio_acp.memory.identity import canonical_repository_identity
from clio_acp.memory.promotion import (
    NeedsAcknowledgement,
    PromotionError,
    PromotionSource,
    ScopeSelection,
    apromote,
)
from clio_acp.memory.store import MemoryStore
from clio_acp.paths import Paths


@dataclass(frozen=True)
class _BankEntry:
    """A ``PromotableEntry`` read from a bank snapshot (camelCase dict)."""

    id: str
    kind: str
    content: str
    created_at: str
    last_touched_at: str


def find_bank_entry(snapshot: dict[str, Any] | None, entry_id: str) -> _BankEntry:
    """The knowledge or procedural entry ``entry_id`` of a bank snapshot.

    Raises ``KeyError`` when it is absent (status is never promotable, §6).
    """
    for kind in ("knowledge", "procedural"):
        for item in (snapshot or {}).get(kind) or []:
            if isinstance(item, dict) and item.get("id") == entry_id:
                return _BankEntry(
                    id=entry_id,
                    kind=str(item.get("kind") or kind),
                    content=str(item.get("content", "")),
                    created_at=str(item.get("createdAt", "")),
                    last_touched_at=str(item.get("lastTouchedAt", item.get("createdAt", ""))),
                )
    raise KeyError(f"no knowledge or procedural entry {entry_id!r} in this session's bank")


async def propose_entry(
    session: Any,
    paths: Paths,
    entry_id: str,
    scope: str,
    *,
    acknowledge_global: bool = False,
) -> dict[str, Any]:
    """Propose a bank entry as an unapproved durable record.

    Returns ``{"status": "needs_acknowledgement"}`` for global scope without
    acknowledgement (nothing written), else ``{"status": "proposed", "recordId": id,
    "created": bool}``. Raises ``KeyError`` for an unknown entry and
    ``PromotionError`` (a ``ValueError``) for a scope that cannot apply (e.g. repo
    scope outside a repository).
    """
    entry = find_bank_entry(session.memory.snapshot(), entry_id)
    if scope == "repo":
        key = canonical_repository_identity(str(session.cwd))
        if key is None:
            raise PromotionError(f"no repository identity for {session.cwd}")
        selection = ScopeSelection.repo(key)
    elif scope == "global":
        selection = ScopeSelection.global_(acknowledge_global=acknowledge_global)
    else:
        raise PromotionError(f"scope must be repo or global, not {scope!r}")
    source = PromotionSource(
        kind="task-bank-entry",
        session_id=session.id,
        evidence_refs=[f"session:{session.id}"],
        entry=entry,
    )
    try:
        result = await apromote(MemoryStore(paths.records_file), source, selection)
    except NeedsAcknowledgement:
        return {"status": "needs_acknowledgement"}
    return {"status": "proposed", "recordId": result.record.id, "created": result.created}


async def pending_proposals(paths: Paths, limit: int = 20) -> list[dict[str, Any]]:
    """Unapproved, unrejected durable records (newest first, at most ``limit``) as
    ``{"id", "scope", "content"}`` for the ``/memory`` board. A corrupt records file
    raises the store's error (the caller shows it)."""
    records = await MemoryStore(paths.records_file).aload()
    pending = [r for r in records if not r.approved and r.rejected_at is None]
    pending.sort(key=lambda r: r.created_at, reverse=True)
    return [{"id": r.id, "scope": r.scope, "content": r.lesson} for r in pending[:limit]]


async def approve_record(paths: Paths, record_id: str) -> str:
    """Approve a durable record; returns its id. Raises ``KeyError`` (RecordNotFound)."""
    record = await MemoryStore(paths.records_file).aapprove(record_id)
    return record.id


async def reject_record(paths: Paths, record_id: str) -> str:
    """Reject a durable record; returns its id. Raises ``KeyError`` (RecordNotFound)."""
    record = await MemoryStore(paths.records_file).areject(record_id)
    return record.id
