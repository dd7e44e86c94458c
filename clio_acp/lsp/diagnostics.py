"""A diagnostics store keyed by (source, uri), decoupling producers from publishing.

Owns which diagnostics the server currently shows. Producers (memory reminders,
memory proposals) replace or append the diagnostics of one source on one document;
the store merges every source of a uri and calls ``publish(uri, diagnostics)`` for the
uris that changed. Clearing a source publishes an empty list for each uri it had, so
the editor drops them (``textDocument/publishDiagnostics`` replaces the whole set).
Must not know what a reminder is; it holds lsprotocol ``Diagnostic`` objects only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from lsprotocol import types

Publisher = Callable[[str, list[types.Diagnostic]], None]


class DiagnosticsStore:
    """Diagnostics by (source, uri); ``publish`` is called once per changed uri."""

    def __init__(self, publish: Publisher):
        self._publish = publish
        self._items: dict[tuple[str, str], list[types.Diagnostic]] = {}

    def get(self, uri: str, source: str | None = None) -> list[types.Diagnostic]:
        """Every diagnostic currently shown on ``uri`` (of ``source`` when given)."""
        return [
            d
            for (src, u), items in self._items.items()
            if u == uri and (source is None or src == source)
            for d in items
        ]

    def uris(self, source: str | None = None) -> set[str]:
        """Documents that currently show diagnostics (of ``source`` when given)."""
        return {u for (src, u) in self._items if source is None or src == source}

    def all(self, source: str | None = None) -> list[tuple[str, types.Diagnostic]]:
        """``(uri, diagnostic)`` pairs, in insertion order."""
        return [
            (u, d)
            for (src, u), items in self._items.items()
            if source is None or src == source
            for d in items
        ]

    def set(self, source: str, uri: str, diagnostics: Iterable[types.Diagnostic]) -> None:
        """Replace the diagnostics of ``source`` on ``uri`` and publish the uri."""
        items = list(diagnostics)
        if items:
            self._items[(source, uri)] = items
        else:
            self._items.pop((source, uri), None)
        self._flush([uri])

    def add(
        self, source: str, uri: str, diagnostic: types.Diagnostic, *, keep_last: int | None = None
    ) -> None:
        """Append one diagnostic; with ``keep_last``, drop the oldest beyond that many."""
        items = [*self._items.get((source, uri), []), diagnostic]
        if keep_last is not None and len(items) > keep_last:
            items = items[-keep_last:]
        self.set(source, uri, items)

    def update(
        self,
        source: str,
        change: Callable[[str, types.Diagnostic], types.Diagnostic | None],
    ) -> None:
        """Rewrite every diagnostic of ``source``: ``change(uri, d)`` returns the new
        diagnostic, or None to drop it. Publishes the uris whose set changed."""
        changed: list[str] = []
        for (src, uri), items in list(self._items.items()):
            if src != source:
                continue
            new = [n for d in items if (n := change(uri, d)) is not None]
            if new != items:
                changed.append(uri)
                if new:
                    self._items[(src, uri)] = new
                else:
                    del self._items[(src, uri)]
        self._flush(changed)

    def clear(self, source: str | None = None) -> None:
        """Drop every diagnostic (of ``source`` when given) and publish empty sets."""
        keys = [k for k in self._items if source is None or k[0] == source]
        for key in keys:
            del self._items[key]
        self._flush(sorted({uri for _, uri in keys}))

    def _flush(self, uris: Iterable[str]) -> None:
        for uri in uris:
            self._publish(uri, self.get(uri))
