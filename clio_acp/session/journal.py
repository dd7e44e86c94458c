"""The session journal: SQLite in WAL mode at ``<state>/sessions.sqlite`` (issue 6 item 4).

Owns the on-disk record of every session: a ``sessions`` row (cwd, roots, mode, title,
parent, timestamps, the saved task bank of MEMORY_SPEC §12 item 7), an append-only
``events`` table (prompt, model return with usage, tool call and result, compaction,
reminder, notice, memory step id, turn end — one row each, numbered per session from
1), a ``spills`` table holding whole oversized tool results and a ``workspace_values``
table holding the named text values the model keeps (``agent/text_workspace.py``). The model view and the
replay of a loaded session are projections of these rows (``session/history.py``).

All SQLite work runs on one dedicated worker thread, never on the event loop. The
journal stores and fetches; it does not interpret rows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from clio_acp.timestamps import utc_now

T = TypeVar("T")

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    cwd TEXT NOT NULL,
    extra_roots TEXT NOT NULL DEFAULT '[]',
    mode TEXT NOT NULL DEFAULT 'ask',
    title TEXT,
    parent_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0,
    bank TEXT,
    memory_state TEXT
);
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spills (
    session_id TEXT NOT NULL,
    ref TEXT NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (session_id, ref)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workspace_values (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
"""


class JournalEntry(BaseModel):
    """One journal row. ``type`` names the row kind; ``data`` its payload."""

    model_config = ConfigDict(frozen=True)
    session_id: str
    seq: int
    type: str
    at: str
    data: dict[str, Any] = Field(default_factory=dict)


class SessionRecord(BaseModel):
    """One ``sessions`` row (without the bank, which is fetched on its own)."""

    model_config = ConfigDict(frozen=True)
    id: str
    cwd: str
    extra_roots: list[str] = Field(default_factory=list)
    mode: str = "ask"
    title: str | None = None
    parent_id: str | None = None
    created_at: str
    updated_at: str
    closed: bool = False


class JournalError(RuntimeError):
    """The journal file cannot be opened or written (path in the message)."""


class JournalUnavailable(JournalError):
    """The state folder cannot take writes: ``reason`` is ``full``, ``read-only``,
    ``cannot-open`` or ``io``; the message says what to do, in words a user reads
    (not SQLite's "database or disk is full")."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# SQLite primary result codes (sqlite3.h) the user can act on.
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 8, 10, 13, 14
_JOURNAL_MODE = 0o600  # full transcripts: readable by the user only


def storage_problem(path: Path, exc: BaseException) -> JournalError:
    """The ``JournalError`` to raise for ``exc`` (an ``sqlite3.Error`` or ``OSError``)
    met while using the journal at ``path``: a ``JournalUnavailable`` with a plain
    message when the disk is full, the folder read-only, the file cannot be opened
    or the disk fails; otherwise a ``JournalError`` carrying SQLite's text."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    errno_ = getattr(exc, "errno", None)
    folder = path.parent
    if primary == _SQLITE_FULL or errno_ in (errno.ENOSPC, errno.EDQUOT):
        return JournalUnavailable(
            "full",
            f"cannot save the session: the disk holding {folder} is full. Free some space; "
            "nothing more is saved until then.",
        )
    if primary == _SQLITE_READONLY or errno_ in (errno.EROFS, errno.EACCES, errno.EPERM):
        return JournalUnavailable(
            "read-only",
            f"cannot save the session: {folder} is read-only or not writable by this user. "
            "Make it writable (or point CLIO_ACP_STATE_DIR elsewhere) and start again.",
        )
    if primary == _SQLITE_CANTOPEN:
        return JournalUnavailable(
            "cannot-open",
            f"cannot open the session journal {path}: check that {folder} exists and is writable.",
        )
    if primary == _SQLITE_IOERR:
        return JournalUnavailable("io", f"cannot save the session to {path}: disk error ({exc}).")
    if isinstance(exc, OSError):
        return JournalUnavailable(
            "cannot-open",
            f"cannot use the state folder {folder}: {exc.strerror or exc}. Check that it is "
            "a writable folder (or point CLIO_ACP_STATE_DIR elsewhere).",
        )
    return JournalError(f"journal {path}: {exc}")


def _private_file(path: Path) -> None:
    """Create ``path`` (and chmod an existing one and its WAL files) to 0600: the
    journal holds whole transcripts. SQLite gives -wal/-shm the database's mode."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, _JOURNAL_MODE)
    os.close(fd)
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(candidate, _JOURNAL_MODE)


def _encode_cursor(updated_at: str, session_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([updated_at, session_id]).encode()).decode()


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        updated_at, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return str(updated_at), str(session_id)
    except Exception as exc:
        raise ValueError(f"invalid cursor: {cursor!r}") from exc


def _session_record(row: Sequence[Any]) -> SessionRecord:
    """A ``sessions`` row (columns in ``Journal._COLS`` order) as a record."""
    return SessionRecord(
        id=row[0],
        cwd=row[1],
        extra_roots=json.loads(row[2] or "[]"),
        mode=row[3],
        title=row[4],
        parent_id=row[5],
        created_at=row[6],
        updated_at=row[7],
        closed=bool(row[8]),
    )


def _copy_history(conn: sqlite3.Connection, source_id: str, target_id: str) -> int:
    """Copy the events, spills and workspace values of ``source_id`` into
    ``target_id`` in one transaction; returns the number of events copied."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        cur = conn.execute(
            "INSERT INTO events (session_id, seq, type, at, data) "
            "SELECT ?, seq, type, at, data FROM events WHERE session_id = ?",
            (target_id, source_id),
        )
        conn.execute(
            "INSERT OR IGNORE INTO spills (session_id, ref, content) "
            "SELECT ?, ref, content FROM spills WHERE session_id = ?",
            (target_id, source_id),
        )
        conn.execute(
            "INSERT OR IGNORE INTO workspace_values (session_id, key, value, updated_at) "
            "SELECT ?, key, value, updated_at FROM workspace_values WHERE session_id = ?",
            (target_id, source_id),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return cur.rowcount


def _put_workspace_value(
    conn: sqlite3.Connection,
    session_id: str,
    key: str,
    value: str,
    at: str,
    max_entries: int,
) -> tuple[bool, int | None]:
    """``Journal.workspace_put`` in one transaction on the worker thread."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(
            "SELECT length(value) FROM workspace_values WHERE session_id = ? AND key = ?",
            (session_id, key),
        ).fetchone()
        if row is None:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM workspace_values WHERE session_id = ?", (session_id,)
            ).fetchone()
            if count >= max_entries:
                conn.execute("ROLLBACK")
                return False, None
        conn.execute(
            "INSERT OR REPLACE INTO workspace_values (session_id, key, value, updated_at) "
            "VALUES (?, ?, ?, ?)",
            (session_id, key, value, at),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True, (int(row[0]) if row is not None else None)


def _write_rows(conn: sqlite3.Connection, batch: list[tuple[str, int, str, str, str]]) -> None:
    """Insert a batch of event rows and bump their sessions' ``updated_at``, in one
    transaction (rolled back on any error)."""
    conn.execute("BEGIN")
    try:
        conn.executemany(
            "INSERT INTO events (session_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
            batch,
        )
        latest = {row[0]: row[3] for row in batch}
        conn.executemany(
            "UPDATE sessions SET updated_at = ? WHERE id = ?",
            [(at, session_id) for session_id, at in latest.items()],
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class _BatchedAppends:
    """The journal's appended rows, written in batches off the event loop (issue 18
    item 2): the rows appended in one event-loop tick go to the journal's worker thread
    as one transaction; a failed write is kept and raised once, by the next append or
    flush, and the seqs of its sessions are re-read from the file."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._pending: list[tuple[str, int, str, str, str]] = []
        self._writes: set[asyncio.Future[None]] = set()
        self._failure: JournalError | None = None
        self._scheduled = False

    def add(self, row: tuple[str, int, str, str, str]) -> None:
        """Queue ``(session_id, seq, type, at, data)``; the batch leaves at the end of
        this event-loop tick (or sooner, when another journal call comes first)."""
        self._pending.append(row)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.submit)

    def submit(self) -> None:
        """Hand the rows queued so far to the worker thread as one batch."""
        self._scheduled = False
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        journal = self._journal
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(journal._executor, lambda: _write_rows(journal.conn, batch))
        self._writes.add(future)
        future.add_done_callback(lambda done: self._done(done, batch))

    async def flush(self) -> None:
        """Wait until every queued row is written; raise a failed write (once)."""
        self.submit()
        while self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        self.raise_failure()

    def raise_failure(self) -> None:
        """Raise the :class:`JournalError` of a failed write not reported yet."""
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _done(self, done: asyncio.Future[None], batch: list[Any]) -> None:
        self._writes.discard(done)
        exc = None if done.cancelled() else done.exception()
        if exc is None:
            return
        for session_id in {row[0] for row in batch}:
            self._journal._last_seq.pop(session_id, None)  # re-read from the file next time
        if isinstance(exc, sqlite3.Error):
            exc = storage_problem(self._journal.path, exc)
        if not isinstance(exc, JournalError):
            exc = JournalError(f"journal write failed: {exc}")
        self._failure = exc


class Journal:
    """Async facade over one SQLite connection owned by a worker thread.

    Open with ``await Journal.open(path)``; close with ``await journal.aclose()``.
    Every method raises :class:`JournalError` when SQLite fails.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clio-journal")
        self._conn: sqlite3.Connection | None = None
        # The last seq per session (assigned here, at append time) and the batched
        # writer of appended rows.
        self._last_seq: dict[str, int] = {}
        self._seq_lock = asyncio.Lock()
        self._appends = _BatchedAppends(self)

    @classmethod
    async def open(cls, path: Path) -> Journal:
        """Open (create) the SQLite journal at ``path`` in WAL mode."""
        journal = cls(path)
        await journal._run(journal._open_sync)
        return journal

    def _open_sync(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _private_file(self.path)
            conn = sqlite3.connect(str(self.path), timeout=10.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=OFF")
            conn.executescript(_SCHEMA)
            conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?)",
                (str(SCHEMA_VERSION),),
            )
        except (sqlite3.Error, OSError) as exc:
            raise storage_problem(self.path, exc) from exc
        self._conn = conn

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        self._appends.submit()  # the one worker thread runs work in order: writes first
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except sqlite3.Error as exc:
            raise storage_problem(self.path, exc) from exc

    @property
    def conn(self) -> sqlite3.Connection:
        """The open SQLite connection (``open`` first)."""
        if self._conn is None:
            raise JournalError("journal is closed")
        return self._conn

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        with contextlib.suppress(JournalError):  # reported to appenders already
            await self.flush()
        if self._conn is not None:
            conn = self._conn

            def close() -> None:
                conn.close()

            await self._run(close)
            self._conn = None
        self._executor.shutdown(wait=False)

    # ------------------------------------------------------------------ sessions

    async def create_session(self, record: SessionRecord) -> None:
        """Insert the row of a new session (``record``)."""

        def op() -> None:
            self.conn.execute(
                "INSERT INTO sessions (id, cwd, extra_roots, mode, title, parent_id, created_at, "
                "updated_at, closed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.cwd,
                    json.dumps(record.extra_roots),
                    record.mode,
                    record.title,
                    record.parent_id,
                    record.created_at,
                    record.updated_at,
                    int(record.closed),
                ),
            )

        await self._run(op)

    _COLS = "id, cwd, extra_roots, mode, title, parent_id, created_at, updated_at, closed"

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The ``SessionRecord`` of ``session_id``, or None."""

        def op() -> SessionRecord | None:
            row = self.conn.execute(
                f"SELECT {self._COLS} FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            return _session_record(row) if row else None

        return await self._run(op)

    async def update_session(self, session_id: str, **fields: Any) -> None:
        """Set ``mode``, ``title``, ``closed`` or ``updated_at`` (others are refused)."""
        allowed = {"mode", "title", "closed", "updated_at"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update session fields {sorted(bad)}")
        if not fields:
            return
        cols = ", ".join(f"{k} = ?" for k in fields)
        values = [int(v) if k == "closed" else v for k, v in fields.items()]

        def op() -> None:
            self.conn.execute(f"UPDATE sessions SET {cols} WHERE id = ?", (*values, session_id))

        await self._run(op)

    async def list_sessions(
        self, *, cwd: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> tuple[list[SessionRecord], str | None]:
        """Sessions newest-updated first; ``cursor`` continues a previous page.

        Returns (records, next cursor or None). Raises ``ValueError`` for a bad cursor.
        """
        limit = max(1, min(int(limit), 1000))
        where: list[str] = []
        params: list[Any] = []
        if cwd is not None:
            where.append("cwd = ?")
            params.append(cwd)
        if cursor:
            updated_at, sid = _decode_cursor(cursor)
            where.append("(updated_at < ? OR (updated_at = ? AND id < ?))")
            params += [updated_at, updated_at, sid]
        sql = f"SELECT {self._COLS} FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        params.append(limit + 1)

        def op() -> list[SessionRecord]:
            return [_session_record(r) for r in self.conn.execute(sql, params).fetchall()]

        rows = await self._run(op)
        next_cursor = None
        if len(rows) > limit:
            rows = rows[:limit]
            next_cursor = _encode_cursor(rows[-1].updated_at, rows[-1].id)
        return rows, next_cursor

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session with its events and spills; False if it did not exist."""

        def op() -> bool:
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
                conn.execute("DELETE FROM spills WHERE session_id = ?", (session_id,))
                conn.execute("DELETE FROM workspace_values WHERE session_id = ?", (session_id,))
                cur = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return cur.rowcount > 0

        return await self._run(op)

    async def copy_history(self, source_id: str, target_id: str) -> int:
        """Copy every event, spill and workspace value of ``source_id`` into ``target_id`` (fork).
        Returns the number of events copied."""
        return await self._run(lambda: _copy_history(self.conn, source_id, target_id))

    # ------------------------------------------------------------------ bank

    async def save_bank(
        self,
        session_id: str,
        snapshot: dict[str, Any] | None,
        memory_state: dict[str, Any] | None = None,
    ) -> None:
        """Store the session's task-bank snapshot (MEMORY_SPEC §12 item 7) and,
        optionally, the middleware counters that must survive resume (§12 item 4)."""
        bank = json.dumps(snapshot) if snapshot is not None else None
        state = json.dumps(memory_state) if memory_state is not None else None

        def op() -> None:
            self.conn.execute(
                "UPDATE sessions SET bank = ?, memory_state = COALESCE(?, memory_state) WHERE id = ?",
                (bank, state, session_id),
            )

        await self._run(op)

    async def load_bank(
        self, session_id: str
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(bank snapshot, memory state) saved for the session; (None, None) if none."""

        def op() -> tuple[Any, Any]:
            row = self.conn.execute(
                "SELECT bank, memory_state FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if not row:
                return None, None
            return (json.loads(row[0]) if row[0] else None, json.loads(row[1]) if row[1] else None)

        return await self._run(op)

    # ------------------------------------------------------------------ events

    async def append(self, session_id: str, type_: str, data: dict[str, Any]) -> JournalEntry:
        """Append one row; returns it with its seq (1-based, per session) at once.

        The row is written with the others appended in the same event-loop tick, in
        one transaction on the worker thread (issue 18 item 2): the caller never waits
        for SQLite, and any later journal call runs after the write. A failed write
        raises :class:`JournalError` from the next ``append`` or ``flush``. One live
        process owns a session's rows (the seq is assigned here)."""
        self._appends.raise_failure()
        at = utc_now()
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        seq = await self._next_seq(session_id)
        self._appends.add((session_id, seq, type_, at, payload))
        return JournalEntry(session_id=session_id, seq=seq, type=type_, at=at, data=data)

    async def flush(self) -> None:
        """Wait until every appended row is written. Raises :class:`JournalError`
        for a write that failed (once)."""
        await self._appends.flush()

    async def _next_seq(self, session_id: str) -> int:
        if session_id not in self._last_seq:
            async with self._seq_lock:
                if session_id not in self._last_seq:

                    def op() -> int:
                        row = self.conn.execute(
                            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?",
                            (session_id,),
                        ).fetchone()
                        return int(row[0])

                    self._last_seq[session_id] = await self._run(op)
        self._last_seq[session_id] += 1
        return self._last_seq[session_id]

    async def events(
        self,
        session_id: str,
        *,
        after: int = 0,
        types: Iterable[str] | None = None,
        limit: int | None = None,
    ) -> list[JournalEntry]:
        """Rows of a session with ``seq > after`` in order, optionally filtered by type."""
        sql = "SELECT seq, type, at, data FROM events WHERE session_id = ? AND seq > ?"
        params: list[Any] = [session_id, after]
        type_list = list(types or ())
        if type_list:
            sql += f" AND type IN ({', '.join('?' for _ in type_list)})"
            params += type_list
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))

        def op() -> list[tuple[Any, ...]]:
            return self.conn.execute(sql, params).fetchall()

        rows = await self._run(op)
        return [
            JournalEntry(session_id=session_id, seq=r[0], type=r[1], at=r[2], data=json.loads(r[3]))
            for r in rows
        ]

    async def put_spill(self, session_id: str, ref: str, text: str) -> None:
        """Store one spilled tool output under its reference."""

        def op() -> None:
            self.conn.execute(
                "INSERT OR REPLACE INTO spills (session_id, ref, content) VALUES (?, ?, ?)",
                (session_id, ref, text),
            )

        await self._run(op)

    async def get_spill(self, session_id: str, ref: str) -> str | None:
        """The spilled text of a reference, or None."""

        def op() -> str | None:
            row = self.conn.execute(
                "SELECT content FROM spills WHERE session_id = ? AND ref = ?", (session_id, ref)
            ).fetchone()
            return row[0] if row else None

        return await self._run(op)

    # ------------------------------------------------------------------ workspace values

    async def workspace_put(
        self, session_id: str, key: str, value: str, *, max_entries: int
    ) -> tuple[bool, int | None]:
        """Store ``value`` under ``key`` (a write replaces). Returns (stored, previous
        length in chars or None when the key is new); (False, None) when the key is new
        and the session already holds ``max_entries`` values."""
        at = utc_now()
        return await self._run(
            lambda: _put_workspace_value(self.conn, session_id, key, value, at, max_entries)
        )

    async def workspace_get(self, session_id: str, key: str) -> str | None:
        """The value stored under ``key``, or None."""

        def op() -> str | None:
            row = self.conn.execute(
                "SELECT value FROM workspace_values WHERE session_id = ? AND key = ?",
                (session_id, key),
            ).fetchone()
            return row[0] if row else None

        return await self._run(op)

    async def workspace_list(
        self, session_id: str, *, after: str | None = None, limit: int = 100
    ) -> list[tuple[str, int, str]]:
        """(key, length in chars, updated_at) of the values with ``key > after``, in key
        order, at most ``limit``."""

        def op() -> list[tuple[str, int, str]]:
            rows = self.conn.execute(
                "SELECT key, length(value), updated_at FROM workspace_values "
                "WHERE session_id = ? AND key > ? ORDER BY key LIMIT ?",
                (session_id, after or "", int(limit)),
            ).fetchall()
            return [(str(r[0]), int(r[1]), str(r[2])) for r in rows]

        return await self._run(op)

    async def workspace_delete(self, session_id: str, key: str) -> int | None:
        """Delete ``key``; returns the deleted value's length in chars, None if absent."""

        def op() -> int | None:
            conn = self.conn
            row = conn.execute(
                "DELETE FROM workspace_values WHERE session_id = ? AND key = ? "
                "RETURNING length(value)",
                (session_id, key),
            ).fetchone()
            return int(row[0]) if row else None

        return await self._run(op)

    async def size_bytes(self) -> int:
        """Bytes on disk of the database plus its WAL (after a checkpoint)."""

        def op() -> int:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            total = 0
            for suffix in ("", "-wal"):
                p = Path(str(self.path) + suffix)
                if p.exists():
                    total += p.stat().st_size
            return total

        return await self._run(op)
