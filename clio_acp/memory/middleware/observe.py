"""The rules tier's tool observation (MEMORY_SPEC §4 tool observation, §12.1–12.5).

Every finished tool call becomes one trajectory step: classified (informative exits,
state-changing calls), digested, and counted. A failure updates the failure memory
and, when the same key repeats, yields a cited annotation on that tool's result or,
at the loop-stop count, a ``StopTurn``; an environment-shaped failure across commands
yields one environment note. Requirements captured from prompts (§12.5), the
turn-end match of an unreported repeated failure, and the list of unresolved
failures for the handoff (§12.8) are rules-tier decisions and live here too. No
model call happens in this module (invariant 6).
"""

from __future__ import annotations

import json
import re
from functools import partial
from typing import Any

from clio_acp.memory.calls import (
    cap_digest,
    classify_exit,
    error_digest,
    error_signature,
    ok_digest,
    shell_command_of,
)
from clio_acp.memory.locations import failure_locations
from clio_acp.memory.middleware.effects import (
    AnnotateToolResult,
    Effect,
    StopTurn,
    ToolCall,
    ToolOutcome,
)
from clio_acp.memory.middleware.facts import CallFacts, call_facts, call_paths
from clio_acp.memory.middleware.state import TrajectoryStep, collapse_keep_newlines
from clio_acp.memory.middleware.triggers import RulesTriggers
from clio_acp.memory.reminders import blind_retry_text, loop_stop_text
from clio_acp.memory.requirements import extract_requirements, requirement_key
from clio_acp.memory.rules import FailureRecord
from clio_acp.settings import MemorySettings

__all__ = ["RulesTierObservation", "call_paths", "display_call", "failure_line"]

# §13.1 knock-on: after an earlier failure in the same batch, a failure that only
# says something is missing (the folder a failed clone did not make, no repository)
# follows from that failure; memory speaks about the first one.
_MISSING_STATE = re.compile(
    r"No such file or directory|not a git repository|cannot access|does not exist|"
    r"not found",
    re.IGNORECASE,
)
# The same phrases, asked of an ASCII ``text.lower()`` case-sensitively: letters and
# spaces only, so they match there exactly where ``_MISSING_STATE`` matches the text,
# and the engine skips to their first letters (~10x faster on a digest).
_MISSING_STATE_FOLDED = re.compile(_MISSING_STATE.pattern.lower())


def _says_missing(text: str) -> bool:
    """``_MISSING_STATE.search(text)`` as a bool. Folding pays a codec callback per run
    of non-ASCII characters (~10x slower than the search itself), so only ASCII text
    takes the folded pattern."""
    if not text.isascii():
        return _MISSING_STATE.search(text) is not None
    return _MISSING_STATE_FOLDED.search(text.lower()) is not None


def display_call(call: str) -> str:
    """A call description (``name{canonical json}``, §4) as a person would write it:
    the shell command of a command tool, ``name path`` for a file tool, else the
    description itself (also when it was cut and is no longer JSON)."""
    name, brace, rest = call.partition("{")
    if not brace:
        return call
    try:
        args = json.loads(brace + rest)
    except ValueError:
        return call
    if isinstance(args, dict):
        command = shell_command_of(name, args)
        if command:
            return command
        if isinstance(args.get("path"), str):
            return f"{name} {args['path']}"
    return call


def failure_line(record: FailureRecord) -> str:
    """One unresolved failure for the handoff (§12.8): ``<command> — failed N times
    since step S; last: <digest>``."""
    times = "once" if record.attempts == 1 else f"{record.attempts} times"
    return f"{display_call(record.call)} — failed {times} since step {record.first_step}; last: {record.digest}"


def _outcome_line(facts: CallFacts, outcome: str, step: int, digest: str, informative: bool) -> str:
    """The status's line about one call (§13.5): the command in backticks, then
    ``failed at step N: <digest>`` or ``succeeded at step N`` (an informative exit
    adds its digest in parentheses)."""
    if outcome == "error":
        return f"`{facts.command}` failed at step {step}: {digest}"
    note = f" ({digest})" if informative else ""
    return f"`{facts.command}` succeeded at step {step}{note}"


def _errors_of(trajectory: Any, fingerprint: str) -> int:
    return sum(1 for t in trajectory if t.outcome == "error" and t.fingerprint == fingerprint)


class RulesTierObservation(RulesTriggers):
    """Mixin of ``MemoryMiddleware``: the rules tier's observation of tool calls."""

    def _prepare(self, call: ToolCall) -> TrajectoryStep | None:
        name = (call.tool_name or "").strip()
        if not name:
            return None  # §4: no tool name → ignored entirely
        facts = call_facts(name, call.args, call.kind, self.workspace_root)
        return TrajectoryStep(0, name, facts, tool_call_id=call.tool_call_id)

    def before_tool(self, call: ToolCall, *, session_id: str | None = None) -> list[Effect]:
        """§4: prepare the step and keep it under ``tool_call_id`` (or
        ``anonymous:<fp>``), bounded by the trajectory window (FIFO). Returns no
        effects; never raises."""
        return self._guard("before_tool", self._before_tool, call, session_id)

    def _before_tool(self, call: ToolCall, session_id: str | None) -> list[Effect]:
        self._observe(session_id)
        settings = self.settings()
        if not self._active(settings):
            return []
        step = self._prepare(call)
        if step is None:
            return []
        key = call.tool_call_id or f"anonymous:{step.fingerprint}"
        pending = self._s.pending
        pending[key] = step
        while len(pending) > settings.trajectory_steps:
            pending.popitem(last=False)
        return []

    def after_tool(
        self, call: ToolCall, outcome: ToolOutcome, *, session_id: str | None = None
    ) -> list[Effect]:
        """§4 tool observation plus §12.1–12.4. Returns at most one
        ``AnnotateToolResult`` (repeated failure or environmental failure) and, at
        the ``loopStopRepeats``-th identical repeat, a ``StopTurn``. Never raises."""
        return self._guard("after_tool", self._after_tool, call, outcome, session_id)

    def _take_step(self, call: ToolCall) -> TrajectoryStep | None:
        """The step ``before_tool`` prepared for ``call`` (or a fresh one)."""
        pending = self._s.pending
        if call.tool_call_id and call.tool_call_id in pending:
            return pending.pop(call.tool_call_id)
        probe = self._prepare(call)
        if probe is None:
            return None
        return pending.pop(f"anonymous:{probe.fingerprint}", None) or probe

    def _after_tool(
        self, call: ToolCall, outcome: ToolOutcome, session_id: str | None
    ) -> list[Effect]:
        self._observe(session_id)
        settings = self.settings()
        if not self._active(settings) or not (call.tool_name or "").strip():
            return []
        step = self._take_step(call)
        if step is None:
            return []
        s = self._s
        s.tool_step += 1
        s.tools_since_memory_step += 1
        step.step = s.tool_step
        if s.tools_since_memory_step >= settings.cadence_tool_calls:
            self._add_trigger("interval")
        is_error = self._still_an_error(settings, step, call, outcome)
        rules = s.rules
        epoch_before = rules.state_epoch
        state_changing = step.state_changing
        if state_changing and settings.state_change_resets_repeats:
            rules.note_change()
        if state_changing and not step.revert:
            writes = step.writes
            rules.note_edit(step.step, ", ".join(writes[:3]) or step.command, writes)
        if is_error:
            self._classify_error(step, outcome)
        else:
            self._classify_success(step, outcome)
        s.trajectory.append(step)
        while len(s.trajectory) > settings.trajectory_steps:
            s.trajectory.popleft()
        self.last_observation = {
            "step": step.step,
            "outcome": step.outcome,
            "informative": step.informative,
            "stateChanging": state_changing,
            "digest": step.digest,
        }
        rules.last_command = partial(
            _outcome_line, step.facts, step.outcome, step.step, step.digest, step.informative
        )
        if is_error:
            return self._on_failure(settings, step, outcome, epoch_before)
        rules.note_outcome(step.fingerprint, step.step, False, "")
        return []

    def _still_an_error(
        self, settings: MemorySettings, step: TrajectoryStep, call: ToolCall, outcome: ToolOutcome
    ) -> bool:
        """The tool's verdict, except that §12.2 informative exits are not errors."""
        if not outcome.is_error:
            return False
        command = shell_command_of(step.tool_name, call.args)
        if command is not None and settings.exit_code_semantics:
            verdict = classify_exit(command, outcome.exit_code)
            if verdict.meaning == "informative":
                step.informative = True
                step.digest = cap_digest(verdict.note)
                return False
        return True

    def _classify_error(self, step: TrajectoryStep, outcome: ToolOutcome) -> None:
        s = self._s
        step.outcome = "error"
        if outcome.digest:
            step.digest, step.provenance = cap_digest(outcome.digest), "canonical"
        else:
            step.digest = error_digest(outcome.output, exit_code=outcome.exit_code)
        s.consecutive_errors += 1
        if s.consecutive_errors >= 2:
            self._add_trigger("tool_error_streak")
        step.key = (step.fingerprint, error_signature(outcome.output, exit_code=outcome.exit_code))
        self._locate_failure(step, outcome)

    def _locate_failure(self, step: TrajectoryStep, outcome: ToolOutcome) -> None:
        """The files and lines the failure output names go first in the step's paths
        (a reminder about it is shown there)."""
        located = failure_locations(outcome.output or "", self.workspace_root)
        if not located:
            return
        paths = [loc.path for loc in located]
        lines: list[int | None] = [loc.line for loc in located]
        for path in step.paths:
            if path not in paths:
                paths.append(path)
                lines.append(None)
        step.located = (tuple(paths), tuple(lines))

    def _classify_success(self, step: TrajectoryStep, outcome: ToolOutcome) -> None:
        if not step.digest:
            if outcome.digest:
                step.digest, step.provenance = cap_digest(outcome.digest), "canonical"
            else:
                step.digest = ok_digest(outcome.output)
        self._s.consecutive_errors = 0
        self._s.rules.note_success(step.fingerprint)

    def _on_failure(
        self,
        settings: MemorySettings,
        step: TrajectoryStep,
        outcome: ToolOutcome,
        epoch_before: int,
    ) -> list[Effect]:
        """A failed call: failure memory, then the first trigger that speaks, in the
        order loop stop, repeated failure (blind retry), unchanged after edit,
        environment, recurring problem (§13: one note per call)."""
        s = self._s
        rules = s.rules
        assert step.key is not None
        self._bank_dirty = True
        record = rules.record_failure(
            self.bank, step.fingerprint, step.call, step.digest, step.step, step.command
        )
        repeat = rules.count_repeat(step.key, step.step, epoch_before)
        outcome_record = self._note_failure_outcome(step, outcome)
        knock_on = s.failures_this_turn > 0 and _says_missing(step.digest)
        s.failures_this_turn += 1
        environment = self._environment_sighting(settings, step, outcome)
        problem = self._problem_sighting(settings, step)
        if settings.state_change_resets_repeats:
            repeated = repeat.count >= 2
        else:  # reference rule: the window holds ≥2 errors with this fingerprint
            repeated = _errors_of(s.trajectory, step.fingerprint) >= 2
        if repeated:
            if settings.escalation and repeat.count >= settings.loop_stop_repeats:
                return self._loop_stop(step, record, repeat.count)
            spent_key = step.key if settings.state_change_resets_repeats else (step.fingerprint, "")
            if spent_key in s.annotated:
                return []  # §4: spent once per key per turn
            text = blind_retry_text(record.entry_id, step.command, repeat.first_step, step.digest)
            return self._annotate(
                settings, step, text, (record.entry_id,), "repeated_failure", spent_key
            )
        for speak in (
            lambda: (
                []
                if knock_on
                else self._unchanged_after_edit(settings, step, record, outcome_record)
            ),
            lambda: self._environment_reminder(settings, step, environment),
            lambda: [] if knock_on else self._recurring_problem(settings, step, record, problem),
        ):
            effects = speak()
            if effects:
                return effects
        return []

    def _loop_stop(self, step: TrajectoryStep, record: FailureRecord, count: int) -> list[Effect]:
        """§12.4: the ``loopStopRepeats``-th identical repeat ends the turn."""
        self.signal_loop()
        notice = loop_stop_text(step.command, count, step.digest)
        self.bank.record_injection([record.entry_id])
        self._emit(["loop_signal", "repeated_failure"], "rules", "injected", "loop_stop", cited=1)
        self._s.rules_spoke_since_step = True
        return [StopTurn(notice, (record.entry_id,))]

    def _annotate(
        self,
        settings: MemorySettings,
        step: TrajectoryStep,
        text: str,
        cited: tuple[str, ...],
        trigger: str,
        spent_key: tuple[str, str] | None = None,
    ) -> list[Effect]:
        s = self._s
        text = collapse_keep_newlines(text)[: settings.max_output_tokens * 4]
        telemetry_trigger = trigger
        if spent_key is not None:
            s.annotated.add(spent_key)
        if settings.escalation and text == s.last_injected_message:
            # §12.4: identical reminder text is never delivered twice in a row.
            self._emit([telemetry_trigger], "rules", "silent", "duplicate_reminder")
            return []
        s.last_injected_key = step.key
        s.last_injected_message = text
        s.rules_spoke_since_step = True
        s.annotated_since_turn_end = True
        s.spoke_this_boundary = True
        s.spoken_steps = {n for n in s.spoken_steps if n > step.step - 50} | {step.step}
        self.bank.record_injection(cited)
        self._emit([telemetry_trigger], "rules", "injected", "intervened", cited=len(cited))
        return [
            AnnotateToolResult(
                step.tool_call_id, text, cited, trigger, paths=step.paths, lines=step.lines
            )
        ]

    def _unreported_repeated_failure(
        self, settings: MemorySettings
    ) -> tuple[TrajectoryStep, FailureRecord] | None:
        """The newest repeated failure since the last turn end that no reminder has
        reported yet (§4 turn_end), with its failure record."""
        s = self._s
        for step in reversed(s.trajectory):
            if step.step <= s.last_turn_end_step or step.outcome != "error" or step.key is None:
                continue
            if step.key == s.last_injected_key or step.key in s.annotated:
                continue
            record = s.rules.failures.get(step.fingerprint)
            repeat = s.rules.repeats.get(step.key)
            if record is None or repeat is None:
                continue
            if settings.state_change_resets_repeats:
                if repeat.count < 2:
                    continue
            elif _errors_of(s.trajectory, step.fingerprint) < 2:
                continue
            return step, record
        return None

    def _capture_requirements(self, text: str) -> None:
        """§12.5/§13.4: requirements in the user's own prompt become knowledge
        entries (de-duplicated across prompts)."""
        self._bank_dirty = True
        rules = self._s.rules
        for sentence in extract_requirements(text):
            key = requirement_key(sentence)
            if key in rules.requirements:
                continue
            rules.requirements.add(key)
            try:
                entry = self.bank.save(
                    "knowledge", f"Requirement from the user: {sentence}", origin="rules"
                )
            except ValueError:
                continue
            rules.requirement_entries.append([entry.id, sentence])

    def note_workspace_change(self) -> None:
        """§12.1: the file watcher saw the workspace change; repeat counts restart.
        The session core calls this from its watcher (watchfiles). Never raises."""

        def run() -> list[Effect]:
            if not self._disposed and self.settings().state_change_resets_repeats:
                self._s.rules.note_change()
            return []

        self._guard("note_workspace_change", run)

    def unresolved_failures(self) -> list[str]:
        """§12.8: one line per failure record whose latest outcome for that call is
        still an error (no later success of the same operation fingerprint), oldest
        first, as ``failure_line`` renders it. Empty when memory is
        off or disposed. The lines may hold secrets: the handoff redacts them."""
        if self._disposed:
            return []
        return [failure_line(r) for r in self._s.rules.failures.values() if not r.resolved]
