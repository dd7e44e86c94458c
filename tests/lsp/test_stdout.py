"""stdout carries protocol messages only (issue 8 item 7, ARCHITECTURE invariant 7).

The server runs with DEBUG logging (pygls logs every message body) through a whole
session: initialize, a turn that runs a command printing to its stdout, shutdown, exit.
Every byte the server wrote to stdout must belong to a well-framed LSP message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import JsonRPCProtocol, default_converter
from pytest_lsp import client_capabilities

from tests.conftest import subprocess_env
from tests.support.model_server import Reply, ToolCall


class _Buffer:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass


def _framed(messages: list[tuple[str, Any, Any]]) -> bytes:
    """Client messages framed by pygls itself: (method, params, id or None)."""
    protocol = JsonRPCProtocol(None, default_converter())  # type: ignore[arg-type]
    buffer = _Buffer()
    protocol.set_writer(buffer)
    for method, params, msg_id in messages:
        body = {"jsonrpc": "2.0", "method": method, "params": params}
        if msg_id is not None:
            body["id"] = msg_id
        protocol._send_data(body)
    return buffer.data


def _strict_messages(stream: bytes) -> list[dict]:
    """Split ``stream`` into LSP messages; fail on any byte outside a frame."""
    messages = []
    while stream:
        head, sep, rest = stream.partition(b"\r\n\r\n")
        assert sep, f"trailing bytes outside a frame: {stream[:80]!r}"
        headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n"))
        assert set(headers) <= {b"Content-Length", b"Content-Type"}, head
        length = int(headers[b"Content-Length"])
        messages.append(json.loads(rest[:length]))
        stream = rest[length:]
    return messages


def _framed_replies(requests: list[dict]) -> bytes:
    """An editor's empty answer to each server request: no settings for each
    ``workspace/configuration`` item, ``null`` otherwise (pygls frames them)."""
    protocol = JsonRPCProtocol(None, default_converter())  # type: ignore[arg-type]
    buffer = _Buffer()
    protocol.set_writer(buffer)
    for request in requests:
        result = None
        if request["method"] == types.WORKSPACE_CONFIGURATION:
            result = [None for _ in request["params"]["items"]]
        protocol._send_data({"jsonrpc": "2.0", "id": request["id"], "result": result})
    return buffer.data


def _whole_frames(stream: bytes) -> list[dict]:
    """The messages of the complete frames at the start of ``stream`` (no checks: the
    test checks the whole stream with ``_strict_messages`` at the end)."""
    messages = []
    while b"\r\n\r\n" in stream:
        head, _, rest = stream.partition(b"\r\n\r\n")
        headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n"))
        length = int(headers[b"Content-Length"])
        if len(rest) < length:
            break
        messages.append(json.loads(rest[:length]))
        stream = rest[length:]
    return messages


def test_stdout_holds_only_framed_protocol_messages(tmp_path: Path, model_server):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model_server.install_settings(memory=False)
    command = "echo to-my-stdout; echo to-my-stderr >&2; python3 -c \"print('py out')\""
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": command}), id="r")]),
        Reply(text="done"),
    )
    caps = default_converter().unstructure(client_capabilities("neovim"))
    stdin = _framed(
        [
            (
                "initialize",
                {
                    "processId": None,
                    "rootUri": workspace.as_uri(),
                    "capabilities": caps,
                    "initializationOptions": {"permissionMode": "bypass"},
                },
                1,
            ),
            ("initialized", {}, None),
            (
                types.WORKSPACE_EXECUTE_COMMAND,
                {"command": "clio.prompt", "arguments": ["run it"]},
                2,
            ),
        ]
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "clio_acp", "--log-level", "DEBUG", "lsp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
        cwd=workspace,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdin)
    proc.stdin.flush()
    # Answer the server's requests (configuration pull, progress token) as an editor
    # does, and wait for the prompt's answer (id 2) before shutting down.
    seen, answered = b"", 0
    while not any(m.get("id") == 2 and "method" not in m for m in _whole_frames(seen)):
        chunk = proc.stdout.read1(65536)
        assert chunk, "server closed stdout early"
        seen += chunk
        asked = [m for m in _whole_frames(seen) if "method" in m and "id" in m]
        proc.stdin.write(_framed_replies(asked[answered:]))
        proc.stdin.flush()
        answered = len(asked)
    proc.stdin.write(_framed([("shutdown", None, 3), ("exit", None, None)]))
    proc.stdin.flush()
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    messages = _strict_messages(seen + rest)
    answers = {m["id"]: m for m in messages if "id" in m and "method" not in m}
    assert answers[2]["result"]["stopReason"] == "end_turn"
    assert answers[3]["result"] is None
    assert b"to-my-stdout" not in seen + rest or any(
        "to-my-stdout" in json.dumps(m) for m in messages
    )
    assert b"Sending data" in err  # DEBUG logging was on, and went to stderr


def test_stray_writes_to_fd_1_land_on_stderr(tmp_path: Path):
    """A print (or any write to fd 1) inside the server goes to stderr, not stdout."""
    code = (
        "import os, sys\n"
        "from clio_acp.lsp.stdio import claim_stdout\n"
        "out = claim_stdout()\n"
        "print('stray print')\n"
        "os.write(1, b'stray fd write\\n')\n"
        "out.write(b'protocol'); out.flush()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=subprocess_env(), timeout=60
    )
    assert proc.stdout == b"protocol"
    assert b"stray print" in proc.stderr and b"stray fd write" in proc.stderr
