"""Tool-call ids unique within a session, whatever the model server sends.

Some OpenAI-compatible servers number tool calls per response (``call_0`` in every
request) or send none; clients key their tool-call cards by id and the handoff pairs a
call with its result by id, so a reused id would merge different calls. The loop
renames a repeated (or empty) id before the call is journalled; the model then sees
the renamed id in its history, consistently in the assistant message and the tool
result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from clio_acp.agent import history


class CallIds:
    """The tool-call ids a session has used (seeded from its journal rows)."""

    def __init__(self, rows: Iterable[Any] = ()) -> None:
        self._seen: set[str] = set()
        for row in rows:
            if getattr(row, "type", None) == history.ROW_ASSISTANT:
                for call in row.data.get("tool_calls") or []:
                    self._seen.add(str(call.get("id") or ""))

    def unique(self, call_id: str) -> str:
        """``call_id`` if unused, else ``<call_id>_<n>`` with the first free ``n``."""
        base = call_id or "call"
        candidate, n = base, 1
        while candidate in self._seen or not candidate:
            candidate = f"{base}_{n}"
            n += 1
        self._seen.add(candidate)
        return candidate

    def renamed(self, calls: Sequence[Any]) -> list[Any]:
        """``calls`` (``ModelToolCall``) with every repeated id made unique."""
        return [c if (u := self.unique(c.id)) == c.id else replace(c, id=u) for c in calls]
