"""One async façade over durable memory for the session core and the faces (MEMORY_SPEC §6).

Owns nothing new: it wires ``store`` (records.json), ``identity``, ``retrieval`` and
``promotion`` together behind coroutines that never block the event loop, with the
wire shapes the faces need: the ``# Memory`` prompt section for a session folder,
``_clio/memory/propose`` (``{"status": "needs_acknowledgement"}`` or
``{"status": "proposed", "recordId": …, "created": bool}``), the LLM-tier
auto-proposal, and list / approve / reject for ``/memory`` and LSP code actions.

It must not approve anything on its own, and a broken store must never break a
turn: ``prompt_section`` answers an empty section (and logs) when records.json is
invalid; the write paths raise ``MemoryStoreError`` for the caller to show.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.identity import canonical_repository_identity
from clio_acp.memory.promotion import (
    NeedsAcknowledgement,
    PromotableEntry,
    PromotionError,
    PromotionSource,
    ProposalOutcome,
    ScopeSelection,
    promote,
    propose_injected_entries,
)
from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.retrieval import (
    ActiveIdentity,
    PromptSection,
    RelevanceInput,
    build_prompt_section,
)
from clio_acp.memory.store import MemoryStore, MemoryStoreError
from clio_acp.paths import Paths

__all__ = ["DurableMemory"]

logger = logging.getLogger(__name__)


@dataclass
class DurableMemory:
    """Durable memory of one installation (``paths.records_file``)."""

    store: MemoryStore

    @classmethod
    def from_paths(cls, paths: Paths) -> DurableMemory:
        """The store at ``<data>/memory/records.json``."""
        return cls(MemoryStore(paths.records_file))

    async def prompt_section(
        self,
        cwd: str | os.PathLike[str],
        *,
        runtime: str | None = None,
        agent: str | None = None,
        relevance: RelevanceInput | None = None,
    ) -> PromptSection:
        """The ``# Memory`` section for a session in ``cwd`` (≤ 5 approved, eligible
        records within 400 tokens). An invalid store gives an empty section and a
        warning on stderr; it never raises for it."""

        def build() -> PromptSection:
            active = ActiveIdentity(canonical_repository_identity(os.fspath(cwd)), runtime, agent)
            try:
                records = self.store.load()
            except MemoryStoreError as exc:
                logger.warning("durable memory unavailable for the prompt: %s", exc)
                return PromptSection(text="")
            return build_prompt_section(records, active, relevance=relevance)

        return await asyncio.to_thread(build)

    async def propose_entry(
        self,
        bank: TaskMemoryBank,
        *,
        session_id: str,
        entry_id: str,
        scope: Literal["repo", "global"],
        cwd: str | os.PathLike[str],
        acknowledge_global: bool = False,
    ) -> dict[str, Any]:
        """``_clio/memory/propose`` (§10): promote one bank entry by hand.

        Returns ``{"status": "needs_acknowledgement"}`` for global scope without
        acknowledgement (nothing written), else ``{"status": "proposed", "recordId",
        "created"}``. Raises ``PromotionError`` (unknown entry, status entry, no
        canonical repository) and ``MemoryStoreError``.
        """
        entry = bank.get(entry_id)
        if entry is None:
            raise PromotionError(f"no task-memory entry {entry_id!r} in this session")
        if scope == "repo":
            repository = canonical_repository_identity(os.fspath(cwd))
            if repository is None:
                raise PromotionError("the session folder has no canonical repository identity")
            selection = ScopeSelection.repo(repository)
        elif scope == "global":
            selection = ScopeSelection.global_(acknowledge_global=acknowledge_global)
        else:
            raise PromotionError(f"unsupported scope {scope!r} (repo or global)")
        source = PromotionSource(
            kind="task-bank-entry",
            session_id=session_id,
            evidence_refs=(f"session:{session_id}",),
            entry=entry,
        )
        try:
            result = await asyncio.to_thread(promote, self.store, source, selection)
        except NeedsAcknowledgement:
            return {"status": "needs_acknowledgement"}
        return {"status": "proposed", "recordId": result.record.id, "created": result.created}

    async def propose_injected(
        self,
        *,
        tier: Literal["rules", "llm"],
        session_id: str | None,
        cwd: str | os.PathLike[str] | None,
        entries: Iterable[PromotableEntry],
    ) -> ProposalOutcome:
        """Auto-proposal after an injected step (LLM tier only; see
        ``promotion.propose_injected_entries``). Never raises for per-entry errors."""
        frozen = [_Entry(e.id, e.kind, e.content, e.created_at, e.last_touched_at) for e in entries]
        return await asyncio.to_thread(
            propose_injected_entries,
            self.store,
            tier=tier,
            session_id=session_id,
            cwd=cwd,
            entries=frozen,
        )

    async def list_records(self) -> list[MemoryRecord]:
        """All records (file order). Raises ``MemoryStoreCorrupt``."""
        return await self.store.aload()

    async def approve(self, record_id: str) -> MemoryRecord:
        """Approve by id. Raises ``RecordNotFound`` / ``MemoryStoreError``."""
        return await self.store.aapprove(record_id)

    async def reject(self, record_id: str) -> MemoryRecord:
        """Reject by id. Raises ``RecordNotFound`` / ``MemoryStoreError``."""
        return await self.store.areject(record_id)


@dataclass(frozen=True)
class _Entry:
    id: str
    kind: str
    content: str
    created_at: str
    last_touched_at: str
