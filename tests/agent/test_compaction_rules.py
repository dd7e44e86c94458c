"""Pure compaction rules: safe cut points, clipping, progress guard."""

from __future__ import annotations

from clio_acp.context.compaction import (
    ProgressGuard,
    choose_cut,
    clip_message,
    clip_middle,
    is_safe_cut,
)
from clio_acp.context.tokens import IMAGE_TOKENS, estimate_content


def _conv():
    return [
        {"role": "user", "content": "u1"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "a", "function": {"name": "x", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "r" * 400},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "u2"},
    ]


def test_cut_never_separates_a_tool_call_from_its_result():
    conv = _conv()
    assert is_safe_cut(conv, 1)  # before the assistant with the call
    assert not is_safe_cut(conv, 2)  # between call and result
    assert is_safe_cut(conv, 3) and is_safe_cut(conv, 4)


def test_choose_cut_keeps_the_current_prompt_even_when_it_is_large():
    conv = _conv()
    conv[-1] = {"role": "user", "content": "x" * 4000}
    assert choose_cut(conv, retain_tokens=50, keep_from=4) == 4
    assert choose_cut(conv, retain_tokens=50) == 5


def test_clip_removes_the_middle_and_marks_it():
    text = "HEAD" + "m" * 100_000 + "TAIL"
    clipped = clip_middle(text, 1_000)
    assert clipped.startswith("HEAD") and clipped.endswith("TAIL")
    assert "removed from the middle" in clipped and len(clipped) <= 4_000
    tool = clip_message({"role": "tool", "tool_call_id": "t", "content": "y" * 50_000})
    assert len(tool["content"]) <= 40_000
    user = {"role": "user", "content": "z" * 50_000}
    assert clip_message(user) is user  # user text limit is 262,144 tokens


def test_image_parts_count_1200_tokens():
    content = [
        {"type": "text", "text": "abcd" * 10},
        {"type": "image_url", "image_url": {"url": "x"}},
    ]
    assert estimate_content(content) == 10 + IMAGE_TOKENS


def test_progress_guard_flags_two_compactions_without_state_change():
    guard = ProgressGuard()
    guard.start_turn("t1")
    assert guard.record(1000, 500) is False
    guard.start_turn("t2")
    assert guard.record(1000, 600) is True
    guard.note_state_change()
    assert guard.record(1000, 600) is False


def test_progress_guard_forbids_a_second_compaction_without_reduction():
    guard = ProgressGuard()
    guard.start_turn("t")
    guard.record(1000, 1000)
    assert guard.may_compact() is False
    guard.start_turn("t2")
    assert guard.may_compact() is True
