"""``clio/sessionUpdate``: every event of the bound session as one custom notification
(``translate.session_update``), history replays marked ``replay: true``. Sent only
when the client asked for them (``sessionUpdates`` option)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clio_acp.lsp import translate
from clio_acp.lsp.features import Feature
from clio_acp.session import HandoffOffer

if TYPE_CHECKING:
    from clio_acp.session import SessionEvent


class SessionUpdates(Feature):
    """Forwards events as ``clio/sessionUpdate`` notifications."""

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
