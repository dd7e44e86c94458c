"""The envelope grammar (MEMORY_SPEC §2, §12.9): bounded, and everything it admits
parses as an envelope."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clio_acp.memory.envelope import parse_envelope
from clio_acp.models.grammar import (
    ENVELOPE_GRAMMAR,
    MAX_OPS,
    envelope_grammar,
    envelope_grammar_for_budget,
)
from tests.models.gbnf_regex import gbnf_to_regex

ENVELOPE = re.compile(gbnf_to_regex(ENVELOPE_GRAMMAR), re.DOTALL)


def test_grammar_has_no_unbounded_repetition():
    assert "*" not in ENVELOPE_GRAMMAR and "+" not in ENVELOPE_GRAMMAR
    assert "{0,7}" in ENVELOPE_GRAMMAR  # at most 8 operations (§2 step 8)


@pytest.mark.parametrize(
    "text",
    [
        "<operations>[]</operations>\n<no_intervention/>",
        '<operations>[{"op":"update_status","content":"Tests pass; docs next."}]</operations>\n'
        "<no_intervention/>",
        '<operations>[{"op":"save_procedural","content":"pytest -q fails: click missing","id":"tm-p-2"},'
        '{"op":"delete","id":"tm-k-1"}]</operations>\n'
        "<context_for_action>[tm-p-2] Do not rerun pytest before fixing the import.</context_for_action>",
    ],
)
def test_grammar_admits_canonical_envelopes(text):
    assert ENVELOPE.fullmatch(text)
    assert parse_envelope(text).ok


@pytest.mark.parametrize(
    "text",
    [
        "Sure! <operations>[]</operations>\n<no_intervention/>",
        "<operations>[]</operations>\n<no_intervention/>\nmore",
        "<operations>[]</operations>\n<context_for_action></context_for_action>",
        '<operations>[{"op":"read","path":"a.py"}]</operations>\n<no_intervention/>',
        '<operations>[{"op":"update_status","content":" "}]</operations>\n<no_intervention/>',
        '<operations>[{"op":"update_status","content":"a<|im_end|>"}]</operations>\n<no_intervention/>',
        # regression: a lone Unicode space collapses to empty content (batch unparseable)
        '<operations>[{"op":"update_status","content":"\xa0"}]</operations>\n<no_intervention/>',
        "<operations>["
        + ",".join(['{"op":"update_status","content":"s"}'] * (MAX_OPS + 1))
        + "]</operations>\n<no_intervention/>",
        '<operations>[{"op":"update_status","content":"' + "x" * 400 + '"}]</operations>\n'
        "<no_intervention/>",
    ],
)
def test_grammar_rejects_prose_invented_ops_tokens_and_runaways(text):
    assert not ENVELOPE.fullmatch(text)


@pytest.mark.parametrize(
    "reminder",
    [
        # the reminder a real SmolLM2 answer wrote on a recorded run (gated as JSON-ish)
        '[{"operation":"update_status","content":"The user will update status."}]',
        '{"op":"save_knowledge"}',
        'Run "pytest":3 again',
    ],
)
def test_grammar_keeps_json_out_of_the_reminder(reminder):
    text = f"<operations>[]</operations>\n<context_for_action>{reminder}</context_for_action>"
    assert not ENVELOPE.fullmatch(text)
    prose = "[tm-p-1] pytest -q failed twice: install click or drop the import (see 'tests/x.py')."
    assert ENVELOPE.fullmatch(
        f"<operations>[]</operations>\n<context_for_action>{prose}</context_for_action>"
    )


def test_bounds_are_parameters():
    small = re.compile(gbnf_to_regex(envelope_grammar(max_ops=1, max_content_chars=5)), re.DOTALL)
    one = '{"op":"update_status","content":"abcde"}'
    assert small.fullmatch(f"<operations>[{one}]</operations>\n<no_intervention/>")
    assert not small.fullmatch(f"<operations>[{one},{one}]</operations>\n<no_intervention/>")
    assert not small.fullmatch(
        '<operations>[{"op":"update_status","content":"abcdef"}]</operations>\n<no_intervention/>'
    )
    with pytest.raises(ValueError):
        envelope_grammar(max_ops=0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(ENVELOPE, fullmatch=True))
def test_every_string_the_grammar_admits_parses_as_an_envelope(text):
    parsed = parse_envelope(text, reference_text=text)
    # Hygiene may still drop an op's content (that is the parser's job), but the
    # envelope itself always parses.
    assert parsed.failure != "unparseable", (parsed.error, text)


def _longest_admitted(grammar: str) -> int:
    """Length of the longest string the grammar admits (1 token per char worst case)."""
    ops = int(re.search(r'\("," op\)\{0,(\d+)\}', grammar).group(1)) + 1
    content = int(re.search(r"first char\{0,(\d+)\}", grammar).group(1)) + 1
    reminder = int(re.search(r"rfirst rchar\{0,(\d+)\}", grammar).group(1)) + 1
    op = '{"op":"save_procedural","content":"' + "x" * content + '","id":"tm-p-' + "z" * 8 + '"}'
    text = (
        "<operations>["
        + ",".join([op] * ops)
        + "]</operations>\n<context_for_action>"
        + "y" * reminder
        + "</context_for_action>"
    )
    assert re.compile(gbnf_to_regex(grammar), re.DOTALL).fullmatch(text)
    return len(text)


@pytest.mark.parametrize("max_tokens", [300, 400, 800, 2000, 4000])
def test_budget_grammar_longest_answer_fits_the_token_budget(max_tokens):
    assert _longest_admitted(envelope_grammar_for_budget(max_tokens)) <= max_tokens


def test_budget_grammar_never_exceeds_the_spec_bounds():
    assert envelope_grammar_for_budget(100_000) == ENVELOPE_GRAMMAR
