"""The named text workspace as the user sees it (issue 19 item 1): key pages and value
reads for the faces and the CLI, and the key list in a handoff."""

from __future__ import annotations

import json

import pytest

from clio_acp.session import workspace_values as views
from tests.support.model_server import Reply, ToolCall

SECRET_FREE_VALUE = "the parser fails on empty input; fix is in lexer.py:42"


async def _session_with_values(manager, workspace, model_server, keys):
    calls = [
        ToolCall(
            "workspace_write",
            json.dumps({"key": k, "value": f"{k}: {SECRET_FREE_VALUE}"}),
            id=f"w{i}",
        )
        for i, k in enumerate(keys)
    ]
    model_server.push(Reply(tool_calls=calls), Reply(text="kept"))
    session = await manager.new_session(workspace)
    await session.prompt("keep notes")
    return session


async def test_handoff_lists_the_keys_but_not_the_values(manager, workspace, model_server):
    session = await _session_with_values(manager, workspace, model_server, ["plan", "findings"])
    path = await session.handoff()
    text = path.read_text(encoding="utf-8")
    section = text.split("## Workspace values", 1)[1].split("## Task memory snapshot", 1)[0]
    assert "- `findings`" in section and "- `plan`" in section
    assert f"clio-acp workspace {session.id} KEY" in section
    assert SECRET_FREE_VALUE not in text


async def test_handoff_without_values_says_none(manager, workspace, model_server):
    model_server.push(Reply(text="hi"))
    session = await manager.new_session(workspace)
    await session.prompt("hello")
    text = (await session.handoff()).read_text(encoding="utf-8")
    assert "## Workspace values\n\n_(none)_" in text


async def test_views_page_keys_and_read_slices(manager, workspace, model_server):
    session = await _session_with_values(manager, workspace, model_server, ["b", "a"])
    journal = await manager.journal()
    listing = await views.list_values(journal, session.id, limit=1)
    assert [v["key"] for v in listing["values"]] == ["a"] and listing["nextCursor"]
    rest = await views.list_values(journal, session.id, cursor=listing["nextCursor"])
    assert [v["key"] for v in rest["values"]] == ["b"] and rest["nextCursor"] is None
    read = await views.read_value(journal, session.id, "a", offset=3, max_chars=3)
    assert read["text"] == "the" and read["nextOffset"] == 6
    assert read["totalChars"] == len(f"a: {SECRET_FREE_VALUE}")


@pytest.mark.parametrize(
    ("key", "offset", "problem"),
    [("nope", 0, "unknown workspace key"), ("a", 10_000, "outside"), ("", 0, "empty")],
)
async def test_view_errors_name_the_problem(manager, workspace, model_server, key, offset, problem):
    session = await _session_with_values(manager, workspace, model_server, ["a"])
    journal = await manager.journal()
    with pytest.raises(views.WorkspaceViewError, match=problem):
        await views.read_value(journal, session.id, key, offset=offset)


async def test_a_bad_cursor_is_a_view_error(manager, workspace, model_server):
    session = await _session_with_values(manager, workspace, model_server, ["a"])
    with pytest.raises(views.WorkspaceViewError, match="invalid cursor"):
        await views.list_values(await manager.journal(), session.id, cursor="bogus")
