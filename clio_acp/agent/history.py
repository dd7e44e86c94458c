"""The model view as a projection of journal rows (issue 6 items 1, 4 and 5).

Owns the row kinds the agent writes (``prompt``, ``assistant``, ``tool_call``,
``tool_result``, ``reminder``, ``compaction``, ``notice``, ``turn_ended``,
``memory_step``, ``mode``) and how they become OpenAI chat messages: the newest
compaction's summary first, then the retained rows; ``reminder`` rows that reached the
model as a ``<system-reminder>`` block; a synthetic result for any tool call left
without one (a cancelled turn) so the conversation stays valid; oversized text parts
clipped. Rows are anything with ``seq``, ``type`` and ``data`` (the journal's
``JournalEntry``); this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from clio_acp.context.compaction import SUMMARY_PREFIX, clip_message
from clio_acp.context.tokens import estimate_message
from clio_acp.models.continuation import CONTINUATION_KEY

ROW_PROMPT = "prompt"
ROW_ASSISTANT = "assistant"
ROW_TOOL_CALL = "tool_call"
ROW_TOOL_RESULT = "tool_result"
ROW_REMINDER = "reminder"
ROW_COMPACTION = "compaction"
ROW_NOTICE = "notice"
ROW_TURN_ENDED = "turn_ended"
ROW_MEMORY_STEP = "memory_step"
ROW_MODE = "mode"
ROW_TYPES = (
    ROW_PROMPT,
    ROW_ASSISTANT,
    ROW_TOOL_CALL,
    ROW_TOOL_RESULT,
    ROW_REMINDER,
    ROW_COMPACTION,
    ROW_NOTICE,
    ROW_TURN_ENDED,
    ROW_MEMORY_STEP,
    ROW_MODE,
)

MISSING_RESULT_TEXT = "[no result: the tool call was cancelled before it finished]"
WORKSPACE_NOTE_KEYS = 100
"""Keys of the named text workspace a compaction summary names at most."""


class Row(Protocol):
    """A journal row as the projection reads it (``JournalEntry`` is one)."""

    seq: int
    type: str
    data: dict[str, Any]


def system_reminder_block(texts: Iterable[str]) -> str:
    """Reminders as one visible ``<system-reminder>`` block (issue 6 item 1)."""
    body = "\n\n".join(t.strip() for t in texts if t.strip())
    return f"<system-reminder>\n{body}\n</system-reminder>"


def workspace_note(keys: Sequence[str]) -> str:
    """The line a compaction summary ends with when the model kept workspace values
    (the summary replaces the calls that wrote them); empty when there are none."""
    if not keys:
        return ""
    shown = list(keys[:WORKSPACE_NOTE_KEYS])
    more = ", … (workspace_list shows all)" if len(keys) > WORKSPACE_NOTE_KEYS else ""
    return (
        "\n\nWorkspace values you kept (read them with workspace_read): " + ", ".join(shown) + more
    )


def latest_compaction(rows: Sequence[Row]) -> Row | None:
    """The newest ``compaction`` row of ``rows``, or None before the first compaction."""
    for row in reversed(rows):
        if row.type == ROW_COMPACTION:
            return row
    return None


def project(rows: Sequence[Row]) -> list[tuple[int, dict[str, Any]]]:
    """(seq, message) pairs of the model view, oldest first.

    The summary message of the newest compaction carries that row's seq; retained rows
    keep theirs. Spill overrides recorded by any compaction replace the tool output.
    A tool call whose result is missing (cancel, crash) gets ``MISSING_RESULT_TEXT``
    before the next prompt or reply; a result without its call is left out.
    """
    return Projection(rows).pairs()


class Projection:
    """The model view of a growing list of rows, kept up to date one row at a time
    (issue 18 item 2): ``add`` costs O(1) for an ordinary row; a compaction row
    rebuilds from the rows (the rare path), as loading does. ``pairs``/``messages``
    equal ``project`` of the same rows, and ``token_estimate`` is
    ``estimate_messages`` of the view (estimated tokens), kept as a running sum."""

    def __init__(self, rows: Sequence[Row] = ()) -> None:
        self.rebuild(rows)

    def rebuild(self, rows: Sequence[Row]) -> None:
        """Project ``rows`` from scratch (load, compaction)."""
        self._pairs: list[tuple[int, dict[str, Any]]] = []
        self._tokens = 0
        self._pending: list[str] = []  # tool_call_ids still waiting for their result
        self._last_seq = rows[-1].seq if rows else 0
        compaction = latest_compaction(rows)
        self._overrides: dict[str, str] = {}
        for row in rows:
            if row.type == ROW_COMPACTION:
                self._overrides.update(row.data.get("spilled") or {})
        first_kept = 0
        if compaction is not None:
            first_kept = int(compaction.data.get("first_kept_seq", compaction.seq))
            self._keep(compaction.seq, _summary_message(compaction))
        for row in rows:
            if row.seq >= first_kept and row.type != ROW_COMPACTION:
                self._feed(row)

    def add(self, row: Row, rows: Sequence[Row]) -> None:
        """``row`` was appended to ``rows`` (which already ends with it)."""
        if row.type == ROW_COMPACTION:
            self.rebuild(rows)
            return
        self._feed(row)
        self._last_seq = row.seq

    def _feed(self, row: Row) -> None:
        if row.type in (ROW_PROMPT, ROW_ASSISTANT, ROW_TURN_ENDED):
            for call_id in self._pending:
                self._keep(row.seq, _missing_result(call_id))
            self._pending.clear()
        message = _row_message(row, self._pending, self._overrides)
        if message is not None:
            self._keep(row.seq, message)

    def _keep(self, seq: int, message: dict[str, Any]) -> None:
        self._pairs.append((seq, message))
        self._tokens += estimate_message(message)

    def pairs(self) -> list[tuple[int, dict[str, Any]]]:
        """(seq, message) pairs of the view, with a synthetic result for each call
        still pending (carrying the last row's seq), as ``project`` returns them."""
        missing = [(self._last_seq, _missing_result(c)) for c in self._pending]
        return [*self._pairs, *missing]

    def messages(self) -> list[dict[str, Any]]:
        """The model view (messages only)."""
        return [m for _, m in self._pairs] + [_missing_result(c) for c in self._pending]

    def token_estimate(self) -> int:
        """Estimated tokens of ``messages()`` (``estimate_messages``)."""
        return self._tokens + sum(estimate_message(_missing_result(c)) for c in self._pending)


def _missing_result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT_TEXT}


def _summary_message(compaction: Row) -> dict[str, Any]:
    return {
        "role": "user",
        "content": SUMMARY_PREFIX
        + str(compaction.data.get("summary", ""))
        + workspace_note(compaction.data.get("workspace_keys") or ()),
    }


def _row_message(row: Row, pending: list[str], overrides: dict[str, str]) -> dict[str, Any] | None:
    """The model message of one retained row (None: the row is not in the view);
    keeps ``pending`` (calls awaiting a result) up to date."""
    data = row.data
    if row.type == ROW_PROMPT:
        return clip_message({"role": "user", "content": data.get("text", "")})
    if row.type == ROW_ASSISTANT:
        message = _assistant_message(data)
        pending.extend(c["id"] for c in message.get("tool_calls", ()))
        return message
    if row.type == ROW_TOOL_RESULT:
        call_id = data.get("tool_call_id")
        if call_id not in pending:
            return None  # a result without its call (cut or corrupt): never orphan it
        pending.remove(call_id)
        content = overrides.get(call_id, data.get("output", ""))
        return clip_message({"role": "tool", "tool_call_id": call_id, "content": content})
    if row.type == ROW_REMINDER and data.get("to_model") and not pending:
        # With calls pending it is delivered with the next request, after the results.
        return {"role": "user", "content": system_reminder_block([data.get("text", "")])}
    return None


def _assistant_message(data: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": data.get("text") or None}
    calls = data.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c.get("arguments") or "{}"},
            }
            for c in calls
        ]
    if message["content"] is None and not calls:
        message["content"] = ""
    if data.get("continuation"):
        # Sent back only to the route that produced it (models/continuation.py).
        message[CONTINUATION_KEY] = data["continuation"]
    return message


def messages(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The model view (messages only) of ``rows``."""
    return [m for _, m in project(rows)]
