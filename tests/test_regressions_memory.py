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
