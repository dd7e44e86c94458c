"""Issue 19 through ``clio-acp client``: ``clio.workspace`` shows the named text values the
model kept, and ``clio.memory.proposeEvent`` proposes an unapproved durable record
from a journal event (with its quick fixes), errors reported as ``RequestFailed``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from clio_acp.memory.store import MemoryStore
from clio_acp.paths import resolve_paths
from clio_acp.session.journal import Journal
from tests.lsp.conftest import DIAGNOSTICS, NEUTRAL_CLIENT, execute, wait_for
from tests.support.model_server import Reply, ToolCall

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def shared_client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


@pytest.fixture
def client(shared_client: LanguageClient) -> LanguageClient:
    """The shared server (``shared_client``): each test its own workspace."""
    return shared_client


@pytest.fixture
def shared_options() -> dict:
    return {"permissionMode": "bypass"}


VALUE = "plan: 1) reproduce 2) fix lexer.py:42 3) run the suite"


@pytest.fixture(autouse=True)
def _model(model_server):
    model_server.install_settings(memory=False)
    model_server.default = Reply(text="ok")
    return model_server


async def _session(client, model_server) -> str:
    write = json.dumps({"key": "plan", "value": VALUE})
    model_server.push(
        Reply(
            tool_calls=[
                ToolCall("workspace_write", write, id="w1"),
                ToolCall("run_command", json.dumps({"command": "echo boom >&2; exit 4"}), id="c1"),
            ]
        ),
        Reply(text="planned"),
    )
    result = await execute(client, "clio.prompt", "plan it")
    return result["sessionId"]


async def test_workspace_lists_keys_and_reads_a_value(
    client: LanguageClient, workspace: Path, model_server
):
    sid = await _session(client, model_server)
    listing = await execute(client, "clio.workspace")
    assert listing["sessionId"] == sid and listing["nextCursor"] is None
    assert [v["key"] for v in listing["values"]] == ["plan"]
    assert listing["values"][0]["chars"] == len(VALUE)
    read = await execute(client, "clio.workspace", "plan")
    assert read["text"] == VALUE and read["nextOffset"] is None
    part = await execute(client, "clio.workspace", {"key": "plan", "offset": 6, "maxChars": 4})
    assert part["text"] == VALUE[6:10] and part["nextOffset"] == 10
    with pytest.raises(JsonRpcException, match="unknown workspace key 'nope'"):
        await execute(client, "clio.workspace", {"key": "nope"})


async def test_propose_event_makes_an_unapproved_record_with_an_event_reference(
    client: LanguageClient, workspace: Path, model_server
):
    sid = await _session(client, model_server)
    store = MemoryStore(resolve_paths().records_file)
    journal = await Journal.open(resolve_paths().journal_file)
    try:
        rows = await journal.events(sid, types=["tool_result"])
    finally:
        await journal.aclose()
    failed = next(r for r in rows if r.data["status"] == "failed")
    refused = await execute(
        client, "clio.memory.proposeEvent", {"event": failed.seq, "scope": "global"}
    )
    assert refused == {"status": "needs_acknowledgement"} and store.load() == []
    result = await execute(client, "clio.memory.proposeEvent", {"event": failed.seq})
    assert result["status"] == "proposed" and result["created"] is True
    assert result["evidenceRef"] == f"event:{sid}:{failed.seq}" and "boom" in result["lesson"]
    record = store.get(result["recordId"])
    assert record.status == "proposed" and record.evidence_refs == [f"event:{sid}:{failed.seq}"]
    doc_uri = (workspace / ".clio-coder" / "memory.md").as_uri()
    await wait_for(
        client,
        DIAGNOSTICS,
        lambda: [
            d
            for d in client.diagnostics.get(doc_uri, [])
            if isinstance(d.data, dict) and d.data.get("proposalId") == result["recordId"]
        ],
    )
    with pytest.raises(JsonRpcException, match="has no event 999"):
        await execute(client, "clio.memory.proposeEvent", {"event": "999"})
