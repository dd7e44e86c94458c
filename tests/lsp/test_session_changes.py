"""Session commands and session changes (issue 8 items 1 and 5): new, load (with
replay), list, fork, close; ``workspace/didChangeWorkspaceFolders`` removing the
session's folder and ``clio/sessionChanged`` with a new editor id end the session
binding (the bank goes with it); a change cancels the running turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.handoff import write_handoff_artifact
from tests.lsp.conftest import (
    NEUTRAL_CLIENT,
    SESSION_UPDATE,
    configure,
    execute,
    plain,
    updates_of,
    wait_for,
)
from tests.support.model_server import Reply

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def shared_client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


@pytest.fixture
def client(shared_client: LanguageClient) -> LanguageClient:
    """The shared server (``shared_client``): each test its own workspace."""
    return shared_client


@pytest.fixture(autouse=True)
def _model(model_server):
    model_server.install_settings(memory=False)
    model_server.default = Reply(text="ok")
    return model_server


def _seedable(workspace: Path) -> None:
    bank = TaskMemoryBank()
    bank.save("knowledge", "Builds need NODE_OPTIONS=--max-old-space-size=4096.")
    write_handoff_artifact(
        workspace, task="t", latest_instruction="i", bank=bank, session_id="sess_old"
    )


async def _seeded_session(client: LanguageClient, workspace: Path) -> str:
    first = await execute(client, "clio.prompt", "hello")
    _seedable(workspace)
    assert (await execute(client, "clio.memory.seed"))["seeded"] == 1
    return first["sessionId"]


def _knowledge(shown: dict) -> list:
    return shown["board"]["bank"]["knowledge"] if shown["board"] else []


async def test_session_new_binds_a_fresh_session_with_an_empty_bank(
    client: LanguageClient, workspace: Path, model_server
):
    first = await _seeded_session(client, workspace)
    assert len(_knowledge(await execute(client, "clio.memory.show"))) == 1
    created = await execute(client, "clio.session.new")
    assert created["sessionId"] != first
    shown = await execute(client, "clio.memory.show")
    assert shown["sessionId"] == created["sessionId"] and _knowledge(shown) == []
    result = await execute(client, "clio.prompt", "fresh start")
    assert result["sessionId"] == created["sessionId"]
    sent = str(model_server.bodies[-1]["messages"])
    assert "fresh start" in sent and "hello" not in sent


async def test_session_load_replays_history_and_restores_its_own_bank(
    client: LanguageClient, workspace: Path
):
    first = await _seeded_session(client, workspace)
    await execute(client, "clio.session.new")
    client.session_updates.clear()
    loaded = await execute(client, "clio.session.load", {"sessionId": first})
    assert loaded["sessionId"] == first and loaded["events"] >= 2
    replayed = [u for u in client.session_updates if u.get("replay")]
    assert {"type": "user_message", "text": "hello"}.items() <= replayed[0].items()
    assert any(u["type"] == "message_chunk" and u["text"] == "ok" for u in replayed)
    assert len(_knowledge(await execute(client, "clio.memory.show"))) == 1


async def test_session_list_fork_and_close(client: LanguageClient, workspace: Path):
    first = (await execute(client, "clio.prompt", "one"))["sessionId"]
    listed = await execute(client, "clio.session.list")
    assert first in [s["sessionId"] for s in listed["sessions"]]
    assert all("updatedAt" in s for s in listed["sessions"])
    forked = await execute(client, "clio.session.fork")
    assert forked["forkedFrom"] == first and forked["sessionId"] != first
    closed = await execute(client, "clio.session.close")
    assert closed == {"sessionId": forked["sessionId"], "closed": True}
    assert (await execute(client, "clio.usage"))["sessionId"] is None


async def test_session_changed_with_a_new_editor_id_ends_the_binding(
    client: LanguageClient, workspace: Path
):
    await configure(client, editorSessionId="window-1")
    first = await _seeded_session(client, workspace)
    client.protocol.notify("clio/sessionChanged", {"editorSessionId": "window-1"})
    assert (await execute(client, "clio.usage"))["sessionId"] == first  # same id: no change
    client.protocol.notify("clio/sessionChanged", {"editorSessionId": "window-2"})
    shown = await _after_notification(client, lambda s: s["sessionId"] is None)
    assert shown["board"] is None
    # The next prompt starts a new session with an empty bank.
    second = await execute(client, "clio.prompt", "again")
    assert second["sessionId"] != first
    assert _knowledge(await execute(client, "clio.memory.show")) == []


async def _after_notification(client: LanguageClient, done) -> dict:
    """Notifications have no reply: ask for the board until ``done(board)`` holds. Each
    answer is a round trip through the server (no fixed sleep); bounded."""
    for _ in range(500):
        shown = await execute(client, "clio.memory.show")
        if done(shown):
            return shown
    raise AssertionError("the notification had no effect")


async def test_removing_the_session_folder_ends_the_binding(
    client: LanguageClient, workspace: Path
):
    await _seeded_session(client, workspace)
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[],
                removed=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
            )
        )
    )
    await _after_notification(client, lambda s: s["sessionId"] is None)


async def test_adding_an_unrelated_folder_keeps_the_session(
    client: LanguageClient, workspace: Path, tmp_path: Path
):
    first = await _seeded_session(client, workspace)
    other = tmp_path / "other"
    other.mkdir()
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=other.as_uri(), name="other")], removed=[]
            )
        )
    )
    shown = await execute(client, "clio.memory.show")
    assert shown["sessionId"] == first and len(_knowledge(shown)) == 1


async def test_a_session_change_cancels_the_running_turn(client: LanguageClient, model_server):
    model_server.push(Reply(text=["word "] * 400, chunk_delay=0.05))
    pending = asyncio.ensure_future(
        client.protocol.send_request_async(
            types.WORKSPACE_EXECUTE_COMMAND,
            types.ExecuteCommandParams(command="clio.prompt", arguments=["long"]),
        )
    )
    await wait_for(client, SESSION_UPDATE, lambda: updates_of(client, "message_chunk"))
    created = await execute(client, "clio.session.new")
    result = plain(await asyncio.wait_for(pending, 15))
    assert result["stopReason"] == "cancelled"
    assert result["sessionId"] != created["sessionId"]
    assert updates_of(client, "turn_ended")[-1]["stopReason"] == "cancelled"


async def test_loading_an_unknown_session_fails_clearly_and_keeps_the_current_one(
    client: LanguageClient, workspace: Path
):
    first = await _seeded_session(client, workspace)
    with pytest.raises(JsonRpcException) as caught:
        await execute(client, "clio.session.load", "sess_does_not_exist")
    assert caught.value.code == types.LSPErrorCodes.RequestFailed.value
    assert "sess_does_not_exist" in caught.value.message
    shown = await execute(client, "clio.memory.show")
    assert shown["sessionId"] == first and len(_knowledge(shown)) == 1
