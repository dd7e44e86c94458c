"""Secret redaction (MEMORY_SPEC §8): order, markers, tally, DF-12 fixes, markers preserved."""

from __future__ import annotations

import json

import pytest

from clio_acp.memory.redact import (
    REDACTION_KINDS,
    RedactionTally,
    redact_json_value,
    redact_preserving_markers,
    redact_secrets_text,
    redacted_json_dumps,
)


def _redact(text: str) -> tuple[str, int]:
    tally = RedactionTally()
    return redact_secrets_text(text, tally), tally.count


@pytest.mark.parametrize(
    ("text", "expected", "count"),
    [
        (
            "Use API_KEY=super-secret-value in the fixture.",
            "Use API_KEY=[redacted:assignment] in the fixture.",
            1,
        ),
        ("API_KEY=sk-abcdefghijklmnopqrstuv", "API_KEY=[redacted:assignment]", 2),
        ("passwd=1234567", "passwd=1234567", 0),
        ('"api_key": "0123456789abcdef"', '"api_key": "[redacted:assignment]"', 1),
        (
            "AKIAABCDEFGHIJKLMNOP and eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.abcdEFGH",
            "[redacted:aws-access-key] and [redacted:jwt]",
            2,
        ),
    ],
)
def test_spec_verified_vectors(text: str, expected: str, count: int) -> None:
    assert _redact(text) == (expected, count)


def test_each_kind_has_its_marker() -> None:
    samples = {
        "github-token": "ghp_" + "a" * 24,
        "sk-key": "sk-proj-" + "A" * 20,
        "slack-token": "xoxb-12345678-abc",
        "google-api-key": "AIza" + "B" * 32,
    }
    for kind, secret in samples.items():
        out, n = _redact(f"value {secret} end")
        assert out == f"value [redacted:{kind}] end", kind
        assert n == 1
    out, n = _redact("github_pat_" + "x_" * 12)
    assert out == "[redacted:github-token]" and n == 1
    assert REDACTION_KINDS[0] == "pem" and REDACTION_KINDS[-1] == "assignment"


def test_pem_block_is_redacted_through_end_marker() -> None:
    text = (
        "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nafter"
    )
    assert _redact(text) == ("before\n[redacted:pem]\nafter", 1)


def test_unterminated_pem_is_redacted_to_end_of_text() -> None:
    text = "key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nmore\n"
    assert _redact(text) == ("key:\n[redacted:pem]", 1)


def test_code_constant_opening_a_call_is_kept() -> None:
    text = "BASE_TOKENS = frozenset({"
    assert _redact(text) == (text, 0)
    assert _redact("SECRET_NAMES = list()")[1] == 0


def test_password_with_parenthesis_is_still_redacted() -> None:
    assert _redact("password: Summer2024(!)") == ("password: [redacted:assignment]", 1)


def test_short_values_and_plain_words_are_untouched() -> None:
    for text in ("the token is short", "tokenizer=bpe", "sk-short", "AKIA123"):
        assert _redact(text) == (text, 0)


def test_marker_preservation_does_not_rewrite_or_recount_markers() -> None:
    tally = RedactionTally()
    text = "token=[redacted:jwt] and token=[redacted:assignment] plus AKIAABCDEFGHIJKLMNOP"
    out = redact_preserving_markers(text, tally)
    assert (
        out == "token=[redacted:jwt] and token=[redacted:assignment] plus [redacted:aws-access-key]"
    )
    assert tally.count == 1
    # Plain redaction would re-redact the marker as an assignment value.
    assert redact_secrets_text("token=[redacted:jwt]") == "token=[redacted:assignment]"


def test_redaction_is_idempotent_with_marker_preservation() -> None:
    once = redact_preserving_markers("Use API_KEY=super-secret-value now")
    tally = RedactionTally()
    assert redact_preserving_markers(once, tally) == once
    assert tally.count == 0


def test_json_leaves_are_redacted_and_stay_valid_json() -> None:
    value = {
        "cmd": 'curl -H "token=abc\\"defghijk"',
        "apiKey": "plainvalue123",
        "nested": [{"password": "hunter2hunter2"}, "ghp_" + "z" * 30],
        "count": 3,
    }
    tally = RedactionTally()
    dumped = redacted_json_dumps(value, tally)
    parsed = json.loads(dumped)
    assert parsed["apiKey"] == "[redacted:assignment]"
    assert parsed["nested"][0]["password"] == "[redacted:assignment]"
    assert parsed["nested"][1] == "[redacted:github-token]"
    assert parsed["count"] == 3
    assert "hunter2" not in dumped and "plainvalue" not in dumped
    assert tally.count >= 3


def test_json_secret_property_keeps_short_or_spaced_values() -> None:
    assert redact_json_value({"token": "short"}) == {"token": "short"}
    assert redact_json_value({"name": "plainvalue123"}) == {"name": "plainvalue123"}


def test_assignment_value_never_swallows_an_existing_marker() -> None:
    # Regression (found by the property test): the masked marker used to become part
    # of an assignment value, so the jwt marker was lost and a second pass differed.
    tally = RedactionTally()
    out = redact_preserving_markers("api_key=api_key=[redacted:jwt]", tally)
    assert out == "api_key=[redacted:assignment][redacted:jwt]"
    assert tally.count == 1
    assert redact_preserving_markers(out) == out
