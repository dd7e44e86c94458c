"""Memory proposals as code actions (issue 8 item 3): quick fixes "Approve memory: …" /
"Reject memory: …" for diagnostics carrying a proposal id, matched by source/data
(or message) and never by range, and one source action listing every pending proposal.

Proposals are real unapproved records in ``<data>/memory/records.json`` (the durable
store). The tests share one server (``shared_client``), so the records are
written after it started; the one test with its own server (an old client's
capabilities) writes them before it starts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.store import MemoryStore
from clio_acp.paths import resolve_paths
from clio_acp.timestamps import format_timestamp
from tests.lsp.conftest import DIAGNOSTICS, execute, initialize_params, raw_request, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def client(shared_client: LanguageClient) -> LanguageClient:
    return shared_client


PENDING = "mem-00000000000000a1"
OTHER = "mem-00000000000000a2"
APPROVED = "mem-00000000000000a3"


def _record(record_id: str, lesson: str, approved: bool = False) -> MemoryRecord:
    return MemoryRecord.model_validate(
        {
            "id": record_id,
            "scope": "global",
            "key": f"key-{record_id}",
            "lesson": lesson,
            "evidenceRefs": ["session:s1"],
            "appliesWhen": [],
            "avoidWhen": [],
            "confidence": 0.6,
            "createdAt": format_timestamp(datetime(2026, 11, 1, tzinfo=UTC)),
            "approved": approved,
        }
    )


def _write_records() -> MemoryStore:
    store = MemoryStore(resolve_paths().records_file)
    store.add_if_absent(_record(PENDING, "Run the tests with uv run pytest, not python -m."))
    store.add_if_absent(_record(OTHER, "The fixtures live in tests/data."))
    store.add_if_absent(_record(APPROVED, "Already approved lesson.", approved=True))
    return store


@pytest.fixture
def store(client: LanguageClient) -> MemoryStore:
    """The records, once the shared server is this test's (it starts with none)."""
    return _write_records()


@pytest.fixture
def store_before_start(isolated_dirs) -> MemoryStore:
    return _write_records()


def _doc_uri(workspace: Path) -> str:
    return (workspace / ".clio-coder" / "memory.md").as_uri()


async def _proposal_diagnostics(client: LanguageClient, workspace: Path, count: int):
    """The proposal diagnostics once ``count`` are shown (a memory command writes the
    document first: nothing is written into the workspace before the user asks)."""
    await execute(client, "clio.memory.show")
    uri = _doc_uri(workspace)
    return await wait_for(
        client,
        DIAGNOSTICS,
        lambda: (
            len([d for d in client.diagnostics.get(uri, []) if d.code == "proposal"]) == count
            and [d for d in client.diagnostics[uri] if d.code == "proposal"]
        ),
    )


def _moved(diagnostic: types.Diagnostic, *, keep_data: bool) -> types.Diagnostic:
    """The diagnostic as a client might echo it: other columns (Neovim 0.7 echoes byte
    columns), maybe without ``data``."""
    start = types.Position(line=diagnostic.range.start.line, character=7)
    end = types.Position(line=diagnostic.range.start.line + 1, character=2)
    return types.Diagnostic(
        range=types.Range(start=start, end=end),
        message=diagnostic.message,
        severity=diagnostic.severity,
        source=diagnostic.source,
        code=diagnostic.code,
        data=diagnostic.data if keep_data else None,
    )


async def _actions(client, workspace, diagnostics, only=None, uri=None) -> list[dict]:
    """``textDocument/codeAction`` answered as plain JSON (see ``raw_request``), on
    the memory document unless ``uri`` is given."""
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri or _doc_uri(workspace)),
        range=types.Range(
            start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)
        ),
        context=types.CodeActionContext(diagnostics=diagnostics, only=only),
    )
    raw = client.protocol._converter.unstructure(params)
    return await raw_request(client, types.TEXT_DOCUMENT_CODE_ACTION, raw) or []


async def test_pending_proposals_sit_on_their_line_of_the_memory_document(
    store, client: LanguageClient, workspace: Path
):
    diagnostics = await _proposal_diagnostics(client, workspace, 2)
    by_id = {d.data["proposalId"]: d for d in diagnostics}
    assert set(by_id) == {PENDING, OTHER}
    lines = (workspace / ".clio-coder" / "memory.md").read_text(encoding="utf-8").splitlines()
    line = by_id[PENDING].range.start.line
    assert lines[line].startswith(f"- [{PENDING}] (global) Run the tests")
    assert all(d.source == "clio-memory" for d in diagnostics)


async def test_quick_fixes_approve_a_proposal_matched_by_data_not_range(
    store, client: LanguageClient, workspace: Path
):
    diagnostics = await _proposal_diagnostics(client, workspace, 2)
    target = next(d for d in diagnostics if d.data["proposalId"] == PENDING)
    actions = await _actions(client, workspace, [_moved(target, keep_data=True)])
    titles = [a["title"] for a in actions if a["kind"] == "quickfix"]
    assert titles == [
        "Approve memory: Run the tests with uv run pytest, not python -m.",
        "Reject memory: Run the tests with uv run pytest, not python -m.",
    ]
    approve = actions[0]
    assert approve["command"]["command"] == "clio.memory.approve"
    assert approve["command"]["arguments"] == [PENDING]
    assert approve["diagnostics"][0]["data"]["proposalId"] == PENDING
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command=approve["command"]["command"], arguments=approve["command"]["arguments"]
        )
    )
    assert result == {"recordId": PENDING, "status": "approved"}
    assert store.get(PENDING).approved is True
    remaining = await _proposal_diagnostics(client, workspace, 1)
    assert remaining[0].data["proposalId"] == OTHER


@pytest.mark.asyncio(loop_scope="function")
async def test_quick_fixes_found_by_message_when_the_client_drops_data(
    store_before_start, lsp: LanguageClient, workspace: Path
):
    """Its own server: initialized with an old Neovim's capabilities."""
    capabilities = client_capabilities("neovim@v0.7.0")
    await lsp.initialize_session(initialize_params("neovim", workspace, capabilities=capabilities))
    diagnostics = await _proposal_diagnostics(lsp, workspace, 2)
    target = next(d for d in diagnostics if d.data["proposalId"] == OTHER)
    actions = await _actions(lsp, workspace, [_moved(target, keep_data=False)])
    commands = [(a["command"]["command"], a["command"]["arguments"]) for a in actions]
    assert ("clio.memory.reject", [OTHER]) in commands
    await lsp.workspace_execute_command_async(
        types.ExecuteCommandParams(command="clio.memory.reject", arguments=[OTHER])
    )
    assert store_before_start.get(OTHER).status == "rejected"


async def test_source_action_lists_every_pending_proposal(
    store, client: LanguageClient, workspace: Path
):
    await _proposal_diagnostics(client, workspace, 2)
    actions = await _actions(client, workspace, [], only=[types.CodeActionKind.Source])
    assert len(actions) == 1
    action = actions[0]
    assert action["kind"] == "source.clio.memoryProposals"
    assert "2 pending" in action["title"]
    assert "Run the tests" in action["title"] and "fixtures live" in action["title"]
    assert "Already approved" not in action["title"]
    shown = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command=action["command"]["command"], arguments=action["command"]["arguments"]
        )
    )
    assert {p["recordId"] for p in shown["proposals"]} == {PENDING, OTHER}


async def test_diagnostics_of_other_sources_get_no_memory_actions(
    store, client: LanguageClient, workspace: Path
):
    await _proposal_diagnostics(client, workspace, 2)
    foreign = types.Diagnostic(
        range=types.Range(
            start=types.Position(line=0, character=0), end=types.Position(line=0, character=1)
        ),
        message="Run the tests with uv run pytest, not python -m.",
        source="pyright",
        data={"proposalId": PENDING},
    )
    actions = await _actions(client, workspace, [foreign], only=[types.CodeActionKind.QuickFix])
    assert actions == []


async def test_the_proposals_action_is_offered_on_the_memory_document_or_on_request(
    store, client: LanguageClient, workspace: Path
):
    await _proposal_diagnostics(client, workspace, 2)
    code = (workspace / "main.py").as_uri()
    assert await _actions(client, workspace, [], uri=code) == []  # not in every file
    kinds = [a["kind"] for a in await _actions(client, workspace, [])]
    assert kinds == ["source.clio.memoryProposals"]  # on memory.md, unasked
    asked = await _actions(client, workspace, [], only=["source.clio"], uri=code)
    assert [a["kind"] for a in asked] == ["source.clio.memoryProposals"]
