"""Core events → ACP ``session/update`` payloads (clio_acp/acp/updates.py): every
payload the SDK models can represent validates as a ``SessionNotification``."""

from __future__ import annotations

import pytest
from acp.schema import SessionNotification

from clio_acp import events as ev
from clio_acp.acp.slash import parse_slash, prompt_text
from clio_acp.acp.updates import (
    Presentation,
    available_commands_update,
    event_to_updates,
)

PLAIN = Presentation(notices=False)
NOTICES = Presentation(notices=True)
SID = "sess_1"


def _valid(update: dict) -> None:
    SessionNotification.model_validate({"sessionId": SID, "update": update})


def test_memory_reminder_is_a_thought_starting_memory_without_notice_support():
    event = ev.MemoryReminder(session_id=SID, text="Memory: the build needs make -j1")
    [update] = event_to_updates(event, PLAIN)
    _valid(update)
    assert update["sessionUpdate"] == "agent_thought_chunk"
    assert update["content"]["text"] == "Memory: the build needs make -j1"


def test_memory_reminder_without_prefix_gets_one():
    event = ev.MemoryReminder(session_id=SID, text="check the env")
    [update] = event_to_updates(event, PLAIN)
    assert update["content"]["text"] == "Memory: check the env"


def test_memory_reminder_is_a_notice_when_the_client_declares_notices():
    event = ev.MemoryReminder(session_id=SID, text="Memory: tests fail on py3.12 only")
    [update] = event_to_updates(event, NOTICES)
    assert update == {
        "sessionUpdate": "notice",
        "severity": "info",
        "title": "Memory",
        "description": "Memory: tests fail on py3.12 only",
    }


def test_tool_call_lifecycle_maps_kind_locations_diff_and_exit_code():
    started = ev.ToolCallStarted(
        session_id=SID,
        tool_call_id="c1",
        tool_name="edit_file",
        title="Edit a.py",
        kind="edit",
        arguments={"path": "a.py"},
        locations=["/w/a.py"],
    )
    progress = ev.ToolCallUpdated(session_id=SID, tool_call_id="c1", output="partial")
    finished = ev.ToolCallFinished(
        session_id=SID,
        tool_call_id="c1",
        status="completed",
        output="edited",
        exit_code=0,
        path="/w/a.py",
        old_text="a\n",
        new_text="b\n",
    )
    [s] = event_to_updates(started, PLAIN)
    [p] = event_to_updates(progress, PLAIN)
    [f] = event_to_updates(finished, PLAIN)
    for u in (s, p, f):
        _valid(u)
    assert s["sessionUpdate"] == "tool_call"
    assert s["kind"] == "edit" and s["status"] == "pending"
    assert s["locations"] == [{"path": "/w/a.py"}]
    assert s["rawInput"] == {"path": "a.py"}
    assert p["content"][0]["content"]["text"] == "partial"
    assert f["status"] == "completed"
    assert f["content"][0] == {
        "type": "diff",
        "path": "/w/a.py",
        "oldText": "a\n",
        "newText": "b\n",
    }
    assert f["rawOutput"] == {"output": "edited", "exitCode": 0}


def test_usage_needs_both_window_figures():
    assert event_to_updates(ev.UsageUpdate(session_id=SID, input_tokens=5), PLAIN) == []
    [u] = event_to_updates(
        ev.UsageUpdate(session_id=SID, context_used=100, context_size=4096), PLAIN
    )
    _valid(u)
    assert u == {"sessionUpdate": "usage_update", "used": 100, "size": 4096}


@pytest.mark.parametrize(
    "event",
    [
        ev.MessageChunk(session_id=SID, message_id="m1", text="hi"),
        ev.ThoughtChunk(session_id=SID, message_id="m1", text="hmm"),
        ev.UserMessage(session_id=SID, message_id="u1", text="do it"),
        ev.Plan(session_id=SID, entries=[ev.PlanEntry(content="step")]),
        ev.HandoffOffer(session_id=SID, source="handoff-x.md", count=3),
        ev.Notice(session_id=SID, level="warning", text="loop stopped"),
        ev.MemoryProposal(session_id=SID, record_id="mem-1", scope="repo", content="use uv"),
    ],
)
def test_every_other_event_validates_against_the_sdk_schema(event):
    updates = event_to_updates(event, PLAIN)
    assert updates
    for update in updates:
        _valid(update)


def test_chunks_carry_their_message_id():
    [u] = event_to_updates(ev.MessageChunk(session_id=SID, message_id="m7", text="x"), PLAIN)
    assert u["messageId"] == "m7"


def test_turn_end_and_bank_clear_send_nothing():
    assert event_to_updates(ev.TurnEnded(session_id=SID, stop_reason="end_turn"), PLAIN) == []
    assert event_to_updates(ev.MemoryCleared(session_id=SID), PLAIN) == []


def test_available_commands_validate_and_name_the_memory_verbs():
    update = available_commands_update()
    _valid(update)
    memory = update["availableCommands"][0]
    assert memory["name"] == "memory"
    assert "approve" in memory["input"]["hint"]


def test_slash_parsing_only_claims_our_commands():
    assert parse_slash("/memory approve mem-1") == ("memory", ["approve", "mem-1"])
    assert parse_slash("  /usage") == ("usage", [])
    assert parse_slash("/unknown thing") is None
    assert parse_slash("please run /memory") is None
    assert parse_slash('/memory promote "k 1" repo') == ("memory", ["promote", "k 1", "repo"])


def test_prompt_text_keeps_block_order():
    from acp.schema import (
        EmbeddedResourceContentBlock,
        ResourceContentBlock,
        TextContentBlock,
        TextResourceContents,
    )

    blocks = [
        TextContentBlock(type="text", text="look at"),
        ResourceContentBlock(type="resource_link", uri="file:///a.py", name="a.py"),
        EmbeddedResourceContentBlock(
            type="resource", resource=TextResourceContents(uri="file:///b.py", text="B")
        ),
    ]
    text = prompt_text(blocks)
    assert text.index("look at") < text.index("@file:///a.py") < text.index("B")
