"""Restore offers of the memory middleware (MEMORY_SPEC §4 "Post-compaction restore",
§12.4, §12.6).

After a compaction, or when a saved session is resumed, the bank's state (status,
knowledge, still-unresolved failures, within the reminder budget) is *offered* for
the next model request; the offer is consumed only by ``confirm_delivery``. The
counters that survive compaction and resume are exported and imported here.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from clio_acp.memory.bank import estimate_tokens
from clio_acp.memory.middleware.effects import Effect
from clio_acp.memory.middleware.state import (
    RESTORE_PREFIX,
    RESUME_PREFIX,
    WORKING_SET_RECALL,
    RestoreOffer,
    cited_ids,
)
from clio_acp.memory.rules import RulesMemory
from clio_acp.settings import MemorySettings

__all__ = ["RestoreOffers"]


class RestoreOffers:
    """Mixin of ``MemoryMiddleware``: restore offers, compaction and saved counters."""

    def _restore_body(self, settings: MemorySettings, budget: int) -> str:
        """§12.6/§13.5 in ``budget`` estimated tokens: the status first, then the
        captured requirements (in capture order), then the other knowledge (render
        order), then the unresolved failure entries. A line that does not fit is
        skipped, never cut."""
        lines: list[str] = []
        status = self.bank.status
        if status is not None:
            status_line = f"- [{status.id}] status: {status.content}"
            if estimate_tokens(status_line) <= budget:
                lines.append(status_line)
        requirement_ids = [i for i, _text in self._s.rules.requirement_entries]
        others = [e.id for e in self.bank.knowledge if e.id not in set(requirement_ids)]
        others.sort(key=lambda i: self.bank.get(i).last_touched_at, reverse=True)
        failures = (
            self._s.rules.unresolved_entry_ids(self.bank)
            if settings.restore_unresolved_failures
            else []
        )
        for entry_id in [*requirement_ids, *others, *failures]:
            entry = self.bank.get(entry_id)
            if entry is None or entry.kind == "status":
                continue
            line = f"- [{entry.id}] {entry.kind}: {entry.content}"
            if line not in lines and estimate_tokens("\n".join([*lines, line])) <= budget:
                lines.append(line)
        return "\n".join(lines)

    def _make_restore_offer(self, settings: MemorySettings, prefix: str) -> None:
        s = self._s
        body = self._restore_body(settings, settings.max_output_tokens - estimate_tokens(prefix))
        if not body:
            s.offer = None
            self._emit(["post_compaction"], "rules", "silent", "bank_empty")
            return
        text = prefix + body
        s.offer = RestoreOffer(
            uuid.uuid4().hex[:12], text, cited_ids(text, self.bank), "post_compaction"
        )

    def confirm_delivery(self, offer_id: str) -> None:
        """§12.6: the model request carrying restore offer ``offer_id`` was sent.
        Consumes the offer, counts its citations and writes its telemetry row. An
        unknown or superseded id does nothing. Never raises."""

        def run() -> list[Effect]:
            s = self._s
            if s.offer is None or s.offer.offer_id != offer_id:
                return []
            offer, s.offer = s.offer, None
            ids = re.findall(r"\[(tm-[skp]-[0-9a-z]+)\]", offer.text)
            self.bank.record_injection(ids)
            s.last_injected_message = offer.text
            s.rules_spoke_since_step = True
            self._emit([offer.trigger], "rules", "injected", "intervened", cited=len(offer.cited))
            return []

        self._guard("confirm_delivery", run)

    def on_compaction(
        self, stage: str | None = None, *, offer_now: bool = False, session_id: str | None = None
    ) -> list[Effect]:
        """§4/§12.6: a compaction happened (nothing for the ``working_set_recall``
        stage). Buffered reminders, a pending offer and in-flight steps started
        before it lose their authority. The restore is offered at the next
        ``turn_start``, or returned right away with ``offer_now`` (for a compaction
        in the middle of a turn, whose next request must carry it). Never raises."""

        def run() -> list[Effect]:
            self._observe(session_id)
            settings = self.settings()
            if not self._active(settings) or stage == WORKING_SET_RECALL:
                return []
            s = self._s
            s.compaction_epoch += 1
            s.deferred.clear()
            s.offer = None
            if not offer_now:
                s.compaction_pending = True
                return []
            return self._offer_effects(settings, RESTORE_PREFIX)

        return self._guard("on_compaction", run)

    def _offer_effects(self, settings: MemorySettings, prefix: str) -> list[Effect]:
        self._refresh_status(settings)
        self._make_restore_offer(settings, prefix)
        offer = self._s.offer
        return [offer.reminder()] if offer is not None else []

    def offer_restore_after_resume(self) -> list[Effect]:
        """§12.6: after a resumed session's bank (and ``import_state``) was restored,
        offer its state — status, knowledge, unresolved failures — for the next
        request. The offer stays pending until ``confirm_delivery``. Never raises."""

        def run() -> list[Effect]:
            settings = self.settings()
            if not self._active(settings):
                return []
            return self._offer_effects(settings, RESUME_PREFIX)

        return self._guard("offer_restore_after_resume", run)

    def export_state(self) -> dict[str, Any]:
        """Counters that survive compaction and resume (§12.4): failure records,
        repeat counts, environment faults, captured requirements, tool step — a
        JSON-able dict with ``version`` 1."""
        data = self._s.rules.export()
        data["toolStep"] = self._s.tool_step
        return data

    def import_state(self, data: dict[str, Any]) -> None:
        """Inverse of ``export_state`` (after the bank was restored). Raises
        ``ValueError`` for a malformed snapshot, leaving the state unchanged."""
        rules = RulesMemory.load(data)
        self._s.rules = rules
        self._s.tool_step = int(data.get("toolStep", 0))
        self._s.last_turn_end_step = self._s.tool_step
        self._last_snapshot = self._delta_snapshot()
