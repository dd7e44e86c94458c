"""A clean workspace (issue 16 item 2): starting and shutting the server down leaves
the workspace byte-identical, even with pending proposals in the durable store; the
memory document is written when the user asks (a memory command), next to a
``.clio-coder/.gitignore`` that ignores the folder, lists this repository's
proposals only and reads as Markdown (no JSON)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.store import MemoryStore
from clio_acp.paths import resolve_paths
from clio_acp.timestamps import format_timestamp
from tests.lsp.conftest import NEUTRAL_CLIENT, execute, initialize_params

pytestmark = pytest.mark.asyncio


@pytest.fixture
def client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


def _record(record_id: str, lesson: str, repository: str | None) -> MemoryRecord:
    return MemoryRecord.model_validate(
        {
            "id": record_id,
            "scope": "repo" if repository else "global",
            "key": f"key-{record_id}",
            "lesson": lesson,
            "evidenceRefs": ["session:s1"],
            "appliesWhen": [],
            "avoidWhen": [],
            "confidence": 0.6,
            "approved": False,
            "createdAt": format_timestamp(datetime(2026, 11, 1, tzinfo=UTC)),
            **({"repository": {"kind": "canonical-path", "key": repository}} if repository else {}),
        }
    )


@pytest.fixture
def proposals(isolated_dirs, workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-repo"
    other.mkdir()
    store = MemoryStore(resolve_paths().records_file)
    store.add_if_absent(_record("mem-00000000000000b1", "Use make check here.", str(workspace)))
    store.add_if_absent(_record("mem-00000000000000b2", "Other repo lesson.", str(other)))
    store.add_if_absent(_record("mem-00000000000000b3", "A global lesson.", None))


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


async def test_start_and_shutdown_leave_the_workspace_byte_identical(
    proposals, lsp: LanguageClient, client_name: str, workspace: Path
):
    before = _snapshot(workspace)
    await lsp.initialize_session(initialize_params(client_name, workspace))
    # What editors send around startup: configuration, a code action on a file.
    lsp.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"clio": {"progress": False}})
    )
    here = types.TextDocumentIdentifier(uri=(workspace / "main.py").as_uri())
    zero = types.Position(line=0, character=0)
    await lsp.text_document_code_action_async(
        types.CodeActionParams(
            text_document=here,
            range=types.Range(start=zero, end=zero),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert await lsp.shutdown_async(None) is None
    assert _snapshot(workspace) == before


async def test_a_memory_command_writes_an_ignored_readable_document_of_this_repository(
    proposals, client: LanguageClient, workspace: Path
):
    await execute(client, "clio.memory.show", [])  # [] (Neovim's {}): no arguments
    folder = workspace / ".clio-coder"
    assert (folder / ".gitignore").read_text(encoding="utf-8").strip() == "*"
    text = (folder / "memory.md").read_text(encoding="utf-8")
    assert "Use make check here." in text and "A global lesson." in text
    assert "Other repo lesson." not in text
    assert "{" not in text and '"' not in text  # a document, not JSON lines


@pytest.fixture
def full_store(isolated_dirs, workspace: Path) -> None:
    """The store at its 500-record cap: loading it takes the server a while."""
    records = [
        _record(f"mem-{n:016x}", f"Lesson number {n} for this repository.", str(workspace))
        for n in range(1, 500)
    ]
    records.append(_record("mem-00000000000fffff", "Run tox -e py312 here.", str(workspace)))
    MemoryStore(resolve_paths().records_file).mutate(lambda current: ([*current, *records], None))


async def test_the_first_memory_command_sees_the_proposals_of_a_full_store(
    full_store, client: LanguageClient, workspace: Path
):
    """Regression (CI, -n 4 on 2 cores): clio.memory.show right after ``initialized`` wrote
    the document before the pending proposals were loaded, listing none."""
    await execute(client, "clio.memory.show", [])
    text = (workspace / ".clio-coder" / "memory.md").read_text(encoding="utf-8")
    assert "Run tox -e py312 here." in text and "Lesson number 499 " in text
