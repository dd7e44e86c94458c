"""The client's MCP servers (issue 21 item 1): stdio servers from ``session/new`` are
started with the official SDK, their tools reach the model and run under the
permission modes, failures are notices, and the servers stop with the session. The
server is a real one written with the same SDK (``tests/support/mcp_server.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from acp import text_block
from acp.schema import EnvVariable, HttpMcpServer, McpServerStdio

from tests.acp.conftest import req
from tests.conftest import REPO_ROOT
from tests.support.acp_client import RawPeer, RecordingClient, acp_agent
from tests.support.model_server import Reply, ToolCall
from tests.support.waiting import process_gone, wait_until

pytestmark = pytest.mark.slow


def _demo(pid_file: Path | None = None, name: str = "demo") -> McpServerStdio:
    env = [EnvVariable(name="PYTHONPATH", value=str(REPO_ROOT))]
    if pid_file is not None:
        env.append(EnvVariable(name="MCP_PID_FILE", value=str(pid_file)))
    return McpServerStdio(
        name=name, command=sys.executable, args=["-m", "tests.support.mcp_server"], env=env
    )


async def test_a_scripted_model_calls_a_real_mcp_tool_end_to_end(model_server, workspace):
    model_server.install_settings(memory=False)
    model_server.push(
        Reply(tool_calls=[ToolCall("mcp__demo__add", json.dumps({"a": 2, "b": 40}))]),
        Reply(text="the sum is 42"),
    )
    client = RecordingClient(permission="allow_once")
    async with acp_agent(client) as (conn, client, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[_demo()])
        sid = new.session_id
        result = await conn.prompt(session_id=sid, prompt=[text_block("add 2 and 40")])
    assert result.stop_reason == "end_turn"
    offered = {t["function"]["name"] for t in model_server.bodies[0]["tools"]}
    assert {"mcp__demo__add", "mcp__demo__shout", "mcp__demo__fail"} <= offered
    tool_message = model_server.bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "42" in tool_message["content"]
    [asked] = client.permission_requests  # not read-only: asked in the default mode
    assert asked["toolCall"]["kind"] == "other"
    started = client.updates("tool_call", sid)
    assert started and started[0]["kind"] == "other"


async def test_a_read_only_mcp_tool_runs_without_asking(model_server, workspace):
    model_server.install_settings(memory=False)
    model_server.push(
        Reply(tool_calls=[ToolCall("mcp__demo__shout", json.dumps({"text": "hey"}))]),
        Reply(text="done"),
    )
    client = RecordingClient(permission="reject_once")
    async with acp_agent(client) as (conn, client, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[_demo()])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("shout")])
    assert client.permission_requests == []
    assert "HEY" in model_server.bodies[1]["messages"][-1]["content"]


async def test_failing_and_http_servers_are_notices_and_the_session_goes_on(
    model_server, workspace
):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="still here"))
    broken = McpServerStdio(name="broken", command="/nonexistent/mcp-server", args=[], env=[])
    remote = HttpMcpServer(type="http", name="remote", url="http://127.0.0.1:9/mcp", headers=[])
    async with acp_agent() as (conn, client, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[broken, remote])
        sid = new.session_id
        result = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
    assert result.stop_reason == "end_turn"
    shown = json.dumps(client.raw_updates)
    assert "MCP server broken did not start" in shown
    assert "MCP server remote: http transport is not supported" in shown


async def test_the_mcp_server_stops_with_the_session(model_server, tmp_path):
    model_server.install_settings(memory=False)
    pid_file = tmp_path / "mcp.pid"
    peer = await RawPeer.start()
    try:
        await peer.send(req(1, "initialize", {"protocolVersion": 1}))
        await peer.recv_until(lambda m: m.get("id") == 1)
        server = _demo(pid_file).model_dump(by_alias=True, exclude_none=True)
        await peer.send(req(2, "session/new", {"cwd": str(tmp_path), "mcpServers": [server]}))
        new, _ = await peer.recv_until(lambda m: m.get("id") == 2)
        sid = new["result"]["sessionId"]
        pid = int(pid_file.read_text())
        assert not process_gone(pid)
        await peer.send(req(3, "session/close", {"sessionId": sid}))
        closed, _ = await peer.recv_until(lambda m: m.get("id") == 3)
        await wait_until(lambda: process_gone(pid), timeout_s=10)
    finally:
        await peer.close()
    assert closed["result"] == {}
