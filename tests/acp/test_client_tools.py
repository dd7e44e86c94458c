"""The client's ``fs/*`` and ``terminal/*`` methods as the tool host: reads see
unsaved buffers, commands run in client terminals that are always released. The
first two tests share one agent whose client offers every tool (``agent``); the
capped-stream test runs commands in the agent, so it starts one without them."""

from __future__ import annotations

import json

import pytest
from acp import text_block

from clio_acp.acp.hosting import STREAM_CAP_CHARS, STREAM_CUT_NOTE
from tests.acp.conftest import ALL_TOOLS, SharedAgent, start_session
from tests.support.acp_client import acp_agent
from tests.support.model_server import Reply, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def agent_capabilities():
    return ALL_TOOLS


async def test_commands_run_in_a_client_terminal_that_is_always_released(
    agent: SharedAgent, model_server, workspace
):
    args = json.dumps({"command": "echo from-terminal"})
    model_server.push(Reply(tool_calls=[ToolCall("run_command", args)]), Reply(text="ran"))
    agent.client.permission = "allow_once"
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    await conn.prompt(session_id=new.session_id, prompt=[text_block("run it")])
    assert client.terminal_log[0].startswith("create term-1 sh -c echo from-terminal")
    assert client.terminal_log[-1] == "release term-1"
    finished = [u for u in client.updates("tool_call_update") if u.get("status") == "completed"]
    assert "from-terminal" in json.dumps(finished[-1])
    tool_msg = [m for m in model_server.bodies[-1]["messages"] if m.get("role") == "tool"]
    assert "from-terminal" in json.dumps(tool_msg)


async def test_reads_go_through_the_client_and_see_unsaved_buffers(
    agent: SharedAgent, model_server, workspace
):
    (workspace / "main.py").write_text("print('on disk')\n")
    args = json.dumps({"path": "main.py"})
    model_server.push(Reply(tool_calls=[ToolCall("read_file", args)]), Reply(text="read it"))
    conn, client = agent.conn, agent.client
    client.files[str(workspace / "main.py")] = "print('unsaved edit')\n"
    new = await agent.new_session(workspace)
    await conn.prompt(session_id=new.session_id, prompt=[text_block("read main.py")])
    tool_results = json.dumps(
        [m for m in model_server.bodies[-1]["messages"] if m.get("role") == "tool"]
    )
    assert "unsaved edit" in tool_results
    assert "on disk" not in tool_results
    assert client.permission_requests == []  # reads never ask


async def test_streamed_command_output_is_capped_for_the_client(model_server, workspace):
    """Issue 21 item 4: a huge command output is not streamed whole to the editor; the
    stream stops at the cap with a note and the result carries the spill reference."""
    model_server.install_settings(memory=False)
    loud = "python3 -c \"import sys; [sys.stdout.write('x' * 1000 + chr(10)) for _ in range(400)]\""
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": loud}))]),
        Reply(text="that was loud"),
    )
    async with acp_agent() as (conn, client, _proc):
        new = await start_session(conn, workspace)
        sid = new.session_id
        await conn.set_session_mode(session_id=sid, mode_id="bypass")
        await conn.prompt(session_id=sid, prompt=[text_block("be loud")])
    updates = client.updates("tool_call_update", sid)
    streamed = [
        c["content"]["text"]
        for u in updates
        if u.get("status") == "in_progress"
        for c in u.get("content") or []
    ]
    total = sum(len(t) for t in streamed)
    assert 0 < total <= STREAM_CAP_CHARS + len(STREAM_CUT_NOTE)
    assert streamed[-1].endswith(STREAM_CUT_NOTE)
    final = [u for u in updates if u.get("status") == "completed"][-1]
    assert "spill" in json.dumps(final).lower()
