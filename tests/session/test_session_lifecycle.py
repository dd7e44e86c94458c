"""Session lifecycle: load (replay), resume (no replay), fork, list paging, close,
delete — all through the journal on disk."""

from __future__ import annotations

import json

import pytest

from clio_acp.paths import resolve_paths
from clio_acp.session.manager import SessionManager, SessionNotFound
from tests.support.model_server import Reply, ToolCall


async def _one_turn(manager, workspace, model_server, text="hi"):
    (workspace / "a.txt").write_text("A")
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", json.dumps({"path": "a.txt"}), id="t1")]),
        Reply(text="done"),
    )
    session = await manager.new_session(workspace)
    await session.prompt(text)
    return session


async def test_load_replays_whole_history_in_a_fresh_manager(
    manager, workspace, model_server, settings_getter
):
    session = await _one_turn(manager, workspace, model_server, "read a.txt")
    sid = session.id
    await manager.aclose()
    other = SessionManager(paths=resolve_paths(), settings=settings_getter)
    try:
        loaded, events = await other.load_session(sid)
        types = [e.type for e in events]
        assert types[0] == "user_message" and events[0].text == "read a.txt"
        assert "tool_call_started" in types and "tool_call_finished" in types
        assert [e.text for e in events if e.type == "message_chunk"] == ["done"]
        assert types[-1] == "turn_ended"
        # The conversation continues with the stored history as the model view.
        model_server.push(Reply(text="again"))
        await loaded.prompt("and now?")
        messages = model_server.bodies[-1]["messages"]
        assert [m["role"] for m in messages] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "user",
        ]
        # §12.6/§13.5: the resumed session's state comes back first — the status the
        # rules tier wrote (goal, last command, steps).
        restore = str(messages[-2]["content"]) + str(messages[-1]["content"])
        assert "execution state restored from the saved session" in restore
        assert "Goal: read a.txt." in restore
    finally:
        await other.aclose()


async def test_resume_returns_session_without_replay_and_unknown_id_raises(
    manager, workspace, model_server
):
    session = await _one_turn(manager, workspace, model_server)
    await manager.close_session(session.id)
    with pytest.raises(SessionNotFound):
        manager.get(session.id)
    resumed = await manager.resume_session(session.id)
    assert resumed.id == session.id and len(resumed.rows()) > 3
    with pytest.raises(SessionNotFound):
        await manager.resume_session("sess_missing")


async def test_fork_copies_history_under_a_new_id(manager, workspace, model_server):
    session = await _one_turn(manager, workspace, model_server)
    fork = await manager.fork_session(session.id)
    assert fork.id != session.id and fork.parent_id == session.id
    assert [r.type for r in fork.rows()] == [r.type for r in session.rows()]
    model_server.push(Reply(text="forked answer"))
    await fork.prompt("continue in fork")
    assert len(fork.rows()) > len(session.rows())


async def test_list_pages_with_cursor_and_filters_by_cwd(
    manager, workspace, model_server, tmp_path
):
    other_ws = tmp_path / "other"
    other_ws.mkdir()
    ids = [(await manager.new_session(workspace)).id for _ in range(5)]
    await manager.new_session(other_ws)
    page1, cursor = await manager.list_sessions(cwd=workspace, limit=2)
    page2, cursor2 = await manager.list_sessions(cwd=workspace, cursor=cursor, limit=2)
    page3, cursor3 = await manager.list_sessions(cwd=workspace, cursor=cursor2, limit=2)
    seen = [i.session_id for i in page1 + page2 + page3]
    assert sorted(seen) == sorted(ids) and len(set(seen)) == 5
    assert cursor3 is None
    everything, _ = await manager.list_sessions()
    assert len(everything) == 6


async def test_delete_is_idempotent_and_removes_history(manager, workspace, model_server):
    session = await _one_turn(manager, workspace, model_server)
    await manager.delete_session(session.id)
    await manager.delete_session(session.id)
    with pytest.raises(SessionNotFound):
        await manager.load_session(session.id)


async def test_new_session_refuses_relative_cwd(manager):
    with pytest.raises(ValueError, match="absolute"):
        await manager.new_session("relative/dir")
