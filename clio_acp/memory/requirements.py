"""Requirement capture from the user's own task text (MEMORY_SPEC §12.5, §13.4).

Owns :func:`extract_requirements`: the sentences of a user prompt that state a
requirement, found without a model. Two sources, both read from the prompt the
*user* wrote (never a system prompt, tool output or a harness's instruction
template; the recording adapters and the session hand over only that text):

- the items of an explicit list headed ``Requirements:``, ``Constraints:`` or
  ``Acceptance criteria:`` (any case, optional markdown ``#``/``**``), each item
  taken whatever its wording;
- any other sentence or line carrying a cue: must, never, always, do not, don't,
  only, should, ensure, make sure, required.

Code fences, markup tags, quoted console lines (``>>>``, ``$``, tracebacks) and
questions are skipped. Each requirement is whitespace-collapsed, redacted (§8),
cut to ``REQUIREMENT_MAX_CHARS`` and de-duplicated (case and punctuation
insensitive). At most ``REQUIREMENTS_PER_PROMPT`` are returned: list items first,
then cue sentences, reported in prompt order. Pure functions: no I/O, no settings.
"""

from __future__ import annotations

import re

from clio_acp.memory.calls import ascii_fold
from clio_acp.memory.redact import redact_secrets_text

__all__ = [
    "REQUIREMENTS_PER_PROMPT",
    "REQUIREMENT_MAX_CHARS",
    "extract_requirements",
    "requirement_key",
]

# §13.4: at most this many requirement entries are captured from one prompt.
REQUIREMENTS_PER_PROMPT = 8
# One requirement entry is cut to this many chars (a reminder quotes several).
REQUIREMENT_MAX_CHARS = 240
_MIN_CHARS = 12

_CUE = re.compile(
    r"\b(?:must|never|always|do not|don't|dont|only|should|ensure|make sure|required)\b",
    re.IGNORECASE,
)
# The same words case-sensitively, for lowercased (ascii_fold-ed) text: IGNORECASE
# tries its folding at every offset.
_CUE_LOWER = re.compile(_CUE.pattern)
_LIST_HEADING = re.compile(
    r"^\s*(?:#+\s*)?(?:\*\*|__)?\s*(?:requirements?|constraints?|acceptance criteria)"
    r"\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_ITEM = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)]|[a-z][.)])\s+(?P<body>\S.*)$")
_FENCE = re.compile(r"```.*?(?:```|\Z)|<!--.*?(?:-->|\Z)", re.DOTALL)
_TAG = re.compile(r"</?[A-Za-z_][\w-]*(?:\s[^<>]*)?/?>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")
_CONSOLE = re.compile(r"^\s*(?:>>>|\.\.\.\s|\$ |File \"|Traceback \(|at [\w.$]+\()")


_NOT_KEY = re.compile(r"[^0-9a-z]+")
_SPACES = re.compile(r"\s+")
# Characters that make a line look like code, deleted in one pass to count them.
_CODE_SYMBOLS = str.maketrans("", "", "{}();=<>[]`")


def requirement_key(text: str) -> str:
    """The de-duplication key: lowercase letters and digits only."""
    return _NOT_KEY.sub("", text.lower())


def _clean(text: str) -> str:
    text = _SPACES.sub(" ", text).strip(" -*•#>\t")
    text = text.strip("*_ ").strip()
    text = redact_secrets_text(text)
    if len(text) > REQUIREMENT_MAX_CHARS:
        text = text[: REQUIREMENT_MAX_CHARS - 1].rstrip() + "…"
    return text


def _looks_like_code(line: str) -> bool:
    if _CONSOLE.match(line):
        return True
    symbols = len(line) - len(line.translate(_CODE_SYMBOLS))
    return symbols >= 6 and symbols > len(line) / 12


def _strip_fences(text: str) -> str:
    """``_FENCE.sub("\n", text)`` by ``str.find``: each ```` ```…``` ```` block and
    ``<!--…-->`` comment, the earliest first, an unclosed one running to the end,
    becomes one newline (the lazy DOTALL pattern costs ~30 ns a character inside a
    block)."""
    parts: list[str] = []
    pos = 0
    while True:
        fence, comment = text.find("```", pos), text.find("<!--", pos)
        if fence < 0 and comment < 0:
            break
        if comment < 0 or 0 <= fence < comment:
            start, closer, skip = fence, "```", 3
        else:
            start, closer, skip = comment, "-->", 4
        close = text.find(closer, start + skip)
        parts += (text[pos:start], "\n")
        pos = len(text) if close < 0 else close + len(closer)
    parts.append(text[pos:])
    return "".join(parts)


def _lines(text: str) -> list[str]:
    body = _strip_fences(text or "")
    body = _TAG.sub(" ", body)
    return body.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _list_items(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, item text) of every item under a requirements-style heading.
    A list ends at a blank line followed by a non-item line, or at a new heading."""
    found: list[tuple[int, str]] = []
    in_list = False
    last_item = -1
    for number, line in enumerate(lines):
        heading = _LIST_HEADING.match(line)
        if heading:
            in_list = True
            rest = heading.group("rest").strip()
            if rest and len(rest) >= _MIN_CHARS:
                found.append((number, rest))
            last_item = -1
            continue
        if not in_list:
            continue
        item = _ITEM.match(line)
        if item:
            found.append((number, item.group("body")))
            last_item = len(found) - 1
        elif not line.strip():
            continue
        elif last_item >= 0 and line.startswith((" ", "\t")):
            # an indented continuation of the previous item
            n, body = found[last_item]
            found[last_item] = (n, f"{body} {line.strip()}")
        else:
            in_list = False
    return found


def _ends_sentence(current: tuple[int, str] | None) -> bool:
    return current is None or current[1].rstrip().endswith((".", "!", "?", ":"))


def _paragraphs(lines: list[str], skip: set[int]) -> list[tuple[int, str]]:
    """Join hard-wrapped lines: a line continues the previous one only when it
    starts with a lowercase letter and the previous one ends mid-sentence (no
    ``.!?:``); blank, list-item and code-like lines always break. Returns
    (first line number, text) pairs."""
    paragraphs: list[tuple[int, str]] = []
    current: tuple[int, str] | None = None
    for number, line in enumerate(lines):
        if number in skip or not line.strip() or _looks_like_code(line):
            current = None
            continue
        item = _ITEM.match(line)
        text = (item.group("body") if item else line).strip()
        wrapped = text[:1].islower() and not _ends_sentence(current)
        if current is None or item or not wrapped:
            current = (number, text)
            paragraphs.append(current)
        else:
            current = (current[0], f"{current[1]} {text}")
            paragraphs[-1] = current
    return paragraphs


def _has_cue(text: str) -> bool:
    """``_CUE.search(text)``: the words searched case-sensitively in the lowercased
    text (``str.lower`` is IGNORECASE's folding on ASCII; other text is
    ``ascii_fold``-ed first, which keeps the characters IGNORECASE takes for an
    ASCII letter as that letter and word characters as word characters)."""
    return _CUE_LOWER.search((text if text.isascii() else ascii_fold(text)).lower()) is not None


def _cue_sentences(lines: list[str], skip: set[int]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for number, paragraph in _paragraphs(lines, skip):
        if not _has_cue(paragraph):
            continue  # a cue in one of its sentences is a cue in the paragraph
        for sentence in _SENTENCE_END.split(paragraph):
            sentence = sentence.strip()
            if len(sentence) < _MIN_CHARS or sentence.endswith("?"):
                continue
            if _has_cue(sentence):
                found.append((number, sentence))
    return found


def extract_requirements(text: str, limit: int = REQUIREMENTS_PER_PROMPT) -> list[str]:
    """Requirements stated in the user's prompt ``text`` (§13.4), at most ``limit``,
    in prompt order, de-duplicated, redacted. Returns [] for blank text."""
    if not text or not text.strip() or limit <= 0:
        return []
    lines = _lines(text)
    items = _list_items(lines)
    skip = {number for number, _ in items}
    chosen: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for rank, pool in enumerate((items, _cue_sentences(lines, skip))):
        for number, raw in pool:
            if len(chosen) >= limit:
                break
            requirement = _clean(raw)
            key = requirement_key(requirement)
            if len(requirement) < _MIN_CHARS or not key or key in seen:
                continue
            seen.add(key)
            chosen.append((number, rank, requirement))
    chosen.sort(key=lambda item: (item[0], item[1]))
    return [requirement for _n, _r, requirement in chosen]
