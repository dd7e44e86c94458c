"""ACP ``session/request_permission``: asked before an edit, a rejection leaves the
file alone, a cancel while the question is open ends the turn ``cancelled``. The first
two share one agent whose client offers every tool (``agent``); the raw-wire ones share
another (``raw_wire``), each test in its own session with its own request ids."""

from __future__ import annotations

import json

import pytest
from acp import text_block

from tests.acp.conftest import ALL_TOOLS, SharedAgent, Wire, req
from tests.support.model_server import Reply, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def agent_capabilities():
    return ALL_TOOLS


async def test_edit_asks_permission_then_writes_through_the_client_and_shows_a_diff(
    agent: SharedAgent, model_server, workspace
):
    args = json.dumps({"path": "notes.txt", "content": "first line\n"})
    model_server.push(Reply(tool_calls=[ToolCall("write_file", args)]), Reply(text="written"))
    agent.client.permission = "allow_once"
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    sid = new.session_id
    result = await conn.prompt(session_id=sid, prompt=[text_block("write notes")])
    assert result.stop_reason == "end_turn"
    [asked] = client.permission_requests
    assert asked["toolCall"]["kind"] == "edit"
    assert asked["toolCall"]["locations"] == [{"path": str(workspace / "notes.txt")}]
    assert client.writes == [(str(workspace / "notes.txt"), "first line\n")]
    started = client.updates("tool_call", sid)
    assert started[0]["kind"] == "edit" and started[0]["status"] == "pending"
    finished = [
        u for u in client.updates("tool_call_update", sid) if u.get("status") == "completed"
    ]
    diffs = [c for c in finished[-1]["content"] if c["type"] == "diff"]
    assert diffs == [
        {"type": "diff", "path": str(workspace / "notes.txt"), "newText": "first line\n"}
    ]


async def test_rejected_permission_leaves_the_file_alone(
    agent: SharedAgent, model_server, workspace
):
    args = json.dumps({"path": "nope.txt", "content": "x"})
    model_server.push(Reply(tool_calls=[ToolCall("write_file", args)]), Reply(text="understood"))
    agent.client.permission = "reject_once"
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    result = await conn.prompt(session_id=new.session_id, prompt=[text_block("write")])
    assert result.stop_reason == "end_turn"
    assert not (workspace / "nope.txt").exists()
    assert client.writes == []  # nor through the client's fs/write_text_file
    failed = [u for u in client.updates("tool_call_update") if u.get("status") == "failed"]
    assert failed


async def test_cancel_while_a_permission_request_is_open_ends_the_turn_cancelled(
    raw_wire: Wire, tmp_path
):
    args = json.dumps({"command": "touch should-not-exist"})
    raw_wire.model.push(Reply(tool_calls=[ToolCall("run_command", args)]), Reply(text="late"))
    peer = raw_wire.peer
    sid = await raw_wire.new_session(tmp_path)
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "touch it"}]}
    await peer.send(req(raw_wire.rid("prompt"), "session/prompt", prompt))
    ask, _ = await peer.recv_until(
        lambda m: (
            m.get("method") == "session/request_permission" and m["params"]["sessionId"] == sid
        )
    )
    assert ask["params"]["toolCall"]["kind"] == "execute"
    await peer.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    # ACP: the client answers its open permission request with "cancelled"
    await peer.send(
        {"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "cancelled"}}}
    )
    answer, during = await peer.recv_until(lambda m: m.get("id") == raw_wire.rid("prompt"))
    # the agent still serves afterwards (and lists this session)
    await peer.send(req(raw_wire.rid("list"), "session/list", {}))
    listed, _ = await peer.recv_until(lambda m: m.get("id") == raw_wire.rid("list"))
    assert answer["result"] == {"stopReason": "cancelled"}
    assert not (tmp_path / "should-not-exist").exists()
    assert len(raw_wire.model.bodies) == 1  # no model call after the cancel
    assert all(m.get("method") == "session/update" for m in during)
    assert sid in [s["sessionId"] for s in listed["result"]["sessions"]]


async def test_cancel_without_the_client_answering_the_permission_still_ends_the_turn(
    raw_wire: Wire, tmp_path
):
    args = json.dumps({"path": "x.txt", "content": "x"})
    raw_wire.model.push(Reply(tool_calls=[ToolCall("write_file", args)]), Reply(text="late"))
    peer = raw_wire.peer
    sid = await raw_wire.new_session(tmp_path)
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "write"}]}
    await peer.send(req(raw_wire.rid("prompt"), "session/prompt", prompt))
    await peer.recv_until(
        lambda m: (
            m.get("method") == "session/request_permission" and m["params"]["sessionId"] == sid
        )
    )
    await peer.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    answer, _ = await peer.recv_until(lambda m: m.get("id") == raw_wire.rid("prompt"))
    assert answer["result"] == {"stopReason": "cancelled"}
    assert not (tmp_path / "x.txt").exists()
