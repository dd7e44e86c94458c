"""The memory middleware inside the loop (MEMORY_SPEC §4, §12 item 4): a blind retry
is annotated on the tool result the model reads next; the fifth repeat stops the turn."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from clio_acp.paths import resolve_paths
from clio_acp.session import manager as manager_module
from clio_acp.session.manager import SessionManager
from clio_acp.settings import load_settings
from tests.support.model_server import Reply, ToolCall
from tests.support.waiting import wait_until


@pytest.fixture
async def rules_manager(model_server):
    # Memory on, rules tier only (no memory target): no model call for memory.
    model_server.install_settings(memory=False)
    settings = load_settings(resolve_paths().settings_file)
    assert settings.context.memory.enabled
    mgr = SessionManager(paths=resolve_paths(), settings=lambda: settings, delivers_reminders=True)
    yield mgr
    await mgr.aclose()


def _fail_call(i: int) -> Reply:
    args = json.dumps(
        {"command": "python3 -c \"raise SystemExit('Error: config.yaml not found')\""}
    )
    return Reply(tool_calls=[ToolCall("run_command", args, id=f"f{i}")])


async def test_command_failing_twice_is_annotated_and_the_next_request_contains_it(
    rules_manager, workspace, model_server, recorder
):
    model_server.push(_fail_call(1), _fail_call(2), Reply(text="I will check the config path."))
    session = await rules_manager.new_session(workspace, mode="bypass")
    session.subscribe(recorder)
    assert await session.prompt("run the tool") == "end_turn"
    finished = recorder.of("tool_call_finished")
    assert finished[0].annotation is None
    assert finished[1].annotation and finished[1].annotation.startswith("Memory:")
    assert "config.yaml not found" in finished[1].annotation
    third = model_server.bodies[2]["messages"]
    assert third[-1]["role"] == "tool" and third[-1]["tool_call_id"] == "f2"
    assert finished[1].annotation in third[-1]["content"]
    second = model_server.bodies[1]["messages"]
    assert "Memory:" not in second[-1]["content"]
    reminders = recorder.of("memory_reminder")
    assert [r.channel for r in reminders] == ["annotation"]


async def test_fifth_identical_failure_stops_the_turn_with_a_notice(
    rules_manager, workspace, model_server, recorder
):
    model_server.push(*[_fail_call(i) for i in range(1, 8)], Reply(text="never"))
    session = await rules_manager.new_session(workspace, mode="bypass")
    session.subscribe(recorder)
    stop = await session.prompt("keep trying")
    assert stop == "end_turn"
    assert len(recorder.of("tool_call_finished")) == 5
    assert len(model_server.bodies) == 5
    notices = [n for n in recorder.of("notice") if n.level == "warning"]
    assert notices, "the loop guard must say why the turn ended"


async def test_workspace_change_between_failures_means_no_blind_retry(
    rules_manager, workspace, model_server, recorder, monkeypatch
):
    # The user edits a file in the editor between the two runs, after the watcher's
    # grace period for the agent's own tool; the second request is held until the
    # watcher has told memory about it.
    monkeypatch.setattr(manager_module, "WATCH_GRACE_S", 0.5)
    second_request = threading.Event()
    edited = threading.Event()
    state = {"n": 0}

    def responder(body):
        state["n"] += 1
        if state["n"] == 1:
            return _fail_call(1)
        if state["n"] == 2:
            second_request.set()
            assert edited.wait(timeout=30), "the test never made its edit"
            return _fail_call(2)
        return Reply(text="done")

    model_server.responder = responder
    session = await rules_manager.new_session(workspace, mode="bypass")
    session.subscribe(recorder)
    turn = asyncio.create_task(session.prompt("run it again after my fix"))
    try:
        await asyncio.wait_for(asyncio.to_thread(second_request.wait), 30)
        epoch = session.memory.counters()["stateEpoch"]
        await wait_until(
            lambda: time.monotonic() - session.loop.last_tool_end > manager_module.WATCH_GRACE_S
        )
        (workspace / "config.yaml").write_text("fixed: true\n")
        await wait_until(lambda: session.memory.counters()["stateEpoch"] > epoch)
    finally:
        edited.set()
    await turn
    finished = recorder.of("tool_call_finished")
    assert len(finished) == 2
    assert finished[1].annotation is None


def _is_memory_request(body) -> bool:
    first = body["messages"][0]["content"] if body.get("messages") else ""
    return not body.get("tools") and "working summary" not in str(first)


async def test_llm_tier_reminder_reaches_the_next_prompt_and_its_entry_is_proposed(
    workspace, model_server, recorder
):
    model_server.install_settings(memory=True)
    settings = load_settings(resolve_paths().settings_file)
    settings.context.memory.cadence_tool_calls = 2
    mgr = SessionManager(paths=resolve_paths(), settings=lambda: settings, delivers_reminders=True)
    (workspace / "a.txt").write_text("a")
    envelope = (
        '<operations>[{"op":"save_knowledge","content":"a.txt holds the letter a"}]</operations>\n'
        "<context_for_action>Memory: [tm-k-1] a.txt was already read; it holds the letter a.</context_for_action>"
    )
    read = json.dumps({"path": "a.txt"})
    model_server.push(
        Reply(text=envelope, when=_is_memory_request),
        Reply(
            tool_calls=[ToolCall("read_file", read, id="r1"), ToolCall("read_file", read, id="r2")],
            when=lambda b: not _is_memory_request(b),
        ),
        Reply(text="read it twice", when=lambda b: not _is_memory_request(b)),
        Reply(text="second turn", when=lambda b: not _is_memory_request(b)),
    )
    try:
        session = await mgr.new_session(workspace, mode="bypass")
        session.subscribe(recorder)
        await session.prompt("read a.txt twice")
        await wait_until(  # the memory step is detached from the turn
            lambda: (
                any(_is_memory_request(b) for b in model_server.bodies)
                and not session.memory.step_in_flight()
            )
        )
        await session.prompt("what next?")
        last = model_server.bodies[-1]["messages"]
        blocks = [
            m["content"]
            for m in last
            if m["role"] == "user" and m["content"].startswith("<system-reminder>")
        ]
        assert blocks and "a.txt was already read" in blocks[-1]
        assert [r.channel for r in recorder.of("memory_reminder")] == ["reminder"]
        # MEMORY_SPEC §6: the cited entry of an LLM-tier injection is auto-proposed.
        await recorder.wait_for("memory_proposal")
        steps = [r.data for r in session.rows() if r.type == "memory_step"]
        assert any(st["tier"] == "llm" and st["decision"] == "injected" for st in steps)
        proposals = recorder.of("memory_proposal")
        assert proposals and proposals[0].content == "a.txt holds the letter a"
        assert proposals[0].scope == "repo" and proposals[0].entry_id == "tm-k-1"
    finally:
        await mgr.aclose()


def _run(command: str, call_id: str) -> Reply:
    return Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": command}), id=call_id)])


async def test_handoff_lists_a_repeatedly_failing_command_as_unresolved(
    rules_manager, workspace, model_server
):
    # MEMORY_SPEC §12.8: the handoff's "Unresolved failures" section lists failures
    # whose latest outcome is still an error; one that later succeeded is resolved.
    still_failing = "python3 -c \"raise SystemExit('Error: config.yaml not found')\""
    fixed_later = "cat marker.txt"
    model_server.push(
        _run(still_failing, "a1"),
        _run(fixed_later, "b1"),
        _run(still_failing, "a2"),
        Reply(
            tool_calls=[
                ToolCall("write_file", json.dumps({"path": "marker.txt", "content": "x"}), id="w1")
            ]
        ),
        _run(fixed_later, "b2"),
        Reply(text="stopping here"),
    )
    session = await rules_manager.new_session(workspace, mode="bypass")
    assert await session.prompt("make the tool find its config") == "end_turn"
    path = await session.handoff()
    text = path.read_text()
    section = text.split("## Unresolved failures", 1)[1].split("\n## ", 1)[0]
    [line] = [x for x in section.splitlines() if x.startswith("- ")]
    assert line.startswith("- python3 -c")  # the command as typed, not canonical JSON
    assert "failed 2 times since step 1" in line
    assert "config.yaml not found" in line
    assert "marker.txt" not in section
    assert "_(none)_" not in section


async def test_first_answer_without_tool_calls_gets_one_completion_check(
    rules_manager, workspace, model_server, recorder
):
    # §13.6: the task states requirements; after some work the model answers
    # without tool calls.
    ls = Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": "ls"}), id="l1")])
    model_server.push(ls, Reply(text="Done."), Reply(text="Checked: both hold."))
    model_server.push(Reply(text="Ok."))
    session = await rules_manager.new_session(workspace, mode="bypass")
    session.subscribe(recorder)
    task = "Rename the flag. You must keep the old flag working. Never touch tests/."
    assert await session.prompt(task) == "end_turn"
    assert len(model_server.bodies) == 3  # the model continued once after "Done."
    third = json.dumps(model_server.bodies[2]["messages"])
    assert "before you finish, check:" in third
    assert "keep the old flag working" in third and "Never touch tests/" in third
    (check,) = [r for r in recorder.of("memory_reminder") if r.trigger == "completion_check"]
    assert len(check.cited_entries) == 2
    # Never twice per task.
    assert await session.prompt("Anything else?") == "end_turn"
    assert len(model_server.bodies) == 4
    assert "before you finish" not in json.dumps(model_server.bodies[3]["messages"][-1])


async def test_no_completion_check_without_requirements_or_without_work(
    rules_manager, workspace, model_server, recorder
):
    model_server.push(Reply(text="Hello!"), Reply(text="It must be short."))
    session = await rules_manager.new_session(workspace, mode="bypass")
    assert await session.prompt("say hello") == "end_turn"
    assert len(model_server.bodies) == 1
    # A question answered with no tool call is not the end of a task.
    assert await session.prompt("Why must it be short? You should explain.") == "end_turn"
    assert len(model_server.bodies) == 2
