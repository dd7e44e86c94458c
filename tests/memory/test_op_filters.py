"""Entry origins enforced on model operations (MEMORY_SPEC §14.2): the bank keeps who
wrote an entry; a model op may not delete or overwrite an entry whose origin is not
``model`` — it is dropped and counted in ``dropped_operations``."""

from __future__ import annotations

import json

import pytest

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.envelope import Operation, resolve_operations
from clio_acp.memory.handoff import (
    HandoffSource,
    parse_handoff_snapshot,
    render_handoff_snapshot,
    seed_bank,
    snapshot_from_bank,
)
from clio_acp.memory.op_filters import protected_entry_ids
from clio_acp.memory.policy import PolicyInput, ScriptedAnswerClient, run_task_memory_policy


def _mixed_bank() -> TaskMemoryBank:
    bank = TaskMemoryBank()
    bank.save("procedural", "pytest -q failed twice at steps 3, 5: E ImportError", origin="rules")
    bank.save("knowledge", "The build uses tox.", origin="model")
    bank.save("knowledge", "Requirement from the user: keep Python 3.9 support", origin="rules")
    bank.save("knowledge", "Seeded fact from a handoff.", origin="seed")
    bank.update_status("Goal: fix the parser; 5 steps", origin="rules")
    return bank


def test_origin_is_kept_in_snapshots_and_restores():
    bank = _mixed_bank()
    snap = bank.snapshot()
    assert [e["origin"] for e in snap["knowledge"]] == ["model", "rules", "seed"]
    assert snap["procedural"][0]["origin"] == "rules"
    assert snap["status"]["origin"] == "rules"
    again = TaskMemoryBank()
    again.restore(json.loads(json.dumps(snap)))
    assert again.origin_of("tm-p-1") == "rules" and again.origin_of("tm-k-2") == "model"
    assert again.status.origin == "rules"


def test_a_snapshot_without_origins_restores_as_model_entries():
    bank = _mixed_bank()
    snap = bank.snapshot()
    for entry in [*snap["knowledge"], *snap["procedural"], snap["status"]]:
        del entry["origin"]
    again = TaskMemoryBank()
    again.restore(snap)
    assert {e.origin for e in again.entries()} == {"model"}


def test_an_unknown_origin_is_refused():
    bank = TaskMemoryBank()
    with pytest.raises(ValueError):
        bank.save("knowledge", "x", origin="robot")  # type: ignore[arg-type]
    snap = _mixed_bank().snapshot()
    snap["knowledge"][0]["origin"] = "robot"
    with pytest.raises(ValueError):
        TaskMemoryBank().restore(snap)


def test_an_overwrite_takes_the_writers_origin():
    bank = TaskMemoryBank()
    entry = bank.save("knowledge", "a", origin="model")
    bank.save("knowledge", "b", entry.id, origin="rules")
    assert bank.origin_of(entry.id) == "rules"


def test_protected_ids_are_every_non_model_entry_and_the_status():
    assert protected_entry_ids(_mixed_bank()) == {"tm-p-1", "tm-k-3", "tm-k-4", "tm-s-5"}


def test_resolve_refuses_deletes_and_overwrites_of_protected_entries():
    ops = [
        Operation("delete", id="tm-p-1"),
        Operation("save_procedural", content="x", id="tm-p-1"),
        Operation("update_status", content="The task is done."),
        Operation("save_knowledge", content="y", id="tm-k-2"),  # model entry: an update
        Operation("delete", id="tm-k-2"),
        Operation("save_knowledge", content="z", id="tm-p-1"),  # other class: a new entry
    ]
    resolved = resolve_operations(
        ops,
        "tm-s-5",
        ["tm-k-2", "tm-k-3", "tm-k-4"],
        ["tm-p-1"],
        protected_ids={"tm-p-1", "tm-k-3", "tm-k-4", "tm-s-5"},
    )
    assert resolved.refused == 3 and resolved.unresolved == 3
    assert resolved.operations == (
        Operation("save_knowledge", content="y", id="tm-k-2"),
        Operation("delete", id="tm-k-2"),
        Operation("save_knowledge", content="z", id=None),
    )


async def test_a_model_step_cannot_delete_or_overwrite_rules_entries(tmp_path):
    bank = _mixed_bank()
    before = bank.snapshot()
    answer = (
        '<operations>[{"op":"delete","id":"tm-p-1"},'
        '{"op":"save_knowledge","content":"Nothing required.","id":"tm-k-3"},'
        '{"op":"update_status","content":"Still on the parser."},'
        '{"op":"delete","id":"tm-k-4"},'
        '{"op":"save_knowledge","content":"The build uses tox 4.","id":"tm-k-2"}]'
        "</operations>\n<no_intervention/>"
    )
    result = await run_task_memory_policy(
        bank, PolicyInput(task="fix it", workspace_root=tmp_path), ScriptedAnswerClient(answer)
    )
    assert (result.decision, result.reason) == ("silent", "model_silent")
    assert result.dropped_operations == 4 and result.bank_operations == 1
    after = bank.snapshot()
    assert after["procedural"] == before["procedural"]
    assert after["status"] == before["status"]
    assert after["knowledge"][1:] == before["knowledge"][1:]
    assert bank.get("tm-k-2").content == "The build uses tox 4."


async def test_a_model_step_keeps_its_own_entries_editable(tmp_path):
    bank = TaskMemoryBank()
    bank.update_status("first", origin="model")
    bank.save("procedural", "p", origin="model")
    answer = (
        '<operations>[{"op":"update_status","content":"second"},{"op":"delete","id":"tm-p-2"}]'
        "</operations>\n<no_intervention/>"
    )
    result = await run_task_memory_policy(
        bank, PolicyInput(task="t", workspace_root=tmp_path), ScriptedAnswerClient(answer)
    )
    assert (result.bank_operations, result.dropped_operations) == (2, 0)
    assert bank.status.content == "second" and bank.get("tm-p-2") is None
    assert bank.status.origin == "model"


def test_handoff_carries_origins_and_seeding_marks_entries_seed():
    bank = _mixed_bank()
    text = render_handoff_snapshot(snapshot_from_bank(bank, HandoffSource.for_session("s1")))
    parsed = parse_handoff_snapshot(text)
    assert parsed is not None
    assert [e.origin for e in parsed.knowledge] == ["model", "rules", "seed"]
    fresh = TaskMemoryBank()
    seed_bank(fresh, parsed)
    assert {e.origin for e in fresh.entries()} == {"seed"}


def test_handoff_without_origins_parses_and_a_bad_origin_leaves_its_entry_out():
    bank = _mixed_bank()
    text = render_handoff_snapshot(snapshot_from_bank(bank, HandoffSource.for_session("s1")))
    data = json.loads(text.split("\n")[1])
    for entry in data["knowledge"] + data["procedural"]:
        del entry["origin"]
    plain = "```clio-coder-task-memory\n" + json.dumps(data) + "\n```"
    assert parse_handoff_snapshot(plain) is not None
    data["knowledge"][0]["origin"] = "robot"
    bad = "```clio-coder-task-memory\n" + json.dumps(data) + "\n```"
    parsed = parse_handoff_snapshot(bad)  # issue 17: one bad entry costs only itself
    assert parsed is not None and len(parsed.knowledge) == len(data["knowledge"]) - 1
    assert parsed.rejected == ("knowledge[0]: origin is not one of model, rules, seed, user",)


def test_rules_tier_failure_entries_are_rules_origin():
    from clio_acp.memory.rules import RulesMemory

    bank = TaskMemoryBank()
    rules = RulesMemory()
    record = rules.record_failure(bank, "fp", "pytest -q", "E ImportError", 3)
    assert bank.origin_of(record.entry_id) == "rules"
    rules.record_failure(bank, "fp", "pytest -q", "E ImportError", 5)
    assert bank.origin_of(record.entry_id) == "rules"
    assert protected_entry_ids(bank) == {record.entry_id}


# -- §14.3 copies and false completion ---------------------------------------------

import ast  # noqa: E402

from clio_acp.memory.op_filters import (  # noqa: E402
    CopyFilter,
    claims_completion,
    default_copy_filter,
    filter_operations,
    unresolved_calls,
)
from clio_acp.memory.prompts import POLICY_SYSTEM_PROMPT, WORKED_EXAMPLES  # noqa: E402

EXAMPLE_COPY = "The user forbids new dependencies and requires Python 3.9 compatibility."
FAILED = {
    "step": 4,
    "toolName": "run_command",
    "operationFingerprint": "f",
    "callDescription": "pytest -q",
    "outcome": "error",
    "resultDigest": "E ImportError",
}


@pytest.mark.parametrize(
    "content",
    [
        EXAMPLE_COPY,
        "Requirement: " + EXAMPLE_COPY.lower(),
        "The user forbids new dependencies and requires Python 3.9.",  # near copy
        "The CLI tests failed with ModuleNotFoundError for click.",
        "These tests already failed because click is missing.",
        "Remove a listed entry that is wrong or obsolete.",  # an instruction
        "A stable fact about the task or a user constraint",
    ],
)
def test_copies_of_the_prompt_are_recognised(content):
    assert default_copy_filter().copied_sentence(content) is not None


@pytest.mark.parametrize(
    "content",
    [
        "The user requires Python 3.8 support for the parser module.",
        "pytest tests/test_x.py failed with ImportError for numpy; numpy is not installed.",
        "Tests pass.",
        "Requirement from the user: do not add dependencies",
    ],
)
def test_real_facts_are_not_copies(content):
    assert default_copy_filter().copied_sentence(content) is None


def test_every_sentence_of_the_worked_examples_is_covered():
    copy = default_copy_filter()
    for example in WORKED_EXAMPLES:
        body = example.split("</operations>")[0]
        for content in [op["content"] for op in json.loads(body[len("<operations>") :])]:
            assert copy.copied_sentence(content) is not None, content
    assert "forbids new dependencies" in POLICY_SYSTEM_PROMPT  # the example above is real


@pytest.mark.parametrize(
    ("status", "done"),
    [
        ("The task is completed.", True),
        ("Task completed successfully", True),
        ("All tests pass now", True),
        ("Success", True),
        ("Test successfully completed!", True),
        ("The task has been completed successfully;", True),
        ("Not done yet: the task is not complete", False),
        ("The parser fix is done; the CLI tests are next", False),
        ("Rerunning the tests after the import change", False),
    ],
)
def test_completion_claims(status, done):
    assert claims_completion(status) is done


def test_unresolved_calls_follow_the_latest_outcome():
    ok_later = {**FAILED, "step": 6, "outcome": "ok"}
    assert unresolved_calls([FAILED]) == ["pytest -q"]
    assert unresolved_calls([FAILED, ok_later]) == []
    assert unresolved_calls([ok_later, FAILED]) == ["pytest -q"]


def test_filter_drops_copies_and_false_completion_only_with_unresolved_failures():
    ops = [
        Operation("save_knowledge", content=EXAMPLE_COPY),
        Operation("update_status", content="The task is completed."),
        Operation("save_procedural", content="pytest -q fails: numpy missing"),
        Operation("delete", id="tm-k-1"),
    ]
    with_failures = filter_operations(ops, unresolved_failures=True)
    assert (with_failures.copies, with_failures.false_completions) == (1, 1)
    assert [op.op for op in with_failures.operations] == ["save_procedural", "delete"]
    healthy = filter_operations(ops, unresolved_failures=False)
    assert healthy.dropped == 1
    assert [op.op for op in healthy.operations] == ["update_status", "save_procedural", "delete"]


async def test_policy_step_drops_copies_and_false_completion_and_counts_them(tmp_path):
    bank = TaskMemoryBank()
    answer = (
        f'<operations>[{{"op":"save_knowledge","content":"{EXAMPLE_COPY}"}},'
        '{"op":"update_status","content":"The task is completed."},'
        '{"op":"save_procedural","content":"pytest -q fails with E ImportError."}]'
        "</operations>\n<no_intervention/>"
    )
    inputs = PolicyInput(task="fix it", trajectory=[FAILED], workspace_root=tmp_path)
    result = await run_task_memory_policy(bank, inputs, ScriptedAnswerClient(answer))
    assert (result.bank_operations, result.dropped_operations) == (1, 2)
    assert bank.status is None and [e.content for e in bank.entries()] == [
        "pytest -q fails with E ImportError."
    ]
    # the same status with no failure in sight (trajectory or rules tier) is kept
    bank = TaskMemoryBank()
    healthy = PolicyInput(task="fix it", trajectory=[{**FAILED, "outcome": "ok"}])
    await run_task_memory_policy(bank, healthy, ScriptedAnswerClient(answer))
    assert bank.status.content == "The task is completed."
    bank = TaskMemoryBank()
    rules_knows = PolicyInput(task="fix it", unresolved_failures=("tm-p-1",))
    await run_task_memory_policy(bank, rules_knows, ScriptedAnswerClient(answer))
    assert bank.status is None


def _shared_prompt(shared_dir) -> tuple[str, str]:
    """SYSTEM and USER of the prompt the shared small-model answers were made with."""
    tree = ast.parse((shared_dir / "model-responses" / "prompts.py.txt").read_text())
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("SYSTEM", "USER"):
                values[node.targets[0].id] = ast.literal_eval(node.value)
    return values["SYSTEM"], values["USER"]


def test_real_small_model_answers_copy_the_example_and_the_filter_drops_each(shared_dir):
    from clio_acp.memory.envelope import parse_envelope

    system, user = _shared_prompt(shared_dir)
    example = system.split("Example answer:\n", 1)[1]
    copy = CopyFilter.from_prompt(system.split("Example answer:", 1)[0], [example])
    copies = kept = done_claims = 0
    for path in sorted((shared_dir / "model-responses").glob("*-[0-9][0-9].txt")):
        parsed = parse_envelope(path.read_text(encoding="utf-8"), reference_text=user)
        # the prompt's trajectory ends with the same command failing twice
        result = filter_operations(parsed.operations, unresolved_failures=True, copy_filter=copy)
        copies += result.copies
        done_claims += result.false_completions
        kept += len(result.operations)
        for op in result.operations:
            assert "tests pass; now writing the docs" not in (op.content or "").lower()
            if op.op == "update_status":
                assert not claims_completion(op.content)
    assert copies == 4  # "Tests pass; now writing the docs." (the prompt's example)
    assert done_claims >= 3  # "Test successfully completed!", "Success", …
    assert kept > 0


# -- §14.4 prefix reuse ---------------------------------------------------------------


async def test_consecutive_steps_share_the_system_prompt_and_the_task_prefix(tmp_path):
    from clio_acp.memory.prompts import POLICY_SYSTEM_PROMPT

    bank = TaskMemoryBank()
    client = ScriptedAnswerClient(
        '<operations>[{"op":"save_procedural","content":"pytest -q fails: E ImportError"}]'
        "</operations>\n<no_intervention/>"
    )
    task = "Fix the failing parser test."
    await run_task_memory_policy(bank, PolicyInput(task=task, trajectory=[FAILED]), client)
    later = {**FAILED, "step": 9}
    await run_task_memory_policy(bank, PolicyInput(task=task, trajectory=[FAILED, later]), client)
    (system_one, user_one, _), (system_two, user_two, _) = client.calls
    assert system_one == system_two == POLICY_SYSTEM_PROMPT
    assert user_one != user_two
    assert user_one.startswith(f"Task:\n{task}\n\n") and user_two.startswith(f"Task:\n{task}\n\n")


# -- what the step says: copies and cut-off reminders --------------------------------

from clio_acp.memory.envelope import parse_envelope  # noqa: E402
from clio_acp.memory.op_filters import reminder_rejection  # noqa: E402
from clio_acp.memory.policy import CompletionAnswer  # noqa: E402


@pytest.mark.parametrize(
    "reminder",
    [
        # real SmolLM2 reminders from replays of the shared runs
        "[tm-k-1] These tests already failed because click is missing; change the import",
        "[tm-p-1] The user forbids new dependencies and requires Python 3.9 compatibility",
        "[tm-k-1] The CLI tests failed with ModuleNotFoundError for click; the test file ",
    ],
)
def test_a_reminder_repeating_the_prompt_is_rejected(reminder):
    assert "policy prompt" in reminder_rejection(reminder, len(reminder))


def test_a_reminder_that_reached_the_grammar_bound_was_cut_off():
    text = "[tm-p-6] The task is now in the status of [tm-p-1] procedural. The task is now ["
    assert "cut off" in reminder_rejection(text, 80, reminder_limit=80)
    assert reminder_rejection("[tm-p-6] Rerun after the fix.", 29, reminder_limit=80) is None
    assert reminder_rejection("[tm-p-6] Rerun after the fix.", 29) is None


def test_a_reminder_of_citations_only_says_nothing():
    parsed = parse_envelope(
        "<operations>[]</operations>\n<context_for_action>[tm-p-c]</context_for_action>"
    )
    assert parsed.reminder is None and "says nothing" in parsed.reminder_error
    parsed = parse_envelope(
        "<operations>[]</operations>\n<context_for_action>[tm-k-1] x</context_for_action>"
    )
    assert parsed.reminder == "[tm-k-1] x" and parsed.reminder_chars == len("[tm-k-1] x")


def test_content_as_long_as_the_bound_is_dropped_as_cut_off():
    ops = [
        Operation("save_knowledge", content="x" * 40),
        Operation("save_knowledge", content="short fact"),
        Operation("delete", id="tm-k-1"),
    ]
    result = filter_operations(ops, unresolved_failures=False, content_limit=40)
    assert result.cut_off == 1 and [op.content for op in result.operations] == ["short fact", None]


class _Bounded(ScriptedAnswerClient):
    """A scripted constrained route: its answers carry the grammar's bounds."""

    async def complete(self, system, user, max_tokens, *, abort, on_usage):
        answer = await super().complete(system, user, max_tokens, abort=abort, on_usage=on_usage)
        return CompletionAnswer(
            answer.text, decoding="grammar", content_limit=30, reminder_limit=30
        )


async def test_policy_gates_what_a_constrained_route_cut_off(tmp_path):
    bank = TaskMemoryBank()
    bank.save("procedural", "pytest -q failed twice", origin="rules")
    cut = "[tm-p-1] The task is now in the s"  # 33 chars >= 30
    answer = (
        '<operations>[{"op":"save_knowledge","content":"' + "y" * 30 + '"}]</operations>\n'
        f"<context_for_action>{cut}</context_for_action>"
    )
    inputs = PolicyInput(task="t", deterministic_trigger=True, workspace_root=tmp_path)
    result = await run_task_memory_policy(bank, inputs, _Bounded(answer))
    assert (result.decision, result.reason) == ("gated", "invalid_reminder")
    assert "cut off" in result.error and result.dropped_operations == 1
    ok = "<operations>[]</operations>\n<context_for_action>[tm-p-1] Fix it.</context_for_action>"
    result = await run_task_memory_policy(bank, inputs, _Bounded(ok))
    assert result.decision == "injected"
