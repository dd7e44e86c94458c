"""The protocol stream during turns: a tool's child writing to the agent's stdout
cannot corrupt it."""

from __future__ import annotations

import json

import pytest

from tests.acp.conftest import init_new, req
from tests.support.acp_client import RawPeer
from tests.support.model_server import Reply, ToolCall

pytestmark = pytest.mark.slow


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
        sid, _ = await init_new(peer, tmp_path)
        await peer.send(req(3, "session/set_mode", {"sessionId": sid, "modeId": "bypass"}))
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]}
        await peer.send(req(4, "session/prompt", prompt))
        answer, _ = await peer.recv_until(lambda m: m.get("id") == 4)
    finally:
        _rest, err = await peer.close()
    assert answer["result"] == {"stopReason": "end_turn"}
    # every stdout line parsed as JSON (RawPeer.recv would have raised otherwise)
    assert all(line.strip() != b"POLLUTION-FROM-CHILD" for line in peer.lines)
    assert b"POLLUTION-FROM-CHILD" in err
    tool_results = json.dumps(model_server.bodies[-1]["messages"])
    assert "visible-output" in tool_results
