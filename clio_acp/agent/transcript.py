"""The session's journal rows in memory, the writer that appends to disk, and the
model view projected from them (``history.project``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from clio_acp.agent import history


class Transcript:
    """The session's journal rows in memory plus the writer that appends to disk.

    ``append`` is ``async (type, data) -> row`` (the journal's); rows are kept in the
    order written. The model view is always ``history.project(rows)``.
    """

    def __init__(
        self, rows: Sequence[Any], append: Callable[[str, dict[str, Any]], Awaitable[Any]]
    ) -> None:
        self.rows: list[Any] = list(rows)
        self._append = append
        self._view: tuple[int, list[dict[str, Any]]] | None = None

    async def add(self, type_: str, data: dict[str, Any]) -> Any:
        """Append a row of ``type_`` (a ``history.ROW_*`` name) with ``data`` to the
        journal, keep it, and return it (with its seq). Journal errors propagate."""
        row = await self._append(type_, data)
        self.rows.append(row)
        return row

    def view(self) -> list[dict[str, Any]]:
        """The model view (cached until the next row is appended; rows are never
        changed in place)."""
        if self._view is None or self._view[0] != len(self.rows):
            self._view = (len(self.rows), history.messages(self.rows))
        return list(self._view[1])

    def summary(self) -> str | None:
        """The latest compaction summary, or None before the first compaction."""
        row = history.latest_compaction(self.rows)
        return str(row.data.get("summary")) if row is not None else None
