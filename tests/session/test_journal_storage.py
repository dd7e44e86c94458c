"""The journal is private (0600) and a full or read-only state folder gives a clear
``JournalUnavailable`` instead of SQLite's "database or disk is full"."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from clio_acp.session.journal import Journal, JournalUnavailable, SessionRecord

TS = "2026-12-01T00:00:00.000Z"


async def _journal_with_session(path: Path) -> Journal:
    journal = await Journal.open(path)
    await journal.create_session(SessionRecord(id="s1", cwd="/w", created_at=TS, updated_at=TS))
    return journal


async def test_journal_and_its_wal_are_readable_by_the_user_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sessions.sqlite"
    journal = await _journal_with_session(path)
    await journal.append("s1", "prompt", {"text": "hello"})
    for name in ("sessions.sqlite", "sessions.sqlite-wal", "sessions.sqlite-shm"):
        assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name
    await journal.aclose()


async def test_an_existing_world_readable_journal_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    await (await Journal.open(path)).aclose()
    path.chmod(0o644)
    await (await Journal.open(path)).aclose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_full_disk_is_a_clear_notice(tmp_path: Path) -> None:
    journal = await _journal_with_session(tmp_path / "sessions.sqlite")

    def cap() -> None:  # SQLite reports SQLITE_FULL once the page cap is reached
        pages = journal.conn.execute("PRAGMA page_count").fetchone()[0]
        journal.conn.execute(f"PRAGMA max_page_count = {pages}")

    await journal._run(cap)
    with pytest.raises(JournalUnavailable) as caught:  # from append or, batched, flush
        for _ in range(200):
            await journal.append("s1", "prompt", {"text": "x" * 4000})
        await journal.flush()
    assert caught.value.reason == "full"
    assert "is full" in str(caught.value) and "database or disk" not in str(caught.value)
    await journal.aclose()


async def test_read_only_state_is_a_clear_notice(tmp_path: Path) -> None:
    journal = await _journal_with_session(tmp_path / "sessions.sqlite")
    await journal._run(lambda: journal.conn.execute("PRAGMA query_only = 1"))
    with pytest.raises(JournalUnavailable) as caught:
        await journal.append("s1", "prompt", {"text": "x"})
        await journal.flush()  # appends are written in batches
    assert caught.value.reason == "read-only" and "read-only" in str(caught.value)
    await journal.aclose()


async def test_appends_are_batched_in_order_and_a_read_sees_them(tmp_path: Path) -> None:
    journal = await _journal_with_session(tmp_path / "sessions.sqlite")
    entries = [await journal.append("s1", "prompt", {"text": str(i)}) for i in range(50)]
    assert [e.seq for e in entries] == list(range(1, 51))  # assigned at once
    rows = await journal.events("s1")  # a later call runs after the pending write
    assert [(r.seq, r.data["text"]) for r in rows] == [(i + 1, str(i)) for i in range(50)]
    await journal.aclose()
    reopened = await Journal.open(tmp_path / "sessions.sqlite")
    assert (await reopened.append("s1", "prompt", {"text": "next"})).seq == 51
    await reopened.aclose()
