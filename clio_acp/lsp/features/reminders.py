"""Memory reminders as ``clio-memory`` diagnostics (``textDocument/publishDiagnostics``).

A reminder that names files of the workspace (the failing call's files and the
places its output points at, ``MemoryReminder.paths``/``lines``) is shown on each of
them, on the failure's line, as a range over that line's text in the negotiated
position encoding (UTF-16 or UTF-8). A reminder that names none is shown on its line
of the memory document; those diagnostics are rebuilt each time the document is
written (``document_diagnostics``), so they follow their reminder when the document
changes and are never published before the file holds their line. A session change
or ``MemoryCleared`` clears them all.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from clio_acp.lsp import translate
from clio_acp.lsp.features import Feature
from clio_acp.session import MemoryCleared, MemoryReminder

if TYPE_CHECKING:
    from clio_acp.lsp.memory_doc import RenderedDocument
    from clio_acp.session import Session, SessionEvent

logger = logging.getLogger(__name__)

RECENT_REMINDERS = 10
"""Reminders listed in the memory document."""
MAX_LINE_READ_BYTES = 4 * 1024 * 1024
"""Files larger than this are not read for a line's text (zero-width range instead)."""


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

    def _files(self, reminder: MemoryReminder) -> list[tuple[Path, int]]:
        roots = {self.face.workspace_root}
        if self.face.session is not None:
            roots.add(Path(self.face.session.cwd))
        for root in roots:
            found = translate.reminder_files(reminder, root)
            if found:
                return found
        return []

    def _show(self, reminder: MemoryReminder) -> None:
        self.recent = [*self.recent, reminder][-RECENT_REMINDERS:]
        self.face.document.schedule()
        options = self.ls.options.diagnostics
        if not options.enabled:
            return
        proposal_id = reminder.proposal_id or self.face.proposals.for_entries(
            reminder.cited_entries
        )
        for path, line in self._files(reminder):
            diagnostic = translate.reminder_diagnostic(
                reminder,
                line,
                severity=options.severity,
                proposal_id=proposal_id,
                range_=translate.line_range(_line_text(path, line), line, self._units),
            )
            self.ls.diagnostics.add(
                translate.MEMORY_SOURCE, path.as_uri(), diagnostic, keep_last=options.max_per_file
            )

    def _units(self, text: str) -> int:
        try:
            return int(self.ls.workspace.position_codec.client_num_units(text))
        except Exception:  # no workspace yet (before initialize): UTF-16, the default
            return len(text.encode("utf-16-le")) // 2

    def document_diagnostics(self, rendered: RenderedDocument) -> list[types.Diagnostic]:
        """The diagnostics of the recent reminders that name no workspace file, each
        on its line of the document ``rendered`` (the text just written)."""
        options = self.ls.options.diagnostics
        if not options.enabled:
            return []
        out = []
        for reminder, line in zip(self.recent, rendered.reminder_lines, strict=False):
            if self._files(reminder):
                continue
            proposal_id = reminder.proposal_id or self.face.proposals.for_entries(
                reminder.cited_entries
            )
            lines = rendered.text.split("\n")
            text = lines[line] if line < len(lines) else ""
            out.append(
                translate.reminder_diagnostic(
                    reminder,
                    line,
                    severity=options.severity,
                    proposal_id=proposal_id,
                    range_=translate.line_range(text, line, self._units),
                )
            )
        return out


def _line_text(path: Path, line: int) -> str | None:
    """Line ``line`` (0-based) of ``path``, or None (unreadable, too large, too short)."""
    try:
        if path.stat().st_size > MAX_LINE_READ_BYTES:
            return None
        with path.open(encoding="utf-8", errors="replace", newline=None) as handle:
            for index, text in enumerate(handle):
                if index == line:
                    return text.rstrip("\r\n")
    except OSError as exc:
        logger.debug("Cannot read %s for a diagnostic range: %s", path, exc)
    return None
