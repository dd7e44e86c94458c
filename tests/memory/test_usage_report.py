"""Regressions of ``clio_acp.memory.usage_report`` found by adversarial input."""

from __future__ import annotations

import json

from tests.support.step_rows import step_row

GOOD_STEP_ROW = step_row()


DEEP_JSON = "[" * 100_000


def test_usage_report_cli_skips_a_deeply_nested_step_line(invoke_cli, isolated_dirs):
    ledger = isolated_dirs["state"] / "memory" / "steps.jsonl"
    ledger.parent.mkdir(parents=True)
    ledger.write_text(f"{json.dumps(GOOD_STEP_ROW)}\n{DEEP_JSON}\n", encoding="utf-8")
    done = invoke_cli("usage", "report", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["total"]["llmSteps"] == 1
    assert "Traceback" not in done.stderr
