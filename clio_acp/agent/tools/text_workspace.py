"""The named text workspace: values the model chooses to keep, by key, per session.

Owns the four tools (``workspace_write``, ``workspace_read``, ``workspace_list``,
``workspace_delete``; seed 004, Tardigrade's ``Workspace`` plus delete), their limits
(a read returns at most 32,768 characters from an offset; a list page at most 100
keys with a cursor; keys of 1–200 characters; values of at most 1,000,000
characters; 1,000 values per session), their errors (an unknown key, an offset past
the end, a bad cursor), and the redaction of every value before it is stored (§8,
markers preserved). Storage is a :class:`WorkspaceValueStore` supplied by the caller
(the session journal, so values survive compaction, load and resume). This is
explicit, model-chosen retention: distinct from spill (automatic, ``context/spill``)
and from the task bank (the memory middleware's). It does no I/O of its own.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from clio_acp.agent.tools.results import ToolResult, ok_result
from clio_acp.agent.tools.spec import ToolContext, ToolInputError, ToolSpec
from clio_acp.memory.redact import RedactionTally, redact_preserving_markers, redact_secrets_text

__all__ = [
    "KEY_MAX_CHARS",
    "LIST_MAX_ENTRIES",
    "READ_MAX_CHARS",
    "SESSION_MAX_ENTRIES",
    "VALUE_MAX_CHARS",
    "WORKSPACE_TOOLS",
    "WorkspaceValueStore",
    "check_key",
    "decode_cursor",
    "encode_cursor",
]

READ_MAX_CHARS = 32_768
"""Seed 004 (Tardigrade ``Workspace``): maxChars, characters one read returns."""
LIST_MAX_ENTRIES = 100
"""Seed 004 (Tardigrade ``Workspace``): maxEntries, keys one list page returns."""
KEY_MAX_CHARS = 200
VALUE_MAX_CHARS = 1_000_000
"""One value's size cap, characters (a bound on what the journal keeps per write)."""
SESSION_MAX_ENTRIES = 1_000
"""Values one session may hold; a write of a new key beyond it is an error."""
_CURSOR_PREFIX = "ws1."


class WorkspaceValueStore(Protocol):
    """Where values live (the journal's ``workspace_values`` table)."""

    async def workspace_put(
        self, session_id: str, key: str, value: str, *, max_entries: int
    ) -> tuple[bool, int | None]:
        """Store ``value`` under ``key`` for ``session_id``; returns
        ``(stored, previous_size)`` (``stored`` False when a new
        key would exceed ``max_entries``)."""

    async def workspace_get(self, session_id: str, key: str) -> str | None:
        """The value of
        ``key`` in
        ``session_id``'s
        workspace, or
        None."""

    async def workspace_list(
        self, session_id: str, *, after: str | None = None, limit: int = 100
    ) -> list[tuple[str, int, str]]:
        """Up to ``limit`` ``(key, size, updated_at)`` rows in key
        order, after the key ``after`` (a cursor)."""

    async def workspace_delete(self, session_id: str, key: str) -> int | None:
        """Delete
        ``key``;
        returns the
        size it had,
        or None when
        it was not
        there."""


def check_key(key: str) -> str:
    """``key`` without surrounding whitespace. Raises :class:`ToolInputError` for an
    empty key, one over 200 characters, one with control characters, or one that
    looks like a secret (keys are shown in lists and handoffs unredacted)."""
    key = (key or "").strip()
    if not key:
        raise ToolInputError("the key is empty")
    if len(key) > KEY_MAX_CHARS:
        raise ToolInputError(f"the key is {len(key)} characters; at most {KEY_MAX_CHARS}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        raise ToolInputError("the key contains control characters")
    if redact_secrets_text(key) != key:
        raise ToolInputError("the key looks like a secret; choose a descriptive name")
    return key


def encode_cursor(last_key: str) -> str:
    """The opaque cursor that continues a list after ``last_key``."""
    return _CURSOR_PREFIX + base64.urlsafe_b64encode(last_key.encode("utf-8")).decode("ascii")


def decode_cursor(cursor: str) -> str:
    """The last key of the previous page. Raises :class:`ToolInputError` for a cursor
    this module did not make."""
    text = (cursor or "").strip()
    if not text.startswith(_CURSOR_PREFIX):
        raise ToolInputError(f"invalid cursor {cursor!r}: pass the cursor workspace_list returned")
    try:
        return base64.urlsafe_b64decode(text[len(_CURSOR_PREFIX) :].encode("ascii")).decode()
    except (binascii.Error, UnicodeError, ValueError):
        raise ToolInputError(
            f"invalid cursor {cursor!r}: pass the cursor workspace_list returned"
        ) from None


def _store(ctx: ToolContext) -> WorkspaceValueStore:
    store = ctx.values
    if store is None:
        raise ToolInputError("no workspace store in this session")
    return store


# --------------------------------------------------------------------------- arguments


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkspaceWriteArgs(_Args):
    key: str
    value: str


class WorkspaceReadArgs(_Args):
    key: str
    offset: int = Field(default=0, ge=0)
    max_chars: int = Field(default=READ_MAX_CHARS, ge=1, le=READ_MAX_CHARS)


class WorkspaceListArgs(_Args):
    cursor: str | None = None
    max_entries: int = Field(default=LIST_MAX_ENTRIES, ge=1, le=LIST_MAX_ENTRIES)


class WorkspaceDeleteArgs(_Args):
    key: str


# --------------------------------------------------------------------------- tools


async def _write(args: WorkspaceWriteArgs, ctx: ToolContext) -> ToolResult:
    key = check_key(args.key)
    if len(args.value) > VALUE_MAX_CHARS:
        raise ToolInputError(
            f"the value is {len(args.value)} characters; at most {VALUE_MAX_CHARS}"
        )
    tally = RedactionTally()
    value = await asyncio.to_thread(redact_preserving_markers, args.value, tally)
    stored, previous = await _store(ctx).workspace_put(
        ctx.session_id, key, value, max_entries=SESSION_MAX_ENTRIES
    )
    if not stored:
        raise ToolInputError(
            f"the workspace holds {SESSION_MAX_ENTRIES} values; delete one before adding {key!r}"
        )
    text = f"Stored {key!r} ({len(value)} chars"
    text += f"; replaced {previous} chars)." if previous is not None else ")."
    if tally.count:
        text += f" {tally.count} secret-shaped value(s) were replaced by [redacted:…] markers."
    return ok_result(text)


async def _read(args: WorkspaceReadArgs, ctx: ToolContext) -> ToolResult:
    key = check_key(args.key)
    value = await _store(ctx).workspace_get(ctx.session_id, key)
    if value is None:
        raise ToolInputError(f"unknown workspace key {key!r}; workspace_list shows the keys")
    total = len(value)
    if args.offset > total or (args.offset == total and total > 0):
        raise ToolInputError(
            f"offset {args.offset} is past the end of {key!r} ({total} chars; "
            f"offsets 0-{max(total - 1, 0)})"
        )
    end = min(total, args.offset + args.max_chars)
    text = value[args.offset : end]
    if end < total:
        text += f"\n[chars {args.offset}-{end} of {total}; read on with offset={end}]"
    elif total == 0:
        text = f"[{key!r} is empty]"
    return ok_result(text)


async def _list(args: WorkspaceListArgs, ctx: ToolContext) -> ToolResult:
    after = decode_cursor(args.cursor) if args.cursor is not None else None
    rows = await _store(ctx).workspace_list(ctx.session_id, after=after, limit=args.max_entries + 1)
    if not rows:
        return ok_result("(no workspace values)" if after is None else "(no more keys)")
    page = rows[: args.max_entries]
    lines = [f"{key} ({chars} chars, updated {at})" for key, chars, at in page]
    if len(rows) > args.max_entries:
        lines.append(f'[more keys: workspace_list(cursor="{encode_cursor(page[-1][0])}")]')
    return ok_result("\n".join(lines))


async def _delete(args: WorkspaceDeleteArgs, ctx: ToolContext) -> ToolResult:
    key = check_key(args.key)
    removed = await _store(ctx).workspace_delete(ctx.session_id, key)
    if removed is None:
        raise ToolInputError(f"unknown workspace key {key!r}; workspace_list shows the keys")
    return ok_result(f"Deleted {key!r} ({removed} chars).")


# The descriptions are sent with every request: every word costs context on a small
# window, so they state the limits and errors and nothing else.
_LIMITS = (
    f"Keys 1-{KEY_MAX_CHARS} chars, values at most {VALUE_MAX_CHARS} chars, at most "
    f"{SESSION_MAX_ENTRIES} keys; secrets are redacted."
)

WORKSPACE_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "workspace_write",
        "Keep a named text value (plan, notes, findings) for this session; it survives "
        "compaction and resume. Writing a key replaces its value. " + _LIMITS,
        WorkspaceWriteArgs,
        "other",
        "read",
        _write,
    ),
    ToolSpec(
        "workspace_read",
        f"Read a workspace_write value: at most {READ_MAX_CHARS} chars from offset. An "
        "unknown key or an offset past the end is an error.",
        WorkspaceReadArgs,
        "read",
        "read",
        _read,
        spillable=False,
    ),
    ToolSpec(
        "workspace_list",
        f"List workspace_write keys, at most {LIST_MAX_ENTRIES} per page; pass the "
        "returned cursor for the next.",
        WorkspaceListArgs,
        "read",
        "read",
        _list,
        spillable=False,
    ),
    ToolSpec(
        "workspace_delete",
        "Delete a workspace_write value; an unknown key is an error.",
        WorkspaceDeleteArgs,
        "other",
        "read",
        _delete,
    ),
)
