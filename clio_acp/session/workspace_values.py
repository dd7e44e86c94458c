"""The named text workspace as the user sees it: list keys, read a value (issue 19 item 1).

Owns the protocol-neutral views the faces and the CLI share — ``/workspace`` in ACP,
the LSP command, ``clio-acp workspace`` — over the journal's ``workspace_values``
table: a page of keys (key, length, last update; 100 per page with a cursor) and one
value read by offset (at most 32,768 characters), each re-redacted on the way out
(§8: every view is clean even if the ruleset grew since the write). The model's own tools live in
``agent/text_workspace.py``; this module never writes.
"""

from __future__ import annotations

from typing import Any

from clio_acp.agent.tools import ToolInputError
from clio_acp.agent.tools.text_workspace import (
    LIST_MAX_ENTRIES,
    READ_MAX_CHARS,
    WorkspaceValueStore,
    check_key,
    decode_cursor,
    encode_cursor,
)
from clio_acp.memory.redact import redact_preserving_markers

__all__ = [
    "WorkspaceViewError",
    "all_keys",
    "list_values",
    "read_value",
]


class WorkspaceViewError(LookupError):
    """An unknown key, a bad offset or cursor: the message is shown to the user."""


async def list_values(
    store: WorkspaceValueStore,
    session_id: str,
    *,
    cursor: str | None = None,
    limit: int = LIST_MAX_ENTRIES,
) -> dict[str, Any]:
    """``{"sessionId", "values": [{"key", "chars", "updatedAt"}], "nextCursor"}``:
    one page of keys in key order (``limit`` clamped to 1–100). Raises
    :class:`WorkspaceViewError` for a cursor ``workspace_list`` did not make."""
    limit = max(1, min(int(limit), LIST_MAX_ENTRIES))
    try:
        after = decode_cursor(cursor) if cursor else None
    except ToolInputError as exc:
        raise WorkspaceViewError(str(exc)) from None
    rows = await store.workspace_list(session_id, after=after, limit=limit + 1)
    page = rows[:limit]
    return {
        "sessionId": session_id,
        "values": [{"key": k, "chars": n, "updatedAt": at} for k, n, at in page],
        "nextCursor": encode_cursor(page[-1][0]) if len(rows) > limit else None,
    }


async def all_keys(store: WorkspaceValueStore, session_id: str) -> list[str]:
    """Every key of the session, in key order (for a handoff's key list)."""
    keys: list[str] = []
    after: str | None = None
    while True:
        rows = await store.workspace_list(session_id, after=after, limit=500)
        keys += [row[0] for row in rows]
        if len(rows) < 500:
            return keys
        after = rows[-1][0]


async def read_value(
    store: WorkspaceValueStore,
    session_id: str,
    key: str,
    *,
    offset: int = 0,
    max_chars: int = READ_MAX_CHARS,
) -> dict[str, Any]:
    """``{"sessionId", "key", "offset", "text", "totalChars", "nextOffset"}``: at most
    ``max_chars`` (≤ 32,768) characters from ``offset``; ``nextOffset`` is None at the
    end. Raises :class:`WorkspaceViewError` for a bad key, an unknown key or an offset
    past the end."""
    try:
        key = check_key(key)
    except ToolInputError as exc:
        raise WorkspaceViewError(str(exc)) from None
    value = await store.workspace_get(session_id, key)
    if value is None:
        raise WorkspaceViewError(f"unknown workspace key {key!r}")
    total = len(value)
    if offset < 0 or offset > total or (offset == total and total > 0):
        raise WorkspaceViewError(f"offset {offset} is outside {key!r} ({total} chars)")
    end = min(total, offset + max(1, min(int(max_chars), READ_MAX_CHARS)))
    return {
        "sessionId": session_id,
        "key": key,
        "offset": offset,
        "text": redact_preserving_markers(value[offset:end]),
        "totalChars": total,
        "nextOffset": end if end < total else None,
    }
