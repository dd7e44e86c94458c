"""Core session events → ACP ``session/update`` payloads (ARCHITECTURE.md event table).

Pure translation, no I/O: :func:`event_to_updates` turns one ``SessionEvent`` into
zero or more ``update`` objects (the value of ``SessionNotification.update``), built
with the pinned SDK's pydantic schema models (``agent-client-protocol==0.12.1``,
schema 1.19.0) so every shape is validated at the wire boundary. The ``notice``
update (ACP session notices, stabilized after schema 1.19.0) is not in the SDK yet;
:class:`NoticeUpdate` is our own pydantic model of it, used only when the client
declared ``clientCapabilities.session.notices``. This module must not hold agent or
memory logic: what a reminder says is decided in the core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from acp import helpers
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    PlanEntry,
    SessionInfoUpdate,
    ToolCallLocation,
    UnstructuredCommandInput,
    UsageUpdate,
)
from pydantic import BaseModel, ConfigDict, Field

from clio_acp.session import events as ev


class NoticeUpdate(BaseModel):
    """ACP v1 ``notice`` session update (session notices; clients opt in with
    ``clientCapabilities.session.notices: {}``). Not in SDK 0.12.1's schema."""

    model_config = ConfigDict(populate_by_name=True)
    session_update: Literal["notice"] = Field(default="notice", alias="sessionUpdate")
    severity: Literal["info", "warning", "error"]
    title: str = Field(min_length=1)
    description: str | None = None


@dataclass(frozen=True)
class Presentation:
    """What the client can show, from ``initialize`` (client capabilities)."""

    notices: bool = False
    """The client declared ``session.notices``: memory reminders go out as notices."""


def dump(update: BaseModel) -> dict[str, Any]:
    """The JSON form of an SDK (or our) update model: camelCase, no nulls."""
    return update.model_dump(mode="json", by_alias=True, exclude_none=True)


MEMORY_PREFIX = "Memory:"
"""Issue 7 item 4: without notices, a reminder is a thought chunk starting ``Memory:``."""


def _memory_text(text: str) -> str:
    text = text.strip()
    return text if text.startswith(MEMORY_PREFIX) else f"{MEMORY_PREFIX} {text}"


def _thought(text: str, message_id: str | None = None) -> dict[str, Any]:
    update = helpers.update_agent_thought_text(text)
    if message_id:
        update.message_id = message_id
    return dump(update)


def _message(text: str, message_id: str | None = None) -> dict[str, Any]:
    update = helpers.update_agent_message_text(text)
    if message_id:
        update.message_id = message_id
    return dump(update)


def _text_content(text: str) -> Any:
    return helpers.tool_content(helpers.text_block(text))


def event_to_updates(event: ev.SessionEvent, presentation: Presentation) -> list[dict[str, Any]]:
    """The ``session/update`` ``update`` objects for one core event (maybe none).

    ``TurnEnded`` and ``MemoryCleared`` produce nothing: the stop reason travels in the
    ``session/prompt`` response and a cleared bank is visible through ``/memory``.
    """
    if isinstance(event, ev.MessageChunk):
        return [_message(event.text, event.message_id)]
    if isinstance(event, ev.ThoughtChunk):
        return [_thought(event.text, event.message_id)]
    if isinstance(event, ev.UserMessage):
        update = helpers.update_user_message_text(event.text)
        update.message_id = event.message_id
        return [dump(update)]
    if isinstance(event, ev.ToolCallStarted):
        return [
            dump(
                helpers.start_tool_call(
                    event.tool_call_id,
                    event.title,
                    kind=event.kind,
                    status="pending",
                    locations=[ToolCallLocation(path=p) for p in event.locations] or None,
                    raw_input=event.arguments or None,
                )
            )
        ]
    if isinstance(event, ev.ToolCallUpdated):
        content = [_text_content(event.output)] if event.output else None
        return [
            dump(helpers.update_tool_call(event.tool_call_id, status=event.status, content=content))
        ]
    if isinstance(event, ev.ToolCallFinished):
        return [_finished(event)]
    if isinstance(event, ev.Plan):
        entries = [
            PlanEntry(content=e.content, priority=e.priority, status=e.status)
            for e in event.entries
        ]
        return [dump(helpers.update_plan(entries))]
    if isinstance(event, ev.MemoryReminder):
        text = _memory_text(event.text)
        if presentation.notices:
            return [dump(NoticeUpdate(severity="info", title="Memory", description=text))]
        return [_thought(text)]
    if isinstance(event, ev.MemoryProposal):
        text = _memory_text(
            f"proposed durable record {event.record_id} ({event.scope}): {event.content} "
            f"(approve with /memory approve {event.record_id})"
        )
        if presentation.notices:
            return [dump(NoticeUpdate(severity="info", title="Memory proposal", description=text))]
        return [_thought(text)]
    if isinstance(event, ev.HandoffOffer):
        return [
            _message(
                f"A handoff snapshot is available ({event.source}, {event.count} entries). "
                "Run /memory seed to restore it into this session's task memory.\n"
            )
        ]
    if isinstance(event, ev.UsageUpdate):
        if event.context_used is None or event.context_size is None:
            return []
        return [
            dump(
                UsageUpdate(
                    session_update="usage_update",
                    used=max(0, event.context_used),
                    size=max(0, event.context_size),
                )
            )
        ]
    if isinstance(event, ev.Notice):
        if presentation.notices:
            title = event.text.strip().splitlines()[0][:120] if event.text.strip() else "Notice"
            return [dump(NoticeUpdate(severity=event.level, title=title, description=event.text))]
        return [_message(f"\n{event.text}\n")]
    return []


def notice_updates(
    session_id: str, level: str, text: str, presentation: Presentation
) -> list[dict[str, Any]]:
    """A visible notice outside a turn (settings problems): a ``notice`` update for
    clients that declared notices, else an agent message."""
    event = ev.Notice(session_id=session_id, level=level, text=text)  # type: ignore[arg-type]
    return event_to_updates(event, presentation)


def client_output(event: ev.ToolCallFinished) -> str:
    """The result the client sees: the model's view without the memory annotation
    appended to it (the advisory reaches the client once, as its ``MemoryReminder``)."""
    output, note = event.output, event.annotation
    if note:
        for tail in (f"\n\n{note}", note):
            if output.endswith(tail):
                return output[: -len(tail)]
    return output


def _finished(event: ev.ToolCallFinished) -> dict[str, Any]:
    content: list[Any] = []
    if event.path is not None and event.new_text is not None:
        content.append(helpers.tool_diff_content(event.path, event.new_text, event.old_text))
    output = client_output(event)
    if output:
        content.append(_text_content(output))
    raw: dict[str, Any] = {"output": output}
    if event.exit_code is not None:
        raw["exitCode"] = event.exit_code
    return dump(
        helpers.update_tool_call(
            event.tool_call_id,
            status=event.status,
            content=content or None,
            locations=[ToolCallLocation(path=event.path)] if event.path else None,
            raw_output=raw,
        )
    )


# -- session-level updates --------------------------------------------------------


@dataclass(frozen=True)
class SlashCommand:
    name: str
    description: str
    hint: str | None = None


SLASH_COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand(
        "memory",
        "Task memory board: tier, last decision, bank, activity, spend. "
        "Verbs: seed, approve ID, reject ID, promote ENTRY repo|global, "
        "propose-event EVENT repo|global [TEXT]",
        "[seed | approve ID | reject ID | promote ENTRY repo|global | "
        "propose-event EVENT repo|global [ack] [TEXT]]",
    ),
    SlashCommand("usage", "Token usage of this session (chat and memory)"),
    SlashCommand("handoff", "Write a handoff snapshot of this task (works without a model)"),
    SlashCommand("compact", "Compact the conversation now (summary + recent tail)"),
    SlashCommand(
        "workspace",
        "Named text values the agent kept (workspace_write): the keys, or one value",
        "[KEY [--offset N] | --cursor C]",
    ),
)
"""Issue 7 item 5: the slash commands sent in ``available_commands_update``."""


def available_commands_update() -> dict[str, Any]:
    """``available_commands_update`` listing :data:`SLASH_COMMANDS` (ACP slash commands)."""
    commands = [
        AvailableCommand(
            name=c.name,
            description=c.description,
            input=AvailableCommandInput(root=UnstructuredCommandInput(hint=c.hint))
            if c.hint
            else None,
        )
        for c in SLASH_COMMANDS
    ]
    return dump(helpers.update_available_commands(commands))


def current_mode_update(mode_id: str) -> dict[str, Any]:
    """``current_mode_update`` for permission mode ``mode_id`` (ACP session modes)."""
    return dump(CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id))


def config_option_update(options: list[Any]) -> dict[str, Any]:
    """``config_option_update`` carrying the full ``configOptions`` array."""
    return dump(ConfigOptionUpdate(session_update="config_option_update", config_options=options))


def message_update(text: str, message_id: str | None = None) -> dict[str, Any]:
    """An ``agent_message_chunk`` carrying ``text`` (slash command output)."""
    return _message(text, message_id)


def session_info_update(title: str) -> dict[str, Any]:
    """``session_info_update`` with the session's (new) title."""
    return dump(SessionInfoUpdate(session_update="session_info_update", title=title))
