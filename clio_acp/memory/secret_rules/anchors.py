"""Where a secret pattern can start, so it is tried there and not at every offset.

Python's ``re`` cannot skip ahead by first character for a case-insensitive pattern,
so such a pattern costs a branch test at every offset of the text. When every match
starts with one of a few known words, those words' offsets (found with ``str.find`` in
a case-folded copy of the text) are the only places worth a ``match``; the matches are
the ones a full scan finds (``tests/memory/test_redact_guards.py`` and
``tests/memory/test_secret_rules.py`` compare both). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

__all__ = [
    "anchored_finditer",
    "case_fold",
    "closing_paren",
    "folds_as_lower",
    "leading_words",
    "pattern_start_words",
    "word_offsets",
    "word_offsets_up_to",
]

# The non-ASCII characters a case-insensitive ``re`` pattern matches for an ASCII
# character (CPython 3.11; ``tests/memory/test_redact_guards.py`` checks every code point).
_FOLD_TO_ASCII = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_FOLDED_CHARS = "\u0130\u0131\u017f\u212a"
_F0, _F1, _F2, _F3 = _FOLDED_CHARS


@lru_cache(maxsize=4)
def case_fold(text: str) -> str:
    """``text`` lowercased, with ``İ ı ſ K`` (Kelvin sign) folded to ``i i s k``: the
    same length as ``text`` (U+0130 is the one character ``str.lower`` lengthens), and
    wherever a ``(?i)`` pattern matches an ASCII word in ``text``, that word lowercased
    occurs at the same offset here. The last few results are kept: the vendored rules
    ask for the same text one after another."""
    if folds_as_lower(text):
        return text.lower()
    return text.translate(_FOLD_TO_ASCII).lower()


def folds_as_lower(text: str) -> bool:
    """True when ``case_fold(text) == text.lower()`` (no ``İ ı ſ K`` in ``text``)."""
    return text.isascii() or not (_F0 in text or _F1 in text or _F2 in text or _F3 in text)


def word_offsets(folded: str, words: tuple[str, ...]) -> list[int]:
    """Sorted offsets of ``folded`` at which one of ``words`` starts (overlaps included)."""
    offsets = word_offsets_up_to(folded, words, len(folded))
    assert offsets is not None  # no more offsets than characters
    return offsets


def word_offsets_up_to(folded: str, words: tuple[str, ...], limit: int) -> list[int] | None:
    """``word_offsets``, or None as soon as there are more than ``limit`` of them."""
    offsets: set[int] = set()
    for word in words:
        at = folded.find(word)
        while at >= 0:
            offsets.add(at)
            if len(offsets) > limit:
                return None
            at = folded.find(word, at + 1)
    return sorted(offsets)


def anchored_finditer(
    pattern: re.Pattern[str], text: str, starts: list[int], end: int
) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text, starts[0], end)`` for a pattern whose matches are never
    empty and can only start at one of ``starts`` (sorted; extra ones are harmless):
    one anchored ``match`` per start, skipping starts inside the previous match."""
    last = 0
    for start in starts:
        if start < last:
            continue
        match = pattern.match(text, start, end)
        if match is not None:
            last = match.end()
            yield match


_SPECIAL = frozenset("\\^$.|?*+()[]{}")
_QUANTIFIERS = frozenset("?*+{")
_PLAIN_GROUPS = ("(?:", "(?i:", "(?-i:")


def leading_words(alternation: str) -> tuple[str, ...] | None:
    """Lowercase words such that every match of the Go/Python regex ``alternation``
    starts with one of them, case-folded (``access|auth|(?-i:[Aa]pi|API)`` → access,
    auth, api); None when a branch starts with a construct this reader does not
    follow (a class of several letters, an optional atom, a wildcard, an escape class).

    Read per branch, after any ``\\b``: literal characters (escaped punctuation
    included, a class of one letter in two cases as that letter) up to the first one
    that is quantified or special; a branch that opens with a group (non-capturing,
    capturing or ``(?i:``/``(?-i:``) not quantified contributes its own branches' words.
    """
    branches = _split_branches(alternation)
    words: list[str] = []
    for branch in branches or ():
        found = _branch_words(branch)
        if found is None:
            return None
        words.extend(found)
    return tuple(dict.fromkeys(words)) if words else None


def pattern_start_words(source: str) -> tuple[str, ...] | None:
    """``leading_words`` of a whole pattern: a leading ``(?i)`` only widens what the
    folded words stand for, so it is skipped."""
    return leading_words(source[4:] if source.startswith("(?i)") else source)


def _branch_words(branch: str) -> tuple[str, ...] | None:
    while branch.startswith("\\b"):  # zero-width: the match still starts at the word
        branch = branch[2:]
    group = next((g for g in _PLAIN_GROUPS if branch.startswith(g)), None)
    if group is None and branch.startswith("(") and not branch.startswith("(?"):
        group = "("  # a capturing group
    if group is not None:
        close = closing_paren(branch, 0)
        if close is None or branch[close + 1 : close + 2] in _QUANTIFIERS:
            return None
        return leading_words(branch[len(group) : close])
    prefix, at = "", 0
    while at < len(branch):
        atom = _literal_atom(branch, at)
        if atom is None:
            break
        char, width = atom
        if branch[at + width : at + width + 1] in _QUANTIFIERS:
            break
        prefix += char
        at += width
    return (prefix,) if prefix else None


def _literal_atom(source: str, at: int) -> tuple[str, int] | None:
    """(the folded character, width in ``source``) of a literal atom at ``at``, or None."""
    char = source[at]
    if char.isascii() and char not in _SPECIAL:
        return char.lower(), 1
    following = source[at + 1 : at + 2]
    if char == "\\" and following.isascii() and following and not following.isalnum():
        return following.lower(), 2
    if char == "[":
        close = _class_end(source, at)
        members = source[at + 1 : close] if close is not None else ""
        if members.isascii() and members.isalpha() and len(set(members.lower())) == 1:
            return members[0].lower(), len(members) + 2
    return None


def _structure(source: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """``(offset, char, depth)`` of every ``(``, ``)`` and ``|`` of ``source`` from
    ``start``, skipping escapes and character classes; ``depth`` is the number of
    parentheses open after that char. Raises ``ValueError`` for a class that never
    closes."""
    depth, at = 0, start
    while at < len(source):
        char = source[at]
        if char == "\\":
            at += 2
            continue
        if char == "[":
            close = _class_end(source, at)
            if close is None:
                raise ValueError("unclosed character class")
            at = close
        elif char in "()|":
            depth += 1 if char == "(" else -1 if char == ")" else 0
            yield at, char, depth
        at += 1


def _split_branches(source: str) -> list[str] | None:
    """``source`` split at its top-level ``|``; None if its parentheses do not balance."""
    branches, start, depth = [], 0, 0
    try:
        for at, char, depth in _structure(source):
            if depth < 0:
                return None
            if char == "|" and depth == 0:
                branches.append(source[start:at])
                start = at + 1
    except ValueError:
        return None
    return [*branches, source[start:]] if depth == 0 else None


def closing_paren(source: str, opening: int) -> int | None:
    """Offset of the ``)`` that closes the ``(`` at ``opening``, or None."""
    try:
        for at, char, depth in _structure(source, opening):
            if char == ")" and depth == 0:
                return at
    except ValueError:
        return None
    return None


def _class_end(source: str, opening: int) -> int | None:
    """Offset of the ``]`` closing the class opened at ``opening`` (a leading ``^`` or
    ``]`` is a member, escapes and Go's ``[:name:]`` are skipped), or None."""
    at = opening + 1
    at += source.startswith("^", at)
    at += source.startswith("]", at)
    while at < len(source):
        char = source[at]
        if char == "\\":
            at += 2
            continue
        if source.startswith("[:", at):
            close = source.find(":]", at + 2)
            if close < 0:
                return None
            at = close + 2
            continue
        if char == "]":
            return at
        at += 1
    return None
