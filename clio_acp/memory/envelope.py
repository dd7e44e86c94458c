"""The memory model's answer format: the envelope and its tolerant parser (MEMORY_SPEC §2).

Owns the whole §2 pipeline as pure functions over strings: cleaning (reasoning
blocks, markdown fences, boundary chat-template tokens), locating the first
``<operations>``, the string-aware bracket-depth scan that finds the end of the
operation list, strict JSON, batch validation, dropping invented ops and ops whose
stored content fails hygiene, phase two (``<no_intervention/>`` or
``<context_for_action>``), reminder hygiene, and identity repair of the parsed ops
against the ids the bank held *before* the step. It must not touch a bank, call a
model, do I/O or raise on any input: every failure is a typed result
(``ParseResult.failure`` / ``ParseResult.reminder_error``). Applying the resolved
ops and the reminder gates belong to ``clio_acp.memory.policy``.

Typical use::

    parsed = parse_envelope(answer_text, reference_text=user_prompt)
    if parsed.failure is None:
        resolved = resolve_operations(parsed.operations, status_id, knowledge_ids, procedural_ids)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from clio_acp.memory.bank import well_formed_text

__all__ = [
    "CONTENT_MAX_CHARS",
    "MAX_OPERATIONS",
    "REMINDER_MAX_CHARS",
    "Operation",
    "OperationKind",
    "ParseFailure",
    "ParseResult",
    "ResolvedOperations",
    "clean_response",
    "collapse_whitespace",
    "find_operations_end",
    "foreign_scripts",
    "has_control_token",
    "parse_envelope",
    "reminder_rejection",
    "resolve_operations",
    "strip_boundary_tokens",
]

# MEMORY_SPEC §2 step 8: a batch holds at most 8 operations.
MAX_OPERATIONS = 8
# MEMORY_SPEC §2 step 8 (content check) and §1: stored content is at most 1200 chars.
CONTENT_MAX_CHARS = 1200
# MEMORY_SPEC §2 step 11: a cleaned reminder is at most 500 chars.
REMINDER_MAX_CHARS = 500
# MEMORY_SPEC §2 step 11: a reminder's raw body has at most 3 non-empty lines.
REMINDER_MAX_LINES = 3
# MEMORY_SPEC §2 step 11: sentences shorter than this never count as repeats.
REPEAT_MIN_CHARS = 24

OperationKind = Literal["update_status", "save_knowledge", "save_procedural", "delete"]
ParseFailure = Literal["unparseable", "all_operations_invalid"]

OPEN_TAG = "<operations>"
CLOSE_TAG = "</operations>"
CONTEXT_OPEN = "<context_for_action>"
CONTEXT_CLOSE = "</context_for_action>"


@dataclass(frozen=True)
class Operation:
    """One validated memory write, as the model wrote it (before identity repair).

    ``content`` is the model's string unchanged (the bank normalizes whitespace when
    it stores it); ``id`` is the stripped id, or ``None`` when absent.
    """

    op: OperationKind
    content: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class ParseResult:
    """What §2 makes of one answer.

    - ``failure``: ``"unparseable"`` or ``"all_operations_invalid"`` (the bank must
      stay unchanged and phase two is not read), else ``None``.
    - ``operations``: the surviving ops in source order; ``dropped``: ops discarded by
      the grammar (unknown op names, stored-content hygiene).
    - ``reminder``: the cleaned ``context_for_action`` text, or ``None`` for silence
      or a rejected reminder; ``reminder_error`` says why it was rejected
      (``gated``/``invalid_reminder`` in §3).
    - ``error``: a short human-readable reason for ``failure``.
    - ``reminder_chars``: length of the raw ``context_for_action`` body (0 without
      one); a constrained route's length bound is judged against it (§14).
    """

    failure: ParseFailure | None = None
    operations: tuple[Operation, ...] = ()
    dropped: int = 0
    reminder: str | None = None
    reminder_error: str | None = None
    error: str | None = None
    reminder_chars: int = 0

    @property
    def ok(self) -> bool:
        """True when the envelope parsed (no ``failure`` reason, §3 step 5)."""
        return self.failure is None


@dataclass(frozen=True)
class ResolvedOperations:
    """Ops after identity repair against the pre-step bank (§2 "Identity repair").

    ``operations`` are to be applied in order: a save keeps its ``id`` only when it
    names an existing entry of the same class; ``unresolved`` counts the ops dropped
    here — deletes of unknown (or already deleted) ids and the ops refused by §14.2
    — which add to ``droppedOperations``; ``refused`` is the §14.2 part of it.
    """

    operations: tuple[Operation, ...] = ()
    unresolved: int = 0
    refused: int = 0


# ---------------------------------------------------------------------------------
# Cleaning (§2 step 2)

# A reasoning opener starts ``<think``/``<thinking``/``<reasoning``/``<scratchpad``
# (any case); it is complete when the next ``>`` follows directly or after
# whitespace-led attributes. Each block closes at the nearest ``</name\s*>`` of the
# same name (any case). Written as a linear scan: the plain regex
# ``<(name)(?:\s[^>]*)?>.*?</\1\s*>`` is quadratic on a derailed answer that
# repeats openers (e.g. 20000 × ``<think>`` took 47 s).
_REASONING_OPEN_START = re.compile(r"<(thinking|think|reasoning|scratchpad)", re.IGNORECASE)
_REASONING_CLOSE = {
    name: re.compile(rf"</{name}\s*>", re.IGNORECASE)
    for name in ("thinking", "think", "reasoning", "scratchpad")
}
# A markdown fence line: optional spaces or tabs, ``` and the rest of the line.
_FENCE_LINE = re.compile(r"^[ \t]*```[^\n]*(?:\n|$)", re.MULTILINE)


def _remove_reasoning(text: str) -> str:
    """Remove closed reasoning blocks, then everything from a dangling opener on."""
    kept: list[str] = []
    pos = 0  # start of the text not yet copied to ``kept``
    search_at = 0
    while True:
        match = _REASONING_OPEN_START.search(text, search_at)
        if match is None:
            break
        gt = text.find(">", match.end())
        if gt < 0:
            break  # no later opener can complete either
        attributes = text[match.end() : gt]
        if attributes and not attributes[0].isspace():
            search_at = match.start() + 1  # e.g. <thinker>: not a reasoning tag
            continue
        close = _REASONING_CLOSE[match.group(1).lower()].search(text, gt + 1)
        if close is None:
            kept.append(text[pos : match.start()])  # dangling: cut to the end
            return "".join(kept)
        kept.append(text[pos : match.start()])
        pos = search_at = close.end()
    kept.append(text[pos:])
    return "".join(kept)


def clean_response(text: str) -> str:
    """§2 step 2: drop reasoning blocks (closed, then a dangling opener to the end),
    drop markdown fence lines, trim. Linear time; never raises for a ``str``."""
    text = _remove_reasoning(text)
    text = _FENCE_LINE.sub("", text)
    return text.strip()


# ---------------------------------------------------------------------------------
# Control tokens (§2 step 3)

_CONTROL_TOKEN_SRC = (
    r"<\|[A-Za-z0-9_. \-]{1,48}\|>"
    r"|</?s>|<start_of_turn>|<end_of_turn>|<bos>|<eos>|<pad>|<unk>"
    r"|\[/?INST\]|<</?SYS>>"
)
_CONTROL_TOKEN = re.compile(_CONTROL_TOKEN_SRC)
_ENVELOPE_TAG_SRC = r"</?operations>|</?context_for_action>|<no_intervention\s*/?>"
# One pass over the text splits it into control tokens, envelope tags, whitespace
# runs and (between matches) other text.
_BOUNDARY_PIECES = re.compile(rf"(?P<tok>{_CONTROL_TOKEN_SRC})|(?P<tag>{_ENVELOPE_TAG_SRC})|\s+")


def has_control_token(text: str) -> bool:
    """True when ``text`` holds a chat-template control token (§2 step 3's list)."""
    return _CONTROL_TOKEN.search(text) is not None


def strip_boundary_tokens(text: str) -> str:
    """§2 step 3: remove control tokens that sit (ignoring whitespace) directly
    before or after an envelope tag or at the start or end of the text; tokens in
    the middle of text stay so that validation can see them. A run of tokens is
    removed as a whole when one end of it touches a boundary. Returns trimmed text.
    """
    if _CONTROL_TOKEN.search(text) is None:
        return text.strip()
    # pieces: (kind, start, end) with kind in tok | tag | ws | text
    pieces: list[tuple[str, int, int]] = []
    at = 0
    for match in _BOUNDARY_PIECES.finditer(text):
        if match.start() > at:
            pieces.append(("text", at, match.start()))
        kind = "tok" if match.group("tok") else "tag" if match.group("tag") else "ws"
        pieces.append((kind, match.start(), match.end()))
        at = match.end()
    if at < len(text):
        pieces.append(("text", at, len(text)))
    removable = [False] * len(pieces)
    # Left to right: a token whose nearest non-space neighbour on the left is the
    # start, a tag or a removable token is removable; then the same right to left.
    for order in (range(len(pieces)), range(len(pieces) - 1, -1, -1)):
        boundary = True  # the text's start (or end) is a boundary
        for i in order:
            kind = pieces[i][0]
            if kind == "ws":
                continue
            if kind == "tok":
                if boundary:
                    removable[i] = True
                continue  # a token keeps the boundary state of its neighbour
            boundary = kind == "tag"
    return "".join(
        text[start:end]
        for (kind, start, end), drop in zip(pieces, removable, strict=True)
        if not drop
    ).strip()


# ---------------------------------------------------------------------------------
# The operation list (§2 steps 4–7)


# One token of the §2 step 5 scan: a JSON string (``"`` … ``"`` with ``\\`` escapes;
# group 1 is empty when the string never closes) or a bracket. Everything else is
# skipped by ``finditer`` at C speed.
_SCAN_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*("?)|[\[\]{}]', re.DOTALL)


def find_operations_end(text: str, start: int) -> int | None:
    """§2 step 5: the index just after the bracket that closes the list opened at or
    after ``start`` (leading whitespace skipped), or ``None``.

    The first non-space character must be ``[`` or ``{``. ``[``/``{`` add one to the
    depth, ``]``/``}`` subtract one; characters inside JSON strings (with ``\\``
    escapes) are ignored. A negative depth or a list that never closes is ``None``.
    """
    n = len(text)
    i = start
    while i < n and text[i].isspace():
        i += 1
    if i >= n or text[i] not in "[{":
        return None
    depth = 0
    for match in _SCAN_TOKEN.finditer(text, i):
        token = match.group(0)
        if token[0] == '"':
            if not match.group(1):
                return None  # the string runs to the end of the text
            continue
        if token in "[{":
            depth += 1
        else:
            depth -= 1
            if depth < 0:  # pragma: no cover - unreachable: the scan starts at depth 1
                return None
            if depth == 0:
                return match.end()
    return None


def _reject_constant(name: str) -> Any:
    # Strict JSON (§2 step 7): NaN and Infinity are not JSON.
    raise ValueError(f"non-JSON constant {name}")


def _loads_strict(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


# ---------------------------------------------------------------------------------
# Batch validation and stored-content hygiene (§2 step 8)

_WS = re.compile(r"\s+")


def collapse_whitespace(text: str) -> str:
    """Collapse every whitespace run to one space and trim (§1 normalization)."""
    return _WS.sub(" ", text).strip()


# §2 step 8 "Stored-content hygiene": format-deliberation phrases.
_CONTENT_DELIBERATION = re.compile(
    r"exactly two lines|\b(?:valid|ensure|output)\s+json\b|output formatting"
    r"|\bwe need must\b|\bwe did operations\b",
    re.IGNORECASE,
)

# §2 step 8/11: scripts a derailed small model drifts into. Each is checked against
# the reference text (the whole user prompt): a script present there is allowed.
_SCRIPTS: dict[str, re.Pattern[str]] = {
    "cjk": re.compile(
        "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
        "\uff66-\uff9f\U00020000-\U0002fa1f]"
    ),
    "hangul": re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff]"),
    "cyrillic": re.compile("[\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f]"),
    "arabic": re.compile("[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufefc]"),
    "thai": re.compile("[\u0e00-\u0e7f]"),
    "devanagari": re.compile("[\u0900-\u097f\ua8e0-\ua8ff]"),
}


def foreign_scripts(text: str, reference_text: str = "") -> list[str]:
    """Names of the §2 foreign scripts used in ``text`` but absent from
    ``reference_text`` (CJK/kana, Hangul, Cyrillic, Arabic, Thai, Devanagari)."""
    return [
        name
        for name, pattern in _SCRIPTS.items()
        if pattern.search(text) is not None and pattern.search(reference_text) is None
    ]


def _content_ok(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    collapsed = collapse_whitespace(value)
    return 0 < len(collapsed) <= CONTENT_MAX_CHARS


def _id_ok(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


_SAVE_KEYS = ({"op", "content"}, {"op", "content", "id"})


class _BatchInvalid(Exception):
    """Internal: one entry breaks §2 step 8; the whole batch is unparseable."""


def _validate_entry(index: int, entry: Any, reference_text: str) -> Operation | None:
    """One entry of the list: an ``Operation``, ``None`` when it is dropped, or
    ``_BatchInvalid`` when it rejects the whole batch."""
    if not isinstance(entry, dict):
        raise _BatchInvalid(f"operation {index} is not an object")
    op = entry.get("op")
    if not isinstance(op, str):
        raise _BatchInvalid(f"operation {index} has no string op")
    keys = set(entry)
    if op == "update_status":
        if keys != {"op", "content"}:
            raise _BatchInvalid(f"operation {index} (update_status) has keys {sorted(keys)}")
        if not _content_ok(entry["content"]):
            raise _BatchInvalid(f"operation {index} (update_status) fails the content check")
        parsed = Operation(op="update_status", content=entry["content"])
    elif op in ("save_knowledge", "save_procedural"):
        if keys not in _SAVE_KEYS:
            raise _BatchInvalid(f"operation {index} ({op}) has keys {sorted(keys)}")
        if "id" in keys and not _id_ok(entry["id"]):
            raise _BatchInvalid(f"operation {index} ({op}) has a blank or non-string id")
        if not _content_ok(entry["content"]):
            raise _BatchInvalid(f"operation {index} ({op}) fails the content check")
        entry_id = entry["id"].strip() if "id" in keys else None
        parsed = Operation(op=op, content=entry["content"], id=entry_id)  # type: ignore[arg-type]
    elif op == "delete":
        if keys != {"op", "id"}:
            raise _BatchInvalid(f"operation {index} (delete) has keys {sorted(keys)}")
        if not _id_ok(entry["id"]):
            raise _BatchInvalid(f"operation {index} (delete) has a blank or non-string id")
        return Operation(op="delete", id=entry["id"].strip())
    else:
        return None  # an invented op (read, grep, …) is dropped whatever its keys
    content = parsed.content or ""
    if (
        has_control_token(content)
        or _CONTENT_DELIBERATION.search(content)
        or foreign_scripts(content, reference_text)
    ):
        return None  # stored-content hygiene (R): drop the op, keep the batch
    return parsed


# ---------------------------------------------------------------------------------
# Phase two and reminder hygiene (§2 steps 10–11)

_NO_INTERVENTION = re.compile(r"<no_intervention\s*/?>")
_TAG_SHAPE = re.compile(r"</?[A-Za-z][^>]*>")
_ENVELOPE_TAG_SHAPE = re.compile(r"</?\s*(?:operations|context_for_action|no_intervention)\b[^>]*>")
_JSONISH = re.compile(r'\{"|\[\{|"\}|"\]|"\s*:\s*["\[{\d]')
_REMINDER_DELIBERATION = re.compile(
    r"\bwe\s+(?:need|should|must|did|have\s+done)\b"
    r"|\blet['’]s\b|\blet\s+me\b"
    r"|\bI\s+(?:need|should|must|will|think|am\s+asked)\b"
    r"|\bthe\s+(?:task|user|prompt|instructions)\s+(?:ask|say|want|require)s?\b"
    r"|\bbut\s+the\s+task\b"
    r"|\b(?:valid|ensure|output)\s+json\b|output\s+formatting|exactly\s+two\s+lines"
    r"|\bno\s+extra\b|\bmemory\s+agent\b",
    re.IGNORECASE,
)
_SENTENCE_SPLIT = re.compile(r"[.!?](?=\s)|\n")
_CITATION = re.compile(r"\[[^\]]*\]")
_WORD_CHAR = re.compile(r"[^\W_]", re.UNICODE)


def _upto_last_gt(text: str) -> tuple[str, str]:
    """Split after the last ``>``: a tag shape can only end there. Matching tag
    regexes on the head alone keeps them linear (an attempt that finds no ``>``
    would otherwise rescan to the end from every ``<``)."""
    last = text.rfind(">")
    return text[: last + 1], text[last + 1 :]


def _replace_tag_shapes(text: str) -> str:
    head, tail = _upto_last_gt(text)
    return _TAG_SHAPE.sub(" ", head) + tail


def _repeats_a_sentence(body: str) -> bool:
    seen: set[str] = set()
    for piece in _SENTENCE_SPLIT.split(body):
        key = "".join(ch for ch in _CITATION.sub("", piece).lower() if ch.isalnum())
        if len(key) < REPEAT_MIN_CHARS:
            continue
        if key in seen:
            return True
        seen.add(key)
    return False


def reminder_rejection(raw_body: str, cleaned: str, reference_text: str = "") -> str | None:
    """§2 step 11: why a reminder must be rejected (``invalid_reminder``), or ``None``.

    ``raw_body`` is the text between the context tags; ``cleaned`` is the same with
    tag shapes replaced by spaces, whitespace collapsed and trimmed.
    """
    if has_control_token(raw_body):
        return "reminder holds a control token"
    if _ENVELOPE_TAG_SHAPE.search(_upto_last_gt(raw_body)[0]):
        return "reminder holds an envelope tag"
    lines = [line for line in raw_body.splitlines() if line.strip()]
    if len(lines) > REMINDER_MAX_LINES:
        return f"reminder has {len(lines)} non-empty lines (max {REMINDER_MAX_LINES})"
    if len(cleaned) > REMINDER_MAX_CHARS:
        return f"reminder is {len(cleaned)} chars (max {REMINDER_MAX_CHARS})"
    if _JSONISH.search(cleaned):
        return "reminder looks like JSON"
    match = _REMINDER_DELIBERATION.search(cleaned)
    if match:
        return f"reminder deliberates ({match.group(0)!r})"
    scripts = foreign_scripts(cleaned, reference_text)
    if scripts:
        return f"reminder uses a script absent from the prompt ({', '.join(scripts)})"
    if _repeats_a_sentence(_replace_tag_shapes(raw_body)):
        return "reminder repeats a sentence"
    if not _WORD_CHAR.search(_CITATION.sub(" ", cleaned.removeprefix("Memory:"))):
        return "reminder says nothing beyond its citations"
    return None


def _phase_two(after: str, reference_text: str) -> tuple[str | None, str | None, int]:
    """(reminder, rejection, raw body length) from the text after ``</operations>``."""
    ctx = after.find(CONTEXT_OPEN)
    if ctx < 0:
        return None, None, 0
    silence = _NO_INTERVENTION.search(after)
    if silence is not None and silence.start() < ctx:
        return None, None, 0
    body_start = ctx + len(CONTEXT_OPEN)
    close = after.find(CONTEXT_CLOSE, body_start)
    if close < 0:
        return None, "reminder was cut off (no </context_for_action>)", 0
    raw_body = after[body_start:close]
    cleaned = collapse_whitespace(_replace_tag_shapes(raw_body))
    if not cleaned:
        return None, None, len(raw_body)
    rejection = reminder_rejection(raw_body, cleaned, reference_text)
    if rejection is not None:
        return None, rejection, len(raw_body)
    return cleaned, None, len(raw_body)


# ---------------------------------------------------------------------------------
# The pipeline


def parse_envelope(response: Any, reference_text: str = "") -> ParseResult:
    """Parse one memory-model answer per MEMORY_SPEC §2 (steps 1–11). Never raises.

    ``reference_text`` is the whole user prompt the model saw; a foreign script is
    allowed in stored content and reminders only when it occurs there.
    """
    try:
        return _parse(response, reference_text if isinstance(reference_text, str) else "")
    except Exception as exc:  # pragma: no cover - a bug; the contract is "never raises"
        return ParseResult(failure="unparseable", error=f"parser error: {exc!r}")


def _parse(response: Any, reference_text: str) -> ParseResult:
    if not isinstance(response, str) or response == "":
        return ParseResult(failure="unparseable", error="empty or non-text response")
    text = strip_boundary_tokens(clean_response(well_formed_text(response)))
    open_at = text.find(OPEN_TAG)
    if open_at < 0:
        return ParseResult(failure="unparseable", error="no <operations> tag")
    list_start = open_at + len(OPEN_TAG)
    list_end = find_operations_end(text, list_start)
    if list_end is None:
        return ParseResult(failure="unparseable", error="no balanced JSON list after <operations>")
    close_at = text.find(CLOSE_TAG, list_end)
    if close_at < 0:
        return ParseResult(failure="unparseable", error="no </operations> after the list")
    try:
        value = _loads_strict(text[list_start:list_end])
    except (ValueError, RecursionError) as exc:
        return ParseResult(failure="unparseable", error=f"invalid JSON: {exc}")
    if not isinstance(value, list):
        return ParseResult(failure="unparseable", error="operations are not a JSON array")
    if len(value) > MAX_OPERATIONS:
        return ParseResult(
            failure="unparseable",
            error=f"{len(value)} operations (max {MAX_OPERATIONS})",
        )
    operations: list[Operation] = []
    dropped = 0
    try:
        for index, entry in enumerate(value):
            parsed = _validate_entry(index, entry, reference_text)
            if parsed is None:
                dropped += 1
            else:
                operations.append(parsed)
    except _BatchInvalid as exc:
        return ParseResult(failure="unparseable", error=str(exc))
    if not operations and dropped:
        return ParseResult(
            failure="all_operations_invalid",
            dropped=dropped,
            error=f"all {dropped} operation(s) were invalid",
        )
    reminder, rejection, chars = _phase_two(text[close_at + len(CLOSE_TAG) :], reference_text)
    return ParseResult(
        operations=tuple(operations),
        dropped=dropped,
        reminder=reminder,
        reminder_error=rejection,
        reminder_chars=chars,
    )


# ---------------------------------------------------------------------------------
# Identity repair (§2 "Identity repair")

_SAVE_CLASS: dict[str, str] = {"save_knowledge": "knowledge", "save_procedural": "procedural"}


def resolve_operations(
    operations: Iterable[Operation],
    status_id: str | None,
    knowledge_ids: Iterable[str],
    procedural_ids: Iterable[str],
    *,
    protected_ids: Iterable[str] = (),
) -> ResolvedOperations:
    """Repair op identities against the bank as it was *before* the step (§2), and
    refuse the ops that would touch an entry the model did not write (§14.2).

    - ``update_status`` is kept, unless the status id is protected (refused).
    - A save whose id names an entry of the same class is an update — refused when
      that entry is protected; an unknown id, an id of the other class or the status
      id is dropped and the save creates a new entry.
    - A delete of a known id (any class, status included) is kept and the id leaves
      the map (a second delete of it is unresolved); an unknown delete is unresolved;
      a delete of a protected id is refused.
    ``protected_ids`` are the ids whose origin is not ``model`` (rules, seed, user).
    Order is preserved. Pure: the caller applies the result.
    """
    classes: dict[str, str] = {}  # id -> status | knowledge | procedural
    if status_id:
        classes[status_id] = "status"
    for entry_id in knowledge_ids:
        classes[entry_id] = "knowledge"
    for entry_id in procedural_ids:
        classes[entry_id] = "procedural"
    protected = set(protected_ids)
    resolved: list[Operation] = []
    unresolved = refused = 0
    for op in operations:
        target = status_id if op.op == "update_status" else op.id
        if target is not None and target in protected and target in classes:
            if op.op != "update_status" and op.op in _SAVE_CLASS:
                if classes[target] != _SAVE_CLASS[op.op]:
                    # an id of another class never overwrites: a new entry
                    resolved.append(Operation(op=op.op, content=op.content, id=None))
                    continue
            refused += 1
            continue
        if op.op == "update_status":
            resolved.append(op)
        elif op.op in _SAVE_CLASS:
            if op.id is not None and classes.get(op.id) != _SAVE_CLASS[op.op]:
                op = Operation(op=op.op, content=op.content, id=None)
            resolved.append(op)
        elif op.op == "delete":
            if op.id is not None and op.id in classes:
                del classes[op.id]
                resolved.append(op)
            else:
                unresolved += 1
    return ResolvedOperations(
        operations=tuple(resolved), unresolved=unresolved + refused, refused=refused
    )
