"""``clio-acp run`` / ``events`` / ``sessions`` against the scripted model server, run
in process (``invoke_cli``); the embedded-model fallback runs as a real subprocess
(it starts a server process of its own)."""

from __future__ import annotations

import json

import pytest

from tests.support.model_server import Reply, ToolCall


def test_run_prints_answer_and_tool_calls_then_events_show_the_journal(
    invoke_cli, model_server, tmp_path
):
    model_server.install_settings(memory=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hi there\n")
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", json.dumps({"path": "hello.txt"}), id="c1")]),
        Reply(text="The file greets you."),
    )
    result = invoke_cli("run", "--workspace", str(ws), "what does hello.txt say?")
    assert result.returncode == 0, result.stderr
    assert "→ Read hello.txt" in result.stdout
    assert "The file greets you." in result.stdout
    assert "[stop: end_turn]" in result.stdout

    listed = invoke_cli("sessions", "--json")
    sessions = json.loads(listed.stdout)["sessions"]
    assert len(sessions) == 1 and sessions[0]["title"] == "what does hello.txt say?"
    sid = sessions[0]["id"]

    events = invoke_cli("events", sid, "--json")
    rows = [json.loads(line) for line in events.stdout.splitlines()]
    assert [r["type"] for r in rows] == [
        "prompt",
        "assistant",
        "tool_call",
        "tool_result",
        "assistant",
        "memory_step",  # the rules tier's turn-end decision (content-free)
        "turn_ended",
    ]
    filtered = invoke_cli("events", sid[:12], "--type", "tool_result", "--type", "prompt")
    assert filtered.returncode == 0
    assert len(filtered.stdout.splitlines()) == 2


def test_run_in_ask_mode_without_terminal_denies_and_says_so(invoke_cli, model_server, tmp_path):
    model_server.install_settings(memory=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    model_server.push(
        Reply(
            tool_calls=[
                ToolCall("write_file", json.dumps({"path": "x.txt", "content": "x"}), id="w")
            ]
        ),
        Reply(text="could not write"),
    )
    result = invoke_cli("run", "--workspace", str(ws), "--json", "write x.txt")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    finished = [e for e in events if e["type"] == "tool_call_finished"]
    assert finished[0]["status"] == "failed" and "ask mode" in finished[0]["output"]
    notices = [e for e in events if e["type"] == "notice"]
    assert any("nobody can be asked" in n["text"] for n in notices)
    assert not (ws / "x.txt").exists()
    tool_msg = model_server.bodies[1]["messages"][-1]
    assert tool_msg["role"] == "tool" and "refused" in tool_msg["content"]


def test_run_with_bypass_writes_and_reports_model_errors(invoke_cli, model_server, tmp_path):
    model_server.install_settings(memory=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    model_server.push(
        Reply(
            tool_calls=[
                ToolCall("write_file", json.dumps({"path": "x.txt", "content": "x"}), id="w")
            ]
        ),
        Reply(status=400, error="bad request from test"),
    )
    result = invoke_cli("run", "-w", str(ws), "--mode", "bypass", "write x.txt")
    assert (ws / "x.txt").read_text() == "x"
    assert result.returncode == 1
    assert "[error] Model request failed" in result.stdout


def test_run_ends_a_looping_answer_and_says_why(invoke_cli, model_server, tmp_path):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text=["Here:\n"] + ["- checkout-1.2\n"] * 400))
    result = invoke_cli("run", "--workspace", str(tmp_path), "list files")
    assert result.returncode == 0, result.stderr
    assert "[warning] Answer stopped: the model kept repeating the same line" in result.stdout
    assert result.stdout.count("checkout-1.2") < 12
    assert "[stop: end_turn]" in result.stdout


def test_run_prints_the_first_lines_of_a_tool_result(invoke_cli, model_server, tmp_path):
    model_server.install_settings(memory=False)
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("x\n")
    model_server.push(Reply(tool_calls=[ToolCall("list_dir", "{}", id="c1")]), Reply(text="ok"))
    result = invoke_cli("run", "--workspace", str(tmp_path), "list files")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  ✓"))
    assert [line.strip(" ✓") for line in lines[at : at + 3]] == ["a.txt", "b.txt", "c.txt"]


def test_a_cut_tool_result_names_the_session_to_read_the_rest(invoke_cli, model_server, tmp_path):
    # The hint used to read "clio-acp events <session> --type tool_result", which names
    # no session and prints the result cut to one line; the command it gives now works.
    model_server.install_settings(memory=False)
    for n in range(20):
        (tmp_path / f"f{n:02}.txt").write_text("x\n")
    model_server.push(Reply(tool_calls=[ToolCall("list_dir", "{}", id="c1")]), Reply(text="ok"))
    result = invoke_cli("run", "--workspace", str(tmp_path), "list files")
    assert result.returncode == 0, result.stderr
    sid = json.loads(invoke_cli("sessions", "--json").stdout)["sessions"][0]["id"]
    hint = next(line for line in result.stdout.splitlines() if "more line(s)" in line)
    command = hint.split("more line(s): ", 1)[1].split()
    assert command[:3] == ["clio-acp", "events", sid]
    shown = invoke_cli(*command[1:])
    assert shown.returncode == 0 and "f19.txt" in json.loads(shown.stdout)["data"]["output"]


def test_the_first_turn_says_when_chat_fell_to_the_embedded_model(run_cli, tmp_path):
    from clio_acp.models.local import server_version

    if server_version() is None:
        pytest.skip("xllamacpp (the local extra) is not installed")
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 60)  # installed as far as routing can tell
    result = run_cli(
        "run", "--workspace", str(tmp_path), "hi",
        env={"CLIO_ACP_LOCAL_MODEL": str(fake)}, timeout=180,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    said = [line for line in lines if line.startswith("[info] Chat runs on the embedded model")]
    assert len(said) == 1 and "no chat target is configured" in said[0]
    assert lines.index(said[0]) < next(i for i, ln in enumerate(lines) if ln.startswith("[stop"))


def test_a_configured_chat_route_is_not_announced(invoke_cli, model_server, tmp_path):
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="hello"))
    result = invoke_cli("run", "--workspace", str(tmp_path), "hi")
    assert result.returncode == 0, result.stderr
    assert "Chat runs on" not in result.stdout
