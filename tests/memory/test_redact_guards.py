"""The redaction engine's shortcuts change no result: guards are necessary conditions,
anchored matching equals a full scan, and the case fold covers every code point."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.memory import redact
from clio_acp.memory.secret_rules.anchors import _FOLD_TO_ASCII, case_fold, word_offsets
from clio_acp.memory.secret_shapes import (
    _LONG_RUN,
    _LONG_SEGMENT,
    EXTRA_SHAPES,
    QUOTED_ASSIGNMENT,
    QUOTED_ASSIGNMENT_GUARDS,
    QUOTED_ASSIGNMENT_STARTS,
    TOKEN_KIND,
    _has_long_runs,
    _scan_tokens,
    token_spans,
)

_WORDS = [
    "api_key", "api-key", "apikey", "secret", "token", "passwd", "password", "pwd", "pass",
    "passphrase", "credential", "credentials", "auth", "private_key", "access-key", "login",
    "AccountKey", "SharedAccessKey", "Pwd", "MYSQL_PWD", "REDIS_PASS", "STRIPE_KEY", "sig",
]  # fmt: skip
# Non-ASCII letters a case-insensitive pattern reads as ASCII (and one it does not).
_ODD_CASE = {"s": "\u017f", "k": "\u212a", "i": "\u0131", "I": "\u0130", "a": "\u00e4"}


@st.composite
def _word(draw: st.DrawFn) -> str:
    word = draw(st.sampled_from(_WORDS))
    out = []
    for char in word:
        choice = draw(st.integers(0, 5))
        if choice == 0:
            out.append(char.swapcase())
        elif choice == 1 and char in _ODD_CASE:
            out.append(_ODD_CASE[char])
        else:
            out.append(char)
    return "".join(out)


@st.composite
def _assignment_like(draw: st.DrawFn) -> str:
    """``[-]name[_x] ["'] sep ["'] value["']``: mostly near-misses of the shapes."""
    name = draw(st.sampled_from(["", "-", "x-", "db_", "--", "a-b-"])) + draw(_word())
    name += draw(st.sampled_from(["", "_x", "-1", ".v", "ʼ"]))
    quote = draw(st.sampled_from(["", '"', "'"]))
    sep = draw(st.sampled_from(["=", ":", "::", ":=", "=>", " = ", ":\n", " "]))
    value = draw(
        st.sampled_from(["abcdefgh12", "abc", "frozenset({", "get_x()", "$HOME", "[redacted:jwt]"])
    )
    close = draw(st.sampled_from(["", quote, '"', "'"]))
    return name + quote + sep + quote + value + close


_PIECES = st.one_of(
    _assignment_like(),
    _word(),
    st.sampled_from(["=", ":", '"', "'", "-", "_", "(", " ", "\n", "$"]),
    st.text(alphabet="abcXYZ019_-./+", min_size=1, max_size=12),
    st.text(alphabet="aBcDeF0123456789_-/", min_size=10, max_size=40),
    st.text(max_size=3),
)
_TEXTS = st.lists(_PIECES, max_size=12).map("".join)


def _old_quoted(text: str) -> tuple[str, int]:
    count = 0

    def _replace(match: re.Match[str]) -> str:
        nonlocal count
        kept = redact._quoted_value(match)
        count += kept is not None
        return match.group(0) if kept is None else kept

    return QUOTED_ASSIGNMENT.sub(_replace, text), count


@settings(max_examples=250, deadline=None)
@given(_TEXTS)
def test_anchored_assignment_passes_equal_a_full_scan(text: str) -> None:
    folded = case_fold(text)
    starts = redact._assignment_starts(text, folded)
    full = redact._ASSIGNMENT.subn(redact._assignment_value, text)
    assert redact._sub_at(redact._ASSIGNMENT, text, starts, redact._assignment_value) == full
    starts = word_offsets(folded, QUOTED_ASSIGNMENT_STARTS)
    anchored = redact._sub_at(QUOTED_ASSIGNMENT, text, starts, redact._quoted_value)
    assert anchored == _old_quoted(text)


def _assert_guards_admit(text: str) -> None:
    folded = case_fold(text)
    guarded = [
        (redact._ASSIGNMENT, redact._ASSIGNMENT_GUARDS),
        (QUOTED_ASSIGNMENT, QUOTED_ASSIGNMENT_GUARDS),
        *((shape.pattern, shape.guards) for shape in EXTRA_SHAPES),
    ]
    for pattern, guards in guarded:
        if pattern.search(text):
            assert all(guard.may_match(text, folded) for guard in guards), pattern.pattern
    for _kind, pattern in redact._SPEC_SHAPES:
        if pattern.search(text):
            assert redact._SPEC_SHAPES_GUARD.search(text), pattern.pattern
    if _scan_tokens(text):
        assert _LONG_RUN.search(text) and _LONG_SEGMENT.search(text)


@settings(max_examples=250, deadline=None)
@given(_TEXTS)
def test_a_guard_never_skips_a_pass_that_would_match(text: str) -> None:
    _assert_guards_admit(text)


# Runs of class characters around the lengths the token guard counts, with the
# characters that end a run (separators, non-ASCII letters and digits, a surrogate).
_RUN_TEXTS = st.lists(
    st.one_of(
        st.text(alphabet="aZ09", min_size=10, max_size=26),
        st.text(alphabet="aZ09_+/-", min_size=18, max_size=26),
        st.sampled_from([" ", ".", "=", "?", "\u00e9", "\u0661", "\u017f", "\ud800", "\n"]),
        st.text(max_size=3),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_RUN_TEXTS)
def test_token_guard_by_bytes_equals_its_two_searches(text: str) -> None:
    assert _has_long_runs(text) == bool(_LONG_SEGMENT.search(text) and _LONG_RUN.search(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a1_" * 8, False),  # a 24-run without 14 letters or digits in a row
        ("a" * 14 + " " + "a1_" * 8, True),  # both, in different runs
        ("a" * 24, True),
        ("a" * 13 + "\u00e9" + "a" * 13, False),  # a non-ASCII letter ends a run
        ("x" * 30 + "\u0661", True),
    ],
)
def test_token_guard_by_bytes_on_edges(text: str, expected: bool) -> None:
    assert _has_long_runs(text) is expected


# Every word the one scan answers guards with (spec heads, guard words, needles) and
# the needles it does not, some upper-cased, next to the pieces above.
_SCAN_PIECES = st.one_of(
    _word(),
    st.sampled_from(
        [
            *sorted(redact._SPEC_HEADS | redact._GUARD_WORDS),
            *redact._SCANNED_NEEDLES,
            *redact._OTHER_NEEDLES,
            *("-----BEGIN ", "AKIA", "ghp_", "xoxb-", "AIza", "eyJ", "LOGIN", "Login", "PWD"),
        ]
    ).map(lambda word: word.upper() if len(word) % 3 == 0 else word),
    _PIECES,
)
_SCAN_TEXTS = st.lists(_SCAN_PIECES, max_size=10).map("".join)
_ALL_GUARDS = [
    redact._ASSIGNMENT_GUARDS,
    QUOTED_ASSIGNMENT_GUARDS,
    *(shape.guards for shape in EXTRA_SHAPES if shape.guards),
]


def _by_guards(text: str) -> tuple[str, int]:
    """``redact_secrets_text`` as (text, count) with every guard searching the text
    itself and the vendored rules chosen by ``Ruleset.candidates``: the definition the
    scan-words shortcut (``redact._Words``) must equal."""
    ruleset = redact.load_ruleset()
    candidates = ruleset.candidates(text.lower())
    generic = [rule for rule in candidates if rule.rule_id.startswith("generic")]
    out, count = redact._spec_shapes(text)
    for step in (
        lambda out: redact._apply_vendored(
            ruleset, [r for r in candidates if r not in generic], out
        ),
        redact._assignments,
        redact._extra_shapes,
        lambda out: redact._apply_vendored(ruleset, generic, out),
        lambda out: redact._replace_spans(out, token_spans(out), TOKEN_KIND),
        lambda out: redact._RESIDUE.subn(r"\1", out),
    ):
        out, n = step(out)
        count += n
    return out, count


@settings(max_examples=300, deadline=None)
@given(_SCAN_TEXTS)
def test_scan_words_answer_each_guard_as_its_own_search(text: str) -> None:
    words = redact._Words.of(text)
    folded = case_fold(text)
    for guards in _ALL_GUARDS:
        assert redact._admits(guards, text, folded, words) == redact._admits(guards, text, folded)
    assert redact._spec_shapes(text, words) == redact._spec_shapes(text)
    assert redact._assignments(text, words) == redact._assignments(text)
    assert redact._extra_shapes(text, words) == redact._extra_shapes(text)


@settings(max_examples=300, deadline=None)
@given(_SCAN_TEXTS)
def test_redaction_with_scan_words_equals_redaction_by_guards(text: str) -> None:
    tally = redact.RedactionTally()
    assert (redact.redact_secrets_text(text, tally), tally.count) == _by_guards(text)


# One guarded shape per text, so no other word lets its guard pass.
_ONE_SHAPE_EACH = [
    *(f"{key}=abcdefgh" for key in ("Pwd", "AccountKey", "SharedAccessSignature", "Password")),
    *(
        f"X_{word}=abcdefgh"
        for word in ("PWD", "PASSPHRASE", "AUTH", "KEY", "SECRET", "SIG", "SAS")
    ),
    *(f"X_{word}=abcdefgh" for word in ("TOKEN", "CREDENTIALS", "PRIVATE")),
    *(f"{name}: 'abcdefgh12'" for name in ("auth", "pass", "pwd", "private_key", "access-key")),
    *(f"{name}: 'abcdefgh12'" for name in ("apikey", "credential", "secret", "token")),
    *(f"a-{word}=abcdefgh12" for word in ("api_key", "SECRET", "Token", "passwd", "credential")),
    "login me password hunter2",
    "x" * 23 + " " + "aB3dE5fG7hJ9kL1mN3pQ5rS7",
    "path/to/a/file.py sbp_" + "0123456789abcdef" * 2 + " done",
    "id aB3dE5fG7hJ9kL-xy-ab-cd-ef end",  # its longest segment is 14
    "-----BEGIN RSA PRIVATE KEY-----\nabc",
    *(f"id {head}ABCDEFGHIJKLMNOP" for head in ("AKIA", "ASIA", "ABIA", "ACCA", "A3TX")),
    *(f"t gh{c}_abcdefghijklmnopqrst1" for c in "pousr"),
    "github_pat_abcdefghijklmnopqrst_1",
    "sk-proj-abcdefghijklmnopqr",
    *(f"xox{c}-12345678" for c in "bpars"),
    "AIza" + "b" * 32,
    "eyJabcdefgh.eyJabcdefgh.abcd",
]


@pytest.mark.parametrize("text", _ONE_SHAPE_EACH)
def test_each_guard_admits_its_shape_alone(text: str) -> None:
    assert redact.redact_secrets_text(text) != text
    _assert_guards_admit(text)


def test_case_fold_covers_every_character_a_case_insensitive_pattern_reads_as_ascii() -> None:
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    folds = {chr(k): v for k, v in _FOLD_TO_ASCII.items()}
    for ascii_char in map(chr, range(128)):
        matched = set(re.findall("(?i)" + re.escape(ascii_char), every))
        odd = {c for c in matched if not c.isascii()}
        assert odd == {c for c, folded in folds.items() if folded == ascii_char.lower()}
    assert len(case_fold(every)) == len(every)
    assert case_fold("\u0130\u0131\u017f\u212aAb") == "iiskab"


def test_redaction_of_odd_case_letters_is_unchanged() -> None:
    assert redact.redact_secrets_text("pa\u017f\u017fword = 'abcdefgh12'") == (
        "pa\u017f\u017fword = '[redacted:assignment]'"
    )
    assert redact.redact_secrets_text("\u212aEY=abcdefghij") == "\u212aEY=abcdefghij"


def test_quoted_assignment_starts_are_read_from_its_pattern() -> None:
    starts = set(QUOTED_ASSIGNMENT_STARTS)
    assert starts >= {"api", "secret", "token", "pass", "pwd", "credential", "auth", "access"}
    assert "private" in starts


@pytest.mark.parametrize(
    "text",
    [
        "auth ok\ntoken => 9fQ2xL7pW3mZ8rT1vB6n",  # the second start word present holds it
        "token ok\n\u017fecret => 9fQ2xL7pW3mZ8rT1vB6n",  # ſ: "secret" only in the folded text
    ],
)
def test_start_words_from_the_word_scan_keep_every_finding(text: str) -> None:
    tally = redact.RedactionTally()
    redacted = redact.redact_secrets_text(text, tally)
    assert "9fQ2xL7pW3mZ8rT1vB6n" not in redacted
    assert (redacted, tally.count) == _by_guards(text)


def test_words_searched_for_offsets_are_all_in_the_one_scan() -> None:
    # ``_found_words`` drops a word the scan did not find: each must be one it looks for.
    scanned = set(redact._word_scan().keywords)
    assert set(redact._ASSIGNMENT_WORDS) | set(QUOTED_ASSIGNMENT_STARTS) <= scanned
    rules = redact.load_ruleset().rules
    assert {w for r in rules if r.start_words_scanned for w in r.start_words or ()} <= scanned
