"""The tolerant envelope parser (MEMORY_SPEC §2): every vector at parse level, then
each rule of the pipeline on its own, identity repair, and property tests."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.memory.envelope import (
    Operation,
    clean_response,
    find_operations_end,
    parse_envelope,
    resolve_operations,
    strip_boundary_tokens,
)
from tests.memory.vectors import VECTORS, C, E

SAVE_F = '[{"op":"save_knowledge","content":"F"}]'


def _parse_level(vector: dict) -> str:
    reason = vector["reason"]
    if reason in ("unparseable", "all_operations_invalid"):
        return reason
    if reason == "invalid_reminder":
        return "rejected"
    return "ok"


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_spec_vector_parse_level_outcome(vector):
    parsed = parse_envelope(vector["response"], reference_text=vector.get("task", ""))
    expected = _parse_level(vector)
    if expected in ("unparseable", "all_operations_invalid"):
        assert parsed.failure == expected
        assert parsed.operations == ()
        assert parsed.reminder is None
    elif expected == "rejected":
        assert parsed.failure is None
        assert parsed.reminder is None
        assert parsed.reminder_error
    else:
        assert parsed.failure is None, parsed.error
        assert parsed.reminder_error is None
    if "dropped" in vector and expected != "unparseable":
        assert parsed.dropped == vector["dropped"]


# --- step 1–2: empty input, cleaning -------------------------------------------------


@pytest.mark.parametrize("value", [None, 5, b"<operations>[]</operations>", "", "   \n"])
def test_non_text_or_empty_response_is_unparseable(value):
    assert parse_envelope(value).failure == "unparseable"


@pytest.mark.parametrize(
    "prefix",
    [
        "<think>x</think>",
        "<Thinking>why [ not ]</Thinking>",
        '<reasoning mode="fast">a\nb</reasoning>',
        "<scratchpad><operations>[{]</operations></scratchpad>",
    ],
)
def test_closed_reasoning_blocks_are_removed_case_insensitively(prefix):
    parsed = parse_envelope(prefix + "\n" + E(SAVE_F))
    assert parsed.ok and len(parsed.operations) == 1


def test_reasoning_block_close_tag_must_match_its_opener():
    # <think> closed by </thinking> is not a closed block: the opener dangles and the
    # rest of the text, envelope included, is removed.
    assert parse_envelope("<think>x</thinking>\n" + E(SAVE_F)).failure == "unparseable"


def test_envelope_before_a_dangling_reasoning_opener_survives():
    parsed = parse_envelope(E(SAVE_F) + "\n<think>now I will reconsider")
    assert parsed.ok and parsed.operations[0].content == "F"


def test_a_tag_that_only_starts_like_think_is_not_reasoning():
    assert clean_response("<thinker>a</thinker>") == "<thinker>a</thinker>"


def test_fence_lines_with_leading_blanks_are_removed():
    text = " \t```json\n" + E(SAVE_F) + "\n  ```   trailing words\n"
    assert clean_response(text) == E(SAVE_F)


# --- step 3: boundary control tokens ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "<|im_start|>" + E(SAVE_F) + "<|im_end|>",
        "<s>[INST]" + E(SAVE_F) + "[/INST]</s>",
        "<|begin of text|> " + E(SAVE_F) + " <|eot_id|><|end_of_text|>",
        "<operations><|x|>" + SAVE_F + "</operations><eos>\n<no_intervention/>",
        "<bos><start_of_turn>" + E(SAVE_F) + "<end_of_turn><pad>",
    ],
)
def test_boundary_control_tokens_are_stripped(text):
    parsed = parse_envelope(text)
    assert parsed.ok and len(parsed.operations) == 1, parsed.error


def test_control_token_before_reminder_close_is_stripped_and_reminder_kept():
    parsed = parse_envelope(C("[]", "[tm-k-1] Keep it visible.<|im_end|>"))
    assert parsed.reminder == "[tm-k-1] Keep it visible."


def test_mid_text_control_token_rejects_the_reminder():
    parsed = parse_envelope(C("[]", "[tm-k-1] Keep <|im_end|> it visible."))
    assert parsed.reminder is None and "control token" in parsed.reminder_error


def test_mid_text_control_token_in_content_drops_the_op_not_the_batch():
    ops = '[{"op":"save_knowledge","content":"a <|im_end|> b"},{"op":"save_procedural","content":"G"}]'
    parsed = parse_envelope(E(ops))
    assert parsed.ok and parsed.dropped == 1
    assert [op.content for op in parsed.operations] == ["G"]


def test_token_pattern_is_bounded_to_48_chars():
    long_token = "<|" + "a" * 49 + "|>"
    assert strip_boundary_tokens(long_token + "x") == long_token + "x"
    assert strip_boundary_tokens("<|" + "a" * 48 + "|>x") == "x"


# --- steps 4–7: first <operations>, bracket scan, close tag, strict JSON -------------


def test_open_tag_is_case_sensitive():
    assert parse_envelope("<OPERATIONS>[]</OPERATIONS>").failure == "unparseable"


def test_first_operations_tag_is_used():
    text = E('[{"op":"save_knowledge","content":"first"}]') + "\n" + E(SAVE_F)
    assert parse_envelope(text).operations[0].content == "first"


@pytest.mark.parametrize("junk", ["[] oops</operations>", "[]]</operations>", "[]  </operations>"])
def test_junk_between_list_end_and_close_tag_is_ignored(junk):
    assert parse_envelope("<operations>" + junk + "\n<no_intervention/>").ok


def test_close_tag_inside_a_json_string_does_not_end_the_list():
    ops = '[{"op":"save_knowledge","content":"quote </operations> and ] and \\" ] here"}]'
    parsed = parse_envelope(E(ops))
    assert parsed.ok
    assert parsed.operations[0].content == 'quote </operations> and ] and " ] here'


def test_close_tag_only_before_list_end_is_unparseable():
    assert parse_envelope('<operations>[{"op":"x","c":"</operations>"').failure == "unparseable"


def test_bracket_scan_ends_where_depth_returns_to_zero():
    text = 'xx [ {"a": "]"}, [1] ] tail'
    assert text[find_operations_end(text, 2) :] == " tail"
    assert find_operations_end("  ]", 0) is None
    assert find_operations_end("[[", 0) is None
    assert find_operations_end('["\\"]', 0) is None


@pytest.mark.parametrize(
    "ops",
    [
        '[{"op":"save_knowledge","content":"A"},]',
        "[{'op':'save_knowledge','content':'A'}]",
        '[{"op":"save_knowledge","content":NaN}]',
        "[Infinity]",
        '[{"op":"save_knowledge" "content":"A"}]',
    ],
)
def test_json_is_parsed_strictly(ops):
    assert parse_envelope(E(ops)).failure == "unparseable"


def test_deeply_nested_json_is_unparseable_not_a_crash():
    deep = "[" * 50_000 + "]" * 50_000
    assert parse_envelope(E(deep)).failure == "unparseable"


# --- step 8: batch validation ---------------------------------------------------------


def test_content_check_counts_chars_after_whitespace_collapse():
    ok = "a" * 1200
    assert parse_envelope(E(f'[{{"op":"save_knowledge","content":"{ok}"}}]')).ok
    padded = "a" + " " * 3000 + "b"
    assert parse_envelope(E(f'[{{"op":"update_status","content":"{padded}"}}]')).ok
    too_long = "a" * 1201
    assert parse_envelope(E(f'[{{"op":"save_knowledge","content":"{too_long}"}}]')).failure == (
        "unparseable"
    )


@pytest.mark.parametrize(
    "op",
    [
        '{"op":"update_status","content":"  \\n\\t "}',
        '{"op":"update_status","content":5}',
        '{"op":"update_status","content":"x","id":"tm-s-1"}',
        '{"op":"save_procedural","content":null}',
        '{"op":"save_procedural","content":"x","id":"   "}',
        '{"op":"save_procedural","content":"x","id":3}',
        '{"op":"delete","id":null}',
        '{"op":"delete","id":"   "}',
        '{"op":null}',
        '["op","save_knowledge"]',
    ],
)
def test_one_invalid_entry_rejects_the_whole_batch(op):
    parsed = parse_envelope(E(f'[{{"op":"save_knowledge","content":"keep"}},{op}]'))
    assert parsed.failure == "unparseable" and parsed.operations == ()


def test_invented_op_is_dropped_whatever_its_keys():
    ops = '[{"op":"read","content":"x","id":"","extra":[1]},{"op":"Update_Status","content":"x"},{"op":"save_knowledge","content":"A"}]'
    parsed = parse_envelope(E(ops))
    assert parsed.ok and parsed.dropped == 2 and len(parsed.operations) == 1


def test_save_keeps_a_non_blank_id_stripped():
    parsed = parse_envelope(E('[{"op":"save_knowledge","content":"A","id":" tm-k-1 "}]'))
    assert parsed.operations == (Operation("save_knowledge", "A", "tm-k-1"),)


@pytest.mark.parametrize(
    "content",
    [
        "Answer in exactly two lines",
        "ensure JSON is valid",
        "Output   json only",
        "mind the output formatting",
        "we need must save",
        "we did operations already",
        "任务完成",
        "작업 완료",
        "Задача готова",
        "المهمة",
        "งานเสร็จ",
        "कार्य पूरा",
    ],
)
def test_stored_content_hygiene_drops_the_op(content):
    ops = (
        f'[{{"op":"save_knowledge","content":"{content}"}},{{"op":"update_status","content":"ok"}}]'
    )
    parsed = parse_envelope(E(ops))
    assert parsed.ok and parsed.dropped == 1
    assert [op.op for op in parsed.operations] == ["update_status"]


def test_a_script_present_in_the_reference_text_is_allowed_in_content():
    ops = '[{"op":"save_knowledge","content":"Задача готова"}]'
    assert parse_envelope(E(ops), reference_text="Task: Задача").dropped == 0
    # Another script than the one in the prompt is still foreign.
    assert parse_envelope(E(ops), reference_text="Task: 任务").failure == "all_operations_invalid"


def test_only_hygiene_drops_make_the_batch_all_operations_invalid():
    parsed = parse_envelope(E('[{"op":"update_status","content":"output JSON now"}]'))
    assert parsed.failure == "all_operations_invalid" and parsed.dropped == 1


def test_empty_list_is_valid_and_silent():
    parsed = parse_envelope(E("[]"))
    assert parsed.ok and parsed.operations == () and parsed.dropped == 0 and parsed.reminder is None


# --- step 10: phase two -------------------------------------------------------------------


@pytest.mark.parametrize(
    "silence", ["<no_intervention/>", "<no_intervention />", "<no_intervention>"]
)
def test_no_intervention_before_context_means_silence(silence):
    text = f"<operations>[]</operations>\n{silence}\n<context_for_action>[tm-k-1] x</context_for_action>"
    parsed = parse_envelope(text)
    assert parsed.ok and parsed.reminder is None and parsed.reminder_error is None


def test_context_before_no_intervention_is_a_reminder():
    text = C("[]", "[tm-k-1] Keep it visible.") + "\n<no_intervention/>"
    assert parse_envelope(text).reminder == "[tm-k-1] Keep it visible."


def test_reminder_body_ends_at_the_first_close_tag():
    text = C("[]", "first part") + " more</context_for_action>"
    assert parse_envelope(text).reminder == "first part"


def test_missing_context_close_means_cut_off():
    parsed = parse_envelope("<operations>[]</operations>\n<context_for_action>[tm-k-1] x y")
    assert parsed.ok and parsed.reminder is None and "cut off" in parsed.reminder_error


def test_tag_shapes_become_spaces_and_a_bare_lt_survives():
    assert parse_envelope(C("[]", "use <b>a</b>b  when a < b")).reminder == "use a b when a < b"


def test_reminder_of_only_tags_is_silence():
    parsed = parse_envelope(C("[]", "<br/> <i></i>"))
    assert parsed.reminder is None and parsed.reminder_error is None


def test_text_without_context_tag_after_close_is_silence():
    parsed = parse_envelope("<operations>[]</operations>\nI think we are done here.")
    assert parsed.ok and parsed.reminder is None and parsed.reminder_error is None


# --- step 11: reminder hygiene -------------------------------------------------------------


@pytest.mark.parametrize(
    "reminder",
    [
        "see <operations> above",
        "<no_intervention/> maybe",
        "a\nb\n\nc\nd",
        "z" * 501,
        '{"op": 1}',
        "[{x}]",
        'done"}',
        'ids"]',
        'key": 5',
        'key" : "v',
        'key":[1',
        "We need to fix the test",
        "we should retry",
        "we must rerun",
        "We did run it",
        "we have done this",
        "Let's retry [tm-k-1]",
        "Let’s retry [tm-k-1]",
        "let me check [tm-k-1]",
        "I need to think",
        "I should stop",
        "I must save",
        "I will run tests",
        "I think it broke",
        "I am asked to remind",
        "the task asks for tests",
        "The user wants tests",
        "the prompt says so",
        "the instructions require it",
        "But the task is done",
        "Output JSON only",
        "valid json please",
        "Ensure json",
        "check output formatting",
        "exactly two lines",
        "no extra text",
        "as the memory agent",
        "Повтори [tm-k-1]",
        "The suite fails on import errors. The suite fails on import errors.",
        "The suite fails on import [tm-k-1] errors!\nthe SUITE fails on import errors",
    ],
)
def test_reminder_hygiene_rejects(reminder):
    parsed = parse_envelope(C("[]", reminder))
    assert parsed.reminder is None and parsed.reminder_error, reminder


@pytest.mark.parametrize(
    "reminder",
    [
        "[tm-k-1] Keep it visible.",
        "a\nb\nc",
        "z" * 500,
        "Run it. Run it. Run it.",  # repeats shorter than 24 chars do not count
        "Use x: 5 spaces, 'quoted' words and {braces}",
        "letters and thinking are fine; I'm here",
        "Apply the fix to src/cli.py (lines 3-5).",
    ],
)
def test_reminder_hygiene_accepts(reminder):
    parsed = parse_envelope(C("[]", reminder))
    assert parsed.reminder is not None, parsed.reminder_error


# --- identity repair -------------------------------------------------------------------------


def test_identity_repair_rules():
    ops = [
        Operation("update_status", "s", None),
        Operation("save_knowledge", "update", "tm-k-1"),
        Operation("save_knowledge", "other class", "tm-p-2"),
        Operation("save_procedural", "status id", "tm-s-3"),
        Operation("save_procedural", "unknown", "tm-p-99"),
        Operation("delete", id="tm-p-2"),
        Operation("delete", id="tm-p-2"),
        Operation("delete", id="tm-s-3"),
        Operation("delete", id="tm-x-7"),
    ]
    result = resolve_operations(ops, "tm-s-3", ["tm-k-1"], ["tm-p-2"])
    assert result.operations == (
        Operation("update_status", "s", None),
        Operation("save_knowledge", "update", "tm-k-1"),
        Operation("save_knowledge", "other class", None),
        Operation("save_procedural", "status id", None),
        Operation("save_procedural", "unknown", None),
        Operation("delete", id="tm-p-2"),
        Operation("delete", id="tm-s-3"),
    )
    assert result.unresolved == 2


def test_identity_repair_uses_the_pre_step_bank_only():
    # A deleted id no longer names an entry: a later save with it creates a new one.
    ops = [Operation("delete", id="tm-k-1"), Operation("save_knowledge", "again", "tm-k-1")]
    result = resolve_operations(ops, None, ["tm-k-1"], [])
    assert result.operations[1] == Operation("save_knowledge", "again", None)


# --- real answers and properties ------------------------------------------------------------


def test_real_small_model_answers_never_raise_and_never_leak_bad_reminders(shared_dir):
    files = sorted((shared_dir / "model-responses").glob("*-[0-9][0-9].txt"))
    assert len(files) == 140
    outcomes: dict[str, int] = {}
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        parsed = parse_envelope(text)
        key = parsed.failure or ("reminder" if parsed.reminder else "ok")
        outcomes[key] = outcomes.get(key, 0) + 1
        if parsed.failure is not None:
            assert parsed.operations == () and parsed.reminder is None
        if parsed.reminder is not None:
            assert len(parsed.reminder) <= 500
            assert '{"' not in parsed.reminder and "let me" not in parsed.reminder.lower()
    # The grammar-constrained answers are exact envelopes; the free ones have none.
    assert outcomes.get("unparseable", 0) >= 40
    assert outcomes.get("ok", 0) + outcomes.get("reminder", 0) >= 40


_ENVELOPE_ALPHABET = st.sampled_from(
    [
        "<operations>",
        "</operations>",
        "<context_for_action>",
        "</context_for_action>",
        "<no_intervention/>",
        "<think>",
        "</think>",
        "```",
        "<|im_end|>",
        "[",
        "]",
        "{",
        "}",
        '"',
        "\\",
        ",",
        ":",
        '"op"',
        '"content"',
        '"id"',
        '"save_knowledge"',
        '"delete"',
        '"tm-k-1"',
        "\n",
        " ",
        "x",
        "Задача",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(_ENVELOPE_ALPHABET, max_size=60).map("".join)))
def test_parser_never_raises(text):
    parsed = parse_envelope(text)
    if parsed.failure is not None:
        assert parsed.operations == () and parsed.reminder is None
    assert len(parsed.operations) <= 8
    if parsed.reminder is not None:
        assert len(parsed.reminder) <= 500


def _reference_scan(text: str, start: int) -> int | None:
    """The §2 step 5 scan written out character by character (test oracle)."""
    i = start
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text) or text[i] not in "[{":
        return None
    depth, in_string, escaped = 0, False, False
    for j in range(i, len(text)):
        ch = text[j]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                return j + 1
    return None


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(['"', "\\", "[", "]", "{", "}", " ", "\n", "a", ","]), max_size=40
    ).map("".join),
    st.integers(0, 3),
)
def test_bracket_scan_matches_the_character_by_character_definition(text, start):
    assert find_operations_end(text, start) == _reference_scan(text, start)


# --- linear-time rewrites checked against the regex definitions ---------------------

_TOKEN_SRC = (
    r"<\|[A-Za-z0-9_. \-]{1,48}\|>|</?s>|<start_of_turn>|<end_of_turn>|<bos>|<eos>|<pad>"
    r"|<unk>|\[/?INST\]|<</?SYS>>"
)
_TAG_SRC = r"</?operations>|</?context_for_action>|<no_intervention\s*/?>"


def _reference_strip_tokens(text: str) -> str:
    """§2 step 3 as repeated regex removals until nothing changes (test oracle)."""
    import re

    patterns = [
        (re.compile(rf"^\s*(?:{_TOKEN_SRC})"), ""),
        (re.compile(rf"(?:{_TOKEN_SRC})\s*$"), ""),
        (re.compile(rf"(?:{_TOKEN_SRC})(?=\s*(?:{_TAG_SRC}))"), ""),
        (re.compile(rf"({_TAG_SRC})(\s*)(?:{_TOKEN_SRC})"), r"\1\2"),
    ]
    while True:
        before = text
        for pattern, repl in patterns:
            text = pattern.sub(repl, text)
        if text == before:
            return text.strip()


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "<|im_end|>",
                "</s>",
                "[INST]",
                "<<SYS>>",
                "<operations>",
                "</operations>",
                "<no_intervention />",
                "<context_for_action>",
                " ",
                "\n",
                "x",
                "[]",
                "<",
                "|>",
            ]
        ),
        max_size=14,
    ).map("".join)
)
def test_boundary_token_strip_matches_the_iterative_definition(text):
    assert strip_boundary_tokens(text) == _reference_strip_tokens(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a<think>x</think>b<THINK>y</Think >c", "abc"),
        ("a<think><think>x</think>y</think>", "ay</think>"),  # nearest close wins
        ("a<reasoning>x</think>b", "a"),  # wrong close: dangling from the opener
        ("a<think/>b", "a<think/>b"),  # not an opener: no space before '/'
        ("a<think\tmode=x>y</think>b", "ab"),
        ("a <thinking>", "a"),
        ("a <think", "a <think"),  # an opener needs its '>'
        ("<scratchpad>a</scratchpad><scratchpad>b", ""),
    ],
)
def test_reasoning_block_cases(text, expected):
    assert clean_response(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "<think>" * 20_000,
        "<think " * 20_000,
        "</think " * 20_000,
        "<think>" + "</thin" * 20_000,
        "<|a|>" + " " * 50_000 + "<|a|>" * 2_000 + " x",
        "<operations>[]</operations><context_for_action>"
        + "<a " * 20_000
        + "</context_for_action>",
        "<operations>[]</operations><context_for_action>"
        + "<b>" * 20_000
        + "</context_for_action>",
    ],
)
def test_derailed_repetitive_answers_are_handled(text):
    # Regression: the regex forms of these steps were quadratic (minutes on such
    # inputs); the bench prints their timings. Here only the outcome is checked.
    parsed = parse_envelope(text)
    assert parsed.reminder is None
    assert (
        parsed.failure is not None or parsed.reminder_error is not None or parsed.operations == ()
    )


# -- regressions from adversarial input ----------------------------------------


def test_lone_surrogate_in_raw_reminder_text_becomes_replacement_char():
    parsed = parse_envelope(
        "<operations>[]</operations>\n<context_for_action>[tm-k-1] a\ud800b</context_for_action>"
    )
    assert parsed.reminder == "[tm-k-1] a\ufffdb"
