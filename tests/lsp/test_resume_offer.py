"""The resume offer (issue 8 item 4): after a session load finds a handoff, the server
asks with ``window/showMessageRequest`` (Seed / Dismiss); Seed fills the bank from the
handoff, Dismiss does nothing, and a late or cancelled answer never raises."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.handoff import write_handoff_artifact
from tests.lsp.conftest import NEUTRAL_CLIENT, SHOW_MESSAGE, execute, wait_for
from tests.support.model_server import Reply
from tests.support.waiting import wait_until

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


def _write_handoff(workspace: Path) -> Path:
    bank = TaskMemoryBank()
    bank.save("knowledge", "The API tests need the local fixture server on port 8099.")
    bank.save("procedural", "Run `make check` before committing.")
    return write_handoff_artifact(
        workspace,
        task="fix the API tests",
        latest_instruction="keep going",
        bank=bank,
        session_id="sess_previous",
    )


async def _loaded_session_with_offer(client: LanguageClient, workspace: Path) -> str:
    """A stored session, a handoff written after it, then ``clio.session.load``."""
    first = await execute(client, "clio.prompt", "start")
    await execute(client, "clio.session.new")
    _write_handoff(workspace)
    loaded = await execute(client, "clio.session.load", first["sessionId"])
    assert loaded["sessionId"] == first["sessionId"]
    return loaded["sessionId"]


def _bank_size(shown: dict) -> int:
    bank = shown["board"]["bank"]
    return len(bank["knowledge"]) + len(bank["procedural"])


async def test_seed_answer_fills_the_bank_from_the_handoff(client: LanguageClient, workspace: Path):
    asked: list[types.ShowMessageRequestParams] = []

    def _user(params: types.ShowMessageRequestParams):
        asked.append(params)
        return types.MessageActionItem(title="Seed")

    client.answer = _user

    await _loaded_session_with_offer(client, workspace)
    await wait_until(lambda: asked)
    assert [a.title for a in asked[0].actions] == ["Seed", "Dismiss"]
    assert "handoff-" in asked[0].message and "2 memory entries" in asked[0].message
    await wait_for(client, SHOW_MESSAGE, lambda: any("seed" in m.message for m in client.messages))
    shown = await execute(client, "clio.memory.show")
    assert _bank_size(shown) == 2
    doc = (workspace / ".clio-coder" / "memory.md").read_text(encoding="utf-8")
    assert "fixture server on port 8099" in doc


async def test_dismiss_answer_leaves_the_bank_alone(client: LanguageClient, workspace: Path):
    asked = asyncio.Event()

    def _user(params: types.ShowMessageRequestParams):
        asked.set()
        return types.MessageActionItem(title="Dismiss")

    client.answer = _user

    await _loaded_session_with_offer(client, workspace)
    await asyncio.wait_for(asked.wait(), 15)
    shown = await execute(client, "clio.memory.show")
    assert _bank_size(shown) == 0
    # The explicit command still seeds.
    seeded = await execute(client, "clio.memory.seed")
    assert seeded["seeded"] == 2


async def test_no_offer_when_the_workspace_has_no_handoff(client: LanguageClient, workspace: Path):
    asked: list = []

    def _user(params):
        asked.append(params)

    client.answer = _user

    first = await execute(client, "clio.prompt", "start")
    await execute(client, "clio.session.new")
    loaded = await execute(client, "clio.session.load", first["sessionId"])
    assert loaded["events"] > 0
    await execute(client, "clio.usage")
    assert asked == []


async def test_late_answer_after_a_session_change_is_ignored(
    client: LanguageClient, workspace: Path, capfd
):
    asked = asyncio.Event()
    answer_now = asyncio.Event()

    async def _slow_user(params: types.ShowMessageRequestParams):
        asked.set()
        try:
            await asyncio.Event().wait()  # no answer until the server withdraws the question
        except asyncio.CancelledError:
            await answer_now.wait()
        return types.MessageActionItem(title="Seed")

    client.answer = _slow_user

    await _loaded_session_with_offer(client, workspace)
    await asyncio.wait_for(asked.wait(), 15)
    fresh = await execute(client, "clio.session.new")  # cancels the pending offer
    answer_now.set()
    for _ in range(3):
        shown = await execute(client, "clio.memory.show")
    assert shown["sessionId"] == fresh["sessionId"]
    assert _bank_size(shown) == 0
    assert [m for m in client.messages if m.type == types.MessageType.Error] == []
    assert "InvalidStateError" not in capfd.readouterr().err


async def test_error_answer_to_the_offer_does_not_break_the_session(
    client: LanguageClient, workspace: Path
):
    asked = asyncio.Event()

    def _broken_client(params):
        # An error reply (pytest-lsp fails a test whose handler raises, so it is sent
        # by hand); pygls then also sends a null reply for the same id, which the
        # server must ignore as a late reply.
        asked.set()
        client.protocol._send_response(
            client.protocol.msg_id,
            error=types.ResponseError(code=-32603, message="the editor could not show it"),
        )

    client.answer = _broken_client

    await _loaded_session_with_offer(client, workspace)
    await asyncio.wait_for(asked.wait(), 15)
    result = await execute(client, "clio.prompt", "continue")
    assert result["stopReason"] == "end_turn"
    assert _bank_size(await execute(client, "clio.memory.show")) == 0
    assert [m for m in client.messages if m.type == types.MessageType.Error] == []
