"""Canonical timestamps: UTC ISO-8601 with milliseconds and ``Z``, exactly as
JavaScript's ``Date.prototype.toISOString`` writes them (``2026-01-02T03:04:05.678Z``).

Every timestamp the product writes (task bank entries, durable records, telemetry rows,
usage rows, the journal, handoff snapshots) is made and checked here, so the files
move unchanged between clio_acp and the reference implementation (MEMORY_SPEC §6,
§11.13).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

_CANONICAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def format_timestamp(moment: datetime) -> str:
    """``moment`` as a canonical timestamp, truncated to milliseconds. A naive
    datetime is taken as UTC; an aware one is converted to UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    elif moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    if moment.year < 1000:  # strftime's %Y does not pad: keep its text for these
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    # Written directly (~3x faster than strftime: the bank stamps every write with it).
    return (
        f"{moment.year}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
        f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_last_now: tuple[int, str] = (-1, "")
_last_second: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """The current time as a canonical timestamp, formatted once per millisecond (the
    bank writes and telemetry rows of one millisecond share the text; the rules tier
    stamps nearly every tool call). ``datetime.now`` floors the same system clock to
    microseconds, so the millisecond is the one ``format_timestamp(datetime.now(UTC))``
    writes."""
    global _last_now
    ms = time.time_ns() // 1_000_000
    last, text = _last_now
    if ms != last:
        text = millisecond_text(ms)
        _last_now = (ms, text)
    return text


def millisecond_text(ms: int) -> str:
    """``format_timestamp`` of ``ms`` milliseconds after the Unix epoch. Everything
    up to the milliseconds is formatted once per second (the writes of one second
    share it), then the three digits of the millisecond and ``Z`` follow."""
    global _last_second
    second, milli = divmod(ms, 1000)
    known, head = _last_second
    if second != known:
        head = format_timestamp(_UNIX_EPOCH + timedelta(seconds=second))[:-4]
        _last_second = (second, head)
    return f"{head}{milli:03d}Z"


def is_canonical_timestamp(value: object) -> bool:
    """True when ``value`` is a string that survives a ``toISOString`` round trip
    unchanged: offsets (``+00:00``), microseconds, a space for ``T`` and impossible
    dates are all rejected."""
    if not isinstance(value, str) or not _CANONICAL.match(value):
        return False
    try:
        moment = datetime.fromisoformat(value[:-1] + "+00:00")
    except ValueError:
        return False
    return format_timestamp(moment) == value


def parse_timestamp(value: str) -> datetime:
    """The aware UTC datetime a canonical timestamp names. Raises ``ValueError`` for
    anything ``is_canonical_timestamp`` rejects."""
    if not is_canonical_timestamp(value):
        raise ValueError(f"not a canonical UTC timestamp (…sss Z): {value!r}")
    return datetime.fromisoformat(value[:-1] + "+00:00")
