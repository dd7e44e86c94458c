"""A session turn against the scripted model server: streaming, tools, cancel."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from clio_acp.paths import resolve_paths
from clio_acp.session.manager import SessionManager
from tests.support.model_server import Reply, ToolCall, usage
from tests.support.waiting import wait_until


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_prompt_streams_message_chunks_and_ends_turn(
    manager, workspace, model_server, recorder
):
    model_server.push(Reply(text="Hello from the model", usage=usage(20, 4)))
    session = await manager.new_session(workspace)
    session.subscribe(recorder)
    stop = await session.prompt("say hello")
    assert stop == "end_turn"
    assert recorder.text() == "Hello from the model"
    assert len(recorder.of("message_chunk")) > 1
    assert recorder.of("turn_ended")[-1].stop_reason == "end_turn"
    usage_events = recorder.of("usage_update")
    assert usage_events and usage_events[0].input_tokens == 20
    body = model_server.bodies[0]
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": "say hello"}
    assert {t["function"]["name"] for t in body["tools"]} >= {"read_file", "run_command"}


async def test_tool_call_result_is_fed_back_to_the_model(
    manager, workspace, model_server, recorder
):
    (workspace / "notes.txt").write_text("alpha\nbeta\n")
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", json.dumps({"path": "notes.txt"}), id="c1")]),
        Reply(text="The file says alpha and beta."),
    )
    session = await manager.new_session(workspace)
    session.subscribe(recorder)
    assert await session.prompt("what is in notes.txt?") == "end_turn"
    started = recorder.of("tool_call_started")
    finished = recorder.of("tool_call_finished")
    assert [e.tool_name for e in started] == ["read_file"]
    assert started[0].locations == [str(workspace / "notes.txt")]
    assert finished[0].status == "completed" and "alpha" in finished[0].output
    second = model_server.bodies[1]["messages"]
    assert second[-2]["role"] == "assistant" and second[-2]["tool_calls"][0]["id"] == "c1"
    assert second[-1] == {"role": "tool", "tool_call_id": "c1", "content": "alpha\nbeta\n"}


async def test_path_outside_workspace_is_refused(
    manager, workspace, model_server, recorder, tmp_path
):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (workspace / "link").symlink_to(secret)
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", json.dumps({"path": str(secret)}), id="a")]),
        Reply(tool_calls=[ToolCall("read_file", json.dumps({"path": "link"}), id="b")]),
        Reply(text="ok"),
    )
    session = await manager.new_session(workspace)
    session.subscribe(recorder)
    await session.prompt("read the secret")
    outputs = {e.tool_call_id: e for e in recorder.of("tool_call_finished")}
    assert outputs["a"].status == "failed" and "outside the workspace" in outputs["a"].output
    assert outputs["b"].status == "failed" and "symlink" in outputs["b"].output
    assert all("top secret" not in e.output for e in outputs.values())


async def test_cancel_mid_stream_stops_the_turn(manager, workspace, model_server, recorder):
    model_server.push(Reply(text=" ".join(f"w{i}" for i in range(200)), chunk_delay=0.05))
    session = await manager.new_session(workspace)
    session.subscribe(recorder)
    task = asyncio.create_task(session.prompt("talk a lot"))
    await recorder.wait_for("message_chunk", 3, timeout_s=30)
    await session.cancel()
    assert await asyncio.wait_for(task, 30) == "cancelled"
    assert len(recorder.of("message_chunk")) < 150
    assert recorder.of("turn_ended")[-1].stop_reason == "cancelled"


async def _exited(pid: int) -> None:
    """Return once ``pid`` has exited: its pidfd turns readable on exit (a zombie
    counts as exited). No polling interval, so a loaded machine only makes it later."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(fd, lambda: done.done() or done.set_result(None))
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def test_cancel_mid_command_kills_the_process_group(
    manager, workspace, model_server, recorder
):
    marker = workspace / "child.pid"
    cmd = f"sh -c 'echo $$ > {marker}.tmp && mv {marker}.tmp {marker}; sleep 600' & wait"
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": cmd}), id="r1")]),
        Reply(text="never reached"),
    )
    session = await manager.new_session(workspace, mode="bypass")
    session.subscribe(recorder)
    task = asyncio.create_task(session.prompt("run it"))
    # The real condition: the grandchild announced its pid (renamed into place, so a
    # reader never sees a half-written file). The turn must still be running then.
    await wait_until(lambda: marker.exists() or task.done(), timeout_s=120)  # hang guard only
    assert not task.done(), f"turn ended before the command ran: {task.result()!r}"
    pid = int(marker.read_text())
    assert _alive(pid)
    await session.cancel()
    # The deadline guards against a hang only; each await returns as soon as its
    # condition holds (the turn ends, the grandchild exits). A cancel that lands while
    # asyncio is still connecting the pipes used to leave the grandchild running and
    # the turn waiting for its pipes (sleep 600 > the guard makes that a failure).
    async with asyncio.timeout(120):
        assert await task == "cancelled"
        await _exited(pid)
    assert not _alive(pid)
    assert len(model_server.bodies) == 1
    finished = recorder.of("tool_call_finished")
    assert finished and finished[-1].status == "failed"


async def test_unusable_model_route_is_a_notice_and_the_session_goes_on(
    workspace, settings_getter, model_server, recorder
):
    from clio_acp.paths import resolve_paths
    from clio_acp.session.manager import SessionManager

    calls = {"n": 0}

    def factory(settings):
        calls["n"] += 1
        raise RuntimeError("route table exploded")

    mgr = SessionManager(paths=resolve_paths(), settings=settings_getter, model_factory=factory)
    try:
        session = await mgr.new_session(workspace)
        session.subscribe(recorder)
        assert await session.prompt("hello") == "end_turn"
        errors = [n.text for n in recorder.of("notice") if n.level == "error"]
        assert errors and "route table exploded" in errors[0]
        assert await session.prompt("hello again") == "end_turn"
        assert [r.type for r in session.rows()].count("prompt") == 2
    finally:
        await mgr.aclose()


async def test_thought_and_answer_of_one_reply_have_distinct_message_ids(
    manager, workspace, model_server, recorder, settings_getter
):
    model_server.push(Reply(reasoning="let me think about it", text="the answer is four"))
    session = await manager.new_session(workspace)
    session.subscribe(recorder)
    assert await session.prompt("what is two and two?") == "end_turn"
    thought_ids = {e.message_id for e in recorder.of("thought_chunk")}
    answer_ids = {e.message_id for e in recorder.of("message_chunk")}
    assert len(thought_ids) == 1 and len(answer_ids) == 1
    assert thought_ids.isdisjoint(answer_ids)
    # A loaded session replays them under the same, still distinct, ids.
    sid = session.id
    await manager.aclose()
    other = SessionManager(paths=resolve_paths(), settings=settings_getter)
    try:
        _, events = await other.load_session(sid)
    finally:
        await other.aclose()
    assert {e.message_id for e in events if e.type == "thought_chunk"} == thought_ids
    assert {e.message_id for e in events if e.type == "message_chunk"} == answer_ids
