"""Requirement capture from the user's own task text (MEMORY_SPEC §13.4)."""

from __future__ import annotations

from clio_acp.memory.requirements import REQUIREMENTS_PER_PROMPT, extract_requirements


def test_cue_sentences_are_captured_and_plain_ones_are_not():
    text = (
        "Fix the date parser. It should accept ISO dates. Ensure the CLI keeps its flags.\n"
        "Make sure nothing is printed to stdout. This is background text."
    )
    assert extract_requirements(text) == [
        "It should accept ISO dates.",
        "Ensure the CLI keeps its flags.",
        "Make sure nothing is printed to stdout.",
    ]


def test_items_of_a_requirements_list_are_taken_whatever_their_wording():
    text = (
        "Build a sampler.\n\nRequirements:\n- Write the code in R\n"
        "- Save it as /app/ars.R\n\n**Acceptance criteria:**\n1. A test() function prints PASS\n"
        "\nThanks!"
    )
    assert extract_requirements(text) == [
        "Write the code in R",
        "Save it as /app/ars.R",
        "A test() function prints PASS",
    ]


def test_list_items_come_first_under_the_cap_and_prompt_order_is_kept():
    cues = "\n".join(f"Step {i} must be done carefully." for i in range(10))
    text = cues + "\nConstraints:\n- never push to main\n- only touch files in src/"
    found = extract_requirements(text)
    assert len(found) == REQUIREMENTS_PER_PROMPT
    assert found[-2:] == ["never push to main", "only touch files in src/"]


def test_duplicates_questions_code_and_tags_are_skipped():
    text = (
        "<pr_description>You must keep the API.</pr_description>\n"
        "You MUST keep the API!\nShould we also do X?\n"
        "```python\nassert x must be 1\n```\n>>> f() must fail\n"
    )
    assert extract_requirements(text) == ["You must keep the API."]


def test_hard_wrapped_sentences_are_joined():
    text = "The importer should skip hidden\nfiles and keep going.\nAnother line."
    assert extract_requirements(text) == ["The importer should skip hidden files and keep going."]


def test_secrets_are_redacted():
    (req,) = extract_requirements("You must use API_KEY=super-secret-value-123 for the call.")
    assert "super-secret" not in req and "[redacted:assignment]" in req


def test_blank_text_gives_nothing():
    assert extract_requirements("") == []
    assert extract_requirements("Nothing to see here.") == []


# -- shortcuts that must equal their definitions (issue 18 part 3) ----------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clio_acp.memory import requirements as _req  # noqa: E402

_PIECES = st.sampled_from(
    ["You must keep it.", "Never edit tests", "only", "x = f(a)[0];", "{", "`", "\n", " ",
     "\n\n", "- item", "Requirements:", "Should we?", "ONLY this. ", "Make sure", "é", "ok."]
)  # fmt: skip


@given(st.lists(_PIECES, max_size=14).map("".join))
def test_code_symbol_count_and_cue_precheck_match_their_definitions(text):
    for line in text.split("\n"):
        symbols = sum(line.count(c) for c in "{}();=<>[]`")
        assert _req._looks_like_code(line) == bool(
            _req._CONSOLE.match(line) or (symbols >= 6 and symbols > len(line) / 12)
        )
    lines = _req._lines(text)
    by_definition = [
        (number, sentence.strip())
        for number, paragraph in _req._paragraphs(lines, set())
        for sentence in _req._SENTENCE_END.split(paragraph)
        if len(sentence.strip()) >= _req._MIN_CHARS
        and not sentence.strip().endswith("?")
        and _req._CUE.search(sentence.strip())
    ]
    assert _req._cue_sentences(lines, set()) == by_definition


_CUE_PIECES = st.sampled_from(
    ["must", "MUST", "Never", "do not", "don't", "DON'T", "dont", "only", "make sure",
     "required", "requires", "ensure", "should", "always", " ", "\n", "x", "_", "0", "'",
     "\u212a", "\u017f", "\u0130", "\u0131", "\u2019", "é", "ß", "\u00a0", "muſt", "ſhould",
     "ONLY\u0130", "\u212aeep"]
)  # fmt: skip


@given(st.lists(_CUE_PIECES, max_size=8).map("".join))
def test_a_cue_is_found_where_the_ignorecase_pattern_finds_one(text):
    """The cue words searched in the lowercased (ascii_fold-ed) text are found exactly
    where the IGNORECASE pattern finds them, word boundaries included."""
    from clio_acp.memory import requirements

    assert requirements._has_cue(text) == bool(requirements._CUE.search(text))


@given(st.lists(st.sampled_from(["```", "``", "<!--", "<!-", "-->", "a", "\n", "<b>"]), max_size=8))
def test_prompt_lines_equal_their_definition_with_every_fence_pattern(pieces):
    """Fences and comments are removed only where one starts; the lines are what the
    fence pattern run over every prompt gives."""
    from clio_acp.memory import requirements

    text = "".join(pieces)
    body = requirements._TAG.sub(" ", requirements._FENCE.sub("\n", text))
    expected = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    assert requirements._lines(text) == expected


@given(
    st.lists(
        st.sampled_from(["```", "``", "`", "<!--", "<!-", "-->", "->", "<!-->", "a", "\n", "-"]),
        max_size=10,
    ).map("".join)
)
def test_fences_found_by_find_equal_the_fence_pattern(text):
    from clio_acp.memory import requirements

    assert requirements._strip_fences(text) == requirements._FENCE.sub("\n", text)
