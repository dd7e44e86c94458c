"""Policy prompts (MEMORY_SPEC §3 "Prompt construction" and "Trajectory rendering")."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.envelope import parse_envelope
from clio_acp.memory.prompts import (
    POLICY_SYSTEM_PROMPT,
    WORKED_EXAMPLES,
    TrajectoryStep,
    build_user_prompt,
    render_trajectory,
)


def test_both_worked_examples_parse_and_only_the_second_has_a_context():
    first, second = (parse_envelope(example) for example in WORKED_EXAMPLES)
    assert first.ok and second.ok
    assert [op.op for op in first.operations] == [
        "update_status",
        "save_knowledge",
        "save_procedural",
    ]
    assert first.dropped == 0 and first.reminder is None and first.reminder_error is None
    assert [op.op for op in second.operations] == ["update_status"]
    assert second.reminder is not None and "[tm-p-1]" in second.reminder


def test_worked_examples_are_in_the_system_prompt_verbatim():
    for example in WORKED_EXAMPLES:
        assert example in POLICY_SYSTEM_PROMPT
        assert parse_envelope(POLICY_SYSTEM_PROMPT[POLICY_SYSTEM_PROMPT.index(example) :]).ok


@pytest.mark.parametrize(
    "phrase",
    [
        "never act",
        "exactly two lines",
        "without code fences",
        "never a tool call",
        '{"op":"update_status","content":"..."}',
        '{"op":"save_knowledge","content":"..."}',
        '{"op":"save_procedural","content":"..."}',
        '{"op":"delete","id":"..."}',
        "Any other op is thrown away",
        "at most 8 operations",
        "write [] when nothing",
        "Status is private",
        "Silence is the default",
        "[entry-id]",
        "never ask the agent to continue",
    ],
)
def test_system_prompt_states_each_rule(phrase):
    assert phrase in POLICY_SYSTEM_PROMPT


def test_user_prompt_has_three_labelled_sections_and_no_status():
    bank = TaskMemoryBank()
    bank.save("knowledge", "Fact one.")
    bank.update_status("PRIVATE status")
    bank.save("procedural", "Tried x; failed.")
    prompt = build_user_prompt(
        "Fix the bug.", bank, 100, [TrajectoryStep(1, "read_file", "ab", "read_file{}", "ok")]
    )
    task, trajectory, bank_part = prompt.split("\n\n")
    assert task == "Task:\nFix the bug."
    assert bank_part.startswith("Task bank (status is intentionally omitted):\n- [")
    assert "PRIVATE" not in prompt and "tm-s-" not in prompt
    assert trajectory.startswith("Recent completed tool trajectory:\n[")
    steps = json.loads(trajectory.split("\n", 1)[1])
    assert steps[0]["toolName"] == "read_file" and steps[0]["resultDigestProvenance"] == "legacy"


def test_next_step_prompt_differs_from_the_last_only_in_its_tail():
    """§14.4: a step after a bank write and two more tool steps starts with the whole
    previous prompt up to the end of its trajectory steps (what a caching route keeps)."""
    steps = [_step(n, f"digest {n}") for n in range(1, 7)]
    bank = TaskMemoryBank()
    bank.save("knowledge", "Keep Python 3.9 compatible.")
    first = build_user_prompt("Fix the bug.", bank, 500, steps)
    bank.save("procedural", "pytest -q failed twice: click is not installed.")
    second = build_user_prompt("Fix the bug.", bank, 500, [*steps, _step(7), _step(8)])
    shared = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
    assert first.index('"digest 6"') < shared
    assert second[shared:].startswith(',{"step":7')


def test_user_prompt_placeholders_and_task_cut():
    prompt = build_user_prompt("  ", TaskMemoryBank(), 100)
    assert prompt == (
        "Task:\n(unknown)\n\nRecent completed tool trajectory:\n[]\n\n"
        "Task bank (status is intentionally omitted):\n(empty)"
    )
    long_task = "t" * 2500
    assert f"Task:\n{'t' * 2000}\n\n" in build_user_prompt(long_task, TaskMemoryBank(), 100)


def _step(n: int, digest: str = "ok", call: str = "run_command{}") -> dict:
    return {
        "step": n,
        "toolName": "run_command",
        "operationFingerprint": "f" * 16,
        "callDescription": call,
        "outcome": "ok",
        "resultDigest": digest,
        "resultDigestProvenance": "legacy",
    }


def test_oldest_whole_steps_are_dropped_first():
    steps = [_step(i, "d" * 200) for i in range(1, 40)]
    rendered = json.loads(render_trajectory(steps))
    assert len(render_trajectory(steps)) <= 4000
    assert rendered[-1]["step"] == 39
    assert [s["step"] for s in rendered] == list(range(40 - len(rendered), 40))
    assert all(s["resultDigest"] == "d" * 200 for s in rendered)


def test_a_single_oversized_step_has_its_digest_trimmed_to_fit():
    text = render_trajectory([_step(1, "x" * 9000), _step(2, "y" * 9000)])
    assert len(text) == 4000
    (only,) = json.loads(text)
    assert only["step"] == 2 and set(only["resultDigest"]) == {"y"}


def test_digest_trim_accounts_for_json_escaping():
    text = render_trajectory([_step(1, '"\\\n' * 3000)])
    assert len(text) <= 4000
    assert json.loads(text)[0]["resultDigest"]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.builds(_step, st.integers(0, 10**6), st.text(max_size=3000), st.text(max_size=180)),
        max_size=12,
    )
)
def test_rendered_trajectory_is_always_valid_json_within_budget(steps):
    text = render_trajectory(steps)
    parsed = json.loads(text)
    assert len(text) <= 4000
    if steps:
        assert parsed and parsed[-1]["step"] == steps[-1]["step"]


def test_a_step_value_json_cannot_represent_is_rendered_as_text():
    from pathlib import PurePosixPath

    text = render_trajectory([dict(_step(1), resultDigest=PurePosixPath("a/b"))])
    assert json.loads(text)[0]["resultDigest"] == "a/b"
