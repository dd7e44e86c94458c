"""Plans (issue 21 item 3): the model keeps its plan with the ``todo_write`` tool and
the client receives each version as a ``plan`` session update, with no permission
question and nothing of task memory in it. One agent for the module (``agent``)."""

from __future__ import annotations

import json

import pytest
from acp import text_block

from tests.acp.conftest import SharedAgent
from tests.support.model_server import Reply, ToolCall

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


def _plan(*items: tuple[str, str]) -> str:
    return json.dumps({"todos": [{"content": c, "status": s} for c, s in items]})


async def test_todo_write_sends_plan_updates_to_the_client(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(
        Reply(
            tool_calls=[
                ToolCall("todo_write", _plan(("reproduce", "in_progress"), ("fix", "pending")))
            ]
        ),
        Reply(
            tool_calls=[
                ToolCall("todo_write", _plan(("reproduce", "completed"), ("fix", "in_progress")))
            ]
        ),
        Reply(text="working on the fix"),
    )
    agent.client.permission = "reject_once"
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    sid = new.session_id
    result = await conn.prompt(session_id=sid, prompt=[text_block("fix the bug")])
    assert result.stop_reason == "end_turn"
    assert client.permission_requests == []
    plans = client.updates("plan", sid)
    assert [[(e["content"], e["status"]) for e in p["entries"]] for p in plans] == [
        [("reproduce", "in_progress"), ("fix", "pending")],
        [("reproduce", "completed"), ("fix", "in_progress")],
    ]
    offered = {t["function"]["name"] for t in model_server.bodies[0]["tools"]}
    assert "todo_write" in offered
    assert "Plan updated: 2 items" in model_server.bodies[1]["messages"][-1]["content"]


async def test_a_bad_plan_is_an_error_for_the_model_and_sends_nothing(
    agent: SharedAgent, model_server, workspace
):
    model_server.push(
        Reply(tool_calls=[ToolCall("todo_write", json.dumps({"todos": [{"content": ""}]}))]),
        Reply(text="ok"),
    )
    conn, client = agent.conn, agent.client
    new = await agent.new_session(workspace)
    await conn.prompt(session_id=new.session_id, prompt=[text_block("plan")])
    assert client.updates("plan", new.session_id) == []
    assert "todos.0.content" in model_server.bodies[1]["messages"][-1]["content"]
