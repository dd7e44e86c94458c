"""The model view projected from journal rows (``agent/history.py``): pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clio_acp.agent import history as h


@dataclass
class Row:
    seq: int
    type: str
    data: dict[str, Any] = field(default_factory=dict)


def _call(seq: int, *ids: str, text: str | None = None) -> Row:
    calls = [{"id": i, "name": "run_command", "arguments": "{}"} for i in ids]
    return Row(seq, h.ROW_ASSISTANT, {"text": text, "tool_calls": calls})


def test_a_call_and_its_result_pair_up_in_order():
    rows = [
        Row(1, h.ROW_PROMPT, {"text": "fix it"}),
        _call(2, "c1"),
        Row(3, h.ROW_TOOL_RESULT, {"tool_call_id": "c1", "output": "ok"}),
        Row(4, h.ROW_ASSISTANT, {"text": "done"}),
    ]
    view = h.project(rows)
    assert [seq for seq, _ in view] == [1, 2, 3, 4]
    assert view[1][1]["tool_calls"][0]["function"]["name"] == "run_command"
    assert view[2][1] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}


def test_a_missing_result_is_filled_in_before_the_next_prompt():
    rows = [
        Row(1, h.ROW_PROMPT, {"text": "go"}),
        _call(2, "c1"),
        Row(3, h.ROW_TURN_ENDED, {"stop_reason": "cancelled"}),
        Row(4, h.ROW_PROMPT, {"text": "again"}),
    ]
    view = h.messages(rows)
    assert view[2] == {"role": "tool", "tool_call_id": "c1", "content": h.MISSING_RESULT_TEXT}
    assert view[3]["content"] == "again"


def test_a_result_without_its_call_is_left_out():
    rows = [
        Row(1, h.ROW_PROMPT, {"text": "go"}),
        Row(2, h.ROW_TOOL_RESULT, {"tool_call_id": "ghost", "output": "x"}),
    ]
    assert [m["role"] for m in h.messages(rows)] == ["user"]


def test_a_reminder_waits_while_calls_are_pending():
    reminder = Row(3, h.ROW_REMINDER, {"text": "Memory: careful", "to_model": True})
    rows = [Row(1, h.ROW_PROMPT, {"text": "go"}), _call(2, "c1"), reminder]
    assert [m["role"] for m in h.messages(rows)] == ["user", "assistant", "tool"]
    after_result = [
        *rows[:2],
        Row(3, h.ROW_TOOL_RESULT, {"tool_call_id": "c1", "output": "ok"}),
        Row(4, h.ROW_REMINDER, {"text": "Memory: careful", "to_model": True}),
    ]
    last = h.messages(after_result)[-1]
    assert last["role"] == "user" and "Memory: careful" in last["content"]


def test_a_compaction_replaces_the_removed_part_and_applies_spill_overrides():
    rows = [
        Row(1, h.ROW_PROMPT, {"text": "old request"}),
        Row(2, h.ROW_ASSISTANT, {"text": "old answer"}),
        Row(3, h.ROW_PROMPT, {"text": "new request"}),
        _call(4, "c1"),
        Row(5, h.ROW_TOOL_RESULT, {"tool_call_id": "c1", "output": "x" * 50_000}),
        Row(
            6,
            h.ROW_COMPACTION,
            {
                "summary": "the user asked for the old thing",
                "first_kept_seq": 3,
                "spilled": {"c1": "[spilled preview]"},
                "workspace_keys": ["plan"],
            },
        ),
    ]
    view = h.project(rows)
    assert view[0][0] == 6 and view[0][1]["content"].startswith(h.SUMMARY_PREFIX)
    assert "workspace_read" in view[0][1]["content"]
    assert [seq for seq, _ in view[1:]] == [3, 4, 5]
    assert view[-1][1]["content"] == "[spilled preview]"


def test_an_empty_assistant_reply_has_empty_text_not_none():
    rows = [Row(1, h.ROW_PROMPT, {"text": "hi"}), Row(2, h.ROW_ASSISTANT, {"text": ""})]
    assert h.messages(rows)[1] == {"role": "assistant", "content": ""}
