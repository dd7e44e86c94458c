"""CLI polish from the walkthrough (issue 20 item 7): ``--log-level`` after the
command, a closed stdout pipe, ``sessions`` with none, ``events`` for people, and the
approval preview of ask mode. Logging, the closed pipe and the terminal run as real
processes; what ``sessions`` and ``events`` print runs in process (``invoke_cli``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from clio_acp.cli.approval import PREVIEW_LINES, approval_preview
from clio_acp.cli.session_cmd import _summary
from tests.conftest import subprocess_env
from tests.support.model_server import Reply, ToolCall


def test_log_level_is_accepted_after_the_command(run_cli, invoke_cli):
    # Zed: args ["acp", "--log-level", "INFO"]; at end of input acp exits 0.
    after = run_cli("acp", "--log-level", "DEBUG", input="")
    assert after.returncode == 0, after.stderr
    assert " DEBUG " in after.stderr  # the level took effect
    quiet = run_cli("acp", input="")
    assert " DEBUG " not in quiet.stderr
    # Parsing only: in process.
    nested = invoke_cli("local", "status", "--log-level", "info")
    assert nested.returncode != 2 and "unrecognized arguments" not in nested.stderr
    bad = invoke_cli("paths", "--log-level", "loud")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_a_closed_stdout_pipe_ends_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (`| head`) is already gone
    try:
        done = subprocess.run(
            [sys.executable, "-m", "clio_acp", "paths"],
            stdout=write_end, stderr=subprocess.PIPE, env=subprocess_env(), timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert b"Traceback" not in done.stderr and b"Exception ignored" not in done.stderr


def test_sessions_says_when_there_are_none(invoke_cli):
    result = invoke_cli("sessions")
    assert result.returncode == 0 and result.stdout == ""
    assert "no sessions yet" in result.stderr


def test_events_render_rows_for_people(invoke_cli, model_server, tmp_path):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="hello"))
    assert invoke_cli("run", "--workspace", str(tmp_path), "hi").returncode == 0
    sid = json.loads(invoke_cli("sessions", "--json").stdout)["sessions"][0]["id"]
    text = invoke_cli("events", sid).stdout
    assert " prompt " in text and "hello" in text and "{" not in text
    none = invoke_cli("events", sid, "--type", "compaction")
    assert none.stdout == "" and "no matching events" in none.stderr


def test_the_approval_preview_shows_the_command_or_the_diff(tmp_path):
    assert approval_preview("run_command", {"command": "pytest -q\nls"}, tmp_path) == (
        "$ pytest -q\n$ ls"
    )
    edit = approval_preview(
        "edit_file", {"path": "a.py", "old_text": "x = 1\n", "new_text": "x = 2\n"}, tmp_path
    )
    assert "--- a/a.py" in edit and "-x = 1" in edit and "+x = 2" in edit
    (tmp_path / "b.txt").write_text("old line\n")
    write = approval_preview("write_file", {"path": "b.txt", "content": "new line\n"}, tmp_path)
    assert "-old line" in write and "+new line" in write
    outside = approval_preview("write_file", {"path": "../../etc/passwd", "content": "x"}, tmp_path)
    assert "root:" not in outside  # nothing read outside the workspace
    big = approval_preview("write_file", {"path": "c.txt", "content": "l\n" * 500}, tmp_path)
    assert len(big.splitlines()) == PREVIEW_LINES + 1 and big.endswith("more line(s)")
    assert approval_preview("read_file", {"path": "a.py"}, tmp_path) == ""


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_ask_mode_on_a_terminal_shows_the_diff_before_asking(model_server, tmp_path):
    model_server.install_settings(memory=False)
    (tmp_path / "notes.txt").write_text("draft\n")
    args = json.dumps({"path": "notes.txt", "content": "final\n"})
    model_server.push(Reply(tool_calls=[ToolCall("write_file", args, id="w1")]), Reply(text="ok"))
    controller, terminal = os.openpty()
    try:
        os.write(controller, b"n\n")  # the answer waits in the terminal's input
        done = subprocess.run(
            [sys.executable, "-m", "clio_acp", "run", "--workspace", str(tmp_path), "finish it"],
            stdin=terminal, capture_output=True, text=True, env=subprocess_env(), timeout=120,
        )  # fmt: skip
    finally:
        os.close(controller)
        os.close(terminal)
    assert done.returncode == 0, done.stderr
    before_question = done.stderr.split("Allow ")[0]
    assert "-draft" in before_question and "+final" in before_question
    assert (tmp_path / "notes.txt").read_text() == "draft\n"  # answered no


def test_memory_steps_and_other_rows_render_without_json():
    step = SimpleNamespace(
        type="memory_step",
        data={"tier": "rules", "decision": "remind", "reason": "repeated_failure",
              "triggerReasons": ["tool_failure"], "citedEntries": ["k1"], "latencyMs": 3.2},
    )  # fmt: skip
    text = _summary(step)
    assert text == "rules tier remind (repeated_failure) triggers: tool_failure cites k1 3 ms"
    other = SimpleNamespace(
        type="future_row", data={"name": "x", "sizes": [1, 2], "usage": {"input": 3}, "n": None}
    )
    rendered = _summary(other)
    assert rendered == "name: x · sizes: 2 item(s) · usage: input 3"
    assert "{" not in rendered and "[" not in rendered
