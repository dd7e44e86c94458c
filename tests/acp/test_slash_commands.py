"""Our slash commands (``available_commands_update``, ``/memory``, ``/usage``): sent
after the ``session/new`` answer, answered without the model. One agent for the module
(``agent``), except the wire-order test, which reads the raw stream of its own."""

from __future__ import annotations

import pytest
from acp import text_block
from acp.exceptions import RequestError

from tests.acp.conftest import SharedAgent, init_new, texts_of
from tests.support.acp_client import RawPeer
from tests.support.model_server import Reply, usage

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


async def test_slash_commands_are_advertised_and_answer_without_the_model(
    agent: SharedAgent, model_server, workspace
):
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    sid = new.session_id
    commands = await client.wait_update(
        lambda p: p["update"].get("sessionUpdate") == "available_commands_update"
    )
    board = await conn.prompt(session_id=sid, prompt=[text_block("/memory")])
    await conn.prompt(session_id=sid, prompt=[text_block("/usage")])
    await conn.prompt(session_id=sid, prompt=[text_block("/memory approve mem-0000000000000000")])
    await conn.prompt(session_id=sid, prompt=[text_block("/memory promote k1 global")])
    ext_board = await conn.ext_method("clio/session/board", {"sessionId": sid})
    with pytest.raises(RequestError) as propose_unknown:
        await conn.ext_method(
            "clio/memory/propose", {"sessionId": sid, "entryId": "k9", "scope": "repo"}
        )
    names = [c["name"] for c in commands["update"]["availableCommands"]]
    assert names == ["memory", "usage", "handoff", "compact", "workspace"]
    assert board.stop_reason == "end_turn"
    text = texts_of(client, "agent_message_chunk", sid)
    assert "Task memory" in text
    assert "Usage" in text
    assert "mem-0000000000000000" in text  # the unknown record is named, the session goes on
    assert "k1" in text
    assert model_server.bodies == []  # no model call for slash commands
    assert "tier" in ext_board
    assert propose_unknown.value.code == -32602


async def test_usage_command_sums_the_chat_usage_of_the_session(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(Reply(text="one", usage=usage(100, 7)), Reply(text="two", usage=usage(50, 3)))
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    sid = new.session_id
    await conn.prompt(session_id=sid, prompt=[text_block("first")])
    await conn.prompt(session_id=sid, prompt=[text_block("second")])
    before = len(texts_of(client, "agent_message_chunk", sid))
    await conn.prompt(session_id=sid, prompt=[text_block("/usage")])
    shown = texts_of(client, "agent_message_chunk", sid)[before:]
    assert "2 model requests, 150 input tokens" in shown
    assert "10 output tokens" in shown
    assert len(model_server.bodies) == 2


async def test_available_commands_follow_the_session_new_response(model_server, tmp_path):
    model_server.install_settings(memory=False)
    peer = await RawPeer.start()
    try:
        sid, before = await init_new(peer, tmp_path)
        commands = await peer.recv()
    finally:
        await peer.close()
    assert before == []  # nothing about the session precedes its creation answer
    assert commands["method"] == "session/update"
    assert commands["params"]["sessionId"] == sid
    assert commands["params"]["update"]["sessionUpdate"] == "available_commands_update"
