"""Configuration (issue 8 item 6): typed initializationOptions with defaults, invalid
values reported with window/showMessage, didChangeConfiguration, and a
workspace/configuration pull only when the client declares it. What ``initialize``
does starts a server of its own; the ``didChangeConfiguration`` tests share one
(``shared_client``), which begins each test with every option at its default."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from tests.lsp.conftest import NEUTRAL_CLIENT, SHOW_MESSAGE, initialize_params, wait_for

pytestmark = pytest.mark.asyncio
SHARED = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


@pytest.fixture(scope="module")
def shared_client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


def _doc(workspace: Path) -> Path:
    return workspace / ".clio-coder" / "memory.md"


async def _show(client: LanguageClient) -> dict:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="clio.memory.show", arguments=[])
    )


async def test_invalid_initialization_options_show_a_message_and_use_the_defaults(
    lsp: LanguageClient, client_name: str, workspace: Path
):
    options = {"progress": "very much", "bogus": 1}
    await lsp.initialize_session(initialize_params(client_name, workspace, options=options))
    await wait_for(lsp, SHOW_MESSAGE, lambda: lsp.messages)
    message = lsp.messages[0]
    assert message.type == types.MessageType.Warning
    assert "progress" in message.message and "bogus" in message.message
    assert "defaults" in message.message
    # Defaults are in force: the memory document is kept.
    await _show(lsp)
    assert "# clio memory" in _doc(workspace).read_text(encoding="utf-8")


@SHARED
async def test_did_change_configuration_applies_new_values_and_reports_bad_ones(
    shared_client: LanguageClient, workspace: Path
):
    client = shared_client
    await _show(client)
    assert _doc(workspace).exists()
    _doc(workspace).unlink()
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"clio": {"memoryDocument": False}})
    )
    await _show(client)
    assert not _doc(workspace).exists()

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"clio": {"diagnostics": {"severity": "loud"}}})
    )
    await wait_for(client, SHOW_MESSAGE, lambda: client.messages)
    assert "diagnostics.severity" in client.messages[-1].message
    assert "previous settings" in client.messages[-1].message
    # The previous (valid) values stay: still no document.
    await _show(client)
    assert not _doc(workspace).exists()


async def test_configuration_is_pulled_when_the_client_declares_it(
    lsp: LanguageClient, client_name: str, workspace: Path
):
    lsp.set_configuration({"memoryDocument": False}, section="clio")
    await lsp.initialize_session(initialize_params(client_name, workspace))
    await _show(lsp)
    assert not _doc(workspace).exists()


async def test_configuration_is_not_pulled_when_the_client_does_not_declare_it(
    lsp: LanguageClient, workspace: Path
):
    capabilities = client_capabilities("neovim@v0.7.0")
    assert not (capabilities.workspace and capabilities.workspace.configuration)
    lsp.set_configuration({"memoryDocument": False}, section="clio")
    await lsp.initialize_session(initialize_params("neovim", workspace, capabilities=capabilities))
    await _show(lsp)
    assert _doc(workspace).exists()


@SHARED
async def test_empty_did_change_configuration_pulls_again(
    shared_client: LanguageClient, workspace: Path
):
    client = shared_client
    await _show(client)
    _doc(workspace).unlink()
    client.set_configuration({"memoryDocument": False}, section="clio")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def document_stays_absent() -> bool:
        await _show(client)
        return not _doc(workspace).exists()

    # The pull is a server→client request answered asynchronously; show until it took.
    for _ in range(50):
        if await document_stays_absent():
            break
        _doc(workspace).unlink(missing_ok=True)
    assert not _doc(workspace).exists()


async def test_valid_initialization_options_apply_and_a_partial_change_keeps_the_session(
    lsp: LanguageClient, client_name: str, workspace: Path
):
    # One process for two questions about options given at initialize: they apply, and a
    # later partial change keeps the editor session while other servers' sections are
    # ignored.
    options = {
        "memoryDocument": False,
        "diagnostics": {"severity": "hint"},
        "editorSessionId": "w1",
    }
    await lsp.initialize_session(initialize_params(client_name, workspace, options=options))
    result = await _show(lsp)
    assert result["document"].endswith("/.clio-coder/memory.md")
    assert not _doc(workspace).exists()
    assert lsp.messages == []
    created = await lsp.workspace_execute_command_async(
        types.ExecuteCommandParams(command="clio.session.new", arguments=[[]])
    )
    lsp.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"clio": {"progress": False}})
    )
    lsp.workspace_did_change_configuration(  # eglot sends every server's section
        types.DidChangeConfigurationParams(settings={"pylsp": {"plugins": {"ruff": {}}}})
    )
    # The same editor session: nothing changes (a lost id would clear the bank).
    lsp.protocol.notify("clio/sessionChanged", {"editorSessionId": "w1"})
    shown = await _show(lsp)
    assert shown["sessionId"] == created["sessionId"]
    assert lsp.messages == []  # no popup for another server's section
