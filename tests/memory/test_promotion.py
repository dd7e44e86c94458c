"""Promotion of bank entries and auto-proposal on LLM-tier injection (MEMORY_SPEC §6)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.promotion import (
    NeedsAcknowledgement,
    PromotionError,
    PromotionSource,
    ScopeSelection,
    apropose_injected_entries,
    promote,
    propose_injected_entries,
    record_from_promotion,
)
from clio_acp.memory.retrieval import ActiveIdentity, build_prompt_section
from clio_acp.memory.store import MemoryStore
from clio_acp.paths import resolve_paths
from tests.support.waiting import wait_until

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(resolve_paths().records_file, clock=lambda: NOW)


@pytest.fixture
def bank() -> TaskMemoryBank:
    bank = TaskMemoryBank()
    bank.save("knowledge", "The operator requires visible reminders.")
    bank.save("procedural", "Use API_KEY=super-secret-value in the fixture.")
    bank.update_status("Private progress note.")
    return bank


def source_for(entry, session_id: str = "sess-1", **kw) -> PromotionSource:
    return PromotionSource(
        kind="task-bank-entry",
        session_id=session_id,
        evidence_refs=kw.pop("evidence_refs", (f"session:{session_id}",)),
        entry=entry,
        **kw,
    )


def test_repo_promotion_builds_the_spec_record(bank: TaskMemoryBank, tmp_path: Path) -> None:
    repo = str(tmp_path.resolve())
    entry = bank.get("tm-k-1")
    record = record_from_promotion(source_for(entry), ScopeSelection.repo(repo), NOW)
    assert record.scope == "repo" and record.repository and record.repository.key == repo
    assert record.key == "promotion:task-bank-entry:sess-1:tm-k-1"
    assert record.lesson == entry.content
    assert record.applies_when == [f"repository:canonical-path:{repo}"]
    assert record.avoid_when == [] and record.confidence == 0.6 and record.approved is False
    assert record.status == "proposed"
    prov = record.provenance
    assert prov is not None
    assert (prov.source_kind, prov.source_session_id, prov.source_entry_id) == (
        "task-bank-entry",
        "sess-1",
        "tm-k-1",
    )
    assert prov.source_entry_kind == "knowledge"
    assert prov.source_entry_created_at == entry.created_at
    assert prov.redaction is not None and prov.redaction.replacement_count == 0
    assert prov.redaction.source_fields == []
    # The id is sha256 over compact JSON of exactly these keys in this order.
    payload = {
        "sourceKind": "task-bank-entry",
        "sessionId": "sess-1",
        "entryId": "tm-k-1",
        "entryKind": "knowledge",
        "evidenceRefs": ["session:sess-1"],
        "lesson": entry.content,
        "scopeKey": f"repo:canonical-path:{repo}",
    }
    digest = hashlib.sha256(json.dumps(payload, separators=(",", ":")).encode()).hexdigest()
    assert record.id == "mem-" + digest[:16]


def test_promotion_is_idempotent(store: MemoryStore, bank: TaskMemoryBank, tmp_path: Path) -> None:
    selection = ScopeSelection.repo(str(tmp_path.resolve()))
    first = promote(store, source_for(bank.get("tm-k-1")), selection, NOW)
    later = datetime(2026, 12, 1, tzinfo=UTC)
    again = promote(store, source_for(bank.get("tm-k-1")), selection, later)
    assert first.created and not again.created
    assert again.record == first.record
    assert len(store.load()) == 1
    # A different scope is a different proposal.
    other = promote(
        store, source_for(bank.get("tm-k-1")), ScopeSelection.global_(acknowledge_global=True)
    )
    assert other.created and other.record.id != first.record.id
    assert other.record.applies_when == []


def test_secret_is_redacted_before_persistence(store: MemoryStore, bank: TaskMemoryBank) -> None:
    result = promote(
        store, source_for(bank.get("tm-p-2")), ScopeSelection.global_(acknowledge_global=True)
    )
    record = result.record
    assert record.lesson == "Use API_KEY=[redacted:assignment] in the fixture."
    # The bank redacted the entry when it was saved (issue 17), so promotion finds
    # nothing left to replace; the secret never reached the bank, let alone the store.
    assert record.provenance.redaction.replacement_count == 0
    assert record.provenance.redaction.source_fields == []
    assert "super-secret-value" not in store.path.read_text()


def test_markers_from_upstream_are_preserved_and_not_recounted(tmp_path: Path) -> None:
    bank = TaskMemoryBank()
    entry = bank.save("knowledge", "token=[redacted:jwt] stays as is")
    record = record_from_promotion(
        PromotionSource(
            "handoff-snapshot",
            "sess",
            ("session:sess",),
            entry,
            redaction=(1, ("knowledge[0].content",)),
        ),
        ScopeSelection.repo(str(tmp_path.resolve())),
    )
    assert record.lesson == "token=[redacted:jwt] stays as is"
    assert record.provenance.redaction.replacement_count == 1
    assert record.provenance.redaction.source_fields == ["knowledge[0].content"]


def test_status_is_never_promoted(bank: TaskMemoryBank) -> None:
    status = bank.status
    assert status is not None
    with pytest.raises(PromotionError, match="status"):
        record_from_promotion(source_for(status), ScopeSelection.global_(acknowledge_global=True))


def test_global_needs_acknowledgement(store: MemoryStore, bank: TaskMemoryBank) -> None:
    with pytest.raises(NeedsAcknowledgement):
        promote(
            store, source_for(bank.get("tm-k-1")), ScopeSelection.global_(acknowledge_global=False)
        )
    assert not store.path.exists()


def test_repo_scope_requires_a_canonical_key(bank: TaskMemoryBank, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    entry = bank.get("tm-k-1")
    for bad in (str(link), "relative/repo", str(tmp_path) + "/", ""):
        with pytest.raises(PromotionError, match="canonical"):
            record_from_promotion(source_for(entry), ScopeSelection.repo(bad))


def test_runtime_and_agent_scopes_need_an_identity_of_the_source(bank: TaskMemoryBank) -> None:
    entry = bank.get("tm-k-1")
    src = source_for(entry, runtime_ids=("node-22",), agent_ids=("claude",))
    record = record_from_promotion(src, ScopeSelection.runtime("node-22"))
    assert record.runtime.key == "node-22" and record.applies_when == ["runtime:node-22"]
    record = record_from_promotion(src, ScopeSelection.agent("claude"))
    assert record.agent.key == "claude" and record.applies_when == ["agent:claude"]
    with pytest.raises(PromotionError, match="does not match"):
        record_from_promotion(src, ScopeSelection.runtime("python-3"))
    with pytest.raises(PromotionError):
        record_from_promotion(src, ScopeSelection.agent("has space"))


@pytest.mark.parametrize(
    "kw",
    [
        {"session_id": " padded"},
        {"session_id": "a\nb"},
        {"session_id": "x" * 1025},
        {"evidence_refs": ()},
        {"evidence_refs": ("ok", "")},
    ],
)
def test_invalid_source_values_are_refused(bank: TaskMemoryBank, kw: dict) -> None:
    session_id = kw.pop("session_id", "sess")
    with pytest.raises(PromotionError):
        record_from_promotion(
            source_for(bank.get("tm-k-1"), session_id, **kw),
            ScopeSelection.global_(acknowledge_global=True),
        )


def test_auto_proposal_is_llm_tier_only_repo_scoped_and_unapproved(
    store: MemoryStore, bank: TaskMemoryBank, tmp_path: Path
) -> None:
    link = tmp_path / "work-link"
    link.symlink_to(tmp_path)
    entries = [bank.get("tm-k-1"), bank.get("tm-p-2"), bank.status]
    rules = propose_injected_entries(
        store, tier="rules", session_id="s1", cwd=str(link), entries=entries
    )
    assert rules.records == [] and not store.path.exists()
    outcome = propose_injected_entries(
        store, tier="llm", session_id="s1", cwd=str(link), entries=entries, now=NOW
    )
    assert outcome.created == 2 and outcome.errors == []
    records = store.load()
    assert {r.provenance.source_entry_id for r in records} == {"tm-k-1", "tm-p-2"}
    for record in records:
        assert record.scope == "repo" and not record.approved
        assert record.repository.key == str(tmp_path.resolve())
        assert record.evidence_refs == ["session:s1"]
    # Unapproved proposals never reach a prompt.
    active = ActiveIdentity(repository=str(tmp_path.resolve()))
    assert build_prompt_section(records, active).text == ""
    again = propose_injected_entries(
        store, tier="llm", session_id="s1", cwd=str(tmp_path), entries=entries, now=NOW
    )
    assert again.created == 0 and len(store.load()) == 2


@pytest.mark.parametrize(
    ("session_id", "cwd"), [(None, "/tmp"), ("", "/tmp"), ("s", "rel"), ("s", None)]
)
def test_auto_proposal_needs_session_and_absolute_cwd(
    store: MemoryStore, bank: TaskMemoryBank, session_id, cwd
) -> None:
    outcome = propose_injected_entries(
        store, tier="llm", session_id=session_id, cwd=cwd, entries=[bank.get("tm-k-1")]
    )
    assert outcome.records == [] and not store.path.exists()


def test_auto_proposal_reports_store_errors_without_raising(
    store: MemoryStore, bank: TaskMemoryBank, tmp_path: Path
) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_text("{broken")
    outcome = propose_injected_entries(
        store, tier="llm", session_id="s", cwd=str(tmp_path), entries=[bank.get("tm-k-1")]
    )
    assert outcome.records == [] and len(outcome.errors) == 1
    assert "tm-k-1" in outcome.errors[0]
    assert store.path.read_text() == "{broken"


async def test_async_auto_proposal_copies_entries_before_the_write(
    store: MemoryStore, bank: TaskMemoryBank, tmp_path: Path
) -> None:
    outcome = await apropose_injected_entries(
        store, tier="llm", session_id="s", cwd=str(tmp_path), entries=[bank.get("tm-k-1")]
    )
    assert outcome.created == 1
    assert store.load()[0].lesson == "The operator requires visible reminders."


async def test_auto_proposal_hook_reads_the_post_step_bank_and_reports_new_records(
    store: MemoryStore, bank: TaskMemoryBank, tmp_path: Path
) -> None:

    from clio_acp.memory.promotion import make_auto_proposal_hook

    proposed: list = []
    hook = make_auto_proposal_hook(
        store,
        bank=lambda: bank,
        session_id=lambda: "s1",
        cwd=lambda: str(tmp_path),
        on_proposed=proposed.extend,
    )
    status_id = bank.status.id
    hook(("tm-k-1", status_id, "tm-k-99", "tm-k-1"))
    # The entry changes after the step: the proposal keeps what the reminder cited.
    bank.save("knowledge", "Changed later.", "tm-k-1")
    await wait_until(lambda: proposed)
    assert [r.lesson for r in proposed] == ["The operator requires visible reminders."]
    assert [r.provenance.source_entry_id for r in store.load()] == ["tm-k-1"]
    hook(("tm-k-2",))  # unknown now → nothing
    proposed.clear()
    hook(("tm-p-2",))
    await wait_until(lambda: proposed)
    assert len(store.load()) == 2 and proposed[0].scope == "repo"


def test_auto_proposal_hook_without_a_loop_writes_synchronously(
    store: MemoryStore, bank: TaskMemoryBank, tmp_path: Path
) -> None:
    from clio_acp.memory.promotion import make_auto_proposal_hook

    hook = make_auto_proposal_hook(
        store, bank=lambda: bank, session_id=lambda: None, cwd=lambda: str(tmp_path)
    )
    hook(("tm-k-1",))
    assert not store.path.exists()  # no session id: nothing is proposed
    hook = make_auto_proposal_hook(
        store, bank=lambda: bank, session_id=lambda: "s", cwd=lambda: str(tmp_path)
    )
    hook(("tm-k-1",))
    assert len(store.load()) == 1


# -- regressions from adversarial input ----------------------------------------


def _handoff_with_source(session_id: str, evidence: str, entry_id: str) -> str:
    stamp = "2026-01-01T00:00:00.000Z"
    snapshot = {
        "version": 2,
        "source": {
            "sessionId": session_id,
            "evidenceRefs": [evidence],
            "runtimeIds": [],
            "agentIds": [],
        },
        "redaction": {"replacementCount": 0, "sourceFields": []},
        "knowledge": [
            {
                "id": entry_id,
                "content": "Use API_KEY=super-secret-value in the fixture.",
                "injectionCount": 0,
                "createdAt": stamp,
                "lastTouchedAt": stamp,
            }
        ],
        "procedural": [],
    }
    return "# h\n\n```clio-coder-task-memory\n" + json.dumps(snapshot) + "\n```\n"


def _handoff_text(content_json: str, entry_id_json: str = '"tm-k-1"') -> str:
    stamp = "2026-01-01T00:00:00.000Z"
    return (
        "```clio-coder-task-memory\n"
        '{"version":2,"source":{"sessionId":"s1","evidenceRefs":["session:s1"],'
        '"runtimeIds":[],"agentIds":[]},"redaction":{"replacementCount":0,"sourceFields":[]},'
        f'"knowledge":[{{"id":{entry_id_json},"content":{content_json},"injectionCount":0,'
        f'"createdAt":"{stamp}","lastTouchedAt":"{stamp}"}}],"procedural":[]}}\n'
        "```\n"
    )


@pytest.mark.parametrize(
    ("session_id", "evidence", "entry_id"),
    [
        ("AKIAABCDEFGHIJKLMNOP", "session:s1", "tm-k-1"),
        ("s1", "token=supersecretvalue1", "tm-k-1"),
        ("s1", "session:s1", "ghp_abcdefghijklmnopqrstuvwxyz"),
    ],
    ids=["session-id", "evidence-ref", "entry-id"],
)
def test_promote_refuses_a_handoff_whose_identifiers_hold_a_secret(
    invoke_cli, tmp_path, isolated_dirs, session_id, evidence, entry_id
):
    handoff = tmp_path / "handoff.md"
    handoff.write_text(_handoff_with_source(session_id, evidence, entry_id), encoding="utf-8")
    done = invoke_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "global",
        "--acknowledge-global",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    records = isolated_dirs["data"] / "memory" / "records.json"
    assert not records.exists()


def test_promote_of_a_clean_handoff_redacts_the_lesson_and_writes_no_secret(
    invoke_cli, tmp_path, isolated_dirs
):
    handoff = tmp_path / "handoff.md"
    handoff.write_text(_handoff_with_source("s1", "session:s1", "tm-k-1"), encoding="utf-8")
    done = invoke_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "global",
        "--acknowledge-global",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (isolated_dirs["data"] / "memory" / "records.json").read_text(encoding="utf-8")
    assert "super-secret-value" not in text
    assert "API_KEY=[redacted:assignment]" in text


def test_promote_from_a_handoff_with_a_lone_surrogate_escape_writes_utf8(
    invoke_cli, tmp_path, isolated_dirs
):
    handoff = tmp_path / "handoff.md"
    handoff.write_text(_handoff_text('"fact \\ud800 x"'), encoding="utf-8")
    done = invoke_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "global",
        "--acknowledge-global",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = (isolated_dirs["data"] / "memory" / "records.json").read_text(encoding="utf-8")
    assert json.loads(records)["records"][0]["lesson"] == "fact \ufffd x"
