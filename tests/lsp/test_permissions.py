"""Tool permissions in ``ask`` mode: the server asks with ``window/showMessageRequest``
(Allow once / Always allow / Reject / Always reject) and the turn follows the answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import NEUTRAL_CLIENT, execute
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
    return {"permissionMode": "ask"}


@pytest.fixture(autouse=True)
def _model(model_server):
    model_server.install_settings(memory=False)
    write = ToolCall("write_file", json.dumps({"path": "out.txt", "content": "hi\n"}), id="w1")
    model_server.push(Reply(tool_calls=[write]), Reply(text="done"))
    return model_server


async def _ask_mode(client: LanguageClient, title: str):
    client.answer = lambda params: types.MessageActionItem(title=title)
    return await execute(client, "clio.prompt", "write out.txt")


async def test_allow_once_lets_the_edit_run(client: LanguageClient, workspace: Path):
    result = await _ask_mode(client, "Allow once")
    assert result["stopReason"] == "end_turn"
    assert (workspace / "out.txt").read_text() == "hi\n"
    question = client.asked[0]
    assert "write_file" in question.message
    assert [a.title for a in question.actions] == [
        "Allow once",
        "Always allow",
        "Reject",
        "Always reject",
    ]


async def test_reject_keeps_the_file_untouched(client: LanguageClient, workspace: Path):
    result = await _ask_mode(client, "Reject")
    assert result["stopReason"] == "end_turn"
    assert not (workspace / "out.txt").exists()
    finished = [u for u in client.session_updates if u["type"] == "tool_call_finished"]
    assert finished[0]["status"] == "failed"
