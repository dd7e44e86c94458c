"""``clio/status``: one server→client notification with what a status bar shows,
sent whenever it changes (so clients never poll ``clio.memory.show``).

Params: ``{sessionId: str | null, state: "idle" | "working", tier: str | null,
lastDecision: str | null, pendingProposals: int}``. ``tier`` and ``lastDecision``
come from the bound session's memory board (``Session.board()``; status is never
included, MEMORY_SPEC §1), ``pendingProposals`` counts this repository's pending
durable records. Re-checked on session changes, turn start and end, memory events,
proposal changes and usage updates (the LLM tier's step reports spend when it ends).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from clio_acp.lsp.features import Feature
from clio_acp.session import MessageChunk, ThoughtChunk

if TYPE_CHECKING:
    from clio_acp.session import Session, SessionEvent

logger = logging.getLogger(__name__)

STATUS = "clio/status"
"""Server→client notification method."""


def _decision_text(value: Any) -> str | None:
    """A board's ``lastDecision`` as one short line (``decision (reason)``)."""
    if value is None:
        return None
    if isinstance(value, dict):
        decision = value.get("decision") or value.get("kind")
        reason = value.get("reason")
        if decision and reason:
            return f"{decision} ({reason})"
        if decision:
            return str(decision)
        return ", ".join(f"{k}: {v}" for k, v in value.items() if not isinstance(v, dict | list))
    return " ".join(str(value).split())


class Status(Feature):
    """Keeps the last status sent and sends a new one when it differs."""

    def __init__(self, face: Any) -> None:
        super().__init__(face)
        self.working = False
        self.last: dict[str, Any] | None = None

    def current(self) -> dict[str, Any]:
        """The status params as they are now."""
        session = self.face.session
        board = self.face.board() or {}
        decision = board.get("lastDecision", board.get("last_decision"))
        tier = board.get("tier")
        return {
            "sessionId": session.id if session is not None else None,
            "state": "working" if self.working else "idle",
            "tier": str(tier) if tier is not None else None,
            "lastDecision": _decision_text(decision),
            "pendingProposals": len(self.face.proposals.pending),
        }

    def update(self) -> None:
        """Send ``clio/status`` if anything changed since the last one."""
        if self.face.closed:
            return
        try:
            params = self.current()
        except Exception:
            logger.exception("Reading the status failed")
            return
        if params == self.last:
            return
        self.last = params
        self.ls.protocol.notify(STATUS, params)

    def set_working(self, working: bool) -> None:
        """A turn began (True) or ended (False)."""
        self.working = working
        self.update()

    def on_event(self, event: SessionEvent) -> None:
        """Anything but streamed text may change the board."""
        if not isinstance(event, MessageChunk | ThoughtChunk):
            self.update()

    def session_changed(self, session: Session | None) -> None:
        """A new binding (or none) is a new status."""
        self.update()
