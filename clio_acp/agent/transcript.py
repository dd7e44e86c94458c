"""The session's journal rows in memory, the writer that appends to disk, and the
model view projected from them (``history.project``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from clio_acp.agent import history
from clio_acp.context.compaction import view_tokens


class Transcript:
    """The session's journal rows in memory plus the writer that appends to disk.

    ``append`` is ``async (type, data) -> row`` (the journal's); rows are kept in the
    order written. The model view is ``history.project(rows)``, kept incrementally
    (``history.Projection``).
    """

    def __init__(
        self, rows: Sequence[Any], append: Callable[[str, dict[str, Any]], Awaitable[Any]]
    ) -> None:
        self.rows: list[Any] = list(rows)
        self._append = append
        self._projection = history.Projection(self.rows)

    async def add(self, type_: str, data: dict[str, Any]) -> Any:
        """Append a row of ``type_`` (a ``history.ROW_*`` name) with ``data`` to the
        journal, keep it, and return it (with its seq). Journal errors propagate."""
        row = await self._append(type_, data)
        self.rows.append(row)
        self._projection.add(row, self.rows)
        return row

    def view(self) -> list[dict[str, Any]]:
        """The model view, maintained as rows are appended (never rebuilt from all
        rows on the hot path; a compaction row rebuilds it once)."""
        return self._projection.messages()

    def pairs(self) -> list[tuple[int, dict[str, Any]]]:
        """(seq, message) pairs of the model view (``history.project`` of the rows)."""
        return self._projection.pairs()

    def view_tokens(self, system: str, tools: Sequence[dict[str, Any]]) -> int:
        """Estimated tokens of a request with this view: ``context.compaction
        .view_tokens(system, self.view(), tools)``, from the running message sum."""
        return self._projection.token_estimate() + view_tokens(system, [], tools)

    def summary(self) -> str | None:
        """The latest compaction summary, or None before the first compaction."""
        row = history.latest_compaction(self.rows)
        return str(row.data.get("summary")) if row is not None else None
