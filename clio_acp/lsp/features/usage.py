"""Token totals of the bound session for ``clio.usage`` (``commands.UsageTotals``,
counted from its ``UsageUpdate`` events, reset on every session change)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clio_acp.lsp.features import Feature
from clio_acp.session import UsageTotals, UsageUpdate

if TYPE_CHECKING:
    from clio_acp.session import Session, SessionEvent


class Usage(Feature):
    """``totals`` of the bound session."""

    def __init__(self, face: object) -> None:
        super().__init__(face)  # type: ignore[arg-type]
        self.totals = UsageTotals()

    def on_event(self, event: SessionEvent) -> None:
        """Count a ``UsageUpdate``."""
        if isinstance(event, UsageUpdate):
            self.totals.add(event)

    def session_changed(self, session: Session | None) -> None:
        """Leaving a session starts the totals over."""
        if session is None:
            self.totals = UsageTotals()
