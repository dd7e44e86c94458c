"""Pure compaction rules: safe cut points, clipping, planning, tail spill choice,
progress guard (no model, no loop, no async)."""

from __future__ import annotations

from clio_acp.context.compaction import (
    SPILL_MIN_CHARS,
    ProgressGuard,
    choose_cut,
    clip_message,
    clip_middle,
    exceeds_retain,
    is_safe_cut,
    plan_compaction,
    tail_spill_candidates,
    with_tool_outputs,
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


def _pairs(messages, first_seq=10):
    return [(first_seq + i, m) for i, m in enumerate(messages)]


def _long_conv(turns: int = 6, result_chars: int = 4_000):
    """``turns`` user prompts, each followed by one tool call and its large result."""
    messages = []
    for n in range(turns):
        messages += [
            {"role": "user", "content": f"task {n}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{n}", "function": {"name": "x", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": f"c{n}", "content": "r" * result_chars},
            {"role": "assistant", "content": f"done {n}"},
        ]
    return messages


def test_plan_keeps_a_tail_within_the_retain_budget_and_names_its_first_seq():
    messages = _long_conv()
    pairs = _pairs(messages)
    plan = plan_compaction(
        pairs,
        window_tokens=8_000,
        retain_ratio=0.5,
        overhead_tokens=500,
        has_summary=False,
        turn_prompt_seq=None,
        next_seq=100,
    )
    assert plan is not None
    assert plan.retain_tokens == 3_500
    assert plan.start == 0 and 0 < plan.cut < len(messages)
    assert plan.removed == messages[: plan.cut] and plan.tail == messages[plan.cut :]
    assert plan.first_kept_seq == pairs[plan.cut][0]
    assert is_safe_cut(messages, plan.cut)


def test_plan_always_replaces_an_earlier_summary_and_never_cuts_the_current_prompt():
    summary = {"role": "user", "content": "[summary] earlier work"}
    messages = [summary, *_long_conv()]
    pairs = _pairs(messages)
    prompt_index = len(messages) - 4  # the last turn's user prompt
    plan = plan_compaction(
        pairs,
        window_tokens=1_000,  # nothing fits: the cut falls back to the current prompt
        retain_ratio=0.5,
        overhead_tokens=0,
        has_summary=True,
        turn_prompt_seq=pairs[prompt_index][0],
        next_seq=100,
    )
    assert plan is not None
    assert plan.start == 1 and plan.removed[0] == messages[1]
    assert plan.cut == prompt_index


def test_plan_is_none_when_no_safe_cut_removes_anything():
    messages = [{"role": "user", "content": "only the prompt"}]
    plan = plan_compaction(
        _pairs(messages),
        window_tokens=1_000,
        retain_ratio=0.5,
        overhead_tokens=0,
        has_summary=False,
        turn_prompt_seq=10,
        next_seq=11,
    )
    assert plan is None


def test_plan_that_keeps_nothing_points_past_the_last_row():
    messages = _long_conv(turns=2)
    plan = plan_compaction(
        _pairs(messages),
        window_tokens=100,
        retain_ratio=0.5,
        overhead_tokens=1_000,  # overhead above the budget: retain nothing
        has_summary=False,
        turn_prompt_seq=None,
        next_seq=42,
    )
    assert plan is not None and plan.tail == [] and plan.first_kept_seq == 42


def test_retain_share_is_exceeded_only_above_it():
    assert not exceeds_retain(500, 1_000, 0.5)
    assert exceeds_retain(501, 1_000, 0.5)


def test_tail_spill_candidates_are_large_unspilled_results_biggest_first():
    tail = [
        {"role": "tool", "tool_call_id": "small", "content": "s" * SPILL_MIN_CHARS},
        {"role": "tool", "tool_call_id": "big", "content": "b" * 9_000},
        {"role": "tool", "tool_call_id": "done", "content": "d" * 20_000},
        {"role": "tool", "tool_call_id": "mid", "content": "m" * 2_000},
        {"role": "assistant", "content": "a" * 30_000},
    ]
    picked = tail_spill_candidates(tail, exclude={"done"})
    assert [call_id for call_id, _ in picked] == ["big", "mid"]
    assert picked[0][1] == "b" * 9_000


def test_with_tool_outputs_replaces_only_the_named_results():
    tail = [
        {"role": "tool", "tool_call_id": "a", "content": "long a"},
        {"role": "tool", "tool_call_id": "b", "content": "long b"},
        {"role": "user", "content": "a"},
    ]
    out = with_tool_outputs(tail, {"a": "preview a"})
    assert [m["content"] for m in out] == ["preview a", "long b", "a"]
    assert tail[0]["content"] == "long a"  # the input is not changed
