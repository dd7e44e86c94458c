"""Regressions found by adversarial testing of ``clio_acp/memory`` and its CLI.

Each test pins one input that used to break a rule of MEMORY_SPEC (a traceback, a
lost row, a corrupt file accepted and overwritten, a refused remedy) with the
expected behaviour.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.envelope import parse_envelope
from clio_acp.memory.policy import PolicyInput, ScriptedAnswerClient, run_task_memory_policy
from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.spend import UsageRow, append_usage_row, fold_spend_file
from clio_acp.memory.store import MemoryStore, MemoryStoreCorrupt, MemoryStoreLimit
from clio_acp.memory.telemetry import parse_step_line

GOOD_STEP_ROW = {
    "version": 2,
    "at": "2026-01-02T03:04:05.678Z",
    "triggerReasons": ["interval"],
    "tier": "llm",
    "bankDelta": {
        kind: {"added": 0, "updated": 0, "deleted": 0}
        for kind in ("status", "knowledge", "procedural")
    },
    "decision": "injected",
    "reason": "intervened",
    "bankOperations": 0,
    "droppedOperations": 0,
    "citedEntries": 1,
    "tokenCost": {"input": 10, "output": 5, "total": 15},
    "latencyMs": 12,
}
DEEP_JSON = "[" * 100_000


def _record(index: int, created_at: str) -> dict:
    return {
        "id": f"mem-{index:016x}",
        "scope": "global",
        "key": f"k{index}",
        "lesson": "a lesson",
        "evidenceRefs": ["session:s"],
        "appliesWhen": [],
        "avoidWhen": [],
        "confidence": 0.6,
        "createdAt": created_at,
        "approved": False,
    }


# -- envelope / bank: lone surrogates -------------------------------------------------


def test_lone_surrogate_escape_in_content_is_stored_as_replacement_char():
    answer = (
        '<operations>[{"op":"save_knowledge","content":"x\\ud800y"}]</operations>\n'
        "<no_intervention/>"
    )
    bank = TaskMemoryBank()
    result = asyncio.run(
        run_task_memory_policy(
            bank,
            PolicyInput(task="t", trajectory=[], deterministic_trigger=False, max_tokens=100),
            ScriptedAnswerClient(answer),
        )
    )
    assert result.bank_operations == 1
    assert bank.knowledge[0].content == "x\ufffdy"
    json.dumps(bank.snapshot(), ensure_ascii=False).encode("utf-8")  # must not raise


def test_lone_surrogate_in_raw_reminder_text_becomes_replacement_char():
    parsed = parse_envelope(
        "<operations>[]</operations>\n<context_for_action>[tm-k-1] a\ud800b</context_for_action>"
    )
    assert parsed.reminder == "[tm-k-1] a\ufffdb"


def test_memory_parse_cli_prints_a_lone_surrogate_escape_without_traceback(run_cli):
    answer = (
        '<operations>[{"op":"save_knowledge","content":"x\\ud800y"}]</operations>\n'
        "<no_intervention/>"
    )
    done = run_cli("memory", "parse", input=answer)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["bank"]["knowledge"][0]["content"] == "x\ufffdy"


# -- policy: path gate ---------------------------------------------------------------------


def test_path_gate_reference_too_long_for_the_os_is_invalid_path_not_an_exception(tmp_path):
    (tmp_path / "src").mkdir()
    bank = TaskMemoryBank()
    bank.save("knowledge", "The operator requires visible reminders.")
    name = "a" * 260  # one component over NAME_MAX (255): stat raises ENAMETOOLONG
    answer = (
        "<operations>[]</operations>\n"
        f"<context_for_action>[tm-k-1] see src/{name}.py now</context_for_action>"
    )
    result = asyncio.run(
        run_task_memory_policy(
            bank,
            PolicyInput(
                task="t",
                trajectory=[],
                deterministic_trigger=False,
                max_tokens=100,
                workspace_root=tmp_path,
            ),
            ScriptedAnswerClient(answer),
        )
    )
    assert (result.decision, result.reason) == ("gated", "invalid_path")
    assert bank.get("tm-k-1").injection_count == 0


# -- telemetry and usage ---------------------------------------------------------------------


def test_deeply_nested_step_line_is_a_value_error():
    with pytest.raises(ValueError):
        parse_step_line(DEEP_JSON)


def test_spend_fold_skips_a_deeply_nested_line_and_keeps_the_other_rows(tmp_path):
    ledger = tmp_path / "steps.jsonl"
    row = json.dumps(GOOD_STEP_ROW)
    ledger.write_text(f"{row}\n{DEEP_JSON}\n{row}\n", encoding="utf-8")
    summary = fold_spend_file(ledger)
    assert summary.llm_steps == 2
    assert summary.injections == 2


def test_usage_report_cli_skips_a_deeply_nested_step_line(run_cli, isolated_dirs):
    ledger = isolated_dirs["state"] / "memory" / "steps.jsonl"
    ledger.parent.mkdir(parents=True)
    ledger.write_text(f"{json.dumps(GOOD_STEP_ROW)}\n{DEEP_JSON}\n", encoding="utf-8")
    done = run_cli("usage", "report", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["total"]["llmSteps"] == 1
    assert "Traceback" not in done.stderr


def test_usage_ring_keeps_appending_after_a_line_with_invalid_utf8(tmp_path):
    ring = tmp_path / "out-of-turn.jsonl"
    corrupt = b"\xff\xfe not utf-8\n"
    ring.write_bytes(corrupt)
    row = UsageRow.model_validate(
        {"sessionId": "s1", "usage": {"input": 3, "output": 2}, "timing": {"durationMs": 5}}
    )
    append_usage_row(ring, row)
    data = ring.read_bytes()
    assert data.startswith(corrupt)  # the other line's bytes are preserved
    last = json.loads(data.splitlines()[-1])
    assert last["sessionId"] == "s1"


# -- durable store -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        DEEP_JSON,
        "{}",
        '{"records": []}',
        '{"version": 1}',
        '{"version": true, "records": []}',
    ],
    ids=["deep-nesting", "empty-object", "no-version", "no-records", "version-true"],
)
def test_invalid_records_file_is_reported_and_never_overwritten(tmp_path, text):
    path = tmp_path / "records.json"
    path.write_text(text, encoding="utf-8")
    before = path.read_bytes()
    store = MemoryStore(path)
    with pytest.raises(MemoryStoreCorrupt):
        store.load()
    with pytest.raises(MemoryStoreCorrupt):
        store.add_if_absent(MemoryRecord.model_validate(_record(1, "2026-01-01T00:00:00.000Z")))
    assert path.read_bytes() == before


def test_memory_list_cli_reports_a_deeply_nested_records_file(run_cli, isolated_dirs):
    path = isolated_dirs["data"] / "memory" / "records.json"
    path.parent.mkdir(parents=True)
    path.write_text(DEEP_JSON, encoding="utf-8")
    done = run_cli("memory", "list")
    assert done.returncode == 1
    assert "is invalid and was left untouched" in done.stderr
    assert "Traceback" not in done.stderr
    assert path.read_text(encoding="utf-8") == DEEP_JSON


def test_prune_and_approve_work_on_a_store_already_over_the_cap(tmp_path):
    path = tmp_path / "records.json"
    records = [
        _record(i, "2020-01-01T00:00:00.000Z" if i < 5 else "2099-01-01T00:00:00.000Z")
        for i in range(510)
    ]
    path.write_text(json.dumps({"version": 1, "records": records}), encoding="utf-8")
    store = MemoryStore(path)
    removed = store.prune_stale()  # the remedy the cap error names must not be refused
    assert len(removed) == 5
    assert len(store.load()) == 505
    assert store.approve(f"mem-{100:016x}").approved is True


def test_a_store_over_the_cap_still_refuses_to_grow(tmp_path):
    path = tmp_path / "records.json"
    records = [_record(i, "2099-01-01T00:00:00.000Z") for i in range(500)]
    path.write_text(json.dumps({"version": 1, "records": records}), encoding="utf-8")
    with pytest.raises(MemoryStoreLimit):
        MemoryStore(path).add_if_absent(
            MemoryRecord.model_validate(_record(999, "2099-01-01T00:00:00.000Z"))
        )


def test_store_still_writes_version_and_records(tmp_path):
    path = tmp_path / "records.json"
    MemoryStore(path).add_if_absent(
        MemoryRecord.model_validate(_record(1, "2026-01-01T00:00:00.000Z"))
    )
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 1 and len(data["records"]) == 1


# -- replay and memory parse: malformed files -------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.json", DEEP_JSON),
        ("null-message.traj.json", '{"messages": [null, 5]}'),
    ],
    ids=["deep-nesting", "null-message"],
)
def test_replay_reports_a_malformed_trajectory_without_traceback(run_cli, tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    done = run_cli("replay", str(path))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert str(path) in done.stderr


@pytest.mark.parametrize("flag", ["--bank", "--trajectory"])
def test_memory_parse_deeply_nested_input_file_is_a_usage_error(run_cli, tmp_path, flag):
    path = tmp_path / "deep.json"
    path.write_text(DEEP_JSON, encoding="utf-8")
    done = run_cli("memory", "parse", flag, str(path), input="<operations>[]</operations>")
    assert done.returncode == 2
    assert "is not valid JSON" in done.stderr
    assert "Traceback" not in done.stderr


# -- promotion: secrets in source identifiers ---------------------------------------------


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
    run_cli, tmp_path, isolated_dirs, session_id, evidence, entry_id
):
    handoff = tmp_path / "handoff.md"
    handoff.write_text(_handoff_with_source(session_id, evidence, entry_id), encoding="utf-8")
    done = run_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "global",
        "--acknowledge-global",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    records = isolated_dirs["data"] / "memory" / "records.json"
    assert not records.exists()


def test_promote_of_a_clean_handoff_redacts_the_lesson_and_writes_no_secret(
    run_cli, tmp_path, isolated_dirs
):
    handoff = tmp_path / "handoff.md"
    handoff.write_text(_handoff_with_source("s1", "session:s1", "tm-k-1"), encoding="utf-8")
    done = run_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "global",
        "--acknowledge-global",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (isolated_dirs["data"] / "memory" / "records.json").read_text(encoding="utf-8")
    assert "super-secret-value" not in text
    assert "API_KEY=[redacted:assignment]" in text


# -- bank restore: hostile snapshots ------------------------------------------------------

T0 = "2026-01-01T00:00:00.000Z"


def _entry(entry_id: str, kind: str, stamp: str = T0) -> dict:
    return {
        "id": entry_id,
        "kind": kind,
        "content": "c",
        "createdAt": stamp,
        "lastTouchedAt": stamp,
        "injectionCount": 0,
    }


@pytest.mark.parametrize(
    "snapshot",
    [
        {
            "version": 1,
            "status": _entry("tm-k-1", "status"),
            "knowledge": [_entry("tm-k-1", "knowledge")],
            "procedural": [_entry("tm-k-1", "procedural")],
        },
        {
            "version": 1,
            "status": None,
            "knowledge": [_entry("tm-k-1", "knowledge"), _entry("tm-k-1", "knowledge")],
            "procedural": [],
        },
        {"version": True, "status": None, "knowledge": [], "procedural": []},
        {"version": 1, "status": None, "knowledge": [_entry(5, "knowledge")], "procedural": []},
        {
            "version": 1,
            "status": None,
            "knowledge": [_entry("tm-k-1", "knowledge", "2026-01-01T00:00:00Z")],
            "procedural": [],
        },
    ],
    ids=["id-in-three-classes", "id-twice-in-a-class", "version-true", "int-id", "no-millis"],
)
def test_bank_restore_rejects_a_hostile_snapshot_and_keeps_the_bank(snapshot):
    bank = TaskMemoryBank()
    bank.save("knowledge", "kept")
    before = bank.snapshot()
    with pytest.raises(ValueError):
        bank.restore(snapshot)
    assert bank.snapshot() == before


def test_restored_bank_always_writes_a_parseable_handoff(tmp_path):
    from clio_acp.memory.handoff import parse_handoff_snapshot, write_handoff_artifact

    bank = TaskMemoryBank()
    bank.restore(
        {
            "version": 1,
            "status": None,
            "knowledge": [_entry("tm-k-1", "knowledge")],
            "procedural": [],
        }
    )
    path = write_handoff_artifact(
        tmp_path, task="t", latest_instruction="i", bank=bank, session_id="s1", git_branch="m"
    )
    snapshot = parse_handoff_snapshot(path.read_text(encoding="utf-8"))
    assert snapshot is not None
    assert [e.id for e in snapshot.knowledge] == ["tm-k-1"]


# -- handoff: lone surrogates from JSON escapes ------------------------------------------


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


def test_handoff_content_with_a_lone_surrogate_escape_parses_with_replacement_char():
    from clio_acp.memory.handoff import parse_handoff_snapshot

    snapshot = parse_handoff_snapshot(_handoff_text('"fact \\ud800 x"'))
    assert snapshot is not None
    assert snapshot.knowledge[0].content == "fact \ufffd x"


def test_handoff_entry_id_with_a_lone_surrogate_escape_is_invalid():
    from clio_acp.memory.handoff import parse_handoff_snapshot

    parsed = parse_handoff_snapshot(_handoff_text('"fact"', '"tm-k-\\ud800"'))
    assert parsed is not None and parsed.count == 0
    assert parsed.rejected == ("knowledge[0]: id is not a non-blank string",)


def test_promote_from_a_handoff_with_a_lone_surrogate_escape_writes_utf8(
    run_cli, tmp_path, isolated_dirs
):
    handoff = tmp_path / "handoff.md"
    handoff.write_text(_handoff_text('"fact \\ud800 x"'), encoding="utf-8")
    done = run_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "global",
        "--acknowledge-global",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = (isolated_dirs["data"] / "memory" / "records.json").read_text(encoding="utf-8")
    assert json.loads(records)["records"][0]["lesson"] == "fact \ufffd x"
