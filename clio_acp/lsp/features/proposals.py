"""Pending memory proposals (unapproved, unrejected durable records; MEMORY_SPEC §6).

Owns the face's copy of the pending proposals (``commands.pending_proposals``,
re-read when records.json changes, plus the ``MemoryProposal`` events of the bound
session), their ``clio-memory`` diagnostics on the memory document, and the link
from a reminder's diagnostic to the proposal of an entry it cites: that is what the
``textDocument/codeAction`` quick fixes "Approve memory …" / "Reject memory …" use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from clio_acp.lsp import translate
from clio_acp.lsp.features import Feature
from clio_acp.session import CommandError, MemoryProposal, commands

if TYPE_CHECKING:
    from clio_acp.lsp.memory_doc import RenderedDocument
    from clio_acp.session import SessionEvent

logger = logging.getLogger(__name__)


class Proposals(Feature):
    """``pending``: record id → ``MemoryProposal``, in records.json order."""

    def __init__(self, face: Any) -> None:
        super().__init__(face)
        self.pending: dict[str, MemoryProposal] = {}
        self._records_stamp: tuple[int, int] | None = None

    def on_event(self, event: SessionEvent) -> None:
        """A ``MemoryProposal`` becomes pending, linked to the reminders citing its entry."""
        if isinstance(event, MemoryProposal):
            self._add(event)

    def for_entries(self, entry_ids: Iterable[str]) -> str | None:
        """The record id of a pending proposal made from one of ``entry_ids``."""
        cited = set(entry_ids)
        return next((p.record_id for p in self.pending.values() if p.entry_id in cited), None)

    async def refresh(self, *, only_if_changed: bool = False) -> None:
        """Reload the pending proposals from the store, show each on its line of the
        memory document, and rewrite the document. With ``only_if_changed``, nothing
        happens unless records.json changed since the last load (code actions ask
        often). A store that cannot be read is logged; the proposals seen in events
        remain."""
        try:
            stamp: tuple[int, int] | None = _stamp(self.ls.paths.records_file)
        except OSError:
            stamp = None
        if only_if_changed and stamp == self._records_stamp:
            return
        self._records_stamp = stamp
        try:
            pending = await commands.pending_proposals(
                self.ls.paths, workspace=self.face.workspace_root
            )
        except CommandError as exc:
            logger.warning("Cannot read durable memory records: %s", exc)
        else:
            self.pending = {p.record_id: p for p in pending}
        # The document publishes its diagnostics once the file holds their lines.
        await self.face.document.write_now()
        self.face.status.update()

    def resolve(self, record_id: str) -> None:
        """Forget a proposal that was approved or rejected; drop it from diagnostics."""
        self.pending.pop(record_id, None)

        def unlink(uri: str, diagnostic: types.Diagnostic) -> types.Diagnostic | None:
            data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
            if data.get("proposalId") != record_id:
                return diagnostic
            if data.get("kind") == "proposal":
                return None
            rest = {k: v for k, v in data.items() if k != "proposalId"}
            return _with_data(diagnostic, rest)

        self.ls.diagnostics.update(translate.MEMORY_SOURCE, unlink)
        self.face.document.schedule()
        self.face.status.update()

    def _add(self, proposal: MemoryProposal) -> None:
        self.pending[proposal.record_id] = proposal
        self.face.document.schedule()
        if not self.ls.options.diagnostics.enabled:
            return

        def link(uri: str, diagnostic: types.Diagnostic) -> types.Diagnostic:
            data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
            cited = data.get("citedEntries") or []
            if proposal.entry_id and proposal.entry_id in cited and not data.get("proposalId"):
                return _with_data(diagnostic, {**data, "proposalId": proposal.record_id})
            return diagnostic

        self.ls.diagnostics.update(translate.MEMORY_SOURCE, link)

    def document_diagnostics(self, rendered: RenderedDocument) -> list[types.Diagnostic]:
        """One diagnostic per pending proposal, on its line of the document
        ``rendered`` (the text just written); its quick fixes approve or reject it."""
        options = self.ls.options.diagnostics
        if not options.enabled:
            return []
        return [
            translate.proposal_diagnostic(proposal, line, severity=options.severity)
            for record_id, proposal in self.pending.items()
            if (line := rendered.proposal_lines.get(record_id)) is not None
        ]


def _with_data(diagnostic: types.Diagnostic, data: dict[str, Any]) -> types.Diagnostic:
    return types.Diagnostic(
        range=diagnostic.range,
        message=diagnostic.message,
        severity=diagnostic.severity,
        source=diagnostic.source,
        code=diagnostic.code,
        data=data,
    )


def _stamp(path: Path) -> tuple[int, int]:
    """(mtime ns, size) of ``path``; raises ``OSError`` when it does not exist."""
    info = path.stat()
    return info.st_mtime_ns, info.st_size
