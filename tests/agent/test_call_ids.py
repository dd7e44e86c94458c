"""Tool-call ids unique per session (``agent/call_ids.py``), also across a reload."""

from __future__ import annotations

from types import SimpleNamespace

from clio_acp.agent import history
from clio_acp.agent.call_ids import CallIds
from clio_acp.agent.model_port import ModelToolCall


def test_ids_from_the_journal_are_taken_and_repeats_renamed():
    rows = [SimpleNamespace(type=history.ROW_ASSISTANT, data={"tool_calls": [{"id": "call_0"}]})]
    ids = CallIds(rows)
    calls = [ModelToolCall("call_0", "read_file", "{}"), ModelToolCall("", "glob", "{}")]
    renamed = ids.renamed(calls)
    assert [c.id for c in renamed] == ["call_0_1", "call"]
    assert ids.unique("call") == "call_1"
    assert renamed[0].name == "read_file" and renamed[0].arguments == "{}"
