"""Property tests for redaction, handoff round trips and the store layout (§6–§8)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.handoff import (
    HandoffSource,
    parse_handoff_snapshot,
    render_handoff_snapshot,
    seed_bank,
    snapshot_from_bank,
)
from clio_acp.memory.redact import RedactionTally, redact_preserving_markers

# Text built from secret-ish fragments, separators and free text, so the redactor's
# shapes actually occur and overlap.
_FRAGMENTS = st.sampled_from(
    [
        "api_key=",
        "password: ",
        '"token": "',
        "AKIA",
        "ABCDEFGHIJKLMNOP",
        "sk-",
        "proj-",
        "ghp_",
        "eyJ",
        "abcdefgh.",
        "xoxb-",
        "AIza",
        "[redacted:jwt]",
        "[redacted:assignment]",
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
        "frozenset({",
        "(",
        " ",
        "\n",
        "=",
        '"',
        "0123456789",
        "zzzzzzzzzzzzzzzzzzzz",
    ]
)
_TEXT = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=6)), max_size=14).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_marker_preserving_redaction_is_idempotent(text: str) -> None:
    once = redact_preserving_markers(text)
    tally = RedactionTally()
    assert redact_preserving_markers(once, tally) == once
    assert tally.count == 0


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_redaction_keeps_existing_markers(text: str) -> None:
    out = redact_preserving_markers(text)
    if "-----BEGIN" in text:
        return  # an unterminated PEM block is redacted to the end, markers included
    for marker in ("[redacted:jwt]", "[redacted:assignment]"):
        assert out.count(marker) >= text.count(marker)
    assert "\ue000" not in out or "\ue000" in text


_CONTENT = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=80
).filter(lambda s: s.strip())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_CONTENT, max_size=20),
    st.lists(_CONTENT, max_size=30),
    st.text(alphabet="abcdefghij-0123456789", min_size=1, max_size=20),
)
def test_render_parse_round_trip_and_seed_dedup(knowledge, procedural, session) -> None:
    bank = TaskMemoryBank()
    for content in knowledge:
        bank.save("knowledge", content)
    for content in procedural:
        bank.save("procedural", content)
    snapshot = snapshot_from_bank(bank, HandoffSource.for_session(session))
    text = render_handoff_snapshot(snapshot)
    assert len(text.split("\n")) == 3  # one JSON line, whatever the content
    parsed = parse_handoff_snapshot("intro\n" + text + "\nouttro")
    assert parsed is not None
    assert [e.id for e in parsed.knowledge] == [e.id for e in snapshot.knowledge]
    assert [e.content for e in parsed.knowledge] == [
        redact_preserving_markers(e.content) for e in snapshot.knowledge
    ]
    assert json.loads(text.split("\n")[1])["version"] == 2
    fresh = TaskMemoryBank()
    first = seed_bank(fresh, parsed)
    second = seed_bank(fresh, parsed)
    assert first.seeded + first.skipped == parsed.count
    assert (second.seeded, second.skipped) == (0, parsed.count)
    assert fresh.size == first.seeded
