"""``clio/sessionUpdate``: every event of the bound session as one custom notification
(``translate.session_update``), history replays marked ``replay: true``. Sent only
when the client asked for them (``sessionUpdates`` option). Leaving a session sends
its ``memory_cleared`` update: closing it clears its bank (every session change)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clio_acp.lsp import translate
from clio_acp.lsp.features import Feature
from clio_acp.session import HandoffOffer, MemoryCleared

if TYPE_CHECKING:
    from clio_acp.session import Session, SessionEvent


class SessionUpdates(Feature):
    """Forwards events as ``clio/sessionUpdate`` notifications."""

    def __init__(self, face: Any) -> None:
        super().__init__(face)
        self._bound: str | None = None

    def session_changed(self, session: Session | None) -> None:
        """Leaving a session: its ``memory_cleared`` update (the client drops what it
        showed of that bank)."""
        if session is not None:
            self._bound = session.id
            return
        left, self._bound = self._bound, None
        if left is not None and not self.face.closed:
            self.on_event(MemoryCleared(session_id=left))

    def on_event(self, event: SessionEvent) -> None:
        """Send the event as ``clio/sessionUpdate`` (option ``sessionUpdates``)."""
        if self.ls.options.session_updates:
            self.ls.protocol.notify(translate.SESSION_UPDATE, translate.session_update(event))

    def on_replay(self, event: SessionEvent) -> None:
        """Send a history event with ``replay: true`` (a handoff offer is asked instead)."""
        if isinstance(event, HandoffOffer):
            return  # a replayed offer is asked again (resume_offer), not echoed
        if self.ls.options.session_updates:
            self.ls.protocol.notify(
                translate.SESSION_UPDATE, translate.session_update(event, replay=True)
            )
