"""The rules tier's status entry and completion check (MEMORY_SPEC §13.5, §13.6).

- Status: with no LLM tier configured, the rules tier keeps the bank's status entry
  (origin ``rules``): the goal (first line of the task), files changed so far, the
  last command and its outcome, failures still unresolved, and the step count. It
  is written when it is read or saved — ``sync_status``, which the session's
  journal snapshot calls at every turn end, the operator view and progress notes
  call too — and before every restore offer: each write is redacted by the bank,
  which costs more than a tool event, so it is not rewritten per tool call. A
  status another writer owns (model, seed, user) is never overwritten.
- Completion check: the first time in a task that a model response would end the
  turn without tool calls while captured requirements exist, one reminder lists
  them ("before you finish, check: …"); the loop lets the model continue once.
  Never twice per task; never without a captured requirement; never before the
  first tool call (an answer to a question is not the end of a task).

No model call happens here (invariant 6).
"""

from __future__ import annotations

from clio_acp.memory.middleware.effects import Effect, InjectReminder
from clio_acp.memory.reminders import completion_check_text, status_text
from clio_acp.settings import MemorySettings

__all__ = ["RulesStatus"]

GOAL_MAX_CHARS = 200


def first_line(text: str) -> str:
    """The first non-blank line of ``text`` (the goal, §13.5), cut to 200 chars."""
    for line in (text or "").splitlines():
        line = " ".join(line.split()).strip(" #*-")
        if line:
            return line[:GOAL_MAX_CHARS]
    return ""


class RulesStatus:
    """Mixin of ``MemoryMiddleware``: the rules-written status and completion check."""

    def _llm_tier_configured(self, settings: MemorySettings) -> bool:
        return bool(settings.target and self._client_factory)

    def _unresolved_lines(self) -> list[str]:
        return [
            f"`{r.command or r.call}` since step {r.first_step}: {r.digest}"
            for r in self._s.rules.failures.values()
            if not r.resolved
        ]

    def _refresh_status(self, settings: MemorySettings) -> None:
        """§13.5: write the rules status now (no LLM tier; never over another
        writer's; not before the first tool step; not twice for one step)."""
        s = self._s
        if not settings.rules_status or self._llm_tier_configured(settings):
            return
        if s.tool_step == 0:
            return  # nothing done yet: no progress to record
        current = self.bank.status
        if current is not None and current.origin != "rules":
            return
        rules = s.rules
        if current is not None and rules.status_step == s.tool_step:
            return  # already written at this step
        goal = rules.goal or first_line(s.current_task or "")
        content = status_text(
            goal, rules.files_changed, rules.last_command, self._unresolved_lines(), s.tool_step
        )
        rules.status_step = s.tool_step
        if current is not None and rules.status_source == content:
            return
        self.bank.update_status(content, origin="rules")
        rules.status_source = content
        self._bank_dirty = True

    def sync_status(self) -> None:
        """Bring the rules status up to date now (§13.5): call before reading or
        saving the bank (journal snapshot, operator view, progress notes). Does
        nothing with an LLM tier, with ``rulesStatus`` off, or when the status is
        another writer's. Never raises."""

        def run() -> list[Effect]:
            settings = self.settings()
            if self._active(settings):
                self._refresh_status(settings)
            return []

        self._guard("sync_status", run)

    def completion_check(
        self, turn_id: str | None = None, *, session_id: str | None = None
    ) -> list[Effect]:
        """§13.6: the model answered without tool calls, which would end the task.
        Returns one ``InjectReminder`` (trigger ``completion_check``) listing the
        captured requirements the first time this happens in a task, else nothing.
        The caller delivers it and lets the model continue once. Never raises."""

        def run() -> list[Effect]:
            self._observe(session_id)
            settings = self.settings()
            rules = self._s.rules
            if not self._active(settings) or not settings.completion_check:
                return []
            if rules.completion_checked or self._s.tool_step == 0:
                return []  # once per task; a chat answer with no work done is no finish
            ids = self.bank.ids()
            listed = [(i, text) for i, text in rules.requirement_entries if i in ids]
            if not listed:
                return []
            rules.completion_checked = True
            text = completion_check_text(listed)
            cited = tuple(i for i, _ in listed)
            self.bank.record_injection(cited)
            self._s.last_injected_message = text
            self._emit(["completion_check"], "rules", "injected", "intervened", cited=len(cited))
            return [InjectReminder(text, cited, "completion_check")]

        return self._guard("completion_check", run)
