"""Turn boundaries of the memory middleware (MEMORY_SPEC §4 turn_start / turn_end).

``turn_start`` marks an agent-loop iteration (a non-blank text is a user prompt)
and hands out the pending restore offer and the deferred reminders; ``turn_end``
turns the newest unreported repeated failure into a deferred reminder. The buffer
of deferred reminders (``take_deferred`` / ``discard_deferred``) lives here too.
"""

from __future__ import annotations

from clio_acp.memory.middleware.effects import Effect, InjectReminder
from clio_acp.memory.middleware.state import (
    RESTORE_PREFIX,
    DeferredReminder,
    collapse_keep_newlines,
)
from clio_acp.memory.middleware.status import first_line
from clio_acp.memory.prompts import TASK_MAX_CHARS
from clio_acp.memory.reminders import blind_retry_text

__all__ = ["TurnBoundaries"]


class TurnBoundaries:
    """Mixin of ``MemoryMiddleware``: turn start, turn end and the deferred buffer."""

    def turn_start(
        self, turn_id: str | None = None, text: str = "", *, session_id: str | None = None
    ) -> list[Effect]:
        """Start of an agent-loop iteration (before the model request).

        Non-blank ``text`` is a user prompt: it becomes the current task (first 2000
        chars) and §12.5 captures its explicit requirements as knowledge entries.
        Clears the per-turn annotated set. Returns the pending restore offer (§4,
        §12.6) and every deferred reminder still valid (§4 onDeferredReminder).
        Never raises (a failure is logged and yields no effects)."""
        return self._guard("turn_start", self._turn_start, turn_id, text, session_id)

    def _turn_start(self, turn_id: str | None, text: str, session_id: str | None) -> list[Effect]:
        self._observe(session_id)
        settings = self.settings()
        if not self._active(settings):
            return []
        s = self._s
        s.turn += 1
        s.turn_id = turn_id
        s.turn_aborted = False
        s.annotated.clear()
        s.spoke_this_boundary = False
        s.failures_this_turn = 0
        if text and text.strip():
            s.rules.problems_spoken.clear()
            s.rules.unchanged_spoken.clear()
            s.current_task = text.strip()[:TASK_MAX_CHARS]
            s.rules.goal = s.rules.goal or first_line(text)
            if settings.capture_requirements:
                self._capture_requirements(text)
        effects: list[Effect] = []
        if s.compaction_pending:
            s.compaction_pending = False
            self._refresh_status(settings)
            self._make_restore_offer(settings, RESTORE_PREFIX)
        if s.offer is not None:
            effects.append(s.offer.reminder())
        for item in s.deferred:
            if item.epoch == s.compaction_epoch:
                effects.append(item.reminder)
        s.deferred.clear()
        return effects

    def turn_end(
        self, turn_id: str | None = None, *, aborted: bool = False, session_id: str | None = None
    ) -> list[Effect]:
        """§4 turn_end (sync). A no-tool continuation does nothing. Otherwise the
        newest unreported repeated failure becomes a deferred reminder (delivered by
        the next ``turn_start``). An ``aborted`` turn's reminders are dropped.
        Always returns no effects directly; never raises."""
        return self._guard("turn_end", self._turn_end, turn_id, aborted, session_id)

    def _turn_end(self, turn_id: str | None, aborted: bool, session_id: str | None) -> list[Effect]:
        self._observe(session_id)
        settings = self.settings()
        if not self._active(settings):
            return []
        s = self._s
        if aborted or s.turn_aborted:
            # A reminder for an aborted turn is dropped, buffered ones included.
            s.deferred = [d for d in s.deferred if d.turn != s.turn]
            s.last_turn_end_step = max(s.last_turn_end_step, s.tool_step)
            return []
        if s.tool_step <= s.last_turn_end_step:
            return []  # §11.12: no-tool continuation
        match = self._unreported_repeated_failure(settings)
        s.last_turn_end_step = s.tool_step
        if match is None:
            if s.annotated_since_turn_end:
                s.annotated_since_turn_end = False
                return []  # the mid-turn annotation already reported this boundary
            self._emit(["turn_end"], "rules", "silent", "no_repeated_failure")
            return []
        s.annotated_since_turn_end = False
        step, record = match
        repeat = s.rules.repeats.get(step.key)
        first = repeat.first_step if repeat is not None else record.first_step
        text = collapse_keep_newlines(
            blind_retry_text(record.entry_id, step.command, first, record.digest, advice=False)
        )[: settings.max_output_tokens * 4]
        if settings.escalation and text == s.last_injected_message:
            self._emit(["repeated_failure"], "rules", "silent", "duplicate_reminder")
            return []
        s.last_injected_key = step.key
        s.last_injected_message = text
        s.rules_spoke_since_step = True
        s.spoke_this_boundary = True
        s.annotated.add(step.key)
        self.bank.record_injection([record.entry_id])
        self._emit(["repeated_failure"], "rules", "injected", "intervened", cited=1)
        reminder = InjectReminder(
            text, (record.entry_id,), "repeated_failure", paths=step.paths, lines=step.lines
        )
        s.deferred.append(DeferredReminder(reminder, s.turn, s.compaction_epoch))
        return []

    def take_deferred(self) -> list[InjectReminder]:
        """Drain the deferred reminders still valid (§4 onDeferredReminder) for the
        next model request: turn-end and LLM-tier reminders not superseded by a
        compaction (§12.6). ``turn_start`` drains them too. Never raises."""

        def run() -> list[Effect]:
            s = self._s
            if self._disposed:
                s.deferred.clear()
                return []
            taken: list[Effect] = [d.reminder for d in s.deferred if d.epoch == s.compaction_epoch]
            s.deferred.clear()
            return taken

        return [e for e in self._guard("take_deferred", run) if isinstance(e, InjectReminder)]

    def discard_deferred(self) -> None:
        """The current turn was aborted: its buffered reminders are dropped, and so
        is the reminder its ``turn_end`` would produce. A pending restore offer is
        kept (§12.6: not consumed until really delivered)."""
        self._s.deferred.clear()
        self._s.turn_aborted = True
