"""Memory step telemetry: the content-free ``steps.jsonl`` v2 ledger and the opt-in trace.

Owns the v2 record shape (MEMORY_SPEC §5: exact key set, canonical timestamps, enum
sets that grow with the code), the strict parser, the bank delta that ignores
attribution bumps (§11.5), the best-effort writer with 1 MiB rotation keeping one
``.1`` generation, and the content-bearing trace enabled by ``CLIO_ACP_MEMORY_TRACE``
(§5, §12 names). Rows never hold task, trajectory, bank, error or reminder text;
only the trace does. Writers swallow every error: telemetry must never break a turn.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clio_acp.memory.gates import DECISIONS, REASONS
from clio_acp.memory.redact import redact_json_value
from clio_acp.timestamps import is_canonical_timestamp, utc_now

__all__ = [
    "DECISIONS",
    "NO_WRITES",
    "REASONS",
    "ROTATE_BYTES",
    "TIERS",
    "TRACE_ENV",
    "TRIGGER_REASONS",
    "BankDelta",
    "MemoryTrace",
    "StepCounts",
    "StepFields",
    "StepRecord",
    "TelemetrySink",
    "bank_delta",
    "clear_step_cache",
    "delta_counts",
    "parse_step_line",
    "step_line",
    "step_record",
    "view_delta_counts",
]

log = logging.getLogger(__name__)

# MEMORY_SPEC §5: rotate when the current file is larger than 1 MiB; keep one `.1`.
ROTATE_BYTES = 1_048_576
# MEMORY_SPEC §12 names: the opt-in content trace (reference: CLIO_CODER_MEMORY_TRACE).
TRACE_ENV = "CLIO_ACP_MEMORY_TRACE"
# MEMORY_SPEC §5: trace strings are cut to 8000 chars (true lengths recorded).
TRACE_TEXT_CHARS = 8000

# MEMORY_SPEC §5 trigger set (``idle_review`` is the reference's later addition).
TRIGGER_REASONS: frozenset[str] = frozenset(
    {
        "interval",
        "tool_error_streak",
        "loop_signal",
        "repeated_failure",
        "turn_end",
        "post_compaction",
        "manual",
        "idle_review",
        # MEMORY_SPEC §13 rules tier v2 triggers.
        "unchanged_after_edit",
        "environment",
        "recurring_problem",
        "completion_check",
    }
)
TIERS: frozenset[str] = frozenset({"rules", "llm"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class _Counts(_Strict):
    model_config = ConfigDict(frozen=True)

    added: int = Field(ge=0)
    updated: int = Field(ge=0)
    deleted: int = Field(ge=0)


class BankDelta(_Strict):
    """Per class: entries added, updated (content or createdAt changed), deleted.
    Frozen: one instance is shared by every row with the same counts."""

    model_config = ConfigDict(frozen=True)

    status: _Counts
    knowledge: _Counts
    procedural: _Counts

    @property
    def writes(self) -> int:
        """Entries added, updated and deleted, all classes together."""
        return sum(
            c.added + c.updated + c.deleted for c in (self.status, self.knowledge, self.procedural)
        )


class TokenCost(_Strict):
    """Tokens of one step: input, output and their sum (§5). Frozen: rows with the
    same counts may share one instance."""

    model_config = ConfigDict(frozen=True)

    input: int = Field(ge=0)
    output: int = Field(ge=0)
    total: int = Field(ge=0)

    @model_validator(mode="after")
    def _total(self) -> TokenCost:
        if self.total != self.input + self.output:
            raise ValueError("tokenCost.total must equal input + output")
        return self


_last_canonical_at: str | None = None
# The first 20 characters of that text (longer than any text before one passed).
_last_canonical_second = "\0" * 25
_MILLISECONDS = frozenset(f"{n:03d}Z" for n in range(1000))


def _canonical_at(value: str) -> bool:
    """``is_canonical_timestamp(value)``, remembering the last text that passed: the
    rows of one millisecond carry the same time, checked once. A text that differs
    from one that passed only in its milliseconds (ASCII digits) passes too: its
    date and time of day were checked with them, and any three digits are a
    millisecond that ``toISOString`` writes back unchanged."""
    global _last_canonical_at, _last_canonical_second
    if value == _last_canonical_at:
        return True
    if (
        type(value) is str
        and len(value) == 24
        and value.startswith(_last_canonical_second)
        and value[20:] in _MILLISECONDS
    ):
        _last_canonical_at = value
        return True
    if not is_canonical_timestamp(value):
        return False
    _last_canonical_at = value
    _last_canonical_second = value[:20]
    return True


class StepRecord(_Strict):
    """One ``steps.jsonl`` row, version 2 (MEMORY_SPEC §5), camelCase on disk."""

    version: Literal[2]
    at: str
    trigger_reasons: list[str] = Field(alias="triggerReasons", min_length=1, max_length=3)
    tier: Literal["rules", "llm"]
    bank_delta: BankDelta = Field(alias="bankDelta")
    decision: str
    reason: str
    bank_operations: int = Field(alias="bankOperations", ge=0)
    dropped_operations: int = Field(alias="droppedOperations", ge=0)
    cited_entries: int = Field(alias="citedEntries", ge=0)
    token_cost: TokenCost = Field(alias="tokenCost")
    latency_ms: int | float = Field(alias="latencyMs", ge=0)
    refusal_reason: str | None = Field(default=None, alias="refusalReason")
    target_id: str | None = Field(default=None, alias="targetId", min_length=1, max_length=256)
    model_id: str | None = Field(default=None, alias="modelId", min_length=1, max_length=256)
    decoding: Literal["grammar", "json_schema", "free"] | None = None
    """llm rows only: how the answer was decoded (MEMORY_SPEC §12.9)."""

    @field_validator("at")
    @classmethod
    def _at(cls, value: str) -> str:
        if not _canonical_at(value):
            raise ValueError("at must be a canonical UTC timestamp (…sss Z)")
        return value

    @field_validator("trigger_reasons")
    @classmethod
    def _triggers(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("triggerReasons must be unique")
        unknown = [v for v in value if v not in TRIGGER_REASONS]
        if unknown:
            raise ValueError(f"unknown trigger reason(s): {unknown}")
        return value

    @field_validator("decision")
    @classmethod
    def _decision(cls, value: str) -> str:
        if value not in DECISIONS:
            raise ValueError(f"unknown decision {value!r}")
        return value

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if value not in REASONS:
            raise ValueError(f"unknown reason {value!r}")
        return value

    @field_validator("latency_ms")
    @classmethod
    def _latency(cls, value: float) -> float:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("latencyMs must be finite")
        return value

    @model_validator(mode="after")
    def _pair(self) -> StepRecord:
        if (self.target_id is None) != (self.model_id is None):
            raise ValueError("targetId and modelId come as a pair")
        if self.decoding is not None and self.tier != "llm":
            raise ValueError("decoding is recorded on llm rows only")
        return self

    def to_json(self) -> str:
        """The on-disk line (no newline): camelCase keys, optional keys omitted."""
        return json.dumps(self.model_dump(by_alias=True, exclude_none=True), separators=(",", ":"))


def parse_step_line(line: str) -> StepRecord:
    """Strictly parse one ledger line (§5 "Parser"). Raises ``ValueError`` for invalid
    JSON, unknown keys, v1 rows, non-canonical timestamps, a total that is not
    input + output and values outside the enum sets."""
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: deep nesting
        raise ValueError(f"invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("a step row must be a JSON object")
    from pydantic import ValidationError

    try:
        return StepRecord.model_validate(data)
    except ValidationError as exc:
        raise ValueError(str(exc)) from exc


_DELTA_KINDS = ("status", "knowledge", "procedural")


def _entry_keys(snapshot: dict[str, Any] | None, kind: str) -> dict[str, tuple[Any, Any]]:
    """``{id: (content, createdAt)}`` of one class of a snapshot (what a write changes)."""
    if not snapshot:
        return {}
    value = snapshot.get(kind)
    if kind == "status":
        return {value["id"]: (value.get("content"), value.get("createdAt"))} if value else {}
    return {e["id"]: (e.get("content"), e.get("createdAt")) for e in value or []}


def bank_delta(before: dict[str, Any] | None, after: dict[str, Any] | None) -> BankDelta:
    """Compare two bank snapshots keyed by id (§5 "bankDelta"). An entry is updated
    only when ``content`` or ``createdAt`` differ; injection bumps are not writes."""
    return _delta_of(delta_counts(before, after))


def delta_counts(before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[int, ...]:
    """``bank_delta`` as nine counts: added, updated, deleted of status, knowledge and
    procedural, in that order."""
    return view_delta_counts(_view_of(before), _view_of(after))


def _view_of(snapshot: dict[str, Any] | None) -> dict[str, dict[str, tuple[Any, Any]]]:
    """A snapshot as ``TaskMemoryBank.delta_view`` would read it."""
    return {kind: _entry_keys(snapshot, kind) for kind in _DELTA_KINDS}


def view_delta_counts(
    before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]
) -> tuple[int, ...]:
    """``delta_counts`` of the two snapshots two ``TaskMemoryBank.delta_view`` readings
    stand for (per class ``{id: (content, createdAt)}``): the same nine counts, by
    dict operations instead of walking entry dicts (a class the bank did not change
    is the same dict in both)."""
    counts: list[int] = []
    for kind in _DELTA_KINDS:
        old, new = before[kind], after[kind]
        if old is new or old == new:
            counts += (0, 0, 0)
            continue
        common = new.keys() & old.keys()
        counts += (
            len(new) - len(common),
            sum(1 for key in common if new[key] != old[key]),
            len(old) - len(common),
        )
    return tuple(counts)


@lru_cache(maxsize=256)
def _delta_of(counts: tuple[int, ...]) -> BankDelta:
    """The (frozen, shared) ``BankDelta`` of nine counts (added, updated, deleted per
    class): validated once per distinct counts, not once per row."""
    return BankDelta.model_validate(
        {
            kind: dict(zip(("added", "updated", "deleted"), counts[i * 3 : i * 3 + 3], strict=True))
            for i, kind in enumerate(_DELTA_KINDS)
        }
    )


def empty_delta() -> BankDelta:
    """A bank delta with every count zero."""
    return bank_delta(None, None)


class StepFields(NamedTuple):
    """The values of one v2 row as the middleware has them (§5): snake_case, the
    triggers a tuple, the bank delta as its nine counts (``delta_counts``).
    ``to_row`` is the camelCase row; ``step_record`` validates it."""

    at: str
    trigger_reasons: tuple[str, ...]
    tier: str
    bank_delta: tuple[int, ...]
    decision: str
    reason: str
    bank_operations: int = 0
    dropped_operations: int = 0
    cited_entries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    target_id: str | None = None
    model_id: str | None = None
    decoding: str | None = None

    def to_row(self) -> dict[str, Any]:
        """The v2 row (camelCase; the pair and ``decoding`` only when set — decoding on
        llm rows only), before validation."""
        row: dict[str, Any] = {
            "version": 2,
            "at": self.at,
            "triggerReasons": list(self.trigger_reasons),
            "tier": self.tier,
            "bankDelta": _delta_of(self.bank_delta),  # validated once per counts
            "decision": self.decision,
            "reason": self.reason,
            "bankOperations": self.bank_operations,
            "droppedOperations": self.dropped_operations,
            "citedEntries": self.cited_entries,
            "tokenCost": {
                "input": self.input_tokens,
                "output": self.output_tokens,
                "total": self.input_tokens + self.output_tokens,
            },
            "latencyMs": self.latency_ms,
        }
        if self.target_id and self.model_id:
            row["targetId"], row["modelId"] = self.target_id, self.model_id
        if self.decoding and self.tier == "llm":
            row["decoding"] = self.decoding
        return row


_RECORDS: dict[tuple[Any, ...], StepRecord] = {}
_RECORDS_LIMIT = 1024


NO_WRITES = (0,) * 9
"""The ``delta_counts`` of a row with no bank write (shared: checked by identity)."""
_PLAIN_SHAPES = frozenset(
    (str, tuple, str, tuple, str, str, int, int, int, int, int, float, target, model, decoding)
    for target in (type(None), str)
    for model in (type(None), str)
    for decoding in (type(None), str)
)


def _plain(fields: StepFields) -> bool:
    """Every value is exactly a str, int, float or None where the schema expects
    one: then equal values are equal to the validator (``True == 1``, ``0 == 0.0``
    and str subclasses are not), so a row can stand for every row equal to it."""
    if tuple(map(type, fields)) not in _PLAIN_SHAPES:
        return False
    for trigger in fields.trigger_reasons:
        if type(trigger) is not str:
            return False
    if fields.bank_delta is not NO_WRITES:
        for count in fields.bank_delta:
            if type(count) is not int:
                return False
    return True


def _remembered(fields: StepFields) -> StepRecord | None:
    """The record validated for an earlier row equal to ``fields`` but for ``at``,
    when ``fields`` holds plain values and a canonical ``at`` (``fields`` is then
    valid too); else None. Shared: read it, never change or keep it."""
    if not _plain(fields) or type(fields.at) is not str:
        return None
    template = _RECORDS.get(fields[1:])
    if template is None or not _canonical_at(fields.at):
        return None
    return template


def step_record(fields: StepFields) -> StepRecord:
    """``StepRecord.model_validate(fields.to_row())`` (§5), with the schema run once
    per distinct row apart from its time: a later row equal to a validated one but
    for ``at`` (plain values only, see ``_plain``) is that record with its own
    canonical ``at`` — no other check involves ``at``. Rows share the frozen bank
    delta and token cost; each has its own trigger list. Raises what
    ``model_validate`` raises (a ``ValueError``)."""
    template = _remembered(fields)
    if template is not None:
        return template.model_copy(
            update={"at": fields.at, "trigger_reasons": list(template.trigger_reasons)}
        )
    record = StepRecord.model_validate(fields.to_row())
    if _plain(fields):
        if len(_RECORDS) >= _RECORDS_LIMIT:
            _RECORDS.clear()
            _LINES.clear()
        _RECORDS[fields[1:]] = record.model_copy(
            update={"trigger_reasons": list(record.trigger_reasons)}
        )
        _LINES.pop(fields[1:], None)
    return record


_LINES: dict[tuple[Any, ...], tuple[str, str]] = {}
"""The on-disk line of each remembered record, split around its ``at`` value."""
_LINE_HEAD = '{"version":2,"at":'


def clear_step_cache() -> None:
    """Forget the remembered records and lines (benchmarks start cold)."""
    _RECORDS.clear()
    _LINES.clear()


def step_line(fields: StepFields) -> str:
    """``step_record(fields).to_json()``: for a row equal to a remembered one but for
    its canonical ``at`` (a JSON string needing no escape), the remembered line with
    this ``at``. Raises what ``step_record`` raises."""
    template = _remembered(fields)
    if template is None:
        return step_record(fields).to_json()
    key = fields[1:]
    parts = _LINES.get(key)
    if parts is None:
        text = template.to_json()
        value = json.dumps(template.at)
        if not text.startswith(_LINE_HEAD + value):
            return step_record(fields).to_json()
        parts = (_LINE_HEAD, text[len(_LINE_HEAD) + len(value) :])
        _LINES[key] = parts
    return f'{parts[0]}"{fields.at}"{parts[1]}'


class TelemetrySink:
    """Best-effort appender of v2 rows to ``path`` (``<state>/memory/steps.jsonl``).

    ``emit`` creates the directory, rotates a file larger than 1 MiB to ``.1``
    (replacing an older ``.1``) and appends one line. Every error is logged at
    debug level and swallowed. Appends are one small write; no lock is taken (the
    reference's sink is best effort too)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.rows_written = 0

    @property
    def keeps_rows(self) -> bool:
        """False when rows go nowhere (no path): they are then not even validated."""
        return self.path is not None

    def emit_row(self, row: Mapping[str, Any]) -> None:
        """Validate one v2 row (camelCase keys; the only validation a row gets: the
        §5 schema and the ``gates`` vocabulary) and ``emit`` it. An invalid row is
        logged at debug level and dropped; never raises."""
        if not self.keeps_rows:
            return
        try:
            record = StepRecord.model_validate(row)
        except ValueError:
            log.debug("memory telemetry row rejected", exc_info=True)
            return
        self.emit(record)

    def emit_fields(self, fields: StepFields) -> None:
        """``emit_row(fields.to_row())`` (validated once, by ``step_line``): an
        invalid row is logged at debug level and dropped; never raises."""
        if not self.keeps_rows:
            return
        try:
            line = step_line(fields)
        except ValueError:
            log.debug("memory telemetry row rejected", exc_info=True)
            return
        self._append(line)

    def emit(self, record: StepRecord) -> None:
        """Append ``record`` as one line (rotating first); never raises."""
        if self.path is not None:
            self._append(record.to_json())

    def _append(self, line: str) -> None:
        """Rotate a file past 1 MiB, then append ``line`` (the folder is made when the
        file cannot be opened without it); never raises."""
        path = self.path
        if path is None:
            return
        try:
            try:
                if os.stat(path).st_size > ROTATE_BYTES:
                    os.replace(path, path.with_name(path.name + ".1"))
            except FileNotFoundError:
                pass
            try:
                fd = os.open(path, _APPEND_FLAGS, 0o666)
            except FileNotFoundError:  # no folder (yet, or any more)
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, _APPEND_FLAGS, 0o666)
            try:
                _write_all(fd, (line + "\n").replace("\n", os.linesep).encode("utf-8"))
            finally:
                os.close(fd)
            self.rows_written += 1
        except Exception:  # best effort by contract (§5)
            log.debug("memory telemetry write failed", exc_info=True)


# What ``open(path, "a")`` asks of the system (its file objects cost ~10 µs a row more
# than the bytes written: a live session writes a row at nearly every turn end).
_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` (a short write goes on where it stopped)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


class MemorySinkList(TelemetrySink):
    """An in-memory sink (replay, tests): keeps every row it is given."""

    def __init__(self) -> None:
        super().__init__(None)
        self.rows: list[StepRecord] = []

    @property
    def keeps_rows(self) -> bool:
        """Always: the rows are the point of this sink."""
        return True

    def emit_fields(self, fields: StepFields) -> None:
        """Keep ``step_record(fields)``; an invalid row is logged and dropped."""
        try:
            record = step_record(fields)
        except ValueError:
            log.debug("memory telemetry row rejected", exc_info=True)
            return
        self.emit(record)

    def emit(self, record: StepRecord) -> None:
        """Keep ``record`` in ``rows``."""
        self.rows.append(record)
        self.rows_written += 1


class StepCounts(TelemetrySink):
    """An in-memory sink that keeps only how many rows of each ``decision/reason`` it
    was given (``replay``'s report), in order of first sight. Rows are validated as
    by every sink: an invalid row is dropped, not counted."""

    def __init__(self) -> None:
        super().__init__(None)
        self._counts: dict[tuple[str, str], int] = {}

    @property
    def keeps_rows(self) -> bool:
        """Always: the counts are the point of this sink."""
        return True

    @property
    def counts(self) -> dict[str, int]:
        """``{"decision/reason": rows}``, keys in order of first sight."""
        return {f"{decision}/{reason}": n for (decision, reason), n in self._counts.items()}

    def emit_fields(self, fields: StepFields) -> None:
        """Count a valid row (``step_record``'s verdict; a row equal to one already
        validated but for a canonical ``at`` is not validated again, nor copied)."""
        if _remembered(fields) is None:
            try:
                record = step_record(fields)
            except ValueError:
                log.debug("memory telemetry row rejected", exc_info=True)
                return
            self.emit(record)
            return
        self._count(fields.decision, fields.reason)

    def emit(self, record: StepRecord) -> None:
        """Count ``record``."""
        self._count(record.decision, record.reason)

    def _count(self, decision: str, reason: str) -> None:
        key = (decision, reason)
        self._counts[key] = self._counts.get(key, 0) + 1
        self.rows_written += 1


class MemoryTrace:
    """The opt-in content trace (§5): JSON lines with the reminder, error, model
    response and user prompt (each cut to 8000 chars, true lengths kept) and the
    system prompt length. Enabled when ``CLIO_ACP_MEMORY_TRACE`` names a file; the
    file is truncated when first opened in a process. Values are redacted leaf-wise
    (§8). Best effort: errors are swallowed."""

    _opened: set[str] = set()  # noqa: RUF012 - process-wide by design (§5)
    _lock = threading.Lock()

    def __init__(self, path: Path | None) -> None:
        self.path = path

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> MemoryTrace:
        """The trace named by ``CLIO_ACP_MEMORY_TRACE`` in ``env`` (default: the process
        environment); disabled when unset or blank."""
        value = (env if env is not None else os.environ).get(TRACE_ENV, "").strip()
        return cls(Path(value).expanduser() if value else None)

    @property
    def enabled(self) -> bool:
        """True when a trace file is configured."""
        return self.path is not None

    def write(self, **fields: Any) -> None:
        """Append one redacted trace row with ``fields`` (long texts cut to 8000 chars,
        true lengths kept); never raises."""
        if self.path is None:
            return
        row: dict[str, Any] = {"at": utc_now()}
        for key, value in fields.items():
            if isinstance(value, str) and key in {"reminder", "error", "response", "userPrompt"}:
                row[key] = value[:TRACE_TEXT_CHARS]
                row[key + "Chars"] = len(value)
            else:
                row[key] = value
        try:
            line = json.dumps(redact_json_value(row), ensure_ascii=False)
            with self._lock:
                key = str(self.path)
                mode = "a" if key in self._opened else "w"
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # The trace holds prompt and reminder text: readable by the user only.
                with open(self.path, mode, encoding="utf-8", opener=_private_opener) as handle:
                    os.fchmod(handle.fileno(), 0o600)
                    handle.write(line + "\n")
                self._opened.add(key)
        except Exception:
            log.debug("memory trace write failed", exc_info=True)
