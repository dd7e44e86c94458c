"""The handoff offer after a resume or load: ``window/showMessageRequest`` with Seed /
Dismiss (MEMORY_SPEC §7). Seed runs ``commands.seed`` on the session, if it is still
the current one. A late, failed or cancelled answer never raises; each session is
offered once per process."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from clio_acp.lsp.features import Feature
from clio_acp.session import CommandError, HandoffOffer, commands

if TYPE_CHECKING:
    from clio_acp.session import Session, SessionEvent

logger = logging.getLogger(__name__)

SEED = "Seed"
DISMISS = "Dismiss"


class ResumeOffer(Feature):
    """At most one open offer; sessions already offered are not asked again."""

    def __init__(self, face: Any) -> None:
        super().__init__(face)
        self._task: asyncio.Task[None] | None = None
        self._offered: set[str] = set()

    def on_event(self, event: SessionEvent) -> None:
        """A ``HandoffOffer`` is asked (:meth:`offer`)."""
        if isinstance(event, HandoffOffer):
            self.offer(event)

    def on_replay(self, event: SessionEvent) -> None:
        """A loaded session's trailing ``HandoffOffer`` is asked like a live one."""
        self.on_event(event)

    def session_changed(self, session: Session | None) -> None:
        """Leaving a session withdraws its open offer."""
        if session is None:
            self._cancel()

    async def shutdown(self) -> None:
        """Withdraw the open offer."""
        self._cancel()

    def offer(self, offer: HandoffOffer) -> None:
        """Ask whether to seed from the handoff (once per session; option
        ``resumeOffer``); a newer offer replaces an open one."""
        if not self.ls.options.resume_offer or offer.session_id in self._offered:
            return
        self._offered.add(offer.session_id)
        self._cancel()
        self._task = asyncio.create_task(self._ask(offer))

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _ask(self, offer: HandoffOffer) -> None:
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Info,
            message=(
                f"clio: a handoff ({offer.source}, {offer.count} memory entries) can seed "
                "this session's task memory."
            ),
            actions=[types.MessageActionItem(title=SEED), types.MessageActionItem(title=DISMISS)],
        )
        try:
            answer = await self.ls.protocol.request(types.WINDOW_SHOW_MESSAGE_REQUEST, params)
        except asyncio.CancelledError:
            return
        except Exception as exc:
            logger.info("Resume offer got no answer: %s", exc)
            return
        if getattr(answer, "title", None) != SEED:
            return
        session = self.face.session
        if session is None or session.id != offer.session_id:
            logger.info("Ignoring a seed answer for a session that is no longer current")
            return
        try:
            result = await commands.seed(session)
        except (CommandError, Exception):
            logger.exception("Seeding from the handoff failed")
            return
        self.ls.show_message(f"clio: memory seed: {describe_seed(result)}")
        self.face.document.schedule()


def describe_seed(result: Any) -> str:
    """``N seeded, M skipped`` (and the entries left out as invalid) for a seed result."""
    if isinstance(result, dict):
        if "seeded" in result:
            text = f"{result.get('seeded', 0)} seeded, {result.get('skipped', 0)} skipped"
            rejected = result.get("rejected") or []
            if rejected:
                text += f"; left out as invalid: {'; '.join(map(str, rejected))}"
            return text
        return str(result.get("status") or result)
    return str(result)
