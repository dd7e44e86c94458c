"""The durable memory record schema (MEMORY_SPEC §6), as pydantic models.

Owns the on-disk shape of ``<data>/memory/records.json``: camelCase keys, unknown
fields rejected at every level, canonical timestamps, scope–identity coupling,
provenance rules, and the sort order of the file. It validates and serializes;
it must not read or write files (``store.py``) or decide policy (promotion,
retrieval). Python attributes are snake_case; ``to_json_dict()`` gives the
camelCase dict that goes to disk, with absent optional fields left out.
"""

from __future__ import annotations

import math
import os
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from clio_acp.timestamps import is_canonical_timestamp

__all__ = [
    "MEMORY_RECORDS_VERSION",
    "SCOPE_ORDER",
    "AgentIdentity",
    "MemoryRecord",
    "MemoryScope",
    "Provenance",
    "RecordsFile",
    "RedactionFacts",
    "RepositoryIdentity",
    "RuntimeIdentity",
    "record_sort_key",
    "record_status",
    "sort_records",
]

MEMORY_RECORDS_VERSION = 1  # MEMORY_SPEC §6: {version:1, records:[…]}

# MEMORY_SPEC §6: the scope rank that leads the file's sort key.
SCOPE_ORDER: tuple[str, ...] = (
    "global",
    "repo",
    "language",
    "runtime",
    "agent",
    "task-family",
    "hpc-domain",
)
MemoryScope = Literal["global", "repo", "language", "runtime", "agent", "task-family", "hpc-domain"]

_ID_RE = re.compile(r"^mem-[0-9a-f]{16}$")  # §6: "mem-" + 16 lowercase hex
_NAMED_KEY_BAD = re.compile(r"[\s\x00-\x1f\x7f]")


def _timestamp(value: str) -> str:
    if not is_canonical_timestamp(value):
        raise ValueError("timestamp must be canonical UTC ISO with milliseconds and Z")
    return value


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def _named_key(value: str) -> str:
    # §6: key 1–256 chars, no whitespace or control chars.
    if not 1 <= len(value) <= 256 or _NAMED_KEY_BAD.search(value):
        raise ValueError("identity key must be 1-256 chars with no whitespace or control chars")
    return value


def _canonical_path_key(value: str) -> str:
    # §6: "key absolute and already normalized".
    if any(ch in value for ch in "\x00\r\n"):
        raise ValueError("repository key must not contain NUL, CR or LF")
    if not os.path.isabs(value) or os.path.normpath(value) != value:
        raise ValueError("repository key must be an absolute, normalized path")
    return value


Timestamp = Annotated[str, AfterValidator(_timestamp)]
NonBlank = Annotated[str, AfterValidator(_non_blank)]
NamedKey = Annotated[str, AfterValidator(_named_key)]


class _Model(BaseModel):
    """camelCase on disk, unknown keys rejected, no type coercion, no explicit nulls."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True, frozen=True
    )

    @model_validator(mode="before")
    @classmethod
    def _no_explicit_nulls(cls, data: Any) -> Any:
        # Optional fields are absent, never null: the reference's validator rejects null.
        if isinstance(data, dict):
            for key, value in data.items():
                if value is None:
                    raise ValueError(f"{key}: null is not allowed (omit the field instead)")
        return data

    def to_json_dict(self) -> dict[str, Any]:
        """The camelCase dict written to disk (absent optional fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class RepositoryIdentity(_Model):
    """``repository{kind:"canonical-path", key}``; key absolute and normalized (§6)."""

    kind: Literal["canonical-path"] = "canonical-path"
    key: Annotated[str, AfterValidator(_canonical_path_key)]


class RuntimeIdentity(_Model):
    """``runtime{kind:"runtime", key}`` (§6)."""

    kind: Literal["runtime"] = "runtime"
    key: NamedKey


class AgentIdentity(_Model):
    """``agent{kind:"agent", key}`` (§6)."""

    kind: Literal["agent"] = "agent"
    key: NamedKey


class RedactionFacts(_Model):
    """``provenance.redaction``: what was redacted before the record was persisted."""

    applied_before_persistence: Literal[True] = True
    replacement_count: int = Field(ge=0)
    source_fields: list[NonBlank] = Field(default_factory=list)


class Approval(_Model):
    """``approval{by:"operator", at}``, set by approve (§6 "later versions")."""

    by: Literal["operator"] = "operator"
    at: Timestamp


class Provenance(_Model):
    """Where a record came from (§6). Coupling rules are checked by the validator."""

    source_kind: Literal["evidence", "task-bank-entry", "handoff-snapshot"]
    evidence_id: NonBlank | None = None
    source_session_id: NonBlank | None = None
    source_entry_id: NonBlank | None = None
    source_entry_kind: Literal["knowledge", "procedural"] | None = None
    source_entry_created_at: Timestamp | None = None
    source_entry_last_touched_at: Timestamp | None = None
    redaction: RedactionFacts | None = None

    @model_validator(mode="after")
    def _coupling(self) -> Provenance:
        entry_fields = (
            self.source_entry_id,
            self.source_entry_kind,
            self.source_entry_created_at,
            self.source_entry_last_touched_at,
        )
        if self.source_kind == "evidence":
            if self.evidence_id is None:
                raise ValueError("evidence provenance needs evidenceId")
            if any(value is not None for value in entry_fields):
                raise ValueError("evidence provenance must not carry task-bank entry fields")
        else:
            missing = [
                name
                for name, value in (
                    ("sourceSessionId", self.source_session_id),
                    ("sourceEntryId", self.source_entry_id),
                    ("sourceEntryKind", self.source_entry_kind),
                    ("redaction", self.redaction),
                )
                if value is None
            ]
            if missing:
                raise ValueError(f"{self.source_kind} provenance needs {', '.join(missing)}")
        return self


class MemoryRecord(_Model):
    """One durable memory record (MEMORY_SPEC §6), exactly the reference's fields."""

    id: str = Field(pattern=_ID_RE.pattern)
    scope: MemoryScope
    key: NonBlank
    lesson: NonBlank
    evidence_refs: list[NonBlank] = Field(min_length=1)
    applies_when: list[str]
    avoid_when: list[str]
    confidence: float = Field(ge=0, le=1)
    created_at: Timestamp
    approved: bool
    last_verified_at: Timestamp | None = None
    regressions: list[str] | None = None
    rejected_at: Timestamp | None = None
    approval: Approval | None = None
    repository: RepositoryIdentity | None = None
    runtime: RuntimeIdentity | None = None
    agent: AgentIdentity | None = None
    provenance: Provenance | None = None

    @model_validator(mode="after")
    def _coupling(self) -> MemoryRecord:
        if not math.isfinite(self.confidence):
            raise ValueError("confidence must be finite")
        for scope, identity in (
            ("repo", self.repository),
            ("runtime", self.runtime),
            ("agent", self.agent),
        ):
            field = "repository" if scope == "repo" else scope
            if (self.scope == scope) != (identity is not None):
                raise ValueError(f"scope {scope!r} requires {field}, and {field} requires it")
        if self.approved and self.rejected_at is not None:
            raise ValueError("an approved record cannot carry rejectedAt")
        return self

    @field_serializer("confidence")
    def _confidence_as_json_number(self, value: float) -> float | int:
        # JSON.stringify writes 1 rather than 1.0; keep files byte-compatible.
        return int(value) if value.is_integer() else value

    @property
    def status(self) -> Literal["approved", "rejected", "proposed"]:
        """approved if ``approved``; rejected if ``rejectedAt``; proposed otherwise (§6)."""
        return record_status(self)

    @property
    def verified_at(self) -> str:
        """``lastVerifiedAt ?? createdAt``: the priority and staleness clock (§6)."""
        return self.last_verified_at or self.created_at


class RecordsFile(_Model):
    """The whole file: ``{version:1, records:[…]}`` with unique ids. Both keys are
    required: ``{}`` or ``{"version": true}`` is not a store (§6 "An invalid file
    makes every load throw")."""

    version: Literal[1]
    records: list[MemoryRecord]

    @field_validator("version", mode="before")
    @classmethod
    def _version_is_a_number(cls, value: Any) -> Any:
        # Literal[1] alone admits True (True == 1 in Python); JSON true is no version.
        if isinstance(value, bool):
            raise ValueError("version must be the number 1")
        return value

    @model_validator(mode="after")
    def _unique_ids(self) -> RecordsFile:
        seen: set[str] = set()
        for record in self.records:
            if record.id in seen:
                raise ValueError(f"duplicate record id {record.id}")
            seen.add(record.id)
        return self


def record_status(record: MemoryRecord) -> Literal["approved", "rejected", "proposed"]:
    """The lifecycle status of ``record`` (§6)."""
    if record.approved:
        return "approved"
    if record.rejected_at is not None:
        return "rejected"
    return "proposed"


def record_sort_key(record: MemoryRecord) -> tuple[int, str, str, str]:
    """§6 file order: scope rank, then key, then createdAt, then id (code-point order)."""
    return (SCOPE_ORDER.index(record.scope), record.key, record.created_at, record.id)


def sort_records(records: list[MemoryRecord]) -> list[MemoryRecord]:
    """A new list in the §6 file order."""
    return sorted(records, key=record_sort_key)
