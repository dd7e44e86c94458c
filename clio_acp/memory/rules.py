"""The rules tier's memory of failures, requirements and environment faults.

Owns the deterministic, model-free state the middleware consults on every tool
event (MEMORY_SPEC §4 "Failure memory", "Repeated failure"; §12.1 repeat keys reset
by state-changing calls; §13.1 outcomes after edits; §13.2 environment sightings;
§13.3 problem lines; §13.4 requirements; §13.5 status facts), and the JSON-able
export that lets counters survive compaction and resume (§12.4). The reminder
sentences live in ``clio_acp.memory.reminders``. It writes only through the ``TaskMemoryBank`` it is
handed and never calls a model, reads settings, emits telemetry or delivers text:
the middleware decides when any of that happens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.requirements import REQUIREMENTS_PER_PROMPT, extract_requirements

__all__ = [
    "FAILURE_MAP_CAP",
    "REQUIREMENTS_PER_PROMPT",
    "EnvSighting",
    "FailureRecord",
    "OutcomeRecord",
    "ProblemSighting",
    "RepeatRecord",
    "RulesMemory",
    "extract_requirements",
    "failure_content",
]

# MEMORY_SPEC §4: the fingerprint → failure record map is bounded at 30, FIFO.
FAILURE_MAP_CAP = 30
# §13.2: environment signatures tracked at once (FIFO).
ENV_MAP_CAP = 30
# §13.1/§13.5: recent edits and changed files kept for reminders and the status.
EDITS_KEPT = 40
FILES_KEPT = 40


@dataclass
class FailureRecord:
    """§4 failure memory of one operation fingerprint."""

    entry_id: str
    attempts: int
    first_step: int
    call: str
    digest: str
    resolved: bool = False
    """§12.6: set when a later call with the same fingerprint succeeded."""
    command: str = ""
    """The call as the user would type it (§13.7)."""


@dataclass
class RepeatRecord:
    """§12.1 repeat count of one key (fingerprint, error signature)."""

    count: int
    epoch: int
    """State epoch right after the last occurrence: equal to the epoch before the
    next occurrence iff nothing changed the workspace in between."""
    first_step: int
    last_step: int


@dataclass
class OutcomeRecord:
    """§13.1 the latest outcome of one operation fingerprint."""

    failed: bool
    lines: str
    """Hash of the normalised failure lines ('' for a success)."""
    step: int
    edit_epoch: int
    """``RulesMemory.edit_epoch`` right after this call."""
    same_steps: list[int] = field(default_factory=list)
    """Steps of the identical failures in a row, this one last."""
    escalated: bool = False


@dataclass
class EnvSighting:
    """§13.2 calls failing with one environment-shaped signature."""

    line: str
    steps: list[int] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    entry_id: str | None = None
    reminded: bool = False
    needed: int = 2
    """Calls failing alike before the reminder: the second sighting (§13.2), or the
    call after the one that made a dead tool channel evident."""


@dataclass
class ProblemSighting:
    """§13.3 one failure's problem line (the digest's line), for the window."""

    step: int
    fingerprint: str
    line: str


def _least_recent(repeats: dict[tuple[str, str], RepeatRecord]) -> tuple[str, str]:
    """The first key, in map order, of the smallest ``last_step``: what
    ``min(repeats, key=lambda k: repeats[k].last_step)`` picks, without a Python call
    per entry."""
    steps = [record.last_step for record in repeats.values()]
    return next(islice(repeats, steps.index(min(steps)), None))


def failure_content(call: str, attempts: int, first_step: int, digest: str) -> str:
    """§4: ``<call> failed N time(s); first observed at step S: <digest>.``"""
    plural = "time" if attempts == 1 else "times"
    return (
        f"{call} failed {attempts} {plural}; first observed at step {first_step}: "
        f"{digest.rstrip('.')}."
    )


@dataclass
class RulesMemory:
    """Per-session rules-tier state. Bounded maps; ``export``/``load`` round-trip it."""

    failures: OrderedDict[str, FailureRecord] = field(default_factory=OrderedDict)
    repeats: dict[tuple[str, str], RepeatRecord] = field(default_factory=dict)
    requirements: set[str] = field(default_factory=set)
    """De-duplication keys of captured requirements (§13.4)."""
    state_epoch: int = 0
    # -- §13 ---------------------------------------------------------------------------
    edit_epoch: int = 0
    """Counts state changes that are not pure reverts (§13.1)."""
    edits: list[list[Any]] = field(default_factory=list)
    """Recent edits as [step, what] (newest last, bounded)."""
    outcomes: OrderedDict[str, OutcomeRecord] = field(default_factory=OrderedDict)
    env_sightings: OrderedDict[str, EnvSighting] = field(default_factory=OrderedDict)
    problems: list[ProblemSighting] = field(default_factory=list)
    problems_spoken: set[str] = field(default_factory=set)
    """Problem lines already reminded about in this user turn (§13.3)."""
    unchanged_spoken: set[str] = field(default_factory=set)
    """Failure-line keys already reminded as unchanged in this user turn (§13.1)."""
    requirement_entries: list[list[str]] = field(default_factory=list)
    """[entry id, text] of each captured requirement, in capture order (§13.6)."""
    files_changed: list[str] = field(default_factory=list)
    _last_command: str | Callable[[], str] = field(default="", repr=False, compare=False)
    goal: str = ""
    completion_checked: bool = False
    status_source: str = ""
    """The status text last written (before the bank's normalisation)."""
    status_step: int = 0
    """Tool step of the last status refresh."""

    @property
    def last_command(self) -> str:
        """The latest tool call and its outcome as the status says it (§13.5)."""
        value = self._last_command
        if not isinstance(value, str):
            value = self._last_command = value()
        return value

    @last_command.setter
    def last_command(self, value: str | Callable[[], str]) -> None:
        """The line, or a function that writes it on first read: the middleware sets
        it on every tool call, the status and snapshots read it far less often."""
        self._last_command = value

    # -- §12.1 --------------------------------------------------------------------------

    def note_change(self) -> None:
        """A state-changing call or a workspace change happened."""
        self.state_epoch += 1

    def count_repeat(self, key: tuple[str, str], step: int, epoch_before: int) -> RepeatRecord:
        """Count one failure of ``key``. The count continues only if nothing changed
        since its previous occurrence (``epoch_before`` equals the epoch stored after
        it); otherwise it restarts at 1."""
        record = self.repeats.get(key)
        if record is not None and record.epoch == epoch_before:
            record.count += 1
            record.last_step = step
        else:
            record = RepeatRecord(count=1, epoch=0, first_step=step, last_step=step)
            self.repeats[key] = record
        record.epoch = self.state_epoch
        if len(self.repeats) > 4 * FAILURE_MAP_CAP:
            del self.repeats[_least_recent(self.repeats)]
        return record

    # -- §4 failure memory --------------------------------------------------------------

    def record_failure(
        self,
        bank: TaskMemoryBank,
        fingerprint: str,
        call: str,
        digest: str,
        step: int,
        command: str = "",
    ) -> FailureRecord:
        """Save or update the procedural failure entry of ``fingerprint`` (§4)."""
        record = self.failures.get(fingerprint)
        if record is None:
            content = failure_content(call, 1, step, digest)
            entry = bank.save("procedural", content, origin="rules")
            record = FailureRecord(entry.id, 1, step, call, digest, command=command)
            self.failures[fingerprint] = record
            while len(self.failures) > FAILURE_MAP_CAP:
                self.failures.popitem(last=False)
            return record
        record.attempts += 1
        record.digest = digest
        record.resolved = False
        content = failure_content(record.call, record.attempts, record.first_step, digest)
        if bank.kind_of(record.entry_id) == "procedural":
            bank.save("procedural", content, record.entry_id, origin="rules")
        else:  # evicted or deleted: a new entry takes over (§4)
            record.entry_id = bank.save("procedural", content, origin="rules").id
        return record

    def note_success(self, fingerprint: str) -> None:
        """A call with ``fingerprint`` succeeded: its failure record is resolved (§12.6,
        §12.8)."""
        record = self.failures.get(fingerprint)
        if record is not None:
            record.resolved = True

    def unresolved_entry_ids(self, bank: TaskMemoryBank) -> list[str]:
        """Failure entries still in the bank whose call has not succeeded since."""
        ids = bank.ids()
        return [r.entry_id for r in self.failures.values() if not r.resolved and r.entry_id in ids]

    # -- §13 -----------------------------------------------------------------------------

    def note_edit(self, step: int, what: str, paths: tuple[str, ...]) -> None:
        """A state change that is not a pure revert (§13.1), and the files it wrote
        (§13.5)."""
        self.edit_epoch += 1
        self.edits.append([step, what])
        del self.edits[:-EDITS_KEPT]
        for path in paths:
            if path in self.files_changed:
                self.files_changed.remove(path)
            self.files_changed.append(path)
        del self.files_changed[:-FILES_KEPT]

    def edits_since(self, step: int) -> list[list[Any]]:
        """The recent edits (``[step, what]``) made after tool step ``step``."""
        return [e for e in self.edits if e[0] > step]

    def note_outcome(self, fingerprint: str, step: int, failed: bool, lines: str) -> OutcomeRecord:
        """Record the outcome of one call and return its record. ``same_steps``
        grows while the same failure lines come back after edits or not; any other
        outcome restarts it."""
        previous = self.outcomes.pop(fingerprint, None)
        same: list[int] = []
        escalated = False
        if previous is not None and failed and previous.failed and previous.lines == lines:
            same, escalated = previous.same_steps, previous.escalated
        record = OutcomeRecord(
            failed,
            lines if failed else "",
            step,
            self.edit_epoch,
            [*same[-8:], step] if failed else [],
            escalated,
        )
        self.outcomes[fingerprint] = record
        while len(self.outcomes) > 4 * FAILURE_MAP_CAP:
            self.outcomes.popitem(last=False)
        return record

    def note_environment(self, signature: str, step: int, command: str) -> EnvSighting:
        """Add one call failing with the environment ``signature`` (§13.2) and return
        its sightings (bounded map, FIFO; the last 9 steps and commands kept)."""
        sighting = self.env_sightings.get(signature)
        if sighting is None:
            sighting = EnvSighting(signature.split(": ", 1)[-1])
            self.env_sightings[signature] = sighting
            while len(self.env_sightings) > ENV_MAP_CAP:
                self.env_sightings.popitem(last=False)
        sighting.steps = [*sighting.steps[-8:], step]
        sighting.commands = [*sighting.commands[-8:], command]
        return sighting

    def note_problem(
        self, step: int, fingerprint: str, line: str, window: int
    ) -> list[ProblemSighting]:
        """Add one failure's problem line; return the sightings of that line within
        the last ``window`` tool calls (this one included)."""
        self.problems.append(ProblemSighting(step, fingerprint, line))
        self.problems = [p for p in self.problems if p.step > step - window]
        return [p for p in self.problems if p.line == line]

    # -- §12.4 persistence ---------------------------------------------------------------

    def export(self) -> dict[str, Any]:
        """A JSON-able snapshot of every counter (the session journal stores it)."""
        return {
            "version": 1,
            "stateEpoch": self.state_epoch,
            "failures": [{"fingerprint": k, **asdict(v)} for k, v in self.failures.items()],
            "repeats": [
                {"fingerprint": k[0], "signature": k[1], **asdict(v)}
                for k, v in self.repeats.items()
            ],
            "requirements": sorted(self.requirements),
            "editEpoch": self.edit_epoch,
            "edits": self.edits,
            "outcomes": [{"fingerprint": k, **asdict(v)} for k, v in self.outcomes.items()],
            "envSightings": [{"signature": k, **asdict(v)} for k, v in self.env_sightings.items()],
            "problems": [asdict(p) for p in self.problems],
            "requirementEntries": self.requirement_entries,
            "filesChanged": self.files_changed,
            "lastCommand": self.last_command,
            "goal": self.goal,
            "completionChecked": self.completion_checked,
        }

    @classmethod
    def load(cls, data: dict[str, Any]) -> RulesMemory:
        """Inverse of ``export``. Raises ``ValueError`` for a malformed snapshot."""
        try:
            memory = cls(state_epoch=int(data.get("stateEpoch", 0)))
            for item in data.get("failures", []):
                item = dict(item)
                fingerprint = item.pop("fingerprint")
                memory.failures[fingerprint] = FailureRecord(**item)
            for item in data.get("repeats", []):
                item = dict(item)
                key = (item.pop("fingerprint"), item.pop("signature"))
                memory.repeats[key] = RepeatRecord(**item)
            memory.requirements = set(data.get("requirements", []))
            _load_v2(memory, data)
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            raise ValueError(f"malformed rules-tier snapshot: {exc}") from exc
        return memory


def _load_v2(memory: RulesMemory, data: dict[str, Any]) -> None:
    """The §13 part of a snapshot (absent in older snapshots: defaults stay)."""
    memory.edit_epoch = int(data.get("editEpoch", 0))
    memory.edits = [[int(step), str(what)] for step, what in data.get("edits", [])]
    for item in data.get("outcomes", []):
        item = dict(item)
        fingerprint = item.pop("fingerprint")
        memory.outcomes[fingerprint] = OutcomeRecord(**item)
    for item in data.get("envSightings", []):
        item = dict(item)
        signature = item.pop("signature")
        memory.env_sightings[signature] = EnvSighting(**item)
    memory.problems = [ProblemSighting(**p) for p in data.get("problems", [])]
    memory.requirement_entries = [[str(i), str(t)] for i, t in data.get("requirementEntries", [])]
    memory.files_changed = [str(f) for f in data.get("filesChanged", [])]
    memory.last_command = str(data.get("lastCommand", ""))
    memory.goal = str(data.get("goal", ""))
    memory.completion_checked = bool(data.get("completionChecked", False))
