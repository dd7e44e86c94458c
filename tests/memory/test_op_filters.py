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
