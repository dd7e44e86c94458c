"""What the memory middleware's hooks take and return (MEMORY_SPEC §4, §10, §12).

Hook inputs (``ToolCall``, ``ToolOutcome``) and the typed effects every hook returns
(``AnnotateToolResult``, ``InjectReminder``, ``StopTurn``). These are the one set of
effect types: the agent's seam (``clio_acp.agent.memory_hooks``) passes them through
unchanged, so ids, offer ids and paths reach the loop and the faces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from clio_acp.memory.redact import redact_preserving_markers

__all__ = [
    "AnnotateToolResult",
    "Effect",
    "InjectReminder",
    "StopTurn",
    "ToolCall",
    "ToolOutcome",
]


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the loop is about to run it. ``kind`` is the session event's
    tool kind (edit, delete, move, execute, read, …) when known."""

    tool_name: str
    args: Any = None
    tool_call_id: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class ToolOutcome:
    """A finished tool call. ``is_error`` is the tool's own verdict (§4: outcome is
    error iff the result kind is error); ``exit_code`` lets §12.2 reclassify
    informative exits; ``digest`` is the canonical disposition digest if the tool
    supplies one (otherwise the middleware builds the legacy digest)."""

    output: str = ""
    is_error: bool = False
    exit_code: int | None = None
    digest: str | None = None


def _redact_field(effect: object, name: str) -> None:
    """Everything memory says is redacted when it is made (issue 17): the model, the
    editor (ACP/LSP), the journal and the trace all receive the same clean text."""
    value = getattr(effect, name)
    if isinstance(value, str):
        object.__setattr__(effect, name, redact_preserving_markers(value))


@dataclass(frozen=True)
class AnnotateToolResult:
    """Append ``text`` to the result of ``tool_call_id`` before the model sees it
    (§4 mid-turn channel). ``cited`` are task-bank entry ids; ``paths`` the absolute
    workspace files the failing call named (the LSP face shows the note there)."""

    tool_call_id: str | None
    text: str
    cited: tuple[str, ...] = ()
    trigger: str = "repeated_failure"
    severity: Literal["warn", "info"] = "warn"
    paths: tuple[str, ...] = ()
    lines: tuple[int | None, ...] = ()
    """0-based line in each of ``paths`` (same order; None or missing: no line)."""

    def __post_init__(self) -> None:
        _redact_field(self, "text")


@dataclass(frozen=True)
class InjectReminder:
    """Carry ``text`` into the next model request (§4 ``reminder`` channel), or into
    this turn's first request (``restore`` after compaction or resume, §12.6). A
    restore offer stays pending until ``confirm_delivery(offer_id)`` says the request
    carrying it was sent. ``trigger`` is None only for the agent loop's own notes;
    ``paths`` are absolute workspace files the reminder names."""

    text: str
    cited: tuple[str, ...] = ()
    trigger: str | None = None
    channel: Literal["reminder", "restore"] = "reminder"
    offer_id: str | None = None
    paths: tuple[str, ...] = ()
    lines: tuple[int | None, ...] = ()
    """0-based line in each of ``paths`` (same order; None or missing: no line)."""

    def __post_init__(self) -> None:
        _redact_field(self, "text")


@dataclass(frozen=True)
class StopTurn:
    """§12.4 loop guard: end the current user turn and show ``notice`` to the user."""

    notice: str
    cited: tuple[str, ...] = ()
    trigger: str = "loop_signal"

    def __post_init__(self) -> None:
        _redact_field(self, "notice")


Effect = AnnotateToolResult | InjectReminder | StopTurn
