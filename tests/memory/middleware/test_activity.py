"""Telemetry rows and the activity ring of the middleware (MEMORY_SPEC §4, §5)."""

from __future__ import annotations

from datetime import UTC, datetime

from clio_acp.memory.middleware import activity
from clio_acp.timestamps import format_timestamp, is_canonical_timestamp, parse_timestamp


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
