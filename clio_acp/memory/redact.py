"""Secret redaction for everything memory writes or shows (MEMORY_SPEC §8).

Owns the ordered list of secret shapes, the ``[redacted:<kind>]`` markers, the
marker-preserving re-redaction used by handoff render and promotion, and the
leaf-wise redaction of JSON-shaped values (a serialized JSON string is never
redacted as text: a value could swallow an escaped quote, bug class §11.18).
It must not log, store or return the secret values it removes, and it must not
import anything above ``clio_acp.memory``.

Typical use::

    tally = RedactionTally()
    safe = redact_secrets_text(text, tally)    # tally.count += replacements
    safe = redact_secrets_text(text)           # when the count does not matter
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "REDACTION_KINDS",
    "RedactionTally",
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

# MEMORY_SPEC §8: applied in exactly this order, each globally. re.ASCII keeps ``\b``
# and ``\w`` to the ASCII meaning the reference's patterns have, so a marker or
# value next to a non-ASCII letter behaves the same in both implementations.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "pem",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.ASCII,
        ),
    ),
    ("aws-access-key", re.compile(r"\bAKIA[0-9A-Z]{16}\b", re.ASCII)),
    ("github-token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b", re.ASCII)),
    ("github-token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b", re.ASCII)),
    ("sk-key", re.compile(r"\bsk-(?:[A-Za-z0-9_-]{2,20}-)?[A-Za-z0-9_-]{16,}\b", re.ASCII)),
    ("slack-token", re.compile(r"\bxox[bpars]-[A-Za-z0-9-]{8,}\b", re.ASCII)),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}\b", re.ASCII)),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}\b", re.ASCII),
    ),
    (
        "assignment",
        # Group 1 (kept): a secret-flavoured key, optional quote, ':' or '=', optional
        # quote. The lookahead (DF-12) skips a value that opens a call with no argument,
        # a literal or the end of text (``BASE_TOKENS = frozenset({``), so code
        # constants survive while ``password: Summer2024(!)`` is still a value.
        # The value never runs into a U+E000 marker placeholder (see
        # ``redact_preserving_markers``), so ``api_key=api_key=[redacted:jwt]`` keeps
        # its marker and a second pass changes nothing (a property test pins this).
        re.compile(
            r"\b((?:[A-Za-z0-9_-]*" + _SECRET_WORDS + r"[A-Za-z0-9_-]*)"
            r"\s*[\"']?\s*[:=]\s*[\"']?)"
            r"(?![A-Za-z_][\w.]*\((?:[\s\"'{\[)]|\Z))"
            r"([^\s\"'`;,&|<>\ue000]{8,})",
            re.ASCII | re.IGNORECASE,
        ),
    ),
)

REDACTION_KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, _ in _PATTERNS))
"""The marker kinds in application order (§8)."""

_MARKER = re.compile(r"\[redacted:[a-z-]+\]")
# §8 marker preservation: U+E000 then U+E100+i stands in for the i-th marker.
_PLACEHOLDER_LEAD = "\ue000"
_PLACEHOLDER_BASE = 0xE100

# DF-12: a JSON property name that looks like a secret key, and a credential-shaped
# value prefix (the assignment pattern's value half).
_SECRET_PROPERTY_NAME = re.compile(_SECRET_WORDS + r"[A-Za-z0-9_-]*$", re.ASCII | re.IGNORECASE)
_CREDENTIAL_PREFIX = re.compile(r"^[^\s\"'`;,&|<>]{8,}")


def redact_secrets_text(text: str, tally: RedactionTally | None = None) -> str:
    """Replace every secret-shaped span of ``text`` with ``[redacted:<kind>]`` (§8).

    Patterns run in the §8 order, each over the output of the previous one, so one
    secret can be counted twice (``API_KEY=sk-…`` → sk-key, then assignment). For
    ``assignment`` only the value is replaced; key and separator stay. Adds the
    number of replacements to ``tally`` when given. Never raises for a ``str``.
    """
    out = text
    count = 0
    for kind, pattern in _PATTERNS:
        marker = f"[redacted:{kind}]"
        if kind == "assignment":
            out, n = pattern.subn(lambda m, marker=marker: m.group(1) + marker, out)
        else:
            out, n = pattern.subn(marker, out)
        count += n
    if tally is not None:
        tally.count += count
    return out


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
