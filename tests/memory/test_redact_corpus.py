"""Redaction over the synthetic corpus of secret formats, the boundary gaps and the cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clio_acp.memory.redact import (
    RedactionTally,
    cut_redacted,
    redact_preserving_markers,
    redact_secrets_text,
)
from tests.support.secrets import corpus, leaked

PINNED = Path(__file__).resolve().parents[1] / "data" / "secrets" / "redacted.json"


def test_corpus_holds_at_least_sixty_formats() -> None:
    assert len({sample.format for sample in corpus()}) >= 60


@pytest.mark.parametrize("sample", corpus(), ids=lambda s: s.format)
def test_every_corpus_format_is_redacted(sample) -> None:
    for redact in (redact_secrets_text, redact_preserving_markers):
        out = redact(sample.text)
        assert leaked(out, (sample,)) == [], (redact.__name__, out)
        assert "[redacted:" in out
        assert redact_preserving_markers(out) == out


def test_all_formats_in_one_text_are_redacted_together() -> None:
    text = "\n".join(sample.text for sample in corpus())
    assert leaked(redact_preserving_markers(text)) == []


def test_aws_key_with_a_seventeenth_character_is_redacted_whole() -> None:
    out = redact_secrets_text("id AKIAABCDEFGHIJKLMNOPQ end")
    assert out == "id [redacted:aws-access-key] end"


def test_github_token_followed_by_underscore_is_redacted_whole() -> None:
    token = "ghp_" + "aB3" * 12
    assert redact_secrets_text(f"x {token}_backup y") == "x [redacted:github-token] y"


def test_secret_glued_after_a_marker_is_redacted() -> None:
    tally = RedactionTally()
    out = redact_preserving_markers("token=[redacted:jwt]supersecret and more", tally)
    assert out == "token=[redacted:jwt] and more"
    assert tally.count == 1


def test_a_sentence_dot_after_a_marker_stays() -> None:
    token = "ghp_" + "aB3" * 12
    assert redact_secrets_text(f"use {token}.") == "use [redacted:github-token]."


@pytest.mark.parametrize(
    "text",
    [
        "Basic authentication is disabled",
        "Run pytest tests/test_auth.py::test_token_refresh -x",
        "def get_api_key(self) -> str:",
        "key = cache_key(request)",
        "from auth import TokenAuthentication",
        "https://github.com/org/repo.git",
        "export PATH=$HOME/bin:$PATH",
        "FAILED tests/test_api.py::test_login - AssertionError: assert 401 == 200",
    ],
)
def test_ordinary_developer_text_is_untouched(text: str) -> None:
    assert redact_secrets_text(text) == text


def test_cut_after_redaction_never_exceeds_the_limit() -> None:
    # A 1,199-char entry whose short secret becomes a longer marker.
    text = "x" * 1180 + " pw=hunter2hunter"
    redacted = redact_preserving_markers(text)
    assert len(redacted) > 1200 - 10
    out = cut_redacted("x" * 1190 + " AKIAABCDEFGHIJKLMNOP", 1200)
    assert len(out) <= 1200
    assert "AKIA" not in out and "[redacted:" not in out  # half a marker is dropped whole
    assert cut_redacted("short AKIAABCDEFGHIJKLMNOP", 1200) == "short [redacted:aws-access-key]"


def test_scope_operator_is_not_an_assignment() -> None:
    # A pytest node id or C++/Rust path naming a token is not a key=value secret.
    for text in (
        "FAILED tests/test_auth.py::TestTokenRefresh::test_refresh_2fa_v2 - assert 1",
        "call SecretStore::load_from_disk() first",
    ):
        assert redact_secrets_text(text) == text
    assert redact_secrets_text("token: abcdefgh12") == "token: [redacted:assignment]"


def _pinned_rows() -> list[dict]:
    return json.loads(PINNED.read_text(encoding="utf-8"))["rows"]


@pytest.mark.parametrize("row", _pinned_rows(), ids=lambda row: repr(row["text"][:40]))
def test_output_and_count_are_byte_identical_to_the_pinned_run(row: dict) -> None:
    # redacted.json was written by make_redacted.py before the matching engine was
    # rebuilt for speed: the engine may change, not a single result.
    plain, marked = RedactionTally(), RedactionTally()
    assert redact_secrets_text(row["text"], plain) == row["redacted"]
    assert plain.count == row["count"]
    assert redact_preserving_markers(row["text"], marked) == row["preserved"]
    assert marked.count == row["preservedCount"]
