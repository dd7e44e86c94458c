"""Memory reminders as ``clio-memory`` diagnostics (``textDocument/publishDiagnostics``).

Each reminder is shown on the files it or its cited entries name, else on its line of
the memory document (``translate.reminder_targets``), with the proposal id of a cited
entry when one is pending (its quick fixes then apply). The recent reminders are
listed in the memory document. A session change or ``MemoryCleared`` clears them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clio_acp.lsp import translate
from clio_acp.lsp.features import Feature
from clio_acp.session import MemoryCleared, MemoryReminder

if TYPE_CHECKING:
    from clio_acp.session import Session, SessionEvent

RECENT_REMINDERS = 10
"""Reminders listed in the memory document."""


class Reminders(Feature):
    """The recent reminders of the bound session and their diagnostics."""

    def __init__(self, face: Any) -> None:
        super().__init__(face)
        self.recent: list[MemoryReminder] = []

    def on_event(self, event: SessionEvent) -> None:
        """Show a ``MemoryReminder``; a ``MemoryCleared`` clears every memory diagnostic."""
        if isinstance(event, MemoryReminder):
            self._show(event)
        elif isinstance(event, MemoryCleared):
            self._clear()
            self.face.document.schedule()

    def session_changed(self, session: Session | None) -> None:
        """Leaving a session clears its reminders and every ``clio-memory`` diagnostic."""
        if session is None:
            self._clear()

    def _clear(self) -> None:
        self.recent.clear()
        self.ls.diagnostics.clear(translate.MEMORY_SOURCE)

    def _show(self, reminder: MemoryReminder) -> None:
        self.recent = [*self.recent, reminder][-RECENT_REMINDERS:]
        self.face.document.schedule()
        options = self.ls.options.diagnostics
        if not options.enabled:
            return
        proposal_id = reminder.proposal_id or self.face.proposals.for_entries(
            reminder.cited_entries
        )
        rendered = self.face.document.render()
        doc_line = rendered.reminder_lines[-1] if rendered.reminder_lines else 0
        for uri, line in translate.reminder_targets(reminder, self.face.document.path, doc_line):
            diagnostic = translate.reminder_diagnostic(
                reminder, line, severity=options.severity, proposal_id=proposal_id
            )
            self.ls.diagnostics.add(
                translate.MEMORY_SOURCE, uri, diagnostic, keep_last=options.max_per_file
            )
