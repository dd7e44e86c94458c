"""The rules tier's v2 triggers (MEMORY_SPEC §13.1–§13.3).

- ``unchanged_after_edit``: a call fails with the same normalised failure lines as
  its own previous failure although files were edited in between (pure reverts do
  not count). One cited reminder per key per user turn naming the command, the
  steps and what was edited; the third identical outcome in a row escalates once
  (and adds the deterministic ``unchanged_after_edit`` trigger that wakes the LLM
  tier). After an earlier failure in the same batch, a failure that only says
  something is missing is a knock-on and is not reminded about.
- ``environment``: only environment-shaped signatures
  (``clio_acp.memory.calls.environment_signature``) or a dead tool channel (three
  different commands failing with the same exit code and empty output). The first
  sighting records a knowledge entry and says nothing; the second call failing alike
  reminds once. Repeat counting and the loop stop go on regardless.
- ``recurring_problem``: the same problem line in failures of three or more calls,
  of at least two different commands, within the last twelve calls, when the line
  states an error and no other note already named it: one cited reminder per
  problem line per user turn.

No model call happens here (invariant 6); texts come from
``clio_acp.memory.reminders`` (≤300 chars, §13.7).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from clio_acp.memory.calls import (
    dead_channel_signature,
    environment_signature,
    failure_lines,
    problem_signature,
)
from clio_acp.memory.middleware.effects import Effect, ToolOutcome
from clio_acp.memory.middleware.state import (
    DEAD_CHANNEL_COMMANDS,
    RECURRING_FAILURES,
    RECURRING_WINDOW,
    TrajectoryStep,
)
from clio_acp.memory.reminders import (
    environment_note,
    environment_text,
    recurring_problem_text,
    unchanged_after_edit_text,
)
from clio_acp.memory.rules import EnvSighting, FailureRecord, OutcomeRecord, ProblemSighting
from clio_acp.settings import MemorySettings

__all__ = ["RulesTriggers"]

# ``\b\d{6,}\b`` led by a digit, the ``\b`` checked behind it (the engine skips to digits).
_LONG_NUMBER = re.compile(r"\d(?<=\b\d)\d{5,}\b")
# A problem line that names nothing specific (test-runner summaries, bare words).
_GENERIC_PROBLEM = re.compile(
    r"^(?:[=*_\-\s]*)(?:(?:some|all|\d+)\s+tests?\s+failed!?|FAILED\s*\(.*\)|"
    r"(?:=+\s*)?\d+ (?:failed|errors?)\b.*|error:?|failed\.?|failure\.?|"
    r"Traceback \(most recent call last\):?|exit code \d+ with no output|"
    r"an unknown tool error)\s*$",
    re.IGNORECASE,
)


# §13.3 counts a line that states an error (an exception, ``error:``, ``fatal:``),
# not a tool's report about its data ("(line 1) broken … - path not found").
_ERRORISH = re.compile(r"\b(?:error|fatal|exception)\b|[a-z](?:Error|Exception)\b", re.IGNORECASE)
# Whether ``_ERRORISH`` finds something, asked of an ASCII ``line.lower()`` (where
# word characters are [a-z0-9_], so "\b or a letter before" is "no digit or _ before"):
# led by its words, so the engine skips to "e" and "f" instead of trying every offset.
_ERRORISH_FOLDED = re.compile(
    r"error(?<![0-9_]error)\b|exception(?<![0-9_]exception)\b|fatal(?<=\bfatal)\b"
)


def _states_an_error(line: str) -> bool:
    """``_ERRORISH.search(line)`` as a bool. Folding pays a codec callback per run of
    non-ASCII characters (a localised message: ~100x slower than the search itself),
    so only ASCII lines take the folded pattern."""
    if not line.isascii():
        return _ERRORISH.search(line) is not None
    return _ERRORISH_FOLDED.search(line.lower()) is not None


@dataclass
class FailureOutcome:
    """This failure compared with the previous outcome of the same call (§13.1)."""

    record: OutcomeRecord
    unchanged: bool
    """Same failure lines as its previous failure, with non-revert edits between."""
    previous_step: int


class RulesTriggers:
    """Mixin of ``MemoryMiddleware`` (through ``RulesTierObservation``): §13.1–§13.3."""

    # -- §13.1 ------------------------------------------------------------------------

    def _note_failure_outcome(self, step: TrajectoryStep, outcome: ToolOutcome) -> FailureOutcome:
        rules = self._s.rules
        lines = failure_lines(outcome.output, exit_code=outcome.exit_code)
        digest = hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]
        previous = rules.outcomes.get(step.fingerprint)
        edit_epoch_before = rules.edit_epoch - (1 if step.state_changing and not step.revert else 0)
        unchanged = (
            previous is not None
            and previous.failed
            and previous.lines == digest
            and previous.edit_epoch != edit_epoch_before
        )
        previous_step = previous.step if previous is not None else 0
        record = rules.note_outcome(step.fingerprint, step.step, True, digest)
        return FailureOutcome(record, unchanged, previous_step)

    def _edited_between(self, after: int, before: int) -> str:
        edits = [e for e in self._s.rules.edits_since(after) if e[0] < before]
        seen: dict[str, list[int]] = {}
        for step, what in edits:
            seen.setdefault(str(what), []).append(int(step))
        parts = [f"{what} (step {steps[-1]})" for what, steps in list(seen.items())[-2:]]
        more = len(seen) - len(parts)
        return ", ".join(parts) + (f" and {more} more" if more > 0 else "")

    def _unchanged_after_edit(
        self,
        settings: MemorySettings,
        step: TrajectoryStep,
        record: FailureRecord,
        failure: FailureOutcome,
    ) -> list[Effect]:
        if not settings.unchanged_after_edit or not failure.unchanged:
            return []
        s = self._s
        spent_key = (step.fingerprint, "unchanged:" + failure.record.lines)
        steps = failure.record.same_steps
        third = len(steps) >= 3 and not failure.record.escalated
        spoken = s.rules.unchanged_spoken
        if spent_key in s.annotated or (spent_key[1] in spoken and not third):
            return []  # once per key per user turn, plus the one escalation
        spoken.add(spent_key[1])
        if third:
            failure.record.escalated = True
            self._add_trigger("unchanged_after_edit")  # wakes the LLM tier (§13.1)
        text = unchanged_after_edit_text(
            record.entry_id,
            step.command,
            steps,
            step.digest,
            self._edited_between(failure.previous_step, step.step) or "files",
            third=third,
        )
        return self._annotate(
            settings, step, text, (record.entry_id,), "unchanged_after_edit", spent_key
        )

    # -- §13.2 ------------------------------------------------------------------------

    def _environment_sighting(
        self, settings: MemorySettings, step: TrajectoryStep, outcome: ToolOutcome
    ) -> EnvSighting | None:
        """Record an environment-shaped failure; the first sighting saves one
        knowledge entry (no reminder). Returns the sighting, or None."""
        if not settings.environmental_failures:
            return None
        rules = self._s.rules
        signature = environment_signature(
            step.shell or step.command, outcome.output, exit_code=outcome.exit_code
        )
        if signature is None:
            dead = dead_channel_signature(outcome.output, outcome.exit_code)
            if dead is None:
                return None
            sighting = rules.note_environment(dead, step.step, step.command)
            if len(set(sighting.commands)) < DEAD_CHANNEL_COMMANDS:
                return None
            if sighting.entry_id is None:
                sighting.needed = len(sighting.steps) + 1
        else:
            sighting = rules.note_environment(signature, step.step, step.command)
        if sighting.entry_id is None or self.bank.kind_of(sighting.entry_id) != "knowledge":
            content = environment_note(sighting.line, step.step, step.command)
            sighting.entry_id = self.bank.save("knowledge", content, origin="rules").id
            self._bank_dirty = True
        return sighting

    def _environment_reminder(
        self, settings: MemorySettings, step: TrajectoryStep, sighting: EnvSighting | None
    ) -> list[Effect]:
        if sighting is None or sighting.reminded or len(sighting.steps) < sighting.needed:
            return []
        if sighting.entry_id is None:
            return []
        sighting.reminded = True
        text = environment_text(sighting.entry_id, sighting.line, sighting.steps, sighting.commands)
        return self._annotate(settings, step, text, (sighting.entry_id,), "environment")

    # -- §13.3 ------------------------------------------------------------------------

    def _problem_sighting(
        self, settings: MemorySettings, step: TrajectoryStep
    ) -> list[ProblemSighting]:
        if not settings.recurring_problem:
            return []
        line = _LONG_NUMBER.sub("<n>", problem_signature(step.digest))
        if line == "<empty output>" or _GENERIC_PROBLEM.match(line) or not _states_an_error(line):
            return []
        return self._s.rules.note_problem(step.step, step.fingerprint, line, RECURRING_WINDOW)

    def _recurring_problem(
        self,
        settings: MemorySettings,
        step: TrajectoryStep,
        record: FailureRecord,
        sightings: list[ProblemSighting],
    ) -> list[Effect]:
        if len(sightings) < RECURRING_FAILURES:
            return []
        commands = {p.fingerprint for p in sightings}
        line = sightings[-1].line
        rules = self._s.rules
        if len(commands) < 2 or line in rules.problems_spoken:
            return []
        if any(p.step in self._s.spoken_steps for p in sightings):
            return []  # another note already named this problem
        rules.problems_spoken.add(line)
        text = recurring_problem_text(
            record.entry_id, step.digest, [p.step for p in sightings], len(commands)
        )
        return self._annotate(settings, step, text, (record.entry_id,), "recurring_problem")
