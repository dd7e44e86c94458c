"""Through a real ``clio-acp acp`` process: secrets in the user's requirements and in a
failing command's output never reach what the face shows of memory (the board, the
reminders as thoughts/notices, ``/memory``) nor records.json (issue 17)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from acp import text_block

from tests.acp.conftest import SharedAgent
from tests.support.model_server import Reply, ToolCall
from tests.support.secrets import corpus, leaked

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

SAMPLES = [s for s in corpus() if "\n" not in s.text and "'" not in s.text][:8]


async def test_face_output_of_memory_holds_no_secret(
    agent: SharedAgent, model_server, tmp_path
) -> None:
    # The shared agent's settings: rules tier only (captures and reminds).
    failing = json.dumps({"command": f"ls /missing-{SAMPLES[0].secret}"})
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", failing)]),
        Reply(tool_calls=[ToolCall("run_command", failing)]),
        Reply(text="I will try something else."),
    )
    requirements = "\n".join(f"- You must use {s.text}" for s in SAMPLES[1:])
    workspace = tmp_path / "repo"
    workspace.mkdir()
    conn, client = agent.conn, agent.client
    sid = (await agent.new_session(workspace)).session_id
    await conn.set_session_mode(session_id=sid, mode_id="bypass")
    await conn.prompt(
        session_id=sid, prompt=[text_block(f"Deploy it.\nRequirements:\n{requirements}")]
    )
    board = await conn.ext_method("clio/session/board", {"sessionId": sid})
    for entry in board["bank"]["knowledge"] + board["bank"]["procedural"]:
        await conn.ext_method(
            "clio/memory/propose", {"sessionId": sid, "entryId": entry["id"], "scope": "repo"}
        )
    await conn.prompt(session_id=sid, prompt=[text_block("/memory")])
    thoughts = [u["content"]["text"] for u in client.updates("agent_thought_chunk", sid)]
    memory_shown = [t for t in thoughts if t.startswith("Memory:")]
    messages = [u["content"]["text"] for u in client.updates("agent_message_chunk", sid)]
    records = Path(os.environ["CLIO_ACP_DATA_DIR"]) / "memory" / "records.json"
    assert memory_shown and "[redacted:" in json.dumps(board)  # secrets did enter memory
    for name, text in {
        "board": json.dumps(board, ensure_ascii=False),
        "reminders": "\n".join(memory_shown),
        "/memory": "".join(messages[-50:]),
        "records.json": records.read_text(encoding="utf-8"),
    }.items():
        assert leaked(text, tuple(SAMPLES)) == [], name
