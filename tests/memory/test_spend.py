"""Regressions of ``clio_acp.memory.spend`` found by adversarial input."""

from __future__ import annotations

import json

from clio_acp.memory.spend import UsageRow, append_usage_row, fold_spend_file
from tests.support.step_rows import step_row

GOOD_STEP_ROW = step_row()


DEEP_JSON = "[" * 100_000


def test_spend_fold_skips_a_deeply_nested_line_and_keeps_the_other_rows(tmp_path):
    ledger = tmp_path / "steps.jsonl"
    row = json.dumps(GOOD_STEP_ROW)
    ledger.write_text(f"{row}\n{DEEP_JSON}\n{row}\n", encoding="utf-8")
    summary = fold_spend_file(ledger)
    assert summary.llm_steps == 2
    assert summary.injections == 2


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
