"""The memory commands (issue 8 item 1): ``clio.memory.show`` (the board and the memory
document), ``clio.memory.promote`` (a bank entry becomes a pending proposal with its
quick fixes), ``clio.handoff`` (a handoff file with no model call) and
``clio.memory.seed``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_lsp import LanguageClient

from clio_acp.memory.store import MemoryStore
from clio_acp.paths import resolve_paths
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


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _model(model_server):
    model_server.install_settings(memory=False)
    model_server.default = Reply(text="ok")
    return model_server


async def _session_with_an_entry(client, model_server) -> dict:
    """A session whose bank holds one procedural entry (a repeated failure)."""
    read = json.dumps({"path": "missing.py"})
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", read, id="r1")]),
        Reply(tool_calls=[ToolCall("read_file", read, id="r2")]),
        Reply(text="giving up on that file"),
    )
    await execute(client, "clio.prompt", "read missing.py")
    shown = await execute(client, "clio.memory.show")
    assert shown["board"]["bank"]["procedural"], shown["board"]
    return shown


async def test_show_returns_the_board_and_writes_the_memory_document(
    client: LanguageClient, workspace: Path, model_server
):
    shown = await _session_with_an_entry(client, model_server)
    entry = shown["board"]["bank"]["procedural"][0]
    assert shown["board"]["tier"] == "rules" and "status" not in shown["board"]["bank"]
    doc = _read(workspace / ".clio-coder" / "memory.md")
    assert f"- [{entry['id']}]" in doc and f"Session: `{shown['sessionId']}`" in doc


async def test_promote_makes_a_pending_proposal_with_quick_fixes(
    client: LanguageClient, workspace: Path, model_server
):
    shown = await _session_with_an_entry(client, model_server)
    entry_id = shown["board"]["bank"]["procedural"][0]["id"]
    refused = await execute(client, "clio.memory.promote", {"entryId": entry_id, "scope": "global"})
    assert refused == {"status": "needs_acknowledgement"}
    promoted = await execute(
        client,
        "clio.memory.promote",
        {"entryId": entry_id, "scope": "global", "acknowledgeGlobal": True},
    )
    assert promoted["status"] == "proposed" and promoted["created"] is True
    record = MemoryStore(resolve_paths().records_file).get(promoted["recordId"])
    assert record.status == "proposed" and "missing.py" in record.lesson
    doc_uri = (workspace / ".clio-coder" / "memory.md").as_uri()
    diagnostics = await wait_for(
        client,
        DIAGNOSTICS,
        lambda: [
            d
            for d in client.diagnostics.get(doc_uri, [])
            if isinstance(d.data, dict) and d.data.get("proposalId") == promoted["recordId"]
        ],
    )
    assert diagnostics[0].source == "clio-memory"


async def test_promote_of_an_unknown_entry_is_a_clear_failure(
    client: LanguageClient, workspace: Path, model_server
):
    from pygls.exceptions import JsonRpcException

    await _session_with_an_entry(client, model_server)
    with pytest.raises(JsonRpcException) as caught:
        await execute(client, "clio.memory.promote", {"entryId": "tm-k-99", "scope": "repo"})
    assert "tm-k-99" in caught.value.message


async def test_handoff_writes_a_file_that_seed_reads_back(
    client: LanguageClient, workspace: Path, model_server
):
    await _session_with_an_entry(client, model_server)
    written = await execute(client, "clio.handoff")
    path = Path(written["path"])
    assert path.parent == workspace / ".clio-coder" / "handoffs"
    assert path.name.startswith("handoff-") and written["uri"] == path.as_uri()
    assert "clio-coder-task-memory" in _read(path)
    await execute(client, "clio.session.new")
    seeded = await execute(client, "clio.memory.seed")
    assert seeded["seeded"] == 1 and seeded["source"] == path.name
