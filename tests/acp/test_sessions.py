"""ACP session lifecycle: ``session/load`` (replay), ``session/resume`` (no replay),
``session/list``, ``session/close``, ``session/delete``, ``session/fork``.

Fork and the running-prompt cases share one agent for the module (``agent``); load and
resume need a second process (one test: two sessions made in one agent, one loaded and
one resumed in the next), and the list test an agent whose store holds only its own
sessions, so those start their own."""

from __future__ import annotations

import asyncio
import json

import pytest
from acp import text_block
from acp.exceptions import RequestError

from tests.acp.conftest import SharedAgent, start_session, texts_of
from tests.support.acp_client import acp_agent, raw_request
from tests.support.model_server import Reply, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


async def test_in_a_new_process_load_replays_the_history_and_resume_never_replays(
    model_server, workspace, tmp_path
):
    # Two sessions made in one agent, then one loaded and the other resumed in a second
    # agent (one process each, not two: what each side sees is told apart by session id).
    model_server.install_settings(memory=False)
    model_server.push(
        Reply(reasoning="plan", tool_calls=[ToolCall("list_dir", json.dumps({"path": "."}))]),
        Reply(text="The folder is empty."),
        Reply(text="first answer"),
    )
    other = tmp_path / "other"
    other.mkdir()
    async with acp_agent() as (conn, _client, _proc):
        loaded_sid = (await start_session(conn, workspace)).session_id
        await conn.prompt(session_id=loaded_sid, prompt=[text_block("what is here?")])
        resumed_sid = (await conn.new_session(cwd=str(other), mcp_servers=[])).session_id
        await conn.prompt(session_id=resumed_sid, prompt=[text_block("first")])
    model_server.push(Reply(text="second answer"))
    async with acp_agent() as (conn, client, _proc):
        await conn.initialize(protocol_version=1)
        await conn.resume_session(session_id=resumed_sid, cwd=str(other), mcp_servers=[])
        # Barrier: updates of one session go out in order, so once the mode change's
        # update arrives, a replay (if there were one) would already be here.
        await conn.set_session_mode(session_id=resumed_sid, mode_id="ask")
        await client.wait_update(
            lambda p: (
                p["sessionId"] == resumed_sid
                and p["update"].get("sessionUpdate") == "config_option_update"
            )
        )
        before = [
            p["update"]["sessionUpdate"]
            for p in client.raw_updates
            if p["sessionId"] == resumed_sid
        ]
        result = await conn.prompt(session_id=resumed_sid, prompt=[text_block("second")])
        sent = json.dumps(model_server.bodies[-1]["messages"])
        loaded = await conn.load_session(session_id=loaded_sid, cwd=str(workspace), mcp_servers=[])
        replayed = [
            p["update"]["sessionUpdate"] for p in client.raw_updates if p["sessionId"] == loaded_sid
        ]
    # resume: no replay, and the conversation went on where it was
    assert "user_message_chunk" not in before and "agent_message_chunk" not in before
    assert result.stop_reason == "end_turn"
    assert "first answer" in sent
    # load: the whole history, in order, before the answer
    assert loaded.modes.current_mode_id == "ask"
    assert texts_of(client, "user_message_chunk", loaded_sid) == "what is here?"
    assert texts_of(client, "agent_message_chunk", loaded_sid) == "The folder is empty."
    assert "agent_thought_chunk" in replayed
    assert "tool_call" in replayed and "tool_call_update" in replayed
    assert replayed.index("user_message_chunk") < replayed.index("tool_call")


async def test_list_close_delete_and_unknown_sessions(model_server, workspace, tmp_path):
    model_server.install_settings(memory=False)
    other = tmp_path / "other"
    other.mkdir()
    async with acp_agent() as (conn, _client, _proc):
        a = await start_session(conn, workspace)
        b = await conn.new_session(cwd=str(other), mcp_servers=[])
        listed = await conn.list_sessions()
        only_ws = await conn.list_sessions(cwd=str(workspace))
        await conn.close_session(session_id=a.session_id)
        with pytest.raises(RequestError) as after_close:
            await conn.prompt(session_id=a.session_id, prompt=[text_block("x")])
        assert await raw_request(conn, "session/delete", {"sessionId": b.session_id}) == {}
        assert await raw_request(conn, "session/delete", {"sessionId": b.session_id}) == {}
        assert await raw_request(conn, "session/delete", {"sessionId": "sess_never"}) == {}
        remaining = await conn.list_sessions()
        errors = {}
        for name, call in {
            "prompt": conn.prompt(session_id="sess_nope", prompt=[text_block("x")]),
            "load": conn.load_session(session_id="sess_nope", cwd=str(workspace), mcp_servers=[]),
            "resume": conn.resume_session(
                session_id="sess_nope", cwd=str(workspace), mcp_servers=[]
            ),
            "close": conn.close_session(session_id="sess_nope"),
            "mode": conn.set_session_mode(session_id="sess_nope", mode_id="plan"),
        }.items():
            with pytest.raises(RequestError) as err:
                await call
            errors[name] = err.value.code
        assert await raw_request(conn, "logout", {}) == {}
    assert {s.session_id for s in listed.sessions} == {a.session_id, b.session_id}
    assert [s.session_id for s in only_ws.sessions] == [a.session_id]
    assert after_close.value.code == -32002
    assert b.session_id not in {s.session_id for s in remaining.sessions}
    assert set(errors.values()) == {-32002}, errors


async def test_fork_gives_a_new_session_that_carries_the_conversation(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(Reply(text="original answer"), Reply(text="forked answer"))
    conn = agent.conn
    new = await agent.new_session(workspace)
    await conn.prompt(session_id=new.session_id, prompt=[text_block("first")])
    forked = await conn.fork_session(session_id=new.session_id, cwd=str(workspace), mcp_servers=[])
    result = await conn.prompt(session_id=forked.session_id, prompt=[text_block("more")])
    with pytest.raises(RequestError) as unknown:
        await conn.fork_session(session_id="sess_nope", cwd=str(workspace), mcp_servers=[])
    assert forked.session_id != new.session_id
    assert result.stop_reason == "end_turn"
    assert "original answer" in json.dumps(model_server.bodies[-1]["messages"])
    assert texts_of(agent.client, "agent_message_chunk", forked.session_id) == "forked answer"
    assert unknown.value.code == -32002


@pytest.mark.parametrize("method", ["session/load", "session/close", "session/delete"])
async def test_a_running_prompt_is_answered_cancelled_when_its_session_goes(
    method, agent: SharedAgent, model_server, tmp_path
):
    """Issue 21: load/close/delete of a session with a running turn end that turn with
    ``cancelled`` (the editor's spinner stops) and answer the request itself."""
    model_server.push(Reply(text=["slow "] * 400, chunk_delay=0.05))
    conn = agent.conn
    sid = (await agent.new_session(tmp_path)).session_id
    prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
    await agent.client.wait_update(
        lambda p: p["sessionId"] == sid and p["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    params: dict = {"sessionId": sid}
    if method == "session/load":
        params.update(cwd=str(tmp_path), mcpServers=[])
    # Answered with a result (an error reply would raise here).
    await asyncio.wait_for(raw_request(conn, method, params), 30)
    result = await asyncio.wait_for(prompt, 30)
    assert result.stop_reason == "cancelled"
