"""Secret redaction for everything memory writes or shows (MEMORY_SPEC §8).

Owns the order in which secret shapes are replaced, the ``[redacted:<kind>]``
markers, the marker-preserving re-redaction used by handoff render and promotion,
and the leaf-wise redaction of JSON-shaped values (a serialized JSON string is never
redacted as text: a value could swallow an escaped quote, bug class §11.18). The
broad ruleset is the vendored gitleaks config (``clio_acp.memory.secret_rules``);
this module adds the §8 shapes, auth headers, credentials in URLs and env-style
assignments. It must not log, store or return the secret values it removes, and
it must not import anything above ``clio_acp.memory``.

Order (each pass over the output of the previous one): the §8 shapes up to ``jwt``;
the vendored service-specific rules; §8 ``assignment``; this module's extra shapes;
the vendored ``generic-*`` rules; finally any token characters glued to a marker
(the rest of a token longer than its rule's fixed length) join the marker. Passes
after ``assignment`` never match inside an existing marker.

Typical use::

    tally = RedactionTally()
    safe = redact_secrets_text(text, tally)    # tally.count += replacements
    safe = redact_secrets_text(text)           # when the count does not matter
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from clio_acp.memory.secret_rules import KeywordScan, Ruleset, load_ruleset
from clio_acp.memory.secret_rules.anchors import case_fold, folds_as_lower, word_offsets
from clio_acp.memory.secret_shapes import (
    EXTRA_SHAPES,
    QUOTED_ASSIGNMENT,
    QUOTED_ASSIGNMENT_GUARDS,
    QUOTED_ASSIGNMENT_STARTS,
    SCAN_WORD,
    TOKEN_KIND,
    Guard,
    token_spans,
)

__all__ = [
    "EXTRA_KINDS",
    "REDACTION_KINDS",
    "RedactionTally",
    "cut_keeping_markers",
    "cut_redacted",
    "redact_json_value",
    "redact_preserving_markers",
    "redact_secrets_text",
    "redacted_json_dumps",
]


@dataclass
class RedactionTally:
    """A running count of replacements (§8: "every replacement increments the tally")."""

    count: int = 0


# MEMORY_SPEC §8: the secret-flavoured key words of the assignment shape.
_SECRET_WORDS = r"(?:api[_-]?key|apikey|secret|token|passwd|password|credential)"

# MEMORY_SPEC §8 shapes before ``assignment``, in order. re.ASCII keeps ``\w`` ASCII.
# No trailing ``\b``: a token followed by ``_`` or a 17th character must still
# match (the rest joins the marker in the residue pass).
_SPEC_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "pem",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.ASCII,
        ),
    ),
    ("aws-access-key", re.compile(r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}", re.ASCII)),
    ("github-token", re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}", re.ASCII)),
    ("github-token", re.compile(r"github_pat_[A-Za-z0-9_]{20,}", re.ASCII)),
    (
        "sk-key",
        re.compile(r"sk-(?<![A-Za-z0-9]sk-)(?:[A-Za-z0-9_-]{2,20}-)?[A-Za-z0-9_-]{16,}", re.ASCII),
    ),
    ("slack-token", re.compile(r"xox[bpars]-[A-Za-z0-9-]{8,}", re.ASCII)),
    ("google-api-key", re.compile(r"AIza[0-9A-Za-z_-]{30,}", re.ASCII)),
    (
        "jwt",
        re.compile(
            r"eyJ(?<![A-Za-z0-9]eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}",
            re.ASCII,
        ),
    ),
)

# The literal head of each shape above (case as written): a text without any skips all
# eight passes.
_SPEC_SHAPES_GUARD = re.compile(
    r"-----BEGIN |AKIA|ASIA|ABIA|ACCA|A3T|gh[pousr]_|github_pat_|sk-|xox[bpars]-|AIza|eyJ"
)

# Group 1 (kept): a secret-flavoured key, optional quote, ':' or '=', optional
# quote (``::`` is a scope, as in ``TestToken::test_x``, not a separator). The
# lookahead (DF-12) skips a value that opens a call with no argument, a literal
# or the end of text (``BASE_TOKENS = frozenset({``), so code constants
# survive while ``password: Summer2024(!)`` is still a value. The value never runs
# into a U+E000 marker placeholder (see ``redact_preserving_markers``).
_ASSIGNMENT = re.compile(
    r"\b((?:[A-Za-z0-9_-]*" + _SECRET_WORDS + r"[A-Za-z0-9_-]*)"
    r"\s*[\"']?\s*(?:=|:(?!:))\s*[\"']?)"
    r"(?![A-Za-z_][\w.]*\((?:[\s\"'{\[)]|\Z))"
    r"([^\s\"'`;,&|<>\ue000]{8,})",
    re.ASCII | re.IGNORECASE,
)

# Every ``_ASSIGNMENT`` match holds one of these words (any case; ``api[_-]?key`` and
# ``apikey`` hold ``key``) and a separator.
_ASSIGNMENT_WORDS = ("key", "secret", "token", "passw", "credential")
_ASSIGNMENT_GUARDS = (Guard(_ASSIGNMENT_WORDS, case_free=True), Guard((":", "=")))
_EXTRA_NEEDLES = tuple(dict.fromkeys(n for shape in EXTRA_SHAPES for n in shape.needles))
# The positions in ``EXTRA_SHAPES`` of the shapes each needle lets run.
_EXTRA_BY_NEEDLE = {
    needle: tuple(i for i, shape in enumerate(EXTRA_SHAPES) if needle in shape.needles)
    for needle in _EXTRA_NEEDLES
}
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")

# Found by the one scan with the vendored keywords (``_Words``): a lowercase word of
# each ``_SPEC_SHAPES_GUARD`` head, every guard's words when all are scan words, and
# the extra shapes' needles that are scan words (the others are searched for).
_SPEC_HEADS = frozenset(
    (
        "-----begin",
        *("akia", "asia", "abia", "acca", "a3t", "github_pat_", "sk-", "aiza", "eyj"),
        *(f"gh{c}_" for c in "pousr"),
        *(f"xox{c}-" for c in "bpars"),
    )
)
_GUARD_WORDS = frozenset().union(
    *(
        guard.scan_words or ()
        for guard in (
            *_ASSIGNMENT_GUARDS,
            *QUOTED_ASSIGNMENT_GUARDS,
            *(guard for shape in EXTRA_SHAPES for guard in shape.guards),
        )
    )
)
_SCANNED_NEEDLES = tuple(n for n in _EXTRA_NEEDLES if SCAN_WORD.fullmatch(n))
_OTHER_NEEDLES = tuple(n for n in _EXTRA_NEEDLES if not SCAN_WORD.fullmatch(n))

REDACTION_KINDS: tuple[str, ...] = (
    *dict.fromkeys(kind for kind, _ in _SPEC_SHAPES),
    "assignment",
)
"""The MEMORY_SPEC §8 marker kinds in application order."""

EXTRA_KINDS: tuple[str, ...] = (*dict.fromkeys(shape.kind for shape in EXTRA_SHAPES), TOKEN_KIND)
"""Kinds added beyond §8 (``secret_shapes``); the vendored rules add their rule ids."""

_MARKER = re.compile(r"\[redacted:[a-z0-9-]+\]")
# §8 marker preservation: U+E000 then U+E100+i stands in for the i-th marker.
_PLACEHOLDER_LEAD = "\ue000"
_PLACEHOLDER_BASE = 0xE100
_MARKER_OR_PLACEHOLDER = re.compile(r"\[redacted:[a-z0-9-]+\]|\ue000[\ue100-\uf8ff]")
# Token characters glued to a marker: the rest of a token longer than the rule's
# fixed length (``AKIA`` + 17, ``ghp_…_x``) or text after a marker
# (``token=[redacted:x]supersecret``). A sentence's final dot stays.
_RESIDUE = re.compile(
    r"(\[redacted:[a-z0-9-]+\]|\ue000[\ue100-\uf8ff])"
    r"[A-Za-z0-9_+/=%-]+(?:\.[A-Za-z0-9_+/=%-]+)*"
)

# DF-12: a JSON property name that looks like a secret key, and a credential-shaped
# value prefix (the assignment pattern's value half).
_SECRET_PROPERTY_NAME = re.compile(_SECRET_WORDS + r"[A-Za-z0-9_-]*$", re.ASCII | re.IGNORECASE)
_CREDENTIAL_PREFIX = re.compile(r"^[^\s\"'`;,&|<>]{8,}")


def redact_secrets_text(text: str, tally: RedactionTally | None = None) -> str:
    """Replace every secret-shaped span of ``text`` with ``[redacted:<kind>]`` (§8).

    Passes run in the module docstring's order, each over the output of the
    previous one, so one secret can be counted twice (``API_KEY=sk-…`` → sk-key,
    then assignment). For key/value shapes only the value is replaced. Adds the
    number of replacements to ``tally`` when given. Never raises for a ``str``.

    Speed (``bench/redaction.py``): a pass whose ``Guard`` finds none of the literals
    every one of its matches holds is skipped; the vendored rules are chosen by one
    keyword scan, which also finds the guards' words (``_Words``) while no pass has
    replaced anything; case-insensitive passes and vendored rules are tried only
    where their leading words occur (``secret_rules.anchors``). None of these
    shortcuts changes an output or a count: ``tests/data/secrets/redacted.json`` pins
    them, property tests compare each shortcut with the full scan, and
    ``python bench/redaction.py --check N`` compares the whole with the old engine.
    """
    words = _Words.of(text)
    specific, generic = _vendored_of(words.present)
    ruleset = load_ruleset()
    out, count = _spec_shapes(text, words)
    out, n = _apply_vendored(ruleset, specific, out, words if not count else None)
    count += n
    out, n = _assignments(out, words if not count else None)
    count += n
    out, n = _extra_shapes(out, words if not count else None)
    count += n
    out, n = _apply_vendored(ruleset, generic, out, words if not count else None)
    count += n
    out, n = _replace_spans(out, token_spans(out), TOKEN_KIND)
    count += n
    if "[redacted:" in out or _PLACEHOLDER_LEAD in out:
        out, n = _RESIDUE.subn(r"\1", out)
        count += n
    if tally is not None:
        tally.count += count
    return out


@dataclass(frozen=True)
class _Words:
    """The scan words (``_scan_words``) found in a text, for the guards of the passes
    that see the text unchanged. ``present`` holds the lowercase words found in
    ``text.lower()``: a word missing there is missing from the text in any case, so
    a case-sensitive guard or head without one is false. ``folded`` is ``present``
    when ``case_fold(text) == text.lower()``, then exactly the case-free guard
    words found; else None (those guards search the text themselves)."""

    lowered: str
    present: frozenset[str]
    folded: frozenset[str] | None

    @classmethod
    def of(cls, text: str) -> _Words:
        lowered = text.lower()
        present = _word_scan().present(lowered)
        return cls(lowered, present, present if folds_as_lower(text) else None)


@cache
def _word_scan() -> KeywordScan:
    """One scan for the vendored keywords and the words of every guard below."""
    ruleset = load_ruleset()
    starts = [w for r in ruleset.rules if r.start_words_scanned for w in r.start_words or ()]
    words = (
        *ruleset.keywords,
        *_SPEC_HEADS,
        *_GUARD_WORDS,
        *_SCANNED_NEEDLES,
        *starts,
        *_ASSIGNMENT_WORDS,
        *QUOTED_ASSIGNMENT_STARTS,
    )
    return KeywordScan.build(tuple(dict.fromkeys(words)))


def _vendored_of(present: frozenset[str]) -> tuple[list[Any], list[Any]]:
    """The vendored rules with a keyword in ``present``: (service-specific, generic)."""
    known = _VENDORED_MEMO.get(present)
    if known is None:
        candidates = load_ruleset().candidates_of(present)
        specific = [rule for rule in candidates if not rule.rule_id.startswith("generic")]
        generic = [rule for rule in candidates if rule.rule_id.startswith("generic")]
        known = (specific, generic)
        if len(_VENDORED_MEMO) >= 4096:
            _VENDORED_MEMO.clear()  # a miss recomputes: safe if cleared meanwhile
        _VENDORED_MEMO[present] = known
    return known


_VENDORED_MEMO: dict[frozenset[str], tuple[list[Any], list[Any]]] = {}


def _spec_shapes(text: str, words: _Words | None = None) -> tuple[str, int]:
    """The §8 shapes up to ``jwt``, in order: (text, replacements)."""
    if words is not None and words.present.isdisjoint(_SPEC_HEADS):
        return text, 0
    if not _SPEC_SHAPES_GUARD.search(text):
        return text, 0
    count = 0
    for kind, pattern in _SPEC_SHAPES:
        text, n = pattern.subn(f"[redacted:{kind}]", text)
        count += n
    return text, count


def _assignments(text: str, words: _Words | None = None) -> tuple[str, int]:
    """§8 ``assignment`` (key and separator kept), then a quoted value after a
    secret-flavoured name (``QUOTED_ASSIGNMENT``): (text, replacements). ``words``:
    those of ``text``, or None."""
    count = 0
    folded = case_fold(text)
    if _admits(_ASSIGNMENT_GUARDS, text, folded, words):
        found = _found_words(_ASSIGNMENT_WORDS, words)
        text, count = _sub_at(
            _ASSIGNMENT, text, _assignment_starts(text, folded, found), _assignment_value
        )
        folded = case_fold(text) if count else folded
    if _admits(QUOTED_ASSIGNMENT_GUARDS, text, folded, None if count else words):
        starts = word_offsets(
            folded, _found_words(QUOTED_ASSIGNMENT_STARTS, None if count else words)
        )
        text, n = _sub_at(QUOTED_ASSIGNMENT, text, starts, _quoted_value)
        count += n
    return text, count


def _found_words(candidates: tuple[str, ...], words: _Words | None) -> tuple[str, ...]:
    """``candidates`` (scan words), less those ``words`` (of the text, or None) show are
    not in the case-folded text: the same offsets are found with fewer searches."""
    if words is None or words.folded is None:
        return candidates
    return tuple(word for word in candidates if word in words.folded)


def _extra_shapes(text: str, words: _Words | None = None) -> tuple[str, int]:
    """``EXTRA_SHAPES`` in order: (text, replacements). Needles are looked up in the
    text as it was before the first of these passes; guards in the current text.
    ``words``: those of ``text``, or None."""
    if words is None:
        lowered = text.lower()
        gated = {
            i for needle in _EXTRA_NEEDLES if needle in lowered for i in _EXTRA_BY_NEEDLE[needle]
        }
    else:
        lowered = words.lowered
        gated = {
            i
            for needle in _SCANNED_NEEDLES
            if needle in words.present
            for i in _EXTRA_BY_NEEDLE[needle]
        }
        gated.update(
            i for needle in _OTHER_NEEDLES if needle in lowered for i in _EXTRA_BY_NEEDLE[needle]
        )
    count = 0
    folded = case_fold(text) if gated else lowered
    for index in sorted(gated):
        shape = EXTRA_SHAPES[index]
        if not _admits(shape.guards, text, folded, None if count else words):
            continue
        text, n = _replace_spans(text, _secret_spans(shape.pattern, text), shape.kind)
        if n:
            count += n
            folded = case_fold(text)
    return text, count


def _admits(guards: tuple[Guard, ...], text: str, folded: str, words: _Words | None = None) -> bool:
    """Every guard may match ``text`` (``folded`` is ``case_fold(text)``). With
    ``words`` (those of ``text``), a guard of scan words is answered by them: a
    case-free one exactly when they stand for the folded text, a case-sensitive one
    only when none of its words is there (else its own search decides)."""
    for guard in guards:
        if words is not None and guard.scan_words is not None:
            if not guard.case_free:
                if words.present.isdisjoint(guard.scan_words):
                    return False
            elif words.folded is not None:
                if words.folded.isdisjoint(guard.scan_words):
                    return False
                continue
        if not guard.may_match(text, folded):
            return False
    return True


def _sub_at(
    pattern: re.Pattern[str],
    text: str,
    starts: list[int],
    replace: Callable[[re.Match[str]], str | None],
) -> tuple[str, int]:
    """``pattern.subn(replace, text)`` for a pattern whose matches are never empty
    and can only start at one of ``starts`` (sorted offsets, extra ones harmless):
    one anchored ``match`` per start instead of trying every offset, which a
    case-insensitive pattern does slowly (it cannot skip by first character).
    ``replace`` returns None to keep a match as it is (not counted)."""
    pieces: list[str] = []
    last = count = 0
    for start in starts:
        if start < last:
            continue
        match = pattern.match(text, start)
        if match is None:
            continue
        replacement = replace(match)
        pieces.append(text[last:start])
        pieces.append(match.group(0) if replacement is None else replacement)
        count += replacement is not None
        last = match.end()
    if not pieces:
        return text, 0
    pieces.append(text[last:])
    return "".join(pieces), count


def _assignment_value(match: re.Match[str]) -> str:
    return match.group(1) + "[redacted:assignment]"


def _quoted_value(match: re.Match[str]) -> str | None:
    if _MARKER.fullmatch(match.group("secret")):
        return None
    start, end = match.span("secret")
    base = match.start()
    whole = match.group(0)
    return whole[: start - base] + "[redacted:assignment]" + whole[end - base :]


def _assignment_starts(
    text: str, folded: str, secret_words: tuple[str, ...] = _ASSIGNMENT_WORDS
) -> list[int]:
    """Offsets where an ``_ASSIGNMENT`` match can start (a superset, sorted).

    A match is ``\\b``, name characters, a secret word, …; so it starts in the run
    of name characters that holds a secret word, at or before the word, on a word
    boundary: at the run's start, or beside a ``-`` (the one name character that is
    not a word character). Runs are walked once, however many words they hold.
    """
    starts: set[int] = set()
    prev_at = prev_begin = -1
    for at in word_offsets(folded, secret_words):
        begin = at
        while begin > 0 and text[begin - 1] in _NAME_CHARS:
            begin -= 1
            if begin == prev_at:
                begin = prev_begin
                break
        starts.add(begin)
        dash = text.find("-", max(begin, prev_at), at + 1)
        while dash >= 0:
            starts.update((dash, dash + 1))
            dash = text.find("-", dash + 1, at + 1)
        prev_at, prev_begin = at, begin
    return sorted(starts)


def _secret_spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span("secret") for m in pattern.finditer(text) if m.group("secret")]


def _apply_vendored(
    ruleset: Ruleset, rules: Iterable[Any], text: str, words: _Words | None = None
) -> tuple[str, int]:
    """The ``rules`` in order: (text, replacements). ``words``: those of ``text``, or
    None; their case-folded set answers the rules' start words until a replacement."""
    count = 0
    for rule in rules:
        if rule.pattern is None:
            continue
        folded_words = words.folded if words is not None and not count else None
        spans = list(ruleset.secret_spans(rule, text, folded_words))
        text, n = _replace_spans(text, spans, rule.rule_id)
        count += n
    return text, count


def _replace_spans(text: str, spans: list[tuple[int, int]], kind: str) -> tuple[str, int]:
    """Replace each span not overlapping an existing marker with ``[redacted:kind]``."""
    if not spans:
        return text, 0
    markers = [m.span() for m in _MARKER_OR_PLACEHOLDER.finditer(text)]
    pieces: list[str] = []
    last = count = 0
    for start, end in spans:
        if start < last or any(s < end and start < e for s, e in markers):
            continue
        pieces.append(text[last:start])
        pieces.append(f"[redacted:{kind}]")
        last = end
        count += 1
    pieces.append(text[last:])
    return "".join(pieces), count


def cut_redacted(text: str, limit: int, tally: RedactionTally | None = None) -> str:
    """Redact ``text`` with markers preserved, then cut it to at most ``limit`` chars.

    The cut comes after redaction, so a marker that is longer than the secret it
    replaced can never push a bounded field past its limit.
    """
    return cut_keeping_markers(redact_preserving_markers(text, tally), limit)


def cut_keeping_markers(text: str, limit: int) -> str:
    """``text[:limit]``, except that a ``[redacted:<kind>]`` marker the cut would split
    is dropped whole (half a marker could read as text, or as the start of one)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    opening = cut.rfind("[redacted:")
    if opening >= 0 and "]" not in cut[opening:]:
        cut = cut[:opening]
    return cut


def redact_preserving_markers(text: str, tally: RedactionTally | None = None) -> str:
    """Redact ``text`` that may already carry ``[redacted:<kind>]`` markers (§8).

    Markers are swapped for private-use placeholders first, so ``token=[redacted:jwt]``
    is neither re-redacted as an assignment nor counted again; then the text is
    redacted and the markers restored. Used by handoff render and promotion.
    """
    markers: list[str] = []

    def _mask(match: re.Match[str]) -> str:
        markers.append(match.group(0))
        return _PLACEHOLDER_LEAD + chr(_PLACEHOLDER_BASE + len(markers) - 1)

    masked = _MARKER.sub(_mask, text)
    redacted = redact_secrets_text(masked, tally)
    for index, marker in enumerate(markers):
        redacted = redacted.replace(_PLACEHOLDER_LEAD + chr(_PLACEHOLDER_BASE + index), marker)
    return redacted


def redact_json_value(value: Any, tally: RedactionTally | None = None, *, key: str = "") -> Any:
    """Return a deep copy of a JSON-shaped value with every string leaf redacted (§8 DF-12).

    Dict keys are kept; a string under a property whose name looks like a secret
    key (``apiKey``, ``db_password`` …) also loses a credential-shaped (≥8 chars, no
    whitespace or quotes) leading value, as ``"api_key": "value"`` text would.
    Non-JSON leaves (numbers, bools, None) pass through unchanged.
    """
    if isinstance(value, str):
        redacted = redact_secrets_text(value, tally)
        if not key or not _SECRET_PROPERTY_NAME.search(key) or redacted.startswith("[redacted:"):
            return redacted
        redacted, n = _CREDENTIAL_PREFIX.subn("[redacted:assignment]", redacted, count=1)
        if tally is not None:
            tally.count += n
        return redacted
    if isinstance(value, dict):
        return {k: redact_json_value(v, tally, key=str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json_value(item, tally, key=key) for item in value]
    return value


def redacted_json_dumps(
    value: Any, tally: RedactionTally | None = None, **dumps_kwargs: Any
) -> str:
    """``json.dumps`` of ``value`` after leaf-wise redaction (never text-redacts JSON)."""
    dumps_kwargs.setdefault("ensure_ascii", False)
    return json.dumps(redact_json_value(value, tally), **dumps_kwargs)
