"""``clio-acp lsp`` answers ``initialize`` before importing the core (issue 18 part 1).

A child process runs the real server (``lsp.stdio.serve`` on ``SERVER``) over pipes
and looks at its own ``sys.modules`` once ``initialize`` is answered, then again after
``initialized`` (the first use: options, settings, pending proposals). Speed itself is
measured by ``bench/startup.py``, never here.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import subprocess_env

DEFERRED = (
    "pydantic",
    "httpx",
    "sqlite3",
    "yaml",
    "platformdirs",
    "clio_acp.settings",
    "clio_acp.lsp.session_face",
    "clio_acp.lsp.options",
    "clio_acp.session.commands",
    "clio_acp.session.manager",
    "clio_acp.memory",
    "clio_acp.memory.middleware",
    "clio_acp.agent",
    "clio_acp.models",
)
"""Modules answering ``initialize`` must not load."""

_PROBE = r"""
import asyncio, json, os, sys, threading

from clio_acp.lsp.server import SERVER
from clio_acp.lsp.stdio import serve

WATCHED = json.loads(sys.argv[1])
in_r, in_w = os.pipe()
out_r, out_w = os.pipe()
answers = os.fdopen(out_r, "rb")
report = {}


def send(message):
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    os.write(in_w, b"Content-Length: %d\r\n\r\n" % len(body) + body)


def answer(request_id):
    while True:
        length = 0
        while (line := answers.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        message = json.loads(answers.read(length))
        if message.get("id") == request_id:
            return message


def loaded():
    return [name for name in WATCHED if name in sys.modules]


def client():
    options = {"progress": False, "diagnostics": {"severity": "hint"}}
    params = {"processId": None, "rootUri": None, "capabilities": {},
              "initializationOptions": options}
    send({"id": 1, "method": "initialize", "params": params})
    report["capabilities"] = "capabilities" in answer(1)["result"]
    report["at_initialize"] = loaded()
    send({"method": "initialized", "params": {}})
    send({"id": 2, "method": "workspace/executeCommand",
          "params": {"command": "clio.usage", "arguments": []}})
    report["usage"] = sorted(answer(2).get("result") or {})
    report["after_first_command"] = loaded()
    report["options"] = [SERVER.options.progress, SERVER.options.diagnostics.severity]
    send({"id": 3, "method": "shutdown"})
    answer(3)
    send({"method": "exit"})


thread = threading.Thread(target=client)
thread.start()
report["exit_code"] = asyncio.run(serve(SERVER, in_r, os.fdopen(out_w, "wb")))
thread.join()
print(json.dumps(report))
"""


def test_initialize_is_answered_before_the_core_is_imported(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(DEFERRED)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["capabilities"]
    assert report["at_initialize"] == []
    # First use loads what was deferred, and the options initialize carried are in force.
    assert {"pydantic", "clio_acp.settings", "clio_acp.lsp.session_face"} <= set(
        report["after_first_command"]
    )
    assert report["usage"] == ["memory", "session", "sessionId"]
    assert report["options"] == [False, "hint"]
    assert report["exit_code"] == 0
