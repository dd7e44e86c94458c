"""GBNF grammar that admits only the two-line memory envelope (MEMORY_SPEC §2, §12.9).

Owns the grammar text sent to routes that support constrained decoding (llama.cpp
and llama-cpp-python ``grammar``, vLLM ``structured_outputs.grammar``). It must
not parse answers: the tolerant parser in ``clio_acp.memory.envelope`` still runs on
every result. Every repetition is bounded, so a constrained answer cannot run away:
at most ``max_ops`` operations, ``max_content_chars`` per content string and
``max_reminder_chars`` in the reminder. The grammar has no recursion, so it is a
regular language (tests turn it into a regex and check that every string it admits
parses as an envelope). ``envelope_grammar_for_budget`` sizes the bounds so the
longest admitted answer fits the completion budget: a grammar whose answers can
outgrow ``max_tokens`` gets cut off mid-envelope, which is no better than no grammar.
"""

from __future__ import annotations

import functools

# MEMORY_SPEC §2 step 8: a batch holds at most 8 operations.
MAX_OPS = 8
# Bounded below §2's 1200-char content cap: a small model's runaway text is cut by
# the grammar, not by max_tokens mid-string (which would leave no envelope at all).
MAX_CONTENT_CHARS = 300
# Below §2 step 11's 500-char reminder cap (the gates still apply).
MAX_REMINDER_CHARS = 400
# The bank's id shape (MEMORY_SPEC §1): tm-<s|k|p>-<base36 counter>.
_ID_RULE = '"\\"tm-" [skp] "-" [0-9a-z]{1,8} "\\""'


def envelope_grammar(
    max_ops: int = MAX_OPS,
    max_content_chars: int = MAX_CONTENT_CHARS,
    max_reminder_chars: int = MAX_REMINDER_CHARS,
) -> str:
    """The GBNF text (llama.cpp dialect) for ``<operations>[…]</operations>\\n`` then
    ``<no_intervention/>`` or ``<context_for_action>…</context_for_action>``.

    Content strings start with a visible ASCII character, hold no ``<``/``>`` (so no
    chat-template token or envelope tag), no control characters and only the
    escapes ``\\"`` and ``\\\\``. The reminder holds no ``<``/``>``, braces or double
    quotes: it is prose, never an echo of an op or of the trajectory's JSON (which
    §2 step 11 would reject as JSON-ish). Raises ``ValueError`` for bounds below 1.
    """
    if min(max_ops, max_content_chars, max_reminder_chars) < 1:
        raise ValueError("grammar bounds must be at least 1")
    more_ops = f"{{0,{max_ops - 1}}}"
    rest_chars = f"{{0,{max_content_chars - 1}}}"
    rest_reminder = f"{{0,{max_reminder_chars - 1}}}"
    return "\n".join(
        [
            'root ::= "<operations>[" ops? "]</operations>\\n" second',
            f'ops ::= op ("," op){more_ops}',
            "op ::= status | save | delete",
            'status ::= "{\\"op\\":\\"update_status\\",\\"content\\":" text "}"',
            'save ::= "{\\"op\\":\\"" savekind "\\",\\"content\\":" text (",\\"id\\":" id)? "}"',
            'savekind ::= "save_knowledge" | "save_procedural"',
            'delete ::= "{\\"op\\":\\"delete\\",\\"id\\":" id "}"',
            f'text ::= "\\"" first char{rest_chars} "\\""',
            # a visible ASCII character, not " \\ < >: Unicode spaces (U+00A0 …) would
            # collapse to empty content, which fails the batch (found by the property test)
            "first ::= [!#-;=?-\\[\\]-~]",
            'char ::= [^"\\\\<>\\x00-\\x1f] | "\\\\\\"" | "\\\\\\\\"',
            f"id ::= {_ID_RULE}",
            'second ::= "<no_intervention/>" | "<context_for_action>" rfirst rchar'
            + rest_reminder
            + ' "</context_for_action>"',
            # a reminder is prose (§2 step 11 gates JSON-ish text): no braces, no
            # double quotes, so a small model cannot echo an op or the trajectory there
            "rfirst ::= [!#-;=?-z|~]",
            'rchar ::= [^<>{}"\\x00-\\x1f]',
        ]
    )


ENVELOPE_GRAMMAR = envelope_grammar()
"""The grammar with the largest bounds (above)."""

# Characters of envelope structure outside the op list and the reminder: the tags,
# brackets and the newline (≈ 75), rounded up.
_FIXED_CHARS = 120
# Characters of one op around its content: {"op":"save_procedural","content":"",
# "id":"tm-p-xxxxxxxx"} plus the comma (≈ 66), rounded up.
_OP_CHARS = 70
# The smallest useful content per op when the budget forces fewer ops.
_MIN_CONTENT_CHARS = 40


def envelope_bounds_for_budget(max_tokens: int) -> tuple[int, int, int]:
    """``(max_ops, max_content_chars, max_reminder_chars)`` of
    ``envelope_grammar_for_budget(max_tokens)``. A string as long as its bound was
    cut there by the grammar (the memory step drops it: MEMORY_SPEC §14)."""
    budget = max(1, max_tokens)
    reminder = max(16, min(MAX_REMINDER_CHARS, budget // 5))
    left = max(0, budget - _FIXED_CHARS - reminder)
    ops = max(1, min(MAX_OPS, left // (_OP_CHARS + _MIN_CONTENT_CHARS)))
    content = max(8, min(MAX_CONTENT_CHARS, left // ops - _OP_CHARS))
    return ops, content, reminder


@functools.lru_cache(maxsize=32)
def envelope_grammar_for_budget(max_tokens: int) -> str:
    """A grammar whose longest admitted answer fits in ``max_tokens`` completion
    tokens, so a constrained answer is never cut off mid-envelope.

    Worst case is one token per character (true for ASCII text; a token is at least
    one byte, so non-ASCII content can need more). The reminder gets a fifth of the
    budget (16 to 400 chars), then the ops share the rest: as many as fit with at
    least 40 chars of content each (1 to 8), each up to 300 chars. Below about 250
    tokens the smallest grammar (one op, short strings) may still not fit.
    """
    ops, content, reminder = envelope_bounds_for_budget(max_tokens)
    return envelope_grammar(max_ops=ops, max_content_chars=content, max_reminder_chars=reminder)
