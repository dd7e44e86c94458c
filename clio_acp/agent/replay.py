"""Replay recorded trajectories through the real memory middleware.

Owns ``replay_recording``: it feeds a ``Recording`` (``clio_acp.agent.recordings``)
turn by turn into a fresh ``MemoryMiddleware`` exactly as the agent loop would —
``turn_start`` (with the user prompt on the first turn), ``before_tool`` /
``after_tool`` per call, ``turn_end``, the detached ``evaluate`` — and reports what
memory did: tool calls, failures, informative exits, every annotation, reminder,
restore and loop stop with the 1-based tool-call step it fired at, its cited entries
and text, the environmental-failure and requirement entries, and the final bank.
The rules tier always runs; the LLM tier runs only when a memory client factory is
given. Telemetry goes to an in-memory sink, never to the user's ledger. It writes
nothing to disk and prints nothing (``clio_acp.cli.replay_cmd`` does the printing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from clio_acp.agent.recordings import RecordedCall, Recording, iter_recordings
from clio_acp.memory.bank import TaskMemoryBank, well_formed_text
from clio_acp.memory.middleware import (
    AnnotateToolResult,
    Effect,
    InjectReminder,
    MemoryMiddleware,
    StopTurn,
    ToolCall,
    ToolOutcome,
)
from clio_acp.memory.telemetry import MemoryTrace, StepCounts
from clio_acp.settings import MemorySettings

__all__ = [
    "REPLAY_EPOCH",
    "ReplayClock",
    "ReplayReminder",
    "ReplayReport",
    "replay_file",
    "replay_recording",
]

ENVIRONMENT_PREFIX = "Environment:"
REQUIREMENT_PREFIX = "Requirement from the user:"
REPLAY_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""The replay bank clock's origin (its first reading is 1 ms later)."""


class ReplayClock:
    """The bank clock of one replay: each call returns a UTC time 1 ms after the
    previous one, the first ``REPLAY_EPOCH`` + 1 ms. Distinct readings, so no two
    bank writes tie on time."""

    def __init__(self, start: datetime = REPLAY_EPOCH) -> None:
        self._now = start

    def __call__(self) -> datetime:
        self._now += timedelta(milliseconds=1)
        return self._now


@dataclass
class ReplayReminder:
    """One thing memory said. ``step`` is the 1-based index of the tool call it
    fired at (annotations, stops) or the number of calls done before the model
    request that carried it (reminders, restores)."""

    step: int
    channel: str
    """annotation, reminder, restore or stop."""
    cited: list[str]
    text: str
    trigger: str
    turn: int | None = None
    """1-based recording turn it was delivered in (set for completion checks, which
    follow a response without tool calls rather than a call)."""

    def to_dict(self) -> dict[str, Any]:
        """``{step, channel, cited, text, trigger}`` as ``clio-acp replay --json`` prints it
        (``step`` is the 1-based tool-call index)."""
        return {
            "step": self.step,
            "channel": self.channel,
            "cited": self.cited,
            "text": self.text,
            "trigger": self.trigger,
        }


@dataclass
class ReplayReport:
    file: str
    format: str
    instance: str
    tool_calls: int = 0
    failures: int = 0
    informative: int = 0
    state_changing: int = 0
    failure_steps: list[int] = field(default_factory=list)
    informative_steps: list[int] = field(default_factory=list)
    reminders: list[ReplayReminder] = field(default_factory=list)
    environmental: list[dict[str, Any]] = field(default_factory=list)
    requirements: list[dict[str, Any]] = field(default_factory=list)
    bank: dict[str, Any] = field(default_factory=dict)
    telemetry: dict[str, int] = field(default_factory=dict)
    yardstick: dict[str, Any] | None = None

    @property
    def summary(self) -> dict[str, Any]:
        """The replay's counts (camelCase keys: toolCalls, failures, informative,
        stateChanging, reminders by channel, loopStops, environmental, requirements,
        bankSize, …) as printed by ``clio-acp replay``."""
        channels = Counter(r.channel for r in self.reminders)
        return {
            "toolCalls": self.tool_calls,
            "failures": self.failures,
            "informative": self.informative,
            "stateChanging": self.state_changing,
            "reminders": len(self.reminders),
            "annotations": channels.get("annotation", 0),
            "turnEndReminders": channels.get("reminder", 0),
            "restores": channels.get("restore", 0),
            "loopStops": channels.get("stop", 0),
            "environmental": len(self.environmental),
            "requirements": len(self.requirements),
            "bankSize": len(self.bank.get("knowledge", [])) + len(self.bank.get("procedural", [])),
        }

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object of one file (issue 3 item 6)."""
        data: dict[str, Any] = {
            "file": self.file,
            "format": self.format,
            "instance": self.instance,
            "reminders": [r.to_dict() for r in self.reminders],
            "failureSteps": self.failure_steps,
            "informativeSteps": self.informative_steps,
            "environmental": self.environmental,
            "requirements": self.requirements,
            "bank": self.bank,
            "telemetry": self.telemetry,
            "summary": self.summary,
        }
        if self.yardstick is not None:
            data["yardstick"] = self.yardstick
        return data


def _stop_key(effect: Effect, mw: MemoryMiddleware) -> tuple[tuple[str, ...], str]:
    """The repeat key a loop stop (and later effects) belongs to: the cited failure
    entry plus the digest of the call it fired at."""
    observation = mw.last_observation or {}
    return tuple(effect.cited), str(observation.get("digest", ""))


def _record(
    report: ReplayReport,
    effects: list[Effect],
    step: int,
    mw: MemoryMiddleware,
    stopped: set[tuple[tuple[str, ...], str]] | None = None,
) -> None:
    """Append ``effects`` to the report. A live session ends the turn at a loop
    stop; replay goes on reading the recording, so after a stop it reports nothing
    more for that key (``stopped`` remembers the keys already stopped)."""
    stopped = stopped if stopped is not None else set()
    for effect in effects:
        if isinstance(effect, AnnotateToolResult | StopTurn) and effect.cited:
            key = _stop_key(effect, mw)
            if key in stopped:
                continue
            if isinstance(effect, StopTurn):
                stopped.add(key)
        if isinstance(effect, AnnotateToolResult):
            report.reminders.append(
                ReplayReminder(step, "annotation", list(effect.cited), effect.text, effect.trigger)
            )
        elif isinstance(effect, InjectReminder):
            report.reminders.append(
                ReplayReminder(
                    step, effect.channel, list(effect.cited), effect.text, effect.trigger
                )
            )
            if effect.offer_id:
                mw.confirm_delivery(effect.offer_id)  # replay "sends" every request
        elif isinstance(effect, StopTurn):
            report.reminders.append(
                ReplayReminder(step, "stop", list(effect.cited), effect.notice, effect.trigger)
            )


def _record_completion(report: ReplayReport, effects: list[Effect], step: int, turn: int) -> None:
    for effect in effects:
        if isinstance(effect, InjectReminder):
            report.reminders.append(
                ReplayReminder(
                    step, effect.channel, list(effect.cited), effect.text, effect.trigger, turn
                )
            )


def _replay_call(
    report: ReplayReport,
    call: RecordedCall,
    mw: MemoryMiddleware,
    stopped: set[tuple[tuple[str, ...], str]],
) -> None:
    """One recorded tool call through ``before_tool``/``after_tool``, counted and its
    effects recorded at the call's 1-based step."""
    tool_call = ToolCall(call.tool_name, call.args, f"call-{call.index}", call.kind)
    mw.before_tool(tool_call)
    effects = mw.after_tool(tool_call, ToolOutcome(call.output, call.is_error, call.exit_code))
    report.tool_calls += 1
    observation = mw.last_observation or {}
    if observation.get("outcome") == "error":
        report.failures += 1
        report.failure_steps.append(call.index)
    if observation.get("informative"):
        report.informative += 1
        report.informative_steps.append(call.index)
    report.state_changing += bool(observation.get("stateChanging"))
    if effects:
        _record(report, effects, call.index, mw, stopped)


async def replay_recording(
    recording: Recording,
    settings: MemorySettings | Callable[[], MemorySettings] | None = None,
    *,
    client_factory: Callable[[MemorySettings], Any] | None = None,
    compact_every: int | None = None,
) -> ReplayReport:
    """Feed ``recording`` through a fresh middleware and report what it did.

    ``settings`` (default ``MemorySettings()``) is read live like in a session.
    ``compact_every`` simulates a compaction after every N tool calls (the restore
    is then offered at the next turn start). A loop stop is reported but the
    recording continues, so later calls are still observed; the stop is reported
    once per key and that key stays silent afterwards (a live session would have
    ended the turn there)."""
    fixed = settings if isinstance(settings, MemorySettings) else MemorySettings()
    source = settings if callable(settings) else (lambda: fixed)  # built once, not per hook
    sink = StepCounts()  # the report counts rows by decision/reason
    mw = MemoryMiddleware(
        source,
        bank=TaskMemoryBank(clock=ReplayClock()),
        telemetry=sink,
        client_factory=client_factory,
        session_id=recording.name,
        trace=MemoryTrace.from_env(),  # CLIO_ACP_MEMORY_TRACE, as in a live session
    )
    # A file name that is not UTF-8 is surrogate escapes here (os.fsdecode): the report
    # is printed, so its bytes read as U+FFFD there (a strict stdout refused them).
    report = ReplayReport(
        well_formed_text(str(recording.path)), recording.format, well_formed_text(recording.name)
    )
    report.yardstick = recording.yardstick
    done = 0
    stopped: set[tuple[tuple[str, ...], str]] = set()
    last_call_turn = max((n for n, t in enumerate(recording.turns, 1) if t.calls), default=0)
    for number, turn in enumerate(recording.turns, 1):
        turn_id = f"turn-{number}"
        effects = mw.turn_start(turn_id, turn.user_text)
        if effects:
            _record(report, effects, done, mw)
        if not turn.calls and number > last_call_turn:
            # The final answer, without tool calls, would end the task: the loop asks
            # memory's completion check first (§13.6; at most once per task). An
            # answer without calls that the run went on from was a harness format
            # error (mini-swe-agent), not the agent finishing.
            _record_completion(report, mw.completion_check(turn_id), done, number)
        for call in turn.calls:
            _replay_call(report, call, mw, stopped)
            done = call.index
            if compact_every and done % compact_every == 0:
                mw.on_compaction()
        effects = mw.turn_end(turn_id)
        if effects:
            _record(report, effects, done, mw)
        mw.evaluate_inline(turn_id)  # the rules-only step needs no task
        if not mw.idle:
            await mw.wait_idle()
    _record(report, mw.turn_start(None, ""), done, mw)  # drain what is still deferred
    # The recording ends: its last answer would have ended the task (§13.6).
    _record_completion(report, mw.completion_check(), done, len(recording.turns))
    mw.sync_status()
    snapshot = mw.bank.snapshot()
    report.bank = snapshot
    report.environmental = [
        e for e in snapshot["knowledge"] if e["content"].startswith(ENVIRONMENT_PREFIX)
    ]
    report.requirements = [
        e for e in snapshot["knowledge"] if e["content"].startswith(REQUIREMENT_PREFIX)
    ]
    report.telemetry = sink.counts
    mw.dispose()
    return report


async def replay_file(
    path: Path,
    fmt: str = "auto",
    settings: MemorySettings | Callable[[], MemorySettings] | None = None,
    *,
    client_factory: Callable[[MemorySettings], Any] | None = None,
    compact_every: int | None = None,
    part: tuple[int, int] | None = None,
) -> list[ReplayReport]:
    """Load ``path`` (``RecordingFormatError`` for an unknown format or a bad line) and
    replay each recording in it (``part``: one interleaved share, see
    ``load_recordings``). The recordings are read one at a time (``iter_recordings``)
    and each is dropped once replayed: an OpenHands file of many instances costs one
    instance's memory plus the reports. They are read on the event loop, which has
    nothing else to run meanwhile (the rules tier is synchronous, and a detached LLM
    step is awaited within its turn); a thread hop per read cost ~5 % of a replay. A
    fault anywhere in the file raises, as before, and no report of it is returned."""
    recordings = iter_recordings(path, fmt, part=part)
    reports = []
    try:
        for recording in recordings:
            reports.append(
                await replay_recording(
                    recording,
                    settings,
                    client_factory=client_factory,
                    compact_every=compact_every,
                )
            )
            del recording  # let it go before the next one is read
    finally:
        recordings.close()
    return reports
