"""The client's MCP servers (issue 21 item 1): stdio servers from ``session/new`` are
started with the official SDK, their tools reach the model and run under the
permission modes, failures are notices, and the servers stop with the session. The
server is a real one written with the same SDK (``tests/support/mcp_server.py``). One
agent for the module (``agent``); each test opens its own session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from acp import text_block
from acp.schema import EnvVariable, HttpMcpServer, McpServerStdio

from tests.acp.conftest import SharedAgent
from tests.conftest import REPO_ROOT
from tests.support.model_server import Reply, ToolCall
from tests.support.waiting import process_gone, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


def _demo(pid_file: Path | None = None, name: str = "demo") -> McpServerStdio:
    env = [EnvVariable(name="PYTHONPATH", value=str(REPO_ROOT))]
    if pid_file is not None:
        env.append(EnvVariable(name="MCP_PID_FILE", value=str(pid_file)))
    return McpServerStdio(
        name=name, command=sys.executable, args=["-m", "tests.support.mcp_server"], env=env
    )


async def test_a_scripted_model_calls_a_real_mcp_tool_end_to_end(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(
        Reply(tool_calls=[ToolCall("mcp__demo__add", json.dumps({"a": 2, "b": 40}))]),
        Reply(text="the sum is 42"),
    )
    client = agent.client
    client.permission = "allow_once"
    new = await agent.new_session(workspace, mcp_servers=[_demo()])
    sid = new.session_id
    result = await agent.conn.prompt(session_id=sid, prompt=[text_block("add 2 and 40")])
    assert result.stop_reason == "end_turn"
    offered = {t["function"]["name"] for t in model_server.bodies[0]["tools"]}
    assert {"mcp__demo__add", "mcp__demo__shout", "mcp__demo__fail"} <= offered
    tool_message = model_server.bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "42" in tool_message["content"]
    [asked] = client.permission_requests  # not read-only: asked in the default mode
    assert asked["toolCall"]["kind"] == "other"
    started = client.updates("tool_call", sid)
    assert started and started[0]["kind"] == "other"


async def test_a_read_only_mcp_tool_runs_without_asking(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(
        Reply(tool_calls=[ToolCall("mcp__demo__shout", json.dumps({"text": "hey"}))]),
        Reply(text="done"),
    )
    agent.client.permission = "reject_once"
    new = await agent.new_session(workspace, mcp_servers=[_demo()])
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("shout")])
    assert agent.client.permission_requests == []
    assert "HEY" in model_server.bodies[1]["messages"][-1]["content"]


async def test_failing_and_http_servers_are_notices_and_the_session_goes_on(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(Reply(text="still here"))
    broken = McpServerStdio(name="broken", command="/nonexistent/mcp-server", args=[], env=[])
    remote = HttpMcpServer(type="http", name="remote", url="http://127.0.0.1:9/mcp", headers=[])
    new = await agent.new_session(workspace, mcp_servers=[broken, remote])
    sid = new.session_id
    result = await agent.conn.prompt(session_id=sid, prompt=[text_block("hello")])
    assert result.stop_reason == "end_turn"
    shown = json.dumps(agent.client.raw_updates)
    assert "MCP server broken did not start" in shown
    assert "MCP server remote: http transport is not supported" in shown


async def test_the_mcp_server_stops_with_the_session(agent: SharedAgent, tmp_path):
    pid_file = tmp_path / "mcp.pid"
    new = await agent.new_session(tmp_path, mcp_servers=[_demo(pid_file)])
    pid = int(pid_file.read_text())
    assert not process_gone(pid)
    await agent.conn.close_session(session_id=new.session_id)  # answered, not an error
    await wait_until(lambda: process_gone(pid), timeout_s=10)
