"""Agent turns through ``clio.prompt`` (issue 8 item 1): the event stream as
``clio/sessionUpdate``, ``$/progress`` for the turn, the stop reason as the result.
The model is the scripted model server on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from tests.lsp.conftest import (
    NEUTRAL_CLIENT,
    PROGRESS,
    SESSION_UPDATE,
    execute,
    updates_of,
    wait_for,
)
from tests.support.model_server import Reply, ToolCall, usage

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
    return model_server


async def test_prompt_streams_session_updates_and_returns_the_stop_reason(
    client: LanguageClient, model_server
):
    model_server.push(Reply(text=["Hel", "lo ", "there"], usage=usage(12, 3)))
    result = await execute(client, "clio.prompt", {"text": "say hello"})
    assert result["stopReason"] == "end_turn"
    session_id = result["sessionId"]
    chunks = updates_of(client, "message_chunk")
    assert "".join(c["text"] for c in chunks) == "Hello there"
    assert all(c["sessionId"] == session_id and "messageId" in c for c in chunks)
    ended = await wait_for(client, SESSION_UPDATE, lambda: updates_of(client, "turn_ended"))
    assert ended[-1] == {"type": "turn_ended", "sessionId": session_id, "stopReason": "end_turn"}


async def test_prompt_reports_progress_from_begin_to_end(client: LanguageClient, model_server):
    model_server.push(Reply(reasoning=["thinking about it"], text=["Done."]))
    await execute(client, "clio.prompt", "go")
    reports = await wait_for(
        client,
        PROGRESS,
        lambda: [
            r
            for r in client.progress_reports.values()
            if r and isinstance(r[-1], types.WorkDoneProgressEnd)
        ],
    )
    begin, *middle, end = reports[0]
    assert isinstance(begin, types.WorkDoneProgressBegin)
    assert begin.title == "clio" and begin.cancellable is True
    assert {m.message for m in middle} >= {"thinking…", "answering…"}
    assert end.message == "end_turn"


async def test_tool_calls_appear_in_the_update_stream(
    client: LanguageClient, model_server, workspace: Path
):
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", json.dumps({"path": "main.py"}), id="c1")]),
        Reply(text="It prints hello."),
    )
    result = await execute(client, "clio.prompt", {"text": "what does main.py do?"})
    assert result["stopReason"] == "end_turn"
    started = updates_of(client, "tool_call_started")
    finished = updates_of(client, "tool_call_finished")
    assert started[0]["toolName"] == "read_file" and started[0]["toolCallId"] == "c1"
    assert finished[0]["toolCallId"] == "c1" and finished[0]["status"] == "completed"
    assert "hello" in finished[0]["output"]


async def test_active_document_is_named_to_the_model(
    client: LanguageClient, model_server, workspace: Path
):
    model_server.push(Reply(text="ok"))
    await execute(
        client,
        "clio.prompt",
        {
            "text": "explain this line",
            "textDocument": {"uri": (workspace / "main.py").as_uri()},
            "position": {"line": 0, "character": 3},
            "selection": {
                "start": {"line": 0, "character": 0},
                "end": {"line": 0, "character": 5},
            },
        },
    )
    sent = json.dumps(model_server.bodies[0]["messages"])
    assert "explain this line" in sent
    assert "[Active document: main.py:1:4, selection 1:1-1:6]" in sent


async def test_second_prompt_continues_the_session_and_usage_adds_up(
    client: LanguageClient, model_server
):
    model_server.push(Reply(text="one", usage=usage(10, 2)), Reply(text="two", usage=usage(20, 3)))
    first = await execute(client, "clio.prompt", "first")
    second = await execute(client, "clio.prompt", "second")
    assert first["sessionId"] == second["sessionId"]
    assert len(model_server.bodies[1]["messages"]) > len(model_server.bodies[0]["messages"])
    totals = await execute(client, "clio.usage")
    assert totals["sessionId"] == first["sessionId"]
    assert totals["session"]["inputTokens"] == 30
    assert totals["session"]["outputTokens"] == 5


async def test_a_second_prompt_while_a_turn_runs_is_refused_clearly(
    client: LanguageClient, model_server
):
    model_server.push(Reply(text=["word "] * 400, chunk_delay=0.05))
    first = asyncio.ensure_future(execute(client, "clio.prompt", "long one"))
    await wait_for(client, SESSION_UPDATE, lambda: updates_of(client, "message_chunk"))
    with pytest.raises(JsonRpcException) as caught:
        await execute(client, "clio.prompt", "impatient")
    assert caught.value.code == types.LSPErrorCodes.RequestFailed.value
    assert "already running" in caught.value.message
    await execute(client, "clio.cancel")
    assert (await asyncio.wait_for(first, 15))["stopReason"] == "cancelled"
