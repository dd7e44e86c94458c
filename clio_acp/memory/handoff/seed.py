"""Discovery of the newest handoff, the resume offer and the explicit seed
(MEMORY_SPEC §7).

Only the **newest** ``handoff-*.md`` counts (never a fallback to an older file); the
offer and the seed do nothing while the memory kill switch is off; seeding dedups
against the bank. Filesystem work is blocking; the ``a*`` coroutines run it in a
worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clio_acp.memory.bank import (
    TaskMemoryBank,
    normalize_content,
)
from clio_acp.memory.handoff.snapshot import (
    HANDOFF_MAX_BYTES,
    HandoffSnapshot,
    parse_handoff_snapshot,
)
from clio_acp.paths import handoffs_dir

__all__ = [
    "HandoffArtifact",
    "HandoffOffer",
    "SeedOutcome",
    "SeedResult",
    "aread_newest_handoff",
    "aseed_from_newest_handoff",
    "handoff_offer",
    "read_newest_handoff",
    "seed_bank",
    "seed_from_newest_handoff",
]


@dataclass(frozen=True)
class HandoffArtifact:
    """The newest handoff file and its valid snapshot."""

    path: Path
    snapshot: HandoffSnapshot


@dataclass(frozen=True)
class HandoffOffer:
    """``{source: basename, count: k+p}`` shown after a resume (§7)."""

    source: str
    count: int


@dataclass(frozen=True)
class SeedResult:
    """Entries imported and entries skipped as duplicates."""

    seeded: int
    skipped: int


@dataclass(frozen=True)
class SeedOutcome:
    """``disabled``, ``not-found`` or ``seeded`` (with counts and the source basename).

    ``rejected`` names the snapshot entries left out as invalid (``knowledge[3]:
    content is 1300 characters (limit 1200)``); they are not counted in ``skipped``
    (duplicates)."""

    status: Literal["disabled", "not-found", "seeded"]
    seeded: int = 0
    skipped: int = 0
    source: str | None = None
    rejected: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The wire shape: ``{status}`` or ``{status, seeded, skipped, source}`` plus
        ``rejected`` (list of strings) when an entry was invalid."""
        if self.status != "seeded":
            return {"status": self.status}
        data: dict[str, Any] = {
            "status": "seeded",
            "seeded": self.seeded,
            "skipped": self.skipped,
            "source": self.source,
        }
        if self.rejected:
            data["rejected"] = list(self.rejected)
        return data


def read_newest_handoff(cwd: str | os.PathLike[str]) -> HandoffArtifact | None:
    """The newest ``<cwd>/.clio-coder/handoffs/handoff-*.md`` (highest mtime, ties by
    path desc) if it is a regular file ≤ 1 MB holding a valid snapshot; else None.
    Never falls back to an older file (§7)."""
    directory = handoffs_dir(Path(cwd))
    candidates: list[tuple[float, str]] = []
    try:
        with os.scandir(directory) as scan:
            for item in scan:
                if item.name.startswith("handoff-") and item.name.endswith(".md"):
                    with contextlib.suppress(OSError):
                        candidates.append((item.stat().st_mtime, item.path))
    except OSError:
        return None
    if not candidates:
        return None
    _, newest = max(candidates)
    path = Path(newest)
    try:
        stat = path.stat()
        if not path.is_file() or stat.st_size > HANDOFF_MAX_BYTES:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    snapshot = parse_handoff_snapshot(text)
    return None if snapshot is None else HandoffArtifact(path, snapshot)


async def aread_newest_handoff(cwd: str | os.PathLike[str]) -> HandoffArtifact | None:
    """``read_newest_handoff()`` in a worker thread."""
    return await asyncio.to_thread(read_newest_handoff, cwd)


def handoff_offer(cwd: str | os.PathLike[str], *, enabled: bool) -> HandoffOffer | None:
    """The resume offer for the newest handoff, or None (kill switch off, none found)."""
    if not enabled:
        return None
    artifact = read_newest_handoff(cwd)
    if artifact is None:
        return None
    return HandoffOffer(artifact.path.name, artifact.snapshot.count)


def additions(bank: TaskMemoryBank, snapshot: HandoffSnapshot) -> list[tuple[str, str]]:
    """(class, normalized content) of each snapshot entry seeding would add to
    ``bank``: dedup by class and exact (normalized) content against the bank and
    earlier entries of the same import (§7). Pure: the bank is not touched."""
    out: list[tuple[str, str]] = []
    for kind, entries in (("knowledge", snapshot.knowledge), ("procedural", snapshot.procedural)):
        seen = {e.content for e in getattr(bank, kind)}
        for entry in entries:
            content = normalize_content(entry.content)
            if content not in seen:
                seen.add(content)
                out.append((kind, content))
    return out


def seed_bank(bank: TaskMemoryBank, snapshot: HandoffSnapshot) -> SeedResult:
    """Import a snapshot into ``bank`` (§7): the :func:`additions`; imported entries get
    new ids and injectionCount 0. Status is never touched."""
    added = additions(bank, snapshot)
    for kind, content in added:
        bank.save(kind, content, origin="seed")
    total = len(snapshot.knowledge) + len(snapshot.procedural)
    return SeedResult(len(added), total - len(added))


def seed_from_newest_handoff(
    bank: TaskMemoryBank, cwd: str | os.PathLike[str], *, enabled: bool
) -> SeedOutcome:
    """``/memory seed``: ``disabled`` when the kill switch is off, ``not-found`` when the
    newest handoff has no valid snapshot, else ``seeded`` with counts (§7)."""
    if not enabled:
        return SeedOutcome("disabled")
    artifact = read_newest_handoff(cwd)
    if artifact is None:
        return SeedOutcome("not-found")
    result = seed_bank(bank, artifact.snapshot)
    return SeedOutcome(
        "seeded", result.seeded, result.skipped, artifact.path.name, artifact.snapshot.rejected
    )


async def aseed_from_newest_handoff(
    bank: TaskMemoryBank, cwd: str | os.PathLike[str], *, enabled: bool
) -> SeedOutcome:
    """``seed_from_newest_handoff()`` with the file read in a worker thread (the bank is
    changed on the calling thread)."""
    if not enabled:
        return SeedOutcome("disabled")
    artifact = await aread_newest_handoff(cwd)
    if artifact is None:
        return SeedOutcome("not-found")
    result = seed_bank(bank, artifact.snapshot)
    return SeedOutcome(
        "seeded", result.seeded, result.skipped, artifact.path.name, artifact.snapshot.rejected
    )
