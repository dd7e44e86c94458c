"""Task memory through the ACP face: reminders reach the user (notice or ``Memory:``
thought), and bank entries are proposed and approved as durable records through
``_clio/memory/propose`` and ``/memory`` (issue 7 items 4, 5, 7; MEMORY_SPEC §10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import text_block

from tests.support.acp_client import acp_agent, raw_request
from tests.support.model_server import Reply, ToolCall

pytestmark = pytest.mark.slow


FAILING = json.dumps({"command": "ls /definitely-not-here-xyz"})


def _failing_turn(model_server) -> None:
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", FAILING)]),
        Reply(tool_calls=[ToolCall("run_command", FAILING)]),
        Reply(text="I will try something else."),
    )


@pytest.mark.parametrize("notices", [False, True], ids=["thought", "notice"])
async def test_a_repeated_failure_reminder_reaches_the_user(model_server, tmp_path, notices):
    model_server.install_settings(memory=False)
    _failing_turn(model_server)
    caps: dict = {"session": {"notices": {}}} if notices else {}
    async with acp_agent() as (conn, client, _proc):
        await raw_request(conn, "initialize", {"protocolVersion": 1, "clientCapabilities": caps})
        new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = new.session_id
        await conn.set_session_mode(session_id=sid, mode_id="bypass")
        result = await conn.prompt(session_id=sid, prompt=[text_block("list it")])
    assert result.stop_reason == "end_turn"
    notices_sent = client.updates("notice", sid)
    memory_thoughts = [
        u
        for u in client.updates("agent_thought_chunk", sid)
        if u["content"]["text"].startswith("Memory:")
    ]
    if notices:
        assert notices_sent and not memory_thoughts
        assert notices_sent[0]["title"] == "Memory"
        assert notices_sent[0]["description"].startswith("Memory:")
        assert "definitely-not-here-xyz" in notices_sent[0]["description"]
    else:
        assert memory_thoughts and not notices_sent
        assert "definitely-not-here-xyz" in memory_thoughts[0]["content"]["text"]
    # the model saw the same reminder (it is not only a display)
    assert "Memory:" in json.dumps(model_server.bodies[-1]["messages"])
    # ... and the client saw it once: not again in the tool result or its rawOutput
    reminder = notices_sent[0]["description"] if notices else memory_thoughts[0]["content"]["text"]
    shown = json.dumps(client.raw_updates, ensure_ascii=False)
    assert shown.count(json.dumps(reminder, ensure_ascii=False)[1:-1]) == 1


async def test_a_bank_entry_is_proposed_then_approved_by_the_operator(model_server, tmp_path):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="Understood."))
    ws = tmp_path / "repo"
    ws.mkdir()
    async with acp_agent() as (conn, client, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(ws), mcp_servers=[])
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[text_block("Never push to main directly.")])
        board = await conn.ext_method("clio/session/board", {"sessionId": sid})
        [entry] = board["bank"]["knowledge"]
        assert "status" not in board["bank"]
        unacknowledged = await conn.ext_method(
            "clio/memory/propose", {"sessionId": sid, "entryId": entry["id"], "scope": "global"}
        )
        records_file = Path(_data_dir()) / "memory" / "records.json"
        written_before_ack = records_file.exists()
        proposed = await conn.ext_method(
            "clio/memory/propose", {"sessionId": sid, "entryId": entry["id"], "scope": "repo"}
        )
        again = await conn.ext_method(
            "clio/memory/propose", {"sessionId": sid, "entryId": entry["id"], "scope": "repo"}
        )
        record_id = proposed["recordId"]
        await conn.prompt(session_id=sid, prompt=[text_block("/memory")])
        board_text = _shown(client, sid)
        await conn.prompt(session_id=sid, prompt=[text_block(f"/memory approve {record_id}")])
        await conn.prompt(session_id=sid, prompt=[text_block("/memory")])
        after_text = _shown(client, sid)[len(board_text) :]
    assert "Never push to main directly." in entry["content"]
    assert unacknowledged == {"status": "needs_acknowledgement"}
    assert not written_before_ack
    assert proposed["status"] == "proposed" and proposed["created"] is True
    assert again["recordId"] == record_id and again["created"] is False  # idempotent
    records = json.loads(records_file.read_text())["records"]
    [record] = [r for r in records if r["id"] == record_id]
    assert record["approved"] is True
    assert record["scope"] == "repo"
    assert entry["id"] in board_text  # the board lists the bank entry …
    assert record_id in board_text.split("**proposals**")[1]  # … and the pending proposal
    assert f"Approved {record_id}" in after_text
    assert "**proposals**" not in after_text  # nothing pending any more


def _shown(client, sid: str) -> str:
    return "".join(u["content"]["text"] for u in client.updates("agent_message_chunk", sid))


def _data_dir() -> str:
    import os

    return os.environ["CLIO_ACP_DATA_DIR"]
