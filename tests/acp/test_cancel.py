"""ACP ``session/cancel`` and ``$/cancel_request`` on a prompt: the model stream and
a running command stop, the prompt answers ``cancelled``. The SDK-client tests share
one agent whose client offers every tool (``agent``); the raw-wire ones share another
(``raw_wire``), each test in its own session with its own request ids."""

from __future__ import annotations

import asyncio
import json

import pytest
from acp import text_block

from tests.acp.conftest import ALL_TOOLS, SharedAgent, Wire, req
from tests.support.model_server import Reply, ToolCall
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def agent_capabilities():
    return ALL_TOOLS


async def test_cancel_stops_a_running_terminal_command_and_answers_cancelled(
    agent: SharedAgent, model_server, workspace
):
    args = json.dumps({"command": "sleep 30"})
    model_server.push(Reply(tool_calls=[ToolCall("run_command", args)]))
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    sid = new.session_id
    await conn.set_session_mode(session_id=sid, mode_id="bypass")
    turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("sleep")]))
    await client.wait_update(lambda p: p["update"].get("sessionUpdate") == "tool_call")
    await wait_until(lambda: client.terminal_log, timeout_s=5)
    await conn.cancel(session_id=sid)
    result = await asyncio.wait_for(turn, 20)
    assert result.stop_reason == "cancelled"
    assert "kill term-1" in client.terminal_log
    assert client.terminal_log[-1] == "release term-1"


async def test_cancel_during_model_stream_answers_cancelled(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(Reply(text=["slow "] * 200, chunk_delay=0.05))
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    sid = new.session_id
    turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
    await client.wait_update(lambda p: p["update"].get("sessionUpdate") == "agent_message_chunk")
    await conn.cancel(session_id=sid)
    result = await asyncio.wait_for(turn, 20)
    streamed = len(client.updates("agent_message_chunk", sid))
    # the session goes on after a cancel
    model_server.push(Reply(text="again"))
    again = await conn.prompt(session_id=sid, prompt=[text_block("again")])
    assert result.stop_reason == "cancelled"
    assert streamed < 200
    assert again.stop_reason == "end_turn"


async def test_cancel_request_on_a_prompt_ends_it_cancelled(raw_wire: Wire, tmp_path):
    raw_wire.model.push(Reply(text=["slow "] * 200, chunk_delay=0.05))
    peer = raw_wire.peer
    sid = await raw_wire.new_session(tmp_path)
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    await peer.send(req(raw_wire.rid("p-1"), "session/prompt", prompt))
    await peer.recv_until(raw_wire.chunk_in(sid))
    await peer.send(
        {
            "jsonrpc": "2.0",
            "method": "$/cancel_request",
            "params": {"requestId": raw_wire.rid("p-1")},
        }
    )
    answer, _ = await peer.recv_until(lambda m: m.get("id") == raw_wire.rid("p-1"))
    assert answer["result"] == {"stopReason": "cancelled"}


async def test_a_prompt_right_after_cancel_waits_for_the_cancelled_turn(raw_wire: Wire, tmp_path):
    """Issue 21: ``session/cancel`` then an immediate ``session/prompt`` is queued behind
    the winding-down turn, not refused with -32600."""
    raw_wire.model.push(Reply(text=["slow "] * 200, chunk_delay=0.05), Reply(text="again"))
    peer = raw_wire.peer
    sid = await raw_wire.new_session(tmp_path)
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    await peer.send(req(raw_wire.rid("p-1"), "session/prompt", prompt))
    await peer.recv_until(raw_wire.chunk_in(sid))
    await peer.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    again = {**prompt, "prompt": [{"type": "text", "text": "again"}]}
    await peer.send(req(raw_wire.rid("p-2"), "session/prompt", again))
    first, _ = await peer.recv_until(lambda m: m.get("id") == raw_wire.rid("p-1"))
    second, _ = await peer.recv_until(lambda m: m.get("id") == raw_wire.rid("p-2"))
    assert first["result"] == {"stopReason": "cancelled"}
    assert second.get("result") == {"stopReason": "end_turn"}, second


async def test_compact_honours_cancel(raw_wire: Wire, tmp_path):
    """Issue 21: ``/compact`` is answered ``cancelled`` as soon as it is cancelled, not
    after the (slow) summary is applied."""
    raw_wire.model.push(
        Reply(text="first answer"),
        Reply(text="second answer"),
        Reply(text="the summary", delay=15),  # whether streamed or not: slow
    )
    peer = raw_wire.peer
    sid = await raw_wire.new_session(tmp_path)

    def prompt(rid: str, text: str) -> dict:
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        return req(raw_wire.rid(rid), "session/prompt", params)

    for n, text in enumerate(("hello", "more")):
        await peer.send(prompt(f"p-{n}", text))
        await peer.recv_until(lambda m, n=n: m.get("id") == raw_wire.rid(f"p-{n}"))
    await peer.send(prompt("c-1", "/compact"))
    await asyncio.to_thread(raw_wire.model.wait_for_requests, 3, 20)
    started = asyncio.get_running_loop().time()
    await peer.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    answer, _ = await peer.recv_until(lambda m: m.get("id") == raw_wire.rid("c-1"))
    waited = asyncio.get_running_loop().time() - started
    assert answer["result"] == {"stopReason": "cancelled"}
    assert waited < 8  # the summary alone takes 15 s
