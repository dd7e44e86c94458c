"""Filters on the memory model's operations before they reach the bank (MEMORY_SPEC §14).

- §14.2 origins: a model operation may not delete or overwrite an entry whose origin
  is not ``model``; ``protected_entry_ids`` names those entries for
  ``envelope.resolve_operations``.
- §14.3 copies: a write whose content repeats a sentence of the system prompt's
  worked examples or of the prompt's own instructions is dropped
  (``CopyFilter``). Small models copy the example verbatim ("The user forbids new
  dependencies and requires Python 3.9 compatibility.") or with a word changed, so
  a sentence of a worked example also matches when the write covers nearly all of
  its words.
- §14.3 false completion: a status that claims the task is done while unresolved
  failures exist is dropped (``claims_completion``).
- The same care for what the step *says*: a reminder repeating the prompt, or cut
  off by a constrained route's length bound (the grammar forced the close tag
  mid-sentence), is rejected (``reminder_rejection``); a content string that reached
  the bound is dropped as cut off (``content_limit``).

Pure functions over strings and a bank's contents; no I/O, no model calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.envelope import Operation

__all__ = [
    "CopyFilter",
    "FilteredOperations",
    "claims_completion",
    "default_copy_filter",
    "filter_operations",
    "protected_entry_ids",
    "reminder_rejection",
    "unresolved_calls",
]

# A sentence shorter than this (letters and digits only) is too generic to call a copy
# ("Tests pass." may well be true); the same floor as §2's repeated-sentence check.
MIN_COPY_CHARS = 24
# A worked-example sentence of at least this many words also matches when a written
# sentence holds at least COPY_WORD_COVERAGE of its words (a near copy).
MIN_FUZZY_WORDS = 6
COPY_WORD_COVERAGE = 0.8

_JSON_OBJECT = re.compile(r"\{[^{}\n]*\}")
_TAG = re.compile(r"</?[A-Za-z_][^>\n]*>")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n|;\s")
_WORD = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")


def protected_entry_ids(bank: TaskMemoryBank) -> set[str]:
    """Ids of the entries (status included) a model operation must not touch:
    every entry whose origin is ``rules``, ``seed`` or ``user`` (§14.2)."""
    entries = bank.entries()
    status = bank.status
    if status is not None:
        entries.append(status)
    return {entry.id for entry in entries if entry.origin != "model"}


# ---------------------------------------------------------------------------------
# §14.3 copies


def _key(text: str) -> str:
    """Lowercase letters and digits only: what two copies of a sentence share."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _sentences(text: str) -> list[str]:
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece.strip()]


def _example_texts(example: str) -> list[str]:
    """The contents and the reminder a worked example writes."""
    texts: list[str] = []
    start, end = example.find("<operations>"), example.find("</operations>")
    if 0 <= start < end:
        try:
            ops = json.loads(example[start + len("<operations>") : end])
        except ValueError:
            ops = []
        for op in ops if isinstance(ops, list) else []:
            if isinstance(op, dict) and isinstance(op.get("content"), str):
                texts.append(op["content"])
    reminder = re.search(r"<context_for_action>(.*?)</context_for_action>", example, re.S)
    if reminder:
        texts.append(re.sub(r"\[[^\]]*\]", " ", reminder.group(1)))
    return texts


@dataclass(frozen=True)
class CopyFilter:
    """The sentences a memory write must not repeat (§14.3).

    ``exact`` holds the letter-and-digit keys of every sentence (≥ 24 such chars) of
    the prompt's instructions and worked examples; ``fuzzy`` the word sets of the
    worked examples' sentences of ≥ 6 words.
    """

    exact: frozenset[str]
    fuzzy: tuple[frozenset[str], ...]

    @classmethod
    def from_prompt(cls, instructions: str, examples: Iterable[str] = ()) -> CopyFilter:
        """Build from the prompt's instruction text and its worked examples (each an
        envelope text). JSON op shapes and tags in the instructions are separators."""
        plain = _TAG.sub("\n", _JSON_OBJECT.sub("\n", instructions))
        exact: set[str] = set()
        fuzzy: list[frozenset[str]] = []
        for sentence in _sentences(plain):
            exact.add(_key(sentence))
        for example in examples:
            for text in _example_texts(example):
                for sentence in [text, *_sentences(text)]:
                    exact.add(_key(sentence))
                    words = frozenset(_WORD.findall(sentence.lower()))
                    if len(words) >= MIN_FUZZY_WORDS:
                        fuzzy.append(words)
        return cls(frozenset(k for k in exact if len(k) >= MIN_COPY_CHARS), tuple(fuzzy))

    def copied_sentence(self, content: str) -> str | None:
        """The first sentence of ``content`` that repeats the prompt, or None."""
        whole = _key(content)
        if any(key in whole for key in self.exact):
            return content
        for sentence in _sentences(content):
            words = set(_WORD.findall(sentence.lower()))
            for example in self.fuzzy:
                if len(words & example) >= COPY_WORD_COVERAGE * len(example) and len(
                    words
                ) <= 2 * len(example):
                    return sentence
        return None


@cache
def default_copy_filter() -> CopyFilter:
    """The copy filter of our own policy prompt (``memory.prompts``)."""
    from clio_acp.memory.prompts import POLICY_SYSTEM_PROMPT, WORKED_EXAMPLES

    instructions = POLICY_SYSTEM_PROMPT
    for example in WORKED_EXAMPLES:
        instructions = instructions.replace(example, "\n")
    return CopyFilter.from_prompt(instructions, WORKED_EXAMPLES)


# ---------------------------------------------------------------------------------
# §14.3 false completion

_COMPLETION = re.compile(
    r"\b(?:task|work|job|issue|bug|fix|change|feature|implementation|everything|all|it)"
    r"\s+(?:is|was|has\s+been|have\s+been|are|now)\s+(?:now\s+|fully\s+|successfully\s+)?"
    r"(?:complete[ds]?|done|finished|resolved|fixed|solved|working)\b"
    r"|\b(?:successfully\s+(?:completed|finished|done|resolved|fixed)"
    r"|(?:completed|finished|done|resolved)\s+successfully)\b"
    r"|\ball\s+(?:the\s+)?tests\s+(?:now\s+)?pass(?:ed|es)?\b"
    r"|\bnothing\s+(?:left|more|else)\s+to\s+do\b"
    r"|^\W*(?:done|success|finished|completed?|solved|all\s+done)\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(r"\b(?:not|n't|never|no\s+longer|yet\s+to)\b", re.IGNORECASE)
# A status that names work still ahead is progress, not a claim that the task is done.
_WORK_AHEAD = re.compile(
    r"\b(?:next|remaining|remains|still|todo|to\s+do|pending|left\s+to|then|now\s+\w+ing)\b",
    re.IGNORECASE,
)


def claims_completion(content: str) -> bool:
    """True when a status text says the task is done ("The task is completed.",
    "All tests pass", "Success"). A sentence that negates it ("not done yet") does not
    count, nor does a status naming work still ahead ("fix done; tests next")."""
    if _WORK_AHEAD.search(content):
        return False
    for sentence in _sentences(content) or [content]:
        match = _COMPLETION.search(sentence)
        if match and not _NEGATED.search(sentence[: match.end()]):
            return True
    return False


def unresolved_calls(trajectory: Sequence[object]) -> list[str]:
    """``callDescription`` of every call in the trajectory whose latest step failed
    (a later ``ok`` of the same call resolves it). Steps are camelCase mappings or
    objects with ``to_dict``."""
    latest: dict[str, str] = {}
    for step in trajectory:
        data = step.to_dict() if hasattr(step, "to_dict") else step
        if not isinstance(data, dict):
            continue
        call = data.get("callDescription")
        if isinstance(call, str):
            latest[call] = str(data.get("outcome"))
    return [call for call, outcome in latest.items() if outcome == "error"]


# ---------------------------------------------------------------------------------
# The filter step


@dataclass(frozen=True)
class FilteredOperations:
    """Ops that survived §14.3; ``copies``, ``false_completions`` and ``cut_off``
    count the dropped ones (all add to ``droppedOperations``)."""

    operations: tuple[Operation, ...]
    copies: int = 0
    false_completions: int = 0
    cut_off: int = 0

    @property
    def dropped(self) -> int:
        """Ops dropped by these filters: copies, false completions, cut-off content."""
        return self.copies + self.false_completions + self.cut_off


def filter_operations(
    operations: Iterable[Operation],
    *,
    unresolved_failures: bool,
    copy_filter: CopyFilter | None = None,
    content_limit: int | None = None,
) -> FilteredOperations:
    """Drop the writes §14.3 forbids: any content op (status, knowledge, procedural)
    repeating a prompt sentence, a status claiming completion while
    ``unresolved_failures``, and content as long as ``content_limit`` (the longest
    string a constrained route's grammar admitted: it was cut there). Deletes pass.
    Order is kept."""
    copies = copy_filter or default_copy_filter()
    kept: list[Operation] = []
    copied = false_done = cut = 0
    for op in operations:
        content = op.content or ""
        if op.op != "delete" and content_limit and len(content) >= content_limit:
            cut += 1
        elif op.op != "delete" and copies.copied_sentence(content) is not None:
            copied += 1
        elif op.op == "update_status" and unresolved_failures and claims_completion(content):
            false_done += 1
        else:
            kept.append(op)
    return FilteredOperations(tuple(kept), copied, false_done, cut)


def reminder_rejection(
    reminder: str,
    raw_chars: int,
    *,
    reminder_limit: int | None = None,
    copy_filter: CopyFilter | None = None,
) -> str | None:
    """Why a reminder the parser accepted must still be rejected (``gated`` /
    ``invalid_reminder``), or None: its raw body reached ``reminder_limit`` (the
    constrained route cut it mid-sentence), or it repeats a sentence of the prompt's
    worked examples or instructions."""
    if reminder_limit and raw_chars >= reminder_limit:
        return f"reminder was cut off at the route's {reminder_limit}-char bound"
    copied = (copy_filter or default_copy_filter()).copied_sentence(reminder)
    if copied is not None:
        return f"reminder repeats the policy prompt ({copied[:60]!r})"
    return None
