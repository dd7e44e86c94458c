"""Tools on the local host: confinement, edits with diffs, commands, search."""

from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from clio_acp.agent.tools import (
    LocalToolHost,
    ToolContext,
    ToolInputError,
    ToolRegistry,
    Workspace,
    WorkspaceError,
)
from tests.support.waiting import process_gone, read_pid, wait_until


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


def ctx_for(ws, **kw):
    return ToolContext(workspace=Workspace.create(ws), host=LocalToolHost(), session_id="s", **kw)


async def call(ws, name, **args):
    reg = ToolRegistry()
    parsed = reg.parse_args(name, json.dumps(args))
    return await reg.execute(name, parsed, ctx_for(ws))


def test_workspace_refuses_parent_escape_and_symlinked_folder(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "door").symlink_to(outside)
    workspace = Workspace.create(ws)
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        workspace.resolve("../outside/x")
    with pytest.raises(WorkspaceError, match="symlink"):
        workspace.resolve("door/new-file.txt")
    assert workspace.resolve("sub/new.txt") == ws / "sub" / "new.txt"


def test_extra_roots_are_allowed(ws, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    workspace = Workspace.create(ws, [extra])
    assert workspace.resolve(str(extra / "a.txt")) == extra / "a.txt"


async def test_edit_file_replaces_exact_text_and_returns_unified_diff(ws):
    (ws / "m.py").write_text("a = 1\nb = 2\n")
    result = await call(ws, "edit_file", path="m.py", old_text="b = 2", new_text="b = 3")
    assert result.disposition.ok
    assert "-b = 2" in result.diff and "+b = 3" in result.diff and "a/m.py" in result.diff
    assert (ws / "m.py").read_text() == "a = 1\nb = 3\n"


async def test_edit_file_refuses_ambiguous_or_missing_text(ws):
    (ws / "m.py").write_text("x\nx\n")
    ambiguous = await call(ws, "edit_file", path="m.py", old_text="x", new_text="y")
    missing = await call(ws, "edit_file", path="m.py", old_text="zzz", new_text="y")
    assert not ambiguous.disposition.ok and "2 times" in ambiguous.output
    assert not missing.disposition.ok and "not found" in missing.output
    assert (ws / "m.py").read_text() == "x\nx\n"


async def test_read_file_line_range(ws):
    (ws / "f.txt").write_text("".join(f"{i}\n" for i in range(1, 11)))
    result = await call(ws, "read_file", path="f.txt", start_line=3, end_line=5)
    assert result.output == "3\n4\n5\n"


async def test_run_command_reports_exit_code_streams_and_digest(ws):
    result = await call(
        ws, "run_command", command="echo out; echo 'fatal: broken thing' >&2; exit 3"
    )
    assert not result.disposition.ok
    assert result.disposition.exit_code == 3
    assert result.disposition.digest == "exit 3: fatal: broken thing"
    assert "[stdout]\nout" in result.output and "[stderr]\nfatal: broken thing" in result.output


async def test_run_command_runs_in_workspace_and_times_out(ws):
    ok = await call(ws, "run_command", command="pwd")
    assert ok.disposition.ok and str(ws) in ok.output
    slow = await call(ws, "run_command", command="sleep 5", timeout_ms=200)
    assert not slow.disposition.ok and "timed out" in slow.output


async def test_grep_and_glob_find_files(ws):
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("def alpha():\n    return 1\n")
    (ws / "src" / "b.txt").write_text("alpha beta\n")
    grep = await call(ws, "grep", pattern="alpha", glob="*.py")
    assert grep.output.strip() == "src/a.py:1:def alpha():"
    glob = await call(ws, "glob", pattern="**/*.py")
    assert glob.output.strip() == "src/a.py"


def test_bad_arguments_are_reported_not_raised_later(ws):
    reg = ToolRegistry()
    with pytest.raises(ToolInputError, match="path"):
        reg.parse_args("read_file", "{}")
    with pytest.raises(ToolInputError, match="unknown tool"):
        reg.parse_args("nope", "{}")


async def test_cancelling_a_command_task_kills_its_whole_process_group_promptly(ws):
    # The shell starts a grandchild and waits for it: only a kill of the process group
    # (not of the shell alone, and not the task's cancellation by itself) ends it.
    reg = ToolRegistry()
    command = "sleep 30 & echo $! > child.pid; wait"
    parsed = reg.parse_args("run_command", json.dumps({"command": command}))
    task = asyncio.create_task(reg.execute("run_command", parsed, ctx_for(ws)))
    child = await wait_until(lambda: read_pid(ws / "child.pid"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    await wait_until(lambda: process_gone(child), timeout_s=5)


async def test_write_never_goes_through_a_hard_link_to_a_file_outside(ws, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    os.link(outside, ws / "linked.txt")
    written = await call(ws, "write_file", path="linked.txt", content="new\n")
    edited = await call(ws, "edit_file", path="linked.txt", old_text="new", new_text="newer")
    assert written.disposition.ok and edited.disposition.ok
    assert outside.read_text() == "keep me\n"
    assert (ws / "linked.txt").read_text() == "newer\n"
    assert os.stat(ws / "linked.txt").st_nlink == 1


async def test_write_keeps_permission_bits_and_leaves_no_temp_file(ws):
    script = ws / "run.sh"
    script.write_text("echo a\n")
    script.chmod(0o750)
    assert (await call(ws, "write_file", path="run.sh", content="echo b\n")).disposition.ok
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert sorted(p.name for p in ws.iterdir()) == ["run.sh"]
