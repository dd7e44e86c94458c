"""Telemetry rows and the activity ring of the memory middleware (MEMORY_SPEC §4, §5).

Every decision the middleware takes (rules tier or LLM tier, spoken or silent)
becomes one content-free v2 telemetry row (``steps.jsonl``) and one event in the
activity ring (the newest 20, shown by ``/memory`` and journaled by the agent loop
as ``memory_step`` rows). ``render_activity`` is the one-line form of an event.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Any

from clio_acp.memory.telemetry import NO_WRITES, StepFields, view_delta_counts
from clio_acp.timestamps import utc_now as _row_time

__all__ = ["ActivityLog", "render_activity"]

log = logging.getLogger(__name__)


def render_activity(event: dict[str, Any]) -> str:
    """§4: ``<trig+trig> <decision> [reason unless intervened] [Nw] [N cited]``.

    ``event`` is one activity-ring item (keys ``triggerReasons``, ``decision``,
    ``reason``, ``bankWrites``, ``citedEntries``); raises ``KeyError`` without them."""
    parts = ["+".join(event["triggerReasons"]), event["decision"]]
    if event["reason"] != "intervened":
        parts.append(event["reason"])
    if event["bankWrites"]:
        parts.append(f"{event['bankWrites']}w")
    if event["citedEntries"]:
        parts.append(f"{event['citedEntries']} cited")
    return " ".join(parts)


class ActivityLog:
    """Mixin of ``MemoryMiddleware``: the telemetry row and activity event of each
    decision. Uses the middleware's ``bank``, ``telemetry`` and state ``_s``."""

    @property
    def last_decision(self) -> dict[str, Any] | None:
        """The newest activity event that counts as the decision (§4 lastDecision)."""
        return dict(self._s.last_decision) if self._s.last_decision else None

    @property
    def activity(self) -> list[dict[str, Any]]:
        """The activity ring, newest first (at most ``ACTIVITY_RING`` events)."""
        return list(self._s.activity)

    def _delta_snapshot(self) -> dict[str, Any]:
        """What a bank delta compares (``{id: (content, createdAt)}`` per class):
        cheaper than a full snapshot, taken once per telemetry row after a write."""
        return self.bank.delta_view()

    def _take_delta(self, tier: str) -> tuple[int, ...]:
        """Bank writes since the previous row as ``delta_counts`` (computed only when
        something wrote)."""
        if tier != "llm" and not self._bank_dirty:
            return NO_WRITES  # writes by others land in the next computed row
        snapshot = self._delta_snapshot()
        counts = view_delta_counts(self._last_snapshot, snapshot)
        self._last_snapshot = snapshot
        self._bank_dirty = False
        return counts

    def _emit(
        self,
        triggers: Iterable[str],
        tier: str,
        decision: str,
        reason: str,
        *,
        cited: int = 0,
        bank_operations: int = 0,
        dropped_operations: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        latency_ms: float = 0.0,
        target_id: str | None = None,
        model_id: str | None = None,
        decoding: str | None = None,
        update_last_decision: bool = True,
    ) -> None:
        """One telemetry row and one activity event (§4, §5); ``decoding`` (llm rows)
        is the answer's decoding mode (§12.9). A row the schema rejects is logged at
        debug level and dropped; the activity event is kept."""
        unique = list(dict.fromkeys(triggers))[:3] or ["manual"]
        counts = self._take_delta(tier)
        at = _row_time()
        latency = max(0.0, round(latency_ms, 3)) if math.isfinite(latency_ms) else 0.0
        pair = target_id and model_id
        fields = StepFields(
            at, tuple(unique), tier, counts, decision, reason, bank_operations,
            dropped_operations, cited, input_tokens, output_tokens, latency,
            target_id if pair else None, model_id if pair else None,
            decoding if decoding and tier == "llm" else None,
        )  # fmt: skip
        try:
            self.telemetry.emit_fields(fields)  # validated there, once (§5)
        except Exception:
            log.debug("memory telemetry sink failed", exc_info=True)
        event = {
            "at": at,
            "triggerReasons": unique,
            "tier": tier,
            "decision": decision,
            "reason": reason,
            "citedEntries": cited,
            "bankWrites": sum(counts),
            "latencyMs": latency,
        }
        self._s.activity.appendleft(event)
        if update_last_decision:
            self._s.last_decision = event
