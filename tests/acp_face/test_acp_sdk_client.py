"""``clio-acp acp`` driven by the official Python SDK client over a real subprocess,
with the scripted model server behind it (issue 7 item 8)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from acp import text_block
from acp.exceptions import RequestError
from acp.schema import (
    ClientCapabilities,
    EmbeddedResourceContentBlock,
    FileSystemCapabilities,
    ResourceContentBlock,
    TextResourceContents,
)

from tests.support.acp_client import RecordingClient, acp_agent, raw_request
from tests.support.model_server import Reply, ToolCall, usage
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


ALL_TOOLS = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


async def _start(conn, ws: Path, caps: ClientCapabilities | None = None):
    await conn.initialize(protocol_version=1, client_capabilities=caps or ClientCapabilities())
    return await conn.new_session(cwd=str(ws), mcp_servers=[])


def _texts(client: RecordingClient, kind: str, sid: str) -> str:
    return "".join(u["content"]["text"] for u in client.updates(kind, sid))


async def test_initialize_answers_version_1_with_honest_capabilities_and_agent_info():
    async with acp_agent() as (conn, _client, _proc):
        init = await conn.initialize(protocol_version=1)
        data = init.model_dump(by_alias=True, exclude_none=True)
    assert data["protocolVersion"] == 1
    caps = data["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": True}
    assert set(caps["sessionCapabilities"]) >= {"list", "resume", "close", "delete"}
    assert caps["auth"] == {"logout": {}}
    assert caps["_meta"]["clio/board"]["method"] == "_clio/session/board"
    assert data["agentInfo"]["name"] == "clio-acp"
    assert data["authMethods"] == []


async def test_a_newer_client_protocol_version_gets_version_1():
    async with acp_agent() as (conn, _client, _proc):
        init = await conn.initialize(protocol_version=7)
    assert init.protocol_version == 1


async def test_prompt_streams_thought_and_message_chunks_with_message_ids_and_usage(
    model_server, workspace
):
    model_server.install_settings(memory=False)
    model_server.push(
        Reply(reasoning="weighing options", text="Hello there friend", usage=usage(12, 3))
    )
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        result = await conn.prompt(session_id=sid, prompt=[text_block("say hello")])
    assert result.stop_reason == "end_turn"
    assert _texts(client, "agent_message_chunk", sid) == "Hello there friend"
    assert _texts(client, "agent_thought_chunk", sid) == "weighing options"
    chunks = client.updates("agent_message_chunk", sid) + client.updates("agent_thought_chunk", sid)
    assert all(c.get("messageId") for c in chunks)
    usage_updates = client.updates("usage_update", sid)
    assert usage_updates and usage_updates[-1]["size"] > 0
    assert client.updates("session_info_update", sid)[-1]["title"] == "say hello"
    # the user's words reached the model
    assert "say hello" in json.dumps(model_server.bodies[0]["messages"])


async def test_embedded_resources_and_links_reach_the_model_as_text(model_server, workspace):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="ok"))
    blocks = [
        text_block("explain"),
        ResourceContentBlock(type="resource_link", uri="file:///x/y.py", name="y.py"),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri="file:///x/z.py", text="print('zzz')"),
        ),
    ]
    async with acp_agent() as (conn, _client, _proc):
        new = await _start(conn, workspace)
        await conn.prompt(session_id=new.session_id, prompt=blocks)
    sent = json.dumps(model_server.bodies[0]["messages"])
    assert "@file:///x/y.py" in sent
    assert "print('zzz')" in sent


async def test_edit_asks_permission_then_writes_through_the_client_and_shows_a_diff(
    model_server, workspace
):
    model_server.install_settings(memory=False)
    args = json.dumps({"path": "notes.txt", "content": "first line\n"})
    model_server.push(Reply(tool_calls=[ToolCall("write_file", args)]), Reply(text="written"))
    async with acp_agent(RecordingClient(permission="allow_once")) as (conn, client, _proc):
        new = await _start(conn, workspace, ALL_TOOLS)
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


async def test_rejected_permission_leaves_the_file_alone(model_server, workspace):
    model_server.install_settings(memory=False)
    args = json.dumps({"path": "nope.txt", "content": "x"})
    model_server.push(Reply(tool_calls=[ToolCall("write_file", args)]), Reply(text="understood"))
    async with acp_agent(RecordingClient(permission="reject_once")) as (conn, client, _proc):
        new = await _start(conn, workspace)
        result = await conn.prompt(session_id=new.session_id, prompt=[text_block("write")])
    assert result.stop_reason == "end_turn"
    assert not (workspace / "nope.txt").exists()
    failed = [u for u in client.updates("tool_call_update") if u.get("status") == "failed"]
    assert failed


async def test_commands_run_in_a_client_terminal_that_is_always_released(model_server, workspace):
    model_server.install_settings(memory=False)
    args = json.dumps({"command": "echo from-terminal"})
    model_server.push(Reply(tool_calls=[ToolCall("run_command", args)]), Reply(text="ran"))
    async with acp_agent(RecordingClient(permission="allow_once")) as (conn, client, _proc):
        new = await _start(conn, workspace, ALL_TOOLS)
        await conn.prompt(session_id=new.session_id, prompt=[text_block("run it")])
    assert client.terminal_log[0].startswith("create term-1 sh -c echo from-terminal")
    assert client.terminal_log[-1] == "release term-1"
    finished = [u for u in client.updates("tool_call_update") if u.get("status") == "completed"]
    assert "from-terminal" in json.dumps(finished[-1])
    tool_msg = [m for m in model_server.bodies[-1]["messages"] if m.get("role") == "tool"]
    assert "from-terminal" in json.dumps(tool_msg)


async def test_cancel_stops_a_running_terminal_command_and_answers_cancelled(
    model_server, workspace
):
    model_server.install_settings(memory=False)
    args = json.dumps({"command": "sleep 30"})
    model_server.push(Reply(tool_calls=[ToolCall("run_command", args)]))
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace, ALL_TOOLS)
        sid = new.session_id
        await conn.set_session_mode(session_id=sid, mode_id="bypass")
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("sleep")]))
        await client.wait_update(lambda p: p["update"].get("sessionUpdate") == "tool_call")
        await wait_until(lambda: client.terminal_log, timeout_s=5)
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(turn, 20)
    assert result.stop_reason == "cancelled"
    assert "kill term-1" in client.terminal_log
    assert client.terminal_log[-1] == "release term-1"


async def test_cancel_during_model_stream_answers_cancelled(model_server, workspace):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text=["slow "] * 200, chunk_delay=0.05))
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await client.wait_update(
            lambda p: p["update"].get("sessionUpdate") == "agent_message_chunk"
        )
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(turn, 20)
        streamed = len(client.updates("agent_message_chunk", sid))
        # the session goes on after a cancel
        model_server.push(Reply(text="again"))
        again = await conn.prompt(session_id=sid, prompt=[text_block("again")])
    assert result.stop_reason == "cancelled"
    assert streamed < 200
    assert again.stop_reason == "end_turn"


async def test_second_prompt_while_a_turn_runs_is_refused_and_the_first_finishes(
    model_server, workspace
):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text=["a "] * 20, chunk_delay=0.05))
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("one")]))
        await client.wait_update(
            lambda p: p["update"].get("sessionUpdate") == "agent_message_chunk"
        )
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=sid, prompt=[text_block("two")])
        result = await asyncio.wait_for(first, 20)
    assert refused.value.code == -32600
    assert result.stop_reason == "end_turn"


async def test_load_replays_the_whole_history_before_answering(model_server, workspace):
    model_server.install_settings(memory=False)
    model_server.push(
        Reply(reasoning="plan", tool_calls=[ToolCall("list_dir", json.dumps({"path": "."}))]),
        Reply(text="The folder is empty."),
    )
    async with acp_agent() as (conn, _client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[text_block("what is here?")])
    async with acp_agent() as (conn, client, _proc):
        await conn.initialize(protocol_version=1)
        loaded = await conn.load_session(session_id=sid, cwd=str(workspace), mcp_servers=[])
        replayed = [p["update"]["sessionUpdate"] for p in client.raw_updates]
    assert loaded.modes.current_mode_id == "ask"
    assert _texts(client, "user_message_chunk", sid) == "what is here?"
    assert _texts(client, "agent_message_chunk", sid) == "The folder is empty."
    assert "agent_thought_chunk" in replayed
    assert "tool_call" in replayed and "tool_call_update" in replayed
    assert replayed.index("user_message_chunk") < replayed.index("tool_call")


async def test_resume_never_replays_and_the_session_continues(model_server, workspace):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="first answer"))
    async with acp_agent() as (conn, _client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[text_block("first")])
    model_server.push(Reply(text="second answer"))
    async with acp_agent() as (conn, client, _proc):
        await conn.initialize(protocol_version=1)
        await conn.resume_session(session_id=sid, cwd=str(workspace), mcp_servers=[])
        await asyncio.sleep(0.2)
        before = [p["update"]["sessionUpdate"] for p in client.raw_updates]
        result = await conn.prompt(session_id=sid, prompt=[text_block("second")])
    assert "user_message_chunk" not in before and "agent_message_chunk" not in before
    assert result.stop_reason == "end_turn"
    sent = json.dumps(model_server.bodies[-1]["messages"])
    assert "first answer" in sent  # the conversation went on where it was


async def test_list_close_delete_and_unknown_sessions(model_server, workspace, tmp_path):
    model_server.install_settings(memory=False)
    other = tmp_path / "other"
    other.mkdir()
    async with acp_agent() as (conn, _client, _proc):
        a = await _start(conn, workspace)
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


async def test_mode_changes_keep_config_options_and_legacy_modes_in_sync(model_server, workspace):
    model_server.install_settings()
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        ids = [o.id for o in new.config_options]
        assert [m.id for m in new.modes.available_modes] == [
            "ask",
            "accept-edits",
            "plan",
            "bypass",
        ]
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        via_config = await conn.set_config_option(
            config_id="mode", session_id=sid, value="accept-edits"
        )
        with pytest.raises(RequestError) as bad:
            await conn.set_config_option(config_id="mode", session_id=sid, value="yolo")
        tier = await conn.set_config_option(config_id="memory_tier", session_id=sid, value="off")

        def mode_updates_arrived() -> bool:
            modes = client.updates("current_mode_update", sid)
            return bool(client.updates("config_option_update", sid)) and bool(
                modes and modes[-1]["currentModeId"] == "accept-edits"
            )

        await wait_until(mode_updates_arrived, timeout_s=10)
    assert ids == ["mode", "model", "memory_tier"]
    assert bad.value.code == -32602
    current = {o.id: o.current_value for o in via_config.config_options}
    assert current["mode"] == "accept-edits"
    assert {o.id: o.current_value for o in tier.config_options}["memory_tier"] == "off"
    config_updates = client.updates("config_option_update", sid)
    assert {o["id"]: o["currentValue"] for o in config_updates[0]["configOptions"]}[
        "mode"
    ] == "plan"
    assert client.updates("current_mode_update", sid)[-1]["currentModeId"] == "accept-edits"


async def test_slash_commands_are_advertised_and_answer_without_the_model(model_server, workspace):
    model_server.install_settings(memory=False)
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        commands = await client.wait_update(
            lambda p: p["update"].get("sessionUpdate") == "available_commands_update"
        )
        board = await conn.prompt(session_id=sid, prompt=[text_block("/memory")])
        await conn.prompt(session_id=sid, prompt=[text_block("/usage")])
        await conn.prompt(
            session_id=sid, prompt=[text_block("/memory approve mem-0000000000000000")]
        )
        await conn.prompt(session_id=sid, prompt=[text_block("/memory promote k1 global")])
        ext_board = await conn.ext_method("clio/session/board", {"sessionId": sid})
        with pytest.raises(RequestError) as propose_unknown:
            await conn.ext_method(
                "clio/memory/propose", {"sessionId": sid, "entryId": "k9", "scope": "repo"}
            )
    names = [c["name"] for c in commands["update"]["availableCommands"]]
    assert names == ["memory", "usage", "handoff", "compact"]
    assert board.stop_reason == "end_turn"
    text = _texts(client, "agent_message_chunk", sid)
    assert "Task memory" in text
    assert "Usage" in text
    assert "mem-0000000000000000" in text  # the unknown record is named, the session goes on
    assert "k1" in text
    assert model_server.bodies == []  # no model call for slash commands
    assert "tier" in ext_board
    assert propose_unknown.value.code == -32602


async def test_fork_gives_a_new_session_that_carries_the_conversation(model_server, workspace):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="original answer"), Reply(text="forked answer"))
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace)
        await conn.prompt(session_id=new.session_id, prompt=[text_block("first")])
        forked = await conn.fork_session(
            session_id=new.session_id, cwd=str(workspace), mcp_servers=[]
        )
        result = await conn.prompt(session_id=forked.session_id, prompt=[text_block("more")])
        with pytest.raises(RequestError) as unknown:
            await conn.fork_session(session_id="sess_nope", cwd=str(workspace), mcp_servers=[])
    assert forked.session_id != new.session_id
    assert result.stop_reason == "end_turn"
    assert "original answer" in json.dumps(model_server.bodies[-1]["messages"])
    assert _texts(client, "agent_message_chunk", forked.session_id) == "forked answer"
    assert unknown.value.code == -32002


async def test_reads_go_through_the_client_and_see_unsaved_buffers(model_server, workspace):
    model_server.install_settings(memory=False)
    (workspace / "main.py").write_text("print('on disk')\n")
    args = json.dumps({"path": "main.py"})
    model_server.push(Reply(tool_calls=[ToolCall("read_file", args)]), Reply(text="read it"))
    client = RecordingClient()
    client.files[str(workspace / "main.py")] = "print('unsaved edit')\n"
    async with acp_agent(client) as (conn, _client, _proc):
        new = await _start(conn, workspace, ALL_TOOLS)
        await conn.prompt(session_id=new.session_id, prompt=[text_block("read main.py")])
    tool_results = json.dumps(
        [m for m in model_server.bodies[-1]["messages"] if m.get("role") == "tool"]
    )
    assert "unsaved edit" in tool_results
    assert "on disk" not in tool_results
    assert client.permission_requests == []  # reads never ask


async def test_usage_command_sums_the_chat_usage_of_the_session(model_server, workspace):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="one", usage=usage(100, 7)), Reply(text="two", usage=usage(50, 3)))
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[text_block("first")])
        await conn.prompt(session_id=sid, prompt=[text_block("second")])
        before = len(_texts(client, "agent_message_chunk", sid))
        await conn.prompt(session_id=sid, prompt=[text_block("/usage")])
        shown = _texts(client, "agent_message_chunk", sid)[before:]
    assert "2 model requests, 150 input tokens" in shown
    assert "10 output tokens" in shown
    assert len(model_server.bodies) == 2


def _two_target_settings(model_server) -> None:
    """Targets ``first`` (model-a, the chat route) and ``second`` (model-b), both
    served by the scripted server."""
    config = Path(os.environ["CLIO_ACP_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.yaml").write_text(
        "version: 2\ntargets:\n"
        f"  - id: first\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        "    defaultModel: model-a\n"
        f"  - id: second\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        "    defaultModel: model-b\n"
        "chat:\n  target: first\n  model: model-a\n"
        "context:\n  memory:\n    enabled: false\n"
    )


async def test_model_config_option_switches_a_running_session_between_turns(
    model_server, workspace
):
    _two_target_settings(model_server)
    model_server.push(
        Reply(text="one"),
        Reply(text=" ".join(f"w{i}" for i in range(40)), chunk_delay=0.05),
        Reply(text="two"),
    )
    async with acp_agent() as (conn, client, _proc):
        new = await _start(conn, workspace)
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[text_block("first turn")])
        # Mid-turn: refused with a clear error, the running turn is untouched.
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("talk")]))
        await wait_until(lambda: client.updates("agent_message_chunk", sid)[1:], timeout_s=60)
        with pytest.raises(RequestError) as busy:
            await conn.set_config_option(config_id="model", session_id=sid, value="second/model-b")
        assert (await turn).stop_reason == "end_turn"
        # Between turns: this session's next turn uses the new route.
        switched = await conn.set_config_option(
            config_id="model", session_id=sid, value="second/model-b"
        )
        await conn.prompt(session_id=sid, prompt=[text_block("second turn")])
    assert busy.value.code == -32602 and "running a turn" in json.dumps(busy.value.data)
    assert {o.id: o.current_value for o in switched.config_options}["model"] == "second/model-b"
    assert [b["model"] for b in model_server.bodies] == ["model-a", "model-a", "model-b"]
