"""Spill of oversized tool results and their read-back (seed ``004`` context rules).

Owns the rule (a tool result over 8,192 UTF-8 bytes is stored whole and the model sees
a 500-character preview, a ref and a note on how to read it back), the ref format, and
the two read-back operations (a slice by offset/length of at most 32,768 characters;
a regex search with 200 characters of context and at most 50 matches). Storage is a
:class:`SpillStore` supplied by the caller (the session journal); this module does no
I/O of its own and decides no memory policy.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Protocol

from clio_acp.settings import SPILL_THRESHOLD_BYTES_DEFAULT

PREVIEW_CHARS = 500
"""Seed ``004``: the model sees this many leading characters of a spilled result."""
READ_MAX_CHARS = 32_768
"""Seed ``004``: one read-back returns at most this many characters."""
GREP_CONTEXT_CHARS = 200
"""Seed ``004``: characters of context either side of a read-back grep match."""
GREP_MAX_MATCHES = 50
"""Seed ``004``: a read-back grep returns at most this many matches."""

_REF_RE = re.compile(r"^spill-[0-9a-f]{16}$")


class SpillStore(Protocol):
    """Where whole spilled results live (the journal's ``spills`` table)."""

    async def put_spill(self, session_id: str, ref: str, text: str) -> None:
        """Keep ``text``
        under ``ref``
        for
        ``session_id``
        (the journal's
        spill table)."""

    async def get_spill(self, session_id: str, ref: str) -> str | None:
        """The text spilled
        under ``ref`` in
        ``session_id``, or
        None."""


class SpillError(ValueError):
    """A read-back asked for an unknown ref, a bad range or an invalid pattern."""


@dataclass(frozen=True)
class Spilled:
    """A spilled result: its ``ref``, the full length and the model-visible text."""

    ref: str
    total_chars: int
    total_bytes: int
    visible: str


def needs_spill(text: str, threshold_bytes: int = SPILL_THRESHOLD_BYTES_DEFAULT) -> bool:
    """True when ``text`` is larger than ``threshold_bytes`` UTF-8 bytes."""
    # Cheap check first: chars <= bytes, and 4 bytes per char at most.
    if len(text) > threshold_bytes:
        return True
    if len(text) * 4 <= threshold_bytes:
        return False
    return len(text.encode("utf-8")) > threshold_bytes


def make_ref(session_id: str, tool_call_id: str, text: str) -> str:
    """A stable ref ``spill-<16 hex>`` for one result of one tool call."""
    digest = hashlib.sha256(f"{session_id}\0{tool_call_id}\0".encode())
    digest.update(text.encode("utf-8", "replace"))  # the whole text: no two results share a ref
    return "spill-" + digest.hexdigest()[:16]


def render_preview(ref: str, text: str) -> str:
    """The model-visible stand-in of a spilled result: preview, ref and read-back note."""
    total_bytes = len(text.encode("utf-8"))
    preview = text[:PREVIEW_CHARS]
    return (
        f"{preview}\n"
        f"[output truncated: {len(text)} chars / {total_bytes} bytes in total; "
        f"full result stored as ref {ref}. Read it back with "
        f'read_spill(ref="{ref}", offset=0, length<={READ_MAX_CHARS}) or search it with '
        f'grep_spill(ref="{ref}", pattern="...").]'
    )


async def spill(store: SpillStore, session_id: str, tool_call_id: str, text: str) -> Spilled:
    """Store ``text`` whole in ``store`` and return the preview the model will see."""
    ref = make_ref(session_id, tool_call_id, text)
    await store.put_spill(session_id, ref, text)
    return Spilled(
        ref=ref,
        total_chars=len(text),
        total_bytes=len(text.encode("utf-8")),
        visible=render_preview(ref, text),
    )


def check_ref(ref: str) -> str:
    """Return ``ref`` stripped; raise :class:`SpillError` if it is not a spill ref."""
    ref = (ref or "").strip()
    if not _REF_RE.match(ref):
        raise SpillError(f"not a spill ref: {ref!r} (expected spill-<16 hex>)")
    return ref


def read_slice(text: str, offset: int = 0, length: int = READ_MAX_CHARS) -> str:
    """Characters ``[offset, offset+length)`` of ``text``; length is capped at 32,768.

    Raises :class:`SpillError` for a negative offset or a non-positive length.
    """
    if offset < 0:
        raise SpillError("offset must be >= 0")
    if length <= 0:
        raise SpillError("length must be > 0")
    length = min(length, READ_MAX_CHARS)
    return text[offset : offset + length]


@dataclass(frozen=True)
class SpillMatch:
    offset: int
    """Character offset of the match start in the whole result."""
    excerpt: str


def grep_text(text: str, pattern: str, *, ignore_case: bool = False) -> list[SpillMatch]:
    """Matches of the regex ``pattern`` in ``text`` with 200 chars of context (≤ 50).

    Raises :class:`SpillError` for an invalid regex.
    """
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise SpillError(f"invalid pattern: {exc}") from exc
    matches: list[SpillMatch] = []
    for match in regex.finditer(text):
        start = max(0, match.start() - GREP_CONTEXT_CHARS)
        end = min(len(text), match.end() + GREP_CONTEXT_CHARS)
        matches.append(SpillMatch(offset=match.start(), excerpt=text[start:end]))
        if len(matches) >= GREP_MAX_MATCHES:
            break
    return matches
