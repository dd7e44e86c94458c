"""The durable record store: ``<data>/memory/records.json`` (MEMORY_SPEC §6).

Owns reading, validating and writing the file. Every write is a read-modify-write
under a cross-process file lock (``filelock``) beside the file, and lands atomically
(``clio_acp.atomic``: temp file in the same folder, fsync, rename, folder fsync), so a
reader or a process killed mid-write only ever sees the old or the new whole file.
A missing file is an empty store; a corrupt or invalid file makes every load and
every write raise ``MemoryStoreCorrupt`` and is never overwritten (ARCHITECTURE
invariant 8). The file is written sorted (§6 order), pretty-printed with a 2-space
indent and a trailing newline, and never holds more than 500 records.

It must not decide lifecycle policy beyond approve/reject/prune primitives, and
it must not be called on an event loop directly: the ``a*`` coroutines run the
blocking work in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import filelock
from pydantic import ValidationError

from clio_acp.atomic import write_atomic
from clio_acp.memory.records import (
    MEMORY_RECORDS_VERSION,
    MemoryRecord,
    RecordsFile,
    sort_records,
)
from clio_acp.timestamps import format_timestamp, is_canonical_timestamp, parse_timestamp

__all__ = [
    "MEMORY_STORE_CAP",
    "MemoryStore",
    "MemoryStoreCorrupt",
    "MemoryStoreError",
    "MemoryStoreLimit",
    "RecordNotFound",
    "is_stale",
]

MEMORY_STORE_CAP = 500  # MEMORY_SPEC §6: cap 500 records
STALE_APPROVED_DAYS = 180  # §6: approved records go stale 180 days after verification
STALE_OTHER_DAYS = 30  # §6: proposed and rejected records after 30 days
LOCK_TIMEOUT_S = 30.0
"""How long a writer waits for another process's lock before giving up, seconds."""

T = TypeVar("T")


class MemoryStoreError(Exception):
    """A store operation failed; the message is meant for the operator."""


class MemoryStoreCorrupt(MemoryStoreError):
    """records.json exists but is not a valid store; it is left untouched."""

    def __init__(self, path: Path, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(
            f"memory store {path} is invalid and was left untouched: {detail} "
            "(fix or move the file; nothing will be written until then)"
        )


class MemoryStoreLimit(MemoryStoreError):
    """A write would exceed the 500-record cap (§6)."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"memory store limit reached ({cap}); run clio-acp memory prune --stale")


class RecordNotFound(MemoryStoreError, KeyError):
    """No record has the requested id."""

    def __init__(self, record_id: str) -> None:
        self.record_id = record_id
        super().__init__(f"memory record not found: {record_id}")

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


def _now() -> datetime:
    return datetime.now(UTC)


def is_stale(record: MemoryRecord, now: datetime) -> bool:
    """§6 staleness: approved records 180 days after ``lastVerifiedAt ?? createdAt``,
    others after 30 days; an unparseable date is stale."""
    stamp = record.verified_at
    if not is_canonical_timestamp(stamp):
        return True
    moment = parse_timestamp(stamp)
    days = STALE_APPROVED_DAYS if record.approved else STALE_OTHER_DAYS
    return now - moment > timedelta(days=days)


def _serialize(records: Iterable[MemoryRecord]) -> str:
    # pydantic-core's pretty printer writes exactly what json.dumps(indent=2,
    # ensure_ascii=False) / JSON.stringify(x, null, 2) write, about 10x faster than
    # the pure-Python indenting encoder (tests pin the layout).
    payload = RecordsFile(version=MEMORY_RECORDS_VERSION, records=sort_records(list(records)))
    return payload.model_dump_json(indent=2, by_alias=True, exclude_none=True) + "\n"


class MemoryStore:
    """records.json at ``path`` (normally ``Paths.records_file``).

    ``clock`` returns the current UTC time (tests pin it). All methods are blocking;
    the ``a``-prefixed coroutines run them in a worker thread.
    """

    def __init__(
        self,
        path: Path,
        *,
        cap: int = MEMORY_STORE_CAP,
        clock: Callable[[], datetime] | None = None,
        lock_timeout_s: float = LOCK_TIMEOUT_S,
    ) -> None:
        self.path = Path(path)
        self.cap = cap
        self._clock = clock or _now
        self._lock = filelock.FileLock(str(self.path) + ".lock", timeout=lock_timeout_s)

    def sweep(self) -> int:
        """Remove temp files that killed writers left (``.records.json.*.tmp``) and
        return how many; called at start. Takes the store lock (no writer can be
        mid-write then); gives up quietly if another process holds it."""
        try:
            with self._lock.acquire(timeout=0.5):
                return self._sweep_stale_temp_files()
        except (filelock.Timeout, OSError):
            return 0

    def _sweep_stale_temp_files(self) -> int:
        # Under the lock: every writer writes its temp file while holding it, so any
        # temp file seen now belongs to a writer that died.
        removed = 0
        for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
                removed += 1
        return removed

    # -- reading -----------------------------------------------------------------

    def load(self) -> list[MemoryRecord]:
        """All records in file order. Missing file → ``[]``.

        Raises ``MemoryStoreCorrupt`` when the file is unreadable, not JSON, or fails
        the schema (the message names the first problem).
        """
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise MemoryStoreCorrupt(self.path, f"cannot read: {exc.strerror or exc}") from exc
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise MemoryStoreCorrupt(self.path, f"not valid JSON ({exc})") from exc
        try:
            parsed = RecordsFile.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "<root>"
            raise MemoryStoreCorrupt(
                self.path, f"{where}: {first['msg']} ({exc.error_count()} problem(s))"
            ) from exc
        return list(parsed.records)

    def get(self, record_id: str) -> MemoryRecord:
        """The record with ``record_id``; raises ``RecordNotFound``."""
        for record in self.load():
            if record.id == record_id:
                return record
        raise RecordNotFound(record_id)

    # -- writing -----------------------------------------------------------------

    def mutate(self, change: Callable[[list[MemoryRecord]], tuple[list[MemoryRecord], T]]) -> T:
        """Read-modify-write under the cross-process lock.

        ``change`` gets the current records and returns ``(new_records, result)``;
        when ``new_records`` is the very list it was given, nothing is written.
        Raises ``MemoryStoreCorrupt`` (nothing written), ``MemoryStoreLimit`` when
        the new list exceeds the cap and is longer than the current one, and ``MemoryStoreError`` when another process
        holds the lock too long or the folder cannot be written (``OSError``).
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock:
                self._sweep_stale_temp_files()
                current = self.load()
                new_records, result = change(current)
                if new_records is current:
                    return result
                # Only growth past the cap is refused: prune, approve and reject must
                # still work on a store that is already over it (written elsewhere).
                if len(new_records) > self.cap and len(new_records) > len(current):
                    raise MemoryStoreLimit(self.cap)
                try:
                    text = _serialize(new_records)
                except ValidationError as exc:  # duplicate ids
                    raise MemoryStoreError(f"refusing to write an invalid store: {exc}") from exc
                write_atomic(self.path, text)
                return result
        except filelock.Timeout as exc:
            raise MemoryStoreError(
                f"memory store {self.path} is locked by another process ({exc.lock_file})"
            ) from exc
        except MemoryStoreError:
            raise
        except OSError as exc:
            raise MemoryStoreError(
                f"cannot write memory store {self.path}: {exc.strerror or exc}"
            ) from exc

    def add_if_absent(self, record: MemoryRecord) -> tuple[MemoryRecord, bool]:
        """Insert ``record`` unless its id exists; returns ``(stored, created)`` (§6
        idempotent promotion: an existing id returns the stored one, ``created=False``)."""

        def change(records: list[MemoryRecord]):
            for existing in records:
                if existing.id == record.id:
                    return records, (existing, False)
            return [*records, record], (record, True)

        return self.mutate(change)

    def update(
        self, record_id: str, transform: Callable[[MemoryRecord], MemoryRecord]
    ) -> MemoryRecord:
        """Replace the record ``record_id`` by ``transform(record)`` (re-validated).
        Raises ``RecordNotFound``."""

        def change(records: list[MemoryRecord]):
            for index, existing in enumerate(records):
                if existing.id == record_id:
                    updated = MemoryRecord.model_validate(transform(existing).to_json_dict())
                    if updated.id != record_id:
                        raise MemoryStoreError("a record update must keep its id")
                    return [*records[:index], updated, *records[index + 1 :]], updated
            raise RecordNotFound(record_id)

        return self.mutate(change)

    def approve(self, record_id: str) -> MemoryRecord:
        """§6 approve: approved=true, lastVerifiedAt=now, approval{operator, now},
        rejectedAt and regressions dropped. Raises ``RecordNotFound``."""
        stamp = format_timestamp(self._clock())

        def approve(record: MemoryRecord) -> MemoryRecord:
            data = record.to_json_dict()
            data.pop("rejectedAt", None)
            data.pop("regressions", None)
            data.update(
                approved=True, lastVerifiedAt=stamp, approval={"by": "operator", "at": stamp}
            )
            return MemoryRecord.model_validate(data)

        return self.update(record_id, approve)

    def reject(self, record_id: str) -> MemoryRecord:
        """§6 reject: approved=false, rejectedAt=now. Raises ``RecordNotFound``."""
        stamp = format_timestamp(self._clock())

        def reject(record: MemoryRecord) -> MemoryRecord:
            data = record.to_json_dict()
            data.pop("approval", None)
            data.update(approved=False, rejectedAt=stamp)
            return MemoryRecord.model_validate(data)

        return self.update(record_id, reject)

    def prune_stale(self) -> list[MemoryRecord]:
        """Remove every stale record (§6 ``prune --stale``); returns the removed ones."""
        now = self._clock()

        def change(records: list[MemoryRecord]):
            removed = [r for r in records if is_stale(r, now)]
            if not removed:
                return records, []
            return [r for r in records if not is_stale(r, now)], removed

        return self.mutate(change)

    # -- async faces ---------------------------------------------------------------

    async def aload(self) -> list[MemoryRecord]:
        """``load()`` in a worker thread."""
        return await asyncio.to_thread(self.load)

    async def aadd_if_absent(self, record: MemoryRecord) -> tuple[MemoryRecord, bool]:
        """``add_if_absent()`` in a worker thread."""
        return await asyncio.to_thread(self.add_if_absent, record)

    async def aapprove(self, record_id: str) -> MemoryRecord:
        """``approve()`` in a worker thread."""
        return await asyncio.to_thread(self.approve, record_id)

    async def areject(self, record_id: str) -> MemoryRecord:
        """``reject()`` in a worker thread."""
        return await asyncio.to_thread(self.reject, record_id)
