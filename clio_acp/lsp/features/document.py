"""The memory document (``<workspace>/.clio-coder/memory.md``): the board, the recent
reminders and the pending proposals of the bound session, rendered by
``memory_doc.render_memory_document`` and rewritten atomically off the event loop,
coalesced. Diagnostics without a file of their own point at its lines."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clio_acp.lsp.features import Feature
from clio_acp.lsp.memory_doc import memory_doc_path, render_memory_document, write_atomically
from clio_acp.session import TurnEnded

if TYPE_CHECKING:
    from clio_acp.lsp.memory_doc import RenderedDocument
    from clio_acp.session import SessionEvent

logger = logging.getLogger(__name__)


class MemoryDocument(Feature):
    """Writes the memory document when the board may have changed."""

    def __init__(self, face: Any) -> None:
        super().__init__(face)
        self._task: asyncio.Task[None] | None = None
        self._dirty = False

    @property
    def path(self) -> Path:
        """``<workspace>/.clio-coder/memory.md``."""
        return memory_doc_path(self.face.workspace_root)

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
        if not self.ls.options.memory_document or self.face.closed:
            return
        self._dirty = True
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write())

    async def write_now(self) -> None:
        """Write the document and wait for it (commands that show the board)."""
        if not self.ls.options.memory_document:
            return
        self._dirty = True
        if self._task is not None and not self._task.done():
            await self._task
        self._task = asyncio.create_task(self._write())
        await self._task

    async def _write(self) -> None:
        while self._dirty:
            self._dirty = False
            text = self.render().text
            try:
                await asyncio.to_thread(write_atomically, self.path, text)
            except OSError as exc:
                logger.warning("Cannot write the memory document: %s", exc)
                return

    async def shutdown(self) -> None:
        """Wait for a pending write (LSP ``shutdown``)."""
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
