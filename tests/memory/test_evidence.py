"""Proposals from evidence (issue 19 item 3; MEMORY_SPEC §6): the same promotion rules —
explicit validated scope, redaction, unapproved, idempotent ids — with ``evidence``
provenance pointing at one journal event."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from clio_acp.memory.evidence import (
    LESSON_MAX_CHARS,
    EvidenceSource,
    event_evidence_id,
    propose_from_evidence,
    record_from_evidence,
)
from clio_acp.memory.identity import canonical_repository_identity
from clio_acp.memory.promotion import NeedsAcknowledgement, PromotionError, ScopeSelection
from clio_acp.memory.store import MemoryStore

SID = "sess_0123abcd"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _source(text: str = "pytest -q failed: exit 1: E   ImportError: no module named yaml"):
    return EvidenceSource(event_evidence_id(SID, 12), SID, text)


def _repo(tmp_path) -> ScopeSelection:
    key = canonical_repository_identity(str(tmp_path))
    assert key is not None
    return ScopeSelection.repo(key)


def test_a_repo_proposal_is_unapproved_with_event_evidence_and_provenance(tmp_path):
    record = record_from_evidence(_source(), _repo(tmp_path), NOW)
    data = record.to_json_dict()
    assert data["approved"] is False and record.status == "proposed"
    assert data["evidenceRefs"] == [f"event:{SID}:12"]
    assert data["scope"] == "repo" and data["repository"]["key"] == os.path.realpath(tmp_path)
    assert data["provenance"] == {
        "sourceKind": "evidence",
        "evidenceId": f"event:{SID}:12",
        "sourceSessionId": SID,
        "redaction": {"appliedBeforePersistence": True, "replacementCount": 0, "sourceFields": []},
    }
    assert data["lesson"] == "pytest -q failed: exit 1: E ImportError: no module named yaml"
    assert data["key"] == f"promotion:evidence:event:{SID}:12"
    assert data["confidence"] == 0.6


def test_the_id_is_idempotent_and_depends_on_lesson_and_scope(tmp_path):
    store = MemoryStore(tmp_path / "records.json")
    first = propose_from_evidence(store, _source(), _repo(tmp_path), NOW)
    again = propose_from_evidence(store, _source(), _repo(tmp_path), NOW)
    assert first.created and not again.created and again.record.id == first.record.id
    other = record_from_evidence(_source("a different lesson"), _repo(tmp_path), NOW)
    wide = record_from_evidence(_source(), ScopeSelection.global_(acknowledge_global=True), NOW)
    assert len({first.record.id, other.id, wide.id}) == 3
    assert len(store.load()) == 1


def test_global_scope_needs_the_acknowledgement_and_writes_nothing_without_it(tmp_path):
    store = MemoryStore(tmp_path / "records.json")
    with pytest.raises(NeedsAcknowledgement):
        propose_from_evidence(store, _source(), ScopeSelection.global_(acknowledge_global=False))
    assert store.load() == []
    record = record_from_evidence(_source(), ScopeSelection.global_(acknowledge_global=True))
    assert record.scope == "global" and record.repository is None and record.applies_when == []


@pytest.mark.parametrize(
    "selection",
    [ScopeSelection.runtime("llamacpp"), ScopeSelection.agent("clio"), ScopeSelection.repo("rel")],
)
def test_scopes_an_event_cannot_back_are_refused(selection):
    with pytest.raises(PromotionError):
        record_from_evidence(_source(), selection)


def test_secrets_in_the_lesson_are_redacted_and_counted(tmp_path):
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    record = record_from_evidence(_source(f"deploy with token {token} works"), _repo(tmp_path))
    assert token not in record.lesson and "[redacted:" in record.lesson
    facts = record.provenance.redaction
    assert facts.replacement_count >= 1 and facts.source_fields == ["content"]


def test_a_long_lesson_is_cut_after_redaction(tmp_path):
    record = record_from_evidence(_source("word " * 1000), _repo(tmp_path))
    assert len(record.lesson) <= LESSON_MAX_CHARS


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_evidence_without_text_is_refused(tmp_path, text):
    with pytest.raises(PromotionError, match="no text"):
        record_from_evidence(_source(text), _repo(tmp_path))


def test_a_secret_shaped_session_id_is_refused(tmp_path):
    bad = "AKIA" + "ABCDEFGHIJKLMNOP"
    with pytest.raises(PromotionError):
        record_from_evidence(EvidenceSource(f"event:{bad}:1", bad, "lesson"), _repo(tmp_path))
