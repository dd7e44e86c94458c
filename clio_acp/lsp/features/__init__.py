"""The LSP face's features, one module each (esbonio's feature hooks).

Each feature turns one kind of session event into one LSP surface and keeps the
state that surface needs. ``SessionFace`` owns the session binding and fans out:

- :meth:`Feature.on_event` — one event of the bound session (live);
- :meth:`Feature.on_replay` — one event of a loaded session's history;
- :meth:`Feature.session_changed` — the face left its session (``None``) or bound a
  new one; per-session state is reset here, before the new session is observable
  (ARCHITECTURE.md invariant 1);
- :meth:`Feature.shutdown` — LSP ``shutdown`` or process end.

Features: ``session_updates`` (``clio/sessionUpdate``), ``progress`` (``$/progress``),
``reminders`` (``clio-memory`` diagnostics), ``proposals`` (pending durable records
and their diagnostics), ``document`` (the memory document), ``resume_offer``
(``window/showMessageRequest`` Seed / Dismiss), ``permissions`` (tool permission
questions), ``usage`` (token totals for ``clio.usage``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clio_acp.lsp.server import ClioLanguageServer
    from clio_acp.lsp.session_face import SessionFace
    from clio_acp.session import Session, SessionEvent


class Feature:
    """Base of a face feature: every hook is optional (a no-op here)."""

    def __init__(self, face: SessionFace) -> None:
        self.face = face

    @property
    def ls(self) -> ClioLanguageServer:
        """The language server (options, protocol, diagnostics store, paths)."""
        return self.face.ls

    def on_event(self, event: SessionEvent) -> None:
        """One live event of the bound session (the face filtered other sessions)."""

    def on_replay(self, event: SessionEvent) -> None:
        """One event of a loaded session's history (``clio.session.load``)."""

    def session_changed(self, session: Session | None) -> None:
        """The face left its session (``None``) or bound ``session``."""

    async def shutdown(self) -> None:
        """LSP ``shutdown`` / process end: stop background work."""
