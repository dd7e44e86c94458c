"""ACP ``session/prompt``: streamed chunks with message ids and usage, embedded
context, one turn at a time. One agent for the module (``agent``); each test opens its
own session in its own workspace."""

from __future__ import annotations

import asyncio
import json

import pytest
from acp import text_block
from acp.exceptions import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    ResourceContentBlock,
    TextResourceContents,
)

from tests.acp.conftest import SharedAgent, texts_of
from tests.support.model_server import Reply, usage

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


async def test_prompt_streams_thought_and_message_chunks_with_message_ids_and_usage(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(
        Reply(reasoning="weighing options", text="Hello there friend", usage=usage(12, 3))
    )
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    sid = new.session_id
    result = await conn.prompt(session_id=sid, prompt=[text_block("say hello")])
    assert result.stop_reason == "end_turn"
    assert texts_of(client, "agent_message_chunk", sid) == "Hello there friend"
    assert texts_of(client, "agent_thought_chunk", sid) == "weighing options"
    chunks = client.updates("agent_message_chunk", sid) + client.updates("agent_thought_chunk", sid)
    assert all(c.get("messageId") for c in chunks)
    usage_updates = client.updates("usage_update", sid)
    assert usage_updates and usage_updates[-1]["size"] > 0
    assert client.updates("session_info_update", sid)[-1]["title"] == "say hello"
    # the user's words reached the model
    assert "say hello" in json.dumps(model_server.bodies[0]["messages"])


async def test_embedded_resources_and_links_reach_the_model_as_text(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(Reply(text="ok"))
    blocks = [
        text_block("explain"),
        ResourceContentBlock(type="resource_link", uri="file:///x/y.py", name="y.py"),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri="file:///x/z.py", text="print('zzz')"),
        ),
    ]
    new = await agent.new_session(workspace)
    await agent.conn.prompt(session_id=new.session_id, prompt=blocks)
    sent = json.dumps(model_server.bodies[0]["messages"])
    assert "@file:///x/y.py" in sent
    assert "print('zzz')" in sent


async def test_second_prompt_while_a_turn_runs_is_refused_and_the_first_finishes(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(Reply(text=["a "] * 20, chunk_delay=0.05))
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    sid = new.session_id
    first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("one")]))
    await client.wait_update(lambda p: p["update"].get("sessionUpdate") == "agent_message_chunk")
    with pytest.raises(RequestError) as refused:
        await conn.prompt(session_id=sid, prompt=[text_block("two")])
    result = await asyncio.wait_for(first, 20)
    assert refused.value.code == -32600
    assert result.stop_reason == "end_turn"
