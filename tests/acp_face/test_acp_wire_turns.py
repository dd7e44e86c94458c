"""Raw-wire turn behaviour of ``clio-acp acp``: message order, a cancel while a
permission request is open, and stdout pollution from a tool's child process."""

from __future__ import annotations

import json

import pytest

from tests.support.acp_client import RawPeer
from tests.support.model_server import Reply, ToolCall

pytestmark = pytest.mark.slow

# The session core lands on main in slices (issue 6); until it does these are skipped.


def _req(rid, method, params):
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


async def _init_new(peer: RawPeer, cwd) -> tuple[str, list[dict]]:
    await peer.send(_req(1, "initialize", {"protocolVersion": 1}))
    await peer.recv_until(lambda m: m.get("id") == 1)
    await peer.send(_req(2, "session/new", {"cwd": str(cwd), "mcpServers": []}))
    new, before = await peer.recv_until(lambda m: m.get("id") == 2)
    return new["result"]["sessionId"], before


async def test_available_commands_follow_the_session_new_response(model_server, tmp_path):
    model_server.install_settings(memory=False)
    peer = await RawPeer.start()
    try:
        sid, before = await _init_new(peer, tmp_path)
        commands = await peer.recv()
    finally:
        await peer.close()
    assert before == []  # nothing about the session precedes its creation answer
    assert commands["method"] == "session/update"
    assert commands["params"]["sessionId"] == sid
    assert commands["params"]["update"]["sessionUpdate"] == "available_commands_update"


async def test_cancel_while_a_permission_request_is_open_ends_the_turn_cancelled(
    model_server, tmp_path
):
    model_server.install_settings(memory=False)
    args = json.dumps({"command": "touch should-not-exist"})
    model_server.push(Reply(tool_calls=[ToolCall("run_command", args)]), Reply(text="late"))
    peer = await RawPeer.start()
    try:
        sid, _ = await _init_new(peer, tmp_path)
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "touch it"}]}
        await peer.send(_req(3, "session/prompt", prompt))
        ask, _ = await peer.recv_until(lambda m: m.get("method") == "session/request_permission")
        assert ask["params"]["toolCall"]["kind"] == "execute"
        await peer.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        )
        # ACP: the client answers its open permission request with "cancelled"
        await peer.send(
            {"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "cancelled"}}}
        )
        answer, during = await peer.recv_until(lambda m: m.get("id") == 3)
        # the agent still serves afterwards
        await peer.send(_req(4, "session/list", {}))
        listed, _ = await peer.recv_until(lambda m: m.get("id") == 4)
    finally:
        await peer.close()
    assert answer["result"] == {"stopReason": "cancelled"}
    assert not (tmp_path / "should-not-exist").exists()
    assert len(model_server.bodies) == 1  # no model call after the cancel
    assert all(m.get("method") == "session/update" for m in during)
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]


async def test_cancel_without_the_client_answering_the_permission_still_ends_the_turn(
    model_server, tmp_path
):
    model_server.install_settings(memory=False)
    args = json.dumps({"path": "x.txt", "content": "x"})
    model_server.push(Reply(tool_calls=[ToolCall("write_file", args)]), Reply(text="late"))
    peer = await RawPeer.start()
    try:
        sid, _ = await _init_new(peer, tmp_path)
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "write"}]}
        await peer.send(_req(3, "session/prompt", prompt))
        await peer.recv_until(lambda m: m.get("method") == "session/request_permission")
        await peer.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        )
        answer, _ = await peer.recv_until(lambda m: m.get("id") == 3)
    finally:
        await peer.close()
    assert answer["result"] == {"stopReason": "cancelled"}
    assert not (tmp_path / "x.txt").exists()


async def test_cancel_request_on_a_prompt_ends_it_cancelled(model_server, tmp_path):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text=["slow "] * 200, chunk_delay=0.05))
    peer = await RawPeer.start()
    try:
        sid, _ = await _init_new(peer, tmp_path)
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        await peer.send(_req("p-1", "session/prompt", prompt))
        await peer.recv_until(
            lambda m: (
                m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk"
            )
        )
        await peer.send(
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "p-1"}}
        )
        answer, _ = await peer.recv_until(lambda m: m.get("id") == "p-1")
    finally:
        await peer.close()
    assert answer["result"] == {"stopReason": "cancelled"}


async def test_a_tool_child_writing_to_the_agents_stdout_cannot_corrupt_the_protocol(
    model_server, tmp_path
):
    model_server.install_settings(memory=False)
    # The child writes to its parent's (the agent's) fd 1 directly, bypassing its pipe.
    command = "echo POLLUTION-FROM-CHILD > /proc/$PPID/fd/1; echo visible-output"
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": command}))]),
        Reply(text="done"),
    )
    peer = await RawPeer.start()
    try:
        sid, _ = await _init_new(peer, tmp_path)
        await peer.send(_req(3, "session/set_mode", {"sessionId": sid, "modeId": "bypass"}))
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]}
        await peer.send(_req(4, "session/prompt", prompt))
        answer, _ = await peer.recv_until(lambda m: m.get("id") == 4)
    finally:
        _rest, err = await peer.close()
    assert answer["result"] == {"stopReason": "end_turn"}
    # every stdout line parsed as JSON (RawPeer.recv would have raised otherwise)
    assert all(line.strip() != b"POLLUTION-FROM-CHILD" for line in peer.lines)
    assert b"POLLUTION-FROM-CHILD" in err
    tool_results = json.dumps(model_server.bodies[-1]["messages"])
    assert "visible-output" in tool_results
