"""The typed event stream a session emits (ARCHITECTURE.md "The event stream").

One pydantic union, discriminated by ``type``. Faces subscribe to a session and map
each event to their protocol (ACP ``session/update``; LSP ``clio/sessionUpdate``,
``$/progress``, diagnostics, code actions, ``window/showMessageRequest``). Events
carry no protocol-specific fields. Every event has ``session_id``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    session_id: str


class MessageChunk(_Event):
    """A piece of the agent's visible answer."""

    type: Literal["message_chunk"] = "message_chunk"
    message_id: str
    text: str


class ThoughtChunk(_Event):
    """A piece of the model's reasoning (``reasoning_content``)."""

    type: Literal["thought_chunk"] = "thought_chunk"
    message_id: str
    text: str


class UserMessage(_Event):
    """A user prompt, emitted when a session's history is replayed (session load)."""

    type: Literal["user_message"] = "user_message"
    message_id: str
    text: str


ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]


class ToolCallStarted(_Event):
    """A tool call the model asked for, before it runs (ACP ``tool_call``)."""

    type: Literal["tool_call_started"] = "tool_call_started"
    tool_call_id: str
    tool_name: str
    title: str
    kind: ToolKind = "other"
    arguments: dict[str, Any] = Field(default_factory=dict)
    locations: list[str] = Field(default_factory=list)
    """Absolute paths the call touches."""


class ToolCallUpdated(_Event):
    """Progress of a running tool call (streamed command output, status change)."""

    type: Literal["tool_call_updated"] = "tool_call_updated"
    tool_call_id: str
    status: ToolStatus = "in_progress"
    output: str | None = None


class ToolCallFinished(_Event):
    """A finished tool call with its result as the model will see it."""

    type: Literal["tool_call_finished"] = "tool_call_finished"
    tool_call_id: str
    status: Literal["completed", "failed"]
    output: str
    exit_code: int | None = None
    diff: str | None = None
    """Unified diff for edits."""
    path: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    annotation: str | None = None
    """A memory annotation appended to the result (rules tier, mid-turn)."""


class PlanEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    content: str
    priority: Literal["high", "medium", "low"] = "medium"
    status: Literal["pending", "in_progress", "completed"] = "pending"


class Plan(_Event):
    type: Literal["plan"] = "plan"
    entries: list[PlanEntry]


class MemoryReminder(_Event):
    """A memory reminder delivered to the agent (and shown to the user)."""

    type: Literal["memory_reminder"] = "memory_reminder"
    text: str
    """Starts with ``Memory:``."""
    cited_entries: list[str] = Field(default_factory=list)
    channel: Literal["annotation", "reminder", "restore"] = "reminder"
    """annotation: appended to a tool result mid-turn; reminder: a deferred or
    turn-end reminder; restore: the post-compaction / post-resume restore."""
    trigger: str | None = None
    """repeated_failure, post_compaction, interval, …"""
    paths: list[str] = Field(default_factory=list)
    """Workspace files the reminder or its cited entries name (absolute)."""
    line: int | None = None
    """0-based line in the first path, when the failure output named one."""
    lines: list[int | None] = Field(default_factory=list)
    """0-based line in each of ``paths`` (same order; None or missing: no line)."""
    proposal_id: str | None = None


class MemoryProposal(_Event):
    """An unapproved durable record proposed from the session (MEMORY_SPEC §6)."""

    type: Literal["memory_proposal"] = "memory_proposal"
    record_id: str
    scope: str
    content: str
    entry_id: str | None = None


class MemoryCleared(_Event):
    """The live bank was cleared (any session change)."""

    type: Literal["memory_cleared"] = "memory_cleared"


class HandoffOffer(_Event):
    """After a load/resume: a handoff snapshot can seed the bank (``/memory seed``)."""

    type: Literal["handoff_offer"] = "handoff_offer"
    source: str
    """Basename of the handoff file."""
    count: int
    """Knowledge + procedural entries in the snapshot."""


class UsageUpdate(_Event):
    type: Literal["usage_update"] = "usage_update"
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    context_used: int | None = None
    """Estimated tokens of the model view."""
    context_size: int | None = None
    """Model window, tokens."""


class Notice(_Event):
    """A visible notice for the user (loop stop, compaction, permission denial)."""

    type: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"] = "info"
    text: str


class TurnEnded(_Event):
    type: Literal["turn_ended"] = "turn_ended"
    stop_reason: Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


SessionEvent = Annotated[
    MessageChunk
    | ThoughtChunk
    | UserMessage
    | ToolCallStarted
    | ToolCallUpdated
    | ToolCallFinished
    | Plan
    | MemoryReminder
    | MemoryProposal
    | MemoryCleared
    | HandoffOffer
    | UsageUpdate
    | Notice
    | TurnEnded,
    Field(discriminator="type"),
]

SESSION_EVENT_ADAPTER: TypeAdapter[SessionEvent] = TypeAdapter(SessionEvent)
"""Validates/serializes any ``SessionEvent`` (journal rows, ``--json`` output)."""
