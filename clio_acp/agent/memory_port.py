"""The agent loop's view of the memory middleware (MEMORY_SPEC §4, §10, §12).

Owns the hook protocol the loop calls around a turn and every tool call, the effects
the hooks return, and a do-nothing implementation used when memory is off or the
middleware is absent. The loop never calls a memory model: it only calls these hooks,
appends ``AnnotateToolResult`` text to that tool's result, delivers
``InjectReminder`` text as a ``<system-reminder>`` block in the next model request,
and ends the turn on ``StopTurn`` (the loop guard, §12 item 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class AnnotateToolResult:
    """Append ``text`` to the current tool's result (mid-turn channel, §4)."""

    text: str
    cited: tuple[str, ...] = ()
    trigger: str | None = "repeated_failure"
    severity: Literal["info", "warn"] = "warn"


@dataclass(frozen=True)
class InjectReminder:
    """Deliver ``text`` to the model in the next request (``channel`` reminder) or in
    this turn's first request (``restore`` after compaction/resume)."""

    text: str
    cited: tuple[str, ...] = ()
    trigger: str | None = None
    channel: Literal["reminder", "restore"] = "reminder"
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class StopTurn:
    """The loop guard ends the turn with a visible notice (§12 item 4)."""

    notice: str


MemoryEffect = AnnotateToolResult | InjectReminder | StopTurn


@dataclass(frozen=True)
class ToolObservation:
    """What the loop tells the middleware about one finished tool call."""

    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    ok: bool
    digest: str
    exit_code: int | None = None
    category: str = "read"
    """Permission category of the tool: read, edit (state-changing) or execute."""
    output: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


class MemoryHooks(Protocol):
    """One registration per live session. Every method must be exception-safe
    (return no effects on failure) and must not block the turn."""

    def turn_start(self, session_id: str, turn_id: str, text: str) -> list[MemoryEffect]: ...

    def before_tool(
        self, session_id: str, tool_call_id: str, tool_name: str, arguments: dict[str, Any]
    ) -> list[MemoryEffect]: ...

    def after_tool(self, session_id: str, observation: ToolObservation) -> list[MemoryEffect]: ...

    def turn_end(self, session_id: str, turn_id: str) -> list[MemoryEffect]: ...

    def evaluate_turn_end(self, session_id: str, turn_id: str) -> None:
        """Start the detached LLM-tier step if due (never awaited by the turn)."""

    def take_deferred(self) -> list[InjectReminder]:
        """Drain reminders buffered by a detached step for the next request."""
        ...

    def discard_deferred(self) -> None:
        """Drop buffered reminders (their turn was aborted)."""

    def on_compaction(self, session_id: str, metadata: dict[str, Any]) -> list[MemoryEffect]:
        """A compaction happened; may return the restore reminder for the next request."""
        ...

    def signal_loop(self) -> None: ...

    def bank_status(self) -> str | None:
        """The bank's status text, for progress reminders (§12 item 10)."""
        ...

    def snapshot(self) -> dict[str, Any] | None:
        """Bank snapshot to save in the journal (MEMORY_SPEC §12 item 7)."""
        ...

    def counters(self) -> dict[str, Any] | None:
        """Counters that survive compaction and resume (§12 item 4)."""
        ...

    def restore(
        self, snapshot: dict[str, Any] | None, counters: dict[str, Any] | None
    ) -> list[MemoryEffect]:
        """Restore a saved session's bank; may return a restore reminder (§12 item 6)."""
        ...

    def board(self) -> dict[str, Any]: ...

    def task_bank(self) -> Any:
        """The live ``TaskMemoryBank`` (handoff, seed), or None when memory is off."""
        ...

    def reset(self) -> None: ...

    def dispose(self) -> None: ...


class NullMemory:
    """Memory off: every hook does nothing."""

    def turn_start(self, session_id: str, turn_id: str, text: str) -> list[MemoryEffect]:
        return []

    def before_tool(
        self, session_id: str, tool_call_id: str, tool_name: str, arguments: dict[str, Any]
    ) -> list[MemoryEffect]:
        return []

    def after_tool(self, session_id: str, observation: ToolObservation) -> list[MemoryEffect]:
        return []

    def turn_end(self, session_id: str, turn_id: str) -> list[MemoryEffect]:
        return []

    def evaluate_turn_end(self, session_id: str, turn_id: str) -> None:
        return None

    def take_deferred(self) -> list[InjectReminder]:
        return []

    def discard_deferred(self) -> None:
        return None

    def on_compaction(self, session_id: str, metadata: dict[str, Any]) -> list[MemoryEffect]:
        return []

    def signal_loop(self) -> None:
        return None

    def bank_status(self) -> str | None:
        return None

    def snapshot(self) -> dict[str, Any] | None:
        return None

    def counters(self) -> dict[str, Any] | None:
        return None

    def restore(
        self, snapshot: dict[str, Any] | None, counters: dict[str, Any] | None
    ) -> list[MemoryEffect]:
        return []

    def board(self) -> dict[str, Any]:
        return {
            "enabled": False,
            "tier": "off",
            "size": 0,
            "lastDecision": None,
            "bank": None,
            "activity": [],
        }

    def task_bank(self) -> Any:
        return None

    def reset(self) -> None:
        return None

    def dispose(self) -> None:
        return None
