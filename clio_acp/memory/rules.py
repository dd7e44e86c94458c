"""The rules tier's memory of failures, requirements and environment faults.

Owns the deterministic, model-free state the middleware consults on every tool
event (MEMORY_SPEC §4 "Failure memory", "Repeated failure"; §12.1 repeat keys reset
by state-changing calls; §12.3 environmental failures; §12.5 requirement capture),
the exact reminder sentences, and the JSON-able export that lets counters survive
compaction and resume (§12.4). It writes only through the ``TaskMemoryBank`` it is
handed and never calls a model, reads settings, emits telemetry or delivers text:
the middleware decides when any of that happens.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.requirements import REQUIREMENTS_PER_PROMPT, extract_requirements

__all__ = [
    "FAILURE_MAP_CAP",
    "REQUIREMENTS_PER_PROMPT",
    "FailureRecord",
    "RepeatRecord",
    "RulesMemory",
    "annotation_text",
    "extract_requirements",
    "failure_content",
    "turn_end_text",
]

# MEMORY_SPEC §4: the fingerprint → failure record map is bounded at 30, FIFO.
FAILURE_MAP_CAP = 30
# §12.3: environmental-failure signatures tracked at once (FIFO).
ENV_MAP_CAP = 30


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
class EnvRecord:
    """§12.3: different fingerprints failing with one problem signature."""

    fingerprints: list[str]
    first_step: int
    digest: str
    entry_id: str | None = None


def failure_content(call: str, attempts: int, first_step: int, digest: str) -> str:
    """§4: ``<call> failed N time(s); first observed at step S: <digest>.``"""
    plural = "time" if attempts == 1 else "times"
    return (
        f"{call} failed {attempts} {plural}; first observed at step {first_step}: "
        f"{digest.rstrip('.')}."
    )


def annotation_text(entry_id: str, call: str, first_step: int, digest: str) -> str:
    """§4 mid-turn annotation sentence (before the length cap)."""
    return (
        f"Memory: [{entry_id}] you already tried {call} at step {first_step} and it failed "
        f"with {digest}. Change the approach rather than repeating it."
    )


def turn_end_text(entry_id: str, call: str, first_step: int, digest: str) -> str:
    """§4 turn-end reminder: the annotation sentence minus "Change the approach…"."""
    return (
        f"Memory: [{entry_id}] you already tried {call} at step {first_step} and it failed "
        f"with {digest}."
    )


def environment_text(entry_id: str, first_step: int, digest: str, commands: int) -> str:
    """§12.3 reminder: blame the environment, not each command."""
    return (
        f"Memory: [{entry_id}] {commands} different commands have failed the same way since "
        f"step {first_step} ({digest}). Check the environment (tool, path, dependency, "
        "network or service) before changing the approach."
    )


def loop_stop_text(call: str, repeats: int, digest: str) -> str:
    """§12.4 loop-guard notice shown to the user when the turn is ended."""
    return (
        f"Memory: stopped this turn: {call} failed {repeats} times in a row with the same "
        f"error and nothing changed in between ({digest}). Change the approach or give "
        "new instructions."
    )


@dataclass
class RulesMemory:
    """Per-session rules-tier state. Bounded maps; ``export``/``load`` round-trip it."""

    failures: OrderedDict[str, FailureRecord] = field(default_factory=OrderedDict)
    repeats: dict[tuple[str, str], RepeatRecord] = field(default_factory=dict)
    environment: OrderedDict[str, EnvRecord] = field(default_factory=OrderedDict)
    requirements: set[str] = field(default_factory=set)
    state_epoch: int = 0

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
            oldest = min(self.repeats, key=lambda k: self.repeats[k].last_step)
            del self.repeats[oldest]
        return record

    # -- §4 failure memory --------------------------------------------------------------

    def record_failure(
        self, bank: TaskMemoryBank, fingerprint: str, call: str, digest: str, step: int
    ) -> FailureRecord:
        """Save or update the procedural failure entry of ``fingerprint`` (§4)."""
        record = self.failures.get(fingerprint)
        if record is None:
            content = failure_content(call, 1, step, digest)
            entry = bank.save("procedural", content, origin="rules")
            record = FailureRecord(entry.id, 1, step, call, digest)
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

    # -- §12.3 environmental failures ----------------------------------------------------

    def note_environment(
        self, signature: str, fingerprint: str, step: int, digest: str
    ) -> EnvRecord:
        """Count one failure of ``fingerprint`` under the problem ``signature`` (§12.3);
        returns its record (bounded map, FIFO)."""
        record = self.environment.get(signature)
        if record is None:
            record = EnvRecord([fingerprint], step, digest)
            self.environment[signature] = record
            while len(self.environment) > ENV_MAP_CAP:
                self.environment.popitem(last=False)
        elif fingerprint not in record.fingerprints:
            record.fingerprints.append(fingerprint)
        return record

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
            "environment": [{"signature": k, **asdict(v)} for k, v in self.environment.items()],
            "requirements": sorted(self.requirements),
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
            for item in data.get("environment", []):
                item = dict(item)
                signature = item.pop("signature")
                memory.environment[signature] = EnvRecord(**item)
            memory.requirements = set(data.get("requirements", []))
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"malformed rules-tier snapshot: {exc}") from exc
        return memory
