"""The named text workspace through ``clio-acp acp`` (issue 19 item 1, done-when): a
session writes a value, is compacted, and a new process that loads it reads the same
value back; ``clio-acp workspace`` shows it too."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from acp import text_block
from acp.schema import ClientCapabilities

from tests.support.acp_client import acp_agent
from tests.support.model_server import Reply, ToolCall

pytestmark = pytest.mark.slow

VALUE = "Findings:\n- parser fails on empty input (tests/test_parse.py::test_empty)\n- fix in lexer.py:42\n"


def _settings(model_server) -> None:
    config = Path(os.environ["CLIO_ACP_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.yaml").write_text(
        "version: 2\ntargets:\n"
        f"  - id: box\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        "    defaultModel: model-a\n    contextWindow: 4096\n"
        "chat:\n  target: box\n  model: model-a\n"
        "context:\n  memory:\n    enabled: false\n"
    )


def _is_summary(body: dict) -> bool:
    return not body.get("tools") and "working summary" in body["messages"][0]["content"]


def _chat(body: dict) -> bool:
    return not _is_summary(body)


async def test_a_value_survives_compaction_and_a_load_in_a_new_process(
    model_server, tmp_path, invoke_cli
):
    _settings(model_server)
    write = json.dumps({"key": "findings", "value": VALUE})
    model_server.push(
        Reply(tool_calls=[ToolCall("workspace_write", write, id="w1")], when=_chat),
        Reply(text="noted", when=_chat),
        Reply(text="ok", when=_chat),
        Reply(text="SUMMARY: the agent studied the parser.", when=_is_summary),
    )
    async with acp_agent() as (conn, _client, _proc):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("study the parser")])
        await conn.prompt(session_id=sid, prompt=[text_block("carry on " + "with detail " * 300)])
        await conn.prompt(session_id=sid, prompt=[text_block("/compact")])
    assert any(_is_summary(b) for b in model_server.bodies)

    read = json.dumps({"key": "findings"})
    model_server.push(
        Reply(tool_calls=[ToolCall("workspace_read", read, id="r1")], when=_chat),
        Reply(text="read it", when=_chat),
    )
    async with acp_agent() as (conn, _client, _proc):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        await conn.load_session(session_id=sid, cwd=str(tmp_path), mcp_servers=[])
        await conn.prompt(session_id=sid, prompt=[text_block("what did you find?")])
    after_load = model_server.bodies[-2]
    view = json.dumps(after_load["messages"])
    assert "workspace_write" not in view  # the call that wrote it was compacted away
    assert "Workspace values you kept (read them with workspace_read): findings" in view
    tool_messages = [m for m in model_server.bodies[-1]["messages"] if m["role"] == "tool"]
    assert tool_messages[-1]["content"] == VALUE

    # `clio-acp workspace` over what the agent processes wrote (in this process: the
    # command's reading, not its process, is the subject; tests/cli covers the rest).
    listed = invoke_cli("workspace", sid)
    assert listed.returncode == 0, listed.stderr
    assert f"- findings ({len(VALUE)} chars" in listed.stdout
    shown = invoke_cli("workspace", sid, "findings")
    assert shown.returncode == 0 and shown.stdout == VALUE + "\n"
    missing = invoke_cli("workspace", sid, "nope")
    assert missing.returncode == 1 and "unknown workspace key 'nope'" in missing.stderr


def _replies(client, sid: str) -> str:
    return "".join(u["content"]["text"] for u in client.updates("agent_message_chunk", sid))


async def test_slash_workspace_and_memory_propose_event(model_server, tmp_path, invoke_cli):
    _settings(model_server)
    write = json.dumps({"key": "findings", "value": VALUE})
    failing = json.dumps({"command": "echo 'fatal: no upstream' >&2; exit 128"})
    model_server.push(
        Reply(
            tool_calls=[
                ToolCall("workspace_write", write, id="w1"),
                ToolCall("run_command", failing, id="c1"),
            ],
            when=_chat,
        ),
        Reply(text="done", when=_chat),
    )
    async with acp_agent() as (conn, client, _proc):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = new.session_id
        await conn.set_session_mode(session_id=sid, mode_id="bypass")
        await conn.prompt(session_id=sid, prompt=[text_block("look around")])
        commands = client.updates("available_commands_update", sid)
        names = {c["name"] for c in commands[-1]["availableCommands"]}

        async def slash(text: str) -> str:
            before = len(_replies(client, sid))
            await conn.prompt(session_id=sid, prompt=[text_block(text)])
            return _replies(client, sid)[before:]

        listing = await slash("/workspace")
        value = await slash("/workspace findings")
        part = await slash("/workspace findings --offset 10")
        unknown = await slash("/workspace nope")
        events = run_events(invoke_cli, sid)
        seq = next(
            r["seq"]
            for r in events
            if r["type"] == "tool_result" and r["data"]["status"] == "failed"
        )
        asked = await slash(f"/memory propose-event {seq} global")
        proposed = await slash(
            f"/memory propose-event {seq} repo Push needs an upstream branch first."
        )
        board = await slash("/memory")
    assert "workspace" in names
    assert "- findings (" in listing and "Show one with /workspace KEY." in listing
    assert VALUE in value
    assert VALUE[10:] in part and "chars 10-" in part
    assert "unknown workspace key 'nope'" in unknown
    assert f"/memory propose-event {seq} global ack" in asked
    assert f"from event:{sid}:{seq}: Push needs an upstream branch first." in proposed
    record_id = proposed.split("Proposed ", 1)[1].split(" ", 1)[0]
    assert record_id in board
    assert len(model_server.bodies) == 2  # slash commands never reach the model


def run_events(invoke_cli, sid: str) -> list[dict]:
    """The session's journal rows through ``clio-acp events --json``, read while the
    agent process that writes them runs."""
    out = invoke_cli("events", sid, "--json")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]
