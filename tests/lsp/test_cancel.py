"""Cancellation over the wire (issue 8 item 7): ``$/cancelRequest`` stops the running
turn, not just the reply; ``clio.cancel`` and ``window/workDoneProgress/cancel`` do the
same; ``shutdown`` with a turn in flight answers ``null`` only after the turn ended; a
late client reply to a server request the server cancelled is ignored quietly; and a
turn blocked in a long tool command never stops the server from reading stdin."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from clio_acp.lsp.protocol import pid_alive
from tests.lsp.conftest import (
    NEUTRAL_CLIENT,
    PROGRESS,
    SESSION_UPDATE,
    configure,
    execute,
    initialize_params,
    plain,
    updates_of,
    wait_for,
)
from tests.support.model_server import Reply, ToolCall
from tests.support.waiting import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture
def client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


@pytest.fixture(scope="module")
def shared_client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


SLOW_STREAM = Reply(text=["word "] * 400, chunk_delay=0.05)  # ~20 s unless cancelled


@pytest.fixture
def client(shared_client: LanguageClient) -> LanguageClient:
    """The shared server (``shared_client``); the shutdown test has its own."""
    return shared_client


@pytest.fixture(autouse=True)
def _model(model_server):
    model_server.install_settings(memory=False)
    return model_server


def _prompt_request(client: LanguageClient, text: str, msg_id: int):
    return asyncio.ensure_future(
        client.protocol.send_request_async(
            types.WORKSPACE_EXECUTE_COMMAND,
            types.ExecuteCommandParams(command="clio.prompt", arguments=[{"text": text}]),
            msg_id=msg_id,
        )
    )


async def _streaming(client: LanguageClient) -> None:
    await wait_for(client, SESSION_UPDATE, lambda: updates_of(client, "message_chunk"))


async def test_cancel_request_stops_the_running_turn_not_just_the_reply(
    client: LanguageClient, model_server
):
    model_server.push(SLOW_STREAM, Reply(text="next answer"))
    pending = _prompt_request(client, "write a lot", msg_id=4101)
    await _streaming(client)
    client.cancel_request(types.CancelParams(id=4101))
    with pytest.raises(JsonRpcException) as caught:
        await asyncio.wait_for(pending, 15)
    assert caught.value.code == types.LSPErrorCodes.RequestCancelled.value  # -32800
    # The turn itself ended as cancelled and the model stream was closed.
    ended = updates_of(client, "turn_ended")
    assert ended and ended[-1]["stopReason"] == "cancelled"
    await wait_until(lambda: model_server.completions[0].client_disconnected)
    # The session is free for the next turn at once.
    result = await execute(client, "clio.prompt", "and now?")
    assert result["stopReason"] == "end_turn"


async def test_clio_cancel_ends_the_prompt_with_stop_reason_cancelled(
    client: LanguageClient, model_server
):
    model_server.push(SLOW_STREAM)
    pending = _prompt_request(client, "write a lot", msg_id=4201)
    await _streaming(client)
    assert await execute(client, "clio.cancel") == {"cancelled": True}
    result = plain(await asyncio.wait_for(pending, 15))
    assert result["stopReason"] == "cancelled"
    assert await execute(client, "clio.cancel") == {"cancelled": False}


async def test_work_done_progress_cancel_stops_the_turn(client: LanguageClient, model_server):
    model_server.push(SLOW_STREAM)
    pending = _prompt_request(client, "write a lot", msg_id=4301)
    await _streaming(client)
    token = await wait_for(client, PROGRESS, lambda: next(iter(client.progress_reports), None))
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = plain(await asyncio.wait_for(pending, 15))
    assert result["stopReason"] == "cancelled"


@pytest.mark.asyncio(loop_scope="function")
async def test_shutdown_with_a_turn_in_flight_answers_null_after_the_turn_ended(
    lsp: LanguageClient, client_name: str, workspace: Path, model_server
):
    """Its own server: shutdown is the subject."""
    await lsp.initialize_session(initialize_params(client_name, workspace))
    model_server.push(SLOW_STREAM)
    pending = _prompt_request(lsp, "write a lot", msg_id=4401)
    await _streaming(lsp)
    assert await asyncio.wait_for(lsp.shutdown_async(None), 15) is None
    # Everything the cleanup produced was on the wire before the shutdown answer.
    assert updates_of(lsp, "turn_ended")[-1]["stopReason"] == "cancelled"
    assert pending.done()
    assert plain(pending.result())["stopReason"] == "cancelled"
    lsp.exit(None)
    assert await asyncio.wait_for(lsp._server.wait(), 15) == 0


async def test_late_reply_to_a_cancelled_server_request_is_ignored_quietly(
    client: LanguageClient, workspace: Path, model_server, capfd
):
    """A permission prompt (window/showMessageRequest) is cancelled with its turn;
    the user's answer arrives afterwards and must change nothing."""
    asked = asyncio.Event()
    answer_now = asyncio.Event()

    async def _late_user(params: types.ShowMessageRequestParams):
        asked.set()
        try:
            await asyncio.Event().wait()  # no answer until the server withdraws the question
        except asyncio.CancelledError:
            await answer_now.wait()  # the user clicks after the server gave up
        return types.MessageActionItem(title="Allow once")

    client.answer = _late_user

    await configure(client, permissionMode="ask")
    write = ToolCall("write_file", json.dumps({"path": "late.txt", "content": "x"}), id="w1")
    model_server.push(Reply(tool_calls=[write]), Reply(text="done"))
    pending = _prompt_request(client, "write late.txt", msg_id=4501)
    await asyncio.wait_for(asked.wait(), 15)
    assert await execute(client, "clio.cancel") == {"cancelled": True}
    assert plain(await asyncio.wait_for(pending, 15))["stopReason"] == "cancelled"
    answer_now.set()
    # The server goes on answering, shows nothing, and the late "Allow" wrote nothing.
    for _ in range(3):
        assert "sessionId" in await execute(client, "clio.usage")
    assert not (workspace / "late.txt").exists()
    assert [m for m in client.messages if m.type == types.MessageType.Error] == []
    err = capfd.readouterr().err
    assert "InvalidStateError" not in err and "Unable to handle message" not in err


async def test_cancel_reaches_a_turn_blocked_in_a_long_command(
    client: LanguageClient, workspace: Path, model_server
):
    """The turn's command blocks for 30 s; the cancel must be read and acted on at
    once (stdin is never starved by turn work), killing the command."""
    await configure(client, permissionMode="bypass")
    command = "echo $$ > pid.txt; sleep 30; echo finished > done.txt"
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": command}), id="r1")]),
        Reply(text="never"),
    )
    pending = _prompt_request(client, "run it", msg_id=4601)
    pid_file = workspace / "pid.txt"
    await wait_until(lambda: pid_file.exists() and pid_file.read_text().strip())
    pid = int(pid_file.read_text())
    # Requests are answered while the command blocks...
    assert "sessionId" in await asyncio.wait_for(execute(client, "clio.usage"), 10)
    # ...and the cancel stops the turn long before the command would have ended.
    client.cancel_request(types.CancelParams(id=4601))
    with pytest.raises(JsonRpcException):
        await asyncio.wait_for(pending, 15)
    await wait_until(lambda: not pid_alive(pid), timeout_s=10)
    assert not (workspace / "done.txt").exists()
