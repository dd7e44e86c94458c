"""The memory document (``<workspace>/.clio-coder/memory.md``): the board, the recent
reminders and the pending proposals of the bound session, rendered by
``memory_doc.render_memory_document`` and rewritten atomically off the event loop,
coalesced. Nothing is written before the user prompts or runs a memory command
(``arm``): opening a folder leaves it untouched. Each write is followed by the
document's ``clio-memory`` diagnostics (reminders without a file of their own, pending
proposals), placed on the lines of the text just written."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clio_acp.lsp import translate
from clio_acp.lsp.features import Feature
from clio_acp.lsp.memory_doc import memory_doc_path, render_memory_document, write_atomically
from clio_acp.session import TurnEnded

if TYPE_CHECKING:
    from clio_acp.lsp.memory_doc import RenderedDocument
    from clio_acp.session import SessionEvent

logger = logging.getLogger(__name__)


class MemoryDocument(Feature):
    """Writes the memory document when the board may have changed (once armed)."""

    def __init__(self, face: Any) -> None:
        super().__init__(face)
        self._task: asyncio.Task[None] | None = None
        self._dirty = False
        self.armed = False
        """True once the user prompted or ran a memory command (the workspace may be
        written from then on)."""

    @property
    def path(self) -> Path:
        """``<workspace>/.clio-coder/memory.md``."""
        return memory_doc_path(self.face.workspace_root)

    def arm(self) -> None:
        """The user asked for something (``clio.prompt``, a ``clio.memory.*`` command):
        the document may be written from now on."""
        self.armed = True

    def on_event(self, event: SessionEvent) -> None:
        """A ``TurnEnded`` rewrites the document (the board may have changed)."""
        if isinstance(event, TurnEnded):
            self.schedule()

    def render(self) -> RenderedDocument:
        """The document's text and the lines of its reminders and proposals."""
        session = self.face.session
        return render_memory_document(
            session_id=session.id if session is not None else None,
            board=self.face.board(),
            reminders=self.face.reminders.recent,
            proposals=list(self.face.proposals.pending.values()),
        )

    def schedule(self) -> None:
        """Rewrite the document soon (coalesced; never blocks the loop)."""
        if not self._wanted():
            return
        self._dirty = True
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write())

    async def write_now(self) -> None:
        """Write the document and wait for it (commands that show the board)."""
        if not self._wanted():
            return
        self._dirty = True
        if self._task is not None and not self._task.done():
            await self._task
        self._task = asyncio.create_task(self._write())
        await self._task

    def _wanted(self) -> bool:
        return self.armed and self.ls.options.memory_document and not self.face.closed

    async def _write(self) -> None:
        while self._dirty:
            self._dirty = False
            rendered = self.render()
            try:
                await asyncio.to_thread(write_atomically, self.path, rendered.text)
            except OSError as exc:
                logger.warning("Cannot write the memory document: %s", exc)
                return
            if self._dirty:
                continue  # a newer text follows; its diagnostics go with it
            self._publish(rendered)

    def _publish(self, rendered: RenderedDocument) -> None:
        if self.face.closed:
            return
        items = [
            *self.face.reminders.document_diagnostics(rendered),
            *self.face.proposals.document_diagnostics(rendered),
        ]
        self.ls.diagnostics.set(translate.MEMORY_SOURCE, self.path.as_uri(), items)

    async def shutdown(self) -> None:
        """Wait for a pending write (LSP ``shutdown``)."""
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
