"""Telemetry rows and the activity ring of the middleware (MEMORY_SPEC §4, §5)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.memory.middleware import activity
from clio_acp.timestamps import format_timestamp, is_canonical_timestamp, parse_timestamp
from tests.support.bank_ops import apply_bank_ops, bank_ops


def test_row_time_is_the_current_millisecond_formatted_once_per_millisecond():
    for _ in range(2000):  # spans several milliseconds: fresh and memoised texts alike
        before = datetime.now(UTC)
        text = activity._row_time()
        after = datetime.now(UTC)
        assert is_canonical_timestamp(text)
        assert format_timestamp(before) <= text <= format_timestamp(after)
        assert parse_timestamp(text) <= after


def test_the_remembered_row_time_never_lets_a_bad_time_through():
    from clio_acp.memory import telemetry

    good = activity._row_time()
    for value in ("", "2026-02-30T00:00:00.000Z", good[:-1], good + " "):
        assert not telemetry._canonical_at(value)
        assert telemetry._canonical_at(good)  # remembered between the bad ones
    assert telemetry._canonical_at(good)


def _delta_by_definition(before, after):
    """§5 bankDelta as first written: per class, ids added/deleted, and updated when
    content or createdAt differ."""
    result = {}
    for kind in ("status", "knowledge", "procedural"):

        def entries(snapshot, kind=kind):
            if not snapshot:
                return {}
            value = snapshot.get(kind)
            if kind == "status":
                return {value["id"]: value} if value else {}
            return {e["id"]: e for e in value or []}

        old, new = entries(before), entries(after)
        result[kind] = {
            "added": len(new.keys() - old.keys()),
            "deleted": len(old.keys() - new.keys()),
            "updated": sum(
                1
                for k in new.keys() & old.keys()
                if (new[k].get("content"), new[k].get("createdAt"))
                != (old[k].get("content"), old[k].get("createdAt"))
            ),
        }
    return result


_OPS = bank_ops(("save", "update", "delete", "cite", "status"), max_size=8)


@settings(max_examples=40)
@given(_OPS, _OPS, st.booleans())
def test_bank_delta_equals_its_definition(first, second, full_snapshots):
    """On snapshots (``bank_delta``) and on the middleware's delta views
    (``view_delta_counts``), taken at the same moments: the §5 definition's counts."""
    from clio_acp.memory.bank import TaskMemoryBank
    from clio_acp.memory.telemetry import bank_delta, view_delta_counts

    bank = TaskMemoryBank(knowledge_cap=3, procedural_cap=3)

    def counts(delta):
        return tuple(delta[k][c] for k in delta for c in ("added", "updated", "deleted"))

    apply_bank_ops(bank, first)
    before, before_view = bank.snapshot(), bank.delta_view()
    apply_bank_ops(bank, second)
    after, after_view = bank.snapshot(), bank.delta_view()
    expected = _delta_by_definition(before, after)
    assert bank_delta(before, after).model_dump() == expected
    assert bank_delta(None, after).model_dump() == _delta_by_definition(None, after)
    assert view_delta_counts(before_view, after_view) == counts(expected)
    if full_snapshots:  # the middleware's first view is of an empty bank
        empty = TaskMemoryBank().delta_view()
        assert view_delta_counts(empty, after_view) == counts(_delta_by_definition(None, after))
