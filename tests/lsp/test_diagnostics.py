"""Memory reminders as diagnostics (issue 8 items 2 and 5): Information (or Hint)
diagnostics with ``source: "clio-memory"``, the trigger as ``code``, cited entry ids in
``data``, on the file the reminder names or else on its line of the memory document;
cleared (an empty publish per file) by every session change.

Reminders come from the real rules tier: the scripted model repeats a failing call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import (
    DIAGNOSTICS,
    NEUTRAL_CLIENT,
    configure,
    execute,
    initialize_params,
    wait_for,
)
from tests.support.model_server import Reply, ToolCall
from tests.support.waiting import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def client(shared_client: LanguageClient) -> LanguageClient:
    """The shared server (``shared_client``): each test its own workspace."""
    return shared_client


FAILING = "python3 -c \"import sys; sys.exit('ModuleNotFoundError: No module named foo')\""


@pytest.fixture(autouse=True)
def _model(model_server):
    model_server.install_settings(memory=False)  # rules tier only
    model_server.default = Reply(text="ok")
    return model_server


def _script_repeated_failures(model_server) -> None:
    """A turn that reads a missing file twice, then runs a failing command twice."""
    read = json.dumps({"path": "missing.py"})
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", read, id="r1")]),
        Reply(tool_calls=[ToolCall("read_file", read, id="r2")]),
        Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": FAILING}), id="c1")]),
        Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": FAILING}), id="c2")]),
        Reply(text="I will try something else."),
    )


async def _start(client: LanguageClient, **options) -> None:
    options.setdefault("permissionMode", "bypass")
    await configure(client, **options)


def _memory(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if d.source == "clio-memory"]


async def _reminders(client, workspace) -> tuple[types.Diagnostic, types.Diagnostic]:
    named = (workspace / "missing.py").as_uri()
    doc = (workspace / ".clio-coder" / "memory.md").as_uri()
    await wait_for(client, DIAGNOSTICS, lambda: _memory(client, named) and _memory(client, doc))
    return _memory(client, named)[0], _memory(client, doc)[0]


async def test_reminder_is_a_diagnostic_on_the_file_it_names(
    client: LanguageClient, workspace: Path, model_server
):
    await _start(client)
    _script_repeated_failures(model_server)
    await execute(client, "clio.prompt", "read missing.py")
    on_file, _ = await _reminders(client, workspace)
    assert on_file.severity == types.DiagnosticSeverity.Information
    assert on_file.code == "repeated_failure"
    assert on_file.message.startswith("Memory:") and "missing.py" in on_file.message
    assert on_file.range.start.line == 0
    assert on_file.data["kind"] == "reminder"
    assert on_file.data["citedEntries"] and on_file.data["sessionId"].startswith("sess_")
    reminders = [u for u in client.session_updates if u["type"] == "memory_reminder"]
    assert on_file.data["citedEntries"] == reminders[0]["citedEntries"]


async def test_reminder_naming_no_file_sits_on_its_line_of_the_memory_document(
    client: LanguageClient, workspace: Path, model_server
):
    await _start(client)
    _script_repeated_failures(model_server)
    await execute(client, "clio.prompt", "run it")
    _, on_doc = await _reminders(client, workspace)
    assert "No module named foo" in on_doc.message
    doc = workspace / ".clio-coder" / "memory.md"
    line = on_doc.range.start.line

    def doc_line() -> str:
        lines = doc.read_text(encoding="utf-8").splitlines()
        return lines[line] if line < len(lines) else ""

    await wait_until(lambda: "No module named foo" in doc_line())
    assert doc_line().startswith("- Memory:")


async def test_hint_severity_and_disabled_diagnostics_follow_the_options(
    client: LanguageClient, workspace: Path, model_server
):
    await _start(client, diagnostics={"severity": "hint"})
    _script_repeated_failures(model_server)
    await execute(client, "clio.prompt", "go")
    on_file, on_doc = await _reminders(client, workspace)
    assert on_file.severity == on_doc.severity == types.DiagnosticSeverity.Hint

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"clio": {"diagnostics": {"enabled": False}}})
    )
    await execute(client, "clio.session.new")  # clears; new reminders must not show
    _script_repeated_failures(model_server)
    await execute(client, "clio.prompt", "go again")
    assert [u for u in client.session_updates if u["type"] == "memory_reminder"][2:]
    assert _memory(client, (workspace / "missing.py").as_uri()) == []


CHANGES = ["clio.session.new", "clio/sessionChanged", "folder removed"]


async def _reminders_shown(
    client: LanguageClient, workspace: Path, model_server
) -> tuple[str, str]:
    _script_repeated_failures(model_server)
    await execute(client, "clio.prompt", "go")
    await _reminders(client, workspace)
    named = (workspace / "missing.py").as_uri()
    doc = (workspace / ".clio-coder" / "memory.md").as_uri()
    return named, doc


@pytest.mark.parametrize("change", CHANGES)
async def test_every_session_change_clears_memory_diagnostics(
    client: LanguageClient, workspace: Path, model_server, change: str
):
    await _start(client, editorSessionId="w1")
    named, doc = await _reminders_shown(client, workspace, model_server)
    if change == "clio.session.new":
        await execute(client, "clio.session.new")
    elif change == "clio/sessionChanged":
        client.protocol.notify("clio/sessionChanged", {"editorSessionId": "w2"})
    else:
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[],
                    removed=[types.WorkspaceFolder(uri=workspace.as_uri(), name="workspace")],
                )
            )
        )
    await wait_for(
        client, DIAGNOSTICS, lambda: _memory(client, named) == [] and _memory(client, doc) == []
    )
    assert named in client.diagnostics  # an empty publish, not silence


@pytest.mark.asyncio(loop_scope="function")
@pytest.mark.parametrize("client_name", [NEUTRAL_CLIENT])  # no range is looked at
async def test_shutdown_clears_memory_diagnostics_before_its_answer(
    lsp: LanguageClient, client_name: str, workspace: Path, model_server
):
    """Its own server: ``shutdown`` is the session change here."""
    await lsp.initialize_session(
        initialize_params(client_name, workspace, options={"permissionMode": "bypass"})
    )
    named, doc = await _reminders_shown(lsp, workspace, model_server)
    assert await lsp.shutdown_async(None) is None
    # Everything was published before the shutdown answer.
    assert _memory(lsp, named) == [] and _memory(lsp, doc) == []
