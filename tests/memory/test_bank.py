"""TaskMemoryBank per MEMORY_SPEC §1."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.memory.bank import (
    TaskMemoryBank,
    estimate_tokens,
    normalize_content,
)
from clio_acp.memory.policy import PolicyInput, ScriptedAnswerClient, run_task_memory_policy
from clio_acp.timestamps import format_timestamp, is_canonical_timestamp
from tests.support.bank_ops import apply_bank_ops, bank_ops


class FakeClock:
    """Advances 1 ms per reading so every write has a distinct timestamp."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


class FrozenClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def make_bank(**kwargs) -> TaskMemoryBank:
    return TaskMemoryBank(clock=FakeClock(), **kwargs)


def test_a_bank_without_a_clock_stamps_writes_with_the_current_millisecond():
    bank = TaskMemoryBank()
    for _ in range(300):  # spans several milliseconds: fresh and remembered texts alike
        before = datetime.now(UTC)
        entry = bank.save("knowledge", "a fact")
        after = datetime.now(UTC)
        assert is_canonical_timestamp(entry.created_at)
        assert format_timestamp(before) <= entry.created_at <= format_timestamp(after)


def test_ids_share_one_counter_across_classes():
    bank = make_bank()
    assert bank.save("knowledge", "a").id == "tm-k-1"
    assert bank.save("procedural", "b").id == "tm-p-2"
    assert bank.update_status("c").id == "tm-s-3"


def test_ids_are_lowercase_base36_after_nine():
    bank = make_bank()
    ids = [bank.save("procedural", f"p{i}").id for i in range(11)]
    assert ids[8] == "tm-p-9"
    assert ids[9] == "tm-p-a"
    assert ids[10] == "tm-p-b"


def test_clear_resets_the_counter_so_ids_repeat():
    bank = make_bank()
    bank.save("knowledge", "a")
    bank.save("knowledge", "b")
    bank.clear()
    assert bank.size == 0
    assert bank.save("knowledge", "c").id == "tm-k-1"


def test_content_is_collapsed_trimmed_and_cut_to_1200():
    assert normalize_content("  a \n\t b  ") == "a b"
    assert len(normalize_content("x" * 1300)) == 1200
    assert normalize_content("x" * 1199 + " y") == "x" * 1199
    with pytest.raises(ValueError):
        normalize_content(" \n ")


def test_update_status_keeps_id_created_at_and_injection_count():
    bank = make_bank()
    first = bank.update_status("one")
    second = bank.update_status("two")
    assert second.id == first.id
    assert second.created_at == first.created_at
    assert second.last_touched_at > first.last_touched_at
    assert second.content == "two"


def test_save_with_id_updates_only_within_its_class():
    bank = make_bank()
    k = bank.save("knowledge", "fact")
    updated = bank.save("knowledge", "fact v2", k.id)
    assert (updated.id, updated.created_at, updated.content) == (k.id, k.created_at, "fact v2")
    with pytest.raises(KeyError, match="not found"):
        bank.save("procedural", "x", k.id)
    with pytest.raises(KeyError, match="not found"):
        bank.save("knowledge", "x", "tm-k-99")


def test_eviction_removes_least_recently_touched_first():
    bank = make_bank(knowledge_cap=2)
    a = bank.save("knowledge", "a")
    b = bank.save("knowledge", "b")
    bank.record_injection([a.id])  # a is now the most recently touched
    bank.save("knowledge", "c")
    assert {e.id for e in bank.knowledge} == {a.id, "tm-k-3"}
    assert bank.get(b.id) is None


def test_eviction_ties_break_by_created_at_then_id():
    clock = FrozenClock()
    bank = TaskMemoryBank(procedural_cap=2, clock=clock)
    bank.save("procedural", "a")
    bank.save("procedural", "b")
    bank.save("procedural", "c")
    # identical timestamps: lowest id goes first
    assert [e.id for e in bank.procedural] == ["tm-p-2", "tm-p-3"]


@pytest.mark.parametrize("cap", [0, -1, 2.5, None, True])
def test_non_positive_integer_cap_falls_back_to_default(cap):
    bank = TaskMemoryBank(knowledge_cap=cap, procedural_cap=cap)
    assert (bank.knowledge_cap, bank.procedural_cap) == (20, 30)


def test_delete_entry_covers_status_and_both_classes():
    bank = make_bank()
    k = bank.save("knowledge", "k")
    p = bank.save("procedural", "p")
    s = bank.update_status("s")
    assert bank.delete_entry(s.id) and bank.status is None
    assert bank.delete_entry(k.id) and bank.delete_entry(p.id)
    assert not bank.delete_entry(k.id)
    assert bank.size == 0


def test_record_injection_dedups_and_ignores_status_and_unknown():
    bank = make_bank()
    k = bank.save("knowledge", "k")
    s = bank.update_status("s")
    bank.record_injection([k.id, k.id, s.id, "tm-k-77"])
    assert bank.get(k.id).injection_count == 1
    assert bank.get(s.id).injection_count == 0
    assert bank.get(k.id).last_touched_at > k.last_touched_at


def test_render_order_is_last_touched_desc_then_knowledge_then_id():
    clock = FrozenClock()
    bank = TaskMemoryBank(clock=clock)
    bank.save("procedural", "p")  # tm-p-1
    bank.save("knowledge", "k")  # tm-k-2
    bank.save("knowledge", "k2")  # tm-k-3
    clock.now += timedelta(seconds=1)
    bank.save("procedural", "newest")  # tm-p-4
    assert bank.render(1000).splitlines() == [
        "- [tm-p-4] procedural: newest",
        "- [tm-k-2] knowledge: k",
        "- [tm-k-3] knowledge: k2",
        "- [tm-p-1] procedural: p",
    ]


def test_render_skips_an_overflowing_entry_and_keeps_walking():
    bank = make_bank()
    bank.save("knowledge", "short")  # oldest: rendered last
    bank.save("knowledge", "x" * 200)
    bank.save("knowledge", "tiny")  # newest
    line_tiny = "- [tm-k-3] knowledge: tiny"
    line_short = "- [tm-k-1] knowledge: short"
    budget = estimate_tokens(line_tiny + "\n" + line_short)
    assert bank.render(budget) == line_tiny + "\n" + line_short


def test_render_budget_counts_the_cumulative_block_with_newlines():
    bank = make_bank()
    bank.save("knowledge", "aaaa")  # "- [tm-k-1] knowledge: aaaa" is 26 chars
    bank.save("knowledge", "bbbb")
    # two lines + one newline = 53 chars -> 14 tokens; 52/4 = 13 would fit without it
    assert len(bank.render(13).splitlines()) == 1
    assert len(bank.render(14).splitlines()) == 2


@pytest.mark.parametrize("budget", [0, -5, float("inf"), float("nan")])
def test_unusable_budget_renders_nothing(budget):
    bank = make_bank()
    bank.save("knowledge", "k")
    assert bank.render(budget) == ""
    assert bank.render_restored_state(budget) == ""


def test_status_is_never_rendered_even_when_asked_for():
    bank = make_bank()
    bank.update_status("secret plan")
    bank.save("knowledge", "k")
    assert "secret plan" not in bank.render(1000, ("status", "knowledge", "procedural"))


def test_restored_state_puts_status_first_then_knowledge_only():
    bank = make_bank()
    bank.save("knowledge", "k")
    bank.save("procedural", "p")
    bank.update_status("working on x")
    assert bank.render_restored_state(1000) == (
        "- [tm-s-3] status: working on x\n- [tm-k-1] knowledge: k"
    )


def test_restored_state_knowledge_gets_budget_minus_status_cost():
    bank = make_bank()
    bank.save("knowledge", "k" * 40)
    bank.update_status("s")
    status_line = "- [tm-s-2] status: s"
    knowledge_cost = estimate_tokens("- [tm-k-1] knowledge: " + "k" * 40)
    budget = estimate_tokens(status_line) + knowledge_cost
    assert bank.render_restored_state(budget).count("\n") == 1
    assert bank.render_restored_state(budget - 1) == status_line


def test_restored_state_falls_back_to_knowledge_when_status_alone_is_too_big():
    bank = make_bank()
    bank.save("knowledge", "k")
    bank.update_status("s" * 400)
    assert bank.render_restored_state(20) == "- [tm-k-1] knowledge: k"


def test_snapshot_orders_by_created_at_and_is_a_deep_copy():
    bank = make_bank()
    bank.save("knowledge", "b")
    bank.save("knowledge", "a")
    bank.update_status("s")
    snap = bank.snapshot()
    assert snap["version"] == 1
    assert [e["id"] for e in snap["knowledge"]] == ["tm-k-1", "tm-k-2"]
    assert snap["status"]["id"] == "tm-s-3"
    assert set(snap["knowledge"][0]) == {
        "id",
        "kind",
        "content",
        "createdAt",
        "lastTouchedAt",
        "injectionCount",
        "origin",
    }
    snap["knowledge"][0]["content"] = "mutated"
    assert bank.get("tm-k-1").content == "b"


def test_restore_keeps_ids_and_continues_the_counter():
    bank = make_bank()
    for i in range(11):
        bank.save("procedural", f"p{i}")  # up to tm-p-b
    snap = bank.snapshot()
    other = make_bank()
    other.restore(snap)
    assert {e.id for e in other.procedural} == {e.id for e in bank.procedural}
    assert other.save("knowledge", "next").id == "tm-k-c"


def test_restore_rejects_a_malformed_snapshot_and_keeps_the_bank():
    bank = make_bank()
    bank.save("knowledge", "keep me")
    with pytest.raises(ValueError):
        bank.restore({"version": 1, "knowledge": [{"id": "tm-k-1"}]})
    with pytest.raises(ValueError):
        bank.restore({"version": 2})
    assert bank.get("tm-k-1").content == "keep me"


@given(
    st.lists(
        st.tuples(st.sampled_from(["knowledge", "procedural", "status"]), st.text(min_size=1)),
        max_size=80,
    )
)
def test_bank_never_exceeds_its_caps(ops):
    bank = TaskMemoryBank(knowledge_cap=5, procedural_cap=7, clock=FakeClock())
    for kind, text in ops:
        try:
            if kind == "status":
                bank.update_status(text)
            else:
                bank.save(kind, text)
        except ValueError:
            continue
        assert len(bank.knowledge) <= 5 and len(bank.procedural) <= 7


# -- regressions from adversarial input ----------------------------------------


T0 = "2026-01-01T00:00:00.000Z"


def _entry(entry_id: str, kind: str, stamp: str = T0) -> dict:
    return {
        "id": entry_id,
        "kind": kind,
        "content": "c",
        "createdAt": stamp,
        "lastTouchedAt": stamp,
        "injectionCount": 0,
    }


def test_lone_surrogate_escape_in_content_is_stored_as_replacement_char():
    answer = (
        '<operations>[{"op":"save_knowledge","content":"x\\ud800y"}]</operations>\n'
        "<no_intervention/>"
    )
    bank = TaskMemoryBank()
    result = asyncio.run(
        run_task_memory_policy(
            bank,
            PolicyInput(task="t", trajectory=[], deterministic_trigger=False, max_tokens=100),
            ScriptedAnswerClient(answer),
        )
    )
    assert result.bank_operations == 1
    assert bank.knowledge[0].content == "x\ufffdy"
    json.dumps(bank.snapshot(), ensure_ascii=False).encode("utf-8")  # must not raise


@pytest.mark.parametrize(
    "snapshot",
    [
        {
            "version": 1,
            "status": _entry("tm-k-1", "status"),
            "knowledge": [_entry("tm-k-1", "knowledge")],
            "procedural": [_entry("tm-k-1", "procedural")],
        },
        {
            "version": 1,
            "status": None,
            "knowledge": [_entry("tm-k-1", "knowledge"), _entry("tm-k-1", "knowledge")],
            "procedural": [],
        },
        {"version": True, "status": None, "knowledge": [], "procedural": []},
        {"version": 1, "status": None, "knowledge": [_entry(5, "knowledge")], "procedural": []},
        {
            "version": 1,
            "status": None,
            "knowledge": [_entry("tm-k-1", "knowledge", "2026-01-01T00:00:00Z")],
            "procedural": [],
        },
    ],
    ids=["id-in-three-classes", "id-twice-in-a-class", "version-true", "int-id", "no-millis"],
)
def test_bank_restore_rejects_a_hostile_snapshot_and_keeps_the_bank(snapshot):
    bank = TaskMemoryBank()
    bank.save("knowledge", "kept")
    before = bank.snapshot()
    with pytest.raises(ValueError):
        bank.restore(snapshot)
    assert bank.snapshot() == before


def test_normalizing_normalized_content_is_a_fixed_point_and_memoised():
    from clio_acp.memory import bank as bank_module

    raw = "Use  API_KEY=sk-live-0123456789abcdef0123456789  in   the fixture."
    once = bank_module.normalize_content(raw)
    assert "[redacted:" in once and "  " not in once
    assert bank_module.normalize_content(once) == once
    assert bank_module._NORMALIZED[once] == once  # handed back without a second redaction


# -- session 4 (hot): fast paths against their definitions ------------------------------


def test_kind_of_equals_the_kind_of_the_copy():
    bank = TaskMemoryBank()
    knowledge = bank.save("knowledge", "the build needs make", origin="rules")
    procedural = bank.save("procedural", "pytest failed 1 time", origin="rules")
    status = bank.update_status("fixing the parser", origin="rules")
    for entry_id in (knowledge.id, procedural.id, status.id, "tm-p-zz", ""):
        copy = bank.get(entry_id)
        assert bank.kind_of(entry_id) == (copy.kind if copy else None)


def test_collapse_whitespace_by_split_matches_the_regex_over_every_code_point():
    import re

    from clio_acp.memory.bank import _WHITESPACE, collapse_whitespace

    for start in range(0, 0x110000, 0x800):
        chunk = "".join(f"a{chr(c)}{chr(c)}b" for c in range(start, start + 0x800))
        assert collapse_whitespace(chunk) == _WHITESPACE.sub(" ", chunk).strip()
    assert re.fullmatch(r"\s", "\u3000") and collapse_whitespace(" \u3000x\x1c") == "x"


def _containers_and_leaves(value, containers, leaves):
    if isinstance(value, dict | list):
        containers.append(value)
        for item in value.values() if isinstance(value, dict) else value:
            _containers_and_leaves(item, containers, leaves)
    else:
        leaves.append(value)


@given(bank_ops())
def test_a_snapshot_shares_nothing_with_the_bank_or_another_snapshot(ops):
    """``snapshot`` builds every dict and list afresh around immutable values, which is
    what the deep copy it used to make guaranteed: changing one snapshot changes
    neither the bank nor a later snapshot."""
    import copy

    bank = TaskMemoryBank(knowledge_cap=3, procedural_cap=3)
    apply_bank_ops(bank, ops)
    first, second = bank.snapshot(), bank.snapshot()
    assert first == second == copy.deepcopy(first)
    containers, leaves = [], []
    _containers_and_leaves(first, containers, leaves)
    _containers_and_leaves(second, containers, leaves)
    assert len({id(c) for c in containers}) == len(containers)  # nothing shared
    assert all(type(v) in (str, int, type(None)) for v in leaves)
    for entry in first["knowledge"] + first["procedural"]:
        entry["content"] = "changed by the reader"
    assert bank.snapshot() == second


def test_an_entry_copy_is_dataclasses_replace_for_every_field():
    """``TaskMemoryEntry.copy`` names each field: a field added later and not copied
    fails here (every field is set to a value of its own first)."""
    import dataclasses

    from clio_acp.memory.bank import TaskMemoryEntry

    entry = TaskMemoryEntry("tm-k-1", "knowledge", "c", "2026-01-01T00:00:00.000Z", "x")
    for number, field in enumerate(dataclasses.fields(TaskMemoryEntry)):
        entry = dataclasses.replace(entry, **{field.name: f"value {number}"})
    copied = entry.copy()
    assert copied is not entry and copied == dataclasses.replace(entry)
    assert dataclasses.astuple(copied) == dataclasses.astuple(entry)


def test_eviction_order_is_touched_then_created_then_id():
    from clio_acp.memory.bank import _EVICTION_ORDER, TaskMemoryEntry

    entries = [
        TaskMemoryEntry(
            "tm-p-2", "procedural", "a", "2026-01-01T00:00:00.001Z", "2026-01-01T00:00:00.005Z"
        ),
        TaskMemoryEntry(
            "tm-p-1", "procedural", "b", "2026-01-01T00:00:00.002Z", "2026-01-01T00:00:00.005Z"
        ),
        TaskMemoryEntry(
            "tm-p-3", "procedural", "c", "2026-01-01T00:00:00.001Z", "2026-01-01T00:00:00.006Z"
        ),
    ]
    for entry in entries:
        assert _EVICTION_ORDER(entry) == (entry.last_touched_at, entry.created_at, entry.id)
    # same touch: the older creation goes first although its id sorts later
    assert min(entries, key=_EVICTION_ORDER).id == "tm-p-2"


@given(
    st.lists(st.sampled_from(["a", " ", "\ud800", "\udfff", "\U0001f600", "é", "\n"])).map("".join)
)
def test_well_formed_text_replaces_exactly_the_lone_surrogates(text):
    from clio_acp.memory import bank

    assert bank.well_formed_text(text) == bank._LONE_SURROGATE.sub("\ufffd", text)
    assert bank.well_formed_text("plain ascii") == "plain ascii"


def _views_by_definition(bank: TaskMemoryBank) -> dict[str, list[tuple[str, tuple[str, str]]]]:
    """``delta_view`` as first written: each class read from its entries, in order."""
    status = bank.status
    views = {"status": [(status.id, (status.content, status.created_at))] if status else []}
    for kind in ("knowledge", "procedural"):
        views[kind] = [(e.id, (e.content, e.created_at)) for e in getattr(bank, kind)]
    return views


_VIEW_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            (
                *("save", "save", "update", "same", "delete", "cite"),
                *("status", "view", "clear", "keep", "restore", "drop_status"),
            )
        ),
        st.integers(0, 7),
    ),
    max_size=30,
)


@settings(max_examples=150)
@given(_VIEW_OPS, st.booleans())
def test_delta_view_is_the_entries_after_any_writes_and_never_changes_once_taken(ops, frozen):
    """The views kept by every write equal the entries read afresh (order included)
    after any history of saves (evicting: caps 2 and 3), rewrites (also to the same
    text), deletions, citations, status writes, clears and restores of an earlier snapshot; and a view
    handed out earlier still reads as it did then."""
    bank = TaskMemoryBank(
        knowledge_cap=2, procedural_cap=3, clock=FrozenClock() if frozen else FakeClock()
    )
    taken: list[tuple[dict, dict]] = []
    kept = bank.snapshot()
    for op, n in ops:
        ids = sorted(bank.ids())
        if op == "save":
            bank.save("knowledge" if n % 2 else "procedural", f"entry {n}", origin="rules")
        elif op == "status":
            bank.update_status(f"status {n % 3}", origin="rules")
        elif op == "clear":
            bank.clear()
        elif op == "keep":
            kept = bank.snapshot()
        elif op == "restore":
            bank.restore(kept)
        elif op == "view":
            view = bank.delta_view()
            taken.append((view, {k: dict(v) for k, v in view.items()}))
        elif ids and op in ("update", "same"):
            entry = bank.get(ids[n % len(ids)])
            if entry.kind != "status":
                text = entry.content if op == "same" else f"changed {n}"
                bank.save(entry.kind, text, entry.id, origin="rules")
        elif ids and op == "delete":
            bank.delete_entry(ids[n % len(ids)])
        elif op == "drop_status" and bank.status is not None:
            bank.delete_entry(bank.status.id)
        elif ids and op == "cite":
            bank.record_injection([ids[n % len(ids)]])
        view = bank.delta_view()
        assert {k: list(v.items()) for k, v in view.items()} == _views_by_definition(bank)
        for earlier, copy in taken:
            assert earlier == copy
