"""Tool-call ids are unique per session whatever the model server sends (issue 21
item 5): a server that numbers calls per response (``call_0`` every time) gets
distinct tool-call cards and a handoff that lists every command."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from acp import text_block

from tests.acp.conftest import SharedAgent, texts_of
from tests.support.model_server import Reply, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


def _run(command: str) -> Reply:
    return Reply(
        tool_calls=[ToolCall("run_command", json.dumps({"command": command}), id="call_0")]
    )


async def test_a_reused_call_id_becomes_a_new_card_and_the_handoff_keeps_both(
    agent: SharedAgent, model_server, workspace
):
    # The shared agent (settings: rules tier only) after other tests' sessions: the
    # ids are unique within this session, and its first keeps the model's own id.
    conn, client = agent.conn, agent.client
    model_server.push(_run("echo first"), _run("echo second"), Reply(text="done"))
    model_server.push(_run("echo third"), Reply(text="done again"))
    sid = (await agent.new_session(workspace)).session_id
    await conn.set_session_mode(session_id=sid, mode_id="bypass")
    await conn.prompt(session_id=sid, prompt=[text_block("run two")])
    await conn.prompt(session_id=sid, prompt=[text_block("run one more")])
    await conn.prompt(session_id=sid, prompt=[text_block("/handoff")])
    handoff_reply = texts_of(client, "agent_message_chunk", sid)
    ids = [u["toolCallId"] for u in client.updates("tool_call", sid)]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert ids[0] == "call_0"
    # The model's history pairs each call with its own result under the new id.
    last = model_server.bodies[-1]["messages"]
    call_ids = [
        c["id"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls") or []
    ]
    result_ids = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert call_ids == result_ids == ids
    path = handoff_reply.split("Handoff written: ", 1)[1].strip()
    text = await asyncio.to_thread(Path(path).read_text, encoding="utf-8")
    for command in ("echo first", "echo second", "echo third"):
        assert command in text
