"""The repetition guard: tells when a streamed answer has degenerated into a loop.

Owns one detector fed the answer's text pieces as they stream (issue 20 item 2). A
small model that loses its way writes the same line again and again (seen: 319
lines of ``- <folder>-1.2`` until the slot was full) or the same few characters
over and over inside one line (``_v1.3.1_v1.3.1_v1.3.1…``). The guard trips on:

- ``LINE_REPEATS`` consecutive identical non-blank lines, or ``NUMBERED_LINE_REPEATS``
  that differ only in their digits (a counter the model keeps incrementing);
- the last ``SPAN_CHARS`` characters being one unit of at most ``MAX_PERIOD``
  characters repeated (digits compared as such).

Thresholds are set so that real answers (file listings, tables, separator lines) do
not trip it. It must not know about requests or streams; the client stops the
stream when ``feed`` returns True and reports the finish reason ``repetition``.
"""

from __future__ import annotations

import re

LINE_REPEATS = 6
NUMBERED_LINE_REPEATS = 16
SPAN_CHARS = 240
MAX_PERIOD = 64
_TAIL_CHARS = 4_000
_DIGITS = re.compile(r"\d+")

FINISH_REASON = "repetition"
"""The finish reason of an answer the guard stopped."""


class RepetitionGuard:
    """Feed text pieces in stream order; ``tripped`` says whether (and ``why``)."""

    def __init__(self) -> None:
        self._tail = ""
        self.tripped = False
        self.why = ""

    def feed(self, piece: str) -> bool:
        """Add ``piece``; True once the answer looks degenerate (stays True)."""
        if self.tripped or not piece:
            return self.tripped
        self._tail = (self._tail + piece)[-_TAIL_CHARS:]
        why = _repeated_lines(self._tail) or _periodic_tail(self._tail)
        if why:
            self.tripped, self.why = True, why
        return self.tripped


def _repeated_lines(text: str) -> str:
    # Only complete lines count: the last one may still be growing.
    lines = [line.strip() for line in text.split("\n")[:-1]]
    lines = [line for line in lines if line]
    if len(lines) >= LINE_REPEATS and len(set(lines[-LINE_REPEATS:])) == 1:
        return f"the same line {LINE_REPEATS} times in a row: {lines[-1][:80]!r}"
    if len(lines) >= NUMBERED_LINE_REPEATS:
        shapes = {_DIGITS.sub("0", line) for line in lines[-NUMBERED_LINE_REPEATS:]}
        if len(shapes) == 1 and _DIGITS.search(lines[-1]):
            return (
                f"{NUMBERED_LINE_REPEATS} lines in a row differing only in numbers: "
                f"{lines[-1][:80]!r}"
            )
    return ""


def _periodic_tail(text: str) -> str:
    span = text[-SPAN_CHARS:]
    if len(span) < SPAN_CHARS or not span.strip():
        return ""
    for period in range(1, MAX_PERIOD + 1):
        unit = span[-period:]
        if not unit.strip():
            continue
        if all(span[i] == unit[(i - len(span)) % period] for i in range(len(span))):
            if not any(c.isalnum() for c in unit):
                return ""  # a long rule of '=' or '-' is layout, not a loop
            return f"the same {period}-character text repeated over {SPAN_CHARS} characters: {unit[:40]!r}"
    return ""
