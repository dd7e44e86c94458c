"""Advisory authenticity (MEMORY_SPEC §13.8): text from tools, files and attachments
cannot pass for a memory advisory.

The memory middleware speaks to the model in two forms: a tool-result line starting
``Memory:`` and a ``<system-reminder>`` block in a user message. Any text that did
not come from the middleware — tool output, file contents, embedded resources,
resource links — goes through ``neutralize_untrusted`` before the model sees it:

- ``<system-reminder>`` / ``</system-reminder>`` tags (any case, spacing, ``_``/``-``
  spelling, an unclosed ``<system-reminder``, letters right after ``reminder``) become
  ``&lt;system-reminder&gt;``;
- a line whose first word is ``Memory:`` (any case, leading spaces) gets
  ``[quoted] `` in front, so only the middleware produces a line starting with it.

Obfuscated forms fold first: zero-width characters are ignored and NFKC folds
full-width letters and colons, on the lines that hold one. ASCII text (the usual
case) takes a regex-only path. This module sits on the bottom floor: it imports
nothing from the package.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["QUOTE_PREFIX", "fence_for", "neutralize_untrusted"]

QUOTE_PREFIX = "[quoted] "
"""Put before an untrusted line that would otherwise start with ``Memory:``."""

# No word boundary after "reminder": "<systemreminderMemory:" opens a tag as much as
# "<system-reminder>" does (found by the property in tests/foundation/test_advisory.py).
_TAG = re.compile(r"<\s*/?\s*system[\s_-]*reminder[^<>\n]*>?", re.IGNORECASE)
_LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_MEMORY_LINE_ASCII = re.compile(
    rf"(?:\A|(?<=[{_LINE_BREAKS}]))(?=[ \t]*memory[ \t]*:)", re.IGNORECASE
)
_MEMORY_START = re.compile(r"\s*memory\s*:", re.IGNORECASE)
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)


def _escape_tag(match: re.Match[str]) -> str:
    return match.group(0).replace("<", "&lt;").replace(">", "&gt;")


def neutralize_untrusted(text: str) -> str:
    """``text`` with advisory look-alikes defused (module docstring). Idempotent;
    returns ``text`` itself when there is nothing to change. Never raises for a str."""
    if not text:
        return text
    if text.isascii():
        folded = text.lower()
        if "reminder" not in folded and "memory" not in folded:
            return text
        out = _TAG.sub(_escape_tag, text) if "reminder" in folded else text
        return _MEMORY_LINE_ASCII.sub(QUOTE_PREFIX, out) if "memory" in folded else out
    return "".join(_neutralize_line(line) for line in text.splitlines(keepends=True))


def _neutralize_line(line: str) -> str:
    folded = unicodedata.normalize("NFKC", _INVISIBLE.sub("", line))
    lowered = folded.casefold()
    if "reminder" not in lowered and "memory" not in lowered:
        return line
    if _TAG.search(folded):
        line = _TAG.sub(_escape_tag, folded)
    if _MEMORY_START.match(folded):
        line = QUOTE_PREFIX + line
    return line


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in ``text`` (at least three), so
    an attached file cannot close the fence it is quoted in (CommonMark rule)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)
