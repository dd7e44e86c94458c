"""Promotion of task-bank entries into durable records, and auto-proposal (MEMORY_SPEC §6).

Owns turning one knowledge or procedural entry (from the live bank or from a v2
handoff snapshot) into an unapproved ``MemoryRecord``: explicit, validated scope
(repo needs an already-canonical key, global an explicit acknowledgement, runtime
and agent an identity the source carries), the redacted lesson with markers
preserved (§8), redaction facts in provenance, and the idempotent id
``mem-`` + sha256(compact JSON)[:16]. Also owns the auto-proposal of entries cited
by an **LLM-tier** injection (repo scope of the session cwd, evidence
``session:<id>``), which the middleware calls fire-and-forget.

It must never approve a record (approval is an operator action, ARCHITECTURE
invariant 3), never promote the private status entry, and never write an
unredacted lesson.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from clio_acp.memory.identity import canonical_repository_identity, is_canonical_repository_key
from clio_acp.memory.records import (
    MemoryRecord,
)
from clio_acp.memory.redact import (
    RedactionTally,
    redact_preserving_markers,
    redact_secrets_text,
)
from clio_acp.memory.store import MemoryStore
from clio_acp.timestamps import format_timestamp, is_canonical_timestamp

__all__ = [
    "PROMOTION_CONFIDENCE",
    "NeedsAcknowledgement",
    "PromotableEntry",
    "PromotionError",
    "PromotionResult",
    "PromotionSource",
    "ProposalOutcome",
    "ScopeSelection",
    "apromote",
    "apropose_injected_entries",
    "make_auto_proposal_hook",
    "promote",
    "promoted_record_id",
    "propose_injected_entries",
    "record_from_promotion",
    "validate_scope",
]

logger = logging.getLogger(__name__)

PROMOTION_CONFIDENCE = 0.6  # MEMORY_SPEC §6: confidence = 0.6
SOURCE_VALUE_MAX_CHARS = 1024  # §6: source values are 1–1024 chars
NAMED_IDENTITY_MAX_CHARS = 256  # §6: runtime/agent keys are 1–256 chars

SourceKind = Literal["task-bank-entry", "handoff-snapshot"]


class PromotionError(ValueError):
    """The promotion request is invalid (scope, source or entry); nothing was written."""


class NeedsAcknowledgement(PromotionError):
    """Global scope was asked for without ``acknowledge_global`` (§6); nothing written."""

    def __init__(self) -> None:
        super().__init__("global scope requires a separate operator acknowledgement")


class PromotableEntry(Protocol):
    """What promotion reads from an entry (``TaskMemoryEntry`` satisfies it)."""

    id: str
    kind: str
    content: str
    created_at: str
    last_touched_at: str


@dataclass(frozen=True)
class ScopeSelection:
    """An operator's explicit scope choice. Build with the class methods."""

    scope: Literal["repo", "global", "runtime", "agent"]
    key: str | None = None
    acknowledge_global: bool = False

    @classmethod
    def repo(cls, repository: str) -> ScopeSelection:
        """Repo scope; ``repository`` must already be a canonical identity."""
        return cls("repo", repository)

    @classmethod
    def global_(cls, *, acknowledge_global: bool) -> ScopeSelection:
        """Global scope; refused unless ``acknowledge_global`` is True."""
        return cls("global", None, acknowledge_global)

    @classmethod
    def runtime(cls, runtime_id: str) -> ScopeSelection:
        """Runtime scope; the id must be among the source's runtime ids."""
        return cls("runtime", runtime_id)

    @classmethod
    def agent(cls, agent_id: str) -> ScopeSelection:
        """Agent scope; the id must be among the source's agent ids."""
        return cls("agent", agent_id)

    @property
    def scope_key(self) -> str:
        """``repo:canonical-path:<k>``, ``global:acknowledged``, ``runtime:<k>``, ``agent:<k>``."""
        if self.scope == "repo":
            return f"repo:canonical-path:{self.key}"
        if self.scope == "global":
            return "global:acknowledged"
        return f"{self.scope}:{self.key}"


@dataclass(frozen=True)
class PromotionSource:
    """Where the entry comes from: the live bank or a v2 handoff snapshot.

    ``redaction`` carries the facts already applied upstream (a handoff render):
    ``(replacement_count, source_fields)``.
    """

    kind: SourceKind
    session_id: str
    evidence_refs: Sequence[str]
    entry: PromotableEntry
    runtime_ids: Sequence[str] = ()
    agent_ids: Sequence[str] = ()
    redaction: tuple[int, Sequence[str]] | None = None


@dataclass(frozen=True)
class PromotionResult:
    """The stored record and whether this call created it (False: it already existed)."""

    record: MemoryRecord
    created: bool


def _holds_no_secret(value: str) -> bool:
    # Identifiers are copied verbatim into the record (key, evidenceRefs, provenance,
    # appliesWhen), never redacted: one that redaction would change is refused (§8).
    return redact_secrets_text(value) == value


def _valid_source_value(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= SOURCE_VALUE_MAX_CHARS
        and value.strip() == value
        and not any(ch in value for ch in "\x00\r\n")
        and _holds_no_secret(value)
    )


def _valid_named_identity(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= NAMED_IDENTITY_MAX_CHARS
        and not any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value)
        and _holds_no_secret(value)
    )


def _validate_source(source: PromotionSource) -> None:
    if source.entry.kind == "status":
        raise PromotionError("private task-memory status cannot be promoted")
    if source.entry.kind not in ("knowledge", "procedural"):
        raise PromotionError("promotion requires a knowledge or procedural task-memory entry")
    if not _valid_source_value(source.session_id):
        raise PromotionError("promotion requires a valid source session id")
    refs = list(source.evidence_refs)
    if not refs or not all(_valid_source_value(ref) for ref in refs):
        raise PromotionError("promotion requires at least one valid source evidence ref")
    if not _valid_source_value(source.entry.id) or not source.entry.content.strip():
        raise PromotionError("promotion requires a valid task-memory entry")
    for value in (*source.runtime_ids, *source.agent_ids):
        if not _valid_named_identity(value):
            raise PromotionError(f"invalid runtime or agent identity {value!r} in the source")
    if source.redaction is not None:
        count, fields = source.redaction
        if not isinstance(count, int) or count < 0:
            raise PromotionError("source redaction count must be a non-negative integer")
        if not all(_valid_source_value(f) for f in fields):
            raise PromotionError("source redaction fields must be valid non-empty strings")


def validate_scope(selection: ScopeSelection, source: PromotionSource) -> ScopeSelection:
    """Check an explicit scope without inferring or widening it (§6).

    Raises ``NeedsAcknowledgement`` for unacknowledged global scope and
    ``PromotionError`` for any other invalid choice.
    """
    if selection.scope == "repo":
        if not selection.key or not is_canonical_repository_key(selection.key):
            message = "repo scope requires an absolute canonical repository identity"
            hint = canonical_repository_identity(selection.key) if selection.key else None
            if hint and hint != selection.key:
                message += f" (the canonical identity of that path is {hint})"
            raise PromotionError(message)
        return selection
    if selection.scope == "global":
        if selection.acknowledge_global is not True:
            raise NeedsAcknowledgement()
        return selection
    if selection.scope in ("runtime", "agent"):
        known = source.runtime_ids if selection.scope == "runtime" else source.agent_ids
        if not _valid_named_identity(selection.key):
            raise PromotionError(
                f"{selection.scope} scope requires a valid {selection.scope} identity"
            )
        if selection.key not in known:
            raise PromotionError(
                f"{selection.scope} identity {selection.key!r} does not match the promotion source"
            )
        return selection
    raise PromotionError(f"unknown promotion scope {selection.scope!r}")


def promoted_record_id(
    *,
    source_kind: str,
    session_id: str,
    entry_id: str,
    entry_kind: str,
    evidence_refs: Iterable[str],
    lesson: str,
    scope_key: str,
) -> str:
    """``mem-`` + sha256(compact JSON)[:16] over exactly these keys in this order (§6)."""
    payload = {
        "sourceKind": source_kind,
        "sessionId": session_id,
        "entryId": entry_id,
        "entryKind": entry_kind,
        "evidenceRefs": sorted(set(evidence_refs)),
        "lesson": lesson,
        "scopeKey": scope_key,
    }
    compact = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return "mem-" + hashlib.sha256(compact.encode("utf-8")).hexdigest()[:16]


def record_from_promotion(
    source: PromotionSource, selection: ScopeSelection, now: datetime | None = None
) -> MemoryRecord:
    """Build (and validate) the unapproved record for ``source`` under ``selection``.

    The lesson is the entry content redacted with markers preserved, whitespace
    collapsed. Raises ``PromotionError``/``NeedsAcknowledgement``; never writes.
    """
    _validate_source(source)
    selection = validate_scope(selection, source)
    tally = RedactionTally()
    lesson = " ".join(redact_preserving_markers(source.entry.content, tally).split())
    prior_count, prior_fields = source.redaction or (0, ())
    source_fields = set(prior_fields)
    if lesson != source.entry.content:
        source_fields.add("content")
    evidence = sorted(set(source.evidence_refs))
    entry = source.entry
    provenance: dict[str, Any] = {
        "sourceKind": source.kind,
        "sourceSessionId": source.session_id,
        "sourceEntryId": entry.id,
        "sourceEntryKind": entry.kind,
        "redaction": {
            "appliedBeforePersistence": True,
            "replacementCount": prior_count + tally.count,
            "sourceFields": sorted(source_fields),
        },
    }
    if is_canonical_timestamp(getattr(entry, "created_at", None)):
        provenance["sourceEntryCreatedAt"] = entry.created_at
    if is_canonical_timestamp(getattr(entry, "last_touched_at", None)):
        provenance["sourceEntryLastTouchedAt"] = entry.last_touched_at
    data: dict[str, Any] = {
        "id": promoted_record_id(
            source_kind=source.kind,
            session_id=source.session_id,
            entry_id=entry.id,
            entry_kind=entry.kind,
            evidence_refs=evidence,
            lesson=lesson,
            scope_key=selection.scope_key,
        ),
        "scope": selection.scope,
        "key": f"promotion:{source.kind}:{source.session_id}:{entry.id}",
        "lesson": lesson,
        "evidenceRefs": evidence,
        "appliesWhen": _applies_when(selection),
        "avoidWhen": [],
        "confidence": PROMOTION_CONFIDENCE,
        "createdAt": format_timestamp(now or datetime.now(UTC)),
        "approved": False,
        "provenance": provenance,
    }
    if selection.scope == "repo":
        data["repository"] = {"kind": "canonical-path", "key": selection.key}
    elif selection.scope in ("runtime", "agent"):
        data[selection.scope] = {"kind": selection.scope, "key": selection.key}
    try:
        return MemoryRecord.model_validate(data)
    except ValueError as exc:  # pydantic.ValidationError is a ValueError
        raise PromotionError(f"promoted memory record invalid: {exc}") from exc


def _applies_when(selection: ScopeSelection) -> list[str]:
    if selection.scope == "repo":
        return [f"repository:canonical-path:{selection.key}"]
    if selection.scope in ("runtime", "agent"):
        return [f"{selection.scope}:{selection.key}"]
    return []


def promote(
    store: MemoryStore,
    source: PromotionSource,
    selection: ScopeSelection,
    now: datetime | None = None,
) -> PromotionResult:
    """Write one proposal (unapproved). Idempotent: an existing id returns
    ``created=False`` and the stored record. Raises ``PromotionError``,
    ``NeedsAcknowledgement`` and the store's errors (corrupt file, cap)."""
    record = record_from_promotion(source, selection, now)
    stored, created = store.add_if_absent(record)
    return PromotionResult(stored, created)


async def apromote(
    store: MemoryStore,
    source: PromotionSource,
    selection: ScopeSelection,
    now: datetime | None = None,
) -> PromotionResult:
    """``promote()`` with the file work in a worker thread."""
    return await asyncio.to_thread(promote, store, source, selection, now)


@dataclass
class ProposalOutcome:
    """Auto-proposal result: stored records (new or existing) and per-entry errors."""

    records: list[MemoryRecord] = field(default_factory=list)
    created: int = 0
    errors: list[str] = field(default_factory=list)
    new_records: list[MemoryRecord] = field(default_factory=list)
    """The records this call created (a subset of ``records``)."""


def propose_injected_entries(
    store: MemoryStore,
    *,
    tier: Literal["rules", "llm"],
    session_id: str | None,
    cwd: str | os.PathLike[str] | None,
    entries: Iterable[PromotableEntry],
    now: datetime | None = None,
) -> ProposalOutcome:
    """Auto-proposal after an ``injected`` step (§6 "Auto-proposal on injection").

    Only ``tier="llm"`` proposes; rules-tier injections return an empty outcome.
    Each knowledge/procedural entry (as it reads in the post-step bank) becomes a
    repo-scoped, unapproved record for the canonical identity of ``cwd`` with
    evidence ``session:<id>``. Nothing is proposed without a session id or a usable
    absolute cwd. Per-entry failures are logged to stderr and listed in ``errors``;
    this function does not raise for them.
    """
    outcome = ProposalOutcome()
    if tier != "llm" or not session_id or cwd is None:
        return outcome
    cwd_text = os.fspath(cwd)
    if not os.path.isabs(cwd_text):
        return outcome
    repository = canonical_repository_identity(cwd_text)
    if repository is None:
        return outcome
    for entry in entries:
        if entry.kind not in ("knowledge", "procedural"):
            continue
        try:
            result = promote(
                store,
                PromotionSource(
                    kind="task-bank-entry",
                    session_id=session_id,
                    evidence_refs=(f"session:{session_id}",),
                    entry=entry,
                ),
                ScopeSelection.repo(repository),
                now,
            )
        except Exception as exc:  # fire-and-forget: report, keep going
            message = f"{entry.id}: {exc}"
            logger.warning("memory auto-proposal failed for %s", message)
            outcome.errors.append(message)
            continue
        outcome.records.append(result.record)
        if result.created:
            outcome.created += 1
            outcome.new_records.append(result.record)
    return outcome


async def apropose_injected_entries(
    store: MemoryStore,
    *,
    tier: Literal["rules", "llm"],
    session_id: str | None,
    cwd: str | os.PathLike[str] | Path | None,
    entries: Iterable[PromotableEntry],
    now: datetime | None = None,
) -> ProposalOutcome:
    """``propose_injected_entries()`` in a worker thread (entries copied first, so a
    later bank change cannot race the write)."""
    snapshot = [_FrozenEntry.of(e) for e in entries]
    return await asyncio.to_thread(
        propose_injected_entries,
        store,
        tier=tier,
        session_id=session_id,
        cwd=cwd,
        entries=snapshot,
        now=now,
    )


@dataclass(frozen=True)
class _FrozenEntry:
    id: str
    kind: str
    content: str
    created_at: str
    last_touched_at: str

    @classmethod
    def of(cls, entry: PromotableEntry) -> _FrozenEntry:
        return cls(entry.id, entry.kind, entry.content, entry.created_at, entry.last_touched_at)


class _BankLike(Protocol):
    def get(self, entry_id: str) -> PromotableEntry | None: ...


def make_auto_proposal_hook(
    store: MemoryStore,
    *,
    bank: Callable[[], _BankLike | None],
    session_id: Callable[[], str | None],
    cwd: Callable[[], str | os.PathLike[str] | None],
    on_proposed: Callable[[list[MemoryRecord]], Any] | None = None,
) -> Callable[[tuple[str, ...]], None]:
    """A ready ``on_injected_entries`` callback for the middleware (§6 auto-proposal).

    The middleware calls it synchronously with the ids an **LLM-tier** injected
    reminder cited (it never calls it for rules-tier reminders or a stale
    generation). The hook reads those entries from the post-step bank *now*, then
    writes the proposals in a worker thread as a background task on the running loop
    (fire-and-forget: errors are logged). ``on_proposed`` gets the newly created
    records, e.g. to emit memory-proposal events. Without a running loop it writes
    synchronously.
    """
    pending: set[asyncio.Task[Any]] = set()

    def hook(cited: tuple[str, ...]) -> None:
        live = bank()
        if live is None:
            return
        entries = [
            _FrozenEntry.of(entry)
            for entry in (live.get(entry_id) for entry_id in dict.fromkeys(cited))
            if entry is not None and entry.kind in ("knowledge", "procedural")
        ]
        if not entries:
            return
        sid, folder = session_id(), cwd()

        def write() -> ProposalOutcome:
            return propose_injected_entries(
                store, tier="llm", session_id=sid, cwd=folder, entries=entries
            )

        def report(outcome: ProposalOutcome) -> None:
            if outcome.new_records and on_proposed is not None:
                try:
                    on_proposed(list(outcome.new_records))
                except Exception:
                    logger.warning("memory proposal callback failed", exc_info=True)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            report(write())
            return

        async def run() -> None:
            try:
                report(await asyncio.to_thread(write))
            except Exception:
                logger.warning("memory auto-proposal failed", exc_info=True)

        task = loop.create_task(run())
        pending.add(task)
        task.add_done_callback(pending.discard)

    return hook
